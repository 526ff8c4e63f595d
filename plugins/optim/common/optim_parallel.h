/* Shared by the in-tree optimizer plugins (header-only; plugins link nothing
 * from the core): how a CPU step splits the elements of all its tensors into
 * one contiguous range per OpenMP thread. Ranges are multiples of `grain`
 * elements, so a thread's range starts SIMD-aligned and the result does not
 * depend on the thread count (each element is updated by exactly one thread
 * with the same arithmetic). */
#ifndef FSDPC_PLUGINS_OPTIM_PARALLEL_H
#define FSDPC_PLUGINS_OPTIM_PARALLEL_H

#include <omp.h>
#include <stdint.h>

#include "fsdpc/plugin.h"

/* Threads for a step over `total` elements: the host's num_threads when it
 * gives one, else OpenMP's; 1 below min_parallel elements. */
static inline int fsdpc_optim_threads(const fsdpc_optim_step_info *info, uint64_t total,
                                      uint64_t min_parallel) {
  int nt = FSDPC_HAS_FIELD(info, fsdpc_optim_step_info, num_threads) && info->num_threads > 0
               ? info->num_threads
               : omp_get_max_threads();
  return total < min_parallel ? 1 : nt;
}

/* The calling thread's range [*lo, *hi) of `total` elements, inside an
 * OpenMP parallel region. */
static inline void fsdpc_optim_range(uint64_t total, uint64_t grain, uint64_t *lo, uint64_t *hi) {
  const uint64_t nth = (uint64_t)omp_get_num_threads(), tid = (uint64_t)omp_get_thread_num();
  uint64_t chunk = (total + nth - 1) / nth;
  chunk = (chunk + grain - 1) / grain * grain;
  *lo = tid * chunk < total ? tid * chunk : total;
  *hi = *lo + chunk < total ? *lo + chunk : total;
}

#endif
