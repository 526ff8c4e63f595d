/* Loading one plugin file: dlopen, find the entry point, check the ABI
 * major, call the entry and validate what it returns. Every failure becomes
 * one line that starts with the file's base name, e.g.
 * "libfsdpc-optim-lion.so: ABI 2.0, this fsdpc speaks 1.x". */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "plugin/plugin_lib.h"
#include "plugin/registry.h"

/* A plugin built for a later major exports fsdpc_plugin_entry_v<N>: probe a
 * few so that the user hears "ABI N.x" instead of "not a plugin". */
#define MAX_PROBED_MAJOR 9

static int probe_other_major(void *handle) {
  for (int major = 2; major <= MAX_PROBED_MAJOR; major++) {
    char sym[64];
    snprintf(sym, sizeof sym, "fsdpc_plugin_entry_v%d", major);
    if (dlsym(handle, sym))
      return major;
  }
  return 0;
}

fsdpc_status fsdpc__plugin_lib_load(fsdpc_plugin_lib *lib, char *reason, size_t cap) {
  const char *base = lib->basename;
  dlerror();
  lib->handle = dlopen(lib->path, RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) {
    const char *e = dlerror();
    snprintf(reason, cap, "%s: cannot load: %s", base, e ? e : "unknown dlopen error");
    return FSDPC_SYSTEM_ERROR;
  }
  void *sym = dlsym(lib->handle, FSDPC_PLUGIN_ENTRY_V1);
  if (!sym) {
    int major = probe_other_major(lib->handle);
    if (major) {
      snprintf(reason, cap, "%s: ABI %d.x, this fsdpc speaks %d.x", base, major,
               FSDPC_PLUGIN_ABI_MAJOR);
      return FSDPC_UNSUPPORTED;
    }
    snprintf(reason, cap,
             "%s: no %s symbol (not an fsdpc plugin, or the entry point is not exported "
             "with FSDPC_PLUGIN_EXPORT)",
             base, FSDPC_PLUGIN_ENTRY_V1);
    return FSDPC_INVALID_USAGE;
  }
  fsdpc_plugin_entry_v1_fn entry;
  /* POSIX guarantees that a dlsym result converts to a function pointer. */
  memcpy(&entry, &sym, sizeof entry);

  const fsdpc_plugin_desc *desc = NULL;
  int32_t st = entry(&lib->host, &desc);
  if (st != FSDPC_OK) {
    char msg[1024];
    if (fsdpc__plugin_lib_take_error(lib, NULL, msg, sizeof msg))
      snprintf(reason, cap, "%s: entry point failed: %s", base, msg);
    else
      snprintf(reason, cap, "%s: entry point failed: %s", base, fsdpc_status_str(st));
    return st;
  }
  /* The ABI fields come first so that they can be read before anything else
   * in a descriptor from another major. */
  if (desc && desc->struct_size >= offsetof(fsdpc_plugin_desc, abi_minor) + sizeof(uint32_t) &&
      desc->abi_major != FSDPC_PLUGIN_ABI_MAJOR) {
    snprintf(reason, cap, "%s: ABI %u.%u, this fsdpc speaks %d.x", base, desc->abi_major,
             desc->abi_minor, FSDPC_PLUGIN_ABI_MAJOR);
    return FSDPC_UNSUPPORTED;
  }
  char why[768];
  if (fsdpc__plugin_check_desc(desc, why, sizeof why) != FSDPC_OK) {
    snprintf(reason, cap, "%s: %s", base, why);
    return FSDPC_INVALID_USAGE;
  }
  lib->desc = desc;
  snprintf(lib->log_name, sizeof lib->log_name, "%s", desc->name);
  return FSDPC_OK;
}
