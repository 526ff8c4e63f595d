/* model.config: shape keys from a Hugging Face config.json (cJSON).
 *
 * Only keys still unset after the file and the overrides are taken, so YAML
 * always wins. Each value goes through the same setter as YAML values (same
 * types and ranges); errors name the JSON file and field. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/family.h"
#include "config/meta.h"
#include "util/fs.h"

static char *read_file(const char *path, size_t *len) {
  int fd = fsdpc__open_regular(path, 64u << 20);
  if (fd < 0) {
    if (fd != -1)
      errno = fd == -2 ? EINVAL : EFBIG; /* not a regular file / too large */
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? 2 * cap : 65536;
      char *bigger = realloc(buf, cap);
      if (!bigger) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = bigger;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0)
      break;
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Line and column of byte offset off, for JSON syntax errors. */
static void line_col(const char *text, size_t off, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off && text[i]; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

/* Field "a.b" of root: nested objects. NULL when absent. */
static const cJSON *field(const cJSON *root, const char *path) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  const cJSON *node = root;
  for (char *save = NULL, *part = strtok_r(buf, ".", &save); part && node;
       part = strtok_r(NULL, ".", &save)) {
    if (!cJSON_IsObject(node))
      return NULL;
    node = cJSON_GetObjectItemCaseSensitive(node, part);
  }
  return node;
}

/* JSON value -> the text a YAML scalar would hold. Returns false when the
 * value should be skipped (null, empty list). *bad is set for objects. */
static bool json_text(const cJSON *v, char *buf, size_t cap, bool *bad) {
  *bad = false;
  if (cJSON_IsArray(v)) { /* eos_token_id may list several ids: the first one */
    v = cJSON_GetArrayItem(v, 0);
    if (!v)
      return false;
  }
  if (cJSON_IsNull(v))
    return false;
  if (cJSON_IsBool(v)) {
    snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
  } else if (cJSON_IsNumber(v)) {
    snprintf(buf, cap, "%.17g", v->valuedouble);
  } else if (cJSON_IsString(v)) {
    snprintf(buf, cap, "%s", v->valuestring);
  } else {
    *bad = true;
    return false;
  }
  return true;
}

/* Gemma 3 under transformers >= 5: rope_parameters per layer type, whose
 * values come before the top-level keys (Gemma3TextConfig sets them as
 * defaults): full_attention holds rope_theta and the scaling fields,
 * sliding_attention's rope_theta is rope_local_base_freq. A family without
 * a local RoPE has no such keys (hf_rules.c refuses them). */
static const cJSON *per_layer_type(const cJSON *root, const char *hf, char *alt, size_t cap) {
  if (!field(root, "rope_parameters.full_attention") &&
      !field(root, "rope_parameters.sliding_attention"))
    return NULL;
  if (strcmp(hf, "rope_local_base_freq") == 0)
    snprintf(alt, cap, "rope_parameters.sliding_attention.rope_theta");
  else if (strcmp(hf, "rope_theta") == 0)
    snprintf(alt, cap, "rope_parameters.full_attention.rope_theta");
  else if (strncmp(hf, "rope_scaling.", 13) == 0)
    snprintf(alt, cap, "rope_parameters.full_attention.%s", hf + 13);
  else
    return NULL;
  return field(root, alt);
}

/* The config.json field of schema key hf, *name set to where it was found:
 * older configs say rope_scaling.type where newer ones say rope_type;
 * transformers >= 5 writes rope_theta, partial_rotary_factor and the
 * scaling fields into one rope_parameters object; Phi-3 keeps
 * original_max_position_embeddings at the top level. */
static const cJSON *hf_field(const cJSON *root, const char *hf, char *alt, size_t cap,
                             const char **name) {
  const cJSON *v = per_layer_type(root, hf, alt, cap);
  *name = alt;
  if (v)
    return v;
  v = field(root, hf);
  *name = hf;
  if (v)
    return v;
  if (strcmp(hf, "rope_scaling.rope_type") == 0 && (v = field(root, "rope_scaling.type"))) {
    *name = "rope_scaling.type";
    return v;
  }
  int scaling = strncmp(hf, "rope_scaling.", 13) == 0;
  if (scaling || strcmp(hf, "rope_theta") == 0 || strcmp(hf, "partial_rotary_factor") == 0) {
    snprintf(alt, cap, "rope_parameters.%s", scaling ? hf + 13 : hf);
    if ((v = field(root, alt))) {
      *name = alt;
      return v;
    }
  }
  if (strcmp(hf, "rope_scaling.original_max_position_embeddings") == 0 &&
      (v = field(root, "original_max_position_embeddings")))
    *name = "original_max_position_embeddings";
  return v;
}

/* Sets key i from JSON value v: a list key takes the whole array (JSON is
 * YAML's flow syntax), a scalar key a scalar (the first item of an array:
 * eos_token_id may list several ids). sliding_window null means no window
 * and a null soft-capping none (not the family's default); other nulls
 * leave the default. */
static fsdpc_status set_from_json(fsdpc_cfg_ctx *ctx, int i, const fsdpc_cfg_key *k,
                                  const cJSON *v) {
  if (k->type == FSDPC_CFG_STRINGS && cJSON_IsArray(v)) {
    char *text = cJSON_PrintUnformatted(v);
    if (!text)
      return fsdpc__fail(ctx->err, FSDPC_SYSTEM_ERROR, "out of memory");
    fsdpc_status st = fsdpc__cfg_set_text(ctx, i, text);
    cJSON_free(text);
    return st;
  }
  char value[512];
  bool bad;
  if (cJSON_IsNull(v) && (strcmp(k->hf, "sliding_window") == 0 || strstr(k->hf, "softcapping")))
    return fsdpc__cfg_set_text(ctx, i, "0");
  if (!json_text(v, value, sizeof value, &bad)) {
    if (bad)
      return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE,
                         "%s: %s: expected a single value, got a JSON object", ctx->fixed, k->path);
    return FSDPC_OK;
  }
  /* HF calls plain RoPE "default". */
  if (k->type == FSDPC_CFG_ENUM && strcmp(value, "default") == 0)
    snprintf(value, sizeof value, "none");
  return fsdpc__cfg_set_text(ctx, i, value);
}

