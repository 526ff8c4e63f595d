/* Loading: defaults, then the YAML file (libyaml document API, so every node
 * keeps its line and column), then `section.key=value` overrides, then
 * fsdpc__cfg_finish (model.config, derived values, checks). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/meta.h"
#include "util/fs.h"
#include "config/scalar.h"
#include "config/suggest.h"

/* ---- meta: where values came from ---- */

fsdpc_status fsdpc__cfg_mark(fsdpc_config *c, int ki, const char *where, fsdpc_err *err) {
  fsdpc_key_src *src = &c->meta->keys[ki];
  char *copy = strdup(where);
  if (!copy)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  free(src->where);
  src->where = copy;
  src->set = true;
  return FSDPC_OK;
}

fsdpc_status fsdpc__cfg_add_section(fsdpc_config *c, const char *path, const char *where,
                                    fsdpc_err *err) {
  fsdpc_config_meta *m = c->meta;
  if (m->n_sections == m->cap_sections) {
    int cap = m->cap_sections ? 2 * m->cap_sections : 16;
    fsdpc_section_src *s = realloc(m->sections, (size_t)cap * sizeof *s);
    if (!s)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    m->sections = s;
    m->cap_sections = cap;
  }
  fsdpc_section_src *s = &m->sections[m->n_sections];
  s->path = strdup(path);
  s->where = strdup(where);
  m->n_sections++;
  if (!s->path || !s->where)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  return FSDPC_OK;
}

void fsdpc__config_destroy(fsdpc_config *c) {
  if (!c)
    return;
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++)
    fsdpc__cfg_free_field(c, &keys[i]);
  if (c->meta) {
    for (int i = 0; i < c->meta->n_keys; i++)
      free(c->meta->keys[i].where);
    for (int i = 0; i < c->meta->n_sections; i++) {
      free(c->meta->sections[i].path);
      free(c->meta->sections[i].where);
    }
    free(c->meta->sections);
    free(c->meta->keys);
    free(c->meta);
  }
  free(c->source);
  free(c);
}

fsdpc_status fsdpc__cfg_new_defaults(const char *source, fsdpc_config **out, fsdpc_err *err) {
  *out = NULL;
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  fsdpc_config *c = calloc(1, sizeof *c);
  if (!c)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  c->meta = calloc(1, sizeof *c->meta);
  c->source = strdup(source);
  if (!c->meta || !c->source)
    goto fail_oom;
  c->meta->keys = calloc((size_t)n, sizeof *c->meta->keys);
  if (!c->meta->keys)
    goto fail_oom;
  c->meta->n_keys = n;
  fsdpc_status st = FSDPC_OK;
  for (int i = 0; i < n && st == FSDPC_OK; i++) {
    const fsdpc_cfg_key *k = &keys[i];
    void *field = fsdpc__cfg_field(c, k);
    if (k->type == FSDPC_CFG_STRING || k->type == FSDPC_CFG_PATH) {
      /* String defaults are the text itself, never YAML. */
      *(char **)field = strdup(k->def && !(k->flags & FSDPC_CFG_DERIVED) ? k->def : "");
      if (!*(char **)field)
        goto fail_oom;
    } else if (k->type == FSDPC_CFG_OPTS) {
      st = fsdpc__opts_create(k->path, (fsdpc_opts **)field, err);
    } else if (k->def && !(k->flags & FSDPC_CFG_DERIVED)) {
      fsdpc_cfg_ctx ctx = {c, "<defaults>", "<defaults>", err};
      st = fsdpc__cfg_set_text(&ctx, i, k->def);
      c->meta->keys[i].set = false;
      if (st != FSDPC_OK) { /* a default that does not load is a bug in schema.c */
        fsdpc__err_prefix(err, "schema bug");
        if (err)
          err->status = FSDPC_INTERNAL_ERROR;
        st = FSDPC_INTERNAL_ERROR;
      }
    }
  }
  if (st != FSDPC_OK) {
    fsdpc__config_destroy(c);
    return st;
  }
  *out = c;
  return FSDPC_OK;
fail_oom:
  fsdpc__config_destroy(c);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
}

/* ---- walking the file ---- */

