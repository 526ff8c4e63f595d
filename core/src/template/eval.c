/* Evaluator of the Jinja subset: walks the syntax tree over jv values.
 *
 * Scoping follows Jinja: a for loop gives each iteration a fresh frame
 * (a "set" inside a loop is gone after the iteration; namespace() is how
 * templates carry state out), "if" shares its frame, a macro call gets a
 * frame whose parent is the frame the macro was defined in. Globals come
 * from the caller's cJSON object, then the built-in functions. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

struct jframe {
  jframe *parent;
  size_t n, cap;
  const char **names;
  jv *vals;
};

enum { F_RAISE = 1, F_STRFTIME, F_NAMESPACE, F_RANGE, F_DICT };
enum { EX_OK = 0, EX_BREAK = 1, EX_CONTINUE = 2, EX_ERR = -1 };

#define MAX_RANGE 100000
#define MAX_CALL_DEPTH 100

int jx_fail(jctx *x, const jnode *at, const char *fmt, ...) {
  if (x->failed)
    return -1;
  x->failed = 1;
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *c = msg; *c; c++)
    if (*c == '\n' || *c == '\r')
      *c = ' ';
  if (at)
    fsdpc__fail(x->err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s", x->t->origin, at->line, at->col, msg);
  else
    fsdpc__fail(x->err, FSDPC_INVALID_USAGE, "%s: %s", x->t->origin, msg);
  return -1;
}

static jframe *frame_new(jctx *x, jframe *parent) {
  jframe *f = ja_alloc(&x->arena, sizeof *f);
  if (f)
    f->parent = parent;
  return f;
}

static int frame_set(jctx *x, jframe *f, const char *name, jv v) {
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->names[i], name) == 0) {
      f->vals[i] = v;
      return 0;
    }
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 4;
    const char **names = ja_alloc(&x->arena, cap * sizeof *names);
    jv *vals = ja_alloc(&x->arena, cap * sizeof *vals);
    if (!names || !vals)
      return -1;
    if (f->n) {
      memcpy(names, f->names, f->n * sizeof *names);
      memcpy(vals, f->vals, f->n * sizeof *vals);
    }
    f->names = names;
    f->vals = vals;
    f->cap = cap;
  }
  f->names[f->n] = name;
  f->vals[f->n] = v;
  f->n++;
  return 0;
}

static jv lookup(jctx *x, const char *name) {
  for (jframe *f = x->frame; f; f = f->parent)
    for (size_t i = f->n; i-- > 0;)
      if (strcmp(f->names[i], name) == 0)
        return f->vals[i];
  if (x->vars) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(x->vars, name);
    if (j)
      return jv_from_json(j);
  }
  static const struct {
    const char *name;
    int id;
  } builtins[] = {{"raise_exception", F_RAISE},
                  {"strftime_now", F_STRFTIME},
                  {"namespace", F_NAMESPACE},
                  {"range", F_RANGE},
                  {"dict", F_DICT}};
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (strcmp(builtins[i].name, name) == 0) {
      jv v = {.kind = JV_FUNC};
      v.u.func = builtins[i].id;
      return v;
    }
  return jv_undef(name);
}

static int emit(jctx *x, const jnode *at, const char *s, size_t n) {
  if (jb_put(x->out, s, n))
    return jx_oom(x, at);
  if (x->out == x->main_out && x->out->n > x->max_output)
    return jx_fail(x, at, "rendered text exceeds %zu bytes", x->max_output);
  return 0;
}

static int step(jctx *x, const jnode *at) {
  if (++x->steps > x->max_steps)
    return jx_fail(x, at, "render exceeded %llu evaluation steps (a runaway loop?)",
                   (unsigned long long)x->max_steps);
  return 0;
}

static int is_num(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
}
static int64_t as_i(const jv *v) {
  return v->kind == JV_INT ? v->u.i : (int64_t)v->u.b;
}

static int eval(jctx *x, const jnode *n, jv *out);
static int exec_body(jctx *x, jnode *const *body, size_t n);

/* ---- calls ---- */
typedef struct jargs {
  jv *pos;
  size_t npos;
  const char **kwn;
  jv *kwv;
  size_t nkw;
} jargs;

