/* The CUDA device context (see cuda_ctx.h): streams, events, cuBLASLt,
 * the engines' arenas, one stream-ordered pool for the rest, and the
 * accounting of both by category. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_internal.cuh"
#include "util/fault.h"

#define LT_WORKSPACE_DEFAULT (32u << 20) /* what cuBLASLt asks for on Hopper */

void fsdpc__cuda_ctx_opts_default(fsdpc_cuda_ctx_opts *o) {
  memset(o, 0, sizeof *o);
  o->device_index = 0;
  o->release_threshold = UINT64_MAX;
  o->lt_workspace_bytes = LT_WORKSPACE_DEFAULT;
}

int fsdpc__cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear it: "no device" is an answer, not an error */
    return 0;
  }
  return n;
}

int32_t fsdpc__cuda_ctx_device(const fsdpc_cuda_ctx *ctx) {
  return ctx->device;
}
void *fsdpc__cuda_compute_stream(const fsdpc_cuda_ctx *ctx) {
  return (void *)ctx->compute;
}
void *fsdpc__cuda_comm_stream(const fsdpc_cuda_ctx *ctx) {
  return (void *)ctx->comm;
}
void *fsdpc__cuda_d2h_stream(const fsdpc_cuda_ctx *ctx) {
  return (void *)ctx->d2h;
}
int fsdpc__cuda_sm_count(const fsdpc_cuda_ctx *ctx) {
  return ctx->sm_count;
}

/* Pieces of create, each undone by destroy (which tolerates zeroed fields). */
static fsdpc_status create_pool(fsdpc_cuda_ctx *c, uint64_t threshold, fsdpc_err *err) {
  cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = c->device;
  FSDPC_CUDA_TRY(err, cudaMemPoolCreate(&c->pool, &props));
  uint64_t t = threshold;
  FSDPC_CUDA_TRY(err, cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &t));
  /* Memory freed on one stream must not be handed to another by making it
   * wait for the first: the allocator may do so by default, which turns an
   * overlap back into a serial schedule. Reuse across streams then happens
   * only once the free has completed. */
  int no = 0;
  FSDPC_CUDA_TRY(err,
                 cudaMemPoolSetAttribute(c->pool, cudaMemPoolReuseAllowInternalDependencies, &no));
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_ctx_create(const fsdpc_cuda_ctx_opts *opts, fsdpc_cuda_ctx **out,
                                    fsdpc_err *err) {
  if (out == NULL)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda: ctx_create got a NULL out pointer");
  *out = NULL;
  fsdpc_cuda_ctx_opts o;
  if (opts)
    o = *opts;
  else
    fsdpc__cuda_ctx_opts_default(&o);
  if (o.lt_workspace_bytes == 0)
    o.lt_workspace_bytes = LT_WORKSPACE_DEFAULT;
  int n = fsdpc__cuda_device_count();
  if (n == 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "cuda: no CUDA device is visible (driver missing or no GPU); run on a GPU "
                       "host or set train.device: cpu");
  if (o.device_index < 0 || o.device_index >= n)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda: device index %d is outside the %d visible device(s); check "
                       "CUDA_VISIBLE_DEVICES and the local rank",
                       (int)o.device_index, n);
  fsdpc_cuda_ctx *c = (fsdpc_cuda_ctx *)calloc(1, sizeof *c);
  if (c == NULL)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: out of host memory creating the context");
  c->device = o.device_index;
  fsdpc_status st = FSDPC_OK;
#define STEP(call)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: device %d: %s failed: %s", c->device,       \
                       #call, cudaGetErrorString(e_));                                             \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)
  int prio_low = 0, prio_high = 0;
  STEP(cudaSetDevice(c->device));
  STEP(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->device));
  if (o.gemm_sm_margin > 0 && o.gemm_sm_margin < c->sm_count)
    c->gemm_sm_target = c->sm_count - o.gemm_sm_margin;
  STEP(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
  /* Collectives get the higher priority: a gather or reduce-scatter that
   * waits behind a long GEMM for its blocks delays the unit after it. */
  STEP(cudaDeviceGetStreamPriorityRange(&prio_low, &prio_high));
  STEP(cudaStreamCreateWithPriority(&c->comm, cudaStreamNonBlocking, prio_high));
  /* cpu_offload's gradient copies to the host: the other direction of the
   * bus from the comm stream's uploads, so the two run at once */
  STEP(cudaStreamCreateWithPriority(&c->d2h, cudaStreamNonBlocking, prio_high));
  for (int i = 0; i < FSDPC_CUDA_N_EVENTS; i++)
    STEP(cudaEventCreateWithFlags(&c->events[i], cudaEventDisableTiming));
  if ((st = create_pool(c, o.release_threshold, err)) != FSDPC_OK)
    goto fail;
  /* The context's own buffers are plain cudaMalloc: they live as long as it. */
  c->lt_ws_bytes = (size_t)o.lt_workspace_bytes;
  STEP(cudaMalloc(&c->lt_ws, c->lt_ws_bytes));
  STEP(cudaMalloc((void **)&c->partials, sizeof(double) * 2 * FSDPC_CUDA_REDUCE_BLOCKS));
  STEP(cudaMalloc((void **)&c->fp8_done, sizeof(unsigned)));
  STEP(cudaMemset(c->fp8_done, 0, sizeof(unsigned)));
  {
    cublasStatus_t bs = cublasLtCreate(&c->lt);
    if (bs != CUBLAS_STATUS_SUCCESS) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: cublasLtCreate failed (status %d)", (int)bs);
      goto fail;
    }
  }
