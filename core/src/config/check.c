/* The last load stage: model.config, derived defaults, required keys,
 * cross-key checks and the not-implemented rule. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/family.h"
#include "config/meta.h"
#include "quant/nf4.h"

static const fsdpc_key_src *src_of(const fsdpc_config *c, const char *path) {
  int ki;
  if (!fsdpc__cfg_find(path, &ki))
    return NULL;
  return &c->meta->keys[ki];
}

static bool is_set(const fsdpc_config *c, const char *path) {
  const fsdpc_key_src *s = src_of(c, path);
  return s && s->set;
}

/* Where a key got its value, or the file when it has its default. */
static const char *where_of(const fsdpc_config *c, const char *path) {
  const fsdpc_key_src *s = src_of(c, path);
  return s && s->set ? s->where : c->source;
}

/* Where a section was opened in the file, for "missing key" messages. */
static const char *section_where(const fsdpc_config *c, const char *key_path) {
  char section[256];
  snprintf(section, sizeof section, "%s", key_path);
  for (char *dot = strrchr(section, '.'); dot; dot = strrchr(section, '.')) {
    *dot = '\0';
    for (int i = 0; i < c->meta->n_sections; i++) {
      if (strcmp(c->meta->sections[i].path, section) == 0)
        return c->meta->sections[i].where;
    }
  }
  return c->source;
}

static fsdpc_status check_required(const fsdpc_config *c, fsdpc_err *err) {
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++) {
    if (!(keys[i].flags & FSDPC_CFG_REQUIRED) || c->meta->keys[i].set)
      continue;
    if (keys[i].hf && c->model.config[0])
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: missing required key '%s' (not in model.config '%s' either)",
                         section_where(c, keys[i].path), keys[i].path, c->model.config);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: missing required key '%s' (or set model.config to a Hugging Face "
                       "config.json)",
                       section_where(c, keys[i].path), keys[i].path);
  }
  return FSDPC_OK;
}

static fsdpc_status derive(fsdpc_config *c, fsdpc_err *err) {
  fsdpc_config_model *m = &c->model;
  int ki;
  if (!is_set(c, "model.num_key_value_heads")) {
    m->num_key_value_heads = m->num_attention_heads;
    fsdpc__cfg_find("model.num_key_value_heads", &ki);
    c->meta->keys[ki].set = false;
  }
  if (!is_set(c, "model.head_dim")) {
    if (m->hidden_size % m->num_attention_heads != 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: model.hidden_size (%lld) is not divisible by "
                         "model.num_attention_heads (%lld); fix one or set model.head_dim",
                         where_of(c, "model.hidden_size"), (long long)m->hidden_size,
                         (long long)m->num_attention_heads);
    m->head_dim = m->hidden_size / m->num_attention_heads;
  }
  /* The Gemma configs' defaults where they are not Llama's, set here so
   * that a dump of the config says them: tied embeddings (Gemma2Config,
   * Gemma3TextConfig; the Hub's configs leave the key out), and Gemma 3's
   * rope_theta (its full_attention layers') 1e6. */
  const fsdpc_family_info *fi = fsdpc__family(m->model_type);
  if (fi && (fi->reads & FSDPC_READS_GEMMA) && !is_set(c, "model.tie_word_embeddings"))
    m->tie_word_embeddings = true;
  if (fi && (fi->reads & FSDPC_READS_LOCAL_ROPE) && !is_set(c, "model.rope_theta"))
    m->rope_theta = 1000000.0;
  if (c->data.seed == -1)
    c->data.seed = c->train.seed;
  return FSDPC_OK;
}

/* peft.target_modules: PEFT's module names of the family's projections
 * (Phi-3's fused ones are qkv_proj and gate_up_proj). */
