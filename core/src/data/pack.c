/* Packing whole examples into rows of T tokens (data.packing: examples or
 * none); the rules are in loader.h ("Packing examples"). This file computes
 * the bins once at loader creation; loader.c reads them.
 *
 * Examples: document d of the token file, followed by one EOS when the file
 * is not an "examples" file (the same EOS the window stream inserts). Its
 * length e = len(d) + sep. An example with e > T is truncated to its first T
 * tokens or dropped (opts.overlong_drop). Empty examples are skipped.
 *
 * Algorithm: visit the examples in a seeded random order (file order with
 * shuffle off), cut that order into chunks of pack_buffer examples, and in
 * each chunk place examples by first-fit decreasing (longest first, ties in
 * visiting order) into bins of capacity T opened for that chunk. A chunk's
 * bins follow the previous chunk's. "none" puts every example in its own
 * bin, in visiting order. Deterministic for a given (file, T, seed). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader_internal.h"
#include "data/rng.h"

typedef struct item {
  int64_t doc, len, order;
} item;

static int by_len_desc(const void *a, const void *b) {
  const item *x = a, *y = b;
  if (x->len != y->len)
    return x->len > y->len ? -1 : 1;
  return (x->order > y->order) - (x->order < y->order);
}

/* Growable int64 array. */
typedef struct vec {
  int64_t *v;
  int64_t n, cap;
} vec;
static int vec_push(vec *a, int64_t x) {
  if (a->n == a->cap) {
    int64_t cap = a->cap ? a->cap * 2 : 1024;
    int64_t *p = realloc(a->v, (size_t)cap * sizeof *p);
    if (!p)
      return 0;
    a->v = p, a->cap = cap;
  }
  a->v[a->n++] = x;
  return 1;
}

fsdpc_status fsdpc__pack_bins(fsdpc_pack *p, const fsdpc_tokfile *tf, int64_t T, int sep, int none,
                              int overlong_drop, int64_t buffer, uint64_t seed, int shuffle,
                              fsdpc_err *err) {
  memset(p, 0, sizeof *p);
  int64_t D = fsdpc__tokfile_n_docs(tf);
  const uint64_t *off = tf->offsets;
  if (buffer < 1)
    buffer = 1;
  int64_t *order = malloc((size_t)(D > 0 ? D : 1) * sizeof *order);
  item *chunk = malloc((size_t)(buffer < D ? buffer : (D > 0 ? D : 1)) * sizeof *chunk);
  int64_t *room = malloc((size_t)(buffer < D ? buffer : (D > 0 ? D : 1)) * sizeof *room);
  vec starts = {0}, docs = {0};
  /* Per chunk: bins as linked lists of items (head/next) to emit in order. */
  int64_t *head = malloc((size_t)(buffer < D ? buffer : (D > 0 ? D : 1)) * sizeof *head);
  int64_t *tail = malloc((size_t)(buffer < D ? buffer : (D > 0 ? D : 1)) * sizeof *tail);
  int64_t *next = malloc((size_t)(buffer < D ? buffer : (D > 0 ? D : 1)) * sizeof *next);
  if (!order || !chunk || !room || !head || !tail || !next)
    goto oom;
  for (int64_t d = 0; d < D; d++)
    order[d] = d;
  if (shuffle) {
    fsdpc_rng rng;
    uint64_t x = seed ^ 0x7061636B696E67ull; /* "packing": independent of the epoch order */
    fsdpc__rng_seed(&rng, fsdpc__splitmix64(&x));
    fsdpc__rng_shuffle_i64(&rng, order, D);
  }
  if (!vec_push(&starts, 0))
    goto oom;
  for (int64_t c0 = 0; c0 < D; c0 += buffer) {
    int64_t n = 0;
    for (int64_t k = c0; k < D && k < c0 + buffer; k++) {
      int64_t d = order[k];
      int64_t len = (int64_t)(off[d + 1] - off[d]) + sep;
      if (len == 0)
        continue;
      if (len > T) {
        if (overlong_drop) {
          p->dropped++;
          continue;
        }
        p->truncated++;
        len = T;
      }
      chunk[n++] = (item){.doc = d, .len = len, .order = k};
    }
    if (!none)
      qsort(chunk, (size_t)n, sizeof *chunk, by_len_desc);
    int64_t nb = 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t b = nb;
      if (!none)
        for (b = 0; b < nb; b++)
          if (room[b] >= chunk[i].len)
            break;
      if (b == nb) {
        room[nb] = T;
        head[nb] = -1;
        nb++;
      }
      room[b] -= chunk[i].len;
      next[i] = -1;
      if (head[b] < 0)
        head[b] = i;
      else
        next[tail[b]] = i;
      tail[b] = i;
      p->examples++;
      p->tokens += chunk[i].len;
    }
    for (int64_t b = 0; b < nb; b++) {
      for (int64_t i = head[b]; i >= 0; i = next[i])
        if (!vec_push(&docs, chunk[i].doc))
          goto oom;
      if (!vec_push(&starts, docs.n))
        goto oom;
    }
  }
  p->n_bins = starts.n - 1;
  p->bin_start = starts.v;
  p->bin_docs = docs.v;
  free(order), free(chunk), free(room), free(head), free(tail), free(next);
  return FSDPC_OK;
