/* The plugin registry: builds the search path, scans it for
 * libfsdpc-*.so, keeps what loads and the reasons for what does not, and
 * selects a component per kind (pinned by name, or `auto` by score). */
#define _GNU_SOURCE /* dladdr */
#include "plugin/registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/call.h"
#include "plugin/plugin_lib.h"
#include "plugin/probe.h"
#include "util/log.h"

#ifndef FSDPC_PLUGIN_BUILD_DIR
#define FSDPC_PLUGIN_BUILD_DIR ""
#endif
#ifndef FSDPC_PLUGIN_DIR_FROM_BIN
#define FSDPC_PLUGIN_DIR_FROM_BIN "../lib/fsdpc/plugins"
#endif
#ifndef FSDPC_PLUGIN_INSTALL_DIR
#define FSDPC_PLUGIN_INSTALL_DIR ""
#endif

struct fsdpc_registry {
  fsdpc_host_device dev;
  fsdpc_plugin_lib **libs; /* every file opened, loaded or refused */
  int n_libs, cap_libs;
  /* Each component is its own allocation: a pointer handed out stays valid
   * when a later (lazy) load grows the list. */
  fsdpc_component **comps;
  int n_comps, cap_comps;
  fsdpc_refused_plugin *refused; /* path and reason strings owned here */
  int n_refused, cap_refused;
  char **searched; /* folders and files in search order, for messages */
  int n_searched, cap_searched;
  char **real_seen; /* realpaths already opened: one file is loaded once */
  int n_real, cap_real;
  /* Files found in the search path, in search order, not loaded yet (NULL
   * once loaded): a file is loaded only when its kind (and name) is asked
   * for, so that an unselected broken file is never touched by train. */
  char **pending;
  int n_pending, cap_pending;
};

static const char *const kind_names[FSDPC_KIND_COUNT_] = {
    [FSDPC_KIND_COLLECTIVES] = "collectives",
    [FSDPC_KIND_ATTENTION] = "attention",
    [FSDPC_KIND_OPTIM] = "optim",
    [FSDPC_KIND_WRAP] = "wrap",
    [FSDPC_KIND_STATEDICT] = "statedict",
    [FSDPC_KIND_OBJECTIVE] = "objective",
};

const char *fsdpc__kind_name(int32_t kind) {
  return kind >= 0 && kind < FSDPC_KIND_COUNT_ ? kind_names[kind] : "unknown-kind";
}

int32_t fsdpc__kind_from_name(const char *name) {
  for (int32_t k = 0; name && k < FSDPC_KIND_COUNT_; k++)
    if (strcmp(name, kind_names[k]) == 0)
      return k;
  return -1;
}

/* Grows *arr (of elem bytes each) so that it holds one more; 0 on OOM. */
static int grow(void *arrp, int n, int *cap, size_t elem) {
  void **arr = arrp;
  if (n < *cap)
    return 1;
  int ncap = *cap ? *cap * 2 : 8;
  void *p = realloc(*arr, (size_t)ncap * elem);
  if (!p)
    return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

static fsdpc_status oom(fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "plugin registry: out of memory");
}

static fsdpc_status add_refused(fsdpc_registry *reg, const char *path, const char *reason,
                                fsdpc_err *err) {
  if (!grow(&reg->refused, reg->n_refused, &reg->cap_refused, sizeof *reg->refused))
    return oom(err);
  fsdpc_refused_plugin *r = &reg->refused[reg->n_refused];
  r->path = strdup(path);
  r->reason = strdup(reason);
  if (!r->path || !r->reason) {
    free((char *)r->path);
    free((char *)r->reason);
    return oom(err);
  }
  reg->n_refused++;
  FSDPC_LOGD("plugin refused: %s", reason);
  return FSDPC_OK;
}

static fsdpc_status add_searched(fsdpc_registry *reg, const char *what, fsdpc_err *err) {
  if (!grow(&reg->searched, reg->n_searched, &reg->cap_searched, sizeof *reg->searched))
    return oom(err);
  if (!(reg->searched[reg->n_searched] = strdup(what)))
    return oom(err);
  reg->n_searched++;
  return FSDPC_OK;
}