#undef STEP
  *out = c;
  return FSDPC_OK;
fail:
  fsdpc__cuda_ctx_destroy(c);
  return st;
}

void fsdpc__cuda_ctx_destroy(fsdpc_cuda_ctx *c) {
  if (c == NULL)
    return;
  (void)cudaSetDevice(c->device);
  if (c->compute)
    (void)cudaStreamSynchronize(c->compute);
  if (c->comm)
    (void)cudaStreamSynchronize(c->comm);
  if (c->d2h)
    (void)cudaStreamSynchronize(c->d2h);
  fsdpc__cuda_lt_plans_free(c);
  if (c->lt)
    (void)cublasLtDestroy(c->lt);
  (void)cudaFree(c->lt_ws);
  (void)cudaFree(c->partials);
  (void)cudaFree(c->fp8_done);
  if (c->pool)
    (void)cudaMemPoolDestroy(c->pool);
  for (int i = 0; i < FSDPC_CUDA_N_EVENTS; i++)
    if (c->events[i])
      (void)cudaEventDestroy(c->events[i]);
  if (c->compute)
    (void)cudaStreamDestroy(c->compute);
  if (c->comm)
    (void)cudaStreamDestroy(c->comm);
  if (c->d2h)
    (void)cudaStreamDestroy(c->d2h);
  (void)cudaGetLastError();
  free(c);
}