static int eval_args(jctx *x, const jnode *n, jargs *a) {
  a->npos = n->n;
  a->nkw = n->n2;
  a->kwn = n->names;
  /* "*seq" arguments expand in place: evaluate them first to count. */
  jv *splat = ja_alloc(&x->arena, (n->n + 1) * sizeof(jv));
  if (!splat)
    return jx_oom(x, n);
  for (size_t i = 0; i < n->n; i++)
    if (n->list[i]->kind == N_SPLAT) {
      if (eval(x, n->list[i]->a, &splat[i]))
        return -1;
      if (!jv_is_seq(&splat[i]))
        return jx_fail(x, n->list[i], "argument after * must be a list or tuple, not %s",
                       jv_type_name(&splat[i]));
      a->npos += jv_len(&splat[i]) - 1;
    }
  a->pos = ja_alloc(&x->arena, (a->npos + 1) * sizeof(jv));
  a->kwv = ja_alloc(&x->arena, (n->n2 + 1) * sizeof(jv));
  if (!a->pos || !a->kwv)
    return jx_oom(x, n);
  for (size_t i = 0, k = 0; i < n->n; i++) {
    if (n->list[i]->kind == N_SPLAT) {
      for (size_t j = 0; j < jv_len(&splat[i]); j++)
        a->pos[k++] = jv_seq_at(&splat[i], j);
    } else if (eval(x, n->list[i], &a->pos[k++])) {
      return -1;
    }
  }
  for (size_t i = 0; i < n->n2; i++)
    if (eval(x, n->list2[i], &a->kwv[i]))
      return -1;
  return 0;
}

static int render_into(jctx *x, jnode *const *body, size_t n, jv *out, const jnode *at) {
  jbuf tmp = {0}, *saved = x->out;
  x->out = &tmp;
  int rc = exec_body(x, body, n);
  x->out = saved;
  if (rc == EX_ERR) {
    free(tmp.p);
    return -1;
  }
  char *s = ja_strdup(&x->arena, tmp.p ? tmp.p : "", tmp.n);
  size_t len = tmp.n;
  free(tmp.p);
  if (!s)
    return jx_oom(x, at);
  *out = jv_str(s, len);
  return 0;
}

static int call_macro(jctx *x, const jnode *at, const struct jmacro *m, const jargs *a, jv *out) {
  const jnode *def = m->node;
  if (x->depth >= MAX_CALL_DEPTH)
    return jx_fail(x, at, "macro calls nested too deeply (more than %d)", MAX_CALL_DEPTH);
  jframe *f = frame_new(x, m->frame);
  if (!f)
    return jx_oom(x, at);
  const char *mname = def->kind == N_MACRO ? def->str : "caller";
  if (a->npos > def->nnames)
    return jx_fail(x, at, "macro '%s' takes not more than %zu argument(s)", mname, def->nnames);
  for (size_t k = 0; k < a->nkw; k++) {
    size_t p = 0;
    while (p < def->nnames && strcmp(def->names[p], a->kwn[k]) != 0)
      p++;
    if (p == def->nnames)
      return jx_fail(x, at, "macro '%s' has no parameter named '%s'", mname, a->kwn[k]);
    if (p < a->npos)
      return jx_fail(x, at, "macro '%s' got multiple values for parameter '%s'", mname, a->kwn[k]);
  }
  jframe *saved = x->frame;
  x->frame = f;
  int rc = 0;
  for (size_t p = 0; p < def->nnames && !rc; p++) {
    jv v = jv_undef(def->names[p]);
    int set = 0;
    if (p < a->npos) {
      v = a->pos[p];
      set = 1;
    }
    for (size_t k = 0; k < a->nkw && !set; k++)
      if (strcmp(def->names[p], a->kwn[k]) == 0) {
        v = a->kwv[k];
        set = 1;
      }
    if (!set && p < def->n2 && def->list2[p])
      rc = eval(x, def->list2[p], &v);
    if (!rc && frame_set(x, f, def->names[p], v))
      rc = jx_oom(x, at);
  }
  if (!rc && x->pending_caller) {
    struct jmacro *c = ja_alloc(&x->arena, sizeof *c);
    if (!c) {
      rc = jx_oom(x, at);
    } else {
      c->node = x->pending_caller;
      c->frame = x->caller_frame;
      x->pending_caller = NULL;
      jv cv = {.kind = JV_MACRO};
      cv.u.macro = c;
      if (frame_set(x, f, "caller", cv))
        rc = jx_oom(x, at);
    }
  }
  x->depth++;
  if (!rc)
    rc = render_into(x, def->list, def->n, out, at);
  x->depth--;
  x->frame = saved;
  return rc;
}

