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
