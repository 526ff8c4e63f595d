/* The resolved config as YAML, through libyaml's emitter so that quoting is
 * always right. Sections nest by the dotted paths of the schema rows, which
 * is why a section's rows must stay together in schema.c. */
#include <string.h>

#include "config/meta.h"
#include "config/scalar.h"

typedef struct emit {
  yaml_emitter_t em;
  bool ok;
} emit;

static void ev(emit *e, yaml_event_t *event, int made) {
  if (!e->ok) {
    if (made)
      yaml_event_delete(event);
    return;
  }
  if (!made || !yaml_emitter_emit(&e->em, event))
    e->ok = false;
}

static void scalar(emit *e, const char *text, yaml_scalar_style_t style) {
  yaml_event_t event;
  int made = yaml_scalar_event_initialize(&event, NULL, NULL, (yaml_char_t *)text,
                                          (int)strlen(text), 1, 1, style);
  ev(e, &event, made);
}

/* Strings that other YAML readers would take for a number, a bool or null
 * are quoted, so the dump means the same thing everywhere. */
static void string_scalar(emit *e, const char *s) {
  bool b;
  double d;
  bool looks_typed = s[0] == '\0' || fsdpc__parse_bool(s, &b) || fsdpc__parse_float(s, &d) ||
                     strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
  scalar(e, s, looks_typed ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
}

static void mapping_start(emit *e, yaml_mapping_style_t style) {
  yaml_event_t event;
  ev(e, &event, yaml_mapping_start_event_initialize(&event, NULL, NULL, 1, style));
}

static void mapping_end(emit *e) {
  yaml_event_t event;
  ev(e, &event, yaml_mapping_end_event_initialize(&event));
}

static void seq_start(emit *e) {
  yaml_event_t event;
  ev(e, &event,
     yaml_sequence_start_event_initialize(&event, NULL, NULL, 1, YAML_FLOW_SEQUENCE_STYLE));
}

static void seq_end(emit *e) {
  yaml_event_t event;
  ev(e, &event, yaml_sequence_end_event_initialize(&event));
}

static void value(emit *e, const fsdpc_config *c, const fsdpc_cfg_key *k) {
  const void *field = fsdpc__cfg_field(c, k);
  char buf[64];
  switch (k->type) {
  case FSDPC_CFG_STRING:
  case FSDPC_CFG_PATH:
    string_scalar(e, *(char *const *)field);
    return;
  case FSDPC_CFG_FLOATS:
    seq_start(e);
    for (int i = 0; i < k->list_len; i++) {
      fsdpc__format_float(((const double *)field)[i], buf, sizeof buf);
      scalar(e, buf, YAML_PLAIN_SCALAR_STYLE);
    }
    seq_end(e);
    return;
  case FSDPC_CFG_STRINGS: {
    const fsdpc_strlist *l = field;
    seq_start(e);
    for (int i = 0; i < l->n; i++)
      string_scalar(e, l->items[i]);
    seq_end(e);
    return;
  }
  case FSDPC_CFG_OPTS_LIST: {
    const fsdpc_opts_list *l = field;
    seq_start(e);
    for (int j = 0; j < l->n; j++) {
      int n = fsdpc__opts_count(l->items[j]);
      mapping_start(e, YAML_FLOW_MAPPING_STYLE);
      for (int i = 0; i < n; i++) {
        const char *key, *val;
        int user;
        fsdpc__opts_entry(l->items[j], i, &key, &val, &user);
        if (!user)
          continue;
        scalar(e, key, YAML_ANY_SCALAR_STYLE);
        scalar(e, val, val[0] ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
      }
      mapping_end(e);
    }
    seq_end(e);
    return;
  }
  case FSDPC_CFG_OPTS: {
    const fsdpc_opts *o = *(fsdpc_opts *const *)field;
    int n = fsdpc__opts_count(o);
    /* Only the user's values: defaults depend on which plugin is chosen. */
    mapping_start(e, n ? YAML_BLOCK_MAPPING_STYLE : YAML_FLOW_MAPPING_STYLE);
    for (int i = 0; i < n; i++) {
      const char *key, *val;
      int user;
      fsdpc__opts_entry(o, i, &key, &val, &user);
      if (!user)
        continue;
      scalar(e, key, YAML_ANY_SCALAR_STYLE);
      scalar(e, val, val[0] ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    }
    mapping_end(e);
    return;
  }
  default: {
    char text[512];
    fsdpc__cfg_value_text(c, k, text, sizeof text);
    scalar(e, text, YAML_PLAIN_SCALAR_STYLE);
    return;
  }
  }
}

/* Number of leading path segments a and b share. */
static int shared_segments(const char *a, const char *b) {
  int shared = 0;
  for (;;) {
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");
    if (la != lb || strncmp(a, b, la) != 0 || !a[la] || !b[lb])
      return shared;
    shared++;
    a += la + 1;
    b += lb + 1;
  }
}

static int count_segments(const char *p) {
  int n = 1;
  for (; *p; p++)
    n += *p == '.';
  return n;
}

static int write_handler(void *data, unsigned char *buffer, size_t size) {
  return fwrite(buffer, 1, size, (FILE *)data) == size;
}

fsdpc_status fsdpc__config_dump(const fsdpc_config *c, FILE *f) {
  emit e = {.ok = true};
  if (!yaml_emitter_initialize(&e.em))
    return FSDPC_SYSTEM_ERROR;
  yaml_emitter_set_output(&e.em, write_handler, f);
  yaml_emitter_set_unicode(&e.em, 1);
  yaml_emitter_set_width(&e.em, -1);
  yaml_emitter_set_indent(&e.em, 2);
  fprintf(f, "# fsdpc resolved config (from %s)\n", c->source);
  yaml_event_t event;
  ev(&e, &event, yaml_stream_start_event_initialize(&event, YAML_UTF8_ENCODING));
  ev(&e, &event, yaml_document_start_event_initialize(&event, NULL, NULL, NULL, 1));
  mapping_start(&e, YAML_BLOCK_MAPPING_STYLE);

  int n, open = 0; /* sections open below the top-level mapping */
  const fsdpc_cfg_key *keys = fsdpc__cfg_keys(&n);
  const char *prev = "";
  for (int i = 0; i < n; i++) {
    const char *path = keys[i].path;
    int keep = i ? shared_segments(prev, path) : 0;
    for (; open > keep; open--)
      mapping_end(&e);
    /* Open the sections of path below the shared ones, then the leaf key. */
    int segs = count_segments(path);
    const char *p = path;
    for (int s = 0; s < segs; s++) {
      size_t len = strcspn(p, ".");
      if (s >= open || s == segs - 1) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        scalar(&e, name, YAML_PLAIN_SCALAR_STYLE);
        if (s < segs - 1) {
          mapping_start(&e, YAML_BLOCK_MAPPING_STYLE);
          open++;
        }
      }
      p += len + (p[len] ? 1 : 0);
    }
    value(&e, c, &keys[i]);
    prev = path;
  }
  for (; open > 0; open--)
    mapping_end(&e);
  mapping_end(&e);
  ev(&e, &event, yaml_document_end_event_initialize(&event, 1));
  ev(&e, &event, yaml_stream_end_event_initialize(&event));
  if (e.ok)
    yaml_emitter_flush(&e.em);
  yaml_emitter_delete(&e.em);
  fflush(f);
  return e.ok && !ferror(f) ? FSDPC_OK : FSDPC_SYSTEM_ERROR;
}
