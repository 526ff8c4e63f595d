/* The bench file:
 *
 *   title: sharding strategies, tiny model       (optional)
 *   base: ../tiny-cpu.yaml                       (relative to this file)
 *   set: {train.micro_batch_size: 8}             (every variant)
 *   matrix:                                      (cartesian product, first axis slowest)
 *     fsdp.sharding_strategy: [FULL_SHARD, NO_SHARD,
 *                              {name: HYBRID/2, fsdp.sharding_strategy: HYBRID_SHARD,
 *                               fsdp.hybrid_shard_size: 2}]
 *   nproc_per_node: 4   warmup_steps: 2   steps: 5   repeats: 2
 *   timeout_s: 600   peak_tflops: 0   out: out/bench/tiny   baseline: ""
 *
 * An axis value is a scalar (the key's value), a list of scalars (written
 * as a YAML flow list), or a map of several keys set together (with an
 * optional `name` for the row). */
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "bench/bench.h"

enum { MAX_AXES = 8, MAX_VARIANTS = 256 };

typedef struct axis_value {
  char label[96];
  char *kv[16];
  int n;
} axis_value;

typedef struct axis {
  char key[128];
  axis_value *vals;
  int n;
} axis;

static fsdpc_status bad(fsdpc_err *err, const char *path, const yaml_node_t *n, const char *what) {
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%zu:%zu: %s", path,
                     n ? n->start_mark.line + 1 : 0, n ? n->start_mark.column + 1 : 0, what);
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* "key=value" for a scalar or a flow list of scalars. */
static fsdpc_status kv_text(yaml_document_t *d, const char *path, const char *key, yaml_node_t *v,
                            char **out, fsdpc_err *err) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "%s=", key);
  if (v->type == YAML_SCALAR_NODE) {
    snprintf(buf + n, sizeof buf - (size_t)n, "%s", *scalar(v) ? scalar(v) : "''"); /* "" */
  } else if (v->type == YAML_SEQUENCE_NODE) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, "[");
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
      const char *s = scalar(yaml_document_get_node(d, *it));
      if (!s)
        return bad(err, path, v, "a list value may hold only scalars");
      n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%s",
                    it == v->data.sequence.items.start ? "" : ", ", s);
    }
    snprintf(buf + n, sizeof buf - (size_t)n, "]");
  } else {
    return bad(err, path, v, "expected a value or a list of values");
  }
  if (!(*out = strdup(buf)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  return FSDPC_OK;
}

static const char *short_key(const char *key) {
  const char *dot = strrchr(key, '.');
  return dot ? dot + 1 : key;
}

static fsdpc_status read_axis(yaml_document_t *d, const char *path, const char *key,
                              yaml_node_t *list, axis *a, fsdpc_err *err) {
  snprintf(a->key, sizeof a->key, "%s", key);
  if (list->type != YAML_SEQUENCE_NODE)
    return bad(err, path, list, "a matrix axis needs a list of values, e.g. [A, B]");
  int n = (int)(list->data.sequence.items.top - list->data.sequence.items.start);
  if (n < 1)
    return bad(err, path, list, "a matrix axis needs at least one value");
  a->vals = calloc((size_t)n, sizeof *a->vals);
  if (!a->vals)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int i = 0; i < n; i++) {
    yaml_node_t *v = yaml_document_get_node(d, list->data.sequence.items.start[i]);
    axis_value *av = &a->vals[a->n++];
    if (v->type == YAML_MAPPING_NODE) {
      char label[96] = "";
      for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(d, p->key));
        yaml_node_t *vv = yaml_document_get_node(d, p->value);
        if (!k)
          return bad(err, path, v, "keys must be config key paths");
        if (strcmp(k, "name") == 0) {
          if (!scalar(vv))
            return bad(err, path, vv, "name must be a string");
          snprintf(av->label, sizeof av->label, "%s", scalar(vv));
          continue;
        }
        if (av->n == 16)
          return bad(err, path, v, "at most 16 keys in one axis value");
        FSDPC_TRY(kv_text(d, path, k, vv, &av->kv[av->n], err));
        size_t l = strlen(label);
        snprintf(label + l, sizeof label - l, "%s%s", l ? "," : "", strchr(av->kv[av->n], '=') + 1);
        av->n++;
      }
      if (!av->n)
        return bad(err, path, v, "an axis value map sets no key");
      if (!av->label[0])
        snprintf(av->label, sizeof av->label, "%s", label);
    } else {
      FSDPC_TRY(kv_text(d, path, key, v, &av->kv[0], err));
      av->n = 1;
      snprintf(av->label, sizeof av->label, "%s", strchr(av->kv[0], '=') + 1);
    }
  }
  return FSDPC_OK;
}

static fsdpc_status read_int(const char *path, yaml_node_t *v, int lo, int hi, int *out,
                             fsdpc_err *err) {
  const char *s = scalar(v);
  char *end;
  errno = 0;
  long n = s ? strtol(s, &end, 10) : 0;
  if (!s || errno || *end || n < lo || n > hi) {
    char why[96];
    snprintf(why, sizeof why, "expected an integer in [%d, %d]", lo, hi);
    return bad(err, path, v, why);
  }
  *out = (int)n;
  return FSDPC_OK;
}

