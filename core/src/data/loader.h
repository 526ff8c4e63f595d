/* Packing loader: turns a token file into (tokens, labels, doc_ids) batches
 * addressed by global step, so that training is identical at any world size.
 *
 * Stream. Documents are concatenated in file order, each followed by one EOS:
 *   d0 EOS d1 EOS ... d_{D-1} EOS          length L = N + D
 * Windows. Window k is stream[k*T, k*T + T + 1): T+1 tokens, so consecutive
 * windows share one token (stride T). inputs = w[0:T], labels = w[1:T+1].
 * There are W = floor((L - 1) / T) windows; the tail that does not fill one
 * is dropped.
 * Labels. labels[j] = -100 (FSDPC_IGNORE_INDEX) when the target token w[j+1]
 * has loss-mask bit 0 in the file; inserted EOS tokens are always targets.
 * doc_ids[j] is the document index within the window (0 for the document
 * the window starts in, +1 after each EOS); an EOS belongs to the document it
 * ends.
 * Split. With eval_fraction f > 0, round(W*f) windows (at least 1, at most
 * W-1) are held out: the first ones of a Fisher-Yates permutation of [0, W)
 * drawn from split_seed. FSDPC_SPLIT_EVAL sees those, FSDPC_SPLIT_TRAIN the
 * rest, both in ascending window order; the two are disjoint and depend only
 * on (W, f, split_seed), never on the shuffle seed. A separate eval file is
 * just a second loader with FSDPC_SPLIT_ALL.
 * Shuffle. With shuffle on, epoch e visits the split's n windows in the
 * order of a Fisher-Yates permutation drawn from a xoshiro256** generator
 * seeded with splitmix64(seed) ^ e (data/rng.h); with shuffle off, in split
 * order. Same seed, same order, on every platform.
 * Global batch. G = global_batch windows per optimizer step; an epoch has
 * floor(n / G) steps (the remainder is dropped, and differs per epoch because
 * the order does). Step s is epoch e = s / steps_per_epoch, batch b =
 * s % steps_per_epoch, and covers positions [b*G, (b+1)*G) of epoch e's
 * order. With micro_batch mb and dp_size P (so grad_accum = G / (mb*P)),
 * rank r in micro-batch m reads positions b*G + (m*P + r)*mb + [0, mb).
 * The union over (m, r) is exactly the global batch for any split of G.
 *
 * Examples files. A file with FSDPC_TOKFILE_EXAMPLES (written by `fsdpc data
 * prepare`) stores whole examples that end with their own end tokens; the
 * window stream then inserts no EOS (L = N) and everything else holds.
 *
 * Packing examples (opts.packing = FSDPC_PACK_EXAMPLES or _NONE). Instead of
 * cutting the stream into windows, whole examples (a document plus the EOS
 * the stream would insert, none for an examples file) are placed into rows
 * of T tokens (pack.c: first-fit decreasing within chunks of pack_buffer
 * examples visited in a seeded order; NONE = one example per row). A row is
 * a "window" for everything above (split, shuffle, global batch). In a row,
 * example i occupies consecutive positions with doc_ids = i; inputs are its
 * tokens, labels[j] is the example's next token when that token's mask bit
 * is 1 and -100 otherwise (the last token of an example predicts nothing,
 * so no example learns from another). The rest of the row is padding:
 * pad_id tokens, labels -100, one doc id of their own. Examples longer than
 * T are cut to their first T tokens (overlong_drop 0) or left out (1).
 *
 * Pairs (FSDPC_PACK_PAIRS, files marked FSDPC_TOKFILE_PAIRS by `fsdpc data
 * prepare --format preference`): documents 2k, 2k+1 are a (chosen, rejected)
 * pair and share one row (doc ids 0, 1; positions restart), so a micro-batch
 * never splits a pair; a pair longer than T is dropped.
 *
 * Not thread-safe: the loader caches the current epoch's permutation. It
 * borrows the token file, which must outlive it. */
#ifndef FSDPC_DATA_LOADER_H
#define FSDPC_DATA_LOADER_H

#include <stdint.h>

#include "data/tokfile.h"
#include "util/err.h"

#define FSDPC_IGNORE_INDEX (-100)

enum { FSDPC_SPLIT_ALL = 0, FSDPC_SPLIT_TRAIN = 1, FSDPC_SPLIT_EVAL = 2 };
enum { FSDPC_PACK_WINDOW = 0, FSDPC_PACK_EXAMPLES = 1, FSDPC_PACK_NONE = 2, FSDPC_PACK_PAIRS = 3 };

typedef struct fsdpc_loader_opts {
  int32_t seq_len;       /* T, >= 1 */
  int64_t global_batch;  /* G, windows per step, >= 1 */
  uint64_t seed;         /* shuffle seed */
  int32_t shuffle;       /* 1: new order every epoch; 0: split order */
  int32_t split;         /* FSDPC_SPLIT_ALL / _TRAIN / _EVAL */
  double eval_fraction;  /* in [0, 1); 0 = no held-out windows */
  uint64_t split_seed;   /* chooses the held-out windows */
  int32_t packing;       /* FSDPC_PACK_*; default WINDOW */
  int32_t overlong_drop; /* packing examples/none: 1 drops, 0 truncates long examples */
  int64_t pack_buffer;   /* examples per first-fit-decreasing chunk (default 4096) */
  int32_t pad_id;        /* padding token of packed rows; -1 = the file's eos_id */
} fsdpc_loader_opts;

