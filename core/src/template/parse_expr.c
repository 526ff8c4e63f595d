/* Expressions of the Jinja subset, by recursive descent with Jinja's
 * precedence, lowest first: "x if c else y", or, and, not, comparisons
 * (== != < > <= >= in, not in), + -, ~, * / // %, **, unary - +, then
 * primaries with postfix .attr [item] [a:b:c] (call) and the filter (|f)
 * and test (is t) chains. Filters and tests are resolved to ids here, so
 * an unknown one is refused before rendering. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/parse.h"

static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, int with_filter);

/* (args) after '(' was seen: positional into pos, keyword into kw. */
static int parse_args(parser *P, nvec *pos, nvec *kw) {
  if (jp_expect_op(P, "("))
    return -1;
  while (!jp_is_op(jp_cur(P), ")")) {
    if (jp_is_op(jp_cur(P), "**"))
      return jp_fail(P, jp_cur(P), "unsupported construct '**kwargs'");
    if (jp_is_op(jp_cur(P), "*")) {
      if (kw->n)
        return jp_fail(P, jp_cur(P), "unsupported construct '*args after keyword arguments'");
      jnode *sp = jp_mk(P, N_SPLAT, jp_cur(P));
      jp_advance(P);
      if (!sp || !(sp->a = jp_parse_expr(P)) || jp_nv_push(P, pos, sp, NULL))
        return -1;
      if (!jp_is_op(jp_cur(P), ","))
        break;
      jp_advance(P);
      continue;
    }
    if (jp_cur(P)->kind == TK_NAME && jp_is_op(jp_peek(P, 1), "=")) {
      const char *nm = jp_name_dup(P, jp_cur(P));
      jp_advance(P);
      jp_advance(P);
      jnode *v = jp_parse_expr(P);
      if (!v || jp_nv_push(P, kw, v, nm))
        return -1;
    } else {
      if (kw->n)
        return jp_fail(P, jp_cur(P), "positional argument after keyword argument");
      jnode *v = jp_parse_expr(P);
      if (!v || jp_nv_push(P, pos, v, NULL))
        return -1;
    }
    if (!jp_is_op(jp_cur(P), ","))
      break;
    jp_advance(P);
  }
  return jp_expect_op(P, ")");
}

static jnode *finish_call_like(parser *P, jnode *n) {
  nvec pos = {0}, kw = {0};
  int rc = parse_args(P, &pos, &kw);
  n->n = pos.n;
  n->list = jp_nv_take(P, &pos, NULL);
  n->n2 = kw.n;
  n->list2 = jp_nv_take(P, &kw, &n->names);
  n->nnames = n->n2;
  return rc || P->failed ? NULL : n;
}

