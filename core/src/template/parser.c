/* Parser of the Jinja subset: statements (if / for / set / macro / call /
 * break / continue / generation) and the template body; the token helpers
 * the expression parser (parse_expr.c) shares. A tag outside the subset is
 * refused with its name and position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/parse.h"

int jp_fail(parser *P, const jtok *at, const char *fmt, ...) {
  if (P->failed)
    return -1;
  P->failed = 1;
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fsdpc__fail(P->err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s", P->t->origin, at->line, at->col, msg);
  return -1;
}

jtok *jp_cur(parser *P) {
  return &P->tk[P->i];
}
jtok *jp_peek(parser *P, size_t k) {
  return &P->tk[P->i + k < P->n ? P->i + k : P->n - 1];
}
int jp_is_op(const jtok *k, const char *op) {
  return k->kind == TK_OP && k->len == strlen(op) && memcmp(k->str, op, k->len) == 0;
}
int jp_is_name(const jtok *k, const char *name) {
  return k->kind == TK_NAME && k->len == strlen(name) && memcmp(k->str, name, k->len) == 0;
}
void jp_advance(parser *P) {
  if (P->i + 1 < P->n)
    P->i++;
}
const char *jp_tok_desc(const jtok *k, char *buf, size_t cap) {
  switch (k->kind) {
  case TK_EOF:
    return "end of template";
  case TK_TEXT:
    return "template text";
  case TK_VAR_BEGIN:
    return "'{{'";
  case TK_VAR_END:
    return "'}}'";
  case TK_BLOCK_BEGIN:
    return "'{%'";
  case TK_BLOCK_END:
    return "'%}'";
  case TK_STRING:
    return "a string";
  case TK_INT:
  case TK_FLOAT:
    return "a number";
  default:
    snprintf(buf, cap, "'%.*s'", (int)(k->len > 40 ? 40 : k->len), k->str);
    return buf;
  }
}
int jp_expect_op(parser *P, const char *op) {
  if (!jp_is_op(jp_cur(P), op)) {
    char b[64];
    return jp_fail(P, jp_cur(P), "expected '%s', found %s", op,
                   jp_tok_desc(jp_cur(P), b, sizeof b));
  }
  jp_advance(P);
  return 0;
}
int jp_expect_kind(parser *P, int kind, const char *what) {
  if (jp_cur(P)->kind != kind) {
    char b[64];
    return jp_fail(P, jp_cur(P), "expected %s, found %s", what,
                   jp_tok_desc(jp_cur(P), b, sizeof b));
  }
  jp_advance(P);
  return 0;
}

jnode *jp_mk(parser *P, int kind, const jtok *at) {
  jnode *n = ja_alloc(&P->t->arena, sizeof *n);
  if (!n) {
    jp_fail(P, at, "out of memory");
    return NULL;
  }
  n->kind = (uint8_t)kind;
  n->line = at->line;
  n->col = at->col;
  return n;
}

int jp_nv_push(parser *P, nvec *v, jnode *x, const char *name) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    jnode **np = realloc(v->p, cap * sizeof *np);
    const char **nn = realloc(v->names, cap * sizeof *nn);
    if (np)
      v->p = np;
    if (nn)
      v->names = nn;
    if (!np || !nn)
      return jp_fail(P, jp_cur(P), "out of memory");
    v->cap = cap;
  }
  v->p[v->n] = x;
  v->names[v->n] = name;
  v->n++;
  return 0;
}
/* Moves the vector into the arena. */
jnode **jp_nv_take(parser *P, nvec *v, const char ***names) {
  jnode **out = NULL;
  if (v->n) {
    out = ja_alloc(&P->t->arena, v->n * sizeof *out);
    if (out)
      memcpy(out, v->p, v->n * sizeof *out);
    if (names) {
      *names = ja_alloc(&P->t->arena, v->n * sizeof **names);
      if (*names)
        memcpy(*names, v->names, v->n * sizeof **names);
    }
    if (!out || (names && !*names))
      jp_fail(P, jp_cur(P), "out of memory");
  } else if (names) {
    *names = NULL;
  }
  free(v->p);
  free(v->names);
  memset(v, 0, sizeof *v);
  return out;
}