static int call_func(jctx *x, const jnode *at, int id, const jargs *a, jv *out) {
  switch (id) {
  case F_RAISE: {
    jv msg = a->npos ? a->pos[0] : jv_str("", 0), s;
    if (jv_stringify(x, at, &msg, &s))
      return -1;
    return jx_fail(x, at, "raise_exception: %.*s", (int)(s.u.s.n > 600 ? 600 : s.u.s.n), s.u.s.p);
  }
  case F_STRFTIME: {
    if (a->npos != 1 || a->pos[0].kind != JV_STR)
      return jx_fail(x, at, "strftime_now() takes one format string");
    struct tm tm;
    time_t now = x->now;
    if (!localtime_r(&now, &tm))
      return jx_fail(x, at, "strftime_now: cannot read the clock");
    char *fmt = ja_strdup(&x->arena, a->pos[0].u.s.p, a->pos[0].u.s.n);
    char buf[512];
    if (!fmt)
      return jx_oom(x, at);
    size_t n = strftime(buf, sizeof buf, fmt, &tm);
    if (n == 0 && fmt[0])
      return jx_fail(x, at, "strftime_now: format too long or empty result");
    char *s = ja_strdup(&x->arena, buf, n);
    if (!s)
      return jx_oom(x, at);
    *out = jv_str(s, n);
    return 0;
  }
  case F_NAMESPACE:
  case F_DICT: {
    jdict *d = jd_new(&x->arena);
    if (!d)
      return jx_oom(x, at);
    for (size_t i = 0; i < a->npos; i++) {
      if (!jv_is_mapping(&a->pos[i]))
        return jx_fail(x, at, "%s() takes keyword arguments or a mapping",
                       id == F_DICT ? "dict" : "namespace");
      size_t n = jv_len(&a->pos[i]);
      for (size_t k = 0; k < n; k++) {
        jv key, val;
        jv_map_at(&a->pos[i], k, &key, &val);
        if (jd_set(&x->arena, d, key.u.s.p, key.u.s.n, val))
          return jx_oom(x, at);
      }
    }
    for (size_t k = 0; k < a->nkw; k++)
      if (jd_set(&x->arena, d, a->kwn[k], strlen(a->kwn[k]), a->kwv[k]))
        return jx_oom(x, at);
    out->kind = id == F_DICT ? JV_DICT : JV_NS;
    out->u.m = d;
    return 0;
  }
  case F_RANGE: {
    int64_t lo = 0, hi, st = 1;
    for (size_t i = 0; i < a->npos; i++)
      if (a->pos[i].kind != JV_INT)
        return jx_fail(x, at, "range() takes integers");
    if (a->npos == 1) {
      hi = a->pos[0].u.i;
    } else if (a->npos == 2 || a->npos == 3) {
      lo = a->pos[0].u.i;
      hi = a->pos[1].u.i;
      if (a->npos == 3)
        st = a->pos[2].u.i;
    } else {
      return jx_fail(x, at, "range() takes 1 to 3 arguments");
    }
    if (st == 0)
      return jx_fail(x, at, "range() arg 3 must not be zero");
    int64_t cnt = 0;
    if (st > 0 && hi > lo)
      cnt = (hi - lo + st - 1) / st;
    else if (st < 0 && lo > hi)
      cnt = (lo - hi - st - 1) / (-st);
    if (cnt > MAX_RANGE)
      return jx_fail(x, at, "range too big (more than %d items)", MAX_RANGE);
    jlist *l = jl_new(&x->arena, (size_t)cnt);
    if (!l)
      return jx_oom(x, at);
    for (int64_t i = 0; i < cnt; i++)
      l->items[i] = jv_int(lo + i * st);
    out->kind = JV_LIST;
    out->u.l = l;
    return 0;
  }
  }
  return jx_fail(x, at, "unknown function");
}

