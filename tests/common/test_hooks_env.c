/* The checkpoint tests' fault injection (core/src/ckpt/test_hooks.h), read
 * from the environment. Linked only into the test build of the CLI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/test_hooks.h"

void fsdpc__test_hooks_get(fsdpc_test_hooks *out) {
  memset(out, 0, sizeof *out);
  const char *t = getenv("FSDPC_TEST_SIGNAL_AT_STEP");
  out->signal_at_step = t ? atoi(t) : 0;
  const char *k = getenv("FSDPC_TEST_KILL_IN_SAVE"); /* "<step>:<files>" */
  long long ks = 0;
  int kf = 0;
  if (k && sscanf(k, "%lld:%d", &ks, &kf) == 2) {
    out->kill_step = ks;
    out->kill_files = kf;
  }
}