const char *jp_name_dup(parser *P, const jtok *k) {
  return ja_strdup(&P->t->arena, k->str, k->len);
}

/* ---- statements ---- */

static int parse_body(parser *P, const char *const *ends, jnode ***body, size_t *n,
                      const jtok *opener);

static int end_tag(parser *P) {
  return jp_expect_kind(P, TK_BLOCK_END, "'%}'");
}

static int at_end_name(parser *P, const char *const *ends) {
  if (jp_cur(P)->kind != TK_BLOCK_BEGIN || !ends)
    return 0;
  jtok *nm = jp_peek(P, 1);
  for (size_t e = 0; ends[e]; e++)
    if (jp_is_name(nm, ends[e]))
      return 1;
  return 0;
}

static jnode *parse_if(parser *P, jtok *at) {
  static const char *const ends[] = {"elif", "else", "endif", NULL};
  jnode *n = jp_mk(P, N_IF, at);
  if (!n)
    return NULL;
  n->a = jp_parse_expr(P);
  if (!n->a || end_tag(P) || parse_body(P, ends, &n->list, &n->n, at))
    return NULL;
  /* at {% elif / else / endif */
  jp_advance(P);
  jtok *kw = jp_cur(P);
  jp_advance(P);
  if (jp_is_name(kw, "elif")) {
    jnode *e = parse_if(P, kw);
    if (!e)
      return NULL;
    n->list2 = ja_alloc(&P->t->arena, sizeof *n->list2);
    if (!n->list2) {
      jp_fail(P, kw, "out of memory");
      return NULL;
    }
    n->list2[0] = e;
    n->n2 = 1;
    return n; /* the nested if consumed endif */
  }
  if (jp_is_name(kw, "else")) {
    static const char *const ends2[] = {"endif", NULL};
    if (end_tag(P) || parse_body(P, ends2, &n->list2, &n->n2, at))
      return NULL;
    jp_advance(P);
    jp_advance(P);
  }
  return end_tag(P) ? NULL : n;
}

static jnode *parse_for(parser *P, jtok *at) {
  jnode *n = jp_mk(P, N_FOR, at);
  if (!n)
    return NULL;
  nvec targets = {0};
  for (;;) {
    jtok *nm = jp_cur(P);
    if (nm->kind != TK_NAME) {
      char b[64];
      jp_fail(P, nm, "expected a loop variable name, found %s", jp_tok_desc(nm, b, sizeof b));
      jp_nv_take(P, &targets, NULL);
      return NULL;
    }
    if (jp_nv_push(P, &targets, NULL, jp_name_dup(P, nm)))
      return NULL;
    jp_advance(P);
    if (!jp_is_op(jp_cur(P), ","))
      break;
    jp_advance(P);
  }
  n->nnames = targets.n;
  jp_nv_take(P, &targets, &n->names);
  if (P->failed)
    return NULL;
  if (!jp_is_name(jp_cur(P), "in")) {
    char b[64];
    jp_fail(P, jp_cur(P), "expected 'in' in a for tag, found %s",
            jp_tok_desc(jp_cur(P), b, sizeof b));
    return NULL;
  }
  jp_advance(P);
  n->a = jp_parse_tuple_expr(P, 0);
  if (!n->a)
    return NULL;
  if (jp_is_name(jp_cur(P), "if")) {
    jp_advance(P);
    n->b = jp_parse_expr(P);
    if (!n->b)
      return NULL;
  }
  if (jp_is_name(jp_cur(P), "recursive")) {
    jp_fail(P, jp_cur(P), "unsupported construct 'recursive'");
    return NULL;
  }
  static const char *const ends[] = {"else", "endfor", NULL};
  P->loops++;
  int rc = end_tag(P) || parse_body(P, ends, &n->list, &n->n, at);
  P->loops--;
  if (rc)
    return NULL;
  jp_advance(P);
  if (jp_is_name(jp_cur(P), "else")) {
    jp_advance(P);
    static const char *const ends2[] = {"endfor", NULL};
    if (end_tag(P) || parse_body(P, ends2, &n->list2, &n->n2, at))
      return NULL;
    jp_advance(P);
  }
  jp_advance(P); /* endfor */
  return end_tag(P) ? NULL : n;
}

