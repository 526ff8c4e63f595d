/* Mixing datasets by weight (data.datasets): token files of whole examples
 * (or of documents) combined into one token file whose examples come from
 * each source in proportion to its weight.
 *
 * The mix has as many examples as the sources together, N = sum of n_i.
 * Source i contributes k_i = N * w_i / sum(w) of them (rounded by largest
 * remainder, so the k_i add up to N): when k_i < n_i a seeded sample of its
 * examples, when k_i > n_i every example floor(k_i / n_i) times and a seeded
 * sample of the rest once more. The examples are written in a seeded
 * random interleaving. Everything follows from (n_i, w_i, seed), so the
 * counts can be printed again without reading the files. */
#ifndef FSDPC_DATA_MIX_H
#define FSDPC_DATA_MIX_H

#include <stdint.h>

#include "data/tokfile.h"
#include "util/err.h"

/* k (n) from the sources' example counts n_docs (n) and weights (n, > 0). */
void fsdpc__mix_counts(const int64_t *n_docs, const double *weights, int n, int64_t *k);

/* Writes the mix of srcs (n, which must agree on vocab_size, eos_id and
 * whether they hold whole examples) to out (tag: 12 bytes for its header,
 * or NULL); names (n) name the sources in messages. k as fsdpc__mix_counts
 * gives it. */
fsdpc_status fsdpc__mix_write(const fsdpc_tokfile *const *srcs, const char *const *names,
                              const int64_t *k, int n, uint64_t seed, const char *out,
                              const uint8_t *tag, fsdpc_err *err);

#endif
