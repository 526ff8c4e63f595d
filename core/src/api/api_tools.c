/* The public API's small services and the config's views (fsdpc config,
 * fsdpc plugins, fsdpc recipes): memory release, did-you-mean, escaping, one
 * config value, the resolved YAML, the schema, the run plan's file checks,
 * the shipped recipes, the plugin registry. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_fill.h"
#include "config/config.h"
#include "config/meta.h"
#include "config/recipes.h"
#include "config/suggest.h"
#include "plugin/registry.h"
#include "runplan/runplan.h"
#include "util/escape.h"
#include "util/fs.h"
#include "util/mem.h"

FSDPC_API void fsdpc_free(void *p) {
  free(p);
}

FSDPC_API const char *fsdpc_suggest(const char *word, const char *const *candidates, int32_t n) {
  return word && candidates && n > 0 ? fsdpc__did_you_mean(word, candidates, n) : NULL;
}

FSDPC_API char *fsdpc_escape(char *buf, size_t cap, const char *s) {
  return fsdpc__escape_str(buf, cap, s);
}

FSDPC_API FILE *fsdpc_open_input(const char *path, fsdpc_err *err) {
  if (!path) {
    fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_open_input: NULL path");
    return NULL;
  }
  int fd = fsdpc__open_regular(path, 0);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    char why[128];
    fsdpc__open_regular_why(fd, 0, why, sizeof why);
    if (fd >= 0)
      close(fd);
    fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot open: %s", path, why);
  }
  return f;
}

FSDPC_API const char *fsdpc_mem_category_name(int32_t category) {
  _Static_assert(FSDPC_MEM_CATEGORY_COUNT == (int)FSDPC_MEM_NCAT &&
                     FSDPC_MEM_CAT_GRADS == (int)FSDPC_MEM_GRADS &&
                     FSDPC_MEM_CAT_COMM == (int)FSDPC_MEM_COMM &&
                     FSDPC_MEM_CAT_OTHER == (int)FSDPC_MEM_OTHER,
                 "public memory categories");
  return category >= 0 && category < FSDPC_MEM_NCAT ? fsdpc__mem_cat_name((fsdpc_mem_cat)category)
                                                    : NULL;
}

/* Text that fn writes to a FILE, as one malloc'd string. */
static fsdpc_status to_string(fsdpc_status (*fn)(const void *arg, FILE *f), const void *arg,
                              char **out, fsdpc_err *err) {
  size_t len = 0;
  char *buf = NULL;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = fn(arg, f);
  if (fclose(f) != 0 && st == FSDPC_OK)
    st = FSDPC_SYSTEM_ERROR;
  if (st != FSDPC_OK) {
    free(buf);
    return fsdpc__fail(err, st, "cannot write the text (out of memory?)");
  }
  *out = buf;
  return FSDPC_OK;
}

static fsdpc_status dump_cfg(const void *cfg, FILE *f) {
  return fsdpc__config_dump(cfg, f);
}

static fsdpc_status schema_md(const void *unused, FILE *f) {
  (void)unused;
  fsdpc__config_schema_markdown(f);
  return FSDPC_OK;
}

