/* `fsdpc data synth` and `fsdpc data tokenize`: make token files, from a
 * synthetic task or from text files. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_cli.h"

/* ---- synth ------------------------------------------------------------- */

static const char synth_help[] =
    "usage: fsdpc data synth --task arith|qa|copy|reverse|codes|chat|tools --out FILE [options]\n"
    "Writes a synthetic learnable dataset as a token file (byte tokenizer, vocab 259).\n"
    "One example is one document:\n"
    "  arith    \"12+7=19\\n\"                       operands in [0, --max]\n"
    "  qa       \"Q: capital of France?\\nA: Paris\\n\" from a fixed fact table\n"
    "  copy     \"copy abc -> abc\\n\"\n"
    "  reverse  \"reverse abc -> cba\\n\"             1..--max-len letters\n"
    "  codes    \"code BKP = \\\"BKP\\\"\\n\"              the tools task's city codes, held-out\n"
    "           codes never: pre-training text for the tools demo\n"
    "  chat     the qa facts as chat JSONL ({\"messages\": [...]}, not a token file),\n"
    "           one or two exchanges per conversation (configs/tiny-chat-cpu.yaml)\n"
    "  tools    tool-calling chat JSONL: a tools column, assistant tool calls, tool\n"
    "           results and answers (configs/tiny-tools-cpu.yaml)\n"
    "options:\n"
    "  --n N             number of examples (default 30000)\n"
    "  --seed S          generator seed (default 1)\n"
    "  --max M           arith: largest operand (default 20)\n"
    "  --max-len L       copy/reverse: longest string, 1..50 (default 6)\n"
    "  --mask-prompt     train only on answers (default for qa)\n"
    "  --no-mask-prompt  train on every token (default for the others)\n";

enum { S_TASK = 256, S_OUT, S_N, S_SEED, S_MAX, S_MAX_LEN, S_MASK, S_NO_MASK };
static const cli_opt synth_opts[] = {{"task", S_TASK, "arith|qa|copy|reverse|codes|chat|tools"},
                                     {"out", S_OUT, "FILE"},
                                     {"n", S_N, "N"},
                                     {"seed", S_SEED, "S"},
                                     {"max", S_MAX, "M"},
                                     {"max-len", S_MAX_LEN, "L"},
                                     {"mask-prompt", S_MASK, NULL},
                                     {"no-mask-prompt", S_NO_MASK, NULL},
                                     {0}};
const cli_cmd fsdpc__data_synth_cmd = {"data synth", synth_help, synth_opts};

/* One argument of synth: 1, or 0 after a usage error. */
static int synth_arg(void *ctx, int r, const char *v) {
  const cli_cmd *cmd = &fsdpc__data_synth_cmd;
  fsdpc_synth_args *a = ctx;
  static const char *const tasks[] = {"arith", "qa", "copy", "reverse", "codes", "chat", "tools"};
  int i;
  switch (r) {
  case S_TASK:
    return (i = cli_choice(cmd, "task", v, tasks, 7)) >= 0 && (a->task = tasks[i]);
  case S_OUT:
    return (a->out = v) != NULL;
  case S_N:
    return cli_int(cmd, "n", v, 1, INT64_C(1) << 40, &a->n);
  case S_SEED:
    return cli_u64(cmd, "seed", v, &a->seed);
  case S_MAX:
    return cli_i32(cmd, "max", v, 0, 1000000000, &a->max_operand);
  case S_MAX_LEN:
    return cli_i32(cmd, "max-len", v, 1, 50, &a->max_len);
  case S_MASK:
  case S_NO_MASK:
    a->mask_prompt = r == S_MASK;
    return 1;
  default:
    return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
  }
}

