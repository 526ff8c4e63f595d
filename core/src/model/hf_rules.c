/* What fsdpc can model (see hf_rules.h): config.json keys and the exact
 * tensor set of a Hugging Face folder. */
#include "model/hf_rules.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/fileio.h"
#include "io/hf_ckpt.h"
#include "model/family.h"

static const cJSON *item(const cJSON *o, const char *k) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static unsigned bit(int family) {
  return 1u << family;
}
#define ALL 0xffffffffu

/* A key that must be absent or null (NONNULL), absent/null/false
 * (TRUE_SET), or absent/null/false/0 (NONZERO) in the families of the mask:
 * a model that uses it would be computed otherwise than by transformers. */
enum { NONNULL, TRUE_SET, NONZERO };
static const struct refusal {
  const char *key;
  unsigned families;
  int kind;
  const char *why;
} refusals[] = {
    {"quantization_config", ALL, NONNULL,
     "fsdpc reads unquantized F32/BF16/F16 weights only (dequantize the model first)"},
    {"attention_dropout", ALL, NONZERO, "fsdpc has no dropout; set it to 0"},
    {"resid_pdrop", 1u << FSDPC_FAMILY_PHI3, NONZERO, "fsdpc has no dropout; set it to 0"},
    {"embd_pdrop", 1u << FSDPC_FAMILY_PHI3, NONZERO, "fsdpc has no dropout; set it to 0"},
    {"sliding_window",
     (1u << FSDPC_FAMILY_LLAMA) | (1u << FSDPC_FAMILY_OLMO2) | (1u << FSDPC_FAMILY_GRANITE),
     NONNULL, "this family's attention is full causal attention"},
    {"num_experts", ALL, NONZERO, "mixture-of-experts layers are not computed"},
    {"num_local_experts", ALL, NONZERO, "mixture-of-experts layers are not computed"},
    {"n_routed_experts", ALL, NONZERO, "mixture-of-experts layers are not computed"},
    {"vision_config", ALL, NONNULL, "vision towers are not computed"},
    {"audio_config", ALL, NONNULL, "audio towers are not computed"},
    {"text_config", ALL, NONNULL, "fsdpc computes text decoders given at the top level"},
    {"cross_attention_layers", ALL, NONNULL, "cross-attention layers are not computed"},
    {"use_mrope", ALL, TRUE_SET, "multimodal RoPE is not computed"},
    {"use_bidirectional_attention", ALL, TRUE_SET, "fsdpc's attention is causal"},
};

static int is_set(const cJSON *v, int kind) {
  if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v))
    return 0;
  if (kind == NONZERO && cJSON_IsNumber(v))
    return v->valuedouble != 0.0;
  if (kind == NONZERO && cJSON_IsArray(v))
    return cJSON_GetArraySize(v) > 0;
  return 1;
}

static fsdpc_status check_refusals(const cJSON *root, const char *label, int family,
                                   fsdpc_err *err) {
  for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
    const struct refusal *r = &refusals[i];
    if (!(r->families & bit(family)) || !is_set(item(root, r->key), r->kind))
      continue;
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: '%s' is set (model_type %s): %s, so this model is refused", label,
                       r->key, fsdpc__family(family)->model_type, r->why);
  }
  return FSDPC_OK;
}

static fsdpc_status check_family(const cJSON *root, const char *label, int *family,
                                 fsdpc_err *err) {
  const cJSON *mt = item(root, "model_type");
  *family = FSDPC_FAMILY_LLAMA;
  if (!mt)
    return FSDPC_OK;
  *family = cJSON_IsString(mt) ? fsdpc__family_by_name(mt->valuestring) : -1;
  if (*family < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model_type '%s' is not supported; fsdpc computes model_type %s "
                       "(docs/model.md)",
                       label, cJSON_IsString(mt) ? mt->valuestring : "(not a string)",
                       fsdpc__family_names());
  return FSDPC_OK;
}

/* Gemma 3's rope_parameters per layer type (transformers >= 5): the
 * full_attention set is checked as any other; the sliding_attention layers
 * turn by plain RoPE (rope_local_base_freq) only. */
