/* Collectives of the nccl plugin on device memory, stream-ordered: each call
 * enqueues the NCCL kernel on the caller's stream and returns; the watchdog
 * (nccl_plugin.c) tracks completion through an event recorded after it.
 * all_gather and broadcast move any dtype; reductions take fp32, bf16,
 * fp16 and f64 (f64 for scalars: loss sums, squared norms). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nccl_comm.h"

static int dtype_map(int32_t dtype, ncclDataType_t *out) {
  switch (dtype) {
  case FSDPC_DTYPE_F32:
    *out = ncclFloat32;
    return 1;
  case FSDPC_DTYPE_BF16:
    *out = ncclBfloat16;
    return 1;
  case FSDPC_DTYPE_F16:
    *out = ncclFloat16;
    return 1;
  case FSDPC_DTYPE_I32:
    *out = ncclInt32;
    return 1;
  case FSDPC_DTYPE_I64:
    *out = ncclInt64;
    return 1;
  case FSDPC_DTYPE_U8:
    *out = ncclUint8;
    return 1;
  case FSDPC_DTYPE_F64:
    *out = ncclFloat64;
    return 1;
  default:
    return 0;
  }
}

static int32_t check_dtype(const fsdpc_comm *c, int32_t dtype, int reduce, ncclDataType_t *t,
                           const char *what) {
  if (!dtype_map(dtype, t))
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: %s: unknown dtype %d", what,
                     (int)dtype);
  if (reduce && dtype != FSDPC_DTYPE_F32 && dtype != FSDPC_DTYPE_BF16 && dtype != FSDPC_DTYPE_F16 &&
      dtype != FSDPC_DTYPE_F64)
    return nccl_fail(nccl_host(c), FSDPC_UNSUPPORTED,
                     "nccl: %s: reductions take fp32, bf16, fp16 or f64 only (dtype %d)", what,
                     (int)dtype);
  return FSDPC_OK;
}

static int32_t check_op(const fsdpc_comm *c, int32_t op, ncclRedOp_t *out, const char *what) {
  switch (op) {
  case FSDPC_REDUCE_SUM:
    *out = ncclSum;
    return FSDPC_OK;
  case FSDPC_REDUCE_AVG:
    *out = ncclAvg;
    return FSDPC_OK;
  case FSDPC_REDUCE_MAX:
    *out = ncclMax;
    return FSDPC_OK;
  case FSDPC_REDUCE_MIN:
    *out = ncclMin;
    return FSDPC_OK;
  default:
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: %s: unknown reduce op %d", what,
                     (int)op);
  }
}

/* Common prologue: usable comm, non-NULL buffers, a name for messages. */
static int32_t begin(fsdpc_comm *c, const char *op, const fsdpc_op_info *info, char *what,
                     size_t cap, const void *a, const void *b, uint64_t count) {
  if (c == NULL)
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: %s on a NULL communicator", op);
  nccl_describe(what, cap, op, info);
  int32_t st = nccl_check_usable(c, what);
  if (st != FSDPC_OK)
    return st;
  if (count > 0 && (a == NULL || b == NULL))
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: %s: NULL buffer for %llu elements",
                     what, (unsigned long long)count);
  return FSDPC_OK;
}

int32_t nccl_all_gather(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                        void *stream, const fsdpc_op_info *info) {
  char what[160];
  ncclDataType_t t = ncclFloat32;
  int32_t st = begin(c, "all_gather", info, what, sizeof what, send, recv, count);
  if (st == FSDPC_OK)
    st = check_dtype(c, dtype, 0, &t, what);
  if (st != FSDPC_OK || count == 0)
    return st;
  if (!nccl_lock_usable(c))
    return nccl_check_usable(c, what);
  ncclResult_t r = ncclAllGather(send, recv, (size_t)count, t, c->nc, (cudaStream_t)stream);
  nccl_unlock(c);
  if ((st = nccl_settle(c, c->nc, r, what, nccl_op_timeout(c, info))) != FSDPC_OK)
    return st;
  return nccl_track(c, (cudaStream_t)stream, what, nccl_op_timeout(c, info));
}

int32_t nccl_reduce_scatter(fsdpc_comm *c, const void *send, void *recv, uint64_t count,
                            int32_t dtype, int32_t op, void *stream, const fsdpc_op_info *info) {
  char what[160];
  ncclDataType_t t = ncclFloat32;
  ncclRedOp_t o = ncclSum;
  int32_t st = begin(c, "reduce_scatter", info, what, sizeof what, send, recv, count);
  if (st == FSDPC_OK)
    st = check_dtype(c, dtype, 1, &t, what);
  if (st == FSDPC_OK)
    st = check_op(c, op, &o, what);
  if (st != FSDPC_OK || count == 0)
    return st;
  if (!nccl_lock_usable(c))
    return nccl_check_usable(c, what);
  ncclResult_t r = ncclReduceScatter(send, recv, (size_t)count, t, o, c->nc, (cudaStream_t)stream);
  nccl_unlock(c);
  if ((st = nccl_settle(c, c->nc, r, what, nccl_op_timeout(c, info))) != FSDPC_OK)
    return st;
  return nccl_track(c, (cudaStream_t)stream, what, nccl_op_timeout(c, info));
}

