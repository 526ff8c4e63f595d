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

static const cJSON *item(const cJSON *o, const char *k) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

/* A key that must be absent, null or false. */
static fsdpc_status want_false(const cJSON *root, const char *label, const char *key,
                               const char *why, fsdpc_err *err) {
  const cJSON *v = item(root, key);
  if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v))
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: '%s' is set; fsdpc supports only %s false (%s): this model would be "
                     "computed wrongly, so it is refused",
                     label, key, key, why);
}

fsdpc_status fsdpc__hf_rules_config(const cJSON *root, const char *label, int64_t max_len,
                                    fsdpc_err *err) {
  if (!cJSON_IsObject(root))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: expected a JSON object", label);
  const cJSON *mt = item(root, "model_type");
  int mistral = 0;
  if (mt) {
    if (!cJSON_IsString(mt) ||
        (strcmp(mt->valuestring, "llama") != 0 && strcmp(mt->valuestring, "mistral") != 0))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: model_type '%s' is not supported; fsdpc computes model_type "
                         "llama (and mistral without a sliding window inside the sequence)",
                         label, cJSON_IsString(mt) ? mt->valuestring : "(not a string)");
    mistral = strcmp(mt->valuestring, "mistral") == 0;
  }
  const cJSON *act = item(root, "hidden_act");
  if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: hidden_act '%s' is not supported; fsdpc's MLP is SwiGLU with silu",
                       label, cJSON_IsString(act) ? act->valuestring : "(not a string)");
  FSDPC_TRY(
      want_false(root, label, "attention_bias", "fsdpc's q/k/v/o projections have no bias", err));
  FSDPC_TRY(want_false(root, label, "mlp_bias", "fsdpc's MLP projections have no bias", err));
  const cJSON *q = item(root, "quantization_config");
  if (q && !cJSON_IsNull(q))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: 'quantization_config' is set; fsdpc reads unquantized F32/BF16/F16 "
                       "weights only (dequantize the model first)",
                       label);
  const cJSON *drop = item(root, "attention_dropout");
  if (drop && !(cJSON_IsNumber(drop) && drop->valuedouble == 0.0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: attention_dropout must be 0; fsdpc has no dropout", label);
  /* rope_scaling (transformers < 5) or rope_parameters (>= 5). */
  const char *rk[] = {"rope_scaling", "rope_parameters"};
  for (int i = 0; i < 2; i++) {
    const cJSON *r = item(root, rk[i]);
    if (!r || cJSON_IsNull(r))
      continue;
    const cJSON *t = item(r, "rope_type");
    if (!t)
      t = item(r, "type");
    const char *tn = cJSON_IsString(t) ? t->valuestring : NULL;
    if (!cJSON_IsObject(r) ||
        (t && (!tn || (strcmp(tn, "default") != 0 && strcmp(tn, "llama3") != 0))) || (!t && i == 0))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s type '%s' is not supported; fsdpc supports default and llama3 "
                         "RoPE",
                         label, rk[i], tn ? tn : "(missing)");
  }
  const cJSON *sw = item(root, "sliding_window");
  const cJSON *use_sw = item(root, "use_sliding_window");
  if (sw && !cJSON_IsNull(sw) && !cJSON_IsFalse(use_sw)) {
    if (!mistral)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: 'sliding_window' is set; fsdpc's attention is full causal "
                         "attention (model_type llama)",
                         label);
    const cJSON *mp = item(root, "max_position_embeddings");
    /* The longest sequence: the caller's, at most max_position_embeddings. */
    int64_t len = cJSON_IsNumber(mp) ? (int64_t)mp->valuedouble : 0;
    if (max_len > 0 && (len <= 0 || max_len < len))
      len = max_len;
    if (!cJSON_IsNumber(sw) || len <= 0 || sw->valuedouble < (double)len)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: sliding_window %g lies inside the sequence length %lld; fsdpc's "
                         "attention is full causal attention, so it would compute another model "
                         "(use sequences of at most sliding_window tokens)",
                         label, cJSON_IsNumber(sw) ? sw->valuedouble : -1.0, (long long)len);
  }
  return FSDPC_OK;
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
                       "LlamaForCausalLM for this config%s",
                       dir, p[i].name,
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
                       "%s: unexpected tensor '%s'; fsdpc computes only LlamaForCausalLM's "
                       "tensors (no biases%s), so this model would be computed wrongly",
                       dir, name, s->tied ? "; tie_word_embeddings true has no lm_head" : "");
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