static fsdpc_status check_local_rope(const cJSON *root, const char *label, int family,
                                     const cJSON **full, fsdpc_err *err) {
  const cJSON *rp = item(root, "rope_parameters");
  *full = rp;
  if (!cJSON_IsObject(rp) || (!item(rp, "full_attention") && !item(rp, "sliding_attention")))
    return FSDPC_OK;
  if (!(fsdpc__family(family)->reads & FSDPC_READS_LOCAL_ROPE))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: rope_parameters sets RoPE per layer type; fsdpc computes one RoPE for "
                       "every layer of model_type %s (per layer type: gemma3_text)",
                       label, fsdpc__family(family)->model_type);
  const cJSON *sl = item(rp, "sliding_attention"), *t = item(sl, "rope_type");
  if (sl && (!cJSON_IsObject(sl) ||
             (t && !(cJSON_IsString(t) && strcmp(t->valuestring, "default") == 0))))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: rope_parameters.sliding_attention has rope_type '%s'; fsdpc turns "
                       "gemma3_text's sliding_attention layers by plain RoPE (default) only",
                       label, cJSON_IsString(t) ? t->valuestring : "(not a string)");
  *full = item(rp, "full_attention");
  return FSDPC_OK;
}

/* rope_scaling (transformers < 5) or rope_parameters (>= 5): a known
 * rope_type, one set for every layer (Gemma 3: for its full_attention
 * layers, check_local_rope). */
static fsdpc_status check_rope(const cJSON *root, const char *label, int family, fsdpc_err *err) {
  static const char *const known[] = {"default", "llama3", "linear", "dynamic", "yarn", "longrope"};
  const char *rk[] = {"rope_scaling", "rope_parameters"};
  const cJSON *full;
  FSDPC_TRY(check_local_rope(root, label, family, &full, err));
  for (int i = 0; i < 2; i++) {
    const cJSON *r = i == 1 ? full : item(root, rk[i]);
    if (!r || cJSON_IsNull(r))
      continue;
    if (cJSON_IsObject(r) && (item(r, "full_attention") || item(r, "sliding_attention")))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s sets RoPE per layer type; fsdpc computes one RoPE for every "
                         "layer",
                         label, rk[i]);
    const cJSON *t = item(r, "rope_type");
    if (!t)
      t = item(r, "type");
    const char *tn = cJSON_IsString(t) ? t->valuestring : NULL;
    int ok = cJSON_IsObject(r) && (t ? tn != NULL : i == 1);
    for (size_t k = 0; ok && tn && k < sizeof known / sizeof *known; k++)
      if (strcmp(tn, known[k]) == 0)
        tn = NULL; /* known */
    if (!ok || tn)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s type '%s' is not supported; fsdpc supports RoPE types default, "
                         "llama3, linear, dynamic, yarn and longrope",
                         label, rk[i], tn ? tn : "(missing)");
    if (item(r, "mrope_section"))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: '%s.mrope_section' is set: multimodal RoPE is not computed", label,
                         rk[i]);
  }
  /* Only Phi-3's attention turns part of each head; transformers would fail
   * (or compute otherwise) with another family. */
  const cJSON *rp = item(root, "rope_parameters");
  const cJSON *prf = item(root, "partial_rotary_factor");
  if (!prf)
    prf = item(rp, "partial_rotary_factor");
  if (prf && cJSON_IsNumber(prf) && prf->valuedouble != 1.0 && family != FSDPC_FAMILY_PHI3)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: 'partial_rotary_factor' is %g (model_type %s): only phi3's attention "
                       "turns part of each head",
                       label, prf->valuedouble, fsdpc__family(family)->model_type);
  return FSDPC_OK;
}

static fsdpc_status check_layer_types(const cJSON *root, const char *label, fsdpc_err *err) {
  const cJSON *lt = item(root, "layer_types");
  if (!lt || cJSON_IsNull(lt))
    return FSDPC_OK;
  for (const cJSON *e = cJSON_IsArray(lt) ? lt->child : NULL; e; e = e->next)
    if (!cJSON_IsString(e) || (strcmp(e->valuestring, "full_attention") != 0 &&
                               strcmp(e->valuestring, "sliding_attention") != 0))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: layer_types has '%s'; fsdpc computes full_attention and "
                         "sliding_attention layers",
                         label, cJSON_IsString(e) ? e->valuestring : "(not a string)");
  if (!cJSON_IsArray(lt))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: layer_types must be a list", label);
  return FSDPC_OK;
}

fsdpc_status fsdpc__hf_rules_config(const cJSON *root, const char *label, int64_t max_len,
                                    fsdpc_err *err) {
  (void)max_len; /* a sliding window is computed at any length */
  if (!cJSON_IsObject(root))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: expected a JSON object", label);
  int family;
  FSDPC_TRY(check_family(root, label, &family, err));
  /* Gemma reads hidden_activation (family.c), transformers ignores its hidden_act. */
  const cJSON *act =
      fsdpc__family(family)->reads & FSDPC_READS_GEMMA ? NULL : item(root, "hidden_act");
  if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: hidden_act '%s' is not supported; fsdpc's MLP is SwiGLU with silu",
                       label, cJSON_IsString(act) ? act->valuestring : "(not a string)");
  FSDPC_TRY(check_refusals(root, label, family, err));
  FSDPC_TRY(check_rope(root, label, family, err));
  return check_layer_types(root, label, err);
}

