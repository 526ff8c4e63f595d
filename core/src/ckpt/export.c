/* A deployable Hugging Face folder: config.json merged into the source's
 * text, generation_config.json, tokenizer files (see export.h). */
#include "ckpt/export.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "io/fileio.h"
#include "util/fs.h"

static const char *const tok_files[] = {"tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json", "chat_template.jinja",
                                        "tokenizer.model"};
enum { N_TOK_FILES = 5, MAX_SRC = 64u << 20 };

static int is_file(const char *p) {
  struct stat st;
  return p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p) {
  struct stat st;
  return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static char *dir_of(const char *path) {
  char *c = strdup(path);
  if (!c)
    return NULL;
  char *d = strdup(dirname(c));
  free(c);
  return d;
}

static int has_tok_files(const char *dir) {
  for (int i = 0; i < N_TOK_FILES; i++) {
    char *p = fsdpc__path_join(dir, tok_files[i]);
    int yes = is_file(p);
    free(p);
    if (yes)
      return 1;
  }
  return 0;
}

void fsdpc__export_src_free(fsdpc_export_src *s) {
  free(s->config_json);
  free(s->tok_dir);
  free(s->tok_file);
  free(s->chat_template);
  memset(s, 0, sizeof *s);
}

fsdpc_status fsdpc__export_src_from_config(const fsdpc_config *c, fsdpc_export_src *out,
                                           fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  const char *mc = c->model.config[0] ? c->model.config : c->model.init.from;
  char *src_dir = NULL;
  if (mc && mc[0]) {
    if (is_dir(mc)) {
      src_dir = strdup(mc);
      out->config_json = fsdpc__path_join(mc, "config.json");
    } else {
      src_dir = dir_of(mc);
      out->config_json = strdup(mc);
    }
    if (!is_file(out->config_json)) {
      free(out->config_json);
      out->config_json = NULL;
    }
  }
  /* The tokenizer of the model's own folder first, then data.tokenizer. */
  const char *dt = c->data.tokenizer;
  if (src_dir && has_tok_files(src_dir)) {
    out->tok_dir = src_dir;
    src_dir = NULL;
  } else if (dt && dt[0] && strcmp(dt, "byte") != 0) {
    if (is_dir(dt)) {
      out->tok_dir = strdup(dt);
    } else if (is_file(dt)) {
      out->tok_dir = dir_of(dt);
      const char *base = strrchr(dt, '/');
      base = base ? base + 1 : dt;
      if (strcmp(base, "tokenizer.json") != 0)
        out->tok_file = strdup(dt);
    }
  }
  free(src_dir);
  const char *ct = c->data.chat_template;
  if (ct[0] && is_file(ct) && !(out->chat_template = strdup(ct)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  return FSDPC_OK;
}

/* ---- config.json ------------------------------------------------------ */

/* Whitespace as cJSON's parser takes it: any byte from 1 to 32. */
static int is_ws(char c) {
  return c != '\0' && (unsigned char)c <= 32;
}

/* The end of the JSON value starting at p (valid JSON: cJSON parsed it). */
static const char *skip_value(const char *p) {
  if (*p == '"') {
    for (p++; *p && *p != '"'; p++)
      if (*p == '\\' && p[1])
        p++;
    return *p ? p + 1 : p;
  }
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; *p; p++) {
      if (*p == '"') {
        p = skip_value(p) - 1;
      } else if (*p == '{' || *p == '[') {
        depth++;
      } else if (*p == '}' || *p == ']') {
        if (--depth == 0)
          return p + 1;
      }
    }
    return p;
  }
  while (*p && *p != ',' && *p != '}' && *p != ']' && !is_ws(*p))
    p++;
  return p;
}

static const char *skip_ws(const char *p) {
  while (is_ws(*p))
    p++;
  return p;
}

typedef struct member {
  char *key;
  const char *v0, *v1; /* the value's text in the source */
} member;

/* Top-level members of the object in text (already validated). */
static int scan_members(const char *text, member **out, int *n) {
  const char *p = skip_ws(text);
  *out = NULL;
  *n = 0;
  if (*p != '{')
    return -1;
  p = skip_ws(p + 1);
  int cap = 0;
  while (*p == '"') {
    const char *k1 = skip_value(p);
    const char *v = skip_ws(k1);
    if (*v != ':')
      return -1;
    v = skip_ws(v + 1);
    const char *v1 = skip_value(v);
    if (*n == cap) {
      cap = cap ? 2 * cap : 32;
      member *m = realloc(*out, (size_t)cap * sizeof *m);
      if (!m)
        return -1;
      *out = m;
    }
    /* the key, unescaped by cJSON */
    size_t kl = (size_t)(k1 - p);
    char *kt = malloc(kl + 1);
    if (!kt)
      return -1;
    memcpy(kt, p, kl);
    kt[kl] = '\0';
    cJSON *kj = cJSON_Parse(kt);
    free(kt);
    (*out)[*n].key = kj && cJSON_IsString(kj) ? strdup(kj->valuestring) : NULL;
    cJSON_Delete(kj);
    if (!(*out)[*n].key)
      return -1;
    (*out)[*n].v0 = v;
    (*out)[*n].v1 = v1;
    (*n)++;
    p = skip_ws(v1);
    if (*p == ',')
      p = skip_ws(p + 1);
  }
  return 0;
}

static int same_number(double a, double b) {
  return a == b || (float)a == (float)b || fabs(a - b) <= 1e-12 * fabs(b);
}

/* Does the source value say what fsdpc computed? (An eos list that holds
 * fsdpc's id, "type" for "rope_type", fp32-rounded floats all do.) */
static int same_value(const cJSON *src, const cJSON *mine) {
  if (cJSON_IsNumber(mine)) {
    if (cJSON_IsNumber(src))
      return same_number(src->valuedouble, mine->valuedouble);
    if (cJSON_IsArray(src)) {
      for (const cJSON *e = src->child; e; e = e->next)
        if (cJSON_IsNumber(e) && e->valuedouble == mine->valuedouble)
          return 1;
    }
    return 0;
  }
  if (cJSON_IsObject(mine)) {
    if (!cJSON_IsObject(src))
      return 0;
    for (const cJSON *m = mine->child; m; m = m->next) {
      const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, m->string);
      if (!s && strcmp(m->string, "rope_type") == 0)
        s = cJSON_GetObjectItemCaseSensitive(src, "type");
      if (!s || !same_value(s, m))
        return 0;
    }
    return 1;
  }
  if (cJSON_IsNull(mine))
    return !src || cJSON_IsNull(src);
  if (cJSON_IsString(mine) && cJSON_IsString(src) && strcmp(mine->valuestring, "none") == 0)
    return 1;
  return cJSON_Compare(src, mine, 1);
}

