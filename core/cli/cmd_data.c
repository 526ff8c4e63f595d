/* `fsdpc data ...`: make and inspect token files. This file holds the
 * dispatch and the helpers the subcommands share (data_cli.h); the
 * subcommands live by concept:
 *   data_make.c     synth     write a synthetic learnable dataset (arith, qa, copy, reverse)
 *                   tokenize  tokenize text files into a token file (byte or tokenizer.json BPE)
 *   data_inspect.c  info      print a token file's header, counts and a decoded preview
 *                   batch     print the windows of one global batch as the loader serves them
 *   data_codec.c    encode    print the ids of a text (checking a tokenizer)
 *                   decode    print the text of ids */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "data/tokenizer.h"
#include "data_cli.h"

/* ---- argument helpers -------------------------------------------------- */

/* If argv[*i] is --name or --name=VALUE, sets *val (the next argument in the
 * first form) and returns 1; returns -1 if the value is missing. */
int fsdpc__data_opt_value(int argc, char **argv, int *i, const char *name, const char **val) {
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

int fsdpc__data_is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

int fsdpc__data_parse_i64(const char *cmd, const char *name, const char *s, int64_t lo, int64_t hi,
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

int fsdpc__data_parse_u64(const char *cmd, const char *name, const char *s, uint64_t *out) {
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

int fsdpc__data_bad_arg(const char *cmd, const char *arg, int missing) {
  if (missing)
    fprintf(stderr, "fsdpc data %s: %s needs a value (see `fsdpc data %s --help`)\n", cmd, arg,
            cmd);
  else
    fprintf(stderr, "fsdpc data %s: unknown argument '%s' (see `fsdpc data %s --help`)\n", cmd, arg,
            cmd);
  return 2;
}

int fsdpc__data_fail(const char *cmd, const fsdpc_err *err) {
  fprintf(stderr, "fsdpc data %s: %s\n", cmd, err->msg);
  return 1;
}

/* Prints bytes C-escaped inside quotes; stops after max bytes. */
void fsdpc__data_print_escaped(FILE *f, const unsigned char *s, size_t n, size_t max) {
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

fsdpc_status fsdpc__data_read_whole(const char *path, char **data, size_t *len, fsdpc_err *err) {
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

/* Opens "byte", a model folder, a tokenizer.json or a tokenizer.model
 * (fsdpc__tokenizer_load); parse_special 0 applies to tokenizer.json only. */
fsdpc_status fsdpc__data_open_tokenizer(const char *spec, int parse_special, fsdpc_tokenizer **tok,
                                        fsdpc_err *err) {
  if (parse_special)
    return fsdpc__tokenizer_load(spec, tok, err);
  if (strcmp(spec, "byte") == 0)
    return fsdpc__tokenizer_byte_create(tok, err);
  fsdpc_bpe_opts o;
  fsdpc__bpe_opts_default(&o);
  o.parse_special = parse_special;
  return fsdpc__tokenizer_bpe_create(spec, &o, tok, err);
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
  if (fsdpc__data_is_help(argv[1])) {
    fputs(data_help, stdout);
    return 0;
  }
  if (strcmp(argv[1], "synth") == 0)
    return fsdpc__data_synth(argc - 1, argv + 1);
  if (strcmp(argv[1], "tokenize") == 0)
    return fsdpc__data_tokenize(argc - 1, argv + 1);
  if (strcmp(argv[1], "info") == 0)
    return fsdpc__data_info(argc - 1, argv + 1);
  if (strcmp(argv[1], "batch") == 0)
    return fsdpc__data_batch(argc - 1, argv + 1);
  if (strcmp(argv[1], "encode") == 0)
    return fsdpc__data_encode(argc - 1, argv + 1);
  if (strcmp(argv[1], "decode") == 0)
    return fsdpc__data_decode(argc - 1, argv + 1);
  fprintf(stderr,
          "fsdpc data: unknown command '%s' (synth, tokenize, info, batch, encode or decode)\n",
          argv[1]);
  return 2;
}
