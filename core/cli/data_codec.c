/* `fsdpc data encode` and `fsdpc data decode`: text to ids and back, for
 * checking a tokenizer. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data_cli.h"

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
    "  --add-special          add BOS/EOS as the tokenizer's add_bos_token and\n"
    "                         add_eos_token say (HF add_special_tokens=True)\n"
    "  --offsets              print id:begin-end, the byte range of the text each id\n"
    "                         came from (HF's offset_mapping, in bytes)\n"
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

typedef struct enc_args {
  const char *spec, *text, *in, *lines;
  uint32_t flags;
  int stats, offsets, add_special;
} enc_args;

static fsdpc_status print_ids(const fsdpc_tokenizer *tok, const char *s, size_t n,
                              const enc_args *a, fsdpc_err *err) {
  int32_t *ids;
  int64_t n_ids, *offs = NULL;
  double t0 = now_s();
  fsdpc_status st = fsdpc_tokenizer_encode(tok, s, n, &ids, &n_ids, a->offsets ? &offs : NULL, err);
  if (st != FSDPC_OK)
    return st;
  double dt = now_s() - t0;
  fsdpc_tokenizer_info ti = {.struct_size = sizeof ti};
  fsdpc_tokenizer_describe(tok, &ti);
  int bos = a->add_special && ti.adds_bos && ti.bos >= 0;
  int eos = a->add_special && ti.adds_eos && ti.eos >= 0;
  if (a->offsets) {
    for (int64_t i = 0; i < n_ids; i++)
      printf("%s%" PRId32 ":%" PRId64 "-%" PRId64, i ? " " : "", ids[i], offs[2 * i],
             offs[2 * i + 1]);
    putchar('\n');
  } else if (a->stats) {
    printf("%zu bytes -> %" PRId64 " ids (%.2f bytes/id) in %.3f s: %.2f MB/s, %.0f ids/s\n", n,
           n_ids, n_ids ? (double)n / (double)n_ids : 0.0, dt, (double)n / dt / 1e6,
           (double)n_ids / dt);
  } else {
    if (bos)
      printf("%" PRId32 "%s", ti.bos, n_ids ? " " : "");
    for (int64_t i = 0; i < n_ids; i++)
      printf("%s%" PRId32, i ? " " : "", ids[i]);
    if (eos)
      printf("%s%" PRId32, n_ids || bos ? " " : "", ti.eos);
    putchar('\n');
  }
  fsdpc_free(ids);
  fsdpc_free(offs);
  return FSDPC_OK;
}

enum { E_TOKENIZER = 256, E_TEXT, E_IN, E_LINES, E_NO_SPECIAL, E_STATS, E_OFFSETS, E_ADD_SPECIAL };
static const cli_opt encode_opts[] = {{"tokenizer", E_TOKENIZER, "T"},
                                      {"text", E_TEXT, "S"},
                                      {"in", E_IN, "FILE"},
                                      {"escaped-lines", E_LINES, "FILE"},
                                      {"no-special", E_NO_SPECIAL, NULL},
                                      {"stats", E_STATS, NULL},
                                      {"offsets", E_OFFSETS, NULL},
                                      {"add-special", E_ADD_SPECIAL, NULL},
                                      {0}};
const cli_cmd fsdpc__data_encode_cmd = {"data encode", encode_help, encode_opts};

static int encode_arg(void *ctx, int r, const char *v) {
  enc_args *a = ctx;
  switch (r) {
  case E_TOKENIZER:
    return (a->spec = v) != NULL;
  case E_TEXT:
    return (a->text = v) != NULL;
  case E_IN:
    return (a->in = v) != NULL;
  case E_LINES:
    return (a->lines = v) != NULL;
  case E_NO_SPECIAL:
    return (a->flags = FSDPC_TOKENIZER_NO_SPECIAL) != 0;
  case E_STATS:
    return (a->stats = 1);
  case E_OFFSETS:
    return (a->offsets = 1);
  case E_ADD_SPECIAL:
    return (a->add_special = 1);
  default:
    return cli_usage_error(&fsdpc__data_encode_cmd, "unexpected argument '%s'", v) == 0;
  }
}

/* -1 to go on, else the exit code. */
static int encode_parse(int argc, char **argv, enc_args *a) {
  const cli_cmd *cmd = &fsdpc__data_encode_cmd;
  int rc = cli_parse(cmd, argc, argv, encode_arg, a);
  if (rc < 0 && (!a->spec || (!!a->text + !!a->in + !!a->lines) != 1))
    rc = cli_usage_error(cmd, "--tokenizer and one of --text, --in, --escaped-lines are required");
  return rc;
}

