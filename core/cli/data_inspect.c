/* `fsdpc data info` and `fsdpc data batch`: inspect a token file, as stored
 * and as the loader serves it (fsdpc_tokfile_*, fsdpc_batch_*). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_cli.h"

/* ---- info -------------------------------------------------------------- */

static const char info_help[] =
    "usage: fsdpc data info FILE [--docs K] [--tokenizer T]\n"
    "Validates a token file (header, sizes, offsets, checksum) and prints its header,\n"
    "counts and the first K documents (default 3): decoded with --tokenizer T (byte, or a\n"
    "tokenizer.json or its folder), else as bytes for a byte-tokenizer file, else as ids.\n"
    "Tokens that are not training targets are shown in {{ }}: mask bit 0, or nothing\n"
    "predicts them (an example's first token), as `data batch` marks them.\n";

enum { O_DOCS = 256, O_TOKENIZER };
static const cli_opt info_opts[] = {{"docs", O_DOCS, "K"}, {"tokenizer", O_TOKENIZER, "T"}, {0}};
const cli_cmd fsdpc__data_info_cmd = {"data info", info_help, info_opts};

#define BYTE_VOCAB 259 /* the byte tokenizer's: 256 bytes, BOS, EOS, PAD */

/* Prints document d: decoded by tok when given, else as bytes when the file
 * was made by the byte tokenizer (EOS and other ids above 255 as <id>), else
 * as raw ids. Tokens that are not targets (fsdpc_tokfile_doc_targets) are in
 * {{ }}. */
static void print_doc(const fsdpc_tokfile *tf, const fsdpc_tokfile_info *in, int64_t d,
                      const fsdpc_tokenizer *tok) {
  int64_t start, n;
  int32_t ids[200];
  uint8_t target[200];
  fsdpc_tokfile_doc(tf, d, &start, &n, NULL);
  int64_t shown = n < 200 ? n : 200;
  printf("  [%" PRId64 "] %" PRId64 " tokens: ", d, n);
  fsdpc_tokfile_read(tf, start, shown, ids, NULL, NULL);
  fsdpc_tokfile_doc_targets(tf, d, shown, target, NULL);
  if (in->vocab_size > BYTE_VOCAB && !tok) {
    for (int64_t i = 0; i < shown; i++)
      printf("%s%" PRId32, i ? " " : "", ids[i]);
    printf("%s\n", n > shown ? " ..." : "");
    return;
  }
  fsdpc_tokenizer *bytes = NULL;
  if (!tok && fsdpc_tokenizer_open("byte", 0, &bytes, NULL) == FSDPC_OK)
    tok = bytes; /* a byte-tokenizer file: names its BOS/EOS/PAD */
  putchar('"');
  fsdpc__data_print_tokens(stdout, tok, ids, shown, target, NULL);
  fsdpc_tokenizer_destroy(bytes);
  printf("\"%s\n", n > shown ? "..." : "");
}

static void print_special(const fsdpc_tokenizer *tok) {
  fsdpc_tokenizer_info ti = {.struct_size = sizeof ti};
  fsdpc_tokenizer_describe(tok, &ti);
  int32_t sp[3] = {ti.bos, ti.eos, ti.pad};
  const char *nm[3] = {"bos", "eos", "pad"};
  printf("special     ");
  for (int i = 0; i < 3; i++) {
    const char *str = sp[i] >= 0 ? fsdpc_tokenizer_token(tok, sp[i]) : NULL;
    if (sp[i] < 0)
      printf(" %s none", nm[i]);
    else
      printf(" %s %" PRId32 " %s", nm[i], sp[i], str ? str : "?");
    printf("%s", i < 2 ? "," : "\n");
  }
}

static void print_info(const char *path, const fsdpc_tokfile *tf, const fsdpc_tokfile_info *in,
                       const fsdpc_tokenizer *tok, int64_t k) {
  int64_t N = in->n_tokens, D = in->n_docs;
  printf("file         %s (%" PRId64 " bytes)\n", path, in->file_bytes);
  printf("format       FSDPCTOK version %" PRIu32 ", u%" PRIu32 " tokens\n", in->version,
         8 * in->token_bytes);
  printf("vocab_size   %" PRIu32 "\n", in->vocab_size);
  printf("eos_id       %" PRIu32 "\n", in->eos_id);
  printf("examples     %s\n", in->examples
                                  ? "yes: whole examples with their own BOS/end tokens (`fsdpc "
                                    "data prepare`); no EOS is inserted"
                                  : "no: the loader inserts EOS after each document");
  if (tok)
    print_special(tok);
  printf("tokens       %" PRId64 "\n", N);
  printf("documents    %" PRId64 "\n", D);
  if (D > 0)
    printf("doc length   min %" PRId64 ", mean %.1f, max %" PRId64 "\n", in->min_doc,
           (double)N / (double)D, in->max_doc);
  printf("loss mask    %s: %" PRId64 " of %" PRId64 " tokens are targets (%.1f%%; %s)\n",
         in->has_mask ? "yes" : "no", in->target_tokens, N,
         N ? 100.0 * (double)in->target_tokens / (double)N : 0.0,
         in->examples ? "an example's first token is never one"
                      : "the file's first token is never one");
  printf("checksums    header 0x%08" PRIx32 ", payload 0x%08" PRIx32 " (verified)\n",
         in->header_crc, in->payload_crc);
  if (k > D)
    k = D;
  if (k > 0)
    printf("preview      first %" PRId64 " document(s):\n", k);
  for (int64_t d = 0; d < k; d++)
    print_doc(tf, in, d, tok);
}

