/* What a checkpoint says about the run besides the tensors: the trainer
 * state JSON, the config fingerprint, and a Hugging Face config.json.
 *
 * Bit-exact resume needs the master shards, the optimizer state, the step
 * count (AdamW bias correction, the LR schedule) and the data position;
 * the model has no dropout and training draws no other random numbers, so
 * the seeds are recorded only to detect a changed run. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/state.h"
#include "config/meta.h"
#include "config/schema.h"
#include "model/family.h"
#include "util/escape.h"

static cJSON *num(double v) {
  return cJSON_CreateNumber(v);
}

/* rope_scaling as transformers reads it back (null for plain RoPE). */
static void add_rope(cJSON *o, const fsdpc_model_shape *s) {
  static const char *const names[] = {"default", "llama3", "linear", "dynamic", "yarn", "longrope"};
  const fsdpc_rope *r = &s->rope;
  if (r->type == FSDPC_ROPE_DEFAULT || r->type < 0 || r->type > FSDPC_ROPE_LONGROPE) {
    cJSON_AddNullToObject(o, "rope_scaling");
    return;
  }
  cJSON *j = cJSON_AddObjectToObject(o, "rope_scaling");
  cJSON_AddStringToObject(j, "rope_type", names[r->type]);
  if (r->factor > 0.0)
    cJSON_AddItemToObject(j, "factor", num(r->factor));
  if (r->type == FSDPC_ROPE_LLAMA3) {
    cJSON_AddItemToObject(j, "low_freq_factor", num(r->low_freq_factor));
    cJSON_AddItemToObject(j, "high_freq_factor", num(r->high_freq_factor));
  }
  if (r->original_max_pos > 0)
    cJSON_AddItemToObject(j, "original_max_position_embeddings", num(r->original_max_pos));
  if (r->attention_factor > 0.0)
    cJSON_AddItemToObject(j, "attention_factor", num(r->attention_factor));
  if (r->type == FSDPC_ROPE_YARN) {
    const char *k[] = {"beta_fast", "beta_slow", "mscale", "mscale_all_dim"};
    double v[] = {r->beta_fast, r->beta_slow, r->mscale, r->mscale_all_dim};
    for (int i = 0; i < 4; i++)
      if (v[i] > 0.0)
        cJSON_AddItemToObject(j, k[i], num(v[i]));
    if (!r->truncate)
      cJSON_AddFalseToObject(j, "truncate");
  }
  if (r->type == FSDPC_ROPE_LONGROPE) {
    cJSON_AddItemToObject(j, "short_factor",
                          cJSON_CreateDoubleArray(r->short_factor, r->n_factors));
    cJSON_AddItemToObject(j, "long_factor", cJSON_CreateDoubleArray(r->long_factor, r->n_factors));
  }
}

/* Gemma 2's keys: query_pre_attn_scalar back from the softmax scale (an
 * integer in Gemma2Config), a soft-capping of 0 as null (none). */
static void add_gemma(cJSON *o, const fsdpc_model_shape *s) {
  double scale = fsdpc__model_attn_scale(s), q = 1.0 / (scale * scale);
  cJSON_AddItemToObject(o, "query_pre_attn_scalar",
                        num(fabs(q - round(q)) < 1e-3 * q ? round(q) : q));
  float caps[2] = {s->attn_softcap, s->logit_softcap};
  const char *names[2] = {"attn_logit_softcapping", "final_logit_softcapping"};
  for (int i = 0; i < 2; i++)
    if (caps[i] > 0.0f)
      cJSON_AddItemToObject(o, names[i], num(caps[i]));
    else
      cJSON_AddNullToObject(o, names[i]);
  cJSON_AddStringToObject(o, "hidden_activation", "gelu_pytorch_tanh");
  if (s->window > 0)
    cJSON_AddItemToObject(o, "sliding_window", num(s->window));
  else
    cJSON_AddNullToObject(o, "sliding_window");
  /* the layer types (Gemma 3's also pick the RoPE, with or without a window;
   * Gemma 2's bits are set only with one) */
  cJSON *t = cJSON_AddArrayToObject(o, "layer_types");
  for (int l = 0; l < s->L; l++)
    cJSON_AddItemToArray(
        t, cJSON_CreateString(fsdpc__layer_sliding(s, l) ? "sliding_attention" : "full_attention"));
  if (s->rope_local.dim > 0) /* Gemma3TextConfig's key (rope_theta is the full layers') */
    cJSON_AddItemToObject(o, "rope_local_base_freq", num(s->rope_local.theta));
}

