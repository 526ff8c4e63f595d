/* Plugin options: user values kept as YAML text with their source location
 * until a plugin's descriptors say what type each key has. */
#include "config/opts.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/scalar.h"
#include "config/suggest.h"

typedef struct opt_entry {
  char *key, *value; /* value as YAML scalar text */
  char *file;        /* file name, or the override text */
  int line, col;     /* 0 when not from a file */
  bool user;         /* false: a default filled in by validate */
  int32_t type;      /* FSDPC_OPT_* after validate, -1 before */
} opt_entry;

struct fsdpc_opts {
  char *where; /* "optim.options" */
  opt_entry *items;
  int n, cap;
  bool validated;
};

static fsdpc_status oom(fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory while reading options");
}

fsdpc_status fsdpc__opts_create(const char *where, fsdpc_opts **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_opts *o = calloc(1, sizeof *o);
  if (!o)
    return oom(err);
  o->where = strdup(where ? where : "options");
  if (!o->where) {
    free(o);
    return oom(err);
  }
  *out = o;
  return FSDPC_OK;
}

static void entry_free(opt_entry *e) {
  free(e->key);
  free(e->value);
  free(e->file);
}

void fsdpc__opts_destroy(fsdpc_opts *opts) {
  if (!opts)
    return;
  for (int i = 0; i < opts->n; i++)
    entry_free(&opts->items[i]);
  free(opts->items);
  free(opts->where);
  free(opts);
}

static opt_entry *find(const fsdpc_opts *o, const char *key) {
  for (int i = 0; i < o->n; i++) {
    if (strcmp(o->items[i].key, key) == 0)
      return &o->items[i];
  }
  return NULL;
}

static fsdpc_status add_entry(fsdpc_opts *o, const char *key, const char *value, const char *file,
                              int line, int col, bool user, fsdpc_err *err) {
  opt_entry *e = find(o, key);
  if (!e) {
    if (o->n == o->cap) {
      int cap = o->cap ? 2 * o->cap : 8;
      opt_entry *items = realloc(o->items, (size_t)cap * sizeof *items);
      if (!items)
        return oom(err);
      o->items = items;
      o->cap = cap;
    }
    e = &o->items[o->n++];
    memset(e, 0, sizeof *e);
  } else {
    entry_free(e);
  }
  e->key = strdup(key);
  e->value = strdup(value ? value : "");
  e->file = strdup(file ? file : "<unknown>");
  e->line = line;
  e->col = col;
  e->user = user;
  e->type = -1;
  if (!e->key || !e->value || !e->file)
    return oom(err);
  return FSDPC_OK;
}

fsdpc_status fsdpc__opts_add(fsdpc_opts *opts, const char *key, const char *value, const char *file,
                             int line, int col, fsdpc_err *err) {
  if (!key || !key[0]) {
    char where[512];
    fsdpc__format_where(where, sizeof where, file ? file : "<unknown>", line, col);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: empty option key in %s", where, opts->where);
  }
  opts->validated = false;
  return add_entry(opts, key, value, file, line, col, true, err);
}

/* Parses text as type; on failure writes what was expected into why. */
static bool parse_typed(const char *text, int32_t type, char *why, size_t cap) {
  bool b;
  int64_t i;
  double d;
  switch (type) {
  case FSDPC_OPT_BOOL:
    if (fsdpc__parse_bool(text, &b))
      return true;
    snprintf(why, cap, "expected true or false, got '%s'", text);
    return false;
  case FSDPC_OPT_INT:
    if (fsdpc__parse_int(text, &i))
      return true;
    snprintf(why, cap, "expected an integer, got '%s'", text);
    return false;
  case FSDPC_OPT_FLOAT:
    if (fsdpc__parse_float(text, &d))
      return true;
    snprintf(why, cap, "expected a number, got '%s'", text);
    return false;
  case FSDPC_OPT_STRING:
    return true;
  }
  snprintf(why, cap, "has unknown option type %d", (int)type);
  return false;
}

static bool in_range(const fsdpc_option_desc *d, const char *text, char *why, size_t cap) {
  if (d->min > d->max || (d->type != FSDPC_OPT_INT && d->type != FSDPC_OPT_FLOAT))
    return true;
  double v;
  int64_t iv;
  if (d->type == FSDPC_OPT_INT) {
    fsdpc__parse_int(text, &iv);
    v = (double)iv;
  } else {
    fsdpc__parse_float(text, &v);
  }
  char range[128];
  if (fsdpc__check_range(v, true, d->min, false, true, d->max, false, range, sizeof range))
    return true;
  snprintf(why, cap, "%s is out of range (%s)", text, range);
  return false;
}

static const fsdpc_option_desc *find_desc(const fsdpc_option_desc *const *descs, uint32_t n,
                                          const char *key) {
  for (uint32_t i = 0; i < n; i++) {
    if (descs[i] && descs[i]->key && strcmp(descs[i]->key, key) == 0)
      return descs[i];
  }
  return NULL;
}

/* Drops defaults filled in by an earlier validate, so that validating the
 * same options against another plugin starts from the user's values. */
static void drop_defaults(fsdpc_opts *o) {
  int w = 0;
  for (int r = 0; r < o->n; r++) {
    if (o->items[r].user)
      o->items[w++] = o->items[r];
    else
      entry_free(&o->items[r]);
  }
  o->n = w;
}