static fsdpc_status dup_str(char **dst, const char *s, fsdpc_err *err) {
  free(*dst);
  if (!(*dst = strdup(s ? s : "")))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  return FSDPC_OK;
}

fsdpc_status fsdpc__bench_spec_add_set(fsdpc_bench_spec *s, const char *kv, fsdpc_err *err) {
  if (!strchr(kv, '='))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "override '%s': expected section.key=value", kv);
  char **n = realloc(s->set, (size_t)(s->n_set + 1) * sizeof *n);
  if (!n)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  s->set = n;
  if (!(s->set[s->n_set] = strdup(kv)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  s->n_set++;
  return FSDPC_OK;
}

/* The cartesian product of the axes, first axis slowest. */
static fsdpc_status expand(fsdpc_bench_spec *s, const axis *ax, int n_ax, fsdpc_err *err) {
  int total = 1;
  for (int i = 0; i < n_ax; i++) {
    total *= ax[i].n;
    if (total > MAX_VARIANTS)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: the matrix has more than %d variants",
                         s->path, MAX_VARIANTS);
  }
  s->variants = calloc((size_t)total, sizeof *s->variants);
  if (!s->variants)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int v = 0; v < total; v++) {
    fsdpc_bench_variant *var = &s->variants[s->n_variants++];
    int rest = v, n_kv = 0, idx[MAX_AXES];
    for (int i = n_ax - 1; i >= 0; i--) {
      idx[i] = rest % ax[i].n;
      rest /= ax[i].n;
      n_kv += ax[i].vals[idx[i]].n;
    }
    var->overrides = calloc((size_t)n_kv + 1, sizeof(char *));
    if (!var->overrides)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    size_t len = 0;
    for (int i = 0; i < n_ax; i++) {
      const axis_value *av = &ax[i].vals[idx[i]];
      for (int k = 0; k < av->n; k++)
        if (!(var->overrides[var->n_overrides++] = strdup(av->kv[k])))
          return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      /* One axis: the value names the row; several: short key=value pairs. */
      if (n_ax == 1)
        len += (size_t)snprintf(var->name + len, sizeof var->name - len, "%s", av->label);
      else
        len += (size_t)snprintf(var->name + len, sizeof var->name - len, "%s%s=%s", i ? " " : "",
                                short_key(ax[i].key), av->label);
      if (len >= sizeof var->name)
        len = sizeof var->name - 1;
    }
  }
  return FSDPC_OK;
}

static fsdpc_status parse(fsdpc_bench_spec *s, yaml_document_t *d, axis *ax, int *n_ax,
                          fsdpc_err *err) {
  yaml_node_t *root = yaml_document_get_root_node(d);
  if (!root || root->type != YAML_MAPPING_NODE)
    return bad(err, s->path, root, "a bench file is a mapping (base, set, matrix, ...)");
  const char *path = s->path;
  int have_base = 0;
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
       p++) {
    yaml_node_t *kn = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
    const char *k = scalar(kn);
    if (!k)
      return bad(err, path, kn, "keys must be strings");
    if (strcmp(k, "base") == 0 || strcmp(k, "title") == 0 || strcmp(k, "out") == 0 ||
        strcmp(k, "baseline") == 0) {
      if (!scalar(v))
        return bad(err, path, v, "expected a string");
      char **dst = strcmp(k, "base") == 0       ? &s->base
                   : strcmp(k, "baseline") == 0 ? &s->baseline
                   : strcmp(k, "title") == 0    ? &s->title
                                                : &s->out_dir;
      FSDPC_TRY(dup_str(dst, scalar(v), err));
      have_base |= dst == &s->base;
    } else if (strcmp(k, "set") == 0) {
      if (v->type != YAML_MAPPING_NODE)
        return bad(err, path, v, "set: expected key: value pairs");
      for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
        const char *sk = scalar(yaml_document_get_node(d, q->key));
        char *kv = NULL;
        if (!sk)
          return bad(err, path, v, "set: keys must be config key paths");
        FSDPC_TRY(kv_text(d, path, sk, yaml_document_get_node(d, q->value), &kv, err));
        fsdpc_status st = fsdpc__bench_spec_add_set(s, kv, err);
        free(kv);
        FSDPC_TRY(st);
      }
    } else if (strcmp(k, "matrix") == 0) {
      if (v->type != YAML_MAPPING_NODE)
        return bad(err, path, v, "matrix: expected config.key: [values] pairs");
      for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
        const char *ak = scalar(yaml_document_get_node(d, q->key));
        if (!ak)
          return bad(err, path, v, "matrix: keys must be config key paths");
        if (*n_ax == MAX_AXES)
          return bad(err, path, v, "matrix: at most 8 axes");
        FSDPC_TRY(read_axis(d, path, ak, yaml_document_get_node(d, q->value), &ax[*n_ax], err));
        (*n_ax)++;
      }
    } else if (strcmp(k, "nproc_per_node") == 0) {
      FSDPC_TRY(read_int(path, v, 1, 1024, &s->nproc_per_node, err));
    } else if (strcmp(k, "warmup_steps") == 0) {
      FSDPC_TRY(read_int(path, v, 0, 100000, &s->warmup_steps, err));
    } else if (strcmp(k, "steps") == 0) {
      FSDPC_TRY(read_int(path, v, 1, 100000, &s->steps, err));
    } else if (strcmp(k, "repeats") == 0) {
      FSDPC_TRY(read_int(path, v, 1, 1000, &s->repeats, err));
    } else if (strcmp(k, "timeout_s") == 0) {
      FSDPC_TRY(read_int(path, v, 1, 86400 * 7, &s->timeout_s, err));
    } else if (strcmp(k, "peak_tflops") == 0) {
      char *end;
      const char *t = scalar(v);
      s->peak_tflops = t ? strtod(t, &end) : -1;
      if (!t || *end || s->peak_tflops < 0)
        return bad(err, path, v, "peak_tflops: expected a number >= 0 (TFLOP/s per device)");
    } else {
      char why[200];
      snprintf(why, sizeof why,
               "unknown key '%s' (bench keys: title, base, set, matrix, nproc_per_node, "
               "warmup_steps, steps, repeats, timeout_s, peak_tflops, out, baseline)",
               k);
      return bad(err, path, kn, why);
    }
  }
  if (!have_base || !s->base[0])
    return bad(err, path, root, "missing 'base': the config every variant starts from");
  return FSDPC_OK;
}