static fsdpc_status check_peft(const fsdpc_config *c, fsdpc_err *err) {
  static const char *const split[] = {"q_proj",    "k_proj",  "v_proj",    "o_proj",
                                      "gate_proj", "up_proj", "down_proj", "all-linear"};
  static const char *const fused[] = {"qkv_proj", "o_proj", "gate_up_proj", "down_proj",
                                      "all-linear"};
  const fsdpc_family_info *fi = fsdpc__family(c->model.model_type);
  const int is_fused = fi && fi->fused;
  const char *const *known = is_fused ? fused : split;
  const size_t n_known = is_fused ? sizeof fused / sizeof fused[0] : sizeof split / sizeof split[0];
  const char *names = is_fused ? "qkv_proj, o_proj, gate_up_proj, down_proj or all-linear"
                               : "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj "
                                 "or all-linear";
  const fsdpc_strlist *t = &c->peft.target_modules;
  if (c->peft.method == FSDPC_PEFT_NONE)
    return FSDPC_OK;
  if (t->n == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: peft.target_modules is empty; name the projections that get "
                       "adapters (%s)",
                       where_of(c, "peft.target_modules"), names);
  for (int i = 0; i < t->n; i++) {
    size_t k = 0;
    while (k < n_known && strcmp(known[k], t->items[i]) != 0)
      k++;
    if (k == n_known)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: peft.target_modules: model_type %s has no module '%s'; use %s",
                         where_of(c, "peft.target_modules"), fi ? fi->model_type : "?", t->items[i],
                         names);
    for (int j = 0; j < i; j++)
      if (strcmp(t->items[j], t->items[i]) == 0)
        return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "%s: peft.target_modules: '%s' is listed twice",
                           where_of(c, "peft.target_modules"), t->items[i]);
  }
  return FSDPC_OK;
}

/* quantization: NF4 holds a frozen base, so it needs LoRA; bitsandbytes'
 * block sizes; the dequantized weights feed the run's own GEMMs. */
static fsdpc_status check_quant(const fsdpc_config *c, fsdpc_err *err) {
  const fsdpc_config_quant *q = &c->quantization;
  if (q->method == FSDPC_QUANT_NONE)
    return FSDPC_OK;
  if (c->peft.method != FSDPC_PEFT_LORA)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: quantization.method nf4 freezes a 4-bit base, which only adapters "
                       "can train on; set peft.method: lora (QLoRA) or quantization.method: none",
                       where_of(c, "quantization.method"));
  if (fsdpc__nf4_check_block(q->block_size, err) != FSDPC_OK)
    return fsdpc__err_prefix(err, "%s", where_of(c, "quantization.block_size"));
  int pd = c->fsdp.mixed_precision.param_dtype;
  if (q->compute_dtype >= 0 && pd >= 0 && q->compute_dtype != pd)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: quantization.compute_dtype %s differs from "
                       "fsdp.mixed_precision.param_dtype %s, the dtype the run computes in; set "
                       "it to auto",
                       where_of(c, "quantization.compute_dtype"),
                       q->compute_dtype == FSDPC_DTYPE_BF16 ? "bf16" : "fp32",
                       pd == FSDPC_DTYPE_BF16 ? "bf16" : "fp32");
  return FSDPC_OK;
}

static fsdpc_status cross_checks(const fsdpc_config *c, fsdpc_err *err) {
  const fsdpc_config_model *m = &c->model;
  if (m->num_key_value_heads > m->num_attention_heads ||
      m->num_attention_heads % m->num_key_value_heads != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.num_key_value_heads (%lld) must divide "
                       "model.num_attention_heads (%lld)",
                       where_of(c, "model.num_key_value_heads"), (long long)m->num_key_value_heads,
                       (long long)m->num_attention_heads);
  const fsdpc_config_schedule *s = &c->schedule;
  if (s->warmup_steps > 0 && s->warmup_ratio > 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: schedule.warmup_ratio: set either schedule.warmup_steps or "
                       "schedule.warmup_ratio, not both",
                       where_of(c, "schedule.warmup_ratio"));
  if (s->min_lr > 0 && s->min_lr_ratio > 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: schedule.min_lr_ratio: set either schedule.min_lr or "
                       "schedule.min_lr_ratio, not both",
                       where_of(c, "schedule.min_lr_ratio"));
  if (c->data.eval_fraction > 0 && c->data.eval[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: data.eval_fraction: holds out part of data.train, but data.eval is "
                       "set; use one of them",
                       where_of(c, "data.eval_fraction"));
  if (c->optim.nesterov && c->optim.momentum == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: optim.nesterov: needs optim.momentum > 0",
                       where_of(c, "optim.nesterov"));
  const char *ids[] = {"model.bos_token_id", "model.eos_token_id"};
  const int64_t vals[] = {m->bos_token_id, m->eos_token_id};
  for (int i = 0; i < 2; i++)
    if (vals[i] >= m->vocab_size)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s (%lld) is not a token of the vocabulary (model.vocab_size %lld); "
                         "use an id below it, or -1 for none",
                         where_of(c, ids[i]), ids[i], (long long)vals[i], (long long)m->vocab_size);
  /* NF4's base is 4-bit codes: a merged adapter would be requantized away */
  if (c->model.adapter[0] && c->quantization.method == FSDPC_QUANT_NF4)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "%s: model.adapter merges an adapter into the base weights, which "
                       "quantization.method nf4 holds as 4-bit codes; start from a folder with it "
                       "merged (peft.merge_on_save of the run that trained it, or PEFT's "
                       "merge_and_unload) as model.init.from",
                       where_of(c, "model.adapter"));
  if (c->model.adapter[0] && c->peft.method != FSDPC_PEFT_NONE)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "%s: model.adapter merges an adapter into the weights, which LoRA keeps "
                       "frozen in their compute dtype; train new adapters on a merged folder "
                       "(peft.merge_on_save) instead",
                       where_of(c, "model.adapter"));
  FSDPC_TRY(fsdpc__family_check_config(c, where_of, err));
  FSDPC_TRY(check_quant(c, err));
  return check_peft(c, err);
}

