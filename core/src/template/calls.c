/* Calls: arguments (with *sequence splats), macros and caller(), and the
 * global functions of transformers' environment (raise_exception,
 * strftime_now) and of Jinja's (range, dict, namespace). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/exec.h"

/* jinja2's sandbox: range() may not make more items than this. */
#define MAX_RANGE 100000

int jx_eval_args(jctx *x, const jnode *n, jargs *a) {
  a->npos = n->n;
  a->nkw = n->n2;
  a->kwn = n->names;
  /* "*seq" arguments expand in place: evaluate them first to count. */
  jv *splat = ja_alloc(&x->arena, (n->n + 1) * sizeof(jv));
  jv **spl_items = ja_alloc(&x->arena, (n->n + 1) * sizeof(jv *));
  size_t *spl_n = ja_alloc(&x->arena, (n->n + 1) * sizeof(size_t));
  if (!splat || !spl_items || !spl_n)
    return jx_oom(x, n);
  for (size_t i = 0; i < n->n; i++)
    if (n->list[i]->kind == N_SPLAT) {
      if (jx_eval(x, n->list[i]->a, &splat[i]))
        return -1;
      if (!jv_is_iterable(&splat[i]) || splat[i].kind == JV_UNDEF)
        return jx_fail(x, n->list[i], "argument after * must be an iterable, not %s",
                       jv_type_name(&splat[i]));
      if (jv_iter(x, n->list[i], &splat[i], &spl_items[i], &spl_n[i]))
        return -1;
      a->npos += spl_n[i] - 1;
    }
  a->pos = ja_alloc(&x->arena, (a->npos + 1) * sizeof(jv));
  a->kwv = ja_alloc(&x->arena, (n->n2 + 1) * sizeof(jv));
  if (!a->pos || !a->kwv)
    return jx_oom(x, n);
  for (size_t i = 0, k = 0; i < n->n; i++) {
    if (n->list[i]->kind == N_SPLAT) {
      for (size_t j = 0; j < spl_n[i]; j++)
        a->pos[k++] = spl_items[i][j];
    } else if (jx_eval(x, n->list[i], &a->pos[k++])) {
      return -1;
    }
  }
  for (size_t i = 0; i < n->n2; i++)
    if (jx_eval(x, n->list2[i], &a->kwv[i]))
      return -1;
  return 0;
}

int jx_render_into(jctx *x, jnode *const *body, size_t n, jv *out, const jnode *at) {
  jbuf tmp = jx_buf(x), *saved = x->out;
  x->out = &tmp;
  int rc = jx_exec_body(x, body, n);
  x->out = saved;
  if (rc == EX_ERR) {
    jb_free(&tmp);
    return -1;
  }
  return jx_take_str(x, at, &tmp, 0, out);
}

static int call_macro(jctx *x, const jnode *at, const struct jmacro *m, const jargs *a, jv *out) {
  const jnode *def = m->node;
  const char *mname = def->kind == N_MACRO ? def->str : "caller";
  if (x->depth >= MAX_CALL_DEPTH)
    return jx_fail(x, at, "macro calls nested too deeply (more than %d)", MAX_CALL_DEPTH);
  jframe *f = jx_frame_new(x, m->frame);
  if (!f)
    return jx_oom(x, at);
  /* jinja2's Macro.__call__: positionals first, then keywords for the
   * parameters after them; a keyword naming a filled one is an error. */
  int catch_varargs = def->flag & 1, catch_kwargs = def->flag & 2;
  if (a->npos > def->nnames && !catch_varargs)
    return jx_fail(x, at, "macro '%s' takes not more than %zu argument(s)", mname, def->nnames);
  int rc = 0;
  jframe *saved = x->frame;
  x->frame = f;
  jdict *kw = catch_kwargs ? jd_new(&x->arena) : NULL;
  if (catch_kwargs && !kw)
    rc = jx_oom(x, at);
  for (size_t k = 0; k < a->nkw && !rc; k++) {
    size_t p = a->npos;
    while (p < def->nnames && strcmp(def->names[p], a->kwn[k]) != 0)
      p++;
    if (p >= def->nnames) {
      if (!catch_kwargs)
        rc = jx_fail(x, at, "macro '%s' takes no keyword argument '%s'", mname, a->kwn[k]);
      else if (jd_set(&x->arena, kw, a->kwn[k], strlen(a->kwn[k]), a->kwv[k]))
        rc = jx_oom(x, at);
    }
  }
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
      rc = jx_eval(x, def->list2[p], &v);
    if (!rc && jx_frame_set(x, f, def->names[p], v))
      rc = jx_oom(x, at);
  }
  if (!rc && catch_varargs) {
    size_t nv = a->npos > def->nnames ? a->npos - def->nnames : 0;
    jlist *l = jl_new(&x->arena, nv);
    if (!l)
      rc = jx_oom(x, at);
    else {
      l->type = JL_TUPLE;
      for (size_t i = 0; i < nv; i++)
        l->items[i] = a->pos[def->nnames + i];
      if (jx_frame_set(x, f, "varargs", jv_list(l)))
        rc = jx_oom(x, at);
    }
  }
  if (!rc && catch_kwargs) {
    jv kv = {.kind = JV_DICT};
    kv.u.m = kw;
    if (jx_frame_set(x, f, "kwargs", kv))
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
      if (jx_frame_set(x, f, "caller", cv))
        rc = jx_oom(x, at);
    }
  }
  x->depth++;
  if (!rc)
    rc = jx_render_into(x, def->list, def->n, out, at);
  x->depth--;
  x->frame = saved;
  return rc;
}

