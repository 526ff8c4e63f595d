/* What every fuzz harness here shares: libFuzzer's entry point (also called
 * by replay_main.c) and CHECK, which traps so that libFuzzer and the replay
 * under ASan report the input that broke an invariant. */
#ifndef FSDPC_TESTS_FUZZ_CHECK_H
#define FSDPC_TESTS_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      __builtin_trap();                                                                            \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
