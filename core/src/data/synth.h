/* Synthetic learnable datasets, tokenized with the byte tokenizer, for demos
 * and end-to-end tests: a tiny model should visibly learn them in a minute
 * or two on a couple of CPU cores.
 *
 * Every example is a (prompt, answer) pair; one example is one document.
 *   arith    "12+7=" "19\n"          a, b uniform in [0, max_operand]
 *   qa       "Q: capital of France?\nA: " "Paris\n"   from a fixed fact table
 *   copy     "copy abc -> " "abc\n"
 *   reverse  "reverse abc -> " "cba\n"   1..max_len letters from a..z
 * With the loss mask on (default for qa, --mask-prompt for the others) only
 * the answer tokens are training targets. */
#ifndef FSDPC_DATA_SYNTH_H
#define FSDPC_DATA_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "data/rng.h"
#include "util/err.h"

enum {
  FSDPC_SYNTH_ARITH = 0,
  FSDPC_SYNTH_QA = 1,
  FSDPC_SYNTH_COPY = 2,
  FSDPC_SYNTH_REVERSE = 3,
  FSDPC_SYNTH_CODES = 4, /* the tools task's city codes repeated: pre-training text */
  FSDPC_SYNTH_N_TASKS = 5
};

typedef struct fsdpc_synth_opts {
  int32_t task;   /* FSDPC_SYNTH_* */
  int64_t n_docs; /* examples to write, >= 1 */
  uint64_t seed;
  int32_t mask_prompt; /* 1 on, 0 off, -1 task default (on for qa only) */
  int32_t max_operand; /* arith: operands in [0, max_operand]; default 20 */
  int32_t max_len;     /* copy/reverse: string length 1..max_len; default 6 */
} fsdpc_synth_opts;

void fsdpc__synth_opts_default(fsdpc_synth_opts *opts);
/* "arith" | "qa" | "copy" | "reverse" | "codes" -> FSDPC_SYNTH_*. */
fsdpc_status fsdpc__synth_task_parse(const char *name, int32_t *task, fsdpc_err *err);
const char *fsdpc__synth_task_name(int32_t task);

/* Draws one example; prompt and answer are NUL-terminated and at most 127
 * characters. Deterministic in the rng state. */
void fsdpc__synth_example(const fsdpc_synth_opts *opts, fsdpc_rng *rng, char prompt[128],
                          char answer[128]);

/* The qa fact table (question text as in "Q: <question>\nA: ", answer). */
typedef struct fsdpc_synth_fact {
  const char *question, *answer;
} fsdpc_synth_fact;
const fsdpc_synth_fact *fsdpc__synth_qa_facts(int32_t *n);

/* Writes opts->n_docs examples to a token file at path (byte tokenizer,
 * vocab 259, EOS 257). Reports the token count in *n_tokens (may be NULL). */
fsdpc_status fsdpc__synth_write(const fsdpc_synth_opts *opts, const char *path, int64_t *n_tokens,
                                fsdpc_err *err);

/* Chat data from the qa facts (synth_chat.c): n conversations as JSONL
 * ({"messages": [{role, content}, ...]}) written to path (tmp + rename).
 * A fact f is never asked in phrasing f % FSDPC_SYNTH_CHAT_STYLES, whose
 * printf pattern (one %s: the question) fsdpc__synth_chat_style gives. */
#define FSDPC_SYNTH_CHAT_STYLES 3
fsdpc_status fsdpc__synth_chat_write(int64_t n, uint64_t seed, const char *path, fsdpc_err *err);
const char *fsdpc__synth_chat_style(int k);

/* Tool-calling chat data (synth_chat.c): n conversations as JSONL with a
 * tools column (get_weather(city), get_traffic(city)), a question about a
 * city by its code of FSDPC_SYNTH_TOOLS_CODE_LEN letters (the message's
 * last word, its k-th letter from the k-th of three disjoint sets; a
 * keyword picks the tool), the assistant's tool call with the code, the
 * tool's result and the assistant's answer. A code is held out (never in
 * the data) when fsdpc__synth_tools_held_out says so: the sum of its
 * letters' places in their sets is a multiple of FSDPC_SYNTH_TOOLS_HOLD. */
#define FSDPC_SYNTH_TOOLS_CODE_LEN 3
#define FSDPC_SYNTH_TOOLS_HOLD 6
fsdpc_status fsdpc__synth_tools_write(int64_t n, uint64_t seed, const char *path, fsdpc_err *err);
int fsdpc__synth_tools_held_out(const char *name);
/* A random city code of the tools task that is not held out. */
void fsdpc__synth_tools_code(fsdpc_rng *rng, char out[FSDPC_SYNTH_TOOLS_CODE_LEN + 1]);

#endif