static fsdpc_status unknown_key(const char *where, const char *section, const char *path,
                                const char *word, fsdpc_err *err) {
  const char *names[128];
  char buf[128][64];
  int n = fsdpc__cfg_children(section, names, buf, 128);
  const char *hint = fsdpc__did_you_mean(word, names, n);
  if (hint)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: unknown key '%s' (did you mean '%s'?)", where,
                       path, hint);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: unknown key '%s'", where, path);
}

/* Applies a mapping found at section `prefix` ("" = top level). */
static fsdpc_status walk_mapping(fsdpc_cfg_ctx *ctx, yaml_document_t *doc, yaml_node_t *map,
                                 const char *prefix) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *key = yaml_document_get_node(doc, p->key);
    yaml_node_t *val = yaml_document_get_node(doc, p->value);
    char where[600], path[512];
    fsdpc__cfg_node_where(ctx, key, where, sizeof where);
    if (key->type != YAML_SCALAR_NODE)
      return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE, "%s: keys must be plain words%s%s", where,
                         prefix[0] ? " in " : "", prefix);
    const char *name = (const char *)key->data.scalar.value;
    snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", name);
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
      yaml_node_t *prev = yaml_document_get_node(doc, q->key);
      if (prev->type == YAML_SCALAR_NODE &&
          strcmp((const char *)prev->data.scalar.value, name) == 0) {
        if (ctx->fixed)
          return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE, "%s: duplicate key '%s'", where, path);
        return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE,
                           "%s: duplicate key '%s' (first given at line %d)", where, path,
                           (int)prev->start_mark.line + 1);
      }
    }
    if (strchr(name, '.'))
      return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE,
                         "%s: key '%s' contains '.': nest it under its section instead", where,
                         path);
    int ki;
    if (name[0] && fsdpc__cfg_find(path, &ki)) {
      FSDPC_TRY(fsdpc__cfg_set_node(ctx, ki, doc, val));
    } else if (name[0] && fsdpc__cfg_is_section(path)) {
      FSDPC_TRY(fsdpc__cfg_add_section(ctx->cfg, path, where, ctx->err));
      if (fsdpc__cfg_is_null(val))
        continue; /* `fsdp:` with nothing under it */
      if (val->type != YAML_MAPPING_NODE) {
        fsdpc__cfg_node_where(ctx, val, where, sizeof where);
        return fsdpc__fail(ctx->err, FSDPC_INVALID_USAGE,
                           "%s: %s: expected a mapping (a section of keys), got %s", where, path,
                           val->type == YAML_SEQUENCE_NODE ? "a list" : "a scalar");
      }
      FSDPC_TRY(walk_mapping(ctx, doc, val, path));
    } else {
      return unknown_key(where, prefix, path, name, ctx->err);
    }
  }
  return FSDPC_OK;
}

static fsdpc_status syntax_error(yaml_parser_t *parser, const char *name, fsdpc_err *err) {
  if (parser->error == YAML_MEMORY_ERROR)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory while parsing", name);
  yaml_mark_t m = parser->problem_mark;
  const char *problem = parser->problem ? parser->problem : "malformed YAML";
  if (parser->context)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d:%d: YAML syntax error: %s %s", name,
                       (int)m.line + 1, (int)m.column + 1, problem, parser->context);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d:%d: YAML syntax error: %s", name,
                     (int)m.line + 1, (int)m.column + 1, problem);
}

/* Parses one YAML document from text into c. */
static fsdpc_status apply_yaml(fsdpc_config *c, const char *text, size_t len, const char *name,
                               fsdpc_err *err) {
  yaml_parser_t parser;
  yaml_document_t doc, extra;
  if (!yaml_parser_initialize(&parser))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot start the YAML parser", name);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  fsdpc_status st = FSDPC_OK;
  if (!yaml_parser_load(&parser, &doc)) {
    st = syntax_error(&parser, name, err);
    goto out_parser;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root || fsdpc__cfg_is_null(root)) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: empty config file (expected sections such as model:, train:)", name);
    goto out_doc;
  }
  if (root->type != YAML_MAPPING_NODE) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s:%d:%d: expected a mapping of sections (model:, train:, ...) at the top "
                     "level, got %s",
                     name, (int)root->start_mark.line + 1, (int)root->start_mark.column + 1,
                     root->type == YAML_SEQUENCE_NODE ? "a list" : "a scalar");
    goto out_doc;
  }
  /* A second document in the file is almost always a mistake. */
  if (!yaml_parser_load(&parser, &extra)) {
    st = syntax_error(&parser, name, err);
    goto out_doc;
  }
  yaml_node_t *extra_root = yaml_document_get_root_node(&extra);
  if (extra_root) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s:%d:%d: a second YAML document; a config is one document", name,
                     (int)extra_root->start_mark.line + 1, (int)extra_root->start_mark.column + 1);
  }
  yaml_document_delete(&extra);
  if (st == FSDPC_OK) {
    fsdpc_cfg_ctx ctx = {c, name, NULL, err};
    st = walk_mapping(&ctx, &doc, root, "");
  }
