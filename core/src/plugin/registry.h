/* Plugin discovery, loading, ABI checks and selection.
 *
 * Search order: config plugins.paths, then FSDPC_PLUGIN_PATH (colon list),
 * then the install plugin folder (and the plugin folder next to the
 * libfsdpc.so in use, if it was moved), then the build plugin folder, which
 * only a program run from inside that build tree searches. Files are found
 * at create time and loaded only when needed: selecting (kind, name) loads
 * the files named libfsdpc-<kind>-<name>.so (auto: libfsdpc-<kind>-*.so)
 * and files named otherwise; the listing calls (count, at, refused) load
 * everything. Each file is first tried in a child process (probe.h), then
 * loaded with RTLD_NOW | RTLD_LOCAL and asked for its descriptor; the first
 * component of a given (kind, name) in search order wins. A file that fails (no entry symbol, other ABI major, bad descriptor)
 * is recorded as refused with a one-line reason and does not stop the others.
 * Plugins are never unloaded before the registry is destroyed. */
#ifndef FSDPC_PLUGIN_REGISTRY_H
#define FSDPC_PLUGIN_REGISTRY_H

#include "fsdpc/plugin.h"
#include "util/err.h"

typedef struct fsdpc_registry fsdpc_registry;

/* One loaded component. Valid until the registry is destroyed. */
typedef struct fsdpc_component {
  const fsdpc_component_desc *desc;
  const void *vtable;         /* fsdpc_<kind>_v1 of desc->kind */
  const fsdpc_host_api *host; /* the host table given to its plugin */
  const char *path;           /* file it came from */
  uint32_t abi_major, abi_minor;
  struct fsdpc_plugin_lib *lib; /* internal */
} fsdpc_component;

typedef struct fsdpc_refused_plugin {
  const char *path;
  const char *reason; /* one line, e.g. "libfsdpc-optim-lion.so: ABI 2.0, this fsdpc speaks 1.x" */
} fsdpc_refused_plugin;

fsdpc_status fsdpc__registry_create(const char *const *extra_paths, int n_extra,
                                    fsdpc_registry **out, fsdpc_err *err);
void fsdpc__registry_destroy(fsdpc_registry *reg);

/* Flags of fsdpc__registry_create_ex. */
enum {
  /* Search only extra_paths: no FSDPC_PLUGIN_PATH, build or install folder
   * (tests that need an exact set of plugins). */
  FSDPC_REGISTRY_ONLY_GIVEN = 1u,
  /* A missing extra path is listed as refused instead of failing the
   * creation (tests of the refusal list). */
  FSDPC_REGISTRY_MISSING_REFUSED = 2u
};
fsdpc_status fsdpc__registry_create_ex(const char *const *extra_paths, int n_extra, unsigned flags,
                                       fsdpc_registry **out, fsdpc_err *err);

/* The device this process computes on, reported to plugins by the host
 * service device_info (default: CPU). */
void fsdpc__registry_set_device(fsdpc_registry *reg, int32_t device, int32_t device_index);
/* The CPU threads device_info reports (train.threads; <= 0: OpenMP's
 * default, omp_get_max_threads()). */
void fsdpc__registry_set_threads(fsdpc_registry *reg, int32_t num_threads);

/* Folders and files that existed and were searched, in order. */
int fsdpc__registry_search_count(const fsdpc_registry *reg);
const char *fsdpc__registry_search_at(const fsdpc_registry *reg, int i);

/* The loaded component of kind with this name, or NULL (no supports()). */
const fsdpc_component *fsdpc__registry_find(const fsdpc_registry *reg, int32_t kind,
                                            const char *name);

/* Loads every file found (fsdpc plugins list). */
fsdpc_status fsdpc__registry_load_all(fsdpc_registry *reg, fsdpc_err *err);

int fsdpc__registry_count(const fsdpc_registry *reg);
const fsdpc_component *fsdpc__registry_at(const fsdpc_registry *reg, int i);
int fsdpc__registry_refused_count(const fsdpc_registry *reg);
const fsdpc_refused_plugin *fsdpc__registry_refused_at(const fsdpc_registry *reg, int i);

/* Picks a component of kind. name pins one: if it is missing or refused,
 * or its supports() rejects s, this fails with the reason (never falls
 * back). name "auto" (or NULL)
 * picks the highest default_score whose supports() accepts s (s may be
 * NULL). */
fsdpc_status fsdpc__registry_select(fsdpc_registry *reg, int32_t kind, const char *name,
                                    const fsdpc_situation *s, const fsdpc_component **out,
                                    fsdpc_err *err);

/* After a plugin call returned status st != OK: copies the plugin's last
 * set_error message (or a generic one) into err, prefixed with
 * "<kind> '<name>'", and returns st. */
fsdpc_status fsdpc__plugin_fail(const fsdpc_component *c, fsdpc_status st, fsdpc_err *err);

const char *fsdpc__kind_name(int32_t kind);      /* "collectives", ... */
int32_t fsdpc__kind_from_name(const char *name); /* -1 if unknown */

#endif
