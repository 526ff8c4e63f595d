/* `fsdpc data synth --task chat`: the qa facts as OpenAI-style chat JSONL, to
 * fine-tune the tiny CPU model as a chat model (configs/tiny-chat-cpu.yaml).
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

fsdpc_status fsdpc__synth_chat_write(int64_t n, uint64_t seed, const char *path, fsdpc_err *err) {
  if (n < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "synth: --n must be >= 1, got %lld", (long long)n);
  fsdpc_status pst = fsdpc__mkdir_parent(path, err); /* as the token-file writer does */
  if (pst != FSDPC_OK)
    return pst;
  char *tmp = NULL;
  if (asprintf(&tmp, "%s.tmp", path) < 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  FILE *f = fopen(tmp, "w");
  if (!f) {
    fsdpc_status st =
        fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot create: %s", path, strerror(errno));
    free(tmp);
    return st;
  }
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
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    fsdpc_status st =
        fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: write failed: %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return st;
  }
  free(tmp);
  return FSDPC_OK;
}