static jnode *parse_set(parser *P, jtok *at) {
  jtok *nm = jp_cur(P);
  if (nm->kind != TK_NAME) {
    char b[64];
    jp_fail(P, nm, "expected a variable name after 'set', found %s", jp_tok_desc(nm, b, sizeof b));
    return NULL;
  }
  jnode *n = jp_mk(P, N_SET, at);
  if (!n)
    return NULL;
  n->str = jp_name_dup(P, nm);
  n->len = nm->len;
  jp_advance(P);
  if (jp_is_op(jp_cur(P), ".")) { /* set ns.attr = ... */
    jp_advance(P);
    jtok *attr = jp_cur(P);
    if (attr->kind != TK_NAME) {
      jp_fail(P, attr, "expected an attribute name after '.'");
      return NULL;
    }
    n->names = ja_alloc(&P->t->arena, sizeof *n->names);
    if (!n->names) {
      jp_fail(P, attr, "out of memory");
      return NULL;
    }
    n->names[0] = jp_name_dup(P, attr);
    n->nnames = 1;
    n->flag = 1;
    jp_advance(P);
  } else if (jp_is_op(jp_cur(P), ",")) { /* set a, b = ... */
    nvec targets = {0};
    if (jp_nv_push(P, &targets, NULL, n->str))
      return NULL;
    while (jp_is_op(jp_cur(P), ",")) {
      jp_advance(P);
      jtok *t = jp_cur(P);
      if (t->kind != TK_NAME) {
        jp_fail(P, t, "expected a variable name in a 'set' with several targets");
        jp_nv_take(P, &targets, NULL);
        return NULL;
      }
      if (jp_nv_push(P, &targets, NULL, jp_name_dup(P, t)))
        return NULL;
      jp_advance(P);
    }
    n->nnames = targets.n;
    jp_nv_take(P, &targets, &n->names);
    n->flag = 2;
    if (P->failed)
      return NULL;
  }
  if (jp_is_op(jp_cur(P), "=")) {
    jp_advance(P);
    n->a = jp_parse_tuple_expr(P, 1);
    if (!n->a || end_tag(P))
      return NULL;
    return n;
  }
  if (n->flag) {
    jp_fail(P, jp_cur(P), "expected '=' after the targets of 'set'");
    return NULL;
  }
  static const char *const ends[] = {"endset", NULL};
  n->kind = N_SETBLOCK;
  if (jp_is_op(jp_cur(P), "|")) { /* {% set x | f %}...{% endset %} */
    jp_advance(P);
    if (!(n->a = jp_parse_block_filters(P)))
      return NULL;
  }
  if (end_tag(P) || parse_body(P, ends, &n->list, &n->n, at))
    return NULL;
  jp_advance(P);
  jp_advance(P);
  return end_tag(P) ? NULL : n;
}

static jnode *parse_filterblock(parser *P, jtok *at) {
  jnode *n = jp_mk(P, N_FILTERBLOCK, at);
  static const char *const ends[] = {"endfilter", NULL};
  if (!n || !(n->a = jp_parse_block_filters(P)) || end_tag(P) ||
      parse_body(P, ends, &n->list, &n->n, at))
    return NULL;
  jp_advance(P);
  jp_advance(P);
  return end_tag(P) ? NULL : n;
}