static jnode *parse_primary(parser *P) {
  jtok *k = jp_cur(P);
  jnode *n;
  if (k->kind == TK_NAME) {
    n = jp_mk(P, N_CONST, k);
    if (!n)
      return NULL;
    if (jp_is_name(k, "true") || jp_is_name(k, "True"))
      n->cval = jv_bool(1);
    else if (jp_is_name(k, "false") || jp_is_name(k, "False"))
      n->cval = jv_bool(0);
    else if (jp_is_name(k, "none") || jp_is_name(k, "None"))
      n->cval = jv_none();
    else {
      n->kind = N_NAME;
      n->str = jp_name_dup(P, k);
      n->len = k->len;
      if (P->macro_flags && jp_is_name(k, "varargs"))
        *P->macro_flags |= 1;
      if (P->macro_flags && jp_is_name(k, "kwargs"))
        *P->macro_flags |= 2;
    }
    jp_advance(P);
    return n;
  }
  if (k->kind == TK_STRING) {
    n = jp_mk(P, N_CONST, k);
    if (!n)
      return NULL;
    /* Adjacent string literals concatenate. */
    size_t total = 0, j = P->i;
    for (; j < P->n && P->tk[j].kind == TK_STRING; j++)
      total += P->tk[j].len;
    char *s = ja_alloc(&P->t->arena, total + 1);
    if (!s) {
      jp_fail(P, k, "out of memory");
      return NULL;
    }
    size_t o = 0;
    for (; P->i < j; P->i++) {
      memcpy(s + o, P->tk[P->i].str, P->tk[P->i].len);
      o += P->tk[P->i].len;
    }
    n->cval = jv_str(s, total);
    return n;
  }
  if (k->kind == TK_INT || k->kind == TK_FLOAT) {
    n = jp_mk(P, N_CONST, k);
    if (!n)
      return NULL;
    if (k->kind == TK_INT && k->str) { /* an integer beyond 64 bits: its digits */
      n->cval = (jv){.kind = JV_BIGINT};
      n->cval.u.s.p = k->str;
      n->cval.u.s.n = k->len;
    } else {
      n->cval = k->kind == TK_INT ? jv_int(k->ival) : jv_float(k->fval);
    }
    jp_advance(P);
    return n;
  }
  if (jp_is_op(k, "(")) {
    jp_advance(P);
    if (jp_is_op(jp_cur(P), ")")) {
      jp_advance(P);
      n = jp_mk(P, N_TUPLE, k);
      return n;
    }
    jnode *e = jp_parse_expr(P);
    if (!e)
      return NULL;
    if (jp_is_op(jp_cur(P), ",")) {
      nvec items = {0};
      if (jp_nv_push(P, &items, e, NULL))
        return NULL;
      while (jp_is_op(jp_cur(P), ",")) {
        jp_advance(P);
        if (jp_is_op(jp_cur(P), ")"))
          break;
        jnode *x = jp_parse_expr(P);
        if (!x || jp_nv_push(P, &items, x, NULL)) {
          jp_nv_take(P, &items, NULL);
          return NULL;
        }
      }
      n = jp_mk(P, N_TUPLE, k);
      if (!n)
        return NULL;
      n->n = items.n;
      n->list = jp_nv_take(P, &items, NULL);
      e = n;
    }
    return jp_expect_op(P, ")") ? NULL : e;
  }
  if (jp_is_op(k, "[") || jp_is_op(k, "{")) {
    int dict = jp_is_op(k, "{");
    const char *close = dict ? "}" : "]";
    jp_advance(P);
    nvec keys = {0}, vals = {0};
    while (!jp_is_op(jp_cur(P), close)) {
      jnode *x = jp_parse_expr(P);
      if (!x || jp_nv_push(P, &keys, x, NULL))
        goto lfail;
      if (dict) {
        if (jp_expect_op(P, ":"))
          goto lfail;
        jnode *v = jp_parse_expr(P);
        if (!v || jp_nv_push(P, &vals, v, NULL))
          goto lfail;
      }
      if (!jp_is_op(jp_cur(P), ","))
        break;
      jp_advance(P);
    }
    if (jp_expect_op(P, close))
      goto lfail;
    n = jp_mk(P, dict ? N_DICT : N_LIST, k);
    if (!n)
      goto lfail;
    n->n = keys.n;
    n->list = jp_nv_take(P, &keys, NULL);
    n->n2 = vals.n;
    n->list2 = jp_nv_take(P, &vals, NULL);
    return P->failed ? NULL : n;
  lfail:
    jp_nv_take(P, &keys, NULL);
    jp_nv_take(P, &vals, NULL);
    return NULL;
  }
  char b[64];
  jp_fail(P, k, "expected an expression, found %s", jp_tok_desc(k, b, sizeof b));
  return NULL;
}

static jnode *parse_subscript(parser *P, jnode *obj, jtok *at) {
  jp_advance(P); /* [ */
  jnode *parts[3] = {NULL, NULL, NULL};
  int slice = 0;
  for (int p = 0; p < 3; p++) {
    if (!jp_is_op(jp_cur(P), ":") && !jp_is_op(jp_cur(P), "]")) {
      parts[p] = jp_parse_expr(P);
      if (!parts[p])
        return NULL;
    }
    if (p < 2 && jp_is_op(jp_cur(P), ":")) {
      slice = 1;
      jp_advance(P);
      continue;
    }
    break;
  }
  if (jp_expect_op(P, "]"))
    return NULL;
  jnode *n = jp_mk(P, slice ? N_SLICE : N_ITEM, at);
  if (!n)
    return NULL;
  n->a = obj;
  n->b = parts[0];
  n->c = parts[1];
  n->d = parts[2];
  if (!slice && !parts[0]) {
    jp_fail(P, at, "empty subscript");
    return NULL;
  }
  return n;
}