/* Each line of data (NUL-terminated) encoded on its own. */
static fsdpc_status encode_lines(const fsdpc_tokenizer *tok, char *data, const enc_args *a,
                                 fsdpc_err *err) {
  fsdpc_status st = FSDPC_OK;
  int line_no = 0;
  for (char *save = NULL, *line = strtok_r(data, "\n", &save); line && st == FSDPC_OK;
       line = strtok_r(NULL, "\n", &save)) {
    line_no++;
    if (line[0] == '#')
      continue;
    long n = unescape(line);
    if (n < 0)
      st = cli_error(err, FSDPC_INVALID_USAGE, "%s: line %d: bad escape", a->lines, line_no);
    else
      st = print_ids(tok, line, (size_t)n, a, err);
  }
  return st;
}

int fsdpc__data_encode(int argc, char **argv) {
  enc_args a = {0};
  int rc = encode_parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  char *data = NULL;
  size_t len = 0;
  fsdpc_status st = fsdpc_tokenizer_open(a.spec, a.flags, &tok, &err);
  if (st == FSDPC_OK && a.text)
    st = print_ids(tok, a.text, strlen(a.text), &a, &err);
  if (st == FSDPC_OK && (a.in || a.lines))
    st = fsdpc__data_read_whole(a.in ? a.in : a.lines, &data, &len, &err);
  if (st == FSDPC_OK && a.lines) { /* strtok_r needs a terminated string */
    char *d = realloc(data, len + 1);
    if (d)
      d[len] = '\0', data = d;
    st = d ? encode_lines(tok, data, &a, &err)
           : cli_error(&err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  if (st == FSDPC_OK && a.in)
    st = print_ids(tok, data, len, &a, &err);
  free(data);
  fsdpc_tokenizer_destroy(tok);
  return st == FSDPC_OK ? 0 : cli_fail(&fsdpc__data_encode_cmd, err.msg);
}

enum { D_TOKENIZER = 256, D_ESCAPED };
static const cli_opt decode_opts[] = {
    {"tokenizer", D_TOKENIZER, "T"}, {"escaped", D_ESCAPED, NULL}, {0}};
const cli_cmd fsdpc__data_decode_cmd = {"data decode", decode_help, decode_opts};

typedef struct dec_args {
  const char *spec;
  int escaped;
  int32_t *ids;
  int64_t n;
} dec_args;

static int decode_arg(void *ctx, int r, const char *v) {
  dec_args *a = ctx;
  int64_t x;
  if (r == D_TOKENIZER)
    a->spec = v;
  else if (r == D_ESCAPED)
    a->escaped = 1;
  else if (cli_int(&fsdpc__data_decode_cmd, "id", v, INT32_MIN, INT32_MAX, &x))
    a->ids[a->n++] = (int32_t)x;
  else
    return 0;
  return 1;
}

int fsdpc__data_decode(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_decode_cmd;
  dec_args a = {.ids = calloc((size_t)argc + 1, sizeof(int32_t))};
  int rc = a.ids ? cli_parse(cmd, argc, argv, decode_arg, &a) : 1;
  const char *spec = a.spec;
  int32_t *ids = a.ids;
  int64_t n = a.n;
  int escaped = a.escaped;
  if (rc < 0 && !spec)
    rc = cli_usage_error(cmd, "--tokenizer is required");
  if (rc >= 0) {
    free(ids);
    return rc;
  }
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  char *out = NULL;
  size_t len = 0;
  fsdpc_status st = fsdpc_tokenizer_open(spec, 0, &tok, &err);
  if (st == FSDPC_OK)
    st = fsdpc_tokenizer_decode(tok, ids, n, &out, &len, &err);
  if (st == FSDPC_OK && escaped) {
    putchar('"');
    fsdpc__data_print_escaped(stdout, (const unsigned char *)out, len, len);
    puts("\"");
  } else if (st == FSDPC_OK) {
    fwrite(out, 1, len, stdout);
  }
  fsdpc_free(out);
  fsdpc_tokenizer_destroy(tok);
  free(ids);
  return st == FSDPC_OK ? 0 : cli_fail(cmd, err.msg);
}
