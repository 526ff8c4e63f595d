/* What a model folder says about prompting it: its tokenizer, its chat
 * template and its sampling defaults (generation_config.json), found the
 * way transformers finds them, with the run's config as the fall-back (an
 * fsdpc final/ of the byte tokenizer carries data.chat_template in its
 * config.yaml and chat_template.jinja beside it). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "infer/infer.h"
#include "io/fileio.h"

static int has_file(const char *dir, const char *name) {
  char *p = fsdpc__path_join(dir, name);
  struct stat sb;
  int yes = p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
  free(p);
  return yes;
}

/* The JSON object in dir/name, or NULL (absent or unreadable). */
static cJSON *read_json(const char *dir, const char *name) {
  char *p = fsdpc__path_join(dir, name), *text = NULL;
  size_t len = 0;
  cJSON *j = NULL;
  if (p && fsdpc__read_small_file(p, 64u << 20, &text, &len) == 0)
    j = cJSON_ParseWithLength(text, len);
  free(p);
  free(text);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

static int has_tokenizer(const char *dir) {
  return has_file(dir, "tokenizer.json") || has_file(dir, "tokenizer.model");
}

/* The folder the tokenizer comes from: the model's own (an HF folder,
 * fsdpc's final/), an adapter's base, else data.tokenizer. */
static const char *tokenizer_source(const fsdpc_infer_model *m) {
  if (has_tokenizer(m->dir))
    return m->dir;
  if (m->weights_dir && has_tokenizer(m->weights_dir))
    return m->weights_dir;
  return m->cfg->data.tokenizer;
}

fsdpc_status fsdpc__infer_tokenizer(const fsdpc_infer_model *m, fsdpc_tokenizer **out,
                                    fsdpc_err *err) {
  return fsdpc__tokenizer_load(tokenizer_source(m), out, err);
}

/* Whether dir ships a chat template (chat_template.jinja, or a
 * chat_template key in tokenizer_config.json). */
static int has_template(const char *dir) {
  if (!dir || !dir[0])
    return 0;
  if (has_file(dir, "chat_template.jinja"))
    return 1;
  cJSON *j = read_json(dir, "tokenizer_config.json");
  int yes = cJSON_GetObjectItemCaseSensitive(j, "chat_template") != NULL;
  cJSON_Delete(j);
  return yes;
}

/* A tokenizer path's folder (data.tokenizer may name the file). */
static void folder_of(const char *path, char *out, size_t cap) {
  struct stat sb;
  snprintf(out, cap, "%s", path);
  if (stat(out, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
    char *slash = strrchr(out, '/');
    if (slash)
      *slash = '\0';
    else
      snprintf(out, cap, ".");
  }
}

fsdpc_status fsdpc__infer_chat_template(const fsdpc_infer_model *m, fsdpc_chat_template **out,
                                        fsdpc_err *err) {
  const fsdpc_config_data *d = &m->cfg->data;
  const char *name = d->chat_template_name[0] ? d->chat_template_name : NULL;
  char tokdir[4200] = "";
  if (strcmp(d->tokenizer, "byte") != 0)
    folder_of(d->tokenizer, tokdir, sizeof tokdir);
  /* The template the model was trained with travels in its folder (final/
   * holds chat_template.jinja); then the run's own choice; then the
   * tokenizer's folder. */
  if (has_template(m->dir))
    return fsdpc__chat_template_load(m->dir, NULL, name, out, err);
  if (d->chat_template[0])
    return fsdpc__chat_template_load(tokdir[0] ? tokdir : NULL, d->chat_template, name, out, err);
  if (m->weights_dir && has_template(m->weights_dir))
    return fsdpc__chat_template_load(m->weights_dir, NULL, name, out, err);
  if (has_template(tokdir))
    return fsdpc__chat_template_load(tokdir, NULL, name, out, err);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "--chat: %s has no chat template (no chat_template.jinja, no chat_template "
                     "in tokenizer_config.json) and its config names none; give one with "
                     "data.chat_template=FILE",
                     m->dir);
}

void fsdpc__infer_sampling_defaults(const fsdpc_infer_model *m, fsdpc_sampling *s) {
  cJSON *g = read_json(m->dir, "generation_config.json");
  if (!g && m->weights_dir)
    g = read_json(m->weights_dir, "generation_config.json");
  /* transformers: without do_sample the decoding is greedy, whatever the
   * temperature says; with it, temperature 1, top_k 50, top_p 1 unless set */
  int sample = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "do_sample"));
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(g, "temperature");
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(g, "top_k");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(g, "top_p");
  if (s->temperature < 0)
    s->temperature = !sample                                    ? 0.0
                     : cJSON_IsNumber(t) && t->valuedouble >= 0 ? t->valuedouble
                                                                : 1.0;
  if (s->top_k < 0)
    s->top_k = sample && cJSON_IsNumber(k) && k->valuedouble >= 0 ? (int)k->valuedouble
               : sample && !k                                     ? 50
                                                                  : 0;
  if (s->top_p < 0)
    s->top_p = sample && cJSON_IsNumber(p) && p->valuedouble > 0 && p->valuedouble <= 1
                   ? p->valuedouble
                   : 1.0;
  cJSON_Delete(g);
}