oom:
  free(order), free(chunk), free(room), free(head), free(tail), free(next);
  free(starts.v), free(docs.v);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory while packing examples", tf->path);
}

/* Pairs (preference files): documents 2k and 2k+1 (the chosen, then the
 * rejected) share bin k, so a row holds one whole pair (doc ids 0 and 1);
 * pairs are visited in a seeded order, and a pair longer than T is always
 * dropped (cutting it would lose the rejected's targets). */
fsdpc_status fsdpc__pack_pairs(fsdpc_pack *p, const fsdpc_tokfile *tf, int64_t T, uint64_t seed,
                               int shuffle, fsdpc_err *err) {
  memset(p, 0, sizeof *p);
  int64_t D = fsdpc__tokfile_n_docs(tf), P = D / 2;
  const uint64_t *off = tf->offsets;
  if (D % 2 != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: a preference file holds (chosen, rejected) pairs, but it has an odd "
                       "number of documents (%lld); prepare it again",
                       tf->path, (long long)D);
  int64_t *order = malloc((size_t)(P > 0 ? P : 1) * sizeof *order);
  p->bin_start = malloc((size_t)(P + 1) * sizeof *p->bin_start);
  p->bin_docs = malloc((size_t)(D > 0 ? D : 1) * sizeof *p->bin_docs);
  if (!order || !p->bin_start || !p->bin_docs) {
    free(order);
    fsdpc__pack_free(p);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory while packing pairs", tf->path);
  }
  for (int64_t k = 0; k < P; k++)
    order[k] = k;
  if (shuffle) {
    fsdpc_rng rng;
    uint64_t x = seed ^ 0x7061636B696E67ull; /* as fsdpc__pack_bins */
    fsdpc__rng_seed(&rng, fsdpc__splitmix64(&x));
    fsdpc__rng_shuffle_i64(&rng, order, P);
  }
  int64_t nb = 0;
  p->bin_start[0] = 0;
  for (int64_t k = 0; k < P; k++) {
    int64_t d = 2 * order[k];
    int64_t lc = (int64_t)(off[d + 1] - off[d]), lr = (int64_t)(off[d + 2] - off[d + 1]);
    if (lc + lr > T || lc == 0 || lr == 0) {
      p->dropped++;
      continue;
    }
    p->bin_docs[2 * nb] = d;
    p->bin_docs[2 * nb + 1] = d + 1;
    nb++;
    p->bin_start[nb] = 2 * nb;
    p->examples += 2;
    p->tokens += lc + lr;
  }
  p->n_bins = nb;
  free(order);
  return FSDPC_OK;
}

void fsdpc__pack_free(fsdpc_pack *p) {
  free(p->bin_start);
  free(p->bin_docs);
  free(p->bin_targets);
  memset(p, 0, sizeof *p);
}
