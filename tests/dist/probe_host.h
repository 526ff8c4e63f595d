/* A minimal plugin host for tests: loads the gloo collectives plugin from
 * the build tree without the registry and gives it log/set_error/alloc. */
#ifndef FSDPC_TESTS_PROBE_HOST_H
#define FSDPC_TESTS_PROBE_HOST_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdpc/plugin.h"

static char g_probe_last_error[1024];
static int g_probe_rank = -1;

static void probe_log(void *ctx, int32_t level, const char *msg) {
  (void)ctx;
  if (level <= FSDPC_LOG_WARN)
    fprintf(stderr, "[rank %d] plugin: %s\n", g_probe_rank, msg);
}

static void probe_set_error(void *ctx, int32_t status, const char *msg) {
  (void)ctx;
  (void)status;
  snprintf(g_probe_last_error, sizeof g_probe_last_error, "%s", msg);
}

static void *probe_alloc(void *ctx, uint64_t bytes, uint64_t align) {
  (void)ctx;
  void *p = NULL;
  return posix_memalign(&p, align < 16 ? 16 : (size_t)align, (size_t)bytes) ? NULL : p;
}

static void probe_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

static const fsdpc_host_api g_probe_host = {
    .struct_size = sizeof(fsdpc_host_api),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .host_version = "test",
    .log = probe_log,
    .set_error = probe_set_error,
    .alloc = probe_alloc,
    .free = probe_free,
};

/* Returns the gloo vtable or NULL (with a message on stderr). */
static const fsdpc_collectives_v1 *probe_load_gloo(void) {
  const char *path = FSDPC_BINARY_DIR "/plugins/libfsdpc-collectives-gloo.so";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(h, FSDPC_PLUGIN_ENTRY_V1);
  const fsdpc_plugin_desc *d = NULL;
  if (!entry || entry(&g_probe_host, &d) != FSDPC_OK || !d || d->n_components != 1 ||
      d->components[0]->kind != FSDPC_KIND_COLLECTIVES) {
    fprintf(stderr, "%s: bad plugin descriptor\n", path);
    return NULL;
  }
  return (const fsdpc_collectives_v1 *)d->components[0]->vtable;
}

#endif
