/* fsdpc public API: what an embedder (and the fsdpc CLI) calls.
 *
 * Every function returns an fsdpc_status (codes in plugin.h). On failure the
 * fsdpc_err passed in holds one line that says what is wrong, where and what
 * to do. Objects are made by fsdpc_x_create(..., &out) and released by
 * fsdpc_x_destroy(x); destroy(NULL) is a no-op. */
#ifndef FSDPC_FSDPC_H
#define FSDPC_FSDPC_H

#include <stdint.h>

#include "fsdpc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FSDPC_VERSION_MAJOR 0
#define FSDPC_VERSION_MINOR 1
#define FSDPC_VERSION_PATCH 0
#define FSDPC_VERSION_STRING "0.1.0"

/* Error detail for the call that failed. Caller-owned, reusable. */
typedef struct fsdpc_err {
  fsdpc_status status;
  char msg[1024];
} fsdpc_err;

/* "INVALID_USAGE" */
const char *fsdpc_status_name(fsdpc_status s);
/* "invalid usage (a user or config error)" */
const char *fsdpc_status_str(fsdpc_status s);
const char *fsdpc_version(void);

#ifdef __cplusplus
}
#endif
#endif /* FSDPC_FSDPC_H */