out_doc:
  yaml_document_delete(&doc);
out_parser:
  yaml_parser_delete(&parser);
  return st;
}

/* ---- overrides ---- */

static fsdpc_status apply_override(fsdpc_config *c, const char *text, fsdpc_err *err) {
  char where[700];
  snprintf(where, sizeof where, "override '%s'", text);
  const char *eq = strchr(text, '=');
  if (!eq)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: expected section.key=value (e.g. optim.lr=3e-4)", where);
  size_t klen = (size_t)(eq - text);
  if (klen == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: missing key before '='", where);
  if (klen >= 256)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: key is too long", where);
  char key[256];
  memcpy(key, text, klen);
  key[klen] = '\0';
  const char *value = eq + 1;
  if (!value[0])
    /* The hint survives a shell: KEY='' reaches fsdpc as KEY= again. */
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: missing value after '=' (an empty string: write %s=\"''\" in a shell)",
                       where, key);
  fsdpc_cfg_ctx ctx = {c, where, where, err};
  int ki;
  if (fsdpc__cfg_find(key, &ki))
    return fsdpc__cfg_set_text(&ctx, ki, value);

  /* section.options.KEY goes into that plugin's options. */
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++) {
    size_t plen = strlen(keys[i].path);
    if (keys[i].type == FSDPC_CFG_OPTS && strncmp(key, keys[i].path, plen) == 0 &&
        key[plen] == '.') {
      fsdpc_opts *opts = *(fsdpc_opts **)fsdpc__cfg_field(c, &keys[i]);
      yaml_document_t doc;
      char why[300];
      if (!fsdpc__cfg_text_doc(value, &doc, why, sizeof why))
        return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s: %s", where, key, why);
      yaml_node_t *root = yaml_document_get_root_node(&doc);
      fsdpc_status st;
      if (root->type != YAML_SCALAR_NODE)
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s: expected a single value (options are flat), got a %s", where, key,
                         root->type == YAML_MAPPING_NODE ? "mapping" : "list");
      else
        st = fsdpc__opts_add(opts, key + plen + 1,
                             fsdpc__cfg_is_null(root) ? "" : (const char *)root->data.scalar.value,
                             where, 0, 0, err);
      yaml_document_delete(&doc);
      return st;
    }
  }

  /* A whole section: optim={lr: 1e-3, eps: 1e-6}. */
  if (fsdpc__cfg_is_section(key)) {
    yaml_document_t doc;
    char why[300];
    if (!fsdpc__cfg_text_doc(value, &doc, why, sizeof why))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s: %s", where, key, why);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    fsdpc_status st;
    if (root->type != YAML_MAPPING_NODE)
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: %s is a section: give a key below it (%s.KEY=value) or a mapping "
                       "({key: value})",
                       where, key, key);
    else
      st = walk_mapping(&ctx, &doc, root, key);
    yaml_document_delete(&doc);
    return st;
  }

  /* Unknown: suggest within the deepest section that does exist. */
  char section[256] = "";
  const char *word = key;
  for (const char *dot = strchr(key, '.'); dot; dot = strchr(dot + 1, '.')) {
    char head[256];
    memcpy(head, key, (size_t)(dot - key));
    head[dot - key] = '\0';
    if (!fsdpc__cfg_is_section(head))
      break;
    memcpy(section, head, sizeof head);
    word = dot + 1;
  }
  char word_buf[256];
  snprintf(word_buf, sizeof word_buf, "%.*s", (int)strcspn(word, "."), word);
  return unknown_key(where, section, key, word_buf, err);
}