/* The family's own keys, as its config class spells what fsdpc computes. */
static void add_family(cJSON *o, const fsdpc_model_shape *s, const fsdpc_family_info *fi) {
  if (fi->reads & FSDPC_READS_ATTENTION_BIAS)
    cJSON_AddBoolToObject(o, "attention_bias", s->bias_o);
  if (fi->reads & FSDPC_READS_MLP_BIAS)
    cJSON_AddBoolToObject(o, "mlp_bias", s->bias_mlp);
  if (fi->reads & FSDPC_READS_WINDOW) {
    if (s->window > 0)
      cJSON_AddItemToObject(o, "sliding_window", num(s->window));
    else
      cJSON_AddNullToObject(o, "sliding_window");
  }
  if (fi->reads & FSDPC_READS_WINDOW_LAYERS) {
    cJSON_AddBoolToObject(o, "use_sliding_window", s->window > 0);
    if (s->window > 0) {
      cJSON_AddItemToObject(o, "sliding_window", num(s->window));
      cJSON *t = cJSON_AddArrayToObject(o, "layer_types");
      for (int l = 0; l < s->L; l++)
        cJSON_AddItemToArray(t, cJSON_CreateString(fsdpc__layer_window(s, l) ? "sliding_attention"
                                                                             : "full_attention"));
    }
  }
  if (fi->reads & FSDPC_READS_PARTIAL_ROTARY)
    cJSON_AddItemToObject(o, "partial_rotary_factor", num((double)s->rope.dim / s->HD));
  if (fi->reads & FSDPC_READS_GEMMA)
    add_gemma(o, s);
  if (fi->reads & FSDPC_READS_MULTIPLIERS) {
    cJSON_AddItemToObject(o, "embedding_multiplier", num(s->embed_mult));
    cJSON_AddItemToObject(o, "residual_multiplier", num(s->resid_mult));
    cJSON_AddItemToObject(o, "attention_multiplier", num(fsdpc__model_attn_scale(s)));
    cJSON_AddItemToObject(o, "logits_scaling", num(s->logits_div));
  }
}

static cJSON *hf_config_obj(const fsdpc_model_shape *s, int32_t dtype) {
  const fsdpc_family_info *fi = fsdpc__family(s->family);
  if (!fi)
    fi = fsdpc__family(FSDPC_FAMILY_LLAMA);
  cJSON *o = cJSON_CreateObject();
  cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString(fi->architecture));
  cJSON_AddStringToObject(o, "model_type", fi->model_type);
  cJSON_AddItemToObject(o, "vocab_size", num(s->V));
  cJSON_AddItemToObject(o, "hidden_size", num(s->C));
  cJSON_AddItemToObject(o, "intermediate_size", num(s->F));
  cJSON_AddItemToObject(o, "num_hidden_layers", num(s->L));
  cJSON_AddItemToObject(o, "num_attention_heads", num(s->NH));
  cJSON_AddItemToObject(o, "num_key_value_heads", num(s->KVH));
  cJSON_AddItemToObject(o, "head_dim", num(s->HD));
  cJSON_AddItemToObject(o, "max_position_embeddings", num(s->max_pos));
  /* The float as written in the config: %.9g keeps every fp32 bit. */
  char eps[32];
  snprintf(eps, sizeof eps, "%.9g", (double)s->eps);
  cJSON_AddItemToObject(o, "rms_norm_eps", num(strtod(eps, NULL)));
  cJSON_AddItemToObject(o, "rope_theta", num(s->rope.theta));
  add_rope(o, s);
  cJSON_AddBoolToObject(o, "tie_word_embeddings", s->tied);
  if (s->bos_id >= 0)
    cJSON_AddItemToObject(o, "bos_token_id", num(s->bos_id));
  else
    cJSON_AddNullToObject(o, "bos_token_id");
  if (s->eos_id >= 0)
    cJSON_AddItemToObject(o, "eos_token_id", num(s->eos_id));
  else
    cJSON_AddNullToObject(o, "eos_token_id");
  cJSON_AddStringToObject(o, "hidden_act",
                          s->act == FSDPC_ACT_GELU_TANH ? "gelu_pytorch_tanh" : "silu");
  add_family(o, s, fi);
  cJSON_AddItemToObject(o, "attention_dropout", num(0.0));
  cJSON_AddItemToObject(o, "initializer_range", num(0.02));
  if (s->family == FSDPC_FAMILY_LLAMA)
    cJSON_AddItemToObject(o, "pretraining_tp", num(1));
  cJSON_AddBoolToObject(o, "use_cache", 1);
  cJSON_AddStringToObject(o, "torch_dtype", dtype == FSDPC_DTYPE_BF16 ? "bfloat16" : "float32");
  return o;
}