static const fsdpc_component *find(const fsdpc_registry *reg, int32_t kind, const char *name) {
  for (int i = 0; i < reg->n_comps; i++)
    if (reg->comps[i]->desc->kind == kind && strcmp(reg->comps[i]->desc->name, name) == 0)
      return reg->comps[i];
  return NULL;
}

/* Loads one file (once per real path) and registers its components. */
static fsdpc_status load_file(fsdpc_registry *reg, const char *path, fsdpc_err *err) {
  char real[PATH_MAX];
  if (!realpath(path, real))
    snprintf(real, sizeof real, "%s", path);
  for (int i = 0; i < reg->n_real; i++)
    if (strcmp(reg->real_seen[i], real) == 0)
      return FSDPC_OK;
  if (!grow(&reg->real_seen, reg->n_real, &reg->cap_real, sizeof *reg->real_seen))
    return oom(err);
  if (!(reg->real_seen[reg->n_real] = strdup(real)))
    return oom(err);
  reg->n_real++;

  if (!grow(&reg->libs, reg->n_libs, &reg->cap_libs, sizeof *reg->libs))
    return oom(err);
  fsdpc_plugin_lib *lib = fsdpc__plugin_lib_new(path, &reg->dev);
  if (!lib)
    return oom(err);
  /* Kept even when refused: its entry point may have run, so it stays
   * mapped until the registry dies. */
  reg->libs[reg->n_libs++] = lib;

  char reason[1024];
  if (fsdpc__plugin_probe(path, reason, sizeof reason) != FSDPC_OK ||
      fsdpc__plugin_lib_load(lib, reason, sizeof reason) != FSDPC_OK)
    return add_refused(reg, path, reason, err);

  const fsdpc_plugin_desc *d = lib->desc;
  for (uint32_t i = 0; i < d->n_components; i++) {
    const fsdpc_component_desc *c = d->components[i];
    const fsdpc_component *prev = find(reg, c->kind, c->name);
    if (prev) {
      /* Search order is priority order: the earlier folder wins. */
      FSDPC_LOGD("plugin %s '%s' in %s is shadowed by %s", fsdpc__kind_name(c->kind), c->name, path,
                 prev->path);
      continue;
    }
    fsdpc_component *comp = malloc(sizeof *comp);
    if (!comp || !grow(&reg->comps, reg->n_comps, &reg->cap_comps, sizeof *reg->comps)) {
      free(comp);
      return oom(err);
    }
    reg->comps[reg->n_comps++] = comp;
    *comp = (fsdpc_component){
        .desc = c,
        .vtable = c->vtable,
        .host = &lib->host,
        .path = lib->path,
        .abi_major = d->abi_major,
        .abi_minor = d->abi_minor,
        .lib = lib,
    };
  }
  return FSDPC_OK;
}

static fsdpc_status add_pending(fsdpc_registry *reg, const char *path, fsdpc_err *err) {
  if (!grow(&reg->pending, reg->n_pending, &reg->cap_pending, sizeof *reg->pending))
    return oom(err);
  if (!(reg->pending[reg->n_pending] = strdup(path)))
    return oom(err);
  reg->n_pending++;
  return FSDPC_OK;
}

/* Whether a pending file may hold (kind, name): a file named
 * libfsdpc-<kind>-<name>.so holds that kind and name; a file named any other
 * way may hold anything. kind < 0 matches every file; name NULL every name. */
static int may_hold(const char *path, int32_t kind, const char *name) {
  if (kind < 0)
    return 1;
  const char *slash = strrchr(path, '/');
  const char *b = slash ? slash + 1 : path;
  size_t len = strlen(b);
  if (strncmp(b, "libfsdpc-", 9) != 0 || len < 13 || strcmp(b + len - 3, ".so") != 0)
    return 1;
  const char *k = b + 9, *dash = strchr(k, '-');
  if (!dash)
    return 1;
  char kn[32];
  snprintf(kn, sizeof kn, "%.*s", (int)(dash - k), k);
  int32_t fk = fsdpc__kind_from_name(kn);
  if (fk < 0)
    return 1;
  if (fk != kind)
    return 0;
  if (!name)
    return 1;
  size_t nl = (size_t)(b + len - 3 - (dash + 1));
  return strlen(name) == nl && strncmp(dash + 1, name, nl) == 0;
}