static int call_value(jctx *x, const jnode *at, const jv *fn, const jargs *a, jv *out) {
  switch (fn->kind) {
  case JV_MACRO:
    return call_macro(x, at, fn->u.macro, a, out);
  case JV_FUNC:
    return call_func(x, at, fn->u.func, a, out);
  case JV_METHOD:
    return jf_call_method(x, at, fn->u.meth, a->pos, a->npos, a->kwn, a->kwv, a->nkw, out);
  case JV_UNDEF:
    return jx_undef_fail(x, at, fn);
  default:
    return jx_fail(x, at, "'%s' object is not callable", jv_type_name(fn));
  }
}

/* ---- expressions ---- */
static int eval(jctx *x, const jnode *n, jv *out) {
  if (step(x, n))
    return -1;
  jv a, b, c;
  switch (n->kind) {
  case N_CONST:
    *out = n->cval;
    return 0;
  case N_NAME:
    *out = lookup(x, n->str);
    return 0;
  case N_ATTR:
    if (eval(x, n->a, &a))
      return -1;
    return jx_get_attr(x, n, &a, n->str, n->len, out);
  case N_ITEM:
    if (eval(x, n->a, &a) || eval(x, n->b, &b))
      return -1;
    return jx_get_item(x, n, &a, &b, out);
  case N_SLICE: {
    jv p[3];
    jnode *parts[3] = {n->b, n->c, n->d};
    if (eval(x, n->a, &a))
      return -1;
    for (int i = 0; i < 3; i++)
      if (parts[i] && eval(x, parts[i], &p[i]))
        return -1;
    return jx_slice(x, n, &a, n->b ? &p[0] : NULL, n->c ? &p[1] : NULL, n->d ? &p[2] : NULL, out);
  }
  case N_CALL: {
    jargs args;
    const jnode *caller = x->pending_caller;
    jframe *caller_frame = x->caller_frame;
    x->pending_caller = NULL;
    if (eval(x, n->a, &a) || eval_args(x, n, &args))
      return -1;
    x->pending_caller = caller;
    x->caller_frame = caller_frame;
    int rc = call_value(x, n, &a, &args, out);
    x->pending_caller = NULL;
    return rc;
  }
  case N_FILTER: {
    jargs args;
    if (eval(x, n->a, &a) || eval_args(x, n, &args))
      return -1;
    return jf_apply_filter(x, n, n->op, &a, args.pos, args.npos, args.kwn, args.kwv, args.nkw, out);
  }
  case N_TEST: {
    jargs args;
    int r;
    if (eval(x, n->a, &a) || eval_args(x, n, &args))
      return -1;
    if (jf_apply_test(x, n, n->op, &a, args.pos, args.npos, &r))
      return -1;
    *out = jv_bool(n->flag ? !r : r);
    return 0;
  }
  case N_BINOP:
    if (eval(x, n->a, &a) || eval(x, n->b, &b))
      return -1;
    return jx_binop(x, n, n->op, &a, &b, out);
  case N_CMP: {
    if (eval(x, n->a, &a) || eval(x, n->b, &b))
      return -1;
    int r = 0, ok;
    switch (n->op) {
    case CMP_EQ:
      *out = jv_bool(jv_equal(&a, &b));
      return 0;
    case CMP_NE:
      *out = jv_bool(!jv_equal(&a, &b));
      return 0;
    case CMP_IN:
    case CMP_NOTIN:
      if (jx_contains(x, n, &a, &b, &r))
        return -1;
      *out = jv_bool(n->op == CMP_IN ? r : !r);
      return 0;
    default:
      if (a.kind == JV_UNDEF)
        return jx_undef_fail(x, n, &a);
      if (b.kind == JV_UNDEF)
        return jx_undef_fail(x, n, &b);
      r = jv_compare(&a, &b, &ok);
      if (!ok)
        return jx_fail(x, n, "'%s' not supported between instances of '%s' and '%s'",
                       n->op == CMP_LT   ? "<"
                       : n->op == CMP_LE ? "<="
                       : n->op == CMP_GT ? ">"
                                         : ">=",
                       jv_type_name(&a), jv_type_name(&b));
      *out = jv_bool(n->op == CMP_LT   ? r < 0
                     : n->op == CMP_LE ? r <= 0
                     : n->op == CMP_GT ? r > 0
                                       : r >= 0);
      return 0;
    }
  }
  case N_AND:
    if (eval(x, n->a, &a))
      return -1;
    if (!jv_truthy(&a)) {
      *out = a;
      return 0;
    }
    return eval(x, n->b, out);
  case N_OR:
    if (eval(x, n->a, &a))
      return -1;
    if (jv_truthy(&a)) {
      *out = a;
      return 0;
    }
    return eval(x, n->b, out);
  case N_NOT:
    if (eval(x, n->a, &a))
      return -1;
    *out = jv_bool(!jv_truthy(&a));
    return 0;
  case N_NEG:
  case N_POS:
    if (eval(x, n->a, &a))
      return -1;
    if (a.kind == JV_UNDEF)
      return jx_undef_fail(x, n, &a);
    if (!is_num(&a))
      return jx_fail(x, n, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+",
                     jv_type_name(&a));
    if (n->kind == N_POS)
      *out = a.kind == JV_BOOL ? jv_int(a.u.b) : a;
    else if (a.kind == JV_FLOAT)
      *out = jv_float(-a.u.d);
    else if (as_i(&a) == INT64_MIN)
      return jx_fail(x, n, "unsupported construct 'integer beyond 64 bits'");
    else
      *out = jv_int(-as_i(&a));
    return 0;
  case N_COND:
    if (eval(x, n->a, &c))
      return -1;
    if (jv_truthy(&c))
      return eval(x, n->b, out);
    if (n->c)
      return eval(x, n->c, out);
    *out = jv_undef(NULL);
    return 0;
  case N_LIST:
  case N_TUPLE: {
    jlist *l = jl_new(&x->arena, n->n);
    if (!l)
      return jx_oom(x, n);
    l->tuple = n->kind == N_TUPLE;
    for (size_t i = 0; i < n->n; i++)
      if (eval(x, n->list[i], &l->items[i]))
        return -1;
    out->kind = JV_LIST;
    out->u.l = l;
    return 0;
  }
  case N_DICT: {
    jdict *d = jd_new(&x->arena);
    if (!d)
      return jx_oom(x, n);
    for (size_t i = 0; i < n->n; i++) {
      if (eval(x, n->list[i], &a) || eval(x, n->list2[i], &b))
        return -1;
      if (a.kind != JV_STR)
        return jx_fail(x, n->list[i], "unsupported construct 'dict key of type %s'",
                       jv_type_name(&a));
      if (jd_set(&x->arena, d, a.u.s.p, a.u.s.n, b))
        return jx_oom(x, n);
    }
    out->kind = JV_DICT;
    out->u.m = d;
    return 0;
  }
  default:
    return jx_fail(x, n, "internal error: statement in expression position");
  }
}

