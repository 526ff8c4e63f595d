/* A minimal plugin host for the optimizer tests: records set_error, serves
 * options from a small table and dlopens a plugin from the build tree. */
#ifndef FSDPC_TESTS_OPTIM_HOST_STUB_H
#define FSDPC_TESTS_OPTIM_HOST_STUB_H

#include "fsdpc/plugin.h"

/* Option values for opt_get; pass (const fsdpc_opts *)&stub_opts. Only
 * FLOAT, INT and BOOL values (stored as double) are served. */
typedef struct stub_opts {
  int n;
  const char *keys[8];
  double values[8];
} stub_opts;

/* The host table given to every plugin this process loads. */
const fsdpc_host_api *stub_host(void);
/* Last message the plugin passed to set_error ("" after stub_clear_error). */
const char *stub_last_error(void);
int32_t stub_last_error_status(void);
void stub_clear_error(void);

/* dlopens FSDPC_BINARY_DIR/plugins/libfsdpc-optim-<name>.so, calls its entry
 * point with stub_host() and returns the optim component (never unloaded).
 * Fails the running Check test on any problem. */
const fsdpc_component_desc *stub_load_optim(const char *name, const fsdpc_optim_v1 **vtable);

/* Deterministic uniform numbers in [lo, hi) (xorshift64*). */
typedef struct stub_rng {
  uint64_t s;
} stub_rng;
double stub_uniform(stub_rng *r, double lo, double hi);

#endif
