/* Packing loader; the semantics are specified in loader.h. Dimension names:
 * T = seq_len, G = global batch (windows per step), N = tokens in the file,
 * D = documents, L = N + D stream length, W = windows in the file, n =
 * windows in this loader's split. */
#include "data/loader.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader_internal.h"
#include "data/rng.h"

struct fsdpc_loader {
  const fsdpc_tokfile *tf;
  fsdpc_loader_opts opts;
  int64_t total_windows; /* W */
  int64_t n;             /* windows in the split */
  int64_t *windows;      /* (n) file window indices of the split, ascending */
  int64_t steps_per_epoch;
  int64_t perm_epoch; /* epoch whose order is in perm, -1 = none */
  int64_t *perm;      /* (n) split indices in visiting order */
  int64_t next_step;
  int32_t *scratch_tok;  /* (T+1) */
  uint8_t *scratch_mask; /* (T+1) */
  int32_t *scratch_doc;  /* (T+1) */
  int64_t sep;           /* 1: an EOS follows each document in the stream */
  fsdpc_pack pack;       /* packing examples/none: the rows */
  fsdpc_loader_stats stats;
};

static fsdpc_status count_targets(fsdpc_loader *l, fsdpc_err *err);

void fsdpc__loader_opts_default(fsdpc_loader_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->shuffle = 1;
  opts->split = FSDPC_SPLIT_ALL;
  opts->split_seed = 0x5EED5EEDull;
  opts->packing = FSDPC_PACK_WINDOW;
  opts->pack_buffer = 4096;
  opts->pad_id = -1;
}

static fsdpc_status check_opts(const fsdpc_tokfile *tf, const fsdpc_loader_opts *o,
                               fsdpc_err *err) {
  if (o->seq_len < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: seq_len must be >= 1, got %" PRId32, tf->path,
                       o->seq_len);
  if (o->global_batch < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: global batch must be >= 1 window, got %" PRId64, tf->path,
                       o->global_batch);
  if (o->split != FSDPC_SPLIT_ALL && o->split != FSDPC_SPLIT_TRAIN && o->split != FSDPC_SPLIT_EVAL)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: unknown split %" PRId32, tf->path, o->split);
  if (o->packing != FSDPC_PACK_WINDOW && o->packing != FSDPC_PACK_EXAMPLES &&
      o->packing != FSDPC_PACK_NONE && o->packing != FSDPC_PACK_PAIRS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: unknown packing %" PRId32, tf->path,
                       o->packing);
  if (o->pad_id >= (int32_t)tf->hdr.vocab_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: pad id %" PRId32 " is not below the file's vocab_size %" PRIu32,
                       tf->path, o->pad_id, tf->hdr.vocab_size);
  if (!(o->eval_fraction >= 0.0 && o->eval_fraction < 1.0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: eval_fraction must be in [0, 1), got %g",
                       tf->path, o->eval_fraction);
  if (o->split == FSDPC_SPLIT_EVAL && o->eval_fraction == 0.0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: the eval split needs eval_fraction > 0 (or use a separate eval "
                       "file with split 'all')",
                       tf->path);
  return FSDPC_OK;
}

/* Fills l->windows with the split's file window indices, ascending. */
static fsdpc_status make_split(fsdpc_loader *l, fsdpc_err *err) {
  int64_t W = l->total_windows;
  const fsdpc_loader_opts *o = &l->opts;
  int64_t n_eval = 0;
  if (o->eval_fraction > 0.0) {
    n_eval = (int64_t)llround((double)W * o->eval_fraction);
    if (n_eval < 1)
      n_eval = 1;
    if (n_eval > W - 1)
      n_eval = W - 1;
    if (n_eval < 1)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %" PRId64 " window(s) cannot be split into train and eval",
                         l->tf->path, W);
  }
  l->n = o->split == FSDPC_SPLIT_EVAL ? n_eval : o->split == FSDPC_SPLIT_TRAIN ? W - n_eval : W;
  l->windows = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *l->windows);
  if (!l->windows)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", l->tf->path);
  if (n_eval == 0 || o->split == FSDPC_SPLIT_ALL) {
    for (int64_t k = 0; k < l->n; k++)
      l->windows[k] = k;
    return FSDPC_OK;
  }
  /* Mark the held-out windows, then collect the wanted side in order. */
  int64_t *perm = malloc((size_t)W * sizeof *perm);
  uint8_t *is_eval = calloc((size_t)W, 1);
  if (!perm || !is_eval) {
    free(perm);
    free(is_eval);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", l->tf->path);
  }
  for (int64_t k = 0; k < W; k++)
    perm[k] = k;
  fsdpc_rng rng;
  fsdpc__rng_seed(&rng, o->split_seed);
  fsdpc__rng_shuffle_i64(&rng, perm, W);
  for (int64_t k = 0; k < n_eval; k++)
    is_eval[perm[k]] = 1;
  int want = o->split == FSDPC_SPLIT_EVAL;
  int64_t j = 0;
  for (int64_t k = 0; k < W; k++)
    if (is_eval[k] == want)
      l->windows[j++] = k;
  free(perm);
  free(is_eval);
  return FSDPC_OK;
}