/* ---- entry points ---- */

static fsdpc_status load_text(const char *text, size_t len, const char *name,
                              const char *const *overrides, int n_overrides, int checkpoint,
                              fsdpc_config **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_config *c;
  FSDPC_TRY(fsdpc__cfg_new_defaults(name, &c, err));
  c->meta->from_checkpoint = checkpoint;
  fsdpc_status st = apply_yaml(c, text, len, name, err);
  for (int i = 0; i < n_overrides && st == FSDPC_OK; i++)
    st = apply_override(c, overrides[i], err);
  if (st == FSDPC_OK)
    st = fsdpc__cfg_finish(c, err);
  if (st != FSDPC_OK) {
    fsdpc__config_destroy(c);
    if (err)
      fsdpc__one_line(err->msg, sizeof err->msg);
    return st;
  }
  *out = c;
  return FSDPC_OK;
}

fsdpc_status fsdpc__config_from_string(const char *yaml_text, const char *name,
                                       const char *const *overrides, int n_overrides,
                                       fsdpc_config **out, fsdpc_err *err) {
  return load_text(yaml_text, strlen(yaml_text), name ? name : "<string>", overrides, n_overrides,
                   0, out, err);
}

static fsdpc_status load_file(const char *path, const char *const *overrides, int n_overrides,
                              int checkpoint, fsdpc_config **out, fsdpc_err *err) {
  *out = NULL;
  /* A config is small text: a FIFO, /dev/zero or a huge file is refused
   * before it is read. */
  enum { CONFIG_MAX_BYTES = 16 << 20 };
  char why[128];
  int fd = fsdpc__open_regular(path, CONFIG_MAX_BYTES);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    if (fd >= 0)
      close(fd);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot open config: %s", path,
                       fsdpc__open_regular_why(fd, CONFIG_MAX_BYTES, why, sizeof why));
  }
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  while (text) {
    len += fread(text + len, 1, cap - len, f);
    if (len < cap)
      break;
    char *bigger = realloc(text, cap * 2);
    if (!bigger) {
      free(text);
      text = NULL;
      break;
    }
    text = bigger;
    cap *= 2;
  }
  bool read_error = ferror(f);
  fclose(f);
  if (!text)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory reading it", path);
  if (read_error) {
    free(text);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: read error", path);
  }
  fsdpc_status st = load_text(text, len, path, overrides, n_overrides, checkpoint, out, err);
  free(text);
  return st;
}

fsdpc_status fsdpc__config_load(const char *path, const char *const *overrides, int n_overrides,
                                fsdpc_config **out, fsdpc_err *err) {
  return load_file(path, overrides, n_overrides, 0, out, err);
}

fsdpc_status fsdpc__config_load_checkpoint(const char *path, const char *const *overrides,
                                           int n_overrides, fsdpc_config **out, fsdpc_err *err) {
  static const char *const clear[] = {"model.from=''", "model.adapter=''"};
  enum { N_CLEAR = sizeof clear / sizeof clear[0] };
  const char **ov = calloc((size_t)n_overrides + N_CLEAR, sizeof *ov);
  if (!ov)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int i = 0; i < N_CLEAR; i++)
    ov[i] = clear[i];
  for (int i = 0; i < n_overrides; i++) /* after: the caller's overrides win */
    ov[N_CLEAR + i] = overrides[i];
  fsdpc_status st = load_file(path, ov, n_overrides + N_CLEAR, 1, out, err);
  free(ov);
  return st;
}

void fsdpc__config_where(const fsdpc_config *c, const char *path, char *buf, size_t cap) {
  int ki;
  if (fsdpc__cfg_find(path, &ki) && c->meta->keys[ki].set)
    snprintf(buf, cap, "%s", c->meta->keys[ki].where);
  else
    snprintf(buf, cap, "%s", c->source);
}

bool fsdpc__config_equal(const fsdpc_config *a, const fsdpc_config *b, const char **first_diff) {
  int n;
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++) {
    if (!fsdpc__cfg_row_equal(a, b, &keys[i])) {
      if (first_diff)
        *first_diff = keys[i].path;
      return false;
    }
  }
  return true;
}