fsdpc_status fsdpc__cuda_event_record(fsdpc_cuda_ctx *ctx, int slot, void *stream, fsdpc_err *err) {
  if (slot < 0 || slot >= FSDPC_CUDA_N_EVENTS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda: event slot %d is outside [0, %d)", slot,
                       FSDPC_CUDA_N_EVENTS);
  FSDPC_CUDA_TRY(err, cudaEventRecord(ctx->events[slot], fsdpc__cuda_stream_or(ctx, stream)));
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_event_sync(fsdpc_cuda_ctx *ctx, int slot, fsdpc_err *err) {
  if (slot < 0 || slot >= FSDPC_CUDA_N_EVENTS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda: event slot %d is outside [0, %d)", slot,
                       FSDPC_CUDA_N_EVENTS);
  /* the caller may be a thread of its own (the offload worker): bind it */
  FSDPC_CUDA_TRY(err, cudaSetDevice(ctx->device));
  FSDPC_CUDA_TRY(err, cudaEventSynchronize(ctx->events[slot]));
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_stream_wait_event(fsdpc_cuda_ctx *ctx, void *stream, int slot,
                                           fsdpc_err *err) {
  if (slot < 0 || slot >= FSDPC_CUDA_N_EVENTS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda: event slot %d is outside [0, %d)", slot,
                       FSDPC_CUDA_N_EVENTS);
  FSDPC_CUDA_TRY(err,
                 cudaStreamWaitEvent(fsdpc__cuda_stream_or(ctx, stream), ctx->events[slot], 0));
  return FSDPC_OK;
}

/* ---- memory ---- */

static int cat_ok(fsdpc_mem_cat cat) {
  return (int)cat >= 0 && (int)cat < FSDPC_MEM_NCAT;
}

static void bump_peak(int64_t *peak, int64_t cur) {
  int64_t p = __atomic_load_n(peak, __ATOMIC_RELAXED);
  while (cur > p &&
         !__atomic_compare_exchange_n(peak, &p, cur, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void count(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, int64_t bytes) {
  int64_t c = __atomic_add_fetch(&ctx->alloc_cur[cat], bytes, __ATOMIC_RELAXED);
  bump_peak(&ctx->alloc_peak[cat], c);
  int64_t t = __atomic_add_fetch(&ctx->alloc_total_cur, bytes, __ATOMIC_RELAXED);
  bump_peak(&ctx->alloc_total_peak, t);
}

/* Every device allocation of the context goes through here: an arena
 * (cudaMalloc, once per engine) or the pool (stream-ordered). */
static fsdpc_status device_alloc(fsdpc_cuda_ctx *ctx, size_t bytes, int arena, void *stream,
                                 const char *what, void **out, fsdpc_err *err) {
  cudaError_t e =
      arena ? cudaMalloc(out, bytes)
            : cudaMallocFromPoolAsync(out, bytes, ctx->pool, fsdpc__cuda_stream_or(ctx, stream));
  if (e == cudaSuccess)
    return FSDPC_OK;
  (void)cudaGetLastError();
  *out = NULL;
  if (e != cudaErrorMemoryAllocation) /* a sticky fault of an earlier kernel or copy */
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "cuda: device %d cannot allocate %.1f MiB for %s: %s (an earlier device "
                       "fault; the device is unusable until the process restarts)",
                       ctx->device, (double)bytes / 1048576.0, what, cudaGetErrorString(e));
  size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "cuda: device %d out of memory allocating %.1f MiB for %s (%s); %.1f MiB "
                     "allocated in total, %.1f MiB free: lower the micro-batch, shard more or "
                     "enable activation checkpointing",
                     ctx->device, (double)bytes / 1048576.0, what, cudaGetErrorString(e),
                     (double)(ctx->alloc_total_cur + ctx->arena_cur) / 1048576.0,
                     (double)free_b / 1048576.0);
}

fsdpc_status fsdpc__cuda_alloc(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, size_t bytes, void *stream,
                               void **out, fsdpc_err *err) {
  FSDPC_FAULT_ALLOC_HOOK(fsdpc__fault_alloc_fail(err, "cuda", bytes)); /* util/fault.h */
  if (out == NULL || !cat_ok(cat))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda: alloc got a NULL out or category %d",
                       (int)cat);
  *out = NULL;
  if (bytes == 0)
    return FSDPC_OK;
  FSDPC_TRY(device_alloc(ctx, bytes, 0, stream, fsdpc__mem_cat_name(cat), out, err));
  count(ctx, cat, (int64_t)bytes);
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_free(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, void *ptr, size_t bytes,
                              void *stream, fsdpc_err *err) {
  if (ptr == NULL)
    return FSDPC_OK;
  if (!cat_ok(cat))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda: free got category %d", (int)cat);
  FSDPC_CUDA_TRY(err, cudaFreeAsync(ptr, fsdpc__cuda_stream_or(ctx, stream)));
  count(ctx, cat, -(int64_t)bytes);
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_arena_alloc(fsdpc_cuda_ctx *ctx, size_t bytes, void **out,
                                     fsdpc_err *err) {
  *out = NULL;
  FSDPC_TRY(device_alloc(ctx, bytes ? bytes : 256, 1, NULL, "the planned arena", out, err));
  int64_t c = __atomic_add_fetch(&ctx->arena_cur, (int64_t)bytes, __ATOMIC_RELAXED);
  bump_peak(&ctx->arena_peak, c);
  return FSDPC_OK;
}

void fsdpc__cuda_arena_free(fsdpc_cuda_ctx *ctx, void *p, size_t bytes) {
  if (!p)
    return;
  /* cudaFree waits for the device's work on it: nothing is in flight */
  (void)cudaFree(p);
  __atomic_sub_fetch(&ctx->arena_cur, (int64_t)bytes, __ATOMIC_RELAXED);
}

void fsdpc__cuda_account(fsdpc_cuda_ctx *ctx, fsdpc_mem_cat cat, int64_t bytes) {
  if (cat_ok(cat))
    count(ctx, cat, bytes);
}

fsdpc_status fsdpc__cuda_mem_info(fsdpc_cuda_ctx *ctx, uint64_t *free_bytes, uint64_t *total_bytes,
                                  fsdpc_err *err) {
  size_t f = 0, t = 0;
  FSDPC_CUDA_TRY(err, cudaSetDevice(ctx->device));
  FSDPC_CUDA_TRY(err, cudaMemGetInfo(&f, &t));
  *free_bytes = f;
  *total_bytes = t;
  return FSDPC_OK;
}

void fsdpc__cuda_keep_mem_error(fsdpc_cuda_ctx *ctx, const fsdpc_err *e) {
  ctx->mem_err = *e;
  ctx->mem_err_set = 1;
}

fsdpc_status fsdpc__cuda_take_mem_error(fsdpc_cuda_ctx *ctx, fsdpc_err *err) {
  if (!ctx->mem_err_set)
    return FSDPC_OK;
  ctx->mem_err_set = 0;
  return fsdpc__fail(err, ctx->mem_err.status, "%s", ctx->mem_err.msg);
}

fsdpc_status fsdpc__cuda_mem_stats(fsdpc_cuda_ctx *ctx, fsdpc_cuda_mem_stats *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  uint64_t cur = 0, high = 0;
  FSDPC_CUDA_TRY(err, cudaMemPoolGetAttribute(ctx->pool, cudaMemPoolAttrReservedMemCurrent, &cur));
  FSDPC_CUDA_TRY(err, cudaMemPoolGetAttribute(ctx->pool, cudaMemPoolAttrReservedMemHigh, &high));
  for (int k = 0; k < FSDPC_MEM_NCAT; k++) {
    out->allocated[k] = __atomic_load_n(&ctx->alloc_cur[k], __ATOMIC_RELAXED);
    out->allocated_peak[k] = __atomic_load_n(&ctx->alloc_peak[k], __ATOMIC_RELAXED);
  }
  out->total_allocated = __atomic_load_n(&ctx->alloc_total_cur, __ATOMIC_RELAXED);
  out->total_allocated_peak = __atomic_load_n(&ctx->alloc_total_peak, __ATOMIC_RELAXED);
  out->arena = __atomic_load_n(&ctx->arena_cur, __ATOMIC_RELAXED);
  out->arena_peak = __atomic_load_n(&ctx->arena_peak, __ATOMIC_RELAXED);
  out->pool_reserved = (int64_t)cur;
  out->pool_reserved_peak = (int64_t)high;
  out->total_reserved = out->arena + out->pool_reserved;
  out->total_reserved_peak = out->arena_peak + out->pool_reserved_peak;
  out->fixed_bytes = (int64_t)ctx->lt_ws_bytes +
                     (int64_t)sizeof(double) * 2 * FSDPC_CUDA_REDUCE_BLOCKS +
                     (int64_t)sizeof(unsigned);
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_mem_reset_peak(fsdpc_cuda_ctx *ctx, fsdpc_err *err) {
  uint64_t zero = 0; /* the only value allowed: resets the high mark to current */
  FSDPC_CUDA_TRY(err, cudaMemPoolSetAttribute(ctx->pool, cudaMemPoolAttrReservedMemHigh, &zero));
  for (int k = 0; k < FSDPC_MEM_NCAT; k++)
    __atomic_store_n(&ctx->alloc_peak[k], __atomic_load_n(&ctx->alloc_cur[k], __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
  __atomic_store_n(&ctx->alloc_total_peak, __atomic_load_n(&ctx->alloc_total_cur, __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
  __atomic_store_n(&ctx->arena_peak, __atomic_load_n(&ctx->arena_cur, __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_mem_trim(fsdpc_cuda_ctx *ctx, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__cuda_sync(ctx, err));
  FSDPC_CUDA_TRY(err, cudaMemPoolTrimTo(ctx->pool, 0));
  return FSDPC_OK;
}

/* ---- host <-> device ---- */

fsdpc_status fsdpc__cuda_h2d(fsdpc_cuda_ctx *ctx, void *dst, const void *src, size_t bytes,
                             fsdpc_err *err) {
  if (bytes == 0)
    return FSDPC_OK;
  FSDPC_CUDA_TRY(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->compute));
  FSDPC_CUDA_TRY(err, cudaStreamSynchronize(ctx->compute));
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_d2h(fsdpc_cuda_ctx *ctx, void *dst, const void *src, size_t bytes,
                             fsdpc_err *err) {
  if (bytes == 0)
    return FSDPC_OK;
  FSDPC_CUDA_TRY(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->compute));
  FSDPC_CUDA_TRY(err, cudaStreamSynchronize(ctx->compute));
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_memset(fsdpc_cuda_ctx *ctx, void *dst, int value, size_t bytes,
                                fsdpc_err *err) {
  if (bytes == 0)
    return FSDPC_OK;
  FSDPC_CUDA_TRY(err, cudaMemsetAsync(dst, value, bytes, ctx->compute));
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_sync(fsdpc_cuda_ctx *ctx, fsdpc_err *err) {
  FSDPC_CUDA_TRY(err, cudaStreamSynchronize(ctx->compute));
  FSDPC_CUDA_TRY(err, cudaStreamSynchronize(ctx->comm));
  FSDPC_CUDA_TRY(err, cudaStreamSynchronize(ctx->d2h));
  FSDPC_CUDA_TRY(err, cudaGetLastError());
  return FSDPC_OK;
}
