/* Error reporting inside libfsdpc.
 *
 * Library functions return an fsdpc_status and, on failure, fill the caller's
 * fsdpc_err with one line: what is wrong, where (file:line:col, tensor name,
 * rank) and what to do. They never exit() or abort() on user or environment
 * errors; asserts are for our own invariants only. */
#ifndef FSDPC_UTIL_ERR_H
#define FSDPC_UTIL_ERR_H

#include <stdarg.h>

#include "fsdpc/fsdpc.h"

#if defined(__GNUC__)
#define FSDPC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FSDPC_PRINTF(a, b)
#endif

/* Sets err (if non-NULL) and returns status, so callers can
 * `return fsdpc__fail(err, FSDPC_INVALID_USAGE, "...", ...);` */
fsdpc_status fsdpc__fail(fsdpc_err *err, fsdpc_status status, const char *fmt,
                         ...) FSDPC_PRINTF(3, 4);
fsdpc_status fsdpc__vfail(fsdpc_err *err, fsdpc_status status, const char *fmt,
                          va_list ap);
/* Prepends "prefix: " to an error already set (adds context while unwinding). */
fsdpc_status fsdpc__err_prefix(fsdpc_err *err, const char *fmt, ...)
    FSDPC_PRINTF(2, 3);
void fsdpc__err_clear(fsdpc_err *err);

/* Evaluates expr; if it is not FSDPC_OK, returns it. */
#define FSDPC_TRY(expr)                                                        \
  do {                                                                         \
    fsdpc_status fsdpc_try_s_ = (expr);                                        \
    if (fsdpc_try_s_ != FSDPC_OK) return fsdpc_try_s_;                         \
  } while (0)

#endif
