/* The CUDA device context: everything one rank needs to run kernels on its
 * GPU, held in one explicit struct (no hidden globals).
 *
 * A context owns, for one device index:
 * - a compute stream and a communication stream (both non-blocking with
 *   respect to the legacy default stream), and a small pool of events to
 *   order work between them;
 * - a cuBLASLt handle and its workspace (allocated once, at create);
 * - the arenas of engines (fsdp/memplan.h): one cudaMalloc each, made once,
 *   in which every buffer a step needs has a planned offset;
 * - one stream-ordered memory pool for what no arena holds (cudaMallocAsync
 *   / cudaFreeAsync on a cudaMemPool_t whose release threshold keeps freed
 *   memory reserved), with accounting of allocated bytes, current and peak,
 *   per category of util/mem.h (arena buffers included) and of reserved
 *   bytes (arenas and pool);
 * - a small device scratch for deterministic reductions.
 *
 * Create and destroy are setup-time calls (they synchronise). Everything a
 * training step calls (alloc, free, the ops in ops_cuda.h, event record and
 * wait) is stream-ordered and never synchronises with the host.
 *
 * This header is plain C and includes no CUDA header: streams are void *
 * (cudaStream_t), so GCC-compiled C code can call every function here. The
 * implementation is cuda_ctx.cu. */
#ifndef FSDPC_OPS_CUDA_CTX_H
#define FSDPC_OPS_CUDA_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "fsdpc/fsdpc.h"

