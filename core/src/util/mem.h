/* Host memory with accounting by category.
 *
 * Everything large that libfsdpc allocates on the host goes through these
 * calls so that the trainer can log "memory before / consumed / peak" per
 * category and per rank, and the planner can be checked against it. The
 * counters are process-wide (one process is one rank) and atomic. */
#ifndef FSDPC_UTIL_MEM_H
#define FSDPC_UTIL_MEM_H

#include <stddef.h>
#include <stdint.h>

#define FSDPC_MEM_CATEGORIES(X)                                                \
  X(PARAMS, "params")             /* master shards (and full buffers: FULL) */ \
  X(GRADS, "grads")               /* gradient shards and full grad buffers */  \
  X(OPTIM, "optim")               /* optimizer state shards */                 \
  X(ACTIVATIONS, "activations")   /* saved activations and scratch */          \
  X(COMM, "comm")                 /* gathered unit buffers, comm staging */    \
  X(OTHER, "other")

typedef enum fsdpc_mem_cat {
#define FSDPC_MEM_ENUM_(name, text) FSDPC_MEM_##name,
  FSDPC_MEM_CATEGORIES(FSDPC_MEM_ENUM_)
#undef FSDPC_MEM_ENUM_
      FSDPC_MEM_NCAT
} fsdpc_mem_cat;

typedef struct fsdpc_mem_stats {
  int64_t current[FSDPC_MEM_NCAT];
  int64_t peak[FSDPC_MEM_NCAT];
  int64_t total_current, total_peak;
} fsdpc_mem_stats;

/* 64-byte aligned, zero-filled. Returns NULL when out of memory. */
void *fsdpc__mem_alloc(fsdpc_mem_cat cat, size_t bytes);
/* bytes must be the size passed to fsdpc__mem_alloc. free(NULL) is a no-op. */
void fsdpc__mem_free(fsdpc_mem_cat cat, void *ptr, size_t bytes);
/* Counts bytes (< 0: takes them) in a category without allocating: a
 * buffer placed in memory reserved otherwise (the engine's arena). */
void fsdpc__mem_account(fsdpc_mem_cat cat, int64_t bytes);
void fsdpc__mem_stats(fsdpc_mem_stats *out);
/* Starts a new peak window: peaks become the current values. */
void fsdpc__mem_reset_peak(void);
const char *fsdpc__mem_cat_name(fsdpc_mem_cat cat);
/* Process resident set: current and peak (VmRSS, VmHWM) in bytes. */
void fsdpc__mem_rss(int64_t *current, int64_t *peak);

#endif
