/* `fsdpc data synth` and `fsdpc data tokenize`: make token files, from a
 * synthetic task or from text files. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/synth.h"
#include "data/tokenizer.h"
#include "data/tokfile.h"
#include "data_cli.h"

/* ---- synth ------------------------------------------------------------- */

static const char synth_help[] =
    "usage: fsdpc data synth --task arith|qa|copy|reverse|chat|tools --out FILE [options]\n"
    "Writes a synthetic learnable dataset as a token file (byte tokenizer, vocab 259).\n"
    "One example is one document:\n"
    "  arith    \"12+7=19\\n\"                       operands in [0, --max]\n"
    "  qa       \"Q: capital of France?\\nA: Paris\\n\" from a fixed fact table\n"
    "  copy     \"copy abc -> abc\\n\"\n"
    "  reverse  \"reverse abc -> cba\\n\"             1..--max-len letters\n"
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

int fsdpc__data_synth(int argc, char **argv) {
  const char *cmd = "synth", *out = NULL, *v;
  int have_task = 0, chat = 0; /* 1 chat, 2 tools */
  fsdpc_synth_opts o;
  fsdpc__synth_opts_default(&o);
  fsdpc_err err = {0};
  for (int i = 1; i < argc; i++) {
    int r;
    int64_t x;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(synth_help, stdout);
      return 0;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "task", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (strcmp(v, "chat") == 0 || strcmp(v, "tools") == 0) {
        chat = v[0] == 'c' ? 1 : 2;
      } else if (fsdpc__synth_task_parse(v, &o.task, &err) != FSDPC_OK) {
        fprintf(stderr, "fsdpc data synth: %s\n", err.msg);
        return 2;
      }
      have_task = 1;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "out", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      out = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "n", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "n", v, 1, INT64_C(1) << 40, &o.n_docs))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "seed", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_u64(cmd, "seed", v, &o.seed))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "max", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "max", v, 0, 1000000000, &x))
        return 2;
      o.max_operand = (int32_t)x;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "max-len", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "max-len", v, 1, 50, &x))
        return 2;
      o.max_len = (int32_t)x;
    } else if (strcmp(argv[i], "--mask-prompt") == 0) {
      o.mask_prompt = 1;
    } else if (strcmp(argv[i], "--no-mask-prompt") == 0) {
      o.mask_prompt = 0;
    } else {
      return fsdpc__data_bad_arg(cmd, argv[i], 0);
    }
  }
  if (!have_task || !out) {
    fprintf(stderr, "fsdpc data synth: --task and --out are required (see --help)\n");
    return 2;
  }
  if (chat) {
    if ((chat == 1 ? fsdpc__synth_chat_write : fsdpc__synth_tools_write)(o.n_docs, o.seed, out,
                                                                         &err) != FSDPC_OK)
      return fsdpc__data_fail(cmd, &err);
    printf("wrote %s: %s, %" PRId64 " conversations (JSONL; prepare it with `fsdpc data "
           "prepare` or train on it directly)\n",
           out, chat == 1 ? "chat" : "tools", o.n_docs);
    return 0;
  }
  int64_t n_tokens = 0;
  if (fsdpc__synth_write(&o, out, &n_tokens, &err) != FSDPC_OK)
    return fsdpc__data_fail(cmd, &err);
  int masked = o.mask_prompt < 0 ? o.task == FSDPC_SYNTH_QA : o.mask_prompt;
  printf("wrote %s: %s, %" PRId64 " documents, %" PRId64
         " tokens, loss on %s (byte tokenizer, vocab %d)\n",
         out, fsdpc__synth_task_name(o.task), o.n_docs, n_tokens,
         masked ? "answers only" : "every token", FSDPC_BYTE_VOCAB);
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
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, s, n, &ids, &n_ids, err));
  fsdpc_status st = fsdpc__tokfile_writer_add_doc(w, ids, NULL, n_ids, err);
  free(ids);
  if (st == FSDPC_OK)
    ++*n_docs;
  return st;
}

static fsdpc_status tokenize_file(fsdpc_tokfile_writer *w, const fsdpc_tokenizer *tok,
                                  const char *path, int mode, int64_t *n_docs, fsdpc_err *err) {
  char *data = NULL;
  size_t len = 0;
  FSDPC_TRY(fsdpc__data_read_whole(path, &data, &len, err));
  fsdpc_status st = FSDPC_OK;
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

int fsdpc__data_tokenize(int argc, char **argv) {
  const char *cmd = "tokenize", *out = NULL, *v, *tok_spec = "byte";
  int parse_special = 1;
  const char **ins = calloc((size_t)argc, sizeof *ins);
  int n_in = 0, mode = DOC_PER_PARAGRAPH, rc = 2;
  if (!ins)
    return 1;
  for (int i = 1; i < argc; i++) {
    int r;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(tokenize_help, stdout);
      rc = 0;
      goto done;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "in", &v))) {
      if (r < 0) {
        rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
        goto done;
      }
      ins[n_in++] = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "out", &v))) {
      if (r < 0) {
        rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
        goto done;
      }
      out = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0) {
        rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
        goto done;
      }
      tok_spec = v;
    } else if (strcmp(argv[i], "--no-special") == 0) {
      parse_special = 0;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "doc-per", &v))) {
      if (r < 0) {
        rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
        goto done;
      }
      if (strcmp(v, "paragraph") == 0)
        mode = DOC_PER_PARAGRAPH;
      else if (strcmp(v, "line") == 0)
        mode = DOC_PER_LINE;
      else if (strcmp(v, "file") == 0)
        mode = DOC_PER_FILE;
      else {
        fprintf(stderr,
                "fsdpc data tokenize: --doc-per must be paragraph, line or file, got '%s'\n", v);
        goto done;
      }
    } else {
      rc = fsdpc__data_bad_arg(cmd, argv[i], 0);
      goto done;
    }
  }
  if (!n_in || !out) {
    fprintf(stderr, "fsdpc data tokenize: --in and --out are required (see --help)\n");
    goto done;
  }
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  fsdpc_tokfile_writer *w = NULL;
  int64_t n_docs = 0;
  fsdpc_status st = fsdpc__data_open_tokenizer(tok_spec, parse_special, &tok, &err);
  int32_t vocab = st ? 0 : fsdpc__tokenizer_vocab_size(tok);
  int32_t eos = st ? 0 : fsdpc__tokenizer_eos(tok);
  if (!st && eos < 0)
    st = fsdpc__fail(&err, FSDPC_INVALID_USAGE,
                     "%s: the tokenizer has no EOS token (documents need one between them); "
                     "name it as eos_token in tokenizer_config.json",
                     tok_spec);
  if (!st)
    st = fsdpc__tokfile_writer_create(out, (uint32_t)vocab, (uint32_t)eos, 0, &w, &err);
  for (int k = 0; k < n_in && !st; k++)
    st = tokenize_file(w, tok, ins[k], mode, &n_docs, &err);
  if (!st)
    st = fsdpc__tokfile_writer_finish(w, &err);
  fsdpc__tokfile_writer_destroy(w);
  fsdpc__tokenizer_destroy(tok);
  if (st) {
    rc = fsdpc__data_fail(cmd, &err);
    goto done;
  }
  printf("wrote %s: %" PRId64 " documents from %d file(s) (%s tokenizer, vocab %" PRId32
         ", eos %" PRId32 ")\n",
         out, n_docs, n_in, strcmp(tok_spec, "byte") == 0 ? "byte" : "bpe", vocab, eos);
  rc = 0;
done:
  free(ins);
  return rc;
}