/* A checkpoint.dir that is a file would otherwise fail at the first save,
 * hours in. */
static fsdpc_status check_paths(const fsdpc_config *c, fsdpc_err *err) {
  struct stat sb;
  const char *d = c->checkpoint.dir;
  if (d[0] && stat(d, &sb) == 0 && !S_ISDIR(sb.st_mode))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: checkpoint.dir '%s' exists and is not a folder; name a folder "
                       "(created if missing)",
                       where_of(c, "checkpoint.dir"), d);
  return FSDPC_OK;
}

/* True when `value` is one of the '|'-separated words in list. */
static bool in_list(const char *list, const char *value) {
  size_t vlen = strlen(value);
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, "|");
    if (len == vlen && strncmp(p, value, len) == 0)
      return true;
    p += len;
    if (*p == '|')
      p++;
  }
  return false;
}

/* Refuses non-default values of options this build does not implement yet
 * (schema column `unimpl`), rather than silently ignoring them. */
static fsdpc_status check_implemented(const fsdpc_config *c, fsdpc_err *err) {
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  fsdpc_config *defaults = NULL;
  fsdpc_status st = FSDPC_OK;
  for (int i = 0; i < n && st == FSDPC_OK; i++) {
    const fsdpc_cfg_key *k = &keys[i];
    if (!k->unimpl)
      continue;
    char value[512];
    fsdpc__cfg_value_text(c, k, value, sizeof value);
    bool refused;
    if (strcmp(k->unimpl, "*") == 0) {
      if (!defaults) {
        st = fsdpc__cfg_new_defaults(c->source, &defaults, err);
        if (st != FSDPC_OK)
          break;
      }
      refused = !fsdpc__cfg_row_equal(c, defaults, k);
    } else {
      refused = in_list(k->unimpl, value);
    }
    if (refused)
      st = fsdpc__fail(err, FSDPC_UNSUPPORTED, "%s: %s=%s is not implemented in this build",
                       where_of(c, k->path), k->path, value);
  }
  fsdpc__config_destroy(defaults);
  return st;
}

fsdpc_status fsdpc__cfg_finish(fsdpc_config *c, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__cfg_resolve_model_folder(c, err));
  struct stat sb;
  if (c->model.config[0] && !(c->meta->from_checkpoint && stat(c->model.config, &sb) != 0))
    FSDPC_TRY(fsdpc__cfg_read_hf(c, err));
  FSDPC_TRY(check_required(c, err));
  FSDPC_TRY(derive(c, err));
  if (c->model.init.from[0])
    FSDPC_TRY(fsdpc__cfg_check_weights_shape(c, err));
  FSDPC_TRY(cross_checks(c, err));
  FSDPC_TRY(check_paths(c, err));
  FSDPC_TRY(check_implemented(c, err));
  return FSDPC_OK;
}
