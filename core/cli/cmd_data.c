/* `fsdpc data ...`: make and inspect token files.
 *   synth     write a synthetic learnable dataset (arith, qa, copy, reverse)
 *   tokenize  tokenize text files into a token file (byte or tokenizer.json BPE)
 *   encode    print the ids of a text (checking a tokenizer)
 *   decode    print the text of ids
 *   info      print a token file's header, counts and a decoded preview
 *   batch     print the windows of one global batch as the loader serves them */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "data/loader.h"
#include "data/synth.h"
#include "data/tokenizer.h"
#include "data/tokfile.h"

/* ---- argument helpers -------------------------------------------------- */

/* If argv[*i] is --name or --name=VALUE, sets *val (the next argument in the
 * first form) and returns 1; returns -1 if the value is missing. */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
    return 0;
  if (a[2 + n] == '=') {
    *val = a + 3 + n;
    return 1;
  }
  if (a[2 + n] != '\0')
    return 0;
  if (*i + 1 >= argc)
    return -1;
  *val = argv[++*i];
  return 1;
}

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static int parse_i64(const char *cmd, const char *name, const char *s, int64_t lo, int64_t hi,
                     int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr,
            "fsdpc data %s: --%s expects an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n", cmd,
            name, lo, hi, s);
    return 0;
  }
  *out = v;
  return 1;
}

static int parse_u64(const char *cmd, const char *name, const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || s[0] == '-') {
    fprintf(stderr, "fsdpc data %s: --%s expects a non-negative integer, got '%s'\n", cmd, name, s);
    return 0;
  }
  *out = v;
  return 1;
}

static int bad_arg(const char *cmd, const char *arg, int missing) {
  if (missing)
    fprintf(stderr, "fsdpc data %s: %s needs a value (see `fsdpc data %s --help`)\n", cmd, arg,
            cmd);
  else
    fprintf(stderr, "fsdpc data %s: unknown argument '%s' (see `fsdpc data %s --help`)\n", cmd, arg,
            cmd);
  return 2;
}

static int fail(const char *cmd, const fsdpc_err *err) {
  fprintf(stderr, "fsdpc data %s: %s\n", cmd, err->msg);
  return 1;
}

/* Prints bytes C-escaped inside quotes; stops after max bytes. */
static void print_escaped(FILE *f, const unsigned char *s, size_t n, size_t max) {
  for (size_t i = 0; i < n && i < max; i++) {
    unsigned char c = s[i];
    if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c == '\\')
      fputs("\\\\", f);
    else if (c == '"')
      fputs("\\\"", f);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(f, "\\x%02x", c);
    else
      fputc(c, f);
  }
  if (n > max)
    fputs("...", f);
}

/* ---- synth ------------------------------------------------------------- */

static const char synth_help[] =
    "usage: fsdpc data synth --task arith|qa|copy|reverse --out FILE [options]\n"
    "Writes a synthetic learnable dataset as a token file (byte tokenizer, vocab 259).\n"
    "One example is one document:\n"
    "  arith    \"12+7=19\\n\"                       operands in [0, --max]\n"
    "  qa       \"Q: capital of France?\\nA: Paris\\n\" from a fixed fact table\n"
    "  copy     \"copy abc -> abc\\n\"\n"
    "  reverse  \"reverse abc -> cba\\n\"             1..--max-len letters\n"
    "options:\n"
    "  --n N             number of examples (default 30000)\n"
    "  --seed S          generator seed (default 1)\n"
    "  --max M           arith: largest operand (default 20)\n"
    "  --max-len L       copy/reverse: longest string, 1..50 (default 6)\n"
    "  --mask-prompt     train only on answers (default for qa)\n"
    "  --no-mask-prompt  train on every token (default for the others)\n";

