/* Synthetic dataset generator (see synth.h for the formats). */
#include "data/synth.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "data/tokenizer.h"
#include "data/tokfile.h"

static const fsdpc_synth_fact qa_facts[] = {
    {"capital of France?", "Paris"},    {"capital of Germany?", "Berlin"},
    {"capital of Italy?", "Rome"},      {"capital of Spain?", "Madrid"},
    {"capital of Japan?", "Tokyo"},     {"capital of Egypt?", "Cairo"},
    {"capital of Canada?", "Ottawa"},   {"capital of Peru?", "Lima"},
    {"capital of Kenya?", "Nairobi"},   {"capital of Norway?", "Oslo"},
    {"capital of Greece?", "Athens"},   {"capital of Chile?", "Santiago"},
    {"capital of Poland?", "Warsaw"},   {"capital of Cuba?", "Havana"},
    {"capital of India?", "New Delhi"}, {"capital of Russia?", "Moscow"},
    {"opposite of hot?", "cold"},       {"opposite of up?", "down"},
    {"opposite of big?", "small"},      {"opposite of fast?", "slow"},
    {"opposite of light?", "dark"},     {"opposite of open?", "closed"},
    {"opposite of early?", "late"},     {"opposite of full?", "empty"},
    {"color of the sky?", "blue"},      {"color of grass?", "green"},
    {"color of snow?", "white"},        {"color of coal?", "black"},
    {"color of a banana?", "yellow"},   {"color of blood?", "red"},
    {"legs of a spider?", "eight"},     {"legs of a dog?", "four"},
    {"legs of a bird?", "two"},         {"legs of an ant?", "six"},
    {"days in a week?", "seven"},       {"months in a year?", "twelve"},
    {"sides of a triangle?", "three"},  {"sides of a square?", "four"},
    {"planet we live on?", "Earth"},    {"largest ocean?", "Pacific"},
};

static const char *task_names[FSDPC_SYNTH_N_TASKS] = {"arith", "qa", "copy", "reverse", "codes"};

const fsdpc_synth_fact *fsdpc__synth_qa_facts(int32_t *n) {
  *n = (int32_t)(sizeof qa_facts / sizeof qa_facts[0]);
  return qa_facts;
}

void fsdpc__synth_opts_default(fsdpc_synth_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->task = FSDPC_SYNTH_ARITH;
  opts->n_docs = 30000;
  opts->seed = 1;
  opts->mask_prompt = -1;
  opts->max_operand = 20;
  opts->max_len = 6;
}

fsdpc_status fsdpc__synth_task_parse(const char *name, int32_t *task, fsdpc_err *err) {
  for (int32_t t = 0; t < FSDPC_SYNTH_N_TASKS; t++)
    if (strcmp(name, task_names[t]) == 0) {
      *task = t;
      return FSDPC_OK;
    }
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "unknown synthetic task '%s' (choose arith, qa, copy, reverse or codes)",
                     name);
}

const char *fsdpc__synth_task_name(int32_t task) {
  return task >= 0 && task < FSDPC_SYNTH_N_TASKS ? task_names[task] : "?";
}

