/* `fsdpc data info` and `fsdpc data batch`: inspect a token file, as stored
 * and as the loader serves it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"
#include "data/tokenizer.h"
#include "data/tokfile.h"
#include "data_cli.h"

/* ---- info -------------------------------------------------------------- */

static const char info_help[] =
    "usage: fsdpc data info FILE [--docs K] [--tokenizer T]\n"
    "Validates a token file (header, sizes, offsets, checksum) and prints its header,\n"
    "counts and the first K documents (default 3): decoded with --tokenizer T (byte, or a\n"
    "tokenizer.json or its folder), else as bytes for a byte-tokenizer file, else as ids.\n"
    "Tokens that are not training targets are shown in {{ }}: mask bit 0, or nothing\n"
    "predicts them (an example's first token), as `data batch` marks them.\n";

/* Whether token i of document d is a training target under the file's
 * default packing, as `data batch` marks it: its mask bit is 1 and a token
 * before it predicts it (in a file of whole examples, nothing predicts an
 * example's first token; in a token stream, only the file's first). */
static int token_is_target(const fsdpc_tokfile *tf, int64_t d, int64_t i) {
  int examples = (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) != 0;
  if (i == 0 && (examples || d == 0))
    return 0;
  return fsdpc__tokfile_mask(tf, (int64_t)tf->offsets[d] + i);
}

/* Prints document d: decoded by tok when given, else as bytes when the file
 * was made by the byte tokenizer (EOS and other ids above 255 as <id>), else
 * as raw ids. Tokens that are not targets (token_is_target) are in {{ }}. */
static void print_doc(const fsdpc_tokfile *tf, int64_t d, const fsdpc_tokenizer *tok) {
  int64_t start = (int64_t)tf->offsets[d], n = (int64_t)tf->offsets[d + 1] - start;
  int64_t shown = n < 200 ? n : 200;
  int bytes_only = tf->hdr.vocab_size <= FSDPC_BYTE_VOCAB;
  printf("  [%" PRId64 "] %" PRId64 " tokens: ", d, n);
  int32_t ids[200];
  uint8_t target[200];
  fsdpc__tokfile_read(tf, start, shown, ids);
  if (!bytes_only && !tok) {
    for (int64_t i = 0; i < shown; i++)
      printf("%s%" PRId32, i ? " " : "", ids[i]);
    printf("%s\n", n > shown ? " ..." : "");
    return;
  }
  for (int64_t i = 0; i < shown; i++)
    target[i] = (uint8_t)token_is_target(tf, d, i);
  fsdpc_tokenizer *bytes = NULL;
  fsdpc_err err;
  if (!tok && fsdpc__tokenizer_byte_create(&bytes, &err) == FSDPC_OK)
    tok = bytes; /* a byte-tokenizer file: names its BOS/EOS/PAD */
  putchar('"');
  fsdpc__data_print_tokens(stdout, tok, ids, shown, target, NULL);
  fsdpc__tokenizer_destroy(bytes);
  printf("\"%s\n", n > shown ? "..." : "");
}

