/* Typed fields from YAML nodes, and back to text. One setter per schema
 * type; every error names where the value came from and the key path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "config/meta.h"
#include "config/scalar.h"

void fsdpc__cfg_node_where(const fsdpc_cfg_ctx *ctx, const yaml_node_t *node, char *buf,
                           size_t cap) {
  if (ctx->fixed)
    snprintf(buf, cap, "%s", ctx->fixed);
  else
    fsdpc__format_where(buf, cap, ctx->file, (int)node->start_mark.line + 1,
                        (int)node->start_mark.column + 1);
}

bool fsdpc__cfg_is_null(const yaml_node_t *node) {
  if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  const char *s = (const char *)node->data.scalar.value;
  return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
         strcmp(s, "NULL") == 0;
}

static const char *node_kind(const yaml_node_t *node) {
  switch (node->type) {
  case YAML_MAPPING_NODE:
    return "a mapping";
  case YAML_SEQUENCE_NODE:
    return "a list";
  default:
    return "a scalar";
  }
}

/* What a row accepts, for "expected ..." messages. */
static void expected(const fsdpc_cfg_key *k, char *buf, size_t cap) {
  switch (k->type) {
  case FSDPC_CFG_BOOL:
    snprintf(buf, cap, "true or false");
    return;
  case FSDPC_CFG_INT:
    snprintf(buf, cap, "an integer");
    return;
  case FSDPC_CFG_FLOAT:
    snprintf(buf, cap, "a number");
    return;
  case FSDPC_CFG_STRING:
    snprintf(buf, cap, "a string");
    return;
  case FSDPC_CFG_PATH:
    snprintf(buf, cap, "a path");
    return;
  case FSDPC_CFG_FLOATS:
    snprintf(buf, cap, "a list of %d numbers", k->list_len);
    return;
  case FSDPC_CFG_STRINGS:
    snprintf(buf, cap, "a list of strings");
    return;
  case FSDPC_CFG_OPTS:
    snprintf(buf, cap, "a mapping of option: value");
    return;
  case FSDPC_CFG_OPTS_LIST:
    snprintf(buf, cap, "a list of mappings ([{key: value, ...}, ...])");
    return;
  case FSDPC_CFG_ENUM: {
    size_t used = (size_t)snprintf(buf, cap, "one of");
    for (const fsdpc_cfg_enum_item *e = k->enums; e->name && used < cap; e++)
      used += (size_t)snprintf(buf + used, cap - used, "%s %s", e == k->enums ? "" : ",", e->name);
    return;
  }
  }
}

static fsdpc_status fail_at(fsdpc_cfg_ctx *ctx, const yaml_node_t *node, const char *path,
                            const char *fmt, const char *arg) {
  char where[600], what[700];
  fsdpc__cfg_node_where(ctx, node, where, sizeof where);
  snprintf(what, sizeof what, fmt, arg);
  return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE, "%s: %s: %s", where, path, what);
}

static fsdpc_status wrong_kind(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k, const char *path,
                               const yaml_node_t *node) {
  char exp[300], what[400];
  expected(k, exp, sizeof exp);
  snprintf(what, sizeof what, "expected %s, got %s", exp, node_kind(node));
  return fail_at(ctx, node, path, "%s", what);
}

static fsdpc_status oom(fsdpc_cfg_ctx *ctx) {
  return fsdpc__fail(ctx->err, FSDPC_SYSTEM_ERROR, "out of memory while loading the config");
}

