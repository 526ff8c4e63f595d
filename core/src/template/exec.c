/* Statements of the Jinja subset and the render.
 *
 * Scoping follows Jinja: a for loop gives each iteration a fresh frame
 * (a "set" inside a loop is gone after the iteration; namespace() is how
 * templates carry state out), "if" shares its frame, a macro call gets a
 * frame whose parent is the frame the macro was defined in. Globals come
 * from the caller's cJSON object, then the built-in functions. */
#include <stdlib.h>
#include <string.h>

#include "template/exec.h"

#define DEFAULT_MAX_OUTPUT ((size_t)256 << 20)
#define DEFAULT_MAX_MEMORY ((size_t)1 << 30)
#define DEFAULT_MAX_STEPS 200000000ull

static int emit(jctx *x, const jnode *at, const char *s, size_t n) {
  if (jb_put(x->out, s, n))
    return jx_oom(x, at);
  if (x->out == x->main_out) {
    if (x->out->n > x->max_output)
      return jx_fail(x, at, "rendered text exceeds %zu bytes", x->max_output);
    if (x->want_ends && n && jb_put(&x->ends, (const char *)&x->out->n, sizeof x->out->n))
      return jx_oom(x, at);
  }
  return jx_work(x, at, n);
}

static int emit_value(jctx *x, const jnode *at, const jv *v) {
  if (v->kind == JV_STR)
    return emit(x, at, v->u.s.p, v->u.s.n);
  jbuf b = jx_buf(x);
  int rc = jv_to_str(x, at, v, &b) || emit(x, at, b.p ? b.p : "", b.n);
  jb_free(&b);
  return rc;
}

static int bind_targets(jctx *x, const jnode *n, jframe *f, const jv *item) {
  if (n->nnames == 1)
    return jx_frame_set(x, f, n->names[0], *item) ? jx_oom(x, n) : 0;
  jv *parts;
  size_t np;
  if (!jv_is_iterable(item) || item->kind == JV_UNDEF)
    return jx_fail(x, n, "cannot unpack non-iterable %s object", jv_type_name(item));
  jv copy = *item;
  if (jv_iter(x, n, &copy, &parts, &np))
    return -1;
  if (np != n->nnames)
    return jx_fail(x, n, "%s values to unpack (expected %zu, got %zu)",
                   np > n->nnames ? "too many" : "not enough", n->nnames, np);
  for (size_t i = 0; i < np; i++)
    if (jx_frame_set(x, f, n->names[i], parts[i]))
      return jx_oom(x, n);
  return 0;
}