#ifdef __cplusplus
extern "C" { /* the util headers are C declarations without guards of their own */
#endif

#include "util/err.h"
#include "util/mem.h"

typedef struct fsdpc_cuda_ctx fsdpc_cuda_ctx;

/* Events of the pool: record on one stream, wait on another. */
/* 96 for the engine's streams plus 256 per-unit slots (offload's grads
 * landed): FSDPC_OPS_UNIT_EVENT0 + FSDPC_OPS_UNIT_EVENTS of ops/ops.h */
#define FSDPC_CUDA_N_EVENTS 352

typedef struct fsdpc_cuda_ctx_opts {
  int32_t device_index; /* CUDA ordinal */
  /* Bytes the pool keeps reserved after frees at a sync point; UINT64_MAX
   * (the default from _opts_default) keeps everything, so that freeing and
   * re-allocating the same sizes never calls the driver. */
  uint64_t release_threshold;
  uint64_t lt_workspace_bytes; /* cuBLASLt workspace; default 32 MiB */
  /* Multiprocessors GEMMs leave free for the collectives that run beside
   * them (cuBLASLt's SM count target = SMs - margin); 0 = all SMs. */
  int gemm_sm_margin;
} fsdpc_cuda_ctx_opts;

void fsdpc__cuda_ctx_opts_default(fsdpc_cuda_ctx_opts *o);

/* Number of usable CUDA devices; 0 when there is no driver, no GPU or the
 * runtime fails to initialise. Never fails, never prints. */
int fsdpc__cuda_device_count(void);

/* Setup-time. Selects the device (cudaSetDevice) for the calling thread. */
fsdpc_status fsdpc__cuda_ctx_create(const fsdpc_cuda_ctx_opts *opts, fsdpc_cuda_ctx **out,
                                    fsdpc_err *err);
/* Synchronises both streams, frees everything. NULL is a no-op. */
void fsdpc__cuda_ctx_destroy(fsdpc_cuda_ctx *ctx);

int32_t fsdpc__cuda_ctx_device(const fsdpc_cuda_ctx *ctx);
void *fsdpc__cuda_compute_stream(const fsdpc_cuda_ctx *ctx); /* cudaStream_t */
void *fsdpc__cuda_comm_stream(const fsdpc_cuda_ctx *ctx);    /* cudaStream_t */
void *fsdpc__cuda_d2h_stream(const fsdpc_cuda_ctx *ctx);     /* cudaStream_t */
/* Multiprocessor count of the device (grid sizing). */
int fsdpc__cuda_sm_count(const fsdpc_cuda_ctx *ctx);

/* Records event slot (0 <= slot < FSDPC_CUDA_N_EVENTS) on stream; stream
 * NULL means the compute stream. */
fsdpc_status fsdpc__cuda_event_record(fsdpc_cuda_ctx *ctx, int slot, void *stream, fsdpc_err *err);
/* The calling host thread waits until event slot has completed (any thread). */
fsdpc_status fsdpc__cuda_event_sync(fsdpc_cuda_ctx *ctx, int slot, fsdpc_err *err);
/* Makes stream wait (on the device, not the host) for event slot. */
fsdpc_status fsdpc__cuda_stream_wait_event(fsdpc_cuda_ctx *ctx, void *stream, int slot,
                                           fsdpc_err *err);

/* ---- memory ---- */

/* Stream-ordered allocation from the pool, accounted in category cat: the
 * memory may be used by work enqueued on `stream` (NULL = compute stream)
 * after this call. 256-byte aligned. bytes == 0 gives *out = NULL. */
fsdpc_status fsdpc__cuda_alloc(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, size_t bytes, void *stream,
                               void **out, fsdpc_err *err);
/* Stream-ordered free; bytes must be the size passed to alloc. NULL is a
 * no-op. */
fsdpc_status fsdpc__cuda_free(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, void *ptr, size_t bytes,
                              void *stream, fsdpc_err *err);
/* An engine's arena (fsdp/memplan.h): bytes of device memory reserved at
 * once (cudaMalloc), outside the pool and the categories; and its end. The
 * device's free memory is checked against the plan before (train/setup.c). */
fsdpc_status fsdpc__cuda_arena_alloc(fsdpc_cuda_ctx *ctx, size_t bytes, void **out, fsdpc_err *err);
void fsdpc__cuda_arena_free(fsdpc_cuda_ctx *ctx, void *p, size_t bytes);
/* Counts bytes (< 0: takes them) in category cat: a buffer placed in an
 * arena begins (or ends). */
void fsdpc__cuda_account(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, int64_t bytes);
/* The device's free and total memory (cudaMemGetInfo). */
fsdpc_status fsdpc__cuda_mem_info(fsdpc_cuda_ctx *ctx, uint64_t *free_bytes, uint64_t *total_bytes,
                                  fsdpc_err *err);
/* For the ops table's alloc / free, which report by NULL or not at all:
 * keep holds the error of such a call (the last one wins); take gives it
 * to the caller that saw the NULL (OK when there is none) and forgets it,
 * so that a sticky device fault is reported as what it is, not as "out of
 * memory". */
void fsdpc__cuda_keep_mem_error(fsdpc_cuda_ctx *ctx, const fsdpc_err *e);
fsdpc_status fsdpc__cuda_take_mem_error(fsdpc_cuda_ctx *ctx, fsdpc_err *err);

typedef struct fsdpc_cuda_mem_stats {
  /* Bytes handed out by fsdpc__cuda_alloc and not yet freed, plus the
   * buffers placed in arenas (counted when the call is made, i.e. in stream
   * order as the host issues it). */
  int64_t allocated[FSDPC_MEM_NCAT], allocated_peak[FSDPC_MEM_NCAT];
  int64_t total_allocated, total_allocated_peak; /* peak of the sum */
  int64_t arena, arena_peak;                     /* bytes the engines' arenas reserve */
  /* Bytes the pool holds from the driver (cudaMemPool attributes
   * ReservedMemCurrent / ReservedMemHigh). */
  int64_t pool_reserved, pool_reserved_peak;
  int64_t total_reserved, total_reserved_peak; /* arenas + pool */
  int64_t fixed_bytes; /* workspace and scratch owned by the context itself */
} fsdpc_cuda_mem_stats;

fsdpc_status fsdpc__cuda_mem_stats(fsdpc_cuda_ctx *ctx, fsdpc_cuda_mem_stats *out, fsdpc_err *err);
/* Starts a new peak window (allocated and reserved). */
fsdpc_status fsdpc__cuda_mem_reset_peak(fsdpc_cuda_ctx *ctx, fsdpc_err *err);
/* Returns reserved-but-unused memory of the pool to the driver (after a
 * sync). Setup-time or between phases, never inside a step. */
fsdpc_status fsdpc__cuda_mem_trim(fsdpc_cuda_ctx *ctx, fsdpc_err *err);

/* ---- host <-> device (setup time and tests: these synchronise) ---- */

fsdpc_status fsdpc__cuda_h2d(fsdpc_cuda_ctx *ctx, void *dst, const void *src, size_t bytes,
                             fsdpc_err *err);
fsdpc_status fsdpc__cuda_d2h(fsdpc_cuda_ctx *ctx, void *dst, const void *src, size_t bytes,
                             fsdpc_err *err);
/* Fills bytes of device memory with the byte value, on the compute stream. */
fsdpc_status fsdpc__cuda_memset(fsdpc_cuda_ctx *ctx, void *dst, int value, size_t bytes,
                                fsdpc_err *err);
/* Host waits for both streams; reports any asynchronous kernel error. */
fsdpc_status fsdpc__cuda_sync(fsdpc_cuda_ctx *ctx, fsdpc_err *err);

#ifdef __cplusplus
}
#endif
#endif
