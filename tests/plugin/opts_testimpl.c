/* A small stand-in for core/src/config/opts.c (written by another helper in
 * parallel), so that the plugin tests can run before the branches merge. It
 * follows config/opts.h: user values as YAML text, validate against the
 * plugin's option descriptors, defaults filled in, typed reads.
 * tests/plugin/CMakeLists.txt links it only while the real opts.c is
 * missing (or is the temporary shim that includes this file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/opts.h"

typedef struct opt_value {
  char *key, *value, *file;
  int line, col;
  int32_t type; /* -1 until validated */
} opt_value;

struct fsdpc_opts {
  char *where;
  opt_value *v;
  uint32_t n, cap;
};

fsdpc_status fsdpc__opts_create(const char *where, fsdpc_opts **out, fsdpc_err *err) {
  fsdpc_opts *o = calloc(1, sizeof *o);
  if (!o || !(o->where = strdup(where ? where : "options"))) {
    free(o);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  *out = o;
  return FSDPC_OK;
}

void fsdpc__opts_destroy(fsdpc_opts *o) {
  if (!o)
    return;
  for (uint32_t i = 0; i < o->n; i++) {
    free(o->v[i].key);
    free(o->v[i].value);
    free(o->v[i].file);
  }
  free(o->v);
  free(o->where);
  free(o);
}

static opt_value *lookup(const fsdpc_opts *o, const char *key) {
  for (uint32_t i = 0; i < o->n; i++)
    if (strcmp(o->v[i].key, key) == 0)
      return &o->v[i];
  return NULL;
}

static fsdpc_status put(fsdpc_opts *o, const char *key, const char *value, const char *file,
                        int line, int col, int32_t type, fsdpc_err *err) {
  opt_value *v = lookup(o, key);
  if (!v) {
    if (o->n == o->cap) {
      uint32_t cap = o->cap ? o->cap * 2 : 8;
      opt_value *p = realloc(o->v, cap * sizeof *p);
      if (!p)
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      o->v = p;
      o->cap = cap;
    }
    v = &o->v[o->n++];
    memset(v, 0, sizeof *v);
    v->key = strdup(key);
  }
  free(v->value);
  free(v->file);
  v->value = strdup(value);
  v->file = strdup(file ? file : "<override>");
  v->line = line;
  v->col = col;
  v->type = type;
  if (!v->key || !v->value || !v->file)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  return FSDPC_OK;
}

fsdpc_status fsdpc__opts_add(fsdpc_opts *o, const char *key, const char *value, const char *file,
                             int line, int col, fsdpc_err *err) {
  return put(o, key, value, file, line, col, -1, err);
}

static int parse_bool(const char *s, int32_t *out) {
  static const char *t[] = {"true", "yes", "on", "1"}, *f[] = {"false", "no", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, t[i]) == 0)
      return *out = 1, 1;
    if (strcasecmp(s, f[i]) == 0)
      return *out = 0, 1;
  }
  return 0;
}

static int parse_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end)
    return 0;
  *out = x;
  return 1;
}

static int parse_float(const char *s, double *out) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (errno || end == s || *end)
    return 0;
  *out = x;
  return 1;
}

fsdpc_status fsdpc__opts_validate(fsdpc_opts *o, const fsdpc_option_desc *const *descs,
                                  uint32_t n_descs, const char *component, fsdpc_err *err) {
  static const char *type_names[] = {"bool", "int", "float", "string"};
  for (uint32_t i = 0; i < o->n; i++) {
    opt_value *v = &o->v[i];
    const fsdpc_option_desc *d = NULL;
    for (uint32_t j = 0; j < n_descs && !d; j++)
      if (strcmp(descs[j]->key, v->key) == 0)
        d = descs[j];
    if (!d)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s.%s: unknown option of %s", v->file,
                         v->line, v->col, o->where, v->key, component);
    int ok = 1;
    double num = 0;
    int32_t b;
    int64_t iv;
    if (d->type == FSDPC_OPT_BOOL)
      ok = parse_bool(v->value, &b);
    if (d->type == FSDPC_OPT_INT)
      ok = parse_int(v->value, &iv), num = (double)iv;
    if (d->type == FSDPC_OPT_FLOAT)
      ok = parse_float(v->value, &num);
    if (!ok)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s.%s: '%s' is not a %s", v->file,
                         v->line, v->col, o->where, v->key, v->value, type_names[d->type]);
    if ((d->type == FSDPC_OPT_INT || d->type == FSDPC_OPT_FLOAT) && d->min <= d->max &&
        (num < d->min || num > d->max))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s.%s: %s is outside [%g, %g]",
                         v->file, v->line, v->col, o->where, v->key, v->value, d->min, d->max);
    v->type = d->type;
  }
  for (uint32_t j = 0; j < n_descs; j++) {
    const fsdpc_option_desc *d = descs[j];
    if (lookup(o, d->key))
      continue;
    if (!d->default_value)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s.%s: required option of %s is missing",
                         o->where, d->key, component);
    FSDPC_TRY(put(o, d->key, d->default_value, "<default>", 0, 0, d->type, err));
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__opts_get(const fsdpc_opts *o, const char *key, int32_t type, void *out,
                             uint64_t out_cap, fsdpc_err *err) {
  const opt_value *v = lookup(o, key);
  if (!v || v->type < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s.%s: no such (validated) option", o->where,
                       key);
  if (v->type != type)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s.%s: read as type %d but declared as %d",
                       o->where, key, (int)type, (int)v->type);
  switch (type) {
  case FSDPC_OPT_BOOL:
    parse_bool(v->value, (int32_t *)out);
    return FSDPC_OK;
  case FSDPC_OPT_INT:
    parse_int(v->value, (int64_t *)out);
    return FSDPC_OK;
  case FSDPC_OPT_FLOAT:
    parse_float(v->value, (double *)out);
    return FSDPC_OK;
  default:
    if (strlen(v->value) + 1 > out_cap)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s.%s: value longer than %llu bytes", o->where,
                         key, (unsigned long long)out_cap);
    memcpy(out, v->value, strlen(v->value) + 1);
    return FSDPC_OK;
  }
}

fsdpc_status fsdpc__opts_clone(const fsdpc_opts *src, fsdpc_opts **out, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__opts_create(src->where, out, err));
  for (uint32_t i = 0; i < src->n; i++) {
    const opt_value *v = &src->v[i];
    fsdpc_status st = put(*out, v->key, v->value, v->file, v->line, v->col, v->type, err);
    if (st != FSDPC_OK) {
      fsdpc__opts_destroy(*out);
      *out = NULL;
      return st;
    }
  }
  return FSDPC_OK;
}