fsdpc_status fsdpc__loader_create(const fsdpc_tokfile *tf, const fsdpc_loader_opts *opts,
                                  fsdpc_loader **out, fsdpc_err *err) {
  *out = NULL;
  FSDPC_TRY(check_opts(tf, opts, err));
  fsdpc_status st;
  fsdpc_loader *l = calloc(1, sizeof *l);
  if (!l)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", tf->path);
  l->tf = tf;
  l->opts = *opts;
  l->perm_epoch = -1;
  int64_t T = opts->seq_len;
  l->sep = (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) ? 0 : 1;
  int64_t L = fsdpc__tokfile_n_tokens(tf) + l->sep * fsdpc__tokfile_n_docs(tf);
  l->total_windows = L > 0 ? (L - 1) / T : 0;
  if (opts->packing == FSDPC_PACK_PAIRS) {
    if ((st = fsdpc__pack_pairs(&l->pack, tf, T, opts->seed, opts->shuffle, err)) != FSDPC_OK)
      goto fail;
    l->total_windows = l->pack.n_bins;
    if (l->total_windows < 1) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: no (chosen, rejected) pair fits in seq_len %" PRId64 " (%" PRId64
                       " dropped: a row holds both; use a longer data.seq_len)",
                       tf->path, T, l->pack.dropped);
      goto fail;
    }
  } else if (opts->packing != FSDPC_PACK_WINDOW) {
    if ((st = fsdpc__pack_bins(&l->pack, tf, T, (int)l->sep, opts->packing == FSDPC_PACK_NONE,
                               opts->overlong_drop, opts->pack_buffer, opts->seed, opts->shuffle,
                               err)) != FSDPC_OK)
      goto fail;
    l->total_windows = l->pack.n_bins;
    if (l->total_windows < 1) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: no example fits in seq_len %" PRId64 " (%" PRId64
                       " dropped as overlong; use a longer data.seq_len or data.overlong: "
                       "truncate)",
                       tf->path, T, l->pack.dropped);
      goto fail;
    }
  } else if (l->total_windows < 1) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: %" PRId64 " tokens (with EOS) are fewer than one window of seq_len+1 "
                     "= %" PRId64,
                     tf->path, L, T + 1);
    goto fail;
  }
  if ((st = make_split(l, err)) != FSDPC_OK)
    goto fail;
  if (l->n < opts->global_batch) {
    static const char *names[] = {"file", "train split", "eval split"};
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: the %s has %" PRId64 " windows of %" PRId64
                     " tokens, fewer than one global batch of %" PRId64
                     " (use more data, a shorter seq_len or a smaller batch)",
                     tf->path, names[opts->split], l->n, T, opts->global_batch);
    goto fail;
  }
  l->steps_per_epoch = l->n / opts->global_batch;
  l->perm = malloc((size_t)l->n * sizeof *l->perm);
  l->scratch_tok = malloc((size_t)(T + 1) * sizeof *l->scratch_tok);
  l->scratch_mask = malloc((size_t)(T + 1));
  l->scratch_doc = malloc((size_t)(T + 1) * sizeof *l->scratch_doc);
  if (!l->perm || !l->scratch_tok || !l->scratch_mask || !l->scratch_doc) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", tf->path);
    goto fail;
  }
  if ((st = count_targets(l, err)) != FSDPC_OK)
    goto fail;
  *out = l;
  return FSDPC_OK;