/* What the loader made of the file, for the run's summary. */
typedef struct fsdpc_loader_stats {
  int64_t examples;      /* examples placed in rows (documents, for window packing) */
  int64_t truncated;     /* examples cut to seq_len (packing examples/none) */
  int64_t dropped;       /* examples left out for being longer than seq_len */
  int64_t tokens;        /* tokens placed in rows (stream length for window packing) */
  int64_t target_tokens; /* labels != -100 over all windows of the file */
} fsdpc_loader_stats;

/* Checkpointable position: the next step to serve and its epoch. The epoch
 * is redundant with step, and restore() uses it to detect that the data,
 * seq_len or global batch changed since the checkpoint. */
typedef struct fsdpc_loader_state {
  int64_t epoch;
  int64_t step;
} fsdpc_loader_state;

typedef struct fsdpc_loader fsdpc_loader;

/* seq_len 0 (must be set), global_batch 0 (must be set), seed 0, shuffle 1,
 * split ALL, eval_fraction 0, split_seed 0x5EED5EED, packing WINDOW,
 * overlong_drop 0, pack_buffer 4096, pad_id -1. */
void fsdpc__loader_opts_default(fsdpc_loader_opts *opts);

/* Fails with one line if the file (or split) has fewer windows than G. */
fsdpc_status fsdpc__loader_create(const fsdpc_tokfile *tf, const fsdpc_loader_opts *opts,
                                  fsdpc_loader **out, fsdpc_err *err);
void fsdpc__loader_destroy(fsdpc_loader *loader);

/* Windows in the whole file (W) and in this loader's split (n). */
int64_t fsdpc__loader_total_windows(const fsdpc_loader *loader);
int64_t fsdpc__loader_num_windows(const fsdpc_loader *loader);
int64_t fsdpc__loader_steps_per_epoch(const fsdpc_loader *loader);
int32_t fsdpc__loader_seq_len(const fsdpc_loader *loader);
void fsdpc__loader_stats(const fsdpc_loader *loader, fsdpc_loader_stats *out);
int32_t fsdpc__loader_packing(const fsdpc_loader *loader); /* FSDPC_PACK_* */

/* Window idx of the split in split order (idx in [0, n)), unshuffled; for
 * evaluation over every held-out window. Output buffers are (T); doc_ids may
 * be NULL. */
fsdpc_status fsdpc__loader_window(fsdpc_loader *loader, int64_t idx, int32_t *tokens,
                                  int32_t *labels, int32_t *doc_ids, fsdpc_err *err);
/* Which of window idx's T input tokens are training targets: predicted with
 * loss, by a label of this window or (the first token of a stream window)
 * by the last label of the window before it. target (T) gets 0/1. This is
 * the rule `fsdpc data batch` marks by, and `fsdpc data info` marks a
 * file's documents by under its default packing (docs/data.md). */
fsdpc_status fsdpc__loader_window_targets(fsdpc_loader *loader, int64_t idx, uint8_t *target,
                                          fsdpc_err *err);
/* Split-order index of the window at position pos of the given step's
 * global batch (pos in [0, G)); exposed so tests and tools can check the
 * addressing without copying tokens. */
fsdpc_status fsdpc__loader_batch_window(fsdpc_loader *loader, int64_t step, int64_t pos,
                                        int64_t *idx, fsdpc_err *err);

/* This rank's part of micro-batch `micro` of step `step` (see header
 * comment). G must equal micro_batch * grad_accum * dp_size for some
 * integer grad_accum, and micro < grad_accum. Outputs are (micro_batch, T);
 * doc_ids may be NULL. */
fsdpc_status fsdpc__loader_batch(fsdpc_loader *loader, int64_t step, int32_t micro, int32_t dp_rank,
                                 int32_t dp_size, int32_t micro_batch, int32_t *tokens,
                                 int32_t *labels, int32_t *doc_ids, fsdpc_err *err);

/* Number of labels != -100 in the whole global batch of step (G windows),
 * identical on every rank: the loss normaliser. global_batch must equal the
 * loader's G (it is passed so that a mismatch is caught). */
fsdpc_status fsdpc__loader_count_labels(fsdpc_loader *loader, int64_t step, int64_t global_batch,
                                        int64_t *count, fsdpc_err *err);

/* The next step after the highest step served by batch() (or restored). */
void fsdpc__loader_state(const fsdpc_loader *loader, fsdpc_loader_state *out);
fsdpc_status fsdpc__loader_restore(fsdpc_loader *loader, const fsdpc_loader_state *state,
                                   fsdpc_err *err);

#endif