/* A scalar number with the row's range; path names the item for lists. */
static fsdpc_status parse_number(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k, const char *path,
                                 const yaml_node_t *node, bool integer, double *out_d,
                                 int64_t *out_i) {
  char exp[300], why[200], what[600];
  if (node->type != YAML_SCALAR_NODE) {
    snprintf(what, sizeof what, "expected %s, got %s", integer ? "an integer" : "a number",
             node_kind(node));
    return fail_at(ctx, node, path, "%s", what);
  }
  const char *s = (const char *)node->data.scalar.value;
  double v;
  if (integer) {
    if (!fsdpc__parse_int(s, out_i)) {
      snprintf(what, sizeof what, "expected an integer, got '%s'", s);
      return fail_at(ctx, node, path, "%s", what);
    }
    v = (double)*out_i;
    /* Integers are used as int in places (shapes, counts): without a range
     * of its own, a key takes no more than 32 bits, never a silent cut. */
    if (!(k->flags & FSDPC_CFG_HAS_MAX) && (*out_i > INT32_MAX || *out_i < INT32_MIN)) {
      snprintf(what, sizeof what, "%s is out of range (must be <= 2147483647)", s);
      return fail_at(ctx, node, path, "%s", what);
    }
  } else {
    if (!fsdpc__parse_float(s, &v)) {
      snprintf(what, sizeof what, "expected a number, got '%s'", s);
      return fail_at(ctx, node, path, "%s", what);
    }
    *out_d = v;
  }
  (void)exp;
  if (!fsdpc__check_range(v, k->flags & FSDPC_CFG_HAS_MIN, k->min, k->flags & FSDPC_CFG_MIN_EXCL,
                          k->flags & FSDPC_CFG_HAS_MAX, k->max, k->flags & FSDPC_CFG_MAX_EXCL, why,
                          sizeof why)) {
    snprintf(what, sizeof what, "%s is out of range (%s)", s, why);
    return fail_at(ctx, node, path, "%s", what);
  }
  return FSDPC_OK;
}

static fsdpc_status set_scalar(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k, void *field,
                               const yaml_node_t *node) {
  const char *s = (const char *)node->data.scalar.value;
  char what[600];
  switch (k->type) {
  case FSDPC_CFG_BOOL: {
    bool b;
    if (!fsdpc__parse_bool(s, &b)) {
      snprintf(what, sizeof what, "expected true or false, got '%s'", s);
      return fail_at(ctx, node, k->path, "%s", what);
    }
    *(bool *)field = b;
    return FSDPC_OK;
  }
  case FSDPC_CFG_INT:
    return parse_number(ctx, k, k->path, node, true, NULL, (int64_t *)field);
  case FSDPC_CFG_FLOAT:
    return parse_number(ctx, k, k->path, node, false, (double *)field, NULL);
  case FSDPC_CFG_STRING:
  case FSDPC_CFG_PATH: {
    char *copy = strdup(fsdpc__cfg_is_null(node) ? "" : s);
    if (!copy)
      return oom(ctx);
    free(*(char **)field);
    *(char **)field = copy;
    return FSDPC_OK;
  }
  case FSDPC_CFG_ENUM:
    /* Case-insensitive, stored as the canonical spelling's value. */
    for (const fsdpc_cfg_enum_item *e = k->enums; e->name; e++) {
      if (strcasecmp(e->name, s) == 0) {
        *(int *)field = e->value;
        return FSDPC_OK;
      }
    }
    {
      char exp[300];
      expected(k, exp, sizeof exp);
      snprintf(what, sizeof what, "'%s' is not %s", s, exp);
      return fail_at(ctx, node, k->path, "%s", what);
    }
  default:
    return fsdpc__fail(ctx->err, FSDPC_INTERNAL_ERROR, "%s: not a scalar type", k->path);
  }
}

