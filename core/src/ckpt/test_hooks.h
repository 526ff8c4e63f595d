/* Fault injection for the checkpoint tests, kept out of what ships.
 *
 * The library (libfsdpc.so and the fsdpc executable) holds only a weak,
 * empty fsdpc__test_hooks_get: no hook fires. The test build of the CLI
 * (tests/common/test_hooks_env.c, linked into build/tests/bin/fsdpc, the
 * executable the script tests run) replaces it with one that reads
 *   FSDPC_TEST_SIGNAL_AT_STEP=N      raise SIGTERM on rank 0 after step N
 *   FSDPC_TEST_KILL_IN_SAVE=S:F      rank 0 dies during the save of step S
 *                                    after writing F files */
#ifndef FSDPC_CKPT_TEST_HOOKS_H
#define FSDPC_CKPT_TEST_HOOKS_H

#include <stdint.h>

typedef struct fsdpc_test_hooks {
  int signal_at_step; /* 0 = off */
  int64_t kill_step;  /* 0 = off */
  int kill_files;
} fsdpc_test_hooks;

/* Fills out (all zero: no hooks). */
void fsdpc__test_hooks_get(fsdpc_test_hooks *out);

#endif
