/* Expressions of the Jinja subset over jv values, and the render's
 * bookkeeping: errors with the template's line and column, the step,
 * recursion and memory bounds. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/exec.h"

int jx_fail(jctx *x, const jnode *at, const char *fmt, ...) {
  if (x->failed)
    return -1;
  x->failed = 1;
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* one line, printable: template and data text may hold anything */
  for (unsigned char *c = (unsigned char *)msg; *c; c++)
    if (*c < 0x20 || *c == 0x7F)
      *c = ' ';
  if (at)
    fsdpc__fail(x->err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s", x->t->origin, at->line, at->col, msg);
  else
    fsdpc__fail(x->err, FSDPC_INVALID_USAGE, "%s: %s", x->t->origin, msg);
  return -1;
}

int jx_oom(jctx *x, const jnode *at) {
  if (x->mem.over)
    return jx_fail(x, at,
                   "render uses more than %zu MiB of memory (the template builds values too "
                   "large; the bound is fsdpc_jinja_opts.max_memory)",
                   x->mem.limit >> 20);
  if (x->failed)
    return -1;
  x->failed = 1;
  if (at)
    fsdpc__fail(x->err, FSDPC_SYSTEM_ERROR, "%s:%d:%d: out of memory", x->t->origin, at->line,
                at->col);
  else
    fsdpc__fail(x->err, FSDPC_SYSTEM_ERROR, "%s: out of memory", x->t->origin);
  return -1;
}

int jx_work(jctx *x, const jnode *at, size_t n) {
  /* 64 bytes (or items) of copying or scanning count as one step */
  x->steps += n / 64;
  if (x->steps > x->max_steps)
    return jx_fail(x, at, "render exceeded %llu evaluation steps (a runaway loop?)",
                   (unsigned long long)x->max_steps);
  return 0;
}

int jx_enter(jctx *x, const jnode *at) {
  if (++x->steps > x->max_steps) {
    x->rdepth++;
    return jx_fail(x, at, "render exceeded %llu evaluation steps (a runaway loop?)",
                   (unsigned long long)x->max_steps);
  }
  if (++x->rdepth > MAX_RENDER_DEPTH)
    return jx_fail(x, at,
                   "template recursion too deep (more than %d levels of expressions, "
                   "blocks and macro calls)",
                   MAX_RENDER_DEPTH);
  return 0;
}

jframe *jx_frame_new(jctx *x, jframe *parent) {
  jframe *f = ja_alloc(&x->arena, sizeof *f);
  if (f)
    f->parent = parent;
  return f;
}