/* Loads, in search order, the pending files that may hold (kind, name). */
static fsdpc_status load_pending(fsdpc_registry *reg, int32_t kind, const char *name,
                                 fsdpc_err *err) {
  for (int i = 0; i < reg->n_pending; i++) {
    char *p = reg->pending[i];
    if (!p || !may_hold(p, kind, name))
      continue;
    reg->pending[i] = NULL;
    fsdpc_status st = load_file(reg, p, err);
    free(p);
    FSDPC_TRY(st);
  }
  return FSDPC_OK;
}

/* For the listing calls: everything found, loaded. Errors here are out of
 * memory only; they leave the lists as far as they got. */
static fsdpc_registry *loaded_all(const fsdpc_registry *creg) {
  fsdpc_registry *reg = (fsdpc_registry *)creg; /* the lists are caches */
  fsdpc_err e;
  load_pending(reg, -1, NULL, &e);
  return reg;
}

fsdpc_status fsdpc__registry_load_all(fsdpc_registry *reg, fsdpc_err *err) {
  return load_pending(reg, -1, NULL, err);
}

static int is_plugin_file_name(const char *n) {
  size_t len = strlen(n);
  return strncmp(n, "libfsdpc-", 9) == 0 && len > 12 && strcmp(n + len - 3, ".so") == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Scans one folder (files in name order, so loading is deterministic). */
static fsdpc_status scan_dir(fsdpc_registry *reg, const char *dir, fsdpc_err *err) {
  DIR *dp = opendir(dir);
  if (!dp)
    return FSDPC_OK;
  char **names = NULL;
  int n = 0, cap = 0;
  fsdpc_status st = FSDPC_OK;
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    if (!is_plugin_file_name(de->d_name))
      continue;
    if (!grow(&names, n, &cap, sizeof *names) || !(names[n] = strdup(de->d_name))) {
      st = oom(err);
      break;
    }
    n++;
  }
  closedir(dp);
  if (st == FSDPC_OK && n > 0)
    qsort(names, (size_t)n, sizeof *names, cmp_str);
  for (int i = 0; i < n && st == FSDPC_OK; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    st = add_pending(reg, path, err);
  }
  for (int i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return st;
}

/* One search-path entry: a folder is scanned; a file is loaded as given.
 * An entry the user named explicitly (plugins.paths, --path) that does not
 * exist is an error: left as a refusal, the run went on with whatever
 * plugin of that name the other folders held. With
 * FSDPC_REGISTRY_MISSING_REFUSED it is listed as refused instead. */
static fsdpc_status search_entry(fsdpc_registry *reg, const char *entry, int explicit_entry,
                                 unsigned flags, fsdpc_err *err) {
  if (!entry || !*entry)
    return FSDPC_OK;
  struct stat sb;
  if (stat(entry, &sb) != 0) {
    if (!explicit_entry)
      return FSDPC_OK;
    if (!(flags & FSDPC_REGISTRY_MISSING_REFUSED))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "plugins.paths (or --path): '%s': no such file or folder; fix the path "
                         "or remove it",
                         entry);
    char reason[PATH_MAX + 64];
    snprintf(reason, sizeof reason, "%s: no such file or folder (named in plugins.paths or --path)",
             entry);
    return add_refused(reg, entry, reason, err);
  }
  FSDPC_TRY(add_searched(reg, entry, err));
  if (S_ISDIR(sb.st_mode))
    return scan_dir(reg, entry, err);
  return add_pending(reg, entry, err);
}

/* True when the running program lies inside the build tree whose plugin
 * folder is build_plugins (<build>/plugins). */
static int fsdpc__running_from_build_tree(const char *build_plugins) {
  if (!build_plugins || !*build_plugins)
    return 0;
  char exe[PATH_MAX], root[PATH_MAX], tree[PATH_MAX];
  if (!realpath("/proc/self/exe", exe))
    return 0;
  snprintf(tree, sizeof tree, "%s", build_plugins);
  char *slash = strrchr(tree, '/');
  if (!slash || slash == tree)
    return 0;
  *slash = '\0';
  if (!realpath(tree, root))
    return 0;
  size_t n = strlen(root);
  return strncmp(exe, root, n) == 0 && exe[n] == '/';
}

/* The plugin folder next to the libfsdpc.so actually loaded
 * (<libdir>/fsdpc/plugins), so that an installation moved to another prefix
 * still finds its own plugins; for the fsdpc executable (the core linked
 * statically) the same folder reached from its bindir. Empty otherwise. */