int fsdpc__data_info(int argc, char **argv) {
  const char *cmd = "info", *path = NULL, *v, *tok_spec = NULL;
  int64_t k = 3;
  for (int i = 1; i < argc; i++) {
    int r;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(info_help, stdout);
      return 0;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "docs", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "docs", v, 0, 1000000, &k))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      tok_spec = v;
    } else if (argv[i][0] == '-' || path) {
      return fsdpc__data_bad_arg(cmd, argv[i], 0);
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
    return fsdpc__data_fail(cmd, &err);
  fsdpc_tokenizer *tok = NULL;
  if (tok_spec && (fsdpc__data_open_tokenizer(tok_spec, 1, &tok, &err) ||
                   (fsdpc__tokenizer_vocab_size(tok) > (int32_t)tf->hdr.vocab_size &&
                    fsdpc__fail(&err, FSDPC_INVALID_USAGE,
                                "%s: tokenizer vocab %" PRId32 " exceeds the file's %" PRIu32
                                " (not the tokenizer it was made with?)",
                                tok_spec, fsdpc__tokenizer_vocab_size(tok), tf->hdr.vocab_size)))) {
    fsdpc__tokenizer_destroy(tok);
    fsdpc__tokfile_close(tf);
    return fsdpc__data_fail(cmd, &err);
  }
  const fsdpc_tokfile_header *h = &tf->hdr;
  int64_t N = fsdpc__tokfile_n_tokens(tf), D = fsdpc__tokfile_n_docs(tf);
  int64_t lo = INT64_MAX, hi = 0, targets = 0;
  for (int64_t d = 0; d < D; d++) {
    int64_t len = (int64_t)(tf->offsets[d + 1] - tf->offsets[d]);
    lo = len < lo ? len : lo;
    hi = len > hi ? len : hi;
  }
  for (int64_t d = 0; d < D; d++)
    for (int64_t i = 0; i < (int64_t)(tf->offsets[d + 1] - tf->offsets[d]); i++)
      targets += token_is_target(tf, d, i);
  printf("file         %s (%zu bytes)\n", path, tf->map_bytes);
  printf("format       FSDPCTOK version %" PRIu32 ", u%" PRIu32 " tokens\n", h->version,
         8 * h->token_bytes);
  printf("vocab_size   %" PRIu32 "\n", h->vocab_size);
  printf("eos_id       %" PRIu32 "\n", h->eos_id);
  printf("examples     %s\n", (h->flags & FSDPC_TOKFILE_EXAMPLES)
                                  ? "yes: whole examples with their own BOS/end tokens (`fsdpc "
                                    "data prepare`); no EOS is inserted"
                                  : "no: the loader inserts EOS after each document");
  if (tok) {
    int32_t sp[3] = {fsdpc__tokenizer_bos(tok), fsdpc__tokenizer_eos(tok),
                     fsdpc__tokenizer_pad(tok)};
    const char *nm[3] = {"bos", "eos", "pad"};
    printf("special     ");
    for (int i = 0; i < 3; i++) {
      const char *str = sp[i] >= 0 ? fsdpc__tokenizer_token_str(tok, sp[i]) : NULL;
      if (sp[i] < 0)
        printf(" %s none", nm[i]);
      else
        printf(" %s %" PRId32 " %s", nm[i], sp[i], str ? str : "?");
      printf("%s", i < 2 ? "," : "\n");
    }
  }
  printf("tokens       %" PRId64 "\n", N);
  printf("documents    %" PRId64 "\n", D);
  if (D > 0)
    printf("doc length   min %" PRId64 ", mean %.1f, max %" PRId64 "\n", lo, (double)N / (double)D,
           hi);
  printf("loss mask    %s: %" PRId64 " of %" PRId64 " tokens are targets (%.1f%%; %s)\n",
         tf->mask ? "yes" : "no", targets, N, N ? 100.0 * (double)targets / (double)N : 0.0,
         (h->flags & FSDPC_TOKFILE_EXAMPLES) ? "an example's first token is never one"
                                             : "the file's first token is never one");
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
    "  --split-seed S      chooses the held-out windows (default 0x5EED5EED)\n"
    "  --packing P         window (default for plain files), examples (default for files\n"
    "                      from `fsdpc data prepare`) or none: see data.packing\n"
    "  --overlong O        truncate (default) or drop examples longer than --seq-len\n"
    "  --tokenizer T       decode with T (byte, tokenizer.json or a model folder)\n"
    "Tokens that are not training targets (not predicted with loss) are shown in {{ }},\n"
    "as `data info` marks them; ' || ' separates the examples of a packed row.\n";

int fsdpc__data_batch(int argc, char **argv) {
  const char *cmd = "batch", *path = NULL, *v, *tok_spec = NULL;
  int packing = -1;
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  int64_t step = 0, x;
  for (int i = 1; i < argc; i++) {
    int r;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(batch_help, stdout);
      return 0;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "seq-len", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "seq-len", v, 1, 1 << 24, &x))
        return 2;
      o.seq_len = (int32_t)x;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "global-batch", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "global-batch", v, 1, 1 << 20, &o.global_batch))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "step", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_i64(cmd, "step", v, 0, INT64_MAX / 2, &step))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "seed", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_u64(cmd, "seed", v, &o.seed))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "split-seed", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (!fsdpc__data_parse_u64(cmd, "split-seed", v, &o.split_seed))
        return 2;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "split", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
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
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "eval-fraction", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      char *end;
      o.eval_fraction = strtod(v, &end);
      if (end == v || *end) {
        fprintf(stderr, "fsdpc data batch: --eval-fraction expects a number, got '%s'\n", v);
        return 2;
      }
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "packing", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      packing = !strcmp(v, "window")     ? FSDPC_PACK_WINDOW
                : !strcmp(v, "examples") ? FSDPC_PACK_EXAMPLES
                : !strcmp(v, "none")     ? FSDPC_PACK_NONE
                                         : -2;
      if (packing == -2) {
        fprintf(stderr, "fsdpc data batch: --packing must be window, examples or none\n");
        return 2;
      }
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "overlong", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      if (strcmp(v, "truncate") && strcmp(v, "drop")) {
        fprintf(stderr, "fsdpc data batch: --overlong must be truncate or drop\n");
        return 2;
      }
      o.overlong_drop = !strcmp(v, "drop");
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "tokenizer", &v))) {
      if (r < 0)
        return fsdpc__data_bad_arg(cmd, argv[i], 1);
      tok_spec = v;
    } else if (strcmp(argv[i], "--no-shuffle") == 0) {
      o.shuffle = 0;
    } else if (argv[i][0] == '-' || path) {
      return fsdpc__data_bad_arg(cmd, argv[i], 0);
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
  uint8_t *target = NULL;
  fsdpc_tokenizer *tok = NULL;
  int rc = 1;
  if (fsdpc__tokfile_open(path, &tf, &err))
    goto out;
  o.packing = packing >= 0                               ? packing
              : (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) ? FSDPC_PACK_EXAMPLES
                                                         : FSDPC_PACK_WINDOW;
  if (fsdpc__loader_create(tf, &o, &l, &err))
    goto out;
  if (tok_spec
          ? fsdpc__data_open_tokenizer(tok_spec, 1, &tok, &err)
          : (tf->hdr.vocab_size <= FSDPC_BYTE_VOCAB && fsdpc__tokenizer_byte_create(&tok, &err)))
    goto out;
  int64_t T = o.seq_len, count;
  buf = malloc((size_t)(3 * T) * sizeof *buf);
  target = malloc((size_t)T);
  if (!buf || fsdpc__loader_count_labels(l, step, o.global_batch, &count, &err))
    goto out;
  printf("step %" PRId64 " (epoch %" PRId64 "): %" PRId64 " windows of %" PRId64 " tokens, %" PRId64
         " target labels; split has %" PRId64 " of %" PRId64 " windows\n",
         step, step / fsdpc__loader_steps_per_epoch(l), o.global_batch, T, count,
         fsdpc__loader_num_windows(l), fsdpc__loader_total_windows(l));
  if (!buf || !target) {
    fsdpc__fail(&err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  if (o.packing != FSDPC_PACK_WINDOW) {
    fsdpc_loader_stats ls;
    fsdpc__loader_stats(l, &ls);
    printf("packing %s: %" PRId64 " examples in %" PRId64 " rows (%" PRId64 " tokens, %" PRId64
           " targets); longer than --seq-len: %" PRId64 " truncated, %" PRId64 " dropped\n",
           o.packing == FSDPC_PACK_NONE ? "none" : "examples", ls.examples,
           fsdpc__loader_total_windows(l), ls.tokens, ls.target_tokens, ls.truncated, ls.dropped);
  }
  for (int64_t pos = 0; pos < o.global_batch; pos++) {
    int64_t idx;
    if (fsdpc__loader_batch_window(l, step, pos, &idx, &err) ||
        fsdpc__loader_window(l, idx, buf, buf + T, buf + 2 * T, &err))
      goto out;
    int64_t targets = 0;
    for (int64_t j = 0; j < T; j++)
      targets += buf[T + j] != FSDPC_IGNORE_INDEX;
    /* token j is marked when it is trained on (predicted with loss), as
     * `data info` marks it; not when it predicts a target */
    if (fsdpc__loader_window_targets(l, idx, target, &err))
      goto out;
    printf("  [%" PRId64 "] window %" PRId64 ", %" PRId64 " targets: \"", pos, idx, targets);
    fsdpc__data_print_tokens(stdout, tok, buf, T, target,
                             o.packing != FSDPC_PACK_WINDOW ? buf + 2 * T : NULL);
    printf("\"\n");
  }
  rc = 0;
out:
  if (rc)
    fsdpc__data_fail(cmd, &err);
  free(buf);
  free(target);
  fsdpc__tokenizer_destroy(tok);
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
  return rc;
}
