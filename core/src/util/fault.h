/* Fault injection: make a chosen rank fail at a chosen point without
 * editing code, so that the failure protocol (docs/dist.md) can be tested
 * on every build. Inert unless the environment variable FSDPC_FAULT is set:
 * every hook below is then one relaxed atomic load.
 *
 *   FSDPC_FAULT=key=value[,key=value...]
 *     rank=R     only global rank R fires (default: every rank)
 *     alloc=N    the N-th device allocation after the session starts fails
 *                as out of memory (1 = the first)
 *     hang=N     the collective with sequence number N never reaches the
 *                plugin: the rank stalls there until the job is aborted
 *     error=S    an error at the start of step S (1-based, as logged)
 *     kernel=S   CUDA only: at the start of step S a kernel that traps is
 *                launched on the compute stream (a sticky device fault)
 *
 * The state is process-wide by nature (one process is one rank, and the
 * allocation hook sits in allocators that know no session), like the
 * memory counters of util/mem.h. fsdpc__fault_arm reads the variable once
 * the rank is known; nothing fires before. */
#ifndef FSDPC_UTIL_FAULT_H
#define FSDPC_UTIL_FAULT_H

#include <stdint.h>

#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FSDPC_FAULT_ENV "FSDPC_FAULT"

/* Reads FSDPC_FAULT for this rank. A malformed value is an error naming it;
 * unset or empty leaves every hook inert. */
fsdpc_status fsdpc__fault_arm(int rank, fsdpc_err *err);
/* Turns every hook off again (tests, and a session that ends). */
void fsdpc__fault_disarm(void);

/* Device allocators: 1 when this allocation must fail. Counts calls. */
int fsdpc__fault_alloc(void);
/* The hook, one line at the top of a device allocator: returns `failed`
 * (what the allocator returns when out of memory) when alloc=N says so. */
#define FSDPC_FAULT_ALLOC_HOOK(failed)                                                             \
  do {                                                                                             \
    if (fsdpc__fault_alloc())                                                                      \
      return failed;                                                                               \
  } while (0)
/* The allocation fault as an error (what fsdpc__cuda_alloc returns). */
fsdpc_status fsdpc__fault_alloc_fail(fsdpc_err *err, const char *device, uint64_t bytes);
/* Collective wrappers: 1 when collective seq must stall. */
int fsdpc__fault_hang(uint64_t seq);
/* Start of step `step` (1-based): an error when error=step. */
fsdpc_status fsdpc__fault_step(int64_t step, fsdpc_err *err);
/* Start of step `step`: 1 when kernel=step (the caller launches the trap). */
int fsdpc__fault_kernel(int64_t step);

#ifdef FSDPC_WITH_CUDA
/* Launches a kernel that traps on stream (a cudaStream_t). fault_cuda.cu. */
void fsdpc__fault_cuda_trap(void *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