static jnode *parse_postfix(parser *P, jnode *n) {
  for (;;) {
    jtok *k = jp_cur(P);
    if (jp_is_op(k, ".")) {
      jp_advance(P);
      jtok *nm = jp_cur(P);
      jnode *x;
      if (nm->kind == TK_NAME) {
        x = jp_mk(P, N_ATTR, k);
        if (!x)
          return NULL;
        x->str = jp_name_dup(P, nm);
        x->len = nm->len;
      } else if (nm->kind == TK_INT) {
        x = jp_mk(P, N_ITEM, k);
        if (!x)
          return NULL;
        x->b = jp_mk(P, N_CONST, nm);
        if (!x->b)
          return NULL;
        x->b->cval = jv_int(nm->ival);
      } else {
        char b[64];
        jp_fail(P, nm, "expected an attribute name after '.', found %s",
                jp_tok_desc(nm, b, sizeof b));
        return NULL;
      }
      jp_advance(P);
      x->a = n;
      n = x;
    } else if (jp_is_op(k, "[")) {
      n = parse_subscript(P, n, k);
      if (!n)
        return NULL;
    } else if (jp_is_op(k, "(")) {
      jnode *c = jp_mk(P, N_CALL, k);
      if (!c)
        return NULL;
      c->a = n;
      n = finish_call_like(P, c);
      if (!n)
        return NULL;
    } else {
      return n;
    }
  }
}

static int starts_test_arg(const jtok *k) {
  if (jp_is_name(k, "else") || jp_is_name(k, "or") || jp_is_name(k, "and"))
    return 0;
  return k->kind == TK_NAME || k->kind == TK_STRING || k->kind == TK_INT || k->kind == TK_FLOAT ||
         jp_is_op(k, "(") || jp_is_op(k, "[") || jp_is_op(k, "{");
}

/* A filter applied to n: the current token is the filter's name. */
static jnode *filter_call(parser *P, jnode *n) {
  jtok *nm = jp_cur(P);
  if (nm->kind != TK_NAME) {
    char b[64];
    jp_fail(P, nm, "expected a filter name after '|', found %s", jp_tok_desc(nm, b, sizeof b));
    return NULL;
  }
  /* An unknown filter fails when compiled, or (inside an if or a
   * conditional expression, as jinja2 defers it) when run:
   * jp_check_height decides. */
  int id = jf_filter_id(nm->str, nm->len);
  jnode *f = jp_mk(P, N_FILTER, nm);
  if (!f)
    return NULL;
  f->op = (uint8_t)id;
  f->a = n;
  if (!id) {
    f->str = jp_name_dup(P, nm);
    f->len = nm->len;
  }
  jp_advance(P);
  if (jp_is_op(jp_cur(P), "(") && !finish_call_like(P, f))
    return NULL;
  return f;
}

static jnode *parse_filter_expr(parser *P, jnode *n) {
  for (;;) {
    jtok *k = jp_cur(P);
    if (jp_is_op(k, "|")) {
      jp_advance(P);
      n = filter_call(P, n);
      if (!n)
        return NULL;
    } else if (jp_is_name(k, "is")) {
      jp_advance(P);
      int neg = 0;
      if (jp_is_name(jp_cur(P), "not")) {
        neg = 1;
        jp_advance(P);
      }
      jtok *nm = jp_cur(P);
      int id = 0;
      if (nm->kind == TK_NAME)
        id = jf_test_id(nm->str, nm->len);
      else if (jp_is_op(nm, "==") || jp_is_op(nm, "!=") || jp_is_op(nm, "<") || jp_is_op(nm, ">") ||
               jp_is_op(nm, "<=") || jp_is_op(nm, ">="))
        id = jf_test_id(nm->str, nm->len);
      if (!id && nm->kind != TK_NAME) {
        char b[64];
        jp_fail(P, nm, "expected a test name after 'is', found %s", jp_tok_desc(nm, b, sizeof b));
        return NULL;
      }
      jnode *t = jp_mk(P, N_TEST, nm);
      if (!t)
        return NULL;
      t->op = (uint8_t)id;
      if (!id) { /* unknown: as an unknown filter */
        t->str = jp_name_dup(P, nm);
        t->len = nm->len;
      }
      t->flag = (uint8_t)neg;
      t->a = n;
      jp_advance(P);
      if (jp_is_op(jp_cur(P), "(")) {
        if (!finish_call_like(P, t))
          return NULL;
      } else if (starts_test_arg(jp_cur(P))) {
        jnode *arg = parse_primary(P);
        if (!arg)
          return NULL;
        arg = parse_postfix(P, arg);
        if (!arg)
          return NULL;
        t->list = ja_alloc(&P->t->arena, sizeof *t->list);
        if (!t->list) {
          jp_fail(P, nm, "out of memory");
          return NULL;
        }
        t->list[0] = arg;
        t->n = 1;
      }
      n = t;
    } else if (jp_is_op(k, "(")) {
      jnode *c = jp_mk(P, N_CALL, k);
      if (!c)
        return NULL;
      c->a = n;
      n = finish_call_like(P, c);
      if (!n)
        return NULL;
    } else {
      return n;
    }
  }
}