typedef struct info_cli {
  const char *path, *tok_spec;
  int64_t k;
} info_cli;

static int info_arg(void *ctx, int id, const char *v) {
  info_cli *a = ctx;
  if (id == O_DOCS)
    return cli_int(&fsdpc__data_info_cmd, "docs", v, 0, 1000000, &a->k);
  if (id == O_TOKENIZER)
    a->tok_spec = v;
  else if (!a->path)
    a->path = v;
  else
    return cli_usage_error(&fsdpc__data_info_cmd, "unexpected argument '%s'", v) == 0;
  return 1;
}

int fsdpc__data_info(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_info_cmd;
  info_cli a = {.k = 3};
  int rc = cli_parse(cmd, argc, argv, info_arg, &a);
  const char *path = a.path, *tok_spec = a.tok_spec;
  int64_t k = a.k;
  if (rc < 0 && !path)
    rc = cli_usage_error(cmd, "FILE is required");
  if (rc >= 0)
    return rc;
  fsdpc_err err = {0};
  fsdpc_tokfile *tf = NULL;
  fsdpc_tokenizer *tok = NULL;
  fsdpc_tokfile_info in = {.struct_size = sizeof in};
  fsdpc_tokenizer_info ti = {.struct_size = sizeof ti};
  fsdpc_status st = fsdpc_tokfile_open(path, &tf, &err);
  if (st == FSDPC_OK)
    fsdpc_tokfile_describe(tf, &in);
  if (st == FSDPC_OK && tok_spec && (st = fsdpc_tokenizer_open(tok_spec, 0, &tok, &err)) == 0) {
    fsdpc_tokenizer_describe(tok, &ti);
    if (ti.vocab_size > (int32_t)in.vocab_size)
      st = cli_error(&err, FSDPC_INVALID_USAGE,
                     "%s: tokenizer vocab %" PRId32 " exceeds the file's %" PRIu32
                     " (not the tokenizer it was made with?)",
                     tok_spec, ti.vocab_size, in.vocab_size);
  }
  if (st == FSDPC_OK)
    print_info(path, tf, &in, tok, k);
  fsdpc_tokenizer_destroy(tok);
  fsdpc_tokfile_close(tf);
  return st == FSDPC_OK ? 0 : cli_fail(cmd, err.msg);
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

enum {
  B_SEQ_LEN = 256,
  B_GLOBAL,
  B_STEP,
  B_SEED,
  B_NO_SHUFFLE,
  B_SPLIT,
  B_EVAL_FRACTION,
  B_SPLIT_SEED,
  B_PACKING,
  B_OVERLONG,
  B_TOKENIZER,
};
static const cli_opt batch_opts[] = {{"seq-len", B_SEQ_LEN, "T"},
                                     {"global-batch", B_GLOBAL, "G"},
                                     {"step", B_STEP, "S"},
                                     {"seed", B_SEED, "S"},
                                     {"no-shuffle", B_NO_SHUFFLE, NULL},
                                     {"split", B_SPLIT, "all|train|eval"},
                                     {"eval-fraction", B_EVAL_FRACTION, "F"},
                                     {"split-seed", B_SPLIT_SEED, "S"},
                                     {"packing", B_PACKING, "window|examples|none"},
                                     {"overlong", B_OVERLONG, "truncate|drop"},
                                     {"tokenizer", B_TOKENIZER, "T"},
                                     {0}};
const cli_cmd fsdpc__data_batch_cmd = {"data batch", batch_help, batch_opts};

typedef struct batch_cli {
  fsdpc_batch_args a;
  const char *path, *tok_spec;
} batch_cli;

/* One argument of batch: 1, or 0 after a usage error. */
static int batch_arg(void *ctx, int r, const char *v) {
  const cli_cmd *cmd = &fsdpc__data_batch_cmd;
  batch_cli *b = ctx;
  fsdpc_batch_args *a = &b->a;
  static const char *const splits[] = {"all", "train", "eval"};
  static const char *const packs[] = {"window", "examples", "none"};
  static const char *const overlong[] = {"truncate", "drop"};
  int i;
  switch (r) {
  case B_SEQ_LEN:
    return cli_int(cmd, "seq-len", v, 1, 1 << 24, &a->seq_len);
  case B_GLOBAL:
    return cli_int(cmd, "global-batch", v, 1, 1 << 20, &a->global_batch);
  case B_STEP:
    return cli_int(cmd, "step", v, 0, INT64_MAX / 2, &a->step);
  case B_SEED:
    return cli_u64(cmd, "seed", v, &a->seed);
  case B_SPLIT_SEED:
    return cli_u64(cmd, "split-seed", v, &a->split_seed);
  case B_NO_SHUFFLE:
    a->shuffle = 0;
    return 1;
  case B_SPLIT:
    return (i = cli_choice(cmd, "split", v, splits, 3)) >= 0 && (a->split = splits[i]);
  case B_PACKING:
    return (i = cli_choice(cmd, "packing", v, packs, 3)) >= 0 && (a->packing = packs[i]);
  case B_OVERLONG:
    return (i = cli_choice(cmd, "overlong", v, overlong, 2)) >= 0 && ((a->overlong_drop = i), 1);
  case B_EVAL_FRACTION:
    return cli_double(cmd, "eval-fraction", v, 0, 1, 0, &a->eval_fraction);
  case B_TOKENIZER:
    return (b->tok_spec = v) != NULL;
  default: /* CLI_POS */
    if (b->path)
      return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
    b->path = v;
    return 1;
  }
}

static fsdpc_status print_batch(fsdpc_batch *b, const fsdpc_batch_args *a,
                                const fsdpc_tokenizer *tok, fsdpc_err *err) {
  fsdpc_batch_info in = {.struct_size = sizeof in};
  fsdpc_batch_describe(b, &in);
  int64_t T = a->seq_len;
  printf("step %" PRId64 " (epoch %" PRId64 "): %" PRId64 " windows of %" PRId64 " tokens, %" PRId64
         " target labels; split has %" PRId64 " of %" PRId64 " windows\n",
         a->step, in.epoch, a->global_batch, T, in.target_labels, in.split_windows,
         in.total_windows);
  if (strcmp(in.packing, "window") != 0)
    printf("packing %s: %" PRId64 " examples in %" PRId64 " rows (%" PRId64 " tokens, %" PRId64
           " targets); longer than --seq-len: %" PRId64 " truncated, %" PRId64 " dropped\n",
           in.packing, in.examples, in.total_windows, in.tokens, in.target_tokens, in.truncated,
           in.dropped);
  uint8_t *target = malloc((size_t)T);
  if (!target)
    return cli_error(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = FSDPC_OK;
  for (int64_t pos = 0; st == FSDPC_OK && pos < a->global_batch; pos++) {
    int64_t idx, targets = 0;
    const int32_t *ids, *labels, *docs;
    if ((st = fsdpc_batch_row(b, pos, &idx, &ids, &labels, &docs, err)) != FSDPC_OK)
      break;
    for (int64_t j = 0; j < T; j++)
      targets += labels[j] != -100;
    /* token j is marked when it is trained on (predicted with loss), as
     * `data info` marks it; not when it predicts a target */
    if ((st = fsdpc_batch_row_targets(b, pos, target, err)) != FSDPC_OK)
      break;
    printf("  [%" PRId64 "] window %" PRId64 ", %" PRId64 " targets: \"", pos, idx, targets);
    fsdpc__data_print_tokens(stdout, tok, ids, T, target, docs);
    printf("\"\n");
  }
  free(target);
  return st;
}

int fsdpc__data_batch(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_batch_cmd;
  batch_cli bc = {0};
  fsdpc_batch_args_init(&bc.a);
  int rc = cli_parse(cmd, argc, argv, batch_arg, &bc);
  const char *path = bc.path, *tok_spec = bc.tok_spec;
  const fsdpc_batch_args a = bc.a;
  if (rc < 0 && (!path || !a.seq_len || !a.global_batch))
    rc = cli_usage_error(cmd, "FILE, --seq-len and --global-batch are required");
  if (rc >= 0)
    return rc;
  fsdpc_err err = {0};
  fsdpc_tokfile *tf = NULL;
  fsdpc_batch *b = NULL;
  fsdpc_tokenizer *tok = NULL;
  fsdpc_tokfile_info in = {.struct_size = sizeof in};
  fsdpc_status st = fsdpc_tokfile_open(path, &tf, &err);
  if (st == FSDPC_OK)
    fsdpc_tokfile_describe(tf, &in);
  if (st == FSDPC_OK)
    st = fsdpc_batch_create(tf, &a, &b, &err);
  if (st == FSDPC_OK && (tok_spec || in.vocab_size <= BYTE_VOCAB))
    st = fsdpc_tokenizer_open(tok_spec ? tok_spec : "byte", 0, &tok, &err);
  if (st == FSDPC_OK)
    st = print_batch(b, &a, tok, &err);
  fsdpc_tokenizer_destroy(tok);
  fsdpc_batch_destroy(b);
  fsdpc_tokfile_close(tf);
  return st == FSDPC_OK ? 0 : cli_fail(cmd, err.msg);
}
