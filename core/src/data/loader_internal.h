/* Internal to the loader: the bins of whole-example packing (pack.c). */
#ifndef FSDPC_DATA_LOADER_INTERNAL_H
#define FSDPC_DATA_LOADER_INTERNAL_H

#include <stdint.h>

#include "data/tokfile.h"
#include "util/err.h"

typedef struct fsdpc_pack {
  int64_t n_bins;
  int64_t *bin_start;   /* (n_bins+1) into bin_docs */
  int64_t *bin_docs;    /* document indices, bin by bin, in row order */
  int64_t *bin_targets; /* (n_bins) counted labels per bin (filled by loader.c) */
  int64_t examples, truncated, dropped, tokens;
} fsdpc_pack;

/* Computes the bins (see pack.c). sep = 1 appends an EOS to each document
 * (files without FSDPC_TOKFILE_EXAMPLES); none = 1 gives one example per bin. */
fsdpc_status fsdpc__pack_bins(fsdpc_pack *p, const fsdpc_tokfile *tf, int64_t T, int sep, int none,
                              int overlong_drop, int64_t buffer, uint64_t seed, int shuffle,
                              fsdpc_err *err);
/* Bins of one (chosen, rejected) pair each: documents 2k, 2k+1 (pack.c). */
fsdpc_status fsdpc__pack_pairs(fsdpc_pack *p, const fsdpc_tokfile *tf, int64_t T, uint64_t seed,
                               int shuffle, fsdpc_err *err);
void fsdpc__pack_free(fsdpc_pack *p);

#endif