fsdpc_status fsdpc__ckpt_hf_config_json(const fsdpc_model_shape *shape, int32_t dtype, char **out,
                                        fsdpc_err *err) {
  cJSON *o = hf_config_obj(shape, dtype);
  char *text = o ? cJSON_Print(o) : NULL;
  cJSON_Delete(o);
  if (!text)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  size_t n = strlen(text);
  *out = malloc(n + 2);
  if (!*out) {
    cJSON_free(text);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  memcpy(*out, text, n);
  (*out)[n] = '\n';
  (*out)[n + 1] = '\0';
  cJSON_free(text);
  return FSDPC_OK;
}

/* Keys that may change between a save and its resume without changing
 * what the run computes (or that are resharding itself). */
static const char *const resume_free[] = {"train.max_steps",
                                          "train.micro_batch_size",
                                          "train.grad_accum_steps",
                                          "train.threads",
                                          "train.eval_every",
                                          "train.eval_batches",
                                          "train.log_every",
                                          "train.generate_",
                                          "log.",
                                          "checkpoint.",
                                          "collectives.",
                                          "plugins.",
                                          "attention.",
                                          "fsdp.sharding_strategy",
                                          "fsdp.hybrid_shard_size",
                                          "fsdp.wrap.",
                                          "fsdp.align",
                                          "fsdp.forward_prefetch",
                                          "fsdp.backward_prefetch",
                                          "fsdp.max_inflight_allgathers",
                                          "fsdp.activation_checkpointing",
                                          "fsdp.no_sync",
                                          "fsdp.state_dict_type",
                                          "model.init.",
                                          "model.config",
                                          "model.from",
                                          "model.adapter",
                                          "data.train",
                                          "data.eval",
                                          NULL};

char *fsdpc__ckpt_config_text(const fsdpc_config *c) {
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  size_t cap = 4096, len = 0;
  char *out = malloc(cap);
  if (!out)
    return NULL;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    int skip = 0;
    for (int j = 0; resume_free[j]; j++)
      skip |= strncmp(keys[i].path, resume_free[j], strlen(resume_free[j])) == 0;
    /* A resolved-to-itself value (data.seed) is still compared. */
    if (skip)
      continue;
    char v[1024];
    fsdpc__cfg_value_text(c, &keys[i], v, sizeof v);
    size_t need = strlen(keys[i].path) + strlen(v) + 3;
    if (len + need >= cap) {
      cap = 2 * (len + need);
      char *o2 = realloc(out, cap);
      if (!o2) {
        free(out);
        return NULL;
      }
      out = o2;
    }
    len += (size_t)snprintf(out + len, cap - len, "%s=%s\n", keys[i].path, v);
  }
  return out;
}

uint64_t fsdpc__ckpt_hash(const char *text) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  return h;
}

