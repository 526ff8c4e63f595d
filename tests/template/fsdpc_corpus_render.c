/* Test hook: renders every template of the chat template corpus
 * (tests/fixtures/chat_corpus) over its conversation set with fsdpc, for
 * test_chat_corpus.py to compare with jinja2 and transformers.
 *
 *   fsdpc_corpus_render CORPUS_DIR EPOCH [masks] [TEMPLATE_NAME]
 *
 * prints a JSON array: {"template", "conv", "agp", "text" | "error",
 * "spans" (with "masks"; byte offsets)} per template, conversation and
 * add_generation_prompt (false, true). Conversations are read as the
 * dataset reader reads lines: numbers keep their JSON text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/chat.h"
#include "io/fileio.h"
#include "template/jinja.h"

static cJSON *read_json(const char *path) {
  char *text;
  size_t len;
  if (fsdpc__read_small_file(path, (size_t)1 << 30, &text, &len) != 0) {
    fprintf(stderr, "%s: cannot read\n", path);
    return NULL;
  }
  cJSON *j = cJSON_ParseWithLength(text, len);
  char why[300];
  if (j && fsdpc__jinja_json_text(j, text, len, why, sizeof why)) {
    fprintf(stderr, "%s: %s\n", path, why);
    cJSON_Delete(j);
    j = NULL;
  }
  free(text);
  if (!j)
    fprintf(stderr, "%s: bad JSON\n", path);
  return j;
}

static const char *str_of(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void render_one(const fsdpc_chat_template *t, const char *tname, const cJSON *conv, int agp,
                       int masks, cJSON *results) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "template", tname);
  cJSON_AddStringToObject(r, "conv", str_of(conv, "name"));
  cJSON_AddBoolToObject(r, "agp", agp);
  fsdpc_chat_ctx ctx = {cJSON_GetObjectItemCaseSensitive(conv, "tools"),
                        cJSON_GetObjectItemCaseSensitive(conv, "documents"),
                        cJSON_GetObjectItemCaseSensitive(conv, "kwargs")};
  fsdpc_chat_opts o = {agp, FSDPC_TRAIN_ON_ASSISTANT, 1};
  char *text = NULL;
  size_t n = 0, ns = 0;
  fsdpc_chat_span *spans = NULL;
  fsdpc_err err = {0};
  if (fsdpc__chat_render_ctx(t, cJSON_GetObjectItemCaseSensitive(conv, "messages"), &ctx, &o, &text,
                             &n, masks ? &spans : NULL, masks ? &ns : NULL, &err) != FSDPC_OK) {
    cJSON_AddStringToObject(r, "error", err.msg);
  } else {
    cJSON_AddStringToObject(r, "text", text);
    if (masks) {
      cJSON *sa = cJSON_AddArrayToObject(r, "spans");
      for (size_t k = 0; k < ns; k++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)spans[k].begin));
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)spans[k].end));
        cJSON_AddItemToArray(sa, p);
      }
    }
  }
  free(text);
  free(spans);
  cJSON_AddItemToArray(results, r);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fsdpc_corpus_render CORPUS_DIR EPOCH [masks] [TEMPLATE]\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.json", argv[1]);
  cJSON *man = read_json(path);
  snprintf(path, sizeof path, "%s/conversations.json", argv[1]);
  cJSON *convs = read_json(path);
  if (!man || !convs)
    return 2;
  int masks = argc > 3 && !strcmp(argv[3], "masks");
  const char *only = argc > 4 ? argv[4] : NULL;
  cJSON *results = cJSON_CreateArray();
  const cJSON *e;
  cJSON_ArrayForEach(e, man) {
    const char *name = str_of(e, "name");
    if (only && strcmp(only, name))
      continue;
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "tokens");
    snprintf(path, sizeof path, "%s/templates/%s.jinja", argv[1], name);
    char *src;
    size_t len;
    if (fsdpc__read_small_file(path, (size_t)1 << 26, &src, &len) != 0) {
      fprintf(stderr, "%s: cannot read\n", path);
      return 2;
    }
    fsdpc_chat_template *t = NULL;
    fsdpc_err err = {0};
    char origin[600];
    snprintf(origin, sizeof origin, "%s.jinja", name);
    if (fsdpc__chat_template_from_string(src, len, origin, str_of(tok, "bos_token"),
                                         str_of(tok, "eos_token"), &t, &err) != FSDPC_OK) {
      cJSON *r = cJSON_CreateObject();
      cJSON_AddStringToObject(r, "template", name);
      cJSON_AddStringToObject(r, "parse_error", err.msg);
      cJSON_AddItemToArray(results, r);
    } else {
      fsdpc__chat_template_set_time(t, (time_t)atoll(argv[2]));
      const cJSON *c;
      cJSON_ArrayForEach(c, convs) {
        render_one(t, name, c, 0, masks, results);
        render_one(t, name, c, 1, masks, results);
      }
    }
    fsdpc__chat_template_destroy(t);
    free(src);
  }
  char *s = cJSON_PrintUnformatted(results);
  fputs(s, stdout);
  fputc('\n', stdout);
  free(s);
  cJSON_Delete(results);
  cJSON_Delete(man);
  cJSON_Delete(convs);
  return 0;
}