static fsdpc_status set_floats(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k, double *field,
                               yaml_document_t *doc, yaml_node_t *node) {
  if (node->type != YAML_SEQUENCE_NODE)
    return wrong_kind(ctx, k, k->path, node);
  int n = (int)(node->data.sequence.items.top - node->data.sequence.items.start);
  if (n != k->list_len) {
    char what[300];
    snprintf(what, sizeof what, "expected a list of %d numbers, got %d item%s", k->list_len, n,
             n == 1 ? "" : "s");
    return fail_at(ctx, node, k->path, "%s", what);
  }
  double tmp[16];
  for (int i = 0; i < n && i < 16; i++) {
    yaml_node_t *item = yaml_document_get_node(doc, node->data.sequence.items.start[i]);
    char path[256];
    snprintf(path, sizeof path, "%s[%d]", k->path, i);
    FSDPC_TRY(parse_number(ctx, k, path, item, false, &tmp[i], NULL));
  }
  memcpy(field, tmp, (size_t)n * sizeof *field);
  return FSDPC_OK;
}

static void strlist_free(fsdpc_strlist *l) {
  for (int i = 0; i < l->n; i++)
    free(l->items[i]);
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

static fsdpc_status set_strings(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k, fsdpc_strlist *field,
                                yaml_document_t *doc, yaml_node_t *node) {
  fsdpc_strlist l = {NULL, 0};
  if (fsdpc__cfg_is_null(node))
    goto done; /* `paths:` with nothing = empty list */
  if (node->type != YAML_SEQUENCE_NODE)
    return wrong_kind(ctx, k, k->path, node);
  int n = (int)(node->data.sequence.items.top - node->data.sequence.items.start);
  l.items = calloc(n > 0 ? (size_t)n : 1, sizeof *l.items);
  if (!l.items)
    return oom(ctx);
  for (int i = 0; i < n; i++) {
    yaml_node_t *item = yaml_document_get_node(doc, node->data.sequence.items.start[i]);
    if (item->type != YAML_SCALAR_NODE) {
      char path[256], what[200];
      snprintf(path, sizeof path, "%s[%d]", k->path, i);
      snprintf(what, sizeof what, "expected a string, got %s", node_kind(item));
      strlist_free(&l);
      return fail_at(ctx, item, path, "%s", what);
    }
    l.items[i] = strdup((const char *)item->data.scalar.value);
    if (!l.items[i]) {
      strlist_free(&l);
      return oom(ctx);
    }
    l.n = i + 1;
  }
done:
  strlist_free(field);
  *field = l;
  return FSDPC_OK;
}

/* Options stay text until a plugin says their types; each keeps its own
 * location so that plugin-time errors still point into the file. */
static fsdpc_status set_opts(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k, fsdpc_opts *opts,
                             yaml_document_t *doc, yaml_node_t *node) {
  if (fsdpc__cfg_is_null(node))
    return FSDPC_OK;
  if (node->type != YAML_MAPPING_NODE)
    return wrong_kind(ctx, k, k->path, node);
  for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
       p++) {
    yaml_node_t *key = yaml_document_get_node(doc, p->key);
    yaml_node_t *val = yaml_document_get_node(doc, p->value);
    char path[512];
    if (key->type != YAML_SCALAR_NODE)
      return fail_at(ctx, key, k->path, "option names must be plain words, got %s", node_kind(key));
    const char *name = (const char *)key->data.scalar.value;
    snprintf(path, sizeof path, "%s.%s", k->path, name);
    for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < p; q++) {
      yaml_node_t *prev = yaml_document_get_node(doc, q->key);
      if (prev->type == YAML_SCALAR_NODE &&
          strcmp((const char *)prev->data.scalar.value, name) == 0)
        return fail_at(ctx, key, path, "duplicate key%s", "");
    }
    if (val->type != YAML_SCALAR_NODE)
      return fail_at(ctx, val, path, "expected a single value (options are flat), got %s",
                     node_kind(val));
    const char *text = fsdpc__cfg_is_null(val) ? "" : (const char *)val->data.scalar.value;
    if (ctx->fixed) {
      FSDPC_TRY(fsdpc__opts_add(opts, name, text, ctx->fixed, 0, 0, ctx->err));
    } else {
      FSDPC_TRY(fsdpc__opts_add(opts, name, text, ctx->file, (int)val->start_mark.line + 1,
                                (int)val->start_mark.column + 1, ctx->err));
    }
  }
  return FSDPC_OK;
}