static int cmd_synth(int argc, char **argv) {
  const char *cmd = "synth", *out = NULL, *v;
  int have_task = 0;
  fsdpc_synth_opts o;
  fsdpc__synth_opts_default(&o);
  fsdpc_err err = {0};
  for (int i = 1; i < argc; i++) {
    int r;
    int64_t x;
    if (is_help(argv[i])) {
      fputs(synth_help, stdout);
      return 0;
    } else if ((r = opt_value(argc, argv, &i, "task", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (fsdpc__synth_task_parse(v, &o.task, &err) != FSDPC_OK) {
        fprintf(stderr, "fsdpc data synth: %s\n", err.msg);
        return 2;
      }
      have_task = 1;
    } else if ((r = opt_value(argc, argv, &i, "out", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      out = v;
    } else if ((r = opt_value(argc, argv, &i, "n", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "n", v, 1, INT64_C(1) << 40, &o.n_docs))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "seed", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_u64(cmd, "seed", v, &o.seed))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "max", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "max", v, 0, 1000000000, &x))
        return 2;
      o.max_operand = (int32_t)x;
    } else if ((r = opt_value(argc, argv, &i, "max-len", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "max-len", v, 1, 50, &x))
        return 2;
      o.max_len = (int32_t)x;
    } else if (strcmp(argv[i], "--mask-prompt") == 0) {
      o.mask_prompt = 1;
    } else if (strcmp(argv[i], "--no-mask-prompt") == 0) {
      o.mask_prompt = 0;
    } else {
      return bad_arg(cmd, argv[i], 0);
    }
  }
  if (!have_task || !out) {
    fprintf(stderr, "fsdpc data synth: --task and --out are required (see --help)\n");
    return 2;
  }
  int64_t n_tokens = 0;
  if (fsdpc__synth_write(&o, out, &n_tokens, &err) != FSDPC_OK)
    return fail(cmd, &err);
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

static fsdpc_status read_whole(const char *path, char **data, size_t *len, fsdpc_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    char *b = realloc(buf, cap * 2);
    if (!b)
      free(buf);
    buf = b;
    cap *= 2;
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: read failed", path);
  }
  *data = buf;
  *len = n;
  return FSDPC_OK;
}

static fsdpc_status tokenize_file(fsdpc_tokfile_writer *w, const fsdpc_tokenizer *tok,
                                  const char *path, int mode, int64_t *n_docs, fsdpc_err *err) {
  char *data = NULL;
  size_t len = 0;
  FSDPC_TRY(read_whole(path, &data, &len, err));
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

/* Opens "byte" or a tokenizer.json/folder; parse_special applies to BPE. */
static fsdpc_status open_tokenizer(const char *spec, int parse_special, fsdpc_tokenizer **tok,
                                   fsdpc_err *err) {
  if (strcmp(spec, "byte") == 0)
    return fsdpc__tokenizer_byte_create(tok, err);
  fsdpc_bpe_opts o;
  fsdpc__bpe_opts_default(&o);
  o.parse_special = parse_special;
  return fsdpc__tokenizer_bpe_create(spec, &o, tok, err);
}

static int cmd_tokenize(int argc, char **argv) {
  const char *cmd = "tokenize", *out = NULL, *v, *tok_spec = "byte";
  int parse_special = 1;
  const char **ins = calloc((size_t)argc, sizeof *ins);
  int n_in = 0, mode = DOC_PER_PARAGRAPH, rc = 2;
  if (!ins)
    return 1;
  for (int i = 1; i < argc; i++) {
    int r;
    if (is_help(argv[i])) {
      fputs(tokenize_help, stdout);
      rc = 0;
      goto done;
    } else if ((r = opt_value(argc, argv, &i, "in", &v))) {
      if (r < 0) {
        rc = bad_arg(cmd, argv[i], 1);
        goto done;
      }
      ins[n_in++] = v;
    } else if ((r = opt_value(argc, argv, &i, "out", &v))) {
      if (r < 0) {
        rc = bad_arg(cmd, argv[i], 1);
        goto done;
      }
      out = v;
    } else if ((r = opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0) {
        rc = bad_arg(cmd, argv[i], 1);
        goto done;
      }
      tok_spec = v;
    } else if (strcmp(argv[i], "--no-special") == 0) {
      parse_special = 0;
    } else if ((r = opt_value(argc, argv, &i, "doc-per", &v))) {
      if (r < 0) {
        rc = bad_arg(cmd, argv[i], 1);
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
      rc = bad_arg(cmd, argv[i], 0);
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
  fsdpc_status st = open_tokenizer(tok_spec, parse_special, &tok, &err);
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
    rc = fail(cmd, &err);
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

/* ---- info -------------------------------------------------------------- */

static const char info_help[] =
    "usage: fsdpc data info FILE [--docs K] [--tokenizer T]\n"
    "Validates a token file (header, sizes, offsets, checksum) and prints its header,\n"
    "counts and the first K documents (default 3): decoded with --tokenizer T (byte, or a\n"
    "tokenizer.json or its folder), else as bytes for a byte-tokenizer file, else as ids.\n"
    "Context tokens that are not training targets (loss mask 0) are shown in {{ }}.\n";

/* Prints tokens [start, start + n) decoded by tok, C-escaped. */
static void print_decoded(const fsdpc_tokenizer *tok, const fsdpc_tokfile *tf, int64_t start,
                          int64_t n) {
  int32_t ids[200];
  char text[200 * 64];
  size_t len = 0;
  fsdpc_err err = {0};
  fsdpc__tokfile_read(tf, start, n, ids);
  if (fsdpc__tokenizer_decode(tok, ids, n, text, sizeof text, &len, &err) == FSDPC_OK)
    print_escaped(stdout, (const unsigned char *)text, len, len);
  else
    printf("<%s>", err.msg);
}

/* Prints document d: decoded by tok when given, else as bytes when the file
 * was made by the byte tokenizer, else as raw ids. */
static void print_doc(const fsdpc_tokfile *tf, int64_t d, const fsdpc_tokenizer *tok) {
  int64_t start = (int64_t)tf->offsets[d], n = (int64_t)tf->offsets[d + 1] - start;
  int64_t shown = n < 200 ? n : 200;
  int bytes_only = tf->hdr.vocab_size <= FSDPC_BYTE_VOCAB;
  for (int64_t i = 0; i < shown; i++)
    bytes_only &= fsdpc__tokfile_token(tf, start + i) < 256;
  printf("  [%" PRId64 "] %" PRId64 " tokens: ", d, n);
  if (!bytes_only && !tok) {
    for (int64_t i = 0; i < shown; i++)
      printf("%s%" PRId32, i ? " " : "", fsdpc__tokfile_token(tf, start + i));
    printf("%s\n", n > shown ? " ..." : "");
    return;
  }
  putchar('"');
  int in_ctx = 0;
  for (int64_t i = 0; i < shown;) {
    int target = fsdpc__tokfile_mask(tf, start + i);
    if (!target && !in_ctx)
      fputs("{{", stdout);
    if (target && in_ctx)
      fputs("}}", stdout);
    in_ctx = !target;
    int64_t run = 1; /* tokens with the same mask bit are decoded together */
    while (i + run < shown && fsdpc__tokfile_mask(tf, start + i + run) == target)
      run++;
    if (tok) {
      print_decoded(tok, tf, start + i, run);
    } else {
      for (int64_t j = 0; j < run; j++) {
        unsigned char c = (unsigned char)fsdpc__tokfile_token(tf, start + i + j);
        print_escaped(stdout, &c, 1, 1);
      }
    }
    i += run;
  }
  if (in_ctx)
    fputs("}}", stdout);
  printf("\"%s\n", n > shown ? "..." : "");
}

static int cmd_info(int argc, char **argv) {
  const char *cmd = "info", *path = NULL, *v, *tok_spec = NULL;
  int64_t k = 3;
  for (int i = 1; i < argc; i++) {
    int r;
    if (is_help(argv[i])) {
      fputs(info_help, stdout);
      return 0;
    } else if ((r = opt_value(argc, argv, &i, "docs", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "docs", v, 0, 1000000, &k))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      tok_spec = v;
    } else if (argv[i][0] == '-' || path) {
      return bad_arg(cmd, argv[i], 0);
    } else {
      path = argv[i];
    }
  }
  if (!path) {
    fprintf(stderr, "fsdpc data info: FILE is required (see --help)\n");
    return 2;
  }
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  if (fsdpc__tokfile_open(path, &tf, &err) != FSDPC_OK)
    return fail(cmd, &err);
  fsdpc_tokenizer *tok = NULL;
  if (tok_spec && (open_tokenizer(tok_spec, 1, &tok, &err) ||
                   (fsdpc__tokenizer_vocab_size(tok) > (int32_t)tf->hdr.vocab_size &&
                    fsdpc__fail(&err, FSDPC_INVALID_USAGE,
                                "%s: tokenizer vocab %" PRId32 " exceeds the file's %" PRIu32
                                " (not the tokenizer it was made with?)",
                                tok_spec, fsdpc__tokenizer_vocab_size(tok), tf->hdr.vocab_size)))) {
    fsdpc__tokenizer_destroy(tok);
    fsdpc__tokfile_close(tf);
    return fail(cmd, &err);
  }
  const fsdpc_tokfile_header *h = &tf->hdr;
  int64_t N = fsdpc__tokfile_n_tokens(tf), D = fsdpc__tokfile_n_docs(tf);
  int64_t lo = INT64_MAX, hi = 0, targets = 0;
  for (int64_t d = 0; d < D; d++) {
    int64_t len = (int64_t)(tf->offsets[d + 1] - tf->offsets[d]);
    lo = len < lo ? len : lo;
    hi = len > hi ? len : hi;
  }
  for (int64_t i = 0; tf->mask && i < N; i++)
    targets += fsdpc__tokfile_mask(tf, i);
  printf("file         %s (%zu bytes)\n", path, tf->map_bytes);
  printf("format       FSDPCTOK version %" PRIu32 ", u%" PRIu32 " tokens\n", h->version,
         8 * h->token_bytes);
  printf("vocab_size   %" PRIu32 "\n", h->vocab_size);
  printf("eos_id       %" PRIu32 "\n", h->eos_id);
  printf("tokens       %" PRId64 "\n", N);
  printf("documents    %" PRId64 "\n", D);
  if (D > 0)
    printf("doc length   min %" PRId64 ", mean %.1f, max %" PRId64 "\n", lo, (double)N / (double)D,
           hi);
  if (tf->mask)
    printf("loss mask    yes: %" PRId64 " of %" PRId64 " tokens are targets (%.1f%%)\n", targets, N,
           N ? 100.0 * (double)targets / (double)N : 0.0);
  else
    printf("loss mask    no (every token is a target)\n");
  printf("checksums    header 0x%08" PRIx32 ", payload 0x%08" PRIx32 " (verified)\n", h->header_crc,
         h->payload_crc);
  if (k > D)
    k = D;
  if (k > 0)
    printf("preview      first %" PRId64 " document(s):\n", k);
  for (int64_t d = 0; d < k; d++)
    print_doc(tf, d, tok);
  fsdpc__tokenizer_destroy(tok);
  fsdpc__tokfile_close(tf);
  return 0;
}

/* ---- batch ------------------------------------------------------------- */

static const char batch_help[] =
    "usage: fsdpc data batch FILE --seq-len T --global-batch G [options]\n"
    "Prints the G windows of one global batch as the loader serves them: the window's\n"
    "split index, its input tokens decoded, and how many labels are targets.\n"
    "  --step S            global step (default 0)\n"
    "  --seed S            shuffle seed (default 0)\n"
    "  --no-shuffle        visit windows in file order\n"
    "  --split all|train|eval  (default all)\n"
    "  --eval-fraction F   held-out share of windows, needed for train/eval\n"
    "  --split-seed S      chooses the held-out windows (default 0x5EED5EED)\n";

static int cmd_batch(int argc, char **argv) {
  const char *cmd = "batch", *path = NULL, *v;
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  int64_t step = 0, x;
  for (int i = 1; i < argc; i++) {
    int r;
    if (is_help(argv[i])) {
      fputs(batch_help, stdout);
      return 0;
    } else if ((r = opt_value(argc, argv, &i, "seq-len", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "seq-len", v, 1, 1 << 24, &x))
        return 2;
      o.seq_len = (int32_t)x;
    } else if ((r = opt_value(argc, argv, &i, "global-batch", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "global-batch", v, 1, 1 << 20, &o.global_batch))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "step", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_i64(cmd, "step", v, 0, INT64_MAX / 2, &step))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "seed", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_u64(cmd, "seed", v, &o.seed))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "split-seed", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (!parse_u64(cmd, "split-seed", v, &o.split_seed))
        return 2;
    } else if ((r = opt_value(argc, argv, &i, "split", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      if (strcmp(v, "all") == 0)
        o.split = FSDPC_SPLIT_ALL;
      else if (strcmp(v, "train") == 0)
        o.split = FSDPC_SPLIT_TRAIN;
      else if (strcmp(v, "eval") == 0)
        o.split = FSDPC_SPLIT_EVAL;
      else {
        fprintf(stderr, "fsdpc data batch: --split must be all, train or eval, got '%s'\n", v);
        return 2;
      }
    } else if ((r = opt_value(argc, argv, &i, "eval-fraction", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      char *end;
      o.eval_fraction = strtod(v, &end);
      if (end == v || *end) {
        fprintf(stderr, "fsdpc data batch: --eval-fraction expects a number, got '%s'\n", v);
        return 2;
      }
    } else if (strcmp(argv[i], "--no-shuffle") == 0) {
      o.shuffle = 0;
    } else if (argv[i][0] == '-' || path) {
      return bad_arg(cmd, argv[i], 0);
    } else {
      path = argv[i];
    }
  }
  if (!path || !o.seq_len || !o.global_batch) {
    fprintf(stderr,
            "fsdpc data batch: FILE, --seq-len and --global-batch are required (see --help)\n");
    return 2;
  }
  fsdpc_err err = {0};
  fsdpc_tokfile *tf = NULL;
  fsdpc_loader *l = NULL;
  int32_t *buf = NULL;
  int rc = 1;
  if (fsdpc__tokfile_open(path, &tf, &err) || fsdpc__loader_create(tf, &o, &l, &err))
    goto out;
  int64_t T = o.seq_len, count;
  buf = malloc((size_t)(2 * T) * sizeof *buf);
  if (!buf || fsdpc__loader_count_labels(l, step, o.global_batch, &count, &err))
    goto out;
  printf("step %" PRId64 " (epoch %" PRId64 "): %" PRId64 " windows of %" PRId64 " tokens, %" PRId64
         " target labels; split has %" PRId64 " of %" PRId64 " windows\n",
         step, step / fsdpc__loader_steps_per_epoch(l), o.global_batch, T, count,
         fsdpc__loader_num_windows(l), fsdpc__loader_total_windows(l));
  for (int64_t pos = 0; pos < o.global_batch; pos++) {
    int64_t idx;
    if (fsdpc__loader_batch_window(l, step, pos, &idx, &err) ||
        fsdpc__loader_window(l, idx, buf, buf + T, NULL, &err))
      goto out;
    int64_t targets = 0;
    for (int64_t j = 0; j < T; j++)
      targets += buf[T + j] != FSDPC_IGNORE_INDEX;
    printf("  [%" PRId64 "] window %" PRId64 ", %" PRId64 " targets: \"", pos, idx, targets);
    for (int64_t j = 0; j < T; j++) {
      int32_t t = buf[j];
      if (t < 256 && tf->hdr.vocab_size <= FSDPC_BYTE_VOCAB) { /* else ids, not bytes */
        unsigned char c = (unsigned char)t;
        print_escaped(stdout, &c, 1, 1);
      } else {
        printf(t == (int32_t)tf->hdr.eos_id ? "<eos>" : "<%" PRId32 ">", t);
      }
    }
    printf("\"\n");
  }
  rc = 0;
out:
  if (rc)
    fail(cmd, &err);
  free(buf);
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
  return rc;
}

/* ---- encode / decode --------------------------------------------------- */

static const char encode_help[] =
    "usage: fsdpc data encode --tokenizer T (--text S | --in FILE | --escaped-lines FILE)\n"
    "Prints the ids a tokenizer gives, space-separated, for checking a tokenizer.\n"
    "  --tokenizer T          byte, or a tokenizer.json or a folder holding one\n"
    "  --text S               encode S\n"
    "  --in FILE              encode the whole file as one text\n"
    "  --escaped-lines FILE   encode each line separately (one output line each); lines\n"
    "                         may use \\n \\r \\t \\\\ \\xHH escapes; empty lines and lines\n"
    "                         starting with # are skipped\n"
    "  --no-special           encode special-token strings as plain text\n"
    "  --stats                print counts and speed instead of the ids\n";

static const char decode_help[] = "usage: fsdpc data decode --tokenizer T [--escaped] ID [ID ...]\n"
                                  "Prints the text of the ids (BOS/EOS/PAD print nothing).\n"
                                  "  --escaped   print C-escaped in quotes instead of raw bytes\n";

/* Undoes the --escaped-lines escapes in place; returns the new length, or
 * -1 for a bad escape. */
static long unescape(char *s) {
  size_t k = 0;
  for (size_t i = 0; s[i]; i++) {
    if (s[i] != '\\') {
      s[k++] = s[i];
      continue;
    }
    char e = s[++i];
    if (e == 'n')
      s[k++] = '\n';
    else if (e == 'r')
      s[k++] = '\r';
    else if (e == 't')
      s[k++] = '\t';
    else if (e == '\\')
      s[k++] = '\\';
    else if (e == 'x' && isxdigit((unsigned char)s[i + 1]) && isxdigit((unsigned char)s[i + 2])) {
      char hex[3] = {s[i + 1], s[i + 2], 0};
      s[k++] = (char)strtol(hex, NULL, 16);
      i += 2;
    } else {
      return -1;
    }
  }
  return (long)k;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fsdpc_status print_ids(const fsdpc_tokenizer *tok, const char *s, size_t n, int stats,
                              fsdpc_err *err) {
  int32_t *ids;
  int64_t n_ids;
  double t0 = now_s();
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, s, n, &ids, &n_ids, err));
  double dt = now_s() - t0;
  if (stats) {
    printf("%zu bytes -> %" PRId64 " ids (%.2f bytes/id) in %.3f s: %.2f MB/s, %.0f ids/s\n", n,
           n_ids, n_ids ? (double)n / (double)n_ids : 0.0, dt, (double)n / dt / 1e6,
           (double)n_ids / dt);
    free(ids);
    return FSDPC_OK;
  }
  for (int64_t i = 0; i < n_ids; i++)
    printf("%s%" PRId32, i ? " " : "", ids[i]);
  putchar('\n');
  free(ids);
  return FSDPC_OK;
}

static int cmd_encode(int argc, char **argv) {
  const char *cmd = "encode", *spec = NULL, *text = NULL, *in = NULL, *lines = NULL, *v;
  int parse_special = 1, stats = 0;
  for (int i = 1; i < argc; i++) {
    int r;
    if (is_help(argv[i])) {
      fputs(encode_help, stdout);
      return 0;
    } else if ((r = opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      spec = v;
    } else if ((r = opt_value(argc, argv, &i, "text", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      text = v;
    } else if ((r = opt_value(argc, argv, &i, "in", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      in = v;
    } else if ((r = opt_value(argc, argv, &i, "escaped-lines", &v))) {
      if (r < 0)
        return bad_arg(cmd, argv[i], 1);
      lines = v;
    } else if (strcmp(argv[i], "--no-special") == 0) {
      parse_special = 0;
    } else if (strcmp(argv[i], "--stats") == 0) {
      stats = 1;
    } else {
      return bad_arg(cmd, argv[i], 0);
    }
  }
  if (!spec || (!!text + !!in + !!lines) != 1) {
    fprintf(stderr, "fsdpc data encode: --tokenizer and one of --text, --in, --escaped-lines "
                    "are required (see --help)\n");
    return 2;
  }
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  char *data = NULL;
  size_t len = 0;
  fsdpc_status st = open_tokenizer(spec, parse_special, &tok, &err);
  if (!st && text)
    st = print_ids(tok, text, strlen(text), stats, &err);
  if (!st && (in || lines))
    st = read_whole(in ? in : lines, &data, &len, &err);
  if (!st && lines) { /* strtok_r needs a terminated string */
    char *d = realloc(data, len + 1);
    if (d)
      d[len] = '\0', data = d;
    else
      st = fsdpc__fail(&err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  if (!st && in)
    st = print_ids(tok, data, len, stats, &err);
  if (!st && lines) {
    int line_no = 0;
    for (char *save = NULL, *line = strtok_r(data, "\n", &save); line && !st;
         line = strtok_r(NULL, "\n", &save)) {
      line_no++;
      if (line[0] == '#')
        continue;
      long n = unescape(line);
      if (n < 0)
        st = fsdpc__fail(&err, FSDPC_INVALID_USAGE, "%s: line %d: bad escape", lines, line_no);
      else
        st = print_ids(tok, line, (size_t)n, stats, &err);
    }
  }
  free(data);
  fsdpc__tokenizer_destroy(tok);
  return st ? fail(cmd, &err) : 0;
}

static int cmd_decode(int argc, char **argv) {
  const char *cmd = "decode", *spec = NULL, *v;
  int escaped = 0;
  int32_t *ids = calloc((size_t)argc, sizeof *ids);
  int64_t n = 0, x;
  int rc = 2;
  if (!ids)
    return 1;
  for (int i = 1; i < argc; i++) {
    int r;
    if (is_help(argv[i])) {
      fputs(decode_help, stdout);
      rc = 0;
      goto done;
    } else if ((r = opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0) {
        rc = bad_arg(cmd, argv[i], 1);
        goto done;
      }
      spec = v;
    } else if (strcmp(argv[i], "--escaped") == 0) {
      escaped = 1;
    } else if (argv[i][0] == '-' && !isdigit((unsigned char)argv[i][1])) {
      rc = bad_arg(cmd, argv[i], 0);
      goto done;
    } else {
      if (!parse_i64(cmd, "id", argv[i], INT32_MIN, INT32_MAX, &x))
        goto done;
      ids[n++] = (int32_t)x;
    }
  }
  if (!spec) {
    fprintf(stderr, "fsdpc data decode: --tokenizer is required (see --help)\n");
    goto done;
  }
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  char *out = NULL;
  size_t len = 0;
  fsdpc_status st = open_tokenizer(spec, 1, &tok, &err);
  if (!st) {
    fsdpc__tokenizer_decode(tok, ids, n, NULL, 0, &len, &err); /* sizes; fails on bad ids too */
    out = malloc(len + 1);
    st = out ? fsdpc__tokenizer_decode(tok, ids, n, out, len, &len, &err)
             : fsdpc__fail(&err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  if (!st) {
    if (escaped) {
      putchar('"');
      print_escaped(stdout, (const unsigned char *)out, len, len);
      puts("\"");
    } else {
      fwrite(out, 1, len, stdout);
    }
  }
  free(out);
  fsdpc__tokenizer_destroy(tok);
  rc = st ? fail(cmd, &err) : 0;
done:
  free(ids);
  return rc;
}

/* ---- dispatch ---------------------------------------------------------- */

static const char data_help[] =
    "usage: fsdpc data <synth|tokenize|info|batch|encode|decode> [args]\n"
    "  synth     write a synthetic learnable dataset (arith, qa, copy, reverse)\n"
    "  tokenize  tokenize text files into a token file (byte or tokenizer.json)\n"
    "  info      validate a token file and print its header and a preview\n"
    "  batch     print one global batch as the loader serves it\n"
    "  encode    print the ids of a text (check a tokenizer)\n"
    "  decode    print the text of ids\n"
    "`fsdpc data <command> --help` for details. Format: docs/data.md.\n";

int fsdpc__cmd_data(int argc, char **argv) {
  if (argc < 2) {
    fputs(data_help, stderr);
    return 2;
  }
  if (is_help(argv[1])) {
    fputs(data_help, stdout);
    return 0;
  }
  if (strcmp(argv[1], "synth") == 0)
    return cmd_synth(argc - 1, argv + 1);
  if (strcmp(argv[1], "tokenize") == 0)
    return cmd_tokenize(argc - 1, argv + 1);
  if (strcmp(argv[1], "info") == 0)
    return cmd_info(argc - 1, argv + 1);
  if (strcmp(argv[1], "batch") == 0)
    return cmd_batch(argc - 1, argv + 1);
  if (strcmp(argv[1], "encode") == 0)
    return cmd_encode(argc - 1, argv + 1);
  if (strcmp(argv[1], "decode") == 0)
    return cmd_decode(argc - 1, argv + 1);
  fprintf(stderr,
          "fsdpc data: unknown command '%s' (synth, tokenize, info, batch, encode or decode)\n",
          argv[1]);
  return 2;
}