static jnode *parse_macro(parser *P, jtok *at) {
  jtok *nm = jp_cur(P);
  if (nm->kind != TK_NAME) {
    jp_fail(P, nm, "expected a macro name");
    return NULL;
  }
  jnode *n = jp_mk(P, N_MACRO, at);
  if (!n)
    return NULL;
  n->str = jp_name_dup(P, nm);
  n->len = nm->len;
  jp_advance(P);
  if (jp_expect_op(P, "("))
    return NULL;
  nvec params = {0}, defaults = {0};
  while (!jp_is_op(jp_cur(P), ")")) {
    jtok *p = jp_cur(P);
    if (p->kind != TK_NAME) {
      jp_fail(P, p, "expected a parameter name");
      goto fail;
    }
    jnode *def = NULL;
    jp_advance(P);
    if (jp_is_op(jp_cur(P), "=")) {
      jp_advance(P);
      def = jp_parse_expr(P);
      if (!def)
        goto fail;
    } else if (defaults.n && defaults.p[defaults.n - 1]) {
      jp_fail(P, p, "parameter without a default after one with a default");
      goto fail;
    }
    if (jp_nv_push(P, &params, NULL, jp_name_dup(P, p)) || jp_nv_push(P, &defaults, def, NULL))
      goto fail;
    if (!jp_is_op(jp_cur(P), ","))
      break;
    jp_advance(P);
  }
  if (jp_expect_op(P, ")"))
    goto fail;
  n->nnames = params.n;
  jp_nv_take(P, &params, &n->names);
  n->n2 = defaults.n;
  n->list2 = jp_nv_take(P, &defaults, NULL);
  static const char *const ends[] = {"endmacro", NULL};
  int loops = P->loops;
  uint8_t *flags = P->macro_flags;
  P->loops = 0;
  P->macro_flags = &n->flag; /* the body's use of varargs / kwargs */
  int rc = end_tag(P) || parse_body(P, ends, &n->list, &n->n, at);
  P->loops = loops;
  P->macro_flags = flags;
  if (rc)
    return NULL;
  jp_advance(P);
  jp_advance(P);
  if (jp_cur(P)->kind == TK_NAME)
    jp_advance(P);
  return end_tag(P) ? NULL : n;
fail:
  jp_nv_take(P, &params, NULL);
  jp_nv_take(P, &defaults, NULL);
  return NULL;
}

static jnode *parse_callblock(parser *P, jtok *at) {
  if (jp_is_op(jp_cur(P), "(")) {
    jp_fail(P, jp_cur(P), "unsupported construct 'call with caller arguments'");
    return NULL;
  }
  jnode *n = jp_mk(P, N_CALLBLOCK, at);
  if (!n)
    return NULL;
  n->a = jp_parse_expr(P);
  if (!n->a)
    return NULL;
  if (n->a->kind != N_CALL) {
    jp_fail(P, at, "expected a macro call after 'call'");
    return NULL;
  }
  static const char *const ends[] = {"endcall", NULL};
  int loops = P->loops;
  P->loops = 0;
  int rc = end_tag(P) || parse_body(P, ends, &n->list, &n->n, at);
  P->loops = loops;
  if (rc)
    return NULL;
  jp_advance(P);
  jp_advance(P);
  return end_tag(P) ? NULL : n;
}

static jnode *parse_statement(parser *P) {
  jtok *at = jp_cur(P); /* {% */
  jp_advance(P);
  jtok *kw = jp_cur(P);
  if (kw->kind != TK_NAME) {
    char b[64];
    jp_fail(P, kw, "expected a tag name after '{%%', found %s", jp_tok_desc(kw, b, sizeof b));
    return NULL;
  }
  jp_advance(P);
  if (jp_is_name(kw, "if"))
    return parse_if(P, kw);
  if (jp_is_name(kw, "for"))
    return parse_for(P, kw);
  if (jp_is_name(kw, "set"))
    return parse_set(P, kw);
  if (jp_is_name(kw, "macro"))
    return parse_macro(P, kw);
  if (jp_is_name(kw, "call"))
    return parse_callblock(P, kw);
  if (jp_is_name(kw, "break") || jp_is_name(kw, "continue")) {
    if (!P->loops) {
      jp_fail(P, kw, "'%.*s' outside a for loop", (int)kw->len, kw->str);
      return NULL;
    }
    jnode *n = jp_mk(P, jp_is_name(kw, "break") ? N_BREAK : N_CONTINUE, kw);
    return !n || end_tag(P) ? NULL : n;
  }
  if (jp_is_name(kw, "filter"))
    return parse_filterblock(P, kw);
  if (jp_is_name(kw, "generation")) {
    jnode *n = jp_mk(P, N_GENERATION, kw);
    static const char *const ends[] = {"endgeneration", NULL};
    if (!n || end_tag(P) || parse_body(P, ends, &n->list, &n->n, kw))
      return NULL;
    jp_advance(P);
    jp_advance(P);
    P->t->has_generation = 1;
    return end_tag(P) ? NULL : n;
  }
  (void)at;
  jp_fail(P, kw, "unsupported construct '%.*s'", (int)(kw->len > 60 ? 60 : kw->len), kw->str);
  return NULL;
}