static void opts_list_free(fsdpc_opts_list *l) {
  for (int i = 0; i < l->n; i++)
    fsdpc__opts_destroy(l->items[i]);
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

/* A list of option maps: each item keeps its own "KEY[i]" name for its
 * messages and the location of each value. */
static fsdpc_status set_opts_list(fsdpc_cfg_ctx *ctx, const fsdpc_cfg_key *k,
                                  fsdpc_opts_list *field, yaml_document_t *doc, yaml_node_t *node) {
  fsdpc_opts_list l = {NULL, 0};
  fsdpc_status st = FSDPC_OK;
  if (!fsdpc__cfg_is_null(node)) {
    if (node->type != YAML_SEQUENCE_NODE)
      return wrong_kind(ctx, k, k->path, node);
    int n = (int)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (!(l.items = calloc(n > 0 ? (size_t)n : 1, sizeof *l.items)))
      return oom(ctx);
    for (int i = 0; i < n && st == FSDPC_OK; i++) {
      yaml_node_t *item = yaml_document_get_node(doc, node->data.sequence.items.start[i]);
      char path[256];
      snprintf(path, sizeof path, "%s[%d]", k->path, i);
      if (item->type != YAML_MAPPING_NODE) {
        st = fail_at(ctx, item, path, "expected a mapping ({path: ..., weight: ...}), got %s",
                     node_kind(item));
        break;
      }
      if ((st = fsdpc__opts_create(path, &l.items[i], ctx->err)) != FSDPC_OK)
        break;
      l.n = i + 1;
      fsdpc_cfg_key item_key = *k;
      item_key.path = path;
      st = set_opts(ctx, &item_key, l.items[i], doc, item);
    }
  }
  if (st != FSDPC_OK) {
    opts_list_free(&l);
    return st;
  }
  opts_list_free(field);
  *field = l;
  return FSDPC_OK;
}

fsdpc_status fsdpc__cfg_set_node(fsdpc_cfg_ctx *ctx, int ki, yaml_document_t *doc,
                                 yaml_node_t *node) {
  int n;
  const fsdpc_cfg_key *k = &fsdpc__cfg_keys(&n)[ki];
  void *field = fsdpc__cfg_field(ctx->cfg, k);
  fsdpc_status st;
  switch (k->type) {
  case FSDPC_CFG_FLOATS:
    st = set_floats(ctx, k, (double *)field, doc, node);
    break;
  case FSDPC_CFG_STRINGS:
    st = set_strings(ctx, k, (fsdpc_strlist *)field, doc, node);
    break;
  case FSDPC_CFG_OPTS:
    st = set_opts(ctx, k, *(fsdpc_opts **)field, doc, node);
    break;
  case FSDPC_CFG_OPTS_LIST:
    st = set_opts_list(ctx, k, (fsdpc_opts_list *)field, doc, node);
    break;
  default:
    if (node->type != YAML_SCALAR_NODE)
      return wrong_kind(ctx, k, k->path, node);
    st = set_scalar(ctx, k, field, node);
    break;
  }
  if (st != FSDPC_OK)
    return st;
  char where[600];
  fsdpc__cfg_node_where(ctx, node, where, sizeof where);
  return fsdpc__cfg_mark(ctx->cfg, ki, where, ctx->err);
}

bool fsdpc__cfg_text_doc(const char *text, yaml_document_t *doc, char *why, size_t cap) {
  if (strchr("[{'\"", text[0]) && text[0] != '\0') {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
      snprintf(why, cap, "out of memory");
      return false;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    bool ok = yaml_parser_load(&parser, doc);
    if (!ok) {
      snprintf(why, cap, "bad YAML value: %s", parser.problem ? parser.problem : "parse error");
    } else if (!yaml_document_get_root_node(doc)) {
      yaml_document_delete(doc);
      snprintf(why, cap, "bad YAML value");
      ok = false;
    }
    yaml_parser_delete(&parser);
    return ok;
  }
  /* Plain text is taken verbatim (a Windows path or "a: b" stays one
   * string), as one plain scalar so "" and null still mean empty. */
  if (!yaml_document_initialize(doc, NULL, NULL, NULL, 1, 1)) {
    snprintf(why, cap, "out of memory");
    return false;
  }
  if (!yaml_document_add_scalar(doc, NULL, (yaml_char_t *)text, (int)strlen(text),
                                YAML_PLAIN_SCALAR_STYLE)) {
    yaml_document_delete(doc);
    snprintf(why, cap, "out of memory");
    return false;
  }
  return true;
}

fsdpc_status fsdpc__cfg_set_text(fsdpc_cfg_ctx *ctx, int ki, const char *text) {
  yaml_document_t doc;
  char why[300];
  if (!fsdpc__cfg_text_doc(text, &doc, why, sizeof why)) {
    int n;
    return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE, "%s: %s: %s",
                       ctx->fixed ? ctx->fixed : ctx->file, fsdpc__cfg_keys(&n)[ki].path, why);
  }
  fsdpc_status st = fsdpc__cfg_set_node(ctx, ki, &doc, yaml_document_get_root_node(&doc));
  yaml_document_delete(&doc);
  return st;
}

