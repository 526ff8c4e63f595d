/* Test hook: renders chat templates and raw Jinja templates with fsdpc so
 * scripts can compare them with Python's jinja2 and transformers.
 *
 *   fsdpc_chat_render chat MODEL_DIR CONVERSATIONS.json [EPOCH] [TRAIN_ON]
 *     CONVERSATIONS.json: [{"messages": [...], "add_generation_prompt": b}]
 *     prints [{"text": ..., "spans": [[b, e], ...]} or {"error": ...}] with
 *     byte offsets; TRAIN_ON: assistant (default), all, last.
 *   fsdpc_chat_render bench MODEL_DIR CONVERSATIONS.json REPEAT
 *     renders the conversations REPEAT times with the assistant mask and
 *     prints throughput (conversations/s, MB/s of message content and of
 *     rendered text), for bench/results.
 *   fsdpc_chat_render raw TEMPLATE_FILE VARS.json [EPOCH]
 *     prints the rendered text, or the error on stderr (exit 1).
 * EPOCH pins strftime_now's clock (local time). */
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
  if (j && fsdpc__jinja_json_text(j, text, len, why, sizeof why)) { /* as data prepare reads */
    fprintf(stderr, "%s: %s\n", path, why);
    cJSON_Delete(j);
    j = NULL;
  }
  free(text);
  if (!j)
    fprintf(stderr, "%s: bad JSON\n", path);
  return j;
}

static int raw(int argc, char **argv) {
  char *src;
  size_t len;
  if (fsdpc__read_small_file(argv[2], (size_t)1 << 30, &src, &len) != 0) {
    fprintf(stderr, "%s: cannot read\n", argv[2]);
    return 2;
  }
  cJSON *vars = read_json(argv[3]);
  if (!vars) {
    free(src);
    return 2;
  }
  fsdpc_err err = {0};
  fsdpc_jinja *t = NULL;
  char *out = NULL;
  size_t n = 0;
  fsdpc_jinja_opts o = {.now = argc > 4 ? (time_t)atoll(argv[4]) : 0};
  int rc = 0;
  if (fsdpc__jinja_parse(src, len, argv[2], &t, &err) != FSDPC_OK ||
      fsdpc__jinja_render_opts(t, vars, &o, &out, &n, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    rc = 1;
  } else {
    fwrite(out, 1, n, stdout);
  }
  free(out);
  fsdpc__jinja_destroy(t);
  cJSON_Delete(vars);
  free(src);
  return rc;
}

static int chat(int argc, char **argv) {
  fsdpc_err err = {0};
  fsdpc_chat_template *t = NULL;
  if (fsdpc__chat_template_load(argv[2], NULL, NULL, &t, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  if (argc > 4)
    fsdpc__chat_template_set_time(t, (time_t)atoll(argv[4]));
  int train_on = FSDPC_TRAIN_ON_ASSISTANT;
  if (argc > 5)
    train_on = !strcmp(argv[5], "all")    ? FSDPC_TRAIN_ON_ALL
               : !strcmp(argv[5], "last") ? FSDPC_TRAIN_ON_LAST_ASSISTANT
                                          : FSDPC_TRAIN_ON_ASSISTANT;
  cJSON *convs = read_json(argv[3]);
  if (!convs) {
    fsdpc__chat_template_destroy(t);
    return 2;
  }
  cJSON *results = cJSON_CreateArray();
  const cJSON *c;
  cJSON_ArrayForEach(c, convs) {
    cJSON *r = cJSON_CreateObject();
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages");
    int agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
    char *text = NULL;
    size_t n = 0, ns = 0;
    fsdpc_chat_span *spans = NULL;
    if (fsdpc__chat_render(t, msgs, agp, train_on, &text, &n, &spans, &ns, &err) != FSDPC_OK) {
      cJSON_AddStringToObject(r, "error", err.msg);
    } else {
      cJSON_AddStringToObject(r, "text", text);
      cJSON *sa = cJSON_AddArrayToObject(r, "spans");
      for (size_t k = 0; k < ns; k++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)spans[k].begin));
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)spans[k].end));
        cJSON_AddItemToArray(sa, p);
      }
      if (strlen(text) != n)
        cJSON_AddStringToObject(r, "note", "text has NUL bytes");
    }
    free(text);
    free(spans);
    cJSON_AddItemToArray(results, r);
  }
  char *s = cJSON_PrintUnformatted(results);
  fputs(s, stdout);
  fputc('\n', stdout);
  free(s);
  cJSON_Delete(results);
  cJSON_Delete(convs);
  fsdpc__chat_template_destroy(t);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench(char **argv) {
  fsdpc_err err = {0};
  fsdpc_chat_template *t = NULL;
  if (fsdpc__chat_template_load(argv[2], NULL, NULL, &t, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  cJSON *convs = read_json(argv[3]);
  if (!convs) {
    fsdpc__chat_template_destroy(t);
    return 2;
  }
  long repeat = atol(argv[4]);
  double content = 0, rendered = 0, spans_total = 0;
  long n = 0;
  double t0 = now_s();
  for (long r = 0; r < repeat; r++) {
    const cJSON *c;
    cJSON_ArrayForEach(c, convs) {
      const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages"), *m;
      if (r == 0)
        cJSON_ArrayForEach(m, msgs) content +=
            (double)strlen(cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
      char *text = NULL;
      size_t len = 0, ns = 0;
      fsdpc_chat_span *spans = NULL;
      if (fsdpc__chat_render(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, &text, &len, &spans, &ns,
                             &err) != FSDPC_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
      }
      rendered += (double)len;
      spans_total += (double)ns;
      free(text);
      free(spans);
      n++;
    }
  }
  double dt = now_s() - t0;
  printf("%s: %ld conversations in %.3f s: %.0f conversations/s, %.2f MB/s of message content, "
         "%.2f MB/s of rendered text, %.1f spans per conversation\n",
         argv[2], n, dt, (double)n / dt, content * (double)repeat / dt / 1e6, rendered / dt / 1e6,
         spans_total / (double)n);
  cJSON_Delete(convs);
  fsdpc__chat_template_destroy(t);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "bench"))
    return bench(argv);
  if (argc >= 4 && !strcmp(argv[1], "raw"))
    return raw(argc, argv);
  if (argc >= 4 && !strcmp(argv[1], "chat"))
    return chat(argc, argv);
  fprintf(stderr, "usage: fsdpc_chat_render chat MODEL_DIR CONVS.json [EPOCH] [TRAIN_ON]\n"
                  "       fsdpc_chat_render raw TEMPLATE VARS.json [EPOCH]\n");
  return 2;
}
