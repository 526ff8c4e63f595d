/* `fsdpc data synth --task chat`: the qa facts as OpenAI-style chat JSONL, to
 * fine-tune the tiny CPU model as a chat model (configs/tiny-chat-cpu.yaml).
 * `--task tools`: tool-calling conversations (configs/tiny-tools-cpu.yaml),
 * see the comment above fsdpc__synth_tools_write.
 *
 * A conversation has one or two user/assistant exchanges, sometimes after a
 * system prompt. A question is asked in one of FSDPC_SYNTH_CHAT_STYLES
 * phrasings; the pair (fact f, phrasing f % STYLES) never occurs, so every
 * fact has a phrasing the model was not trained on (a held-out prompt for
 * the demo test), and every phrasing is seen with other facts. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/synth.h"
#include "util/fs.h"

static const char *const styles[FSDPC_SYNTH_CHAT_STYLES] = {"%s", "Tell me: %s",
                                                            "Quick question: %s"};

const char *fsdpc__synth_chat_style(int k) {
  return k >= 0 && k < FSDPC_SYNTH_CHAT_STYLES ? styles[k] : NULL;
}

/* Writes s as a JSON string (the facts are plain ASCII; quotes and
 * backslashes escaped all the same). */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void exchange(FILE *f, fsdpc_rng *rng, int first) {
  int32_t n;
  const fsdpc_synth_fact *facts = fsdpc__synth_qa_facts(&n);
  int fi = (int)fsdpc__rng_below(rng, (uint64_t)n);
  /* any phrasing but the held-out one of this fact */
  int k =
      (fi + 1 + (int)fsdpc__rng_below(rng, FSDPC_SYNTH_CHAT_STYLES - 1)) % FSDPC_SYNTH_CHAT_STYLES;
  char q[256];
  snprintf(q, sizeof q, styles[k], facts[fi].question);
  fputs(first ? "{\"role\":\"user\",\"content\":" : ",{\"role\":\"user\",\"content\":", f);
  json_str(f, q);
  fputs("},{\"role\":\"assistant\",\"content\":", f);
  json_str(f, facts[fi].answer);
  fputc('}', f);
}

/* Opens a private temporary file beside path (util/fs.h; the folder made as
 * the token-file writer does), renamed into place by fsdpc__out_fclose;
 * refuses a count n below 1 first. */
static fsdpc_status open_tmp(int64_t n, const char *path, FILE **f, fsdpc_out_file *out,
                             fsdpc_err *err) {
  if (n < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "synth: --n must be >= 1, got %lld", (long long)n);
  FSDPC_TRY(fsdpc__mkdir_parent(path, err));
  return fsdpc__out_fopen(path, out, f, err);
}

fsdpc_status fsdpc__synth_chat_write(int64_t n, uint64_t seed, const char *path, fsdpc_err *err) {
  FILE *f;
  fsdpc_out_file tmp;
  FSDPC_TRY(open_tmp(n, path, &f, &tmp, err));
  fsdpc_rng rng;
  fsdpc__rng_seed(&rng, seed);
  for (int64_t i = 0; i < n; i++) {
    fputs("{\"messages\":[", f);
    int sys = fsdpc__rng_below(&rng, 4) == 0;
    if (sys)
      fputs("{\"role\":\"system\",\"content\":\"You answer in one word.\"}", f);
    int turns = 1 + (int)fsdpc__rng_below(&rng, 2);
    for (int t = 0; t < turns; t++)
      exchange(f, &rng, t == 0 && !sys);
    fputs("]}\n", f);
  }
  return fsdpc__out_fclose(f, &tmp, err);
}

/* ---- tools ------------------------------------------------------------- */

/* first letters all different; every phrasing ends with the argument */
static const char *const cities[FSDPC_SYNTH_TOOLS_CITIES] = {"Paris", "Rome",  "Tokyo", "Lima",
                                                             "Oslo",  "Cairo", "Delhi", "Seoul"};