/* Parses statements until a {% NAME %} with NAME in ends (left unconsumed)
 * or the end of the template (an error when ends is non-NULL). */
static int parse_body(parser *P, const char *const *ends, jnode ***body, size_t *n,
                      const jtok *opener) {
  nvec v = {0};
  if (++P->depth > MAX_DEPTH) {
    jp_fail(P, jp_cur(P), "blocks nested too deeply (more than %d levels)", MAX_DEPTH);
    return -1;
  }
  for (;;) {
    jtok *k = jp_cur(P);
    jnode *x = NULL;
    if (k->kind == TK_EOF) {
      if (ends) {
        char want[64];
        snprintf(want, sizeof want, "%s", ends[0]);
        for (size_t e = 0; ends[e]; e++)
          if (strncmp(ends[e], "end", 3) == 0)
            snprintf(want, sizeof want, "%s", ends[e]);
        jp_fail(P, opener, "'%.*s' is never closed (missing {%% %s %%})", (int)opener->len,
                opener->str, want);
        goto fail;
      }
      break;
    }
    if (at_end_name(P, ends))
      break;
    if (k->kind == TK_TEXT) {
      x = jp_mk(P, N_TEXT, k);
      if (!x)
        goto fail;
      x->str = k->str;
      x->len = k->len;
      jp_advance(P);
    } else if (k->kind == TK_VAR_BEGIN) {
      jp_advance(P);
      x = jp_mk(P, N_OUTPUT, k);
      if (!x)
        goto fail;
      x->a = jp_parse_tuple_expr(P, 1);
      if (!x->a || jp_expect_kind(P, TK_VAR_END, "'}}'"))
        goto fail;
    } else if (k->kind == TK_BLOCK_BEGIN) {
      jtok *nm = jp_peek(P, 1);
      if (nm->kind == TK_NAME &&
          (strncmp(nm->str, "end", 3) == 0 || jp_is_name(nm, "else") || jp_is_name(nm, "elif"))) {
        jp_fail(P, nm, "unexpected '%.*s'", (int)(nm->len > 40 ? 40 : nm->len), nm->str);
        goto fail;
      }
      x = parse_statement(P);
      if (!x)
        goto fail;
    } else {
      char b[64];
      jp_fail(P, k, "unexpected %s", jp_tok_desc(k, b, sizeof b));
      goto fail;
    }
    if (jp_nv_push(P, &v, x, NULL))
      goto fail;
  }
  P->depth--;
  *n = v.n;
  *body = jp_nv_take(P, &v, NULL);
  return P->failed ? -1 : 0;
fail:
  jp_nv_take(P, &v, NULL);
  return -1;
}

fsdpc_status fsdpc__jinja_parse(const char *src, size_t len, const char *origin, fsdpc_jinja **out,
                                fsdpc_err *err) {
  *out = NULL;
  fsdpc_jinja *t = calloc(1, sizeof *t);
  if (!t)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", origin);
  t->origin = strdup(origin ? origin : "template");
  t->src = fsdpc__jinja_normalise(src ? src : "", src ? len : 0, &t->src_len);
  if (!t->origin || !t->src) {
    fsdpc__jinja_destroy(t);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", origin);
  }
  jtok *toks = NULL;
  size_t ntok = 0;
  fsdpc_status st = fsdpc__jinja_lex(t, &toks, &ntok, err);
  if (st != FSDPC_OK) {
    fsdpc__jinja_destroy(t);
    return st;
  }
  parser P = {.t = t, .tk = toks, .n = ntok, .err = err};
  int rc = parse_body(&P, NULL, &t->body, &t->n_body, NULL);
  for (size_t i = 0; i < t->n_body && !rc; i++)
    rc = jp_check_height(&P, t->body[i]);
  free(toks);
  if (rc || P.failed) {
    fsdpc__jinja_destroy(t);
    return err ? err->status : FSDPC_INVALID_USAGE;
  }
  *out = t;
  return FSDPC_OK;
}

void fsdpc__jinja_destroy(fsdpc_jinja *t) {
  if (!t)
    return;
  ja_free(&t->arena);
  free(t->origin);
  free(t->src);
  free(t);
}

int fsdpc__jinja_has_generation(const fsdpc_jinja *t) {
  return t && t->has_generation;
}
