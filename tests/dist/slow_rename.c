/* LD_PRELOAD shim for the preemption test: makes the rename that commits a
 * checkpoint (".../.tmp-step-N" -> ".../step-N") take
 * FSDPC_TEST_SLOW_RENAME_MS milliseconds, the way a large model's save takes
 * seconds. It works on any fsdpc build, so the same test shows what an
 * older launcher did to such a save. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rename(const char *from, const char *to) {
  static int (*real)(const char *, const char *);
  if (!real)
    real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  const char *ms = getenv("FSDPC_TEST_SLOW_RENAME_MS");
  if (ms && strstr(from, "/.tmp-step-") && strstr(to, "/step-"))
    usleep((useconds_t)atoi(ms) * 1000);
  return real(from, to);
}