/* Keys fsdpc writes although the source lacks them: only where the value
 * is not what transformers derives anyway. */
static int worth_adding(const cJSON *mine, const cJSON *src_root, const fsdpc_model_shape *s) {
  const char *k = mine->string;
  if (strcmp(k, "head_dim") == 0)
    return s->HD != s->C / s->NH;
  if (strcmp(k, "num_key_value_heads") == 0)
    return s->KVH != s->NH;
  if (strcmp(k, "rope_theta") == 0 || strcmp(k, "rope_scaling") == 0) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(src_root, "rope_parameters");
    if (rp)
      return 0; /* transformers >= 5 keeps both in rope_parameters */
    return strcmp(k, "rope_theta") == 0 ? s->rope_theta != 10000.0 : s->rope_llama3;
  }
  static const char *const shape_keys[] = {"vocab_size",          "hidden_size",
                                           "intermediate_size",   "num_hidden_layers",
                                           "num_attention_heads", "max_position_embeddings",
                                           "rms_norm_eps",        "tie_word_embeddings"};
  for (size_t i = 0; i < sizeof shape_keys / sizeof *shape_keys; i++)
    if (strcmp(k, shape_keys[i]) == 0)
      return 1;
  return 0;
}

static int is_dtype_key(const char *k) {
  return strcmp(k, "torch_dtype") == 0 || strcmp(k, "dtype") == 0;
}

