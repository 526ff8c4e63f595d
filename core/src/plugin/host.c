/* Host services handed to each plugin (fsdpc_host_api), one table per
 * loaded file so that log lines carry the plugin's name and set_error lands
 * in that plugin's own last-error buffer. */
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FSDPC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "config/opts.h"
#include "plugin/plugin_lib.h"
#include "plugin/registry.h"
#include "util/log.h"

static void host_set_error(void *host_ctx, int32_t status, const char *msg);

static void host_log(void *host_ctx, int32_t level, const char *msg) {
  fsdpc_plugin_lib *lib = host_ctx;
  if (level < FSDPC_LOG_ERROR)
    level = FSDPC_LOG_ERROR;
  if (level > FSDPC_LOG_DEBUG)
    level = FSDPC_LOG_DEBUG;
  fsdpc__log(level, "[%s] %s", lib ? lib->log_name : "plugin", msg ? msg : "(null)");
}

static void host_set_error(void *host_ctx, int32_t status, const char *msg) {
  fsdpc_plugin_lib *lib = host_ctx;
  if (!lib)
    return;
  pthread_mutex_lock(&lib->err_mu);
  lib->has_error = 1;
  lib->err_status = status;
  snprintf(lib->err_msg, sizeof lib->err_msg, "%s", msg ? msg : "(no message)");
  /* One line only: a plugin's newline would break the one-line rule. */
  for (char *p = lib->err_msg; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  pthread_mutex_unlock(&lib->err_mu);
}

/* Aligned host memory. posix_memalign needs a power of two that is a
 * multiple of sizeof(void *); the ABI promises at least 16. */
static void *host_alloc(void *host_ctx, uint64_t bytes, uint64_t align) {
  if (align < 16)
    align = 16;
  if ((align & (align - 1)) != 0) {
    host_set_error(host_ctx, FSDPC_INVALID_USAGE, "host alloc: align is not a power of two");
    return NULL;
  }
  void *p = NULL;
  if (posix_memalign(&p, (size_t)align, bytes ? (size_t)bytes : 1) != 0)
    return NULL;
  return p;
}

static void host_free(void *host_ctx, void *ptr) { free(ptr); }

static int32_t host_opt_get(void *host_ctx, const fsdpc_opts *opts, const char *key, int32_t type,
                            void *out, uint64_t out_cap) {
  if (!opts || !key || !out) {
    host_set_error(host_ctx, FSDPC_INVALID_USAGE, "opt_get: opts, key and out must be non-NULL");
    return FSDPC_INVALID_USAGE;
  }
  fsdpc_err err;
  fsdpc__err_clear(&err);
  fsdpc_status st = fsdpc__opts_get(opts, key, type, out, out_cap, &err);
  /* Recorded so that a plugin which just returns the status still yields a
   * useful message through fsdpc__plugin_fail. */
  if (st != FSDPC_OK)
    host_set_error(host_ctx, st, err.msg);
  return st;
}

static int32_t host_device_info(void *host_ctx, fsdpc_device_info *out) {
  fsdpc_plugin_lib *lib = host_ctx;
  if (!out || out->struct_size < offsetof(fsdpc_device_info, num_threads) + sizeof(int32_t)) {
    host_set_error(host_ctx, FSDPC_INVALID_USAGE,
                   "device_info: out is NULL or its struct_size is too small");
    return FSDPC_INVALID_USAGE;
  }
  uint32_t size = out->struct_size;
  memset(out, 0, sizeof *out);
  out->struct_size = size < sizeof *out ? size : (uint32_t)sizeof *out;
  out->device = lib && lib->dev ? lib->dev->device : FSDPC_DEVICE_CPU;
  out->device_index = -1;
  out->num_threads =
      lib && lib->dev && lib->dev->num_threads > 0 ? lib->dev->num_threads : omp_get_max_threads();
  if (out->device == FSDPC_DEVICE_CPU) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    out->total_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    return FSDPC_OK;
  }
#ifdef FSDPC_WITH_CUDA
  struct cudaDeviceProp prop;
  int idx = lib->dev->device_index;
  cudaError_t ce = cudaGetDeviceProperties(&prop, idx);
  if (ce != cudaSuccess) {
    char msg[256];
    snprintf(msg, sizeof msg, "device_info: CUDA device %d: %s", idx, cudaGetErrorString(ce));
    host_set_error(host_ctx, FSDPC_SYSTEM_ERROR, msg);
    return FSDPC_SYSTEM_ERROR;
  }
  out->device_index = idx;
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  out->total_memory = (uint64_t)prop.totalGlobalMem;
  return FSDPC_OK;
#else
  host_set_error(host_ctx, FSDPC_UNSUPPORTED, "device_info: this fsdpc was built without CUDA");
  return FSDPC_UNSUPPORTED;
#endif
}

fsdpc_plugin_lib *fsdpc__plugin_lib_new(const char *path, const fsdpc_host_device *dev) {
  fsdpc_plugin_lib *lib = calloc(1, sizeof *lib);
  if (!lib)
    return NULL;
  lib->path = strdup(path);
  const char *slash = strrchr(path, '/');
  lib->basename = strdup(slash ? slash + 1 : path);
  if (!lib->path || !lib->basename) {
    free(lib->path);
    free(lib->basename);
    free(lib);
    return NULL;
  }
  pthread_mutex_init(&lib->err_mu, NULL);
  lib->dev = dev;
  snprintf(lib->log_name, sizeof lib->log_name, "%s", lib->basename);
  lib->host = (fsdpc_host_api){
      .struct_size = sizeof(fsdpc_host_api),
      .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
      .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
      .host_version = FSDPC_VERSION_STRING,
      .host_ctx = lib,
      .log = host_log,
      .set_error = host_set_error,
      .alloc = host_alloc,
      .free = host_free,
      .opt_get = host_opt_get,
      .device_info = host_device_info,
  };
  return lib;
}

void fsdpc__plugin_lib_free(fsdpc_plugin_lib *lib) {
  if (!lib)
    return;
  if (lib->handle)
    dlclose(lib->handle);
  pthread_mutex_destroy(&lib->err_mu);
  free(lib->path);
  free(lib->basename);
  free(lib);
}

int fsdpc__plugin_lib_take_error(fsdpc_plugin_lib *lib, int32_t *status, char *buf, size_t cap) {
  if (!lib)
    return 0;
  pthread_mutex_lock(&lib->err_mu);
  int had = lib->has_error;
  if (had) {
    if (status)
      *status = lib->err_status;
    if (buf && cap)
      snprintf(buf, cap, "%s", lib->err_msg);
    lib->has_error = 0;
  }
  pthread_mutex_unlock(&lib->err_mu);
  return had;
}

fsdpc_status fsdpc__plugin_fail(const fsdpc_component *c, fsdpc_status st, fsdpc_err *err) {
  if (st == FSDPC_OK)
    st = FSDPC_INTERNAL_ERROR; /* caller's bug: still report */
  const char *kind = c ? fsdpc__kind_name(c->desc->kind) : "plugin";
  const char *name = c ? c->desc->name : "?";
  char msg[1024];
  if (c && fsdpc__plugin_lib_take_error(c->lib, NULL, msg, sizeof msg))
    return fsdpc__fail(err, st, "%s '%s': %s", kind, name, msg);
  return fsdpc__fail(err, st, "%s '%s' failed: %s (it gave no message)", kind, name,
                     fsdpc_status_str(st));
}
