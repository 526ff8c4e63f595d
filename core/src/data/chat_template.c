/* Chat templates from model folders: chat_template.jinja, the
 * chat_template of tokenizer_config.json (a string or a list of named
 * templates; with none named, "default", and "tool_use" for conversations
 * with tools, as transformers' get_chat_template picks them), or a given
 * file; the special tokens the template sees; the per-render bounds. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/chat_internal.h"
#include "io/fileio.h"

#define MAX_TEMPLATE_FILE ((size_t)64 << 20)

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A special token: a string, or an AddedToken object {content: ...}. */
static char *token_text(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v))
    v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static fsdpc_status read_file(const char *path, char **out, size_t *len, fsdpc_err *err) {
  if (fsdpc__read_small_file(path, MAX_TEMPLATE_FILE, out, len) != 0)
    return fsdpc__fail(err, errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s: cannot read: %s", path, strerror(errno));
  return FSDPC_OK;
}

static int copy_token(char **dst, const char *src) {
  return !src || (*dst = strdup(src)) != NULL;
}

/* The "tool_use" entry of a list of named templates, as t's sibling (when
 * t is not that entry itself). */
static fsdpc_status load_tool_use(fsdpc_chat_template *t, const cJSON *ct, const char *cfg_path,
                                  fsdpc_err *err) {
  if (!cJSON_IsArray(ct))
    return FSDPC_OK;
  const cJSON *it;
  cJSON_ArrayForEach(it, ct) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
    if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "tool_use") != 0 || !cJSON_IsString(tp))
      continue;
    char origin[4200];
    snprintf(origin, sizeof origin, "%s:chat_template[tool_use]", cfg_path);
    if (!strcmp(origin, t->origin))
      return FSDPC_OK;
    fsdpc_chat_template *u = NULL;
    fsdpc_status st = fsdpc__chat_template_from_string(tp->valuestring, strlen(tp->valuestring),
                                                       origin, t->bos, t->eos, &u, err);
    if (st != FSDPC_OK)
      return st;
    if (!copy_token(&u->unk, t->unk) || !copy_token(&u->pad, t->pad)) {
      fsdpc__chat_template_destroy(u);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    }
    t->tool_use = u;
    return FSDPC_OK;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__chat_template_load(const char *model_dir, const char *template_file,
                                       const char *name, fsdpc_chat_template **out,
                                       fsdpc_err *err) {
  *out = NULL;
  fsdpc_status st = FSDPC_OK;
  fsdpc_chat_template *t = calloc(1, sizeof *t);
  char *cfg_path = model_dir ? fsdpc__path_join(model_dir, "tokenizer_config.json") : NULL;
  char *jinja_path = model_dir ? fsdpc__path_join(model_dir, "chat_template.jinja") : NULL;
  char *cfg_text = NULL, *src = NULL;
  size_t cfg_len = 0, src_len = 0;
  cJSON *cfg = NULL;
  if (!t || (model_dir && (!cfg_path || !jinja_path))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    goto done;
  }
  if (!model_dir && !template_file) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "chat template: give a model folder or a template file");
    goto done;
  }
  if (cfg_path && file_exists(cfg_path)) {
    if ((st = read_file(cfg_path, &cfg_text, &cfg_len, err)) != FSDPC_OK)
      goto done;
    cfg = cJSON_ParseWithLength(cfg_text, cfg_len);
    if (!cJSON_IsObject(cfg)) {
      st =
          fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a JSON object (bad JSON near byte %zu)",
                      cfg_path, cJSON_GetErrorPtr() ? (size_t)(cJSON_GetErrorPtr() - cfg_text) : 0);
      goto done;
    }
    char why[400];
    if (fsdpc__jinja_json_text(cfg, cfg_text, cfg_len, why, sizeof why)) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s", cfg_path, why);
      goto done;
    }
    t->bos = token_text(cfg, "bos_token");
    t->eos = token_text(cfg, "eos_token");
    t->unk = token_text(cfg, "unk_token");
    t->pad = token_text(cfg, "pad_token");
  }
  char origin[4200];
  if (template_file) {
    if ((st = read_file(template_file, &src, &src_len, err)) != FSDPC_OK)
      goto done;
    snprintf(origin, sizeof origin, "%s", template_file);
  } else if ((!name || !strcmp(name, "default")) && file_exists(jinja_path)) {
    if ((st = read_file(jinja_path, &src, &src_len, err)) != FSDPC_OK)
      goto done;
    snprintf(origin, sizeof origin, "%s", jinja_path);
  } else {
    const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
    const char *text = NULL;
    if (cJSON_IsString(ct)) {
      if (name && strcmp(name, "default") != 0) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: chat_template is a single template; there is no template named "
                         "'%s' (leave the name out)",
                         cfg_path, name);
        goto done;
      }
      text = ct->valuestring;
      snprintf(origin, sizeof origin, "%s:chat_template", cfg_path);
    } else if (cJSON_IsArray(ct)) {
      const cJSON *only = NULL, *it;
      int count = 0;
      char names[512] = "";
      cJSON_ArrayForEach(it, ct) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
        if (!cJSON_IsString(nm) || !cJSON_IsString(tp)) {
          st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "%s: chat_template list entry %d is not {name, template} strings",
                           cfg_path, count);
          goto done;
        }
        count++;
        only = it;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", nm->valuestring);
        if (!strcmp(nm->valuestring, name ? name : "default")) {
          text = tp->valuestring;
          snprintf(origin, sizeof origin, "%s:chat_template[%s]", cfg_path, nm->valuestring);
        }
      }
      if (!text && !name && count == 1) {
        text = cJSON_GetObjectItemCaseSensitive(only, "template")->valuestring;
        snprintf(origin, sizeof origin, "%s:chat_template[%s]", cfg_path,
                 cJSON_GetObjectItemCaseSensitive(only, "name")->valuestring);
      }
      if (!text) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: no chat template named '%s' (it has: %s); name one of them", cfg_path,
                         name ? name : "default", names);
        goto done;
      }
    } else {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: no chat template (neither chat_template in tokenizer_config.json "
                       "nor chat_template.jinja); give a .jinja file with data.chat_template",
                       model_dir);
      goto done;
    }
    src_len = strlen(text);
    src = strdup(text);
    if (!src) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
      goto done;
    }
  }
  t->origin = strdup(origin);
  if (!t->origin) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    goto done;
  }
  st = fsdpc__jinja_parse(src, src_len, origin, &t->jinja, err);
  if (st == FSDPC_OK && !template_file && !name && cfg)
    st = load_tool_use(t, cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"), cfg_path, err);
done:
  cJSON_Delete(cfg);
  free(cfg_text);
  free(src);
  free(cfg_path);
  free(jinja_path);
  if (st != FSDPC_OK) {
    fsdpc__chat_template_destroy(t);
    return st;
  }
  *out = t;
  return FSDPC_OK;
}