int jx_frame_set(jctx *x, jframe *f, const char *name, jv v) {
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

jv jx_lookup(jctx *x, const char *name) {
  for (jframe *f = x->frame; f; f = f->parent)
    for (size_t i = f->n; i-- > 0;)
      if (strcmp(f->names[i], name) == 0)
        return f->vals[i];
  if (x->vars) {
    /* the last of duplicate keys, as Python's json */
    const cJSON *hit = NULL;
    for (const cJSON *c = x->vars->child; c; c = c->next)
      if (c->string && strcmp(c->string, name) == 0)
        hit = c;
    if (hit)
      return jv_from_json(hit);
  }
  static const struct {
    const char *name;
    int id;
  } builtins[] = {{"raise_exception", F_RAISE},
                  {"strftime_now", F_STRFTIME},
                  {"namespace", F_NAMESPACE},
                  {"range", F_RANGE},
                  {"dict", F_DICT},
                  {"lipsum", F_LIPSUM},
                  {"cycler", F_CYCLER},
                  {"joiner", F_JOINER}};
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (strcmp(builtins[i].name, name) == 0) {
      jv v = {.kind = JV_FUNC};
      v.u.func = builtins[i].id;
      return v;
    }
  return jv_undef(name);
}

static int eval_cmp(jctx *x, const jnode *n, jv *out) {
  jv a, b;
  if (jx_eval(x, n->a, &a) || jx_eval(x, n->b, &b))
    return -1;
  int r = 0, ok;
  switch (n->op) {
  case CMP_EQ:
  case CMP_NE:
    r = jv_equal(x, &a, &b);
    if (x->failed)
      return -1;
    *out = jv_bool(n->op == CMP_EQ ? r : !r);
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
    r = jv_compare(x, &a, &b, &ok);
    if (x->failed)
      return -1;
    if (!ok)
      return jx_fail(x, n, "'%s' not supported between instances of '%s' and '%s'",
                     n->op == CMP_LT   ? "<"
                     : n->op == CMP_LE ? "<="
                     : n->op == CMP_GT ? ">"
                                       : ">=",
                     jv_type_name(&a), jv_type_name(&b));
    if (ok == 2) { /* nan: every ordering is false */
      *out = jv_bool(0);
      return 0;
    }
    *out = jv_bool(n->op == CMP_LT   ? r < 0
                   : n->op == CMP_LE ? r <= 0
                   : n->op == CMP_GT ? r > 0
                                     : r >= 0);
    return 0;
  }
}

static int eval_call(jctx *x, const jnode *n, jv *out) {
  jargs args;
  jv fn;
  const jnode *caller = x->pending_caller;
  jframe *caller_frame = x->caller_frame;
  x->pending_caller = NULL;
  if (jx_eval(x, n->a, &fn) || jx_eval_args(x, n, &args))
    return -1;
  x->pending_caller = caller;
  x->caller_frame = caller_frame;
  int rc = jx_call_value(x, n, &fn, &args, out);
  x->pending_caller = NULL;
  return rc;
}

static int eval_seq(jctx *x, const jnode *n, jv *out) {
  jlist *l = jl_new(&x->arena, n->n);
  if (!l)
    return jx_oom(x, n);
  l->type = n->kind == N_TUPLE ? JL_TUPLE : JL_LIST;
  for (size_t i = 0; i < n->n; i++)
    if (jx_eval(x, n->list[i], &l->items[i]))
      return -1;
  *out = jv_list(l);
  return 0;
}

static int eval_dict(jctx *x, const jnode *n, jv *out) {
  jdict *d = jd_new(&x->arena);
  if (!d)
    return jx_oom(x, n);
  for (size_t i = 0; i < n->n; i++) {
    jv k, v;
    if (jx_eval(x, n->list[i], &k) || jx_eval(x, n->list2[i], &v))
      return -1;
    if (jd_set_key(x, n->list[i], d, &k, v))
      return -1;
  }
  out->kind = JV_DICT;
  out->u.m = d;
  return 0;
}

static int eval_node(jctx *x, const jnode *n, jv *out) {
  jv a, b;
  switch (n->kind) {
  case N_CONST:
    *out = n->flag ? x->block : n->cval;
    return 0;
  case N_NAME:
    *out = jx_lookup(x, n->str);
    return 0;
  case N_ATTR:
    if (jx_eval(x, n->a, &a))
      return -1;
    return jx_get_attr(x, n, &a, n->str, n->len, out);
  case N_ITEM:
    if (jx_eval(x, n->a, &a) || jx_eval(x, n->b, &b))
      return -1;
    return jx_get_item(x, n, &a, &b, out);
  case N_SLICE: {
    jv p[3];
    jnode *parts[3] = {n->b, n->c, n->d};
    if (jx_eval(x, n->a, &a))
      return -1;
    for (int i = 0; i < 3; i++)
      if (parts[i] && jx_eval(x, parts[i], &p[i]))
        return -1;
    return jx_slice(x, n, &a, n->b ? &p[0] : NULL, n->c ? &p[1] : NULL, n->d ? &p[2] : NULL, out);
  }
  case N_CALL:
    return eval_call(x, n, out);
  case N_FILTER: {
    jargs args;
    if (!n->op) /* deferred by the parser: jinja2 fails here at run time */
      return jf_jinja_has_filter(n->str, n->len)
                 ? jx_fail(x, n, "unsupported construct 'filter %.*s'", (int)n->len, n->str)
                 : jx_fail(x, n, "no filter named '%.*s'", (int)n->len, n->str);
    if (jx_eval(x, n->a, &a) || jx_eval_args(x, n, &args))
      return -1;
    return jf_apply_filter(x, n, n->op, &a, args.pos, args.npos, args.kwn, args.kwv, args.nkw, out);
  }
  case N_TEST: {
    jargs args;
    int r;
    if (!n->op)
      return jx_fail(x, n, "no test named '%.*s'", (int)n->len, n->str);
    if (jx_eval(x, n->a, &a) || jx_eval_args(x, n, &args))
      return -1;
    if (jf_apply_test(x, n, n->op, &a, args.pos, args.npos, &r))
      return -1;
    *out = jv_bool(n->flag ? !r : r);
    return 0;
  }
  case N_BINOP:
    if (jx_eval(x, n->a, &a) || jx_eval(x, n->b, &b))
      return -1;
    return jx_binop(x, n, n->op, &a, &b, out);
  case N_CMP:
    return eval_cmp(x, n, out);
  case N_AND:
  case N_OR:
    if (jx_eval(x, n->a, &a))
      return -1;
    if (jv_truthy(&a) == (n->kind == N_OR)) {
      *out = a;
      return 0;
    }
    return jx_eval(x, n->b, out);
  case N_NOT:
    if (jx_eval(x, n->a, &a))
      return -1;
    *out = jv_bool(!jv_truthy(&a));
    return 0;
  case N_NEG:
  case N_POS:
    if (jx_eval(x, n->a, &a))
      return -1;
    return jx_neg(x, n, &a, n->kind == N_NEG, out);
  case N_COND:
    if (jx_eval(x, n->a, &a))
      return -1;
    if (jv_truthy(&a))
      return jx_eval(x, n->b, out);
    if (n->c)
      return jx_eval(x, n->c, out);
    *out = jv_undef(NULL);
    return 0;
  case N_LIST:
  case N_TUPLE:
    return eval_seq(x, n, out);
  case N_DICT:
    return eval_dict(x, n, out);
  default:
    return jx_fail(x, n, "internal error: statement in expression position");
  }
}

int jx_eval(jctx *x, const jnode *n, jv *out) {
  if (jx_enter(x, n)) {
    jx_leave(x);
    return -1;
  }
  int rc = eval_node(x, n, out);
  jx_leave(x);
  return rc;
}
