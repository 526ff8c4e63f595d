/* For the in-tree plugins: the host table of the call at hand (ABI 1.1,
 * "No globals" in fsdpc/plugin.h) read from whichever struct carries it,
 * and errors and option reads through it. Every reader checks struct_size,
 * so a 1.0 host (which fills none of these) yields NULL, and a NULL host
 * makes fsdpc_pl_fail return the status with no message. */
#ifndef FSDPC_PLUGINS_HOST_CALL_H
#define FSDPC_PLUGINS_HOST_CALL_H

#include <stdarg.h>
#include <stdio.h>

#include "fsdpc/plugin.h"

#define FSDPC_PL_HOST_OF(p, type) (FSDPC_HAS_FIELD((p), type, host) ? (p)->host : NULL)

static inline const fsdpc_host_api *fsdpc_pl_call_host(const fsdpc_call *c) {
  return FSDPC_PL_HOST_OF(c, fsdpc_call);
}
static inline const fsdpc_opts *fsdpc_pl_call_opts(const fsdpc_call *c) {
  return FSDPC_HAS_FIELD(c, fsdpc_call, opts) ? c->opts : NULL;
}
static inline const fsdpc_host_api *fsdpc_pl_sit_host(const fsdpc_situation *s) {
  return FSDPC_PL_HOST_OF(s, fsdpc_situation);
}
static inline const fsdpc_host_api *fsdpc_pl_shape_host(const fsdpc_attn_shape *s) {
  return FSDPC_PL_HOST_OF(s, fsdpc_attn_shape);
}
static inline const fsdpc_host_api *fsdpc_pl_optim_host(const fsdpc_optim_init *in) {
  return FSDPC_PL_HOST_OF(in, fsdpc_optim_init);
}
static inline const fsdpc_host_api *fsdpc_pl_comm_host(const fsdpc_comm_init *in) {
  return FSDPC_PL_HOST_OF(in, fsdpc_comm_init);
}

/* Records a one-line error with host h (when it has set_error) and returns
 * status. */
static inline int32_t fsdpc_pl_fail(const fsdpc_host_api *h, int32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int32_t fsdpc_pl_fail(const fsdpc_host_api *h, int32_t status, const char *fmt, ...) {
  if (FSDPC_HAS_FIELD(h, fsdpc_host_api, set_error) && h->set_error) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h->set_error(h->host_ctx, status, msg);
  }
  return status;
}

/* Reads option key of opts through h; FSDPC_INTERNAL_ERROR when opts are
 * given but no host can read them. */
static inline int32_t fsdpc_pl_opt(const fsdpc_host_api *h, const fsdpc_opts *opts, const char *key,
                                   int32_t type, void *out, uint64_t cap) {
  if (!FSDPC_HAS_FIELD(h, fsdpc_host_api, opt_get) || !h->opt_get)
    return fsdpc_pl_fail(h, FSDPC_INTERNAL_ERROR,
                         "the host gave options but no opt_get (or no host) to read '%s' with",
                         key);
  return h->opt_get(h->host_ctx, opts, key, type, out, cap);
}

#endif