void fsdpc__cfg_free_field(fsdpc_config *c, const fsdpc_cfg_key *k) {
  void *field = fsdpc__cfg_field(c, k);
  switch (k->type) {
  case FSDPC_CFG_STRING:
  case FSDPC_CFG_PATH:
    free(*(char **)field);
    *(char **)field = NULL;
    break;
  case FSDPC_CFG_STRINGS:
    strlist_free((fsdpc_strlist *)field);
    break;
  case FSDPC_CFG_OPTS:
    fsdpc__opts_destroy(*(fsdpc_opts **)field);
    *(fsdpc_opts **)field = NULL;
    break;
  case FSDPC_CFG_OPTS_LIST:
    opts_list_free((fsdpc_opts_list *)field);
    break;
  default:
    break;
  }
}

void fsdpc__cfg_value_text(const fsdpc_config *c, const fsdpc_cfg_key *k, char *buf, size_t cap) {
  const void *field = fsdpc__cfg_field(c, k);
  size_t used = 0;
  buf[0] = '\0';
  switch (k->type) {
  case FSDPC_CFG_BOOL:
    snprintf(buf, cap, "%s", *(const bool *)field ? "true" : "false");
    return;
  case FSDPC_CFG_INT:
    snprintf(buf, cap, "%lld", (long long)*(const int64_t *)field);
    return;
  case FSDPC_CFG_FLOAT:
    fsdpc__format_float(*(const double *)field, buf, cap);
    return;
  case FSDPC_CFG_STRING:
  case FSDPC_CFG_PATH:
    snprintf(buf, cap, "%s", *(char *const *)field);
    return;
  case FSDPC_CFG_ENUM:
    snprintf(buf, cap, "%s", fsdpc__cfg_enum_name(k, *(const int *)field));
    return;
  case FSDPC_CFG_FLOATS:
    used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < k->list_len && used < cap; i++) {
      char num[40];
      fsdpc__format_float(((const double *)field)[i], num, sizeof num);
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", num);
    }
    if (used < cap)
      snprintf(buf + used, cap - used, "]");
    return;
  case FSDPC_CFG_STRINGS: {
    const fsdpc_strlist *l = field;
    used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < l->n && used < cap; i++)
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", l->items[i]);
    if (used < cap)
      snprintf(buf + used, cap - used, "]");
    return;
  }
  case FSDPC_CFG_OPTS: {
    const fsdpc_opts *o = *(fsdpc_opts *const *)field;
    used = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; o && i < fsdpc__opts_count(o) && used < cap; i++) {
      const char *key, *val;
      fsdpc__opts_entry(o, i, &key, &val, NULL);
      used += (size_t)snprintf(buf + used, cap - used, "%s%s: %s", i ? ", " : "", key, val);
    }
    if (used < cap)
      snprintf(buf + used, cap - used, "}");
    return;
  }
  case FSDPC_CFG_OPTS_LIST: {
    const fsdpc_opts_list *l = field;
    used = (size_t)snprintf(buf, cap, "[");
    for (int j = 0; j < l->n && used < cap; j++) {
      used += (size_t)snprintf(buf + used, cap - used, "%s{", j ? ", " : "");
      for (int i = 0; i < fsdpc__opts_count(l->items[j]) && used < cap; i++) {
        const char *key, *val;
        fsdpc__opts_entry(l->items[j], i, &key, &val, NULL);
        used += (size_t)snprintf(buf + used, cap - used, "%s%s: %s", i ? ", " : "", key, val);
      }
      if (used < cap)
        used += (size_t)snprintf(buf + used, cap - used, "}");
    }
    if (used < cap)
      snprintf(buf + used, cap - used, "]");
    return;
  }
  }
}