int32_t nccl_all_reduce(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                        int32_t op, void *stream, const fsdpc_op_info *info) {
  char what[160];
  ncclDataType_t t = ncclFloat32;
  ncclRedOp_t o = ncclSum;
  int32_t st = begin(c, "all_reduce", info, what, sizeof what, send, recv, count);
  if (st == FSDPC_OK)
    st = check_dtype(c, dtype, 1, &t, what);
  if (st == FSDPC_OK)
    st = check_op(c, op, &o, what);
  if (st != FSDPC_OK || count == 0)
    return st;
  if (!nccl_lock_usable(c))
    return nccl_check_usable(c, what);
  ncclResult_t r = ncclAllReduce(send, recv, (size_t)count, t, o, c->nc, (cudaStream_t)stream);
  nccl_unlock(c);
  if ((st = nccl_settle(c, c->nc, r, what, nccl_op_timeout(c, info))) != FSDPC_OK)
    return st;
  return nccl_track(c, (cudaStream_t)stream, what, nccl_op_timeout(c, info));
}

int32_t nccl_broadcast(fsdpc_comm *c, void *buf, uint64_t count, int32_t dtype, int32_t root,
                       void *stream, const fsdpc_op_info *info) {
  char what[160];
  ncclDataType_t t = ncclFloat32;
  int32_t st = begin(c, "broadcast", info, what, sizeof what, buf, buf, count);
  if (st == FSDPC_OK)
    st = check_dtype(c, dtype, 0, &t, what);
  if (st != FSDPC_OK)
    return st;
  if (root < 0 || root >= c->size)
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: %s: root %d is outside the %d ranks",
                     what, (int)root, c->size);
  if (count == 0)
    return FSDPC_OK;
  if (!nccl_lock_usable(c))
    return nccl_check_usable(c, what);
  ncclResult_t r = ncclBroadcast(buf, buf, (size_t)count, t, root, c->nc, (cudaStream_t)stream);
  nccl_unlock(c);
  if ((st = nccl_settle(c, c->nc, r, what, nccl_op_timeout(c, info))) != FSDPC_OK)
    return st;
  return nccl_track(c, (cudaStream_t)stream, what, nccl_op_timeout(c, info));
}

/* Host-blocking: a one-float all-reduce on the comm's own stream, waited
 * for with the op's timeout (the communicator is aborted when it passes). */
int32_t nccl_barrier(fsdpc_comm *c, const fsdpc_op_info *info) {
  char what[160];
  int32_t st =
      begin(c, "barrier", info, what, sizeof what, c ? c->scratch : NULL, c ? c->scratch : NULL, 1);
  if (st != FSDPC_OK)
    return st;
  if (c->group_depth > 0)
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: %s inside group_start/group_end",
                     what);
  if (!nccl_lock_usable(c))
    return nccl_check_usable(c, what);
  ncclResult_t r =
      ncclAllReduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum, c->nc, c->internal);
  nccl_unlock(c);
  if ((st = nccl_settle(c, c->nc, r, what, nccl_op_timeout(c, info))) != FSDPC_OK)
    return st;
  const int64_t deadline = nccl_now_ms() + nccl_op_timeout(c, info);
  st = nccl_track(c, c->internal, what, nccl_op_timeout(c, info));
  if (st != FSDPC_OK)
    return st;
  for (;;) {
    cudaError_t e = cudaStreamQuery(c->internal);
    if (e == cudaSuccess)
      return FSDPC_OK;
    if (e != cudaErrorNotReady)
      return nccl_fail(nccl_host(c), FSDPC_SYSTEM_ERROR, "nccl: %s: %s", what,
                       cudaGetErrorString(e));
    st = nccl_watch_once(c); /* aborts once the deadline has passed */
    if (st != FSDPC_OK)
      return st;
    if (nccl_now_ms() > deadline + 1000) /* the watchdog pass should have caught it */
      return nccl_fail(nccl_host(c), FSDPC_TIMEOUT, "nccl: %s timed out", what);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

int32_t nccl_group_start(fsdpc_comm *c) {
  if (c == NULL)
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: group_start on a NULL communicator");
  int32_t st = nccl_check_usable(c, "group_start");
  if (st != FSDPC_OK)
    return st;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess)
    return nccl_result_fail(c, r, "group_start");
  pthread_mutex_lock(&c->mu);
  if (c->group_depth++ == 0) {
    c->group_n = 0;
    c->group_n_streams = 0;
    c->group_what[0] = 0;
    c->group_timeout_ms = 0;
  }
  pthread_mutex_unlock(&c->mu);
  return FSDPC_OK;
}

int32_t nccl_group_end(fsdpc_comm *c) {
  if (c == NULL)
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: group_end on a NULL communicator");
  if (c->group_depth <= 0)
    return nccl_fail(nccl_host(c), FSDPC_INVALID_USAGE, "nccl: group_end without group_start");
  char what[200];
  pthread_mutex_lock(&c->mu);
  snprintf(what, sizeof what, "group of %d ops (first: %s)", c->group_n, c->group_what);
  const int64_t timeout = c->group_timeout_ms > 0 ? c->group_timeout_ms : c->timeout_ms;
  pthread_mutex_unlock(&c->mu);
  if (!nccl_lock_usable(c))
    return nccl_check_usable(c, what);
  ncclResult_t r = ncclGroupEnd();
  const int outer = --c->group_depth == 0;
  nccl_unlock(c);
  int32_t st = nccl_settle(c, c->nc, r, what, timeout);
  if (st != FSDPC_OK)
    return st;
  if (!outer)
    return FSDPC_OK;
  /* Now the kernels are enqueued: track each stream the group used. */
  for (int i = 0; i < c->group_n_streams; i++) {
    st = nccl_track(c, c->group_streams[i], what, c->group_timeout_ms);
    if (st != FSDPC_OK)
      return st;
  }
  return FSDPC_OK;
}