static fsdpc_status validate(fsdpc_opts *opts, const fsdpc_option_desc *const *descs,
                             uint32_t n_descs, const char *component, fsdpc_err *err);

fsdpc_status fsdpc__opts_validate(fsdpc_opts *opts, const fsdpc_option_desc *const *descs,
                                  uint32_t n_descs, const char *component, fsdpc_err *err) {
  fsdpc_status st = validate(opts, descs, n_descs, component, err);
  if (st != FSDPC_OK && err)
    fsdpc__one_line(err->msg, sizeof err->msg);
  return st;
}

static fsdpc_status validate(fsdpc_opts *opts, const fsdpc_option_desc *const *descs,
                             uint32_t n_descs, const char *component, fsdpc_err *err) {
  drop_defaults(opts);
  opts->validated = false;
  if (!component)
    component = "this plugin";
  char where[600], why[512];
  for (int i = 0; i < opts->n; i++) {
    opt_entry *e = &opts->items[i];
    fsdpc__format_where(where, sizeof where, e->file, e->line, e->col);
    const fsdpc_option_desc *d = find_desc(descs, n_descs, e->key);
    if (!d) {
      if (n_descs == 0)
        return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "%s: unknown option '%s.%s': %s takes no options", where, opts->where,
                           e->key, component);
      const char *names[256];
      int n = 0;
      for (uint32_t j = 0; j < n_descs && n < 256; j++) {
        if (descs[j] && descs[j]->key)
          names[n++] = descs[j]->key;
      }
      const char *hint = fsdpc__did_you_mean(e->key, names, n);
      char tail[200] = "";
      if (hint)
        snprintf(tail, sizeof tail, " (did you mean '%s'?)", hint);
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: unknown option '%s.%s' for %s%s", where,
                         opts->where, e->key, component, tail);
    }
    if (!parse_typed(e->value, d->type, why, sizeof why) || !in_range(d, e->value, why, sizeof why))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s.%s: %s (option of %s)", where,
                         opts->where, e->key, why, component);
    e->type = d->type;
  }
  for (uint32_t j = 0; j < n_descs; j++) {
    const fsdpc_option_desc *d = descs[j];
    if (!d || !d->key || find(opts, d->key))
      continue;
    if (!d->default_value)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: missing required option '%s.%s'", component,
                         opts->where, d->key);
    /* A default that does not parse is the plugin's bug, not the user's. */
    if (!parse_typed(d->default_value, d->type, why, sizeof why))
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "%s: default of option '%s' %s", component,
                         d->key, why);
    FSDPC_TRY(add_entry(opts, d->key, d->default_value, component, 0, 0, false, err));
    opts->items[opts->n - 1].type = d->type;
  }
  opts->validated = true;
  return FSDPC_OK;
}

fsdpc_status fsdpc__opts_get(const fsdpc_opts *opts, const char *key, int32_t type, void *out,
                             uint64_t out_cap, fsdpc_err *err) {
  const opt_entry *e = opts ? find(opts, key) : NULL;
  if (!e)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "option '%s' is not set in %s", key,
                       opts ? opts->where : "(no options)");
  if (opts->validated && e->type != type)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "option '%s.%s' read as type %d but declared as type %d", opts->where, key,
                       (int)type, (int)e->type);
  char why[512];
  if (!parse_typed(e->value, type, why, sizeof why))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s.%s: %s", opts->where, key, why);
  switch (type) {
  case FSDPC_OPT_BOOL: {
    bool b = false;
    fsdpc__parse_bool(e->value, &b);
    *(int32_t *)out = b ? 1 : 0;
    return FSDPC_OK;
  }
  case FSDPC_OPT_INT:
    fsdpc__parse_int(e->value, (int64_t *)out);
    return FSDPC_OK;
  case FSDPC_OPT_FLOAT:
    fsdpc__parse_float(e->value, (double *)out);
    return FSDPC_OK;
  case FSDPC_OPT_STRING: {
    size_t len = strlen(e->value);
    if (len + 1 > out_cap)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "option '%s.%s' is %zu bytes long; the buffer holds %llu", opts->where,
                         key, len, (unsigned long long)(out_cap ? out_cap - 1 : 0));
    memcpy(out, e->value, len + 1);
    return FSDPC_OK;
  }
  }
  return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "unknown option type %d", (int)type);
}

fsdpc_status fsdpc__opts_clone(const fsdpc_opts *src, fsdpc_opts **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_opts *o;
  FSDPC_TRY(fsdpc__opts_create(src->where, &o, err));
  for (int i = 0; i < src->n; i++) {
    const opt_entry *e = &src->items[i];
    fsdpc_status st = add_entry(o, e->key, e->value, e->file, e->line, e->col, e->user, err);
    if (st != FSDPC_OK) {
      fsdpc__opts_destroy(o);
      return st;
    }
    o->items[o->n - 1].type = e->type;
  }
  o->validated = src->validated;
  *out = o;
  return FSDPC_OK;
}

int fsdpc__opts_count(const fsdpc_opts *opts) { return opts ? opts->n : 0; }

void fsdpc__opts_entry(const fsdpc_opts *opts, int i, const char **key, const char **value,
                       int *user) {
  const opt_entry *e = &opts->items[i];
  if (key)
    *key = e->key;
  if (value)
    *value = e->value;
  if (user)
    *user = e->user;
}

const char *fsdpc__opts_where(const fsdpc_opts *opts) { return opts->where; }