static fsdpc_status merge(const fsdpc_model_shape *shape, const char *dtype_name,
                          const char *src_text, const cJSON *mine, char **out, fsdpc_err *err) {
  cJSON *src = cJSON_Parse(src_text);
  member *m = NULL;
  int n = 0;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = NULL;
  fsdpc_status st = FSDPC_OK;
  if (!cJSON_IsObject(src) || scan_members(src_text, &m, &n) != 0) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "source config.json: not a JSON object");
    goto out;
  }
  if (!(f = open_memstream(&buf, &len))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  int first = 1, have_dtype = 0;
  fputs("{", f);
  for (int i = 0; i < n; i++) {
    const cJSON *my = cJSON_GetObjectItemCaseSensitive(mine, m[i].key);
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(src, m[i].key);
    cJSON *key = cJSON_CreateString(m[i].key);
    char *kt = cJSON_PrintUnformatted(key);
    fprintf(f, "%s\n  %s: ", first ? "" : ",", kt ? kt : "\"?\"");
    cJSON_free(kt);
    cJSON_Delete(key);
    first = 0;
    if (is_dtype_key(m[i].key)) {
      fprintf(f, "\"%s\"", dtype_name);
      have_dtype = 1;
    } else if (my && !same_value(sv, my)) {
      char *t = cJSON_PrintUnformatted(my);
      fputs(t ? t : "null", f);
      cJSON_free(t);
    } else {
      fwrite(m[i].v0, 1, (size_t)(m[i].v1 - m[i].v0), f);
    }
  }
  for (const cJSON *my = mine->child; my; my = my->next) {
    if (cJSON_GetObjectItemCaseSensitive(src, my->string) || is_dtype_key(my->string) ||
        !worth_adding(my, src, shape))
      continue;
    char *t = cJSON_PrintUnformatted(my);
    fprintf(f, "%s\n  \"%s\": %s", first ? "" : ",", my->string, t ? t : "null");
    cJSON_free(t);
    first = 0;
  }
  if (!have_dtype)
    fprintf(f, "%s\n  \"torch_dtype\": \"%s\"", first ? "" : ",", dtype_name);
  fputs("\n}\n", f);
  fclose(f);
  f = NULL;
  *out = buf;
  buf = NULL;
out:
  if (f)
    fclose(f);
  free(buf);
  for (int i = 0; i < n; i++)
    free(m[i].key);
  free(m);
  cJSON_Delete(src);
  return st;
}

fsdpc_status fsdpc__export_config_json(const fsdpc_model_shape *shape, int32_t dtype,
                                       const char *src_json, char **out, fsdpc_err *err) {
  char *mine_text = NULL;
  FSDPC_TRY(fsdpc__ckpt_hf_config_json(shape, dtype, &mine_text, err));
  cJSON *mine = cJSON_Parse(mine_text);
  free(mine_text);
  if (!mine)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* Without a source, fsdpc's own config in the layout of a merged one (one
   * key per line, compact values), so that a folder merged into it later
   * keeps the same bytes. */
  char *flat = src_json ? NULL : cJSON_PrintUnformatted(mine);
  fsdpc_status st = src_json || flat
                        ? merge(shape, dtype == FSDPC_DTYPE_BF16 ? "bfloat16" : "float32",
                                src_json ? src_json : flat, mine, out, err)
                        : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  cJSON_free(flat);
  cJSON_Delete(mine);
  return st;
}

/* ---- the other files -------------------------------------------------- */

