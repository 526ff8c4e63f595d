/* One loaded plugin file, as the registry keeps it: the dlopen handle, the
 * host table given to its entry point, and the per-plugin last-error buffer
 * behind set_error. Internal to core/src/plugin. */
#ifndef FSDPC_PLUGIN_PLUGIN_LIB_H
#define FSDPC_PLUGIN_PLUGIN_LIB_H

#include <pthread.h>

#include "fsdpc/plugin.h"
#include "util/err.h"

/* The device the process computes on, shared by every plugin's host table
 * (device_info reads it). Owned by the registry. */
typedef struct fsdpc_host_device {
  int32_t device;       /* FSDPC_DEVICE_* */
  int32_t device_index; /* CUDA ordinal or -1 */
  int32_t num_threads;  /* CPU threads of the run (train.threads); 0 = OpenMP's default */
} fsdpc_host_device;

typedef struct fsdpc_plugin_lib {
  char *path;     /* as found (absolute or as the user gave it) */
  char *basename; /* "libfsdpc-optim-lion.so": the prefix of refusal lines */
  void *handle;   /* dlopen handle; closed only when the registry dies */
  /* The table handed to the entry point; host.host_ctx points back here, so
   * this struct must not move once the entry point has seen it. */
  fsdpc_host_api host;
  const fsdpc_host_device *dev;
  const fsdpc_plugin_desc *desc; /* NULL until a successful entry call */
  char log_name[128];            /* prefix of the plugin's log lines */

  pthread_mutex_t err_mu; /* set_error may be called from any thread */
  int has_error;
  int32_t err_status;
  char err_msg[1024];
} fsdpc_plugin_lib;

/* host.c */
fsdpc_plugin_lib *fsdpc__plugin_lib_new(const char *path, const fsdpc_host_device *dev);
void fsdpc__plugin_lib_free(fsdpc_plugin_lib *lib); /* dlcloses; NULL is a no-op */
/* Takes the plugin's last set_error message (and clears it). Returns 0 when
 * there was none. */
int fsdpc__plugin_lib_take_error(fsdpc_plugin_lib *lib, int32_t *status, char *buf, size_t cap);

/* load.c: dlopens lib->path, finds the entry point, calls it and validates
 * the descriptor. On failure writes one line (starting with the file's base
 * name) into reason and returns non-OK; the lib stays allocated (and maybe
 * open) so that the caller can keep it until the registry dies. */
fsdpc_status fsdpc__plugin_lib_load(fsdpc_plugin_lib *lib, char *reason, size_t cap);

/* check.c: validates a v1 descriptor (sizes, kinds, names, vtables). On
 * failure writes the reason (without the file prefix) and returns non-OK. */
fsdpc_status fsdpc__plugin_check_desc(const fsdpc_plugin_desc *desc, char *reason, size_t cap);

#endif
