/* See ops.h: reporting what an ops table's alloc and free could not say. */
#include "ops/ops.h"

#include <stdio.h>

fsdpc_status fsdpc__ops_oom(const fsdpc_ops *ops, fsdpc_err *err, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  fsdpc_err dev;
  fsdpc__err_clear(&dev);
  if (ops && ops->take_error && ops->take_error(ops->ctx, &dev) != FSDPC_OK)
    return fsdpc__fail(err, dev.status, "%s: %s", what, dev.msg);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory %s", what);
}

fsdpc_status fsdpc__ops_freed(const fsdpc_ops *ops, fsdpc_err *err) {
  return ops && ops->take_error ? ops->take_error(ops->ctx, err) : FSDPC_OK;
}

size_t fsdpc__xent_scratch_bytes(int32_t device, int N, int V, int chunk_rows, int logits_bf16) {
  size_t R = (size_t)(chunk_rows < 1 ? 1 : chunk_rows), v = (size_t)V;
  if (device == FSDPC_DEVICE_CPU) /* fp32 logits, rounded to bf16 values in place */
    return R * v * sizeof(float);
  if (N > 0 && R > (size_t)N)
    R = (size_t)N;
#define A256(x) (((x) + 255) & ~(size_t)255)
  return (logits_bf16 ? 0 : A256(R * v * sizeof(float))) + A256(R * v * 2) +
         A256((size_t)(N > 0 ? N : 1) * sizeof(float));
#undef A256
}
