/* Trying a plugin file in a child process before the host loads it.
 *
 * dlopen runs a file's constructors and the entry point runs its code: a
 * half-copied .so (SIGBUS), an entry that crashes, aborts, hangs or calls
 * exit() would take the host down with it and name nothing. The probe forks,
 * loads the file and calls its entry in the child, and reports how the child
 * ended; only a file whose probe succeeded is then loaded in the host. */
#ifndef FSDPC_PLUGIN_PROBE_H
#define FSDPC_PLUGIN_PROBE_H

#include <stddef.h>

#include "util/err.h"

/* How long a child may take before it is killed and the file refused. */
#define FSDPC_PLUGIN_PROBE_TIMEOUT_MS 10000

/* FSDPC_OK when the file loaded and its entry returned in the child (the
 * entry's own status and the descriptor checks are left to the real load).
 * Otherwise writes one line starting with the file's base name into reason,
 * e.g. "libfsdpc-optim-bad.so: crashed while loading (signal 7, SIGBUS)". */
fsdpc_status fsdpc__plugin_probe(const char *path, char *reason, size_t cap);

#endif