/* ---- statements ---- */
static int iter_items(jctx *x, const jnode *at, const jv *v, jv **items, size_t *n) {
  if (v->kind == JV_UNDEF) {
    *n = 0;
    *items = NULL;
    return 0;
  }
  if (v->kind == JV_LIST) {
    *items = v->u.l->items;
    *n = v->u.l->n;
    return 0;
  }
  if (v->kind == JV_STR) {
    size_t cnt = ju_count(v->u.s.p, v->u.s.n), o = 0;
    jv *it = ja_alloc(&x->arena, (cnt + 1) * sizeof *it);
    if (!it)
      return jx_oom(x, at);
    for (size_t i = 0; i < cnt; i++) {
      size_t l = ju_offset(v->u.s.p + o, v->u.s.n - o, 1);
      it[i] = jv_str(v->u.s.p + o, l);
      o += l;
    }
    *items = it;
    *n = cnt;
    return 0;
  }
  if (jv_is_seq(v) || jv_is_mapping(v) || v->kind == JV_NS) {
    size_t cnt = jv_len(v), i = 0;
    jv *it = ja_alloc(&x->arena, (cnt + 1) * sizeof *it);
    if (!it)
      return jx_oom(x, at);
    if (v->kind == JV_JSON) {
      for (const cJSON *c = v->u.j->child; c && i < cnt; c = c->next, i++)
        it[i] = cJSON_IsArray(v->u.j) ? jv_from_json(c) : jv_str(c->string, strlen(c->string));
    } else {
      for (; i < cnt; i++) {
        jv k, val;
        jv_map_at(v, i, &k, &val);
        it[i] = k;
      }
    }
    *items = it;
    *n = cnt;
    return 0;
  }
  return jx_fail(x, at, "'%s' object is not iterable", jv_type_name(v));
}