char *fsdpc__ckpt_state_build(const fsdpc_ckpt_state *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", "fsdpc-trainer-state");
  cJSON_AddItemToObject(o, "version", num(1));
  cJSON_AddItemToObject(o, "step", num((double)s->step));
  cJSON_AddBoolToObject(o, "has_optimizer", s->has_optimizer);
  cJSON *ld = cJSON_AddObjectToObject(o, "data_loader");
  cJSON_AddItemToObject(ld, "epoch", num((double)s->loader_epoch));
  cJSON_AddItemToObject(ld, "step", num((double)s->loader_step));
  cJSON_AddItemToObject(ld, "global_batch", num((double)s->global_batch));
  cJSON_AddItemToObject(ld, "seq_len", num((double)s->seq_len));
  cJSON_AddItemToObject(ld, "seed", num((double)s->data_seed));
  cJSON *sc = cJSON_AddObjectToObject(o, "schedule");
  cJSON_AddStringToObject(sc, "name", s->sched_name);
  cJSON_AddItemToObject(sc, "base_lr", num(s->base_lr));
  cJSON_AddItemToObject(sc, "warmup_steps", num((double)s->warmup_steps));
  cJSON_AddItemToObject(sc, "max_steps", num((double)s->max_steps));
  cJSON_AddItemToObject(sc, "min_lr_rate", num(s->min_lr_rate));
  cJSON *rng = cJSON_AddObjectToObject(o, "rng");
  cJSON_AddItemToObject(rng, "init_seed", num((double)s->init_seed));
  cJSON_AddStringToObject(rng, "note", "no random numbers are drawn during training");
  cJSON_AddItemToObject(o, "world_size", num(s->world_size));
  cJSON_AddStringToObject(o, "strategy", s->strategy);
  char hash[24];
  snprintf(hash, sizeof hash, "%016" PRIx64, s->config_hash);
  cJSON_AddStringToObject(o, "config_hash", hash);
  cJSON_AddStringToObject(o, "config", s->config_text ? s->config_text : "");
  cJSON_AddItemToObject(o, "model", hf_config_obj(&s->model, FSDPC_DTYPE_F32));
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  return text; /* cJSON_free-compatible with free() (default hooks) */
}

static int64_t get_i(const cJSON *o, const char *k, int64_t dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}
static double get_d(const cJSON *o, const char *k, double dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

fsdpc_status fsdpc__ckpt_state_parse(const char *json, const char *where, fsdpc_ckpt_state *s,
                                     char **model_json, fsdpc_err *err) {
  memset(s, 0, sizeof *s);
  *model_json = NULL;
  cJSON *o = cJSON_Parse(json);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
  if (!o || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "fsdpc-trainer-state") != 0) {
    cJSON_Delete(o);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: the trainer state is not valid", where);
  }
  s->step = get_i(o, "step", 0);
  const cJSON *ho = cJSON_GetObjectItemCaseSensitive(o, "has_optimizer");
  s->has_optimizer = cJSON_IsTrue(ho);
  const cJSON *ld = cJSON_GetObjectItemCaseSensitive(o, "data_loader");
  s->loader_epoch = get_i(ld, "epoch", -1);
  s->loader_step = get_i(ld, "step", -1);
  s->global_batch = get_i(ld, "global_batch", 0);
  s->seq_len = get_i(ld, "seq_len", 0);
  s->data_seed = get_i(ld, "seed", 0);
  const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "schedule");
  const cJSON *sn = cJSON_GetObjectItemCaseSensitive(sc, "name");
  snprintf(s->sched_name, sizeof s->sched_name, "%s", cJSON_IsString(sn) ? sn->valuestring : "");
  s->base_lr = get_d(sc, "base_lr", 0);
  s->warmup_steps = get_i(sc, "warmup_steps", 0);
  s->max_steps = get_i(sc, "max_steps", 0);
  s->min_lr_rate = get_d(sc, "min_lr_rate", 0);
  s->init_seed = get_i(cJSON_GetObjectItemCaseSensitive(o, "rng"), "init_seed", 0);
  s->world_size = (int)get_i(o, "world_size", 0);
  const cJSON *str = cJSON_GetObjectItemCaseSensitive(o, "strategy");
  snprintf(s->strategy, sizeof s->strategy, "%s", cJSON_IsString(str) ? str->valuestring : "");
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "config_hash");
  if (cJSON_IsString(h))
    s->config_hash = strtoull(h->valuestring, NULL, 16);
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(o, "config");
  s->config_text = cJSON_IsString(ct) ? strdup(ct->valuestring) : NULL;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
  if (m)
    *model_json = cJSON_PrintUnformatted(m);
  cJSON_Delete(o);
  return FSDPC_OK;
}

