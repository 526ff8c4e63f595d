/* The shipped default: no test hook (see test_hooks.h). Weak, so that the
 * test build of the CLI can link its own. */
#include "ckpt/test_hooks.h"

#include <string.h>

__attribute__((weak)) void fsdpc__test_hooks_get(fsdpc_test_hooks *out) {
  memset(out, 0, sizeof *out);
}