static void relocated_install_dir(char *buf, size_t cap) {
  buf[0] = '\0';
  Dl_info info;
  if (!dladdr((void *)&fsdpc__registry_create_ex, &info) || !info.dli_fname)
    return;
  const char *slash = strrchr(info.dli_fname, '/');
  char dir[PATH_MAX], real[PATH_MAX];
  if (slash && strstr(slash, "libfsdpc.so")) {
    snprintf(dir, sizeof dir, "%.*s/fsdpc/plugins", (int)(slash - info.dli_fname), info.dli_fname);
  } else {
    /* the fsdpc executable, which links the core statically: <bindir>/fsdpc */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
      return;
    exe[n] = '\0';
    const char *es = strrchr(exe, '/');
    if (!es || strcmp(es, "/fsdpc") != 0)
      return;
    snprintf(dir, sizeof dir, "%.*s/%s", (int)(es - exe), exe, FSDPC_PLUGIN_DIR_FROM_BIN);
  }
  /* Canonical, so that it compares equal to the configured install folder
   * and reads well in messages ("bin/../lib" otherwise). */
  snprintf(buf, cap, "%s", realpath(dir, real) ? real : dir);
}

fsdpc_status fsdpc__registry_create_ex(const char *const *extra_paths, int n_extra, unsigned flags,
                                       fsdpc_registry **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_registry *reg = calloc(1, sizeof *reg);
  if (!reg)
    return oom(err);
  reg->dev = (fsdpc_host_device){.device = FSDPC_DEVICE_CPU, .device_index = -1};
  fsdpc_status st = FSDPC_OK;
  for (int i = 0; i < n_extra && st == FSDPC_OK; i++)
    st = search_entry(reg, extra_paths[i], 1, flags, err);
  if (!(flags & FSDPC_REGISTRY_ONLY_GIVEN)) {
    const char *env = getenv("FSDPC_PLUGIN_PATH");
    if (env && st == FSDPC_OK) {
      char *copy = strdup(env), *save = NULL;
      if (!copy)
        st = oom(err);
      for (char *tok = copy ? strtok_r(copy, ":", &save) : NULL; tok && st == FSDPC_OK;
           tok = strtok_r(NULL, ":", &save))
        st = search_entry(reg, tok, 0, flags, err);
      free(copy);
    }
    /* Installed plugins first; the build folder only for a program that
     * runs from that build tree, so that a file planted in a build folder
     * compiled into an installed fsdpc is never loaded. */
    if (st == FSDPC_OK)
      st = search_entry(reg, FSDPC_PLUGIN_INSTALL_DIR, 0, flags, err);
    char moved[PATH_MAX];
    relocated_install_dir(moved, sizeof moved);
    if (st == FSDPC_OK && moved[0] && strcmp(moved, FSDPC_PLUGIN_INSTALL_DIR) != 0)
      st = search_entry(reg, moved, 0, flags, err);
    if (st == FSDPC_OK && fsdpc__running_from_build_tree(FSDPC_PLUGIN_BUILD_DIR))
      st = search_entry(reg, FSDPC_PLUGIN_BUILD_DIR, 0, flags, err);
  }
  if (st != FSDPC_OK) {
    fsdpc__registry_destroy(reg);
    return st;
  }
  *out = reg;
  return FSDPC_OK;
}

fsdpc_status fsdpc__registry_create(const char *const *extra_paths, int n_extra,
                                    fsdpc_registry **out, fsdpc_err *err) {
  return fsdpc__registry_create_ex(extra_paths, n_extra, 0, out, err);
}

void fsdpc__registry_destroy(fsdpc_registry *reg) {
  if (!reg)
    return;
  for (int i = 0; i < reg->n_libs; i++)
    fsdpc__plugin_lib_free(reg->libs[i]);
  for (int i = 0; i < reg->n_refused; i++) {
    free((char *)reg->refused[i].path);
    free((char *)reg->refused[i].reason);
  }
  for (int i = 0; i < reg->n_searched; i++)
    free(reg->searched[i]);
  for (int i = 0; i < reg->n_real; i++)
    free(reg->real_seen[i]);
  for (int i = 0; i < reg->n_pending; i++)
    free(reg->pending[i]);
  free(reg->pending);
  free(reg->libs);
  for (int i = 0; i < reg->n_comps; i++)
    free(reg->comps[i]);
  free(reg->comps);
  free(reg->refused);
  free(reg->searched);
  free(reg->real_seen);
  free(reg);
}

