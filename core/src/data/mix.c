/* Mixing token files by weight (mix.h). Memory: 8 bytes per example of the
 * mix, plus one example's tokens. */
#include "data/mix.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/rng.h"

void fsdpc__mix_counts(const int64_t *n_docs, const double *weights, int n, int64_t *k) {
  int64_t total = 0, given = 0;
  double wsum = 0.0;
  for (int i = 0; i < n; i++) {
    total += n_docs[i];
    wsum += weights[i];
  }
  double *rem = calloc((size_t)(n > 0 ? n : 1), sizeof *rem);
  for (int i = 0; i < n; i++) {
    double share = (double)total * weights[i] / wsum;
    k[i] = (int64_t)floor(share);
    given += k[i];
    if (rem)
      rem[i] = share - (double)k[i];
  }
  /* largest remainder first (ties: the earlier source), so the sum is N */
  for (; given < total && rem; given++) {
    int best = 0;
    for (int i = 1; i < n; i++)
      if (rem[i] > rem[best])
        best = i;
    k[best]++;
    rem[best] = -1.0;
  }
  free(rem);
}

/* The k examples of one source, in a seeded order: every example
 * floor(k / n) times and a seeded sample of the rest once more. */
static int64_t *picks_of(int64_t n, int64_t k, fsdpc_rng *rng) {
  int64_t *p = malloc((size_t)(k > 0 ? k : 1) * sizeof *p);
  int64_t *perm = malloc((size_t)n * sizeof *perm);
  if (!p || !perm) {
    free(p);
    free(perm);
    return NULL;
  }
  for (int64_t j = 0; j < n; j++)
    perm[j] = j;
  fsdpc__rng_shuffle_i64(rng, perm, n);
  for (int64_t j = 0; j < k; j++)
    p[j] = j < k - k % n ? j % n : perm[j % n];
  fsdpc__rng_shuffle_i64(rng, p, k);
  free(perm);
  return p;
}

static fsdpc_status check_sources(const fsdpc_tokfile *const *s, const char *const *names, int n,
                                  fsdpc_err *err) {
  for (int i = 0; i < n; i++) {
    if (fsdpc__tokfile_n_docs(s[i]) == 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: no examples to mix", names[i]);
    if (i == 0)
      continue;
    const fsdpc_tokfile_header *a = &s[0]->hdr, *b = &s[i]->hdr;
    if (a->vocab_size != b->vocab_size || a->eos_id != b->eos_id)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s and %s cannot be mixed: vocabulary %" PRIu32 " (EOS %" PRIu32
                         ") against %" PRIu32 " (EOS %" PRIu32
                         "); prepare them with the same tokenizer",
                         names[0], names[i], a->vocab_size, a->eos_id, b->vocab_size, b->eos_id);
    if ((a->flags ^ b->flags) & FSDPC_TOKFILE_EXAMPLES)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s and %s cannot be mixed: one holds whole examples (JSONL data), the "
                         "other a plain token stream",
                         names[0], names[i]);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__mix_write(const fsdpc_tokfile *const *srcs, const char *const *names,
                              const int64_t *k, int n, uint64_t seed, const char *out,
                              const uint8_t *tag, fsdpc_err *err) {
  FSDPC_TRY(check_sources(srcs, names, n, err));
  int64_t total = 0, longest = 1;
  uint32_t flags = srcs[0]->hdr.flags & FSDPC_TOKFILE_EXAMPLES;
  for (int i = 0; i < n; i++) {
    total += k[i];
    flags |= srcs[i]->hdr.flags & FSDPC_TOKFILE_HAS_MASK;
    for (int64_t d = 0; d < fsdpc__tokfile_n_docs(srcs[i]); d++) {
      int64_t len = (int64_t)(srcs[i]->offsets[d + 1] - srcs[i]->offsets[d]);
      longest = len > longest ? len : longest;
    }
  }
  fsdpc_status st = FSDPC_OK;
  size_t nn = n > 0 ? (size_t)n : 1;
  int64_t **picks = calloc(nn, sizeof *picks), *next = calloc(nn, sizeof *next);
  int64_t *order = malloc((size_t)(total > 0 ? total : 1) * sizeof *order);
  int32_t *ids = malloc((size_t)longest * sizeof *ids);
  uint8_t *mask = malloc((size_t)longest);
  fsdpc_tokfile_writer *w = NULL;
  if (!picks || !next || !order || !ids || !mask) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory for the mix", out);
    goto done;
  }
  uint64_t x = seed ^ 0x6d69782d64617461ull; /* "mix-data": its own stream */
  for (int i = 0; i < n; i++) {
    fsdpc_rng rng;
    fsdpc__rng_seed(&rng, fsdpc__splitmix64(&x));
    if (!(picks[i] = picks_of(fsdpc__tokfile_n_docs(srcs[i]), k[i], &rng))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory for the mix", out);
      goto done;
    }
  }
  for (int64_t i = 0, at = 0; i < n; i++)
    for (int64_t j = 0; j < k[i]; j++)
      order[at++] = i;
  fsdpc_rng rng;
  fsdpc__rng_seed(&rng, fsdpc__splitmix64(&x));
  fsdpc__rng_shuffle_i64(&rng, order, total);
  if ((st = fsdpc__tokfile_writer_create(out, srcs[0]->hdr.vocab_size, srcs[0]->hdr.eos_id,
                                         (int32_t)flags, &w, err)) != FSDPC_OK)
    goto done;
  if (tag)
    fsdpc__tokfile_writer_set_tag(w, tag);
  for (int64_t j = 0; j < total && st == FSDPC_OK; j++) {
    int i = (int)order[j];
    const fsdpc_tokfile *tf = srcs[i];
    int64_t d = picks[i][next[i]++];
    int64_t a = (int64_t)tf->offsets[d], len = (int64_t)tf->offsets[d + 1] - a;
    fsdpc__tokfile_read(tf, a, len, ids);
    for (int64_t t = 0; t < len; t++)
      mask[t] = (uint8_t)fsdpc__tokfile_mask(tf, a + t);
    st = fsdpc__tokfile_writer_add_doc(w, ids, mask, len, err);
  }
  if (st == FSDPC_OK)
    st = fsdpc__tokfile_writer_finish(w, err);
done:
  fsdpc__tokfile_writer_destroy(w);
  for (int i = 0; picks && i < n; i++)
    free(picks[i]);
  free(picks);
  free(next);
  free(order);
  free(ids);
  free(mask);
  return st;
}