static jnode *parse_unary(parser *P, int with_filter) {
  jtok *k = jp_cur(P);
  if (++P->depth > MAX_DEPTH) {
    jp_fail(P, k, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
    return NULL;
  }
  jnode *n;
  if (jp_is_op(k, "-") || jp_is_op(k, "+")) {
    jp_advance(P);
    n = jp_mk(P, jp_is_op(k, "-") ? N_NEG : N_POS, k);
    if (!n)
      return NULL;
    n->a = parse_unary(P, 0);
    if (!n->a)
      return NULL;
  } else {
    n = parse_primary(P);
  }
  if (n)
    n = parse_postfix(P, n);
  if (n && with_filter)
    n = parse_filter_expr(P, n);
  P->depth--;
  return n;
}

static jnode *binop(parser *P, int kind, int op, jtok *at, jnode *a, jnode *b) {
  if (!a || !b)
    return NULL;
  jnode *n = jp_mk(P, kind, at);
  if (!n)
    return NULL;
  n->op = (uint8_t)op;
  n->a = a;
  n->b = b;
  return n;
}

static jnode *parse_pow(parser *P) {
  jnode *a = parse_unary(P, 1);
  while (a && jp_is_op(jp_cur(P), "**")) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    a = binop(P, N_BINOP, OP_POW, k, a, parse_unary(P, 1));
  }
  return a;
}

static jnode *parse_math2(parser *P) {
  jnode *a = parse_pow(P);
  for (;;) {
    jtok *k = jp_cur(P);
    int op = jp_is_op(k, "*")    ? OP_MUL
             : jp_is_op(k, "/")  ? OP_DIV
             : jp_is_op(k, "//") ? OP_FLOORDIV
             : jp_is_op(k, "%")  ? OP_MOD
                                 : 0;
    if (!a || !op)
      return a;
    jp_advance(P);
    a = binop(P, N_BINOP, op, k, a, parse_pow(P));
  }
}

static jnode *parse_concat(parser *P) {
  jnode *a = parse_math2(P);
  while (a && jp_is_op(jp_cur(P), "~")) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    a = binop(P, N_BINOP, OP_CONCAT, k, a, parse_math2(P));
  }
  return a;
}

static jnode *parse_math1(parser *P) {
  jnode *a = parse_concat(P);
  for (;;) {
    jtok *k = jp_cur(P);
    int op = jp_is_op(k, "+") ? OP_ADD : jp_is_op(k, "-") ? OP_SUB : 0;
    if (!a || !op)
      return a;
    jp_advance(P);
    a = binop(P, N_BINOP, op, k, a, parse_concat(P));
  }
}

static int cmp_op(parser *P) {
  jtok *k = jp_cur(P);
  if (jp_is_op(k, "=="))
    return CMP_EQ;
  if (jp_is_op(k, "!="))
    return CMP_NE;
  if (jp_is_op(k, "<"))
    return CMP_LT;
  if (jp_is_op(k, "<="))
    return CMP_LE;
  if (jp_is_op(k, ">"))
    return CMP_GT;
  if (jp_is_op(k, ">="))
    return CMP_GE;
  if (jp_is_name(k, "in"))
    return CMP_IN;
  if (jp_is_name(k, "not") && jp_is_name(jp_peek(P, 1), "in"))
    return CMP_NOTIN;
  return 0;
}