static int exec_for(jctx *x, const jnode *n) {
  jv seq;
  if (jx_eval(x, n->a, &seq))
    return EX_ERR;
  jv *items;
  size_t cnt;
  if (seq.kind == JV_NONE || !jv_is_iterable(&seq))
    return jx_fail(x, n->a, "'%s' object is not iterable", jv_type_name(&seq));
  if (jv_iter(x, n->a, &seq, &items, &cnt))
    return EX_ERR;
  jframe *outer = x->frame;
  if (n->b) { /* "for x in y if cond": filter first, so loop.* count what is kept */
    jv *kept = ja_alloc(&x->arena, (cnt + 1) * sizeof *kept);
    if (!kept)
      return jx_oom(x, n);
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
      jframe *f = jx_frame_new(x, outer);
      if (!f)
        return jx_oom(x, n);
      x->frame = f;
      jv c;
      int rc = bind_targets(x, n, f, &items[i]) || jx_eval(x, n->b, &c);
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
  jv *changed = ja_alloc(&x->arena, sizeof *changed);
  int *changed_set = ja_alloc(&x->arena, sizeof *changed_set);
  if (!lp || !changed || !changed_set)
    return jx_oom(x, n);
  lp->length = (int64_t)cnt;
  lp->items = items;
  lp->changed_last = changed;
  lp->changed_set = changed_set;
  for (size_t i = 0; i < cnt; i++) {
    if (jx_work(x, n, 64)) /* one step per iteration, empty bodies included */
      return EX_ERR;
    jframe *f = jx_frame_new(x, outer);
    jloop *li = ja_alloc(&x->arena, sizeof *li);
    if (!f || !li)
      return jx_oom(x, n);
    *li = *lp;
    li->index0 = (int64_t)i;
    jv lv = {.kind = JV_LOOP};
    lv.u.loop = li;
    if (jx_frame_set(x, f, "loop", lv))
      return jx_oom(x, n);
    if (bind_targets(x, n, f, &items[i]))
      return EX_ERR;
    x->frame = f;
    int rc = jx_exec_body(x, n->list, n->n);
    x->frame = outer;
    if (rc == EX_ERR)
      return EX_ERR;
    if (rc == EX_BREAK)
      break;
  }
  if (cnt == 0 && n->n2)
    return jx_exec_body(x, n->list2, n->n2);
  return EX_OK;
}

/* The body rendered to a string, then through the block's filter chain. */
static int filtered_block(jctx *x, const jnode *n, jv *out) {
  if (jx_render_into(x, n->list, n->n, out, n))
    return -1;
  if (!n->a)
    return 0;
  jv saved = x->block;
  x->block = *out;
  int rc = jx_eval(x, n->a, out);
  x->block = saved;
  return rc;
}

static int exec_set(jctx *x, const jnode *n) {
  jv v;
  if (jx_eval(x, n->a, &v))
    return EX_ERR;
  if (n->flag == 1) { /* set ns.attr = ... */
    jv ns = jx_lookup(x, n->str);
    if (ns.kind != JV_NS)
      return jx_fail(x, n, "cannot assign attribute on non-namespace object ('%s' is %s)", n->str,
                     jv_type_name(&ns));
    return jd_set(&x->arena, ns.u.m, n->names[0], strlen(n->names[0]), v) ? jx_oom(x, n) : EX_OK;
  }
  if (n->flag == 2) /* set a, b = ... */
    return bind_targets(x, n, x->frame, &v) ? EX_ERR : EX_OK;
  return jx_frame_set(x, x->frame, n->str, v) ? jx_oom(x, n) : EX_OK;
}

static int exec_stmt(jctx *x, const jnode *n) {
  jv v;
  switch (n->kind) {
  case N_TEXT:
    return emit(x, n, n->str, n->len) ? EX_ERR : EX_OK;
  case N_OUTPUT:
    if (jx_eval(x, n->a, &v))
      return EX_ERR;
    return emit_value(x, n, &v) ? EX_ERR : EX_OK;
  case N_IF:
    if (jx_eval(x, n->a, &v))
      return EX_ERR;
    if (jv_truthy(&v))
      return jx_exec_body(x, n->list, n->n);
    return jx_exec_body(x, n->list2, n->n2);
  case N_FOR:
    return exec_for(x, n);
  case N_SET:
    return exec_set(x, n);
  case N_SETBLOCK:
    if (filtered_block(x, n, &v))
      return EX_ERR;
    return jx_frame_set(x, x->frame, n->str, v) ? jx_oom(x, n) : EX_OK;
  case N_FILTERBLOCK:
    if (filtered_block(x, n, &v))
      return EX_ERR;
    return emit_value(x, n, &v) ? EX_ERR : EX_OK;
  case N_MACRO: {
    struct jmacro *m = ja_alloc(&x->arena, sizeof *m);
    if (!m)
      return jx_oom(x, n);
    m->node = n;
    m->frame = x->frame;
    v = (jv){.kind = JV_MACRO};
    v.u.macro = m;
    return jx_frame_set(x, x->frame, n->str, v) ? jx_oom(x, n) : EX_OK;
  }
  case N_CALLBLOCK:
    x->pending_caller = n;
    x->caller_frame = x->frame;
    if (jx_eval(x, n->a, &v))
      return EX_ERR;
    x->pending_caller = NULL;
    return emit_value(x, n, &v) ? EX_ERR : EX_OK;
  case N_BREAK:
    return EX_BREAK;
  case N_CONTINUE:
    return EX_CONTINUE;
  case N_GENERATION: {
    size_t begin = x->out->n;
    int rc = jx_exec_body(x, n->list, n->n);
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

int jx_exec_body(jctx *x, jnode *const *body, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = jx_enter(x, body[i]) ? EX_ERR : exec_stmt(x, body[i]);
    jx_leave(x);
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
  if (opts && opts->ends) {
    *opts->ends = NULL;
    *opts->n_ends = 0;
  }
  if (vars && !cJSON_IsObject(vars))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: render variables must be a JSON object",
                       t->origin);
  jctx x = {.t = t, .vars = vars, .err = err};
  x.mem.limit = opts && opts->max_memory ? opts->max_memory : DEFAULT_MAX_MEMORY;
  x.arena.mem = &x.mem;
  jbuf buf = jx_buf(&x);
  x.out = x.main_out = &buf;
  x.now = opts && opts->now ? opts->now : time(NULL);
  x.max_output = opts && opts->max_output ? opts->max_output : DEFAULT_MAX_OUTPUT;
  x.max_steps = opts && opts->max_steps ? opts->max_steps : DEFAULT_MAX_STEPS;
  x.want_ends = opts && opts->ends;
  x.ends.mem = &x.mem;
  x.root = jx_frame_new(&x, NULL);
  x.frame = x.root;
  int rc = x.root ? jx_exec_body(&x, t->body, t->n_body) : jx_oom(&x, NULL);
  if (rc == EX_OK && !x.failed && !buf.p && jb_put(&buf, "", 0))
    rc = jx_oom(&x, NULL);
  ja_free(&x.arena);
  if (rc == EX_ERR || x.failed) {
    jb_free(&buf);
    free(x.gen.p);
    free(x.ends.p);
    return err && err->status != FSDPC_OK ? err->status : FSDPC_INVALID_USAGE;
  }
  *out = buf.p; /* the caller owns it now; the budget ends with the render */
  if (out_len)
    *out_len = buf.n;
  if (opts && opts->gen) {
    *opts->gen = (fsdpc_jinja_span *)x.gen.p;
    *opts->n_gen = x.gen.n / sizeof(fsdpc_jinja_span);
  } else {
    free(x.gen.p);
  }
  if (opts && opts->ends) {
    *opts->ends = (size_t *)x.ends.p;
    *opts->n_ends = x.ends.n / sizeof(size_t);
  } else {
    free(x.ends.p);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__jinja_render(const fsdpc_jinja *t, const cJSON *vars, char **out,
                                 size_t *out_len, fsdpc_err *err) {
  return fsdpc__jinja_render_opts(t, vars, NULL, out, out_len, err);
}