void fsdpc__registry_set_device(fsdpc_registry *reg, int32_t device, int32_t device_index) {
  reg->dev.device = device;
  reg->dev.device_index = device == FSDPC_DEVICE_CPU ? -1 : device_index;
}

void fsdpc__registry_set_threads(fsdpc_registry *reg, int32_t num_threads) {
  reg->dev.num_threads = num_threads > 0 ? num_threads : 0;
}

int fsdpc__registry_count(const fsdpc_registry *reg) {
  return loaded_all(reg)->n_comps;
}

const fsdpc_component *fsdpc__registry_at(const fsdpc_registry *reg, int i) {
  reg = loaded_all(reg);
  return i >= 0 && i < reg->n_comps ? reg->comps[i] : NULL;
}

int fsdpc__registry_refused_count(const fsdpc_registry *reg) {
  return loaded_all(reg)->n_refused;
}

const fsdpc_refused_plugin *fsdpc__registry_refused_at(const fsdpc_registry *reg, int i) {
  reg = loaded_all(reg);
  return i >= 0 && i < reg->n_refused ? &reg->refused[i] : NULL;
}

int fsdpc__registry_search_count(const fsdpc_registry *reg) {
  return reg->n_searched;
}

const char *fsdpc__registry_search_at(const fsdpc_registry *reg, int i) {
  return i >= 0 && i < reg->n_searched ? reg->searched[i] : NULL;
}

const fsdpc_component *fsdpc__registry_find(const fsdpc_registry *reg, int32_t kind,
                                            const char *name) {
  if (!name)
    return NULL;
  fsdpc_err e;
  load_pending((fsdpc_registry *)reg, kind, name, &e);
  return find(reg, kind, name);
}

/* ---------------------------------------------------------------------- */
/* Selection                                                               */

/* Asks c whether it supports s: OK, or non-OK with the plugin's reason in
 * why. Components without supports() accept everything. */
static fsdpc_status ask_supports(const fsdpc_component *c, const fsdpc_situation *s, char *why,
                                 size_t cap) {
  why[0] = '\0';
  if (!s)
    return FSDPC_OK;
  fsdpc__plugin_lib_take_error(c->lib, NULL, NULL, 0); /* drop stale messages */
  int32_t st = FSDPC_OK;
  switch (c->desc->kind) {
  case FSDPC_KIND_COLLECTIVES:
  case FSDPC_KIND_OPTIM:
    st = fsdpc__call_supports(c, s);
    break;
  case FSDPC_KIND_ATTENTION: {
    /* Attention judges a shape; the situation gives the model's heads and
     * the longest sequence, which is what decides support. */
    fsdpc_attn_shape shape = {
        .struct_size = sizeof shape,
        .B = 1,
        .T = s->max_seq_len > 0 ? s->max_seq_len : 1,
        .NH = s->num_heads,
        .KVH = s->num_kv_heads,
        .HD = s->head_dim,
        .causal = 1,
        .scale = s->head_dim > 0 ? 1.0f / sqrtf((float)s->head_dim) : 1.0f,
        .dtype = s->dtype,
        .device = s->device,
        .doc_ids = NULL,
    };
    st = fsdpc__call_attn_supports(c, &shape);
    break;
  }
  default: /* wrap and statedict do not depend on the situation */
    break;
  }
  if (st != FSDPC_OK && !fsdpc__plugin_lib_take_error(c->lib, NULL, why, cap))
    snprintf(why, cap, "%s", fsdpc_status_str(st));
  return st;
}

static void describe_situation(const fsdpc_situation *s, char *buf, size_t cap) {
  if (!s) {
    snprintf(buf, cap, "any situation");
    return;
  }
  snprintf(buf, cap, "device %s, dtype %d, world size %d, heads %d/%d, head dim %d",
           s->device == FSDPC_DEVICE_CUDA ? "cuda" : "cpu", (int)s->dtype, (int)s->world_size,
           (int)s->num_heads, (int)s->num_kv_heads, (int)s->head_dim);
}