void fsdpc__chat_template_destroy(fsdpc_chat_template *t) {
  if (!t)
    return;
  fsdpc__chat_template_destroy(t->tool_use);
  fsdpc__jinja_destroy(t->jinja);
  free(t->origin);
  free(t->bos);
  free(t->eos);
  free(t->unk);
  free(t->pad);
  free(t);
}

void fsdpc__chat_template_set_time(fsdpc_chat_template *t, time_t now) {
  for (; t; t = t->tool_use)
    t->now = now;
}
void fsdpc__chat_template_set_limits(fsdpc_chat_template *t, uint64_t max_steps,
                                     size_t max_output) {
  for (; t; t = t->tool_use) {
    t->max_steps = max_steps;
    t->max_output = max_output;
  }
}
void fsdpc__chat_template_set_max_memory(fsdpc_chat_template *t, size_t max_memory) {
  for (; t; t = t->tool_use)
    t->max_memory = max_memory;
}

fsdpc_status fsdpc__chat_template_from_string(const char *src, size_t len, const char *origin,
                                              const char *bos, const char *eos,
                                              fsdpc_chat_template **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_chat_template *t = calloc(1, sizeof *t);
  if (!t || !(t->origin = strdup(origin ? origin : "chat_template")) ||
      (bos && !(t->bos = strdup(bos))) || (eos && !(t->eos = strdup(eos)))) {
    fsdpc__chat_template_destroy(t);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  fsdpc_status st = fsdpc__jinja_parse(src, len, t->origin, &t->jinja, err);
  if (st != FSDPC_OK) {
    fsdpc__chat_template_destroy(t);
    return st;
  }
  *out = t;
  return FSDPC_OK;
}
const char *fsdpc__chat_template_origin(const fsdpc_chat_template *t) {
  return t->origin;
}
const char *fsdpc__chat_template_bos(const fsdpc_chat_template *t) {
  return t->bos;
}
const char *fsdpc__chat_template_eos(const fsdpc_chat_template *t) {
  return t->eos;
}
