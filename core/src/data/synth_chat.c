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

/* Tool-calling conversations for a byte-level model of two layers,
 * fine-tuned from the `--task codes` pre-training (configs/tiny-tools-cpu.yaml):
 * the question names a city by a three-letter code (the message's last
 * word, in quotes), the tool is picked by a keyword of the message, and
 * the call's argument is a copy of the code. The code's letters come from
 * three disjoint sets, one per place, none of them in the rest of the
 * text; the combinations the held-out rule picks never occur. */
static const char *const code_letters[FSDPC_SYNTH_TOOLS_CODE_LEN] = {"BCDFGJ", "KLMNOE", "PQRSUV"};
/* The code is quoted (JSON-escaped here) as the call quotes it: the call's
 * opening quote then finds it by the quote before it, with the copying
 * heads that `--task codes` pre-training forms. Unquoted, the first letter
 * stays at chance after hundreds of SFT steps (docs/data.md). */
static const char *const weather_styles[] = {
    "Weather in \\\"%s\\\"?", "Is it raining in \\\"%s\\\"?", "How hot is it in \\\"%s\\\"?"};
static const char *const traffic_styles[] = {
    "Traffic in \\\"%s\\\"?", "Are the roads busy in \\\"%s\\\"?", "Any jams in \\\"%s\\\"?"};
static const char *const skies[] = {"sunny", "rainy", "snowy", "windy"};
static const char *const roads[] = {"light", "heavy"};
#define N_STYLES (sizeof weather_styles / sizeof *weather_styles)

/* The tools column every conversation declares (as OpenAI-style requests
 * and TRL's datasets carry it: JSON schemas). */
static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The "
    "weather in a city now.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
    "{\"type\":\"string\",\"description\":\"The city's three-letter "
    "code.\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_traffic\",\"description\":\"The "
    "road traffic in a city now.\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"city\":{\"type\":\"string\",\"description\":\"The city's three-letter "
    "code.\"}},\"required\":"
    "[\"city\"]}}}]";

int fsdpc__synth_tools_held_out(const char *code) {
  size_t sum = 0;
  for (int k = 0; k < FSDPC_SYNTH_TOOLS_CODE_LEN; k++) {
    const char *at = code[k] ? strchr(code_letters[k], code[k]) : NULL;
    if (!at)
      return 0;
    sum += (size_t)(at - code_letters[k]);
  }
  return sum % FSDPC_SYNTH_TOOLS_HOLD == 0;
}

void fsdpc__synth_tools_code(fsdpc_rng *rng, char out[FSDPC_SYNTH_TOOLS_CODE_LEN + 1]) {
  do {
    for (int k = 0; k < FSDPC_SYNTH_TOOLS_CODE_LEN; k++)
      out[k] = code_letters[k][fsdpc__rng_below(rng, strlen(code_letters[k]))];
    out[FSDPC_SYNTH_TOOLS_CODE_LEN] = 0;
  } while (fsdpc__synth_tools_held_out(out));
}

/* One conversation: the user asks about a city, the assistant calls the
 * tool the keyword asks for with the city, the tool answers, the assistant
 * reports the answer. */
static void tool_conversation(FILE *f, fsdpc_rng *rng) {
  char city[FSDPC_SYNTH_TOOLS_CODE_LEN + 1], q[128];
  fsdpc__synth_tools_code(rng, city);
  int traffic = (int)fsdpc__rng_below(rng, 2);
  const char *const *styles_of = traffic ? traffic_styles : weather_styles;
  snprintf(q, sizeof q, styles_of[fsdpc__rng_below(rng, N_STYLES)], city);
  const char *result = traffic ? roads[fsdpc__rng_below(rng, sizeof roads / sizeof *roads)]
                               : skies[fsdpc__rng_below(rng, sizeof skies / sizeof *skies)];
  const char *tool = traffic ? "get_traffic" : "get_weather";
  fprintf(f,
          "{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\",\"tool_calls\":"
          "[{\"type\":\"function\",\"function\":{\"name\":\"%s\",\"arguments\":"
          "{\"city\":\"%s\"}}}]},{\"role\":\"tool\",\"name\":\"%s\",\"content\":\"%s\"},"
          "{\"role\":\"assistant\",\"content\":\"%s: %s.\"}",
          q, tool, city, tool, result, city, result);
}

/* Tool-calling conversations: every line declares the two tools
 * (get_weather(city), get_traffic(city)) and asks about one city. Codes
 * that fsdpc__synth_tools_held_out picks never occur: held-out prompts
 * for the demo test. */
fsdpc_status fsdpc__synth_tools_write(int64_t n, uint64_t seed, const char *path, fsdpc_err *err) {
  FILE *f;
  fsdpc_out_file tmp;
  FSDPC_TRY(open_tmp(n, path, &f, &tmp, err));
  fsdpc_rng rng;
  fsdpc__rng_seed(&rng, seed);
  for (int64_t i = 0; i < n; i++) {
    fprintf(f, "{\"tools\":%s,\"messages\":[", tools_json);
    tool_conversation(f, &rng);
    fputs("]}\n", f);
  }
  return fsdpc__out_fclose(f, &tmp, err);
}