void fsdpc__synth_example(const fsdpc_synth_opts *o, fsdpc_rng *rng, char prompt[128],
                          char answer[128]) {
  switch (o->task) {
  case FSDPC_SYNTH_ARITH: {
    uint64_t range = (uint64_t)o->max_operand + 1;
    int64_t a = (int64_t)fsdpc__rng_below(rng, range);
    int64_t b = (int64_t)fsdpc__rng_below(rng, range);
    snprintf(prompt, 128, "%" PRId64 "+%" PRId64 "=", a, b);
    snprintf(answer, 128, "%" PRId64 "\n", a + b);
    break;
  }
  case FSDPC_SYNTH_QA: {
    int32_t n;
    const fsdpc_synth_fact *f = fsdpc__synth_qa_facts(&n);
    f += fsdpc__rng_below(rng, (uint64_t)n);
    snprintf(prompt, 128, "Q: %s\nA: ", f->question);
    snprintf(answer, 128, "%s\n", f->answer);
    break;
  }
  case FSDPC_SYNTH_CODES: {
    /* A text that repeats the tools task's city codes (held-out codes never
     * occur), half as a plain copy, half as a JSON record's value after
     * other quoted strings, as a tool call writes it: pre-training that
     * forms the copying heads of the tools demo's SFT (test_demo_tools.sh). */
    char code[FSDPC_SYNTH_TOOLS_CODE_LEN + 1];
    fsdpc__synth_tools_code(rng, code);
    int record = (int)fsdpc__rng_below(rng, 2);
    snprintf(prompt, 128,
             record ? "code \"%s\": {\"name\": \"code\", \"value\": \"" : "code \"%s\" = \"", code);
    snprintf(answer, 128, record ? "%s\"}\n" : "%s\"\n", code);
    break;
  }
  default: { /* copy, reverse */
    char s[64];
    int len = 1 + (int)fsdpc__rng_below(rng, (uint64_t)o->max_len);
    for (int i = 0; i < len; i++)
      s[i] = (char)('a' + fsdpc__rng_below(rng, 26));
    s[len] = '\0';
    snprintf(prompt, 128, "%s %s -> ", o->task == FSDPC_SYNTH_COPY ? "copy" : "reverse", s);
    if (o->task == FSDPC_SYNTH_REVERSE)
      for (int i = 0; i < len / 2; i++) {
        char t = s[i];
        s[i] = s[len - 1 - i];
        s[len - 1 - i] = t;
      }
    snprintf(answer, 128, "%s\n", s);
    break;
  }
  }
}

static fsdpc_status check_opts(const fsdpc_synth_opts *o, fsdpc_err *err) {
  if (o->task < 0 || o->task >= FSDPC_SYNTH_N_TASKS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "synth: unknown task %" PRId32, o->task);
  if (o->n_docs < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "synth: --n must be >= 1, got %" PRId64,
                       o->n_docs);
  if (o->max_operand < 0 || o->max_operand > 1000000000)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "synth: --max must be in [0, 1e9], got %" PRId32,
                       o->max_operand);
  if (o->max_len < 1 || o->max_len > 50)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "synth: --max-len must be in [1, 50], got %" PRId32, o->max_len);
  return FSDPC_OK;
}

fsdpc_status fsdpc__synth_write(const fsdpc_synth_opts *o, const char *path, int64_t *n_tokens,
                                fsdpc_err *err) {
  FSDPC_TRY(check_opts(o, err));
  int mask = o->mask_prompt < 0 ? o->task == FSDPC_SYNTH_QA : o->mask_prompt != 0;
  fsdpc_tokenizer *tok = NULL;
  fsdpc_tokfile_writer *w = NULL;
  fsdpc_status st;
  if ((st = fsdpc__tokenizer_byte_create(&tok, err)) != FSDPC_OK)
    return st;
  st = fsdpc__tokfile_writer_create(path, (uint32_t)fsdpc__tokenizer_vocab_size(tok),
                                    (uint32_t)fsdpc__tokenizer_eos(tok), mask, &w, err);
  if (st != FSDPC_OK)
    goto done;
  fsdpc_rng rng;
  fsdpc__rng_seed(&rng, o->seed);
  int64_t total = 0;
  for (int64_t d = 0; d < o->n_docs; d++) {
    char prompt[128], answer[128];
    fsdpc__synth_example(o, &rng, prompt, answer);
    int32_t ids[128];
    uint8_t zeros[128] = {0};
    int64_t n;
    if ((st = fsdpc__tokenizer_encode(tok, prompt, strlen(prompt), ids, 128, &n, err)) ||
        (st = fsdpc__tokfile_writer_append(w, ids, mask ? zeros : NULL, n, err)))
      goto done;
    total += n;
    if ((st = fsdpc__tokenizer_encode(tok, answer, strlen(answer), ids, 128, &n, err)) ||
        (st = fsdpc__tokfile_writer_add_doc(w, ids, NULL, n, err)))
      goto done;
    total += n;
  }
  st = fsdpc__tokfile_writer_finish(w, err);
  if (st == FSDPC_OK && n_tokens)
    *n_tokens = total;
done:
  fsdpc__tokfile_writer_destroy(w);
  fsdpc__tokenizer_destroy(tok);
  return st;
}