int fsdpc__data_synth(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_synth_cmd;
  fsdpc_synth_args a;
  fsdpc_synth_args_init(&a);
  int rc = cli_parse(cmd, argc, argv, synth_arg, &a);
  if (rc < 0 && (!a.task || !a.out))
    rc = cli_usage_error(cmd, "--task and --out are required");
  if (rc >= 0)
    return rc;
  fsdpc_err err = {0};
  fsdpc_synth_result res = {.struct_size = sizeof res};
  if (fsdpc_data_synth(&a, &res, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  if (res.tokens == 0) /* chat or tools: JSONL */
    printf("wrote %s: %s, %" PRId64 " conversations (JSONL; prepare it with `fsdpc data "
           "prepare` or train on it directly)\n",
           a.out, a.task, res.examples);
  else
    printf("wrote %s: %s, %" PRId64 " documents, %" PRId64
           " tokens, loss on %s (byte tokenizer, vocab %d)\n",
           a.out, a.task, res.examples, res.tokens, res.masked ? "answers only" : "every token",
           (int)res.vocab_size);
  return 0;
}

/* ---- tokenize ---------------------------------------------------------- */

static const char tokenize_help[] =
    "usage: fsdpc data tokenize --in TEXT [--in TEXT ...] --out FILE [options]\n"
    "Tokenizes text files into a token file (vocab size and EOS id of the tokenizer).\n"
    "  --tokenizer T        byte (default: ids 0..255 are bytes; vocab 259, EOS 257), or a\n"
    "                       Hugging Face tokenizer.json or a folder holding one (BPE:\n"
    "                       Llama 3 byte-level, Llama 2 SentencePiece-converted)\n"
    "  --no-special         encode special-token strings such as <|eot_id|> as plain text\n"
    "                       (default: they become their ids)\n"
    "  --doc-per paragraph  one document per blank-line-separated paragraph (default);\n"
    "                       lines of only spaces/tabs/CR count as blank\n"
    "  --doc-per line       one document per non-blank line (newline kept)\n"
    "  --doc-per file       one document per input file\n"
    "Empty documents are skipped.\n";

enum { DOC_PER_PARAGRAPH, DOC_PER_LINE, DOC_PER_FILE };

static int is_blank_line(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
      return 0;
  return 1;
}

static fsdpc_status add_text_doc(fsdpc_tokfile_writer *w, const fsdpc_tokenizer *tok, const char *s,
                                 size_t n, int64_t *n_docs, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  int32_t *ids;
  int64_t n_ids;
  fsdpc_status st = fsdpc_tokenizer_encode(tok, s, n, &ids, &n_ids, NULL, err);
  if (st != FSDPC_OK)
    return st;
  st = fsdpc_tokfile_writer_add(w, ids, NULL, n_ids, err);
  fsdpc_free(ids);
  if (st == FSDPC_OK)
    ++*n_docs;
  return st;
}

static fsdpc_status tokenize_file(fsdpc_tokfile_writer *w, const fsdpc_tokenizer *tok,
                                  const char *path, int mode, int64_t *n_docs, fsdpc_err *err) {
  char *data = NULL;
  size_t len = 0;
  fsdpc_status st = fsdpc__data_read_whole(path, &data, &len, err);
  if (st != FSDPC_OK)
    return st;
  if (mode == DOC_PER_FILE) {
    st = add_text_doc(w, tok, data, len, n_docs, err);
  } else {
    size_t doc_start = 0, pos = 0;
    int in_doc = 0;
    while (pos < len && st == FSDPC_OK) {
      const char *nl = memchr(data + pos, '\n', len - pos);
      size_t end = nl ? (size_t)(nl - data) + 1 : len; /* line is [pos, end) */
      int blank = is_blank_line(data + pos, end - pos);
      if (mode == DOC_PER_LINE) {
        if (!blank)
          st = add_text_doc(w, tok, data + pos, end - pos, n_docs, err);
      } else if (blank && in_doc) {
        st = add_text_doc(w, tok, data + doc_start, pos - doc_start, n_docs, err);
        in_doc = 0;
      } else if (!blank && !in_doc) {
        doc_start = pos;
        in_doc = 1;
      }
      pos = end;
    }
    if (st == FSDPC_OK && in_doc)
      st = add_text_doc(w, tok, data + doc_start, len - doc_start, n_docs, err);
  }
  free(data);
  return st;
}

enum { T_IN = 256, T_OUT, T_TOKENIZER, T_NO_SPECIAL, T_DOC_PER };
static const cli_opt tokenize_opts[] = {{"in", T_IN, "TEXT"},
                                        {"out", T_OUT, "FILE"},
                                        {"tokenizer", T_TOKENIZER, "T"},
                                        {"no-special", T_NO_SPECIAL, NULL},
                                        {"doc-per", T_DOC_PER, "paragraph|line|file"},
                                        {0}};
const cli_cmd fsdpc__data_tokenize_cmd = {"data tokenize", tokenize_help, tokenize_opts};

typedef struct tok_args {
  const char **ins;
  int n_in, mode;
  uint32_t flags;
  const char *out, *tok_spec;
} tok_args;

static int tokenize_arg(void *ctx, int r, const char *v) {
  static const char *const units[] = {"paragraph", "line", "file"}; /* DOC_PER_* */
  const cli_cmd *cmd = &fsdpc__data_tokenize_cmd;
  tok_args *a = ctx;
  if (r == T_IN)
    a->ins[a->n_in++] = v;
  else if (r == T_OUT)
    a->out = v;
  else if (r == T_TOKENIZER)
    a->tok_spec = v;
  else if (r == T_NO_SPECIAL)
    a->flags = FSDPC_TOKENIZER_NO_SPECIAL;
  else if (r == T_DOC_PER)
    return (a->mode = cli_choice(cmd, "doc-per", v, units, 3)) >= 0;
  else
    return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
  return 1;
}

/* -1 to go on, else the exit code. */
static int tokenize_parse(int argc, char **argv, tok_args *a) {
  const cli_cmd *cmd = &fsdpc__data_tokenize_cmd;
  int rc = cli_parse(cmd, argc, argv, tokenize_arg, a);
  if (rc < 0 && (!a->n_in || !a->out))
    rc = cli_usage_error(cmd, "--in and --out are required");
  return rc;
}

int fsdpc__data_tokenize(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_tokenize_cmd;
  tok_args a = {.mode = DOC_PER_PARAGRAPH, .tok_spec = "byte"};
  if (!(a.ins = calloc((size_t)argc + 1, sizeof *a.ins)))
    return 1;
  int rc = tokenize_parse(argc, argv, &a);
  if (rc >= 0) {
    free(a.ins);
    return rc;
  }
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  fsdpc_tokfile_writer *w = NULL;
  fsdpc_tokenizer_info ti = {.struct_size = sizeof ti};
  int64_t n_docs = 0;
  fsdpc_status st = fsdpc_tokenizer_open(a.tok_spec, a.flags, &tok, &err);
  if (st == FSDPC_OK)
    fsdpc_tokenizer_describe(tok, &ti);
  if (st == FSDPC_OK && ti.eos < 0)
    st = cli_error(&err, FSDPC_INVALID_USAGE,
                   "%s: the tokenizer has no EOS token (documents need one between them); "
                   "name it as eos_token in tokenizer_config.json",
                   a.tok_spec);
  if (st == FSDPC_OK)
    st = fsdpc_tokfile_writer_open(a.out, (uint32_t)ti.vocab_size, (uint32_t)ti.eos, 0, &w, &err);
  for (int k = 0; k < a.n_in && st == FSDPC_OK; k++)
    st = tokenize_file(w, tok, a.ins[k], a.mode, &n_docs, &err);
  if (st == FSDPC_OK)
    st = fsdpc_tokfile_writer_finish(w, &err);
  fsdpc_tokfile_writer_destroy(w);
  fsdpc_tokenizer_destroy(tok);
  if (st == FSDPC_OK)
    printf("wrote %s: %" PRId64 " documents from %d file(s) (%s tokenizer, vocab %" PRId32
           ", eos %" PRId32 ")\n",
           a.out, n_docs, a.n_in, strcmp(a.tok_spec, "byte") == 0 ? "byte" : "bpe", ti.vocab_size,
           ti.eos);
  free(a.ins);
  return st == FSDPC_OK ? 0 : cli_fail(cmd, err.msg);
}
