/* A Hugging Face model folder as one key (docs/config.md, "Model folders"):
 * model.from DIR supplies the shape (model.config), the weights
 * (model.init.from) and, when the folder ships one, the tokenizer
 * (data.tokenizer); model.init.from alone does the same, so that one path
 * is written once. model.config alone stays "shape only". The keys a
 * folder fills are marked as set from where model.from (or
 * model.init.from) was given, so errors and the dump name the source. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/meta.h"
#include "io/fileio.h"

static bool is_set(const fsdpc_config *c, const char *path, int *ki) {
  return fsdpc__cfg_find(path, ki) && c->meta->keys[*ki].set;
}

/* The folder a model.config value names (config.json's folder for a file),
 * canonical when it exists. */
static void folder_of(const char *p, char *out, size_t cap) {
  char buf[PATH_MAX];
  struct stat sb;
  snprintf(buf, sizeof buf, "%s", p);
  if (stat(buf, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
    char *slash = strrchr(buf, '/');
    if (slash)
      *slash = '\0';
    else
      snprintf(buf, sizeof buf, ".");
  }
  char real[PATH_MAX];
  snprintf(out, cap, "%s", realpath(buf, real) ? real : buf);
}

bool fsdpc__cfg_same_folder(const char *a, const char *b) {
  char fa[PATH_MAX], fb[PATH_MAX];
  folder_of(a, fa, sizeof fa);
  folder_of(b, fb, sizeof fb);
  return strcmp(fa, fb) == 0;
}

/* Whether every required model key is given (by the file or an override). */
static bool shape_given(const fsdpc_config *c) {
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++)
    if ((keys[i].flags & FSDPC_CFG_REQUIRED) && !c->meta->keys[i].set)
      return false;
  return true;
}

static bool has_tokenizer(const char *dir) {
  char p[PATH_MAX + 32];
  struct stat sb;
  const char *names[] = {"tokenizer.json", "tokenizer.model"};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
      return true;
  }
  return false;
}

/* Sets key `path` to value, recorded as coming from `where`. */
static fsdpc_status set_from(fsdpc_config *c, const char *path, const char *value,
                             const char *where, fsdpc_err *err) {
  int ki;
  if (!fsdpc__cfg_find(path, &ki))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "config: no key %s", path);
  fsdpc_cfg_ctx ctx = {c, c->source, where, err};
  /* quoted, so that a path starting with '[' or '{' stays a path */
  char *q = malloc(2 * strlen(value) + 3), *o = q;
  if (!q)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  *o++ = '\'';
  for (const char *s = value; *s; s++) {
    if (*s == '\'')
      *o++ = '\'';
    *o++ = *s;
  }
  *o++ = '\'';
  *o = '\0';
  fsdpc_status st = fsdpc__cfg_set_text(&ctx, ki, q);
  free(q);
  return st;
}

/* model.adapter alone: the base its adapter_config.json names (as written
 * at training; a path that is not a folder here must be given). */
static fsdpc_status adapter_base(const fsdpc_config *c, char *out, size_t cap, fsdpc_err *err) {
  char path[PATH_MAX + 32], where[600];
  fsdpc__config_where(c, "model.adapter", where, sizeof where);
  snprintf(path, sizeof path, "%s/adapter_config.json", c->model.adapter);
  char *text = NULL;
  size_t len = 0;
  if (fsdpc__read_small_file(path, 16u << 20, &text, &len) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.adapter '%s' is not a PEFT adapter folder (no readable "
                       "adapter_config.json)",
                       where, c->model.adapter);
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "base_model_name_or_path");
  struct stat sb;
  fsdpc_status st = FSDPC_OK;
  if (!cJSON_IsString(b) || !b->valuestring[0])
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: %s names no base_model_name_or_path; give the base with model.from=PATH",
                     where, path);
  else if (stat(b->valuestring, &sb) != 0 || !S_ISDIR(sb.st_mode))
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: the adapter's base '%s' (%s) is not a folder here; give it with "
                     "model.from=PATH",
                     where, b->valuestring, path);
  else
    snprintf(out, cap, "%s", b->valuestring);
  cJSON_Delete(j);
  return st;
}

fsdpc_status fsdpc__cfg_resolve_model_folder(fsdpc_config *c, fsdpc_err *err) {
  fsdpc_config_model *m = &c->model;
  int ki;
  const char *dir = NULL, *key = NULL;
  if (m->from[0]) {
    dir = m->from, key = "model.from";
    const char *others[] = {"model.config", "model.init.from"};
    const char *vals[] = {m->config, m->init.from};
    for (int i = 0; i < 2; i++)
      if (vals[i][0] && !fsdpc__cfg_same_folder(vals[i], dir)) {
        char where[600];
        fsdpc__config_where(c, others[i], where, sizeof where);
        return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "%s: %s '%s' is another folder than model.from '%s', which supplies "
                           "the shape, the weights and the tokenizer; remove %s",
                           where, others[i], vals[i], dir, others[i]);
      }
  } else if (m->init.from[0] && !m->config[0]) {
    dir = m->init.from, key = "model.init.from"; /* the weights' own shape */
  }
  char base[PATH_MAX];
  if (!dir && m->adapter[0] && !m->config[0] && !m->init.from[0]) {
    FSDPC_TRY(adapter_base(c, base, sizeof base, err));
    dir = base, key = "model.adapter";
  }
  if (m->adapter[0] && !dir && !m->init.from[0]) {
    char where[600];
    fsdpc__config_where(c, "model.adapter", where, sizeof where);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.adapter is merged into loaded weights, but model.config alone "
                       "starts from random ones; set model.from to the adapter's base",
                       where);
  }
  if (!dir)
    return FSDPC_OK;
  char where[700], given[600];
  fsdpc__config_where(c, key, given, sizeof given);
  snprintf(where, sizeof where, "%s (%s)", given, key);
  char *d = strdup(dir); /* the setters below may free the string dir points into */
  if (!d)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = FSDPC_OK;
  /* model.init.from with the whole shape given (a checkpoint's config.yaml)
   * needs no model.config: the shape check against the weights' own
   * config.json still runs when they load from there */
  if (!m->config[0] && (m->from[0] || m->adapter[0] || !shape_given(c)))
    st = set_from(c, "model.config", d, where, err);
  if (st == FSDPC_OK && !m->init.from[0])
    st = set_from(c, "model.init.from", d, where, err);
  if (st == FSDPC_OK && !is_set(c, "data.tokenizer", &ki) && has_tokenizer(d))
    st = set_from(c, "data.tokenizer", d, where, err);
  free(d);
  return st;
}

void fsdpc__config_model_note(const fsdpc_config *c, char *buf, size_t cap) {
  buf[0] = '\0';
  if (c->model.config[0] && !c->model.init.from[0])
    snprintf(buf, cap,
             "model.config '%s' gives the shape only: the weights start random (model.init.std "
             "%g); to start from that folder's weights and tokenizer, set model.from: %s",
             c->model.config, c->model.init.std, c->model.config);
}