static void list_available(const fsdpc_registry *reg, int32_t kind, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < reg->n_comps && used < cap; i++) {
    if (reg->comps[i]->desc->kind != kind)
      continue;
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
                             reg->comps[i]->desc->name);
  }
  if (!buf[0])
    snprintf(buf, cap, "none");
}

static void list_searched(const fsdpc_registry *reg, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < reg->n_searched && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ":" : "", reg->searched[i]);
  if (!buf[0])
    snprintf(buf, cap, "(no plugin folder exists)");
}

static fsdpc_status select_pinned(fsdpc_registry *reg, int32_t kind, const char *name,
                                  const fsdpc_situation *s, const fsdpc_component **out,
                                  fsdpc_err *err) {
  const char *kn = fsdpc__kind_name(kind);
  const fsdpc_component *c = find(reg, kind, name);
  if (c) {
    char why[1024];
    if (ask_supports(c, s, why, sizeof why) != FSDPC_OK) {
      char sit[256];
      describe_situation(s, sit, sizeof sit);
      return fsdpc__fail(err, FSDPC_UNSUPPORTED, "%s '%s' does not support this run (%s): %s", kn,
                         name, sit, why);
    }
    *out = c;
    return FSDPC_OK;
  }
  /* A refused file of the expected name explains why it is missing. */
  char file[256];
  snprintf(file, sizeof file, "libfsdpc-%s-%s.so", kn, name);
  for (int i = 0; i < reg->n_refused; i++) {
    const char *p = reg->refused[i].path;
    const char *slash = strrchr(p, '/');
    if (strcmp(slash ? slash + 1 : p, file) == 0)
      return fsdpc__fail(err, FSDPC_UNSUPPORTED, "%s '%s' cannot be used: %s", kn, name,
                         reg->refused[i].reason);
  }
  char avail[512], dirs[1024];
  FSDPC_TRY(load_pending(reg, kind, NULL, err)); /* to name the alternatives */
  list_available(reg, kind, avail, sizeof avail);
  list_searched(reg, dirs, sizeof dirs);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s '%s' not found (no %s in %s); available %s plugins: %s; add its folder "
                     "to plugins.paths or FSDPC_PLUGIN_PATH",
                     kn, name, file, dirs, kn, avail);
}

fsdpc_status fsdpc__registry_select(fsdpc_registry *reg, int32_t kind, const char *name,
                                    const fsdpc_situation *s, const fsdpc_component **out,
                                    fsdpc_err *err) {
  *out = NULL;
  if (kind < 0 || kind >= FSDPC_KIND_COUNT_)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "unknown plugin kind %d", (int)kind);
  if (name && *name && strcmp(name, "auto") != 0) {
    FSDPC_TRY(load_pending(reg, kind, name, err));
    return select_pinned(reg, kind, name, s, out, err);
  }
  FSDPC_TRY(load_pending(reg, kind, NULL, err));

  const char *kn = fsdpc__kind_name(kind);
  const fsdpc_component *best = NULL;
  char vetoes[1024] = "";
  size_t used = 0;
  int n_kind = 0;
  for (int i = 0; i < reg->n_comps; i++) {
    const fsdpc_component *c = reg->comps[i];
    if (c->desc->kind != kind)
      continue;
    n_kind++;
    char why[256];
    if (ask_supports(c, s, why, sizeof why) != FSDPC_OK) {
      if (used < sizeof vetoes)
        used += (size_t)snprintf(vetoes + used, sizeof vetoes - used, "%s%s: %s", used ? "; " : "",
                                 c->desc->name, why);
      continue;
    }
    /* Strictly greater: on a tie the earlier one in search order wins. */
    if (!best || c->desc->default_score > best->desc->default_score)
      best = c;
  }
  if (best) {
    *out = best;
    return FSDPC_OK;
  }
  if (n_kind == 0) {
    char dirs[1024];
    list_searched(reg, dirs, sizeof dirs);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "no %s plugin found in %s; run `fsdpc plugins list` to see what loaded "
                       "and why others were refused",
                       kn, dirs);
  }
  char sit[256];
  describe_situation(s, sit, sizeof sit);
  return fsdpc__fail(err, FSDPC_UNSUPPORTED, "no %s plugin supports this run (%s): %s", kn, sit,
                     vetoes);
}