static bool opts_subset(const fsdpc_opts *a, const fsdpc_opts *b) {
  for (int i = 0; i < fsdpc__opts_count(a); i++) {
    const char *ka, *va;
    fsdpc__opts_entry(a, i, &ka, &va, NULL);
    bool found = false;
    for (int j = 0; j < fsdpc__opts_count(b) && !found; j++) {
      const char *kb, *vb;
      fsdpc__opts_entry(b, j, &kb, &vb, NULL);
      found = strcmp(ka, kb) == 0 && strcmp(va, vb) == 0;
    }
    if (!found)
      return false;
  }
  return true;
}

bool fsdpc__cfg_row_equal(const fsdpc_config *a, const fsdpc_config *b, const fsdpc_cfg_key *k) {
  const void *fa = fsdpc__cfg_field(a, k), *fb = fsdpc__cfg_field(b, k);
  switch (k->type) {
  case FSDPC_CFG_BOOL:
    return *(const bool *)fa == *(const bool *)fb;
  case FSDPC_CFG_INT:
    return *(const int64_t *)fa == *(const int64_t *)fb;
  case FSDPC_CFG_FLOAT:
    return *(const double *)fa == *(const double *)fb;
  case FSDPC_CFG_ENUM:
    return *(const int *)fa == *(const int *)fb;
  case FSDPC_CFG_STRING:
  case FSDPC_CFG_PATH:
    return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
  case FSDPC_CFG_FLOATS:
    for (int i = 0; i < k->list_len; i++)
      if (((const double *)fa)[i] != ((const double *)fb)[i])
        return false;
    return true;
  case FSDPC_CFG_STRINGS: {
    const fsdpc_strlist *la = fa, *lb = fb;
    if (la->n != lb->n)
      return false;
    for (int i = 0; i < la->n; i++)
      if (strcmp(la->items[i], lb->items[i]) != 0)
        return false;
    return true;
  }
  case FSDPC_CFG_OPTS: {
    const fsdpc_opts *oa = *(fsdpc_opts *const *)fa, *ob = *(fsdpc_opts *const *)fb;
    return fsdpc__opts_count(oa) == fsdpc__opts_count(ob) && opts_subset(oa, ob);
  }
  case FSDPC_CFG_OPTS_LIST: {
    const fsdpc_opts_list *la = fa, *lb = fb;
    if (la->n != lb->n)
      return false;
    for (int i = 0; i < la->n; i++)
      if (fsdpc__opts_count(la->items[i]) != fsdpc__opts_count(lb->items[i]) ||
          !opts_subset(la->items[i], lb->items[i]))
        return false;
    return true;
  }
  }
  return false;
}