static int bind_targets(jctx *x, const jnode *n, jframe *f, const jv *item) {
  if (n->nnames == 1)
    return frame_set(x, f, n->names[0], *item) ? jx_oom(x, n) : 0;
  jv *parts;
  size_t np;
  if (item->kind == JV_STR || !(jv_is_seq(item)))
    return jx_fail(x, n, "cannot unpack a %s into %zu loop variables", jv_type_name(item),
                   n->nnames);
  if (iter_items(x, n, item, &parts, &np))
    return -1;
  if (np != n->nnames)
    return jx_fail(x, n, "cannot unpack %zu values into %zu loop variables", np, n->nnames);
  for (size_t i = 0; i < np; i++)
    if (frame_set(x, f, n->names[i], parts[i]))
      return jx_oom(x, n);
  return 0;
}

static int exec_for(jctx *x, const jnode *n) {
  jv seq;
  if (eval(x, n->a, &seq))
    return EX_ERR;
  jv *items;
  size_t cnt;
  if (iter_items(x, n->a, &seq, &items, &cnt))
    return EX_ERR;
  jframe *outer = x->frame;
  if (n->b) { /* "for x in y if cond": filter first, so loop.* count what is kept */
    jv *kept = ja_alloc(&x->arena, (cnt + 1) * sizeof *kept);
    if (!kept)
      return jx_oom(x, n);
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
      jframe *f = frame_new(x, outer);
      if (!f)
        return jx_oom(x, n);
      x->frame = f;
      jv c;
      int rc = bind_targets(x, n, f, &items[i]) || eval(x, n->b, &c);
      x->frame = outer;
      if (rc)
        return EX_ERR;
      if (jv_truthy(&c))
        kept[k++] = items[i];
    }
    items = kept;
    cnt = k;
  }
  jloop *lp = ja_alloc(&x->arena, sizeof *lp);
  if (!lp)
    return jx_oom(x, n);
  lp->length = (int64_t)cnt;
  lp->items = items;
  for (size_t i = 0; i < cnt; i++) {
    if (step(x, n))
      return EX_ERR;
    jframe *f = frame_new(x, outer);
    if (!f)
      return jx_oom(x, n);
    jloop *li = ja_alloc(&x->arena, sizeof *li);
    if (!li)
      return jx_oom(x, n);
    *li = *lp;
    li->index0 = (int64_t)i;
    jv lv = {.kind = JV_LOOP};
    lv.u.loop = li;
    if (frame_set(x, f, "loop", lv))
      return jx_oom(x, n);
    if (bind_targets(x, n, f, &items[i]))
      return EX_ERR;
    x->frame = f;
    int rc = exec_body(x, n->list, n->n);
    x->frame = outer;
    if (rc == EX_ERR)
      return EX_ERR;
    if (rc == EX_BREAK)
      break;
  }
  if (cnt == 0 && n->n2)
    return exec_body(x, n->list2, n->n2);
  return EX_OK;
}