static const char *const weather_styles[FSDPC_SYNTH_CHAT_STYLES] = {
    "Weather in %s?", "What is the weather like in %s?", "How warm is it in %s?"};
static const char *const add_styles[FSDPC_SYNTH_CHAT_STYLES] = {
    "What is %d plus %d?", "Add %d and %d.", "Sum of %d and %d?"};
static const char *const skies[] = {"sunny", "rain", "snow", "cloudy", "windy"};

/* The tools column every conversation declares (as OpenAI-style requests
 * and TRL's datasets carry it: JSON schemas). */
static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The "
    "weather in a city now.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
    "{\"type\":\"string\",\"description\":\"The city name.\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"description\":\"The sum of two "
    "integers.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
    "\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}}]";

/* One any-phrasing-but-the-held-out-one index for key. */
static int style_for(fsdpc_rng *rng, int key) {
  return (key + 1 + (int)fsdpc__rng_below(rng, FSDPC_SYNTH_CHAT_STYLES - 1)) %
         FSDPC_SYNTH_CHAT_STYLES;
}

/* A weather conversation: the user asks, the assistant calls get_weather
 * with the city, the tool answers, the assistant reports the answer. */
static void weather(FILE *f, fsdpc_rng *rng) {
  int c = (int)fsdpc__rng_below(rng, FSDPC_SYNTH_TOOLS_CITIES);
  char q[128];
  snprintf(q, sizeof q, weather_styles[style_for(rng, c)], cities[c]);
  const char *sky = skies[fsdpc__rng_below(rng, sizeof skies / sizeof *skies)];
  int deg = (int)fsdpc__rng_below(rng, 41) - 5;
  fprintf(f,
          "{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\",\"tool_calls\":"
          "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
          "{\"city\":\"%s\"}}}]},{\"role\":\"tool\",\"name\":\"get_weather\",\"content\":"
          "\"%s, %d C\"},{\"role\":\"assistant\",\"content\":\"%s: %s, %d C.\"}",
          q, cities[c], sky, deg, cities[c], sky, deg);
}

/* An add conversation: the call carries the two operands as JSON numbers. */
static void add(FILE *f, fsdpc_rng *rng) {
  int a = (int)fsdpc__rng_below(rng, 10), b = (int)fsdpc__rng_below(rng, 10);
  char q[128];
  snprintf(q, sizeof q, add_styles[style_for(rng, a + b)], a, b);
  fprintf(f,
          "{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\",\"tool_calls\":"
          "[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":"
          "{\"a\":%d,\"b\":%d}}}]},{\"role\":\"tool\",\"name\":\"add\",\"content\":\"%d\"},"
          "{\"role\":\"assistant\",\"content\":\"The sum is %d.\"}",
          q, a, b, a + b, a + b);
}

/* Tool-calling conversations: every line declares the two tools
 * (get_weather(city), add(a, b)) and asks the weather in one of 8 cities or
 * the sum of two digits. A weather question about city c is never asked in
 * phrasing c % STYLES, a sum a + b never in phrasing (a + b) % STYLES:
 * held-out prompts for the demo test. */
fsdpc_status fsdpc__synth_tools_write(int64_t n, uint64_t seed, const char *path, fsdpc_err *err) {
  FILE *f;
  fsdpc_out_file tmp;
  FSDPC_TRY(open_tmp(n, path, &f, &tmp, err));
  fsdpc_rng rng;
  fsdpc__rng_seed(&rng, seed);
  for (int64_t i = 0; i < n; i++) {
    fprintf(f, "{\"tools\":%s,\"messages\":[", tools_json);
    if (fsdpc__rng_below(&rng, 2))
      weather(f, &rng);
    else
      add(f, &rng);
    fputs("]}\n", f);
  }
  return fsdpc__out_fclose(f, &tmp, err);
}