static jnode *parse_compare(parser *P) {
  jnode *a = parse_math1(P);
  jnode *result = a, *left = a;
  int op;
  while (left && (op = cmp_op(P))) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    if (op == CMP_NOTIN)
      jp_advance(P);
    jnode *right = parse_math1(P);
    jnode *c = binop(P, N_CMP, op, k, left, right);
    if (!c)
      return NULL;
    /* a < b < c is (a < b) and (b < c), as in Python. */
    result = result == left ? c : binop(P, N_AND, 0, k, result, c);
    left = right;
  }
  return left ? result : NULL;
}

static jnode *parse_not(parser *P) {
  if (jp_is_name(jp_cur(P), "not")) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    if (++P->depth > MAX_DEPTH) {
      jp_fail(P, k, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
      return NULL;
    }
    jnode *n = jp_mk(P, N_NOT, k);
    if (n)
      n->a = parse_not(P);
    P->depth--;
    return n && n->a ? n : NULL;
  }
  return parse_compare(P);
}

static jnode *parse_and(parser *P) {
  jnode *a = parse_not(P);
  while (a && jp_is_name(jp_cur(P), "and")) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    a = binop(P, N_AND, 0, k, a, parse_not(P));
  }
  return a;
}

static jnode *parse_or(parser *P) {
  jnode *a = parse_and(P);
  while (a && jp_is_name(jp_cur(P), "or")) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    a = binop(P, N_OR, 0, k, a, parse_and(P));
  }
  return a;
}

jnode *jp_parse_expr(parser *P) {
  /* "a if b else c if d else ..." recurses here once per else */
  if (++P->depth > MAX_DEPTH) {
    jp_fail(P, jp_cur(P), "expression nested too deeply (more than %d levels)", MAX_DEPTH);
    return NULL;
  }
  jnode *a = parse_or(P);
  while (a && jp_is_name(jp_cur(P), "if")) {
    jtok *k = jp_cur(P);
    jp_advance(P);
    jnode *n = jp_mk(P, N_COND, k);
    if (!n)
      return NULL;
    n->b = a;
    n->a = parse_or(P);
    if (!n->a)
      return NULL;
    if (jp_is_name(jp_cur(P), "else")) {
      jp_advance(P);
      n->c = jp_parse_expr(P);
      if (!n->c)
        return NULL;
    }
    a = n;
  }
  P->depth--;
  return a;
}

/* An expression that may be a bare tuple: "a, b". */
jnode *jp_parse_tuple_expr(parser *P, int with_cond) {
  jtok *k = jp_cur(P);
  jnode *e = with_cond ? jp_parse_expr(P) : parse_or(P);
  if (!e || !jp_is_op(jp_cur(P), ","))
    return e;
  nvec items = {0};
  if (jp_nv_push(P, &items, e, NULL))
    return NULL;
  while (jp_is_op(jp_cur(P), ",")) {
    jp_advance(P);
    if (jp_cur(P)->kind == TK_VAR_END || jp_cur(P)->kind == TK_BLOCK_END ||
        jp_is_name(jp_cur(P), "if"))
      break;
    jnode *x = with_cond ? jp_parse_expr(P) : parse_or(P);
    if (!x || jp_nv_push(P, &items, x, NULL)) {
      jp_nv_take(P, &items, NULL);
      return NULL;
    }
  }
  jnode *n = jp_mk(P, N_TUPLE, k);
  if (!n)
    return NULL;
  n->n = items.n;
  n->list = jp_nv_take(P, &items, NULL);
  return n;
}

jnode *jp_parse_block_filters(parser *P) {
  jnode *leaf = jp_mk(P, N_CONST, jp_cur(P));
  if (!leaf)
    return NULL;
  leaf->flag = 1; /* the block's text */
  jnode *n = filter_call(P, leaf);
  while (n && jp_is_op(jp_cur(P), "|")) {
    jp_advance(P);
    n = filter_call(P, n);
  }
  return n;
}

/* ---- expression height ---- */

static void push_children(const jnode *n, jnode **stack, size_t *sp) {
  jnode *kids[4] = {n->a, n->b, n->c, n->d};
  for (int i = 0; i < 4; i++)
    if (kids[i])
      stack[(*sp)++] = kids[i];
  for (size_t i = 0; i < n->n; i++)
    if (n->list[i])
      stack[(*sp)++] = n->list[i];
  for (size_t i = 0; i < n->n2; i++)
    if (n->list2[i])
      stack[(*sp)++] = n->list2[i];
}

