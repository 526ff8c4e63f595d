/* `fsdpc data encode` and `fsdpc data decode`: text to ids and back, for
 * checking a tokenizer. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/tokenizer.h"
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

static int add_special; /* --add-special, for print_ids */

static fsdpc_status print_ids(const fsdpc_tokenizer *tok, const char *s, size_t n, int stats,
                              int offsets, fsdpc_err *err) {
  int32_t *ids;
  int64_t n_ids;
  size_t(*offs)[2] = NULL;
  double t0 = now_s();
  if (offsets) {
    FSDPC_TRY(fsdpc__tokenizer_encode_offsets(tok, s, n, &ids, &offs, &n_ids, err));
    for (int64_t i = 0; i < n_ids; i++)
      printf("%s%" PRId32 ":%zu-%zu", i ? " " : "", ids[i], offs[i][0], offs[i][1]);
    putchar('\n');
    free(ids);
    free(offs);
    return FSDPC_OK;
  }
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, s, n, &ids, &n_ids, err));
  double dt = now_s() - t0;
  if (stats) {
    printf("%zu bytes -> %" PRId64 " ids (%.2f bytes/id) in %.3f s: %.2f MB/s, %.0f ids/s\n", n,
           n_ids, n_ids ? (double)n / (double)n_ids : 0.0, dt, (double)n / dt / 1e6,
           (double)n_ids / dt);
    free(ids);
    return FSDPC_OK;
  }
  int bos = add_special && fsdpc__tokenizer_adds_bos(tok) && fsdpc__tokenizer_bos(tok) >= 0;
  int eos = add_special && fsdpc__tokenizer_adds_eos(tok) && fsdpc__tokenizer_eos(tok) >= 0;
  if (bos)
    printf("%" PRId32 "%s", fsdpc__tokenizer_bos(tok), n_ids ? " " : "");
  for (int64_t i = 0; i < n_ids; i++)
    printf("%s%" PRId32, i ? " " : "", ids[i]);
  if (eos)
    printf("%s%" PRId32, n_ids || bos ? " " : "", fsdpc__tokenizer_eos(tok));
  putchar('\n');
  free(ids);
  return FSDPC_OK;
}

int fsdpc__data_encode(int argc, char **argv) {
  const char *cmd = "encode", *spec = NULL, *text = NULL, *in = NULL, *lines = NULL, *v;
  int parse_special = 1, stats = 0, offsets = 0;
  for (int i = 1; i < argc; i++) {
    int r;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(encode_help, stdout);
      return 0;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      spec = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "text", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      text = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "in", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      in = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "escaped-lines", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      lines = v;
    } else if (strcmp(argv[i], "--no-special") == 0) {
      parse_special = 0;
    } else if (strcmp(argv[i], "--stats") == 0) {
      stats = 1;
    } else if (strcmp(argv[i], "--offsets") == 0) {
      offsets = 1;
    } else if (strcmp(argv[i], "--add-special") == 0) {
      add_special = 1;
    } else {
      return fsdpc__data_bad_arg(cmd, argv[i], 0);
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
  fsdpc_status st = fsdpc__data_open_tokenizer(spec, parse_special, &tok, &err);
  if (!st && text)
    st = print_ids(tok, text, strlen(text), stats, offsets, &err);
  if (!st && (in || lines))
    st = fsdpc__data_read_whole(in ? in : lines, &data, &len, &err);
  if (!st && lines) { /* strtok_r needs a terminated string */
    char *d = realloc(data, len + 1);
    if (d)
      d[len] = '\0', data = d;
    else
      st = fsdpc__fail(&err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  if (!st && in)
    st = print_ids(tok, data, len, stats, offsets, &err);
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
        st = print_ids(tok, line, (size_t)n, stats, offsets, &err);
    }
  }
  free(data);
  fsdpc__tokenizer_destroy(tok);
  return st ? fsdpc__data_fail(cmd, &err) : 0;
}

int fsdpc__data_decode(int argc, char **argv) {
  const char *cmd = "decode", *spec = NULL, *v;
  int escaped = 0;
  int32_t *ids = calloc((size_t)argc, sizeof *ids);
  int64_t n = 0, x;
  int rc = 2;
  if (!ids)
    return 1;
  for (int i = 1; i < argc; i++) {
    int r;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(decode_help, stdout);
      rc = 0;
      goto done;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0) {
        rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
        goto done;
      }
      spec = v;
    } else if (strcmp(argv[i], "--escaped") == 0) {
      escaped = 1;
    } else if (argv[i][0] == '-' && !isdigit((unsigned char)argv[i][1])) {
      rc = fsdpc__data_bad_arg(cmd, argv[i], 0);
      goto done;
    } else {
      if (!fsdpc__data_parse_i64(cmd, "id", argv[i], INT32_MIN, INT32_MAX, &x))
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
  fsdpc_status st = fsdpc__data_open_tokenizer(spec, 1, &tok, &err);
  if (!st) {
    fsdpc__tokenizer_decode(tok, ids, n, NULL, 0, &len, &err); /* sizes; fails on bad ids too */
    out = malloc(len + 1);
    st = out ? fsdpc__tokenizer_decode(tok, ids, n, out, len, &len, &err)
             : fsdpc__fail(&err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  if (!st) {
    if (escaped) {
      putchar('"');
      fsdpc__data_print_escaped(stdout, (const unsigned char *)out, len, len);
      puts("\"");
    } else {
      fwrite(out, 1, len, stdout);
    }
  }
  free(out);
  fsdpc__tokenizer_destroy(tok);
  rc = st ? fsdpc__data_fail(cmd, &err) : 0;
done:
  free(ids);
  return rc;
}