static fsdpc_status schema_txt(const void *unused, FILE *f) {
  (void)unused;
  fsdpc__config_schema_text(f);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_config_dump(const fsdpc_config *cfg, char **yaml, fsdpc_err *err) {
  if (!cfg || !yaml)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_config_dump: NULL config or yaml");
  return to_string(dump_cfg, cfg, yaml, err);
}

FSDPC_API fsdpc_status fsdpc_config_schema(int32_t format, char **text, fsdpc_err *err) {
  if (!text || (format != FSDPC_SCHEMA_TEXT && format != FSDPC_SCHEMA_MARKDOWN))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_config_schema: bad format or NULL text");
  return to_string(format == FSDPC_SCHEMA_MARKDOWN ? schema_md : schema_txt, NULL, text, err);
}

FSDPC_API fsdpc_status fsdpc_config_get(const fsdpc_config *cfg, const char *key, char **value,
                                        fsdpc_err *err) {
  if (!cfg || !key || !value)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_config_get: NULL config, key or value");
  const fsdpc_cfg_key *k = fsdpc__cfg_find(key, NULL);
  if (!k) {
    int n;
    const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
    const char **paths = malloc((size_t)n * sizeof *paths);
    for (int i = 0; paths && i < n; i++)
      paths[i] = keys[i].path;
    const char *near = paths ? fsdpc__did_you_mean(key, paths, n) : NULL;
    fsdpc_status st =
        fsdpc__fail(err, FSDPC_INVALID_USAGE, "unknown config key '%s'%s%s%s", key,
                    near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    free(paths);
    return st;
  }
  char *buf = malloc(8192);
  if (!buf)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc__cfg_value_text(cfg, k, buf, 8192);
  *value = buf;
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_plan_check_files(const fsdpc_run_plan *plan, fsdpc_err *err) {
  if (!plan)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_plan_check_files: NULL plan");
  return fsdpc__run_plan_check_files(plan, err);
}

/* ---- plugins ------------------------------------------------------------ */

struct fsdpc_plugins {
  fsdpc_registry *reg;
};

FSDPC_API fsdpc_status fsdpc_plugins_open(const char *const *paths, int32_t n_paths,
                                          fsdpc_plugins **out, fsdpc_err *err) {
  if (!out || n_paths < 0 || (n_paths > 0 && !paths))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_plugins_open: NULL out or paths");
  fsdpc_plugins *p = calloc(1, sizeof *p);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = fsdpc__registry_create(paths, n_paths, &p->reg, err);
  if (st != FSDPC_OK) {
    free(p);
    return st;
  }
  *out = p;
  return FSDPC_OK;
}

FSDPC_API void fsdpc_plugins_destroy(fsdpc_plugins *p) {
  if (!p)
    return;
  fsdpc__registry_destroy(p->reg);
  free(p);
}

FSDPC_API const char *fsdpc_plugin_kind_name(int32_t kind) {
  return kind >= 0 && kind < FSDPC_KIND_COUNT_ ? fsdpc__kind_name(kind) : NULL;
}

static void info_of(const fsdpc_component *c, fsdpc_plugin_info *out) {
  const fsdpc_component_desc *d = c->desc;
  fsdpc_plugin_info full = {.kind = d->kind,
                            .kind_name = fsdpc__kind_name(d->kind),
                            .name = d->name,
                            .version = d->version,
                            .description = d->description,
                            .capabilities = d->capabilities,
                            .path = c->path,
                            .abi_major = c->abi_major,
                            .abi_minor = c->abi_minor,
                            .iface_version = d->iface_version,
                            .score = d->default_score,
                            .n_options = d->n_options,
                            .options = d->options};
  FSDPC_API_FILL(out, full);
}

FSDPC_API int32_t fsdpc_plugins_count(const fsdpc_plugins *p) {
  return p ? fsdpc__registry_count(p->reg) : 0;
}

FSDPC_API fsdpc_status fsdpc_plugins_get(const fsdpc_plugins *p, int32_t i, fsdpc_plugin_info *out,
                                         fsdpc_err *err) {
  const fsdpc_component *c = p ? fsdpc__registry_at(p->reg, i) : NULL;
  if (!c || !FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_plugins_get: no component %d, or out->struct_size unset", (int)i);
  info_of(c, out);
  return FSDPC_OK;
}

/* Why kind/name did not load: the pinned selection's reason (a refused file
 * or "not found" with what there is). */
static fsdpc_status not_loaded(fsdpc_registry *reg, int32_t kind, const char *name,
                               fsdpc_err *err) {
  const fsdpc_component *c;
  for (int32_t k = 0; k < FSDPC_KIND_COUNT_; k++)
    if ((kind < 0 || k == kind) &&
        fsdpc__registry_select(reg, k, name, NULL, &c, err) == FSDPC_UNSUPPORTED)
      return FSDPC_UNSUPPORTED; /* a refused file: its reason */
  if (kind >= 0 && fsdpc__registry_select(reg, kind, name, NULL, &c, err) != FSDPC_OK)
    return FSDPC_UNSUPPORTED;
  return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "no plugin named '%s' (run `fsdpc plugins list` to see what loaded and "
                     "what was refused)",
                     name);
}

FSDPC_API fsdpc_status fsdpc_plugins_find(fsdpc_plugins *p, const char *spec,
                                          fsdpc_plugin_info *out, fsdpc_err *err) {
  if (!p || !spec || !FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_plugins_find: NULL plugins, spec or out");
  int32_t kind = -1;
  const char *name = spec, *slash = strchr(spec, '/');
  if (slash) {
    char kind_buf[32];
    snprintf(kind_buf, sizeof kind_buf, "%.*s", (int)(slash - spec), spec);
    name = slash + 1;
    if ((kind = fsdpc__kind_from_name(kind_buf)) < 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "unknown kind '%s' (kinds: collectives, attention, optim, wrap, "
                         "statedict)",
                         kind_buf);
  }
  const fsdpc_component *match[FSDPC_KIND_COUNT_];
  int n = 0;
  for (int32_t k = 0; k < FSDPC_KIND_COUNT_; k++)
    if ((kind < 0 || k == kind) && (match[n] = fsdpc__registry_find(p->reg, k, name)))
      n++;
  if (n == 0)
    return not_loaded(p->reg, kind, name, err);
  if (n > 1) {
    char kinds[160] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof kinds; i++)
      len += (size_t)snprintf(kinds + len, sizeof kinds - len, " %s/%s",
                              fsdpc__kind_name(match[i]->desc->kind), name);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "'%s' is ambiguous:%s; give KIND/NAME", name,
                       kinds);
  }
  info_of(match[0], out);
  return FSDPC_OK;
}

FSDPC_API int32_t fsdpc_plugins_refused_count(const fsdpc_plugins *p) {
  return p ? fsdpc__registry_refused_count(p->reg) : 0;
}

FSDPC_API void fsdpc_plugins_refused(const fsdpc_plugins *p, int32_t i, const char **path,
                                     const char **reason) {
  const fsdpc_refused_plugin *r = p ? fsdpc__registry_refused_at(p->reg, i) : NULL;
  if (path)
    *path = r ? r->path : NULL;
  if (reason)
    *reason = r ? r->reason : NULL;
}

FSDPC_API int32_t fsdpc_plugins_searched_count(const fsdpc_plugins *p) {
  return p ? fsdpc__registry_search_count(p->reg) : 0;
}

FSDPC_API const char *fsdpc_plugins_searched(const fsdpc_plugins *p, int32_t i) {
  return p && i >= 0 && i < fsdpc__registry_search_count(p->reg)
             ? fsdpc__registry_search_at(p->reg, i)
             : NULL;
}

FSDPC_API fsdpc_status fsdpc_recipes_dir(char *dir, size_t cap, fsdpc_err *err) {
  if (!dir || cap == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_recipes_dir: NULL or empty buffer");
  return fsdpc__recipes_dir(dir, cap, err);
}

FSDPC_API fsdpc_status fsdpc_recipes_list(const char *dir,
                                          void (*each)(void *user, const char *name,
                                                       const char *file, const char *about),
                                          void *user, fsdpc_err *err) {
  if (!dir || !each)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_recipes_list: NULL dir or callback");
  fsdpc_recipe *r = NULL;
  int n = 0;
  FSDPC_TRY(fsdpc__recipes_list(dir, &r, &n, err));
  for (int i = 0; i < n; i++)
    each(user, r[i].name, r[i].file, r[i].about);
  free(r);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_recipes_copy(const char *dir, const char *name, const char *dest,
                                          char *written, size_t cap, fsdpc_err *err) {
  if (!dir || !name || !dest || !written || cap == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_recipes_copy: dir, name, dest and a written buffer are needed");
  return fsdpc__recipes_copy(dir, name, dest, written, cap, err);
}