static size_t n_children(const jnode *n) {
  return (n->a != NULL) + (n->b != NULL) + (n->c != NULL) + (n->d != NULL) + n->n + n->n2;
}

/* Post-order walk with an explicit stack: each node's height is 1 + its
 * tallest child's (statements count as 0, so block nesting, bounded by the
 * parser's MAX_BLOCK_DEPTH, does not add up with the expressions in it).
 * jnode.len holds nothing for expression nodes other than names and
 * attributes, so heights go to a side table keyed by visit order. */
int jp_check_height(parser *P, jnode *root) {
  size_t cap = 64, sp = 0;
  struct item {
    jnode *n;
    size_t first_child; /* index in `out` where its children's heights start */
    int expanded;
    int soft; /* inside an if or a conditional expression (jinja2's soft frame) */
  } *st = malloc(cap * sizeof *st);
  int *hts = malloc(cap * sizeof *hts);
  size_t nh = 0, hcap = cap;
  jnode **kids = malloc(cap * sizeof *kids);
  size_t kcap = cap;
  int rc = 0;
  if (!st || !hts || !kids) {
    rc = jp_fail(P, jp_cur(P), "out of memory");
    goto done;
  }
  st[sp++] = (struct item){root, 0, 0, 0};
  while (sp && !rc) {
    struct item *it = &st[sp - 1];
    jnode *n = it->n;
    if (!it->expanded) {
      it->expanded = 1;
      it->first_child = nh;
      size_t k = n_children(n);
      if (k > kcap) {
        jnode **nk = realloc(kids, k * sizeof *kids);
        if (!nk) {
          rc = jp_fail(P, jp_cur(P), "out of memory");
          break;
        }
        kids = nk;
        kcap = k;
      }
      size_t kn = 0;
      push_children(n, kids, &kn);
      if (sp + kn > cap) {
        size_t nc = (sp + kn) * 2;
        void *ns = realloc(st, nc * sizeof *st);
        if (!ns) {
          rc = jp_fail(P, jp_cur(P), "out of memory");
          break;
        }
        st = ns;
        cap = nc;
        it = &st[sp - 1];
      }
      /* jinja2 checks filter and test names when it compiles, except in
       * the frame of an if or a conditional expression; a for loop, macro
       * or block starts a frame of its own */
      if ((n->kind == N_FILTER || n->kind == N_TEST) && n->op == 0 && !it->soft) {
        jtok at = {.line = n->line, .col = n->col};
        int nl = (int)(n->len > 60 ? 60 : n->len);
        if (n->kind == N_FILTER && jf_jinja_has_filter(n->str, n->len))
          rc = jp_fail(P, &at, "unsupported construct 'filter %.*s'", nl, n->str);
        else
          rc = jp_fail(P, &at, "no %s named '%.*s' (jinja2 refuses it too)",
                       n->kind == N_FILTER ? "filter" : "test", nl, n->str);
        break;
      }
      int soft = n->kind == N_IF || n->kind == N_COND ? 1
                 : n->kind == N_FOR || n->kind == N_MACRO || n->kind == N_CALLBLOCK ||
                         n->kind == N_FILTERBLOCK || n->kind == N_SETBLOCK
                     ? 0
                     : it->soft;
      /* children pushed in reverse so that their heights land in order */
      for (size_t i = kn; i-- > 0;)
        st[sp++] = (struct item){kids[i], 0, 0, soft};
      continue;
    }
    int h = 0;
    for (size_t i = it->first_child; i < nh; i++)
      if (hts[i] > h)
        h = hts[i];
    nh = it->first_child;
    int self = n->kind < N_TEXT ? 1 : 0; /* expression nodes count */
    h = self ? h + 1 : 0;
    if (h > MAX_EXPR_HEIGHT) {
      rc = jp_fail(P, &(jtok){.line = n->line, .col = n->col},
                   "expression nested too deeply (more than %d levels; split it with set)",
                   MAX_EXPR_HEIGHT);
      break;
    }
    if (nh == hcap) {
      int *nhs = realloc(hts, hcap * 2 * sizeof *hts);
      if (!nhs) {
        rc = jp_fail(P, jp_cur(P), "out of memory");
        break;
      }
      hts = nhs;
      hcap *= 2;
    }
    hts[nh++] = h;
    sp--;
  }
done:
  free(st);
  free(hts);
  free(kids);
  return rc ? -1 : 0;
}