fsdpc_status fsdpc__hf_rules_config_file(const char *path, int64_t max_len, fsdpc_err *err) {
  struct stat st;
  char *file = NULL;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    file = fsdpc__path_join(path, "config.json");
  else
    file = strdup(path);
  if (!file)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  char *text = NULL;
  size_t len = 0;
  fsdpc_status s = FSDPC_OK;
  if (fsdpc__read_small_file(file, 64u << 20, &text, &len) != 0) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s", file, strerror(errno));
  } else {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: invalid JSON", file);
    else
      s = fsdpc__hf_rules_config(root, file, max_len, err);
    cJSON_Delete(root);
  }
  free(text);
  free(file);
  return s;
}

int fsdpc__hf_is_folder(const char *dir) {
  struct stat st;
  char *a = fsdpc__path_join(dir, FSDPC_HF_SINGLE_FILE),
       *b = fsdpc__path_join(dir, FSDPC_HF_INDEX_FILE);
  int yes = (a && stat(a, &st) == 0) || (b && stat(b, &st) == 0);
  free(a);
  free(b);
  return yes;
}

/* Buffers that transformers never loads (recomputed from the config). */
static int ignored_tensor(const char *name) {
  const char *suffix = "rotary_emb.inv_freq";
  size_t n = strlen(name), k = strlen(suffix);
  return n >= k && strcmp(name + n - k, suffix) == 0;
}

fsdpc_status fsdpc__hf_rules_tensors(const char *dir, const fsdpc_model_shape *s, fsdpc_err *err) {
  fsdpc_param_info *p = NULL;
  int np = 0;
  FSDPC_TRY(fsdpc__model_params(s, &p, &np, err));
  fsdpc_hf_ckpt *ck = NULL;
  fsdpc_status st = fsdpc__hf_ckpt_open(dir, &ck, err);
  for (int i = 0; st == FSDPC_OK && i < np; i++) {
    if (!fsdpc__hf_ckpt_has(ck, p[i].name)) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: tensor '%s' is missing; fsdpc needs exactly the tensors of "
                       "%s for this config%s",
                       dir, p[i].name, fsdpc__family(s->family)->architecture,
                       p[i].kind == FSDPC_P_HEAD ? " (tie_word_embeddings false needs lm_head)"
                                                 : "");
      break;
    }
    int64_t shape[2] = {p[i].shape[0], p[i].shape[1]};
    st = fsdpc__hf_ckpt_expect(ck, p[i].name, p[i].ndim, shape, err);
    const fsdpc_st_info *info = NULL;
    if (st == FSDPC_OK)
      st = fsdpc__hf_ckpt_find(ck, p[i].name, &info, err);
    if (st == FSDPC_OK && info->dtype != FSDPC_DTYPE_F32 && info->dtype != FSDPC_DTYPE_BF16 &&
        info->dtype != FSDPC_DTYPE_F16)
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: tensor '%s' is %s; fsdpc reads F32, BF16 and F16 weights only", dir,
                       p[i].name, info->dtype_name);
  }
  /* Every tensor in the folder must be one fsdpc computes with: an extra
   * bias (attention_bias, mlp_bias) or head would be silently dropped. */
  uint32_t n = st == FSDPC_OK ? fsdpc__hf_ckpt_count(ck) : 0;
  for (uint32_t i = 0; st == FSDPC_OK && i < n; i++) {
    const char *name = fsdpc__hf_ckpt_name(ck, i);
    int known = ignored_tensor(name);
    for (int j = 0; !known && j < np; j++)
      known = strcmp(p[j].name, name) == 0;
    if (!known)
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: unexpected tensor '%s'; fsdpc computes only %s's tensors for this "
                       "config%s, so this model would be computed wrongly",
                       dir, name, fsdpc__family(s->family)->architecture,
                       s->tied ? " (tie_word_embeddings true has no lm_head)" : "");
  }
  fsdpc__hf_ckpt_close(ck);
  free(p);
  return st;
}

fsdpc_status fsdpc__hf_rules_folder(const char *dir, const fsdpc_model_shape *s, int64_t max_len,
                                    fsdpc_err *err) {
  char *cfg = fsdpc__path_join(dir, "config.json");
  struct stat st;
  fsdpc_status r = FSDPC_OK;
  if (!cfg)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  if (stat(cfg, &st) == 0)
    r = fsdpc__hf_rules_config_file(cfg, max_len, err);
  free(cfg);
  if (r == FSDPC_OK && fsdpc__hf_is_folder(dir))
    r = fsdpc__hf_rules_tensors(dir, s, err);
  return r;
}