fail:
  fsdpc__loader_destroy(l);
  return st;
}

void fsdpc__loader_destroy(fsdpc_loader *l) {
  if (!l)
    return;
  free(l->windows);
  free(l->perm);
  free(l->scratch_tok);
  free(l->scratch_mask);
  free(l->scratch_doc);
  fsdpc__pack_free(&l->pack);
  free(l);
}

int64_t fsdpc__loader_total_windows(const fsdpc_loader *l) {
  return l->total_windows;
}
int64_t fsdpc__loader_num_windows(const fsdpc_loader *l) {
  return l->n;
}
int64_t fsdpc__loader_steps_per_epoch(const fsdpc_loader *l) {
  return l->steps_per_epoch;
}
int32_t fsdpc__loader_seq_len(const fsdpc_loader *l) {
  return l->opts.seq_len;
}
void fsdpc__loader_stats(const fsdpc_loader *l, fsdpc_loader_stats *out) {
  *out = l->stats;
}
int32_t fsdpc__loader_packing(const fsdpc_loader *l) {
  return l->opts.packing;
}

/* Largest d in [0, D) with off[d] + d*sep <= p: the document whose stream
 * span [off[d] + d*sep, off[d+1] + d*sep + sep) (its tokens, then its EOS
 * when sep is 1) holds position p. */