static fsdpc_status copy_file(const char *from, const char *to, fsdpc_err *err) {
  char *data = NULL;
  size_t len = 0;
  if (fsdpc__read_small_file(from, 1u << 30, &data, &len) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot read: %s", from, strerror(errno));
  int r = fsdpc__write_file_safe(to, data, len);
  free(data);
  if (r != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", to, strerror(errno));
  return FSDPC_OK;
}

/* The run's chat template into dir: chat_template.jinja, and the
 * chat_template key of tokenizer_config.json (the source's from tok_dir,
 * else a new one), as transformers reads them. */
static fsdpc_status write_template(const char *dir, const char *tok_dir, const char *file,
                                   fsdpc_status (*record)(void *ctx, const char *path), void *ctx,
                                   fsdpc_err *err) {
  char *text = NULL, *cfg_text = NULL, *path = NULL, *out = NULL;
  size_t len = 0, cfg_len = 0;
  cJSON *tc = NULL;
  fsdpc_status st = FSDPC_OK;
  if (fsdpc__read_small_file(file, MAX_SRC, &text, &len) != 0) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "data.chat_template %s: cannot read: %s", file,
                     strerror(errno));
    goto out;
  }
  if (!(path = fsdpc__path_join(dir, "chat_template.jinja"))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  if (fsdpc__write_small_file(path, text, len) != 0) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", path, strerror(errno));
    goto out;
  }
  if ((st = record(ctx, path)) != FSDPC_OK)
    goto out;
  free(path);
  path = tok_dir ? fsdpc__path_join(tok_dir, "tokenizer_config.json") : NULL;
  if (is_file(path) && fsdpc__read_small_file(path, MAX_SRC, &cfg_text, &cfg_len) == 0)
    tc = cJSON_ParseWithLength(cfg_text, cfg_len);
  free(path);
  if (!(path = fsdpc__path_join(dir, "tokenizer_config.json"))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  if (!cJSON_IsObject(tc)) {
    cJSON_Delete(tc);
    tc = cJSON_CreateObject();
  }
  cJSON *tmpl = cJSON_CreateString(text);
  if (!tc || !tmpl ||
      (cJSON_GetObjectItemCaseSensitive(tc, "chat_template")
           ? !cJSON_ReplaceItemInObjectCaseSensitive(tc, "chat_template", tmpl)
           : !cJSON_AddItemToObject(tc, "chat_template", tmpl)) ||
      !(out = cJSON_Print(tc))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  if (fsdpc__write_small_file(path, out, strlen(out)) != 0) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", path, strerror(errno));
    goto out;
  }
  st = record(ctx, path);
out:
  cJSON_Delete(tc);
  cJSON_free(out);
  free(text);
  free(cfg_text);
  free(path);
  return st;
}

/* generation_config.json from the exported config: its bos/eos/pad ids. */
static fsdpc_status make_generation_config(const char *config_text, const char *path,
                                           fsdpc_err *err) {
  cJSON *c = cJSON_Parse(config_text), *g = cJSON_CreateObject();
  fsdpc_status st = FSDPC_OK;
  if (!c || !g) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  cJSON_AddTrueToObject(g, "_from_model_config");
  const char *keys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
  for (int i = 0; i < 3; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, keys[i]);
    if (v && !cJSON_IsNull(v))
      cJSON_AddItemToObject(g, keys[i], cJSON_Duplicate(v, 1));
  }
  char *t = cJSON_Print(g);
  if (!t) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  size_t n = strlen(t);
  char *tn = malloc(n + 2);
  if (tn) {
    memcpy(tn, t, n);
    tn[n] = '\n';
    if (fsdpc__write_file_safe(path, tn, n + 1) != 0)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", path, strerror(errno));
  } else {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  free(tn);
  cJSON_free(t);
out:
  cJSON_Delete(c);
  cJSON_Delete(g);
  return st;
}

fsdpc_status fsdpc__export_write(const char *dir, const fsdpc_model_shape *shape, int32_t dtype,
                                 const fsdpc_export_src *src,
                                 fsdpc_status (*record)(void *ctx, const char *path), void *ctx,
                                 fsdpc_err *err) {
  char *src_text = NULL, *text = NULL, *path = NULL, *from = NULL;
  size_t len = 0;
  fsdpc_status st = FSDPC_OK;
  if (src && src->config_json &&
      fsdpc__read_small_file(src->config_json, MAX_SRC, &src_text, &len) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s", src->config_json,
                       strerror(errno));
#define STEP(x)                                                                                    \
  do {                                                                                             \
    if ((st = (x)) != FSDPC_OK)                                                                    \
      goto out;                                                                                    \
  } while (0)
#define OOM(p)                                                                                     \
  do {                                                                                             \
    if (!(p))                                                                                      \
      STEP(fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory"));                                 \
  } while (0)
  STEP(fsdpc__export_config_json(shape, dtype, src_text, &text, err));
  OOM(path = fsdpc__path_join(dir, "config.json"));
  if (fsdpc__write_file_safe(path, text, strlen(text)) != 0)
    STEP(fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", path, strerror(errno)));
  STEP(record(ctx, path));
  free(path);
  OOM(path = fsdpc__path_join(dir, "generation_config.json"));
  char *src_dir = src && src->config_json ? dir_of(src->config_json) : NULL;
  from = src_dir ? fsdpc__path_join(src_dir, "generation_config.json") : NULL;
  free(src_dir);
  if (is_file(from))
    STEP(copy_file(from, path, err));
  else
    STEP(make_generation_config(text, path, err));
  STEP(record(ctx, path));
  for (int i = 0; src && src->tok_dir && i < N_TOK_FILES; i++) {
    free(from);
    free(path);
    from = fsdpc__path_join(src->tok_dir, tok_files[i]);
    if (i == 0 && src->tok_file) {
      free(from);
      from = strdup(src->tok_file);
    }
    OOM(from);
    OOM(path = fsdpc__path_join(dir, tok_files[i]));
    /* the run's own template replaces the source's (write_template) */
    if (!is_file(from) ||
        (src->chat_template && (strcmp(tok_files[i], "chat_template.jinja") == 0 ||
                                strcmp(tok_files[i], "tokenizer_config.json") == 0)))
      continue;
    STEP(copy_file(from, path, err));
    STEP(record(ctx, path));
  }
  if (src && src->chat_template)
    STEP(write_template(dir, src->tok_dir, src->chat_template, record, ctx, err));
out:
  free(src_text);
  free(text);
  free(path);
  free(from);
  return st;
#undef STEP
#undef OOM
}