void fsdpc__ckpt_state_free(fsdpc_ckpt_state *s) {
  free(s->config_text);
  s->config_text = NULL;
}

/* First differing field between two HF config objects, for the message. */
fsdpc_status fsdpc__ckpt_check_model(const fsdpc_model_shape *shape, const char *saved_json,
                                     const char *where, fsdpc_err *err) {
  if (!saved_json)
    return FSDPC_OK;
  cJSON *saved = cJSON_Parse(saved_json), *mine = hf_config_obj(shape, FSDPC_DTYPE_F32);
  fsdpc_status st = FSDPC_OK;
  if (!saved)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: the saved model is not JSON", where);
  for (cJSON *a = mine ? mine->child : NULL; a && st == FSDPC_OK; a = a->next) {
    if (strcmp(a->string, "torch_dtype") == 0)
      continue;
    cJSON *b = cJSON_GetObjectItemCaseSensitive(saved, a->string);
    if (b && cJSON_Compare(a, b, 1))
      continue;
    char *va = cJSON_PrintUnformatted(a), *vb = b ? cJSON_PrintUnformatted(b) : NULL;
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s is for another model: %s is %s there, %s in this run's config", where,
                     a->string, vb ? vb : "missing", va ? va : "?");
    cJSON_free(va);
    cJSON_free(vb);
  }
  cJSON_Delete(saved);
  cJSON_Delete(mine);
  return st;
}

/* The first line of a that differs from b ("key=value"), for a warning. */
/* The line "key=value" of key in text, or NULL; *len gets its length. */
static const char *find_key_line(const char *text, const char *key, size_t klen, size_t *len) {
  for (const char *p = text; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
      *len = l;
      return p;
    }
    p = e ? e + 1 : NULL;
  }
  return NULL;
}

/* Appends "key (saved X, now Y)" to out; values escaped (the saved text
 * comes from a file). */
static void add_diff(char *out, size_t cap, int *n, const char *key, size_t klen, const char *sv,
                     size_t sl, const char *nv, size_t nl) {
  size_t used = strlen(out);
  if (used + 8 >= cap)
    return;
  if (*n >= 8) {
    if (*n == 8)
      snprintf(out + used, cap - used, "; ...");
    (*n)++;
    return;
  }
  char a[160], b[160];
  if (sv)
    fsdpc__escape(a, sizeof a, sv, sl);
  if (nv)
    fsdpc__escape(b, sizeof b, nv, nl);
  snprintf(out + used, cap - used, "%s%.*s (saved %s, now %s)", *n ? "; " : "", (int)klen, key,
           sv ? a : "absent", nv ? b : "absent");
  (*n)++;
}

void fsdpc__ckpt_first_diff(const char *a, const char *b, char *out, size_t cap) {
  /* Every key whose value differs (a: now, b: saved), not only the first:
   * the warning should say what changed. */
  out[0] = '\0';
  if (!a || !b)
    return;
  int n = 0;
  for (const char *p = a; p && *p;) {
    const char *e = strchr(p, '\n'), *eq = strchr(p, '=');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (eq && eq < p + l) {
      size_t kl = (size_t)(eq - p), sl = 0;
      const char *sline = find_key_line(b, p, kl, &sl);
      if (!sline || sl != l || strncmp(sline, p, l) != 0)
        add_diff(out, cap, &n, p, kl, sline ? sline + kl + 1 : NULL, sline ? sl - kl - 1 : 0,
                 eq + 1, l - kl - 1);
    }
    p = e ? e + 1 : NULL;
  }
  for (const char *p = b; p && *p;) {
    const char *e = strchr(p, '\n'), *eq = strchr(p, '=');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    size_t nl = 0;
    if (eq && eq < p + l && !find_key_line(a, p, (size_t)(eq - p), &nl))
      add_diff(out, cap, &n, p, (size_t)(eq - p), eq + 1, l - (size_t)(eq - p) - 1, NULL, 0);
    p = e ? e + 1 : NULL;
  }
}