static int64_t doc_at(const fsdpc_tokfile *tf, int64_t p, int64_t sep) {
  const uint64_t *off = tf->offsets;
  int64_t lo = 0, hi = fsdpc__tokfile_n_docs(tf) - 1;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if ((int64_t)off[mid] + mid * sep <= p)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Reads file window k (T+1 stream tokens) into the scratch buffers. */
static void read_stream_window(fsdpc_loader *l, int64_t k) {
  const fsdpc_tokfile *tf = l->tf;
  const uint64_t *off = tf->offsets;
  int64_t T = l->opts.seq_len, p = k * T, sep = l->sep;
  int64_t d = doc_at(tf, p, sep);
  int64_t within = p - ((int64_t)off[d] + d * sep); /* == doc length: at its EOS */
  int32_t local = 0, eos = (int32_t)tf->hdr.eos_id;
  for (int64_t j = 0; j <= T; j++) {
    int64_t len = (int64_t)(off[d + 1] - off[d]);
    while (!sep && within >= len) { /* examples file: no EOS, skip to the next document */
      d++;
      within = 0;
      local++;
      len = (int64_t)(off[d + 1] - off[d]);
    }
    if (within < len) {
      l->scratch_tok[j] = fsdpc__tokfile_token(tf, (int64_t)off[d] + within);
      l->scratch_mask[j] = (uint8_t)fsdpc__tokfile_mask(tf, (int64_t)off[d] + within);
    } else {
      l->scratch_tok[j] = eos;
      l->scratch_mask[j] = 1;
    }
    l->scratch_doc[j] = local;
    if (++within > len - 1 + sep) { /* passed this document's last token */
      d++;
      within = 0;
      local++;
    }
  }
}

/* Reads packed row k: scratch_tok/scratch_mask hold the row's T tokens and
 * the mask bit of each; scratch_doc the example index (T+1 entries, the last
 * one a sentinel so that the label rule sees a boundary at the row's end). */
static void read_row(fsdpc_loader *l, int64_t k) {
  const fsdpc_tokfile *tf = l->tf;
  const uint64_t *off = tf->offsets;
  const fsdpc_pack *p = &l->pack;
  int64_t T = l->opts.seq_len, j = 0;
  int32_t local = 0, eos = (int32_t)tf->hdr.eos_id;
  for (int64_t b = p->bin_start[k]; b < p->bin_start[k + 1]; b++, local++) {
    int64_t d = p->bin_docs[b], len = (int64_t)(off[d + 1] - off[d]);
    for (int64_t i = 0; i < len + l->sep && j < T; i++, j++) {
      if (i < len) {
        l->scratch_tok[j] = fsdpc__tokfile_token(tf, (int64_t)off[d] + i);
        l->scratch_mask[j] = (uint8_t)fsdpc__tokfile_mask(tf, (int64_t)off[d] + i);
      } else {
        l->scratch_tok[j] = eos;
        l->scratch_mask[j] = 1;
      }
      l->scratch_doc[j] = local;
    }
  }
  int32_t pad = l->opts.pad_id >= 0 ? l->opts.pad_id : eos;
  for (; j <= T; j++) {
    l->scratch_tok[j] = pad;
    l->scratch_mask[j] = 0;
    l->scratch_doc[j] = local + (j == T); /* padding is its own document */
  }
}

static void read_window(fsdpc_loader *l, int64_t k) {
  if (l->opts.packing == FSDPC_PACK_WINDOW)
    read_stream_window(l, k);
  else
    read_row(l, k);
}

static void emit_window(const fsdpc_loader *l, int32_t *tokens, int32_t *labels, int32_t *doc_ids) {
  int64_t T = l->opts.seq_len;
  int packed = l->opts.packing != FSDPC_PACK_WINDOW;
  for (int64_t j = 0; j < T; j++) {
    tokens[j] = l->scratch_tok[j];
    int same = !packed || l->scratch_doc[j + 1] == l->scratch_doc[j];
    labels[j] = same && l->scratch_mask[j + 1] ? l->scratch_tok[j + 1] : FSDPC_IGNORE_INDEX;
    if (doc_ids)
      doc_ids[j] = l->scratch_doc[j];
  }
}

/* Counted labels of window k (after read_window). */
static int64_t window_targets(const fsdpc_loader *l) {
  int64_t T = l->opts.seq_len, c = 0;
  int packed = l->opts.packing != FSDPC_PACK_WINDOW;
  for (int64_t j = 0; j < T; j++)
    c += l->scratch_mask[j + 1] && (!packed || l->scratch_doc[j + 1] == l->scratch_doc[j]);
  return c;
}

/* Fills the stats and, for packed rows, the per-row label counts. */
static fsdpc_status count_targets(fsdpc_loader *l, fsdpc_err *err) {
  fsdpc_loader_stats *st = &l->stats;
  int64_t W = l->total_windows;
  if (l->opts.packing == FSDPC_PACK_WINDOW) {
    st->examples = fsdpc__tokfile_n_docs(l->tf);
    st->tokens = fsdpc__tokfile_n_tokens(l->tf) + l->sep * st->examples;
    /* Windows' labels are stream positions 1 .. W*T, each once. Count the
     * targets among them from the mask bits, document by document, without
     * reading the windows (a pretraining file may be large). */
    int64_t end = W * l->opts.seq_len; /* last label position */
    if (!l->tf->mask) {
      st->target_tokens = end;
      return FSDPC_OK;
    }
    const uint64_t *off = l->tf->offsets;
    int64_t D = fsdpc__tokfile_n_docs(l->tf), c = 0;
    for (int64_t d = 0; d < D; d++) {
      int64_t s0 = (int64_t)off[d] + d * l->sep; /* stream position of its first token */
      if (s0 > end)
        break;
      int64_t len = (int64_t)(off[d + 1] - off[d]);
      int64_t a = s0 < 1 ? 1 - s0 : 0, b = len < end - s0 + 1 ? len : end - s0 + 1;
      for (int64_t i = a; i < b;) { /* mask bits of tokens [a, b), a byte at a time */
        int64_t t = (int64_t)off[d] + i;
        if ((t & 7) == 0 && i + 8 <= b) {
          c += __builtin_popcount(l->tf->mask[t >> 3]);
          i += 8;
        } else {
          c += fsdpc__tokfile_mask(l->tf, t);
          i++;
        }
      }
      if (l->sep && s0 + len <= end && s0 + len >= 1)
        c++; /* its EOS */
    }
    st->target_tokens = c;
    return FSDPC_OK;
  }
  st->examples = l->pack.examples;
  st->truncated = l->pack.truncated;
  st->dropped = l->pack.dropped;
  st->tokens = l->pack.tokens;
  l->pack.bin_targets = malloc((size_t)W * sizeof *l->pack.bin_targets);
  if (!l->pack.bin_targets)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", l->tf->path);
  for (int64_t k = 0; k < W; k++) {
    read_window(l, k);
    l->pack.bin_targets[k] = window_targets(l);
    st->target_tokens += l->pack.bin_targets[k];
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__loader_window(fsdpc_loader *l, int64_t idx, int32_t *tokens, int32_t *labels,
                                  int32_t *doc_ids, fsdpc_err *err) {
  if (idx < 0 || idx >= l->n)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: window %" PRId64 " is outside the split's %" PRId64 " windows",
                       l->tf->path, idx, l->n);
  read_window(l, l->windows[idx]);
  emit_window(l, tokens, labels, doc_ids);
  return FSDPC_OK;
}

fsdpc_status fsdpc__loader_window_targets(fsdpc_loader *l, int64_t idx, uint8_t *target,
                                          fsdpc_err *err) {
  if (idx < 0 || idx >= l->n)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: window %" PRId64 " is outside the split's %" PRId64 " windows",
                       l->tf->path, idx, l->n);
  int64_t k = l->windows[idx], T = l->opts.seq_len;
  read_window(l, k);
  int packed = l->opts.packing != FSDPC_PACK_WINDOW;
  for (int64_t j = 0; j < T; j++)
    target[j] =
        (uint8_t)(l->scratch_mask[j] &&
                  (packed ? j > 0 && l->scratch_doc[j - 1] == l->scratch_doc[j] : k * T + j > 0));
  return FSDPC_OK;
}

/* Makes l->perm hold epoch e's visiting order. */
static void ensure_epoch(fsdpc_loader *l, int64_t e) {
  if (l->perm_epoch == e)
    return;
  for (int64_t k = 0; k < l->n; k++)
    l->perm[k] = k;
  if (l->opts.shuffle) {
    uint64_t x = l->opts.seed;
    fsdpc_rng rng;
    fsdpc__rng_seed(&rng, fsdpc__splitmix64(&x) ^ (uint64_t)e);
    fsdpc__rng_shuffle_i64(&rng, l->perm, l->n);
  }
  l->perm_epoch = e;
}

fsdpc_status fsdpc__loader_batch_window(fsdpc_loader *l, int64_t step, int64_t pos, int64_t *idx,
                                        fsdpc_err *err) {
  if (step < 0 || pos < 0 || pos >= l->opts.global_batch)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: batch position (step %" PRId64 ", %" PRId64 ") is outside [0, %" PRId64
                       ")",
                       l->tf->path, step, pos, l->opts.global_batch);
  ensure_epoch(l, step / l->steps_per_epoch);
  *idx = l->perm[(step % l->steps_per_epoch) * l->opts.global_batch + pos];
  return FSDPC_OK;
}

fsdpc_status fsdpc__loader_batch(fsdpc_loader *l, int64_t step, int32_t micro, int32_t dp_rank,
                                 int32_t dp_size, int32_t micro_batch, int32_t *tokens,
                                 int32_t *labels, int32_t *doc_ids, fsdpc_err *err) {
  int64_t G = l->opts.global_batch, T = l->opts.seq_len;
  if (micro_batch < 1 || dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "loader: bad batch shape: micro_batch %" PRId32 ", dp_rank %" PRId32
                       " of dp_size %" PRId32,
                       micro_batch, dp_rank, dp_size);
  int64_t per_micro = (int64_t)micro_batch * dp_size;
  if (G % per_micro != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "loader: global batch %" PRId64 " is not a multiple of micro_batch %" PRId32
                       " x dp_size %" PRId32 " (pick grad_accum so that G = mb * accum * dp)",
                       G, micro_batch, dp_size);
  int64_t accum = G / per_micro;
  if (micro < 0 || micro >= accum)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "loader: micro-batch %" PRId32 " is outside [0, %" PRId64
                       ") for global batch %" PRId64,
                       micro, accum, G);
  if (step < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "loader: negative step %" PRId64, step);
  int64_t first = ((int64_t)micro * dp_size + dp_rank) * micro_batch;
  for (int64_t i = 0; i < micro_batch; i++) {
    int64_t idx;
    FSDPC_TRY(fsdpc__loader_batch_window(l, step, first + i, &idx, err));
    read_window(l, l->windows[idx]);
    emit_window(l, tokens + i * T, labels + i * T, doc_ids ? doc_ids + i * T : NULL);
  }
  if (step + 1 > l->next_step)
    l->next_step = step + 1;
  return FSDPC_OK;
}