fsdpc_status fsdpc__bench_spec_load(const char *path, fsdpc_bench_spec **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_bench_spec *s = calloc(1, sizeof *s);
  if (!s)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  s->nproc_per_node = 1;
  s->warmup_steps = 2;
  s->steps = 5;
  s->repeats = 1;
  s->timeout_s = 600;
  fsdpc_status st = FSDPC_OK;
  axis ax[MAX_AXES];
  int n_ax = 0;
  memset(ax, 0, sizeof ax);
  yaml_parser_t parser;
  yaml_document_t doc;
  int have_doc = 0;
  FILE *f = fopen(path, "rb");
  if ((st = dup_str(&s->path, path, err)) != FSDPC_OK || (st = dup_str(&s->title, "", err)) ||
      (st = dup_str(&s->out_dir, "", err)) || (st = dup_str(&s->baseline, "", err)))
    goto done;
  if (!f) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "cannot open bench file %s: %s", path,
                     strerror(errno));
    goto done;
  }
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  if (!yaml_parser_load(&parser, &doc)) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%zu:%zu: YAML: %s", path,
                     parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                     parser.problem ? parser.problem : "parse error");
    yaml_parser_delete(&parser);
    goto done;
  }
  have_doc = 1;
  yaml_parser_delete(&parser);
  if ((st = parse(s, &doc, ax, &n_ax, err)) != FSDPC_OK)
    goto done;
  if (n_ax == 0) {
    /* No matrix: a single variant, the base config as it is. */
    s->variants = calloc(1, sizeof *s->variants);
    if (!s->variants || !(s->variants[0].overrides = calloc(1, sizeof(char *)))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      goto done;
    }
    snprintf(s->variants[0].name, sizeof s->variants[0].name, "base");
    s->n_variants = 1;
  } else if ((st = expand(s, ax, n_ax, err)) != FSDPC_OK) {
    goto done;
  }
  /* base is relative to the bench file's folder. */
  if (s->base[0] != '/') {
    char *copy = strdup(path);
    char buf[4096];
    if (!copy) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      goto done;
    }
    snprintf(buf, sizeof buf, "%s/%s", dirname(copy), s->base);
    free(copy);
    st = dup_str(&s->base, buf, err);
  }
done:
  if (have_doc)
    yaml_document_delete(&doc);
  if (f)
    fclose(f);
  for (int i = 0; i < MAX_AXES; i++) {
    for (int j = 0; j < ax[i].n; j++)
      for (int k = 0; k < ax[i].vals[j].n; k++)
        free(ax[i].vals[j].kv[k]);
    free(ax[i].vals);
  }
  if (st != FSDPC_OK) {
    fsdpc__bench_spec_destroy(s);
    return st;
  }
  *out = s;
  return FSDPC_OK;
}

void fsdpc__bench_spec_destroy(fsdpc_bench_spec *s) {
  if (!s)
    return;
  for (int v = 0; v < s->n_variants; v++) {
    for (int i = 0; i < s->variants[v].n_overrides; i++)
      free(s->variants[v].overrides[i]);
    free(s->variants[v].overrides);
  }
  free(s->variants);
  for (int i = 0; i < s->n_set; i++)
    free(s->set[i]);
  free(s->set);
  free(s->path);
  free(s->title);
  free(s->base);
  free(s->out_dir);
  free(s->baseline);
  free(s);
}