fsdpc_status fsdpc__cfg_read_hf(fsdpc_config *c, fsdpc_err *err) {
  char where_cfg[600], path[4096];
  fsdpc__config_where(c, "model.config", where_cfg, sizeof where_cfg);
  struct stat st;
  if (stat(c->model.config, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(path, sizeof path, "%s/config.json", c->model.config);
  else
    snprintf(path, sizeof path, "%s", c->model.config);
  size_t len = 0;
  char *text = read_file(path, &len);
  if (!text)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: model.config: cannot read '%s': %s",
                       where_cfg, path, strerror(errno));
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!root) {
    int line, col;
    const char *at = cJSON_GetErrorPtr();
    line_col(text, at && at >= text && at <= text + len ? (size_t)(at - text) : 0, &line, &col);
    free(text);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d:%d: invalid JSON (model.config)", path,
                       line, col);
  }
  free(text);
  fsdpc_status status = FSDPC_OK;
  if (!cJSON_IsObject(root)) {
    status = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: expected a JSON object of model settings (model.config)", path);
    goto out;
  }
  /* What fsdpc can model is checked by the run plan (runplan/check.c). */
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n && status == FSDPC_OK; i++) {
    const fsdpc_cfg_key *k = &keys[i];
    /* model_type comes first: the family decides which keys it reads (a
     * key of another family is ignored, as transformers ignores it). */
    if (!k->hf || c->meta->keys[i].set || !fsdpc__family_reads_hf(c->model.model_type, k->hf))
      continue;
    const char *name = k->hf;
    char alt[128];
    const cJSON *v = hf_field(root, k->hf, alt, sizeof alt, &name);
    if (!v)
      continue;
    char where[4500];
    snprintf(where, sizeof where, "%s field '%s'", path, name);
    fsdpc_cfg_ctx ctx = {c, path, where, err};
    status = set_from_json(&ctx, i, k, v);
  }
out:
  cJSON_Delete(root);
  return status;
}

/* The keys that decide the tensors' shapes: a value that differs from the
 * weights' config.json would describe another model than the one loaded. */
static const char *const shape_keys[] = {
    "vocab_size",          "hidden_size",         "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim",          "tie_word_embeddings"};

/* Whether config.json's family ties its embeddings when the key is absent
 * (Gemma2Config, Gemma3TextConfig). */
static int gemma_default_tied(const cJSON *root) {
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  int f = cJSON_IsString(mt) ? fsdpc__family_by_name(mt->valuestring) : -1;
  return f >= 0 && (fsdpc__family(f)->reads & FSDPC_READS_GEMMA);
}

/* config.json's value of a shape key as text ("4096", "true"), with
 * transformers' defaults for the ones it derives; "" when unknown. */
static void json_shape_value(const cJSON *root, const char *name, char *buf, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  buf[0] = '\0';
  if (cJSON_IsNumber(v))
    snprintf(buf, cap, "%.17g", v->valuedouble);
  else if (cJSON_IsBool(v))
    snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
  else if (strcmp(name, "tie_word_embeddings") == 0) /* LlamaConfig's default; Gemma's true */
    snprintf(buf, cap, "%s", gemma_default_tied(root) ? "true" : "false");
  else if (strcmp(name, "num_key_value_heads") == 0)
    json_shape_value(root, "num_attention_heads", buf, cap);
  else if (strcmp(name, "head_dim") == 0) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "hidden_size");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "num_attention_heads");
    if (cJSON_IsNumber(h) && cJSON_IsNumber(n) && n->valuedouble > 0)
      snprintf(buf, cap, "%.17g", floor(h->valuedouble / n->valuedouble));
  }
}

fsdpc_status fsdpc__cfg_check_weights_shape(const fsdpc_config *c, fsdpc_err *err) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/config.json", c->model.init.from);
  if (stat(path, &st) != 0)
    return FSDPC_OK; /* a missing folder or file is named by the load */
  size_t len = 0;
  char *text = read_file(path, &len);
  cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
  free(text);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return FSDPC_OK; /* model.config's reading (or the load) names the syntax error */
  }
  fsdpc_status status = FSDPC_OK;
  for (size_t i = 0; i < sizeof shape_keys / sizeof shape_keys[0] && status == FSDPC_OK; i++) {
    char key[64], want[64], have[64];
    snprintf(key, sizeof key, "model.%s", shape_keys[i]);
    int ki;
    const fsdpc_cfg_key *k = fsdpc__cfg_find(key, &ki);
    json_shape_value(root, shape_keys[i], want, sizeof want);
    if (!k || !want[0])
      continue;
    fsdpc__cfg_value_text(c, k, have, sizeof have);
    if (strcmp(have, want) == 0)
      continue;
    char where[600];
    fsdpc__config_where(c, key, where, sizeof where);
    status = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s=%s contradicts the model folder %s (config.json %s %s), whose "
                         "weights are loaded; remove the key (the folder supplies it) or point "
                         "model.from at a folder of that shape",
                         where, key, have, c->model.init.from, shape_keys[i], want);
  }
  cJSON_Delete(root);
  return status;
}