fsdpc_status fsdpc__loader_count_labels(fsdpc_loader *l, int64_t step, int64_t global_batch,
                                        int64_t *count, fsdpc_err *err) {
  int64_t G = l->opts.global_batch, T = l->opts.seq_len;
  if (global_batch != G)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "loader: count_labels asked for a global batch of %" PRId64
                       " windows, the loader was made for %" PRId64,
                       global_batch, G);
  if (step < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "loader: negative step %" PRId64, step);
  int packed = l->opts.packing != FSDPC_PACK_WINDOW;
  if (!l->tf->mask && !packed) { /* every label is a target */
    *count = G * T;
    return FSDPC_OK;
  }
  int64_t c = 0;
  for (int64_t pos = 0; pos < G; pos++) {
    int64_t idx;
    FSDPC_TRY(fsdpc__loader_batch_window(l, step, pos, &idx, err));
    if (packed) {
      c += l->pack.bin_targets[l->windows[idx]];
      continue;
    }
    read_window(l, l->windows[idx]);
    c += window_targets(l);
  }
  *count = c;
  return FSDPC_OK;
}

void fsdpc__loader_state(const fsdpc_loader *l, fsdpc_loader_state *out) {
  out->step = l->next_step;
  out->epoch = l->next_step / l->steps_per_epoch;
}

fsdpc_status fsdpc__loader_restore(fsdpc_loader *l, const fsdpc_loader_state *state,
                                   fsdpc_err *err) {
  if (state->step < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "loader: cannot restore negative step %" PRId64,
                       state->step);
  int64_t epoch = state->step / l->steps_per_epoch;
  if (epoch != state->epoch)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: loader state (epoch %" PRId64 ", step %" PRId64
                       ") does not match this data: step %" PRId64 " is in epoch %" PRId64
                       " at %" PRId64 " steps per epoch (data, seq_len or global batch changed "
                       "since the checkpoint)",
                       l->tf->path, state->epoch, state->step, state->step, epoch,
                       l->steps_per_epoch);
  l->next_step = state->step;
  return FSDPC_OK;
}