static int exec_stmt(jctx *x, const jnode *n) {
  if (step(x, n))
    return EX_ERR;
  jv v;
  switch (n->kind) {
  case N_TEXT:
    return emit(x, n, n->str, n->len) ? EX_ERR : EX_OK;
  case N_OUTPUT: {
    if (eval(x, n->a, &v))
      return EX_ERR;
    if (v.kind == JV_STR)
      return emit(x, n, v.u.s.p, v.u.s.n) ? EX_ERR : EX_OK;
    jbuf b = {0};
    int rc = jv_to_str(x, n, &v, &b) || emit(x, n, b.p ? b.p : "", b.n);
    free(b.p);
    return rc ? EX_ERR : EX_OK;
  }
  case N_IF:
    if (eval(x, n->a, &v))
      return EX_ERR;
    if (jv_truthy(&v))
      return exec_body(x, n->list, n->n);
    return exec_body(x, n->list2, n->n2);
  case N_FOR:
    return exec_for(x, n);
  case N_SET:
    if (eval(x, n->a, &v))
      return EX_ERR;
    if (n->nnames) {
      jv ns = lookup(x, n->str);
      if (ns.kind != JV_NS)
        return jx_fail(x, n, "cannot assign attribute '%s' on '%s': not a namespace()", n->names[0],
                       n->str);
      return jd_set(&x->arena, ns.u.m, n->names[0], strlen(n->names[0]), v) ? jx_oom(x, n) : EX_OK;
    }
    return frame_set(x, x->frame, n->str, v) ? jx_oom(x, n) : EX_OK;
  case N_SETBLOCK:
    if (render_into(x, n->list, n->n, &v, n))
      return EX_ERR;
    return frame_set(x, x->frame, n->str, v) ? jx_oom(x, n) : EX_OK;
  case N_MACRO: {
    struct jmacro *m = ja_alloc(&x->arena, sizeof *m);
    if (!m)
      return jx_oom(x, n);
    m->node = n;
    m->frame = x->frame;
    v.kind = JV_MACRO;
    v.u.macro = m;
    return frame_set(x, x->frame, n->str, v) ? jx_oom(x, n) : EX_OK;
  }
  case N_CALLBLOCK:
    x->pending_caller = n;
    x->caller_frame = x->frame;
    if (eval(x, n->a, &v))
      return EX_ERR;
    x->pending_caller = NULL;
    if (v.kind == JV_STR)
      return emit(x, n, v.u.s.p, v.u.s.n) ? EX_ERR : EX_OK;
    return EX_OK;
  case N_BREAK:
    return EX_BREAK;
  case N_CONTINUE:
    return EX_CONTINUE;
  case N_GENERATION: {
    size_t begin = x->out->n;
    int rc = exec_body(x, n->list, n->n);
    if (rc == EX_OK && x->out == x->main_out) {
      fsdpc_jinja_span sp = {begin, x->out->n};
      if (jb_put(&x->gen, (const char *)&sp, sizeof sp))
        return jx_oom(x, n);
    }
    return rc;
  }
  default:
    return jx_fail(x, n, "internal error: expression in statement position");
  }
}

static int exec_body(jctx *x, jnode *const *body, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = exec_stmt(x, body[i]);
    if (rc != EX_OK)
      return rc;
  }
  return EX_OK;
}

fsdpc_status fsdpc__jinja_render_opts(const fsdpc_jinja *t, const cJSON *vars,
                                      const fsdpc_jinja_opts *opts, char **out, size_t *out_len,
                                      fsdpc_err *err) {
  *out = NULL;
  if (out_len)
    *out_len = 0;
  if (opts && opts->gen) {
    *opts->gen = NULL;
    *opts->n_gen = 0;
  }
  if (vars && !cJSON_IsObject(vars))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: render variables must be a JSON object",
                       t->origin);
  jbuf buf = {0};
  jctx x = {.t = t, .out = &buf, .main_out = &buf, .vars = vars, .err = err};
  x.now = opts && opts->now ? opts->now : time(NULL);
  x.max_output = opts && opts->max_output ? opts->max_output : (size_t)256 << 20;
  x.max_steps = opts && opts->max_steps ? opts->max_steps : 200000000ull;
  x.root = frame_new(&x, NULL);
  x.frame = x.root;
  int rc = x.root ? exec_body(&x, t->body, t->n_body) : jx_oom(&x, NULL);
  ja_free(&x.arena);
  if (rc == EX_ERR || x.failed) {
    free(buf.p);
    free(x.gen.p);
    return err && err->status != FSDPC_OK ? err->status : FSDPC_INVALID_USAGE;
  }
  if (!buf.p && jb_put(&buf, "", 0)) {
    free(x.gen.p);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", t->origin);
  }
  *out = buf.p;
  if (out_len)
    *out_len = buf.n;
  if (opts && opts->gen) {
    *opts->gen = (fsdpc_jinja_span *)x.gen.p;
    *opts->n_gen = x.gen.n / sizeof(fsdpc_jinja_span);
  } else {
    free(x.gen.p);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__jinja_render(const fsdpc_jinja *t, const cJSON *vars, char **out,
                                 size_t *out_len, fsdpc_err *err) {
  return fsdpc__jinja_render_opts(t, vars, NULL, out, out_len, err);
}