static int func_range(jctx *x, const jnode *at, const jargs *a, jv *out) {
  int64_t v[3] = {0, 0, 1};
  if (a->nkw)
    return jx_fail(x, at, "range() takes no keyword arguments");
  if (a->npos < 1 || a->npos > 3)
    return jx_fail(x, at, "range expected at most 3 arguments, got %zu", a->npos);
  for (size_t i = 0; i < a->npos; i++) {
    if (a->pos[i].kind == JV_BIGINT)
      return jx_fail(x, at, "range too big (more than %d items)", MAX_RANGE);
    if (!jv_is_int(&a->pos[i]))
      return jx_fail(x, at, "'%s' object cannot be interpreted as an integer",
                     jv_type_name(&a->pos[i]));
  }
  int64_t lo = 0, hi, st = 1;
  for (size_t i = 0; i < a->npos; i++)
    v[i] = a->pos[i].kind == JV_INT ? a->pos[i].u.i : a->pos[i].u.b;
  if (a->npos == 1) {
    hi = v[0];
  } else {
    lo = v[0];
    hi = v[1];
    st = a->npos == 3 ? v[2] : 1;
  }
  if (st == 0)
    return jx_fail(x, at, "range() arg 3 must not be zero");
  /* the item count in 128 bits: no bound or step overflows */
  __int128 cnt = 0, span = st > 0 ? (__int128)hi - lo : (__int128)lo - hi;
  __int128 ast = st > 0 ? (__int128)st : -(__int128)st;
  if (span > 0)
    cnt = (span + ast - 1) / ast;
  if (cnt > MAX_RANGE)
    return jx_fail(x, at, "range too big (more than %d items)", MAX_RANGE);
  if (jx_work(x, at, (size_t)cnt))
    return -1;
  jlist *l = jl_new(&x->arena, (size_t)cnt);
  if (!l)
    return jx_oom(x, at);
  l->type = JL_RANGE;
  l->r0 = lo;
  l->r1 = hi;
  l->rstep = st;
  for (int64_t i = 0; i < (int64_t)cnt; i++)
    l->items[i] = jv_int((int64_t)(lo + (__int128)i * st));
  *out = jv_list(l);
  return 0;
}

static int func_strftime(jctx *x, const jnode *at, const jargs *a, jv *out) {
  if (a->npos != 1 || a->pos[0].kind != JV_STR)
    return jx_fail(x, at, "strftime_now() takes one format string");
  const jv *f = &a->pos[0];
  if (memchr(f->u.s.p, '\0', f->u.s.n))
    return jx_fail(x, at, "strftime_now: embedded null character");
  struct tm tm;
  time_t now = x->now;
  if (!localtime_r(&now, &tm))
    return jx_fail(x, at, "strftime_now: cannot read the clock");
  char *fmt = ja_strdup(&x->arena, f->u.s.p, f->u.s.n);
  char buf[1024];
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

static int func_dict(jctx *x, const jnode *at, int id, const jargs *a, jv *out) {
  jdict *d = jd_new(&x->arena);
  if (!d)
    return jx_oom(x, at);
  const char *fname = id == F_DICT ? "dict" : "namespace";
  if (a->npos > 1)
    return jx_fail(x, at, "%s expected at most 1 argument, got %zu", fname, a->npos);
  for (size_t i = 0; i < a->npos; i++) {
    if (!jv_is_mapping(&a->pos[i]))
      return jx_fail(x, at, "unsupported construct '%s() of a %s'", fname,
                     jv_type_name(&a->pos[i]));
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

static int call_func(jctx *x, const jnode *at, int id, const jargs *a, jv *out) {
  switch (id) {
  case F_RAISE: {
    jv msg = a->npos ? a->pos[0] : jv_str("", 0), s;
    if (jv_stringify(x, at, &msg, &s))
      return -1;
    return jx_fail(x, at, "raise_exception: %.*s", (int)(s.u.s.n > 600 ? 600 : s.u.s.n), s.u.s.p);
  }
  case F_STRFTIME:
    return func_strftime(x, at, a, out);
  case F_NAMESPACE:
  case F_DICT:
    return func_dict(x, at, id, a, out);
  case F_RANGE:
    return func_range(x, at, a, out);
  case F_LIPSUM:
    return jx_fail(x, at, "unsupported construct 'lipsum()' (random text)");
  case F_CYCLER:
    return jx_fail(x, at, "unsupported construct 'cycler()'");
  case F_JOINER:
    return jx_fail(x, at, "unsupported construct 'joiner()'");
  }
  return jx_fail(x, at, "internal error: function %d", id);
}

int jx_call_value(jctx *x, const jnode *at, const jv *fn, const jargs *a, jv *out) {
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
