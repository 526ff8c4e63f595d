/* Parser of the Jinja subset: tokens to a syntax tree.
 *
 * Recursive descent with Jinja's precedence, lowest first: "x if c else y",
 * or, and, not, comparisons (== != < > <= >= in, not in), + -, ~, * / // %,
 * **, unary - +, then primaries with postfix .attr [item] [a:b:c] (call)
 * and the filter (|f) and test (is t) chains. Filters and tests are
 * resolved to ids here, so an unknown one is refused before rendering. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

#define MAX_DEPTH 200

typedef struct parser {
  fsdpc_jinja *t;
  jtok *tk;
  size_t i, n;
  fsdpc_err *err;
  int depth, loops, failed;
} parser;

typedef struct nvec {
  jnode **p;
  size_t n, cap;
  const char **names;
} nvec;

static int pfail(parser *P, const jtok *at, const char *fmt, ...) FSDPC_PRINTF(3, 4);
static int pfail(parser *P, const jtok *at, const char *fmt, ...) {
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

static jtok *cur(parser *P) {
  return &P->tk[P->i];
}
static jtok *peek(parser *P, size_t k) {
  return &P->tk[P->i + k < P->n ? P->i + k : P->n - 1];
}
static int is_op(const jtok *k, const char *op) {
  return k->kind == TK_OP && k->len == strlen(op) && memcmp(k->str, op, k->len) == 0;
}
static int is_name(const jtok *k, const char *name) {
  return k->kind == TK_NAME && k->len == strlen(name) && memcmp(k->str, name, k->len) == 0;
}
static void advance(parser *P) {
  if (P->i + 1 < P->n)
    P->i++;
}
static const char *tok_desc(const jtok *k, char *buf, size_t cap) {
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
static int expect_op(parser *P, const char *op) {
  if (!is_op(cur(P), op)) {
    char b[64];
    return pfail(P, cur(P), "expected '%s', found %s", op, tok_desc(cur(P), b, sizeof b));
  }
  advance(P);
  return 0;
}
static int expect_kind(parser *P, int kind, const char *what) {
  if (cur(P)->kind != kind) {
    char b[64];
    return pfail(P, cur(P), "expected %s, found %s", what, tok_desc(cur(P), b, sizeof b));
  }
  advance(P);
  return 0;
}

static jnode *mk(parser *P, int kind, const jtok *at) {
  jnode *n = ja_alloc(&P->t->arena, sizeof *n);
  if (!n) {
    pfail(P, at, "out of memory");
    return NULL;
  }
  n->kind = (uint8_t)kind;
  n->line = at->line;
  n->col = at->col;
  return n;
}

static int nv_push(parser *P, nvec *v, jnode *x, const char *name) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    jnode **np = realloc(v->p, cap * sizeof *np);
    const char **nn = realloc(v->names, cap * sizeof *nn);
    if (np)
      v->p = np;
    if (nn)
      v->names = nn;
    if (!np || !nn)
      return pfail(P, cur(P), "out of memory");
    v->cap = cap;
  }
  v->p[v->n] = x;
  v->names[v->n] = name;
  v->n++;
  return 0;
}
/* Moves the vector into the arena. */
static jnode **nv_take(parser *P, nvec *v, const char ***names) {
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
      pfail(P, cur(P), "out of memory");
  } else if (names) {
    *names = NULL;
  }
  free(v->p);
  free(v->names);
  memset(v, 0, sizeof *v);
  return out;
}

static const char *name_dup(parser *P, const jtok *k) {
  return ja_strdup(&P->t->arena, k->str, k->len);
}

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, int with_filter);

/* (args) after '(' was seen: positional into pos, keyword into kw. */
static int parse_args(parser *P, nvec *pos, nvec *kw) {
  if (expect_op(P, "("))
    return -1;
  while (!is_op(cur(P), ")")) {
    if (is_op(cur(P), "*") || is_op(cur(P), "**"))
      return pfail(P, cur(P), "unsupported construct '*args / **kwargs'");
    if (cur(P)->kind == TK_NAME && is_op(peek(P, 1), "=")) {
      const char *nm = name_dup(P, cur(P));
      advance(P);
      advance(P);
      jnode *v = parse_expr(P);
      if (!v || nv_push(P, kw, v, nm))
        return -1;
    } else {
      if (kw->n)
        return pfail(P, cur(P), "positional argument after keyword argument");
      jnode *v = parse_expr(P);
      if (!v || nv_push(P, pos, v, NULL))
        return -1;
    }
    if (!is_op(cur(P), ","))
      break;
    advance(P);
  }
  return expect_op(P, ")");
}

static jnode *finish_call_like(parser *P, jnode *n) {
  nvec pos = {0}, kw = {0};
  int rc = parse_args(P, &pos, &kw);
  n->n = pos.n;
  n->list = nv_take(P, &pos, NULL);
  n->n2 = kw.n;
  n->list2 = nv_take(P, &kw, &n->names);
  n->nnames = n->n2;
  return rc || P->failed ? NULL : n;
}

static jnode *parse_primary(parser *P) {
  jtok *k = cur(P);
  jnode *n;
  if (k->kind == TK_NAME) {
    n = mk(P, N_CONST, k);
    if (!n)
      return NULL;
    if (is_name(k, "true") || is_name(k, "True"))
      n->cval = jv_bool(1);
    else if (is_name(k, "false") || is_name(k, "False"))
      n->cval = jv_bool(0);
    else if (is_name(k, "none") || is_name(k, "None"))
      n->cval = jv_none();
    else {
      n->kind = N_NAME;
      n->str = name_dup(P, k);
      n->len = k->len;
    }
    advance(P);
    return n;
  }
  if (k->kind == TK_STRING) {
    n = mk(P, N_CONST, k);
    if (!n)
      return NULL;
    /* Adjacent string literals concatenate. */
    size_t total = 0, j = P->i;
    for (; j < P->n && P->tk[j].kind == TK_STRING; j++)
      total += P->tk[j].len;
    char *s = ja_alloc(&P->t->arena, total + 1);
    if (!s) {
      pfail(P, k, "out of memory");
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
    n = mk(P, N_CONST, k);
    if (!n)
      return NULL;
    n->cval = k->kind == TK_INT ? jv_int(k->ival) : jv_float(k->fval);
    advance(P);
    return n;
  }
  if (is_op(k, "(")) {
    advance(P);
    if (is_op(cur(P), ")")) {
      advance(P);
      n = mk(P, N_TUPLE, k);
      return n;
    }
    jnode *e = parse_expr(P);
    if (!e)
      return NULL;
    if (is_op(cur(P), ",")) {
      nvec items = {0};
      if (nv_push(P, &items, e, NULL))
        return NULL;
      while (is_op(cur(P), ",")) {
        advance(P);
        if (is_op(cur(P), ")"))
          break;
        jnode *x = parse_expr(P);
        if (!x || nv_push(P, &items, x, NULL)) {
          nv_take(P, &items, NULL);
          return NULL;
        }
      }
      n = mk(P, N_TUPLE, k);
      if (!n)
        return NULL;
      n->n = items.n;
      n->list = nv_take(P, &items, NULL);
      e = n;
    }
    return expect_op(P, ")") ? NULL : e;
  }
  if (is_op(k, "[") || is_op(k, "{")) {
    int dict = is_op(k, "{");
    const char *close = dict ? "}" : "]";
    advance(P);
    nvec keys = {0}, vals = {0};
    while (!is_op(cur(P), close)) {
      jnode *x = parse_expr(P);
      if (!x || nv_push(P, &keys, x, NULL))
        goto lfail;
      if (dict) {
        if (expect_op(P, ":"))
          goto lfail;
        jnode *v = parse_expr(P);
        if (!v || nv_push(P, &vals, v, NULL))
          goto lfail;
      }
      if (!is_op(cur(P), ","))
        break;
      advance(P);
    }
    if (expect_op(P, close))
      goto lfail;
    n = mk(P, dict ? N_DICT : N_LIST, k);
    if (!n)
      goto lfail;
    n->n = keys.n;
    n->list = nv_take(P, &keys, NULL);
    n->n2 = vals.n;
    n->list2 = nv_take(P, &vals, NULL);
    return P->failed ? NULL : n;
  lfail:
    nv_take(P, &keys, NULL);
    nv_take(P, &vals, NULL);
    return NULL;
  }
  char b[64];
  pfail(P, k, "expected an expression, found %s", tok_desc(k, b, sizeof b));
  return NULL;
}

static jnode *parse_subscript(parser *P, jnode *obj, jtok *at) {
  advance(P); /* [ */
  jnode *parts[3] = {NULL, NULL, NULL};
  int slice = 0;
  for (int p = 0; p < 3; p++) {
    if (!is_op(cur(P), ":") && !is_op(cur(P), "]")) {
      parts[p] = parse_expr(P);
      if (!parts[p])
        return NULL;
    }
    if (p < 2 && is_op(cur(P), ":")) {
      slice = 1;
      advance(P);
      continue;
    }
    break;
  }
  if (expect_op(P, "]"))
    return NULL;
  jnode *n = mk(P, slice ? N_SLICE : N_ITEM, at);
  if (!n)
    return NULL;
  n->a = obj;
  n->b = parts[0];
  n->c = parts[1];
  n->d = parts[2];
  if (!slice && !parts[0]) {
    pfail(P, at, "empty subscript");
    return NULL;
  }
  return n;
}

static jnode *parse_postfix(parser *P, jnode *n) {
  for (;;) {
    jtok *k = cur(P);
    if (is_op(k, ".")) {
      advance(P);
      jtok *nm = cur(P);
      jnode *x;
      if (nm->kind == TK_NAME) {
        x = mk(P, N_ATTR, k);
        if (!x)
          return NULL;
        x->str = name_dup(P, nm);
        x->len = nm->len;
      } else if (nm->kind == TK_INT) {
        x = mk(P, N_ITEM, k);
        if (!x)
          return NULL;
        x->b = mk(P, N_CONST, nm);
        if (!x->b)
          return NULL;
        x->b->cval = jv_int(nm->ival);
      } else {
        char b[64];
        pfail(P, nm, "expected an attribute name after '.', found %s", tok_desc(nm, b, sizeof b));
        return NULL;
      }
      advance(P);
      x->a = n;
      n = x;
    } else if (is_op(k, "[")) {
      n = parse_subscript(P, n, k);
      if (!n)
        return NULL;
    } else if (is_op(k, "(")) {
      jnode *c = mk(P, N_CALL, k);
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
  if (is_name(k, "else") || is_name(k, "or") || is_name(k, "and"))
    return 0;
  return k->kind == TK_NAME || k->kind == TK_STRING || k->kind == TK_INT || k->kind == TK_FLOAT ||
         is_op(k, "(") || is_op(k, "[") || is_op(k, "{");
}

static jnode *parse_filter_expr(parser *P, jnode *n) {
  for (;;) {
    jtok *k = cur(P);
    if (is_op(k, "|")) {
      advance(P);
      jtok *nm = cur(P);
      if (nm->kind != TK_NAME) {
        char b[64];
        pfail(P, nm, "expected a filter name after '|', found %s", tok_desc(nm, b, sizeof b));
        return NULL;
      }
      int id = jf_filter_id(nm->str, nm->len);
      if (!id) {
        pfail(P, nm, "unsupported construct 'filter %.*s'", (int)(nm->len > 60 ? 60 : nm->len),
              nm->str);
        return NULL;
      }
      jnode *f = mk(P, N_FILTER, nm);
      if (!f)
        return NULL;
      f->op = (uint8_t)id;
      f->a = n;
      advance(P);
      if (is_op(cur(P), "(")) {
        if (!finish_call_like(P, f))
          return NULL;
      }
      n = f;
    } else if (is_name(k, "is")) {
      advance(P);
      int neg = 0;
      if (is_name(cur(P), "not")) {
        neg = 1;
        advance(P);
      }
      jtok *nm = cur(P);
      int id = 0;
      if (nm->kind == TK_NAME)
        id = jf_test_id(nm->str, nm->len);
      else if (is_op(nm, "==") || is_op(nm, "!=") || is_op(nm, "<") || is_op(nm, ">") ||
               is_op(nm, "<=") || is_op(nm, ">="))
        id = jf_test_id(nm->str, nm->len);
      if (!id) {
        char b[64];
        pfail(P, nm, "unsupported construct 'test %s'",
              nm->kind == TK_NAME || nm->kind == TK_OP ? tok_desc(nm, b, sizeof b) : "?");
        return NULL;
      }
      jnode *t = mk(P, N_TEST, nm);
      if (!t)
        return NULL;
      t->op = (uint8_t)id;
      t->flag = (uint8_t)neg;
      t->a = n;
      advance(P);
      if (is_op(cur(P), "(")) {
        if (!finish_call_like(P, t))
          return NULL;
      } else if (starts_test_arg(cur(P))) {
        jnode *arg = parse_primary(P);
        if (!arg)
          return NULL;
        arg = parse_postfix(P, arg);
        if (!arg)
          return NULL;
        t->list = ja_alloc(&P->t->arena, sizeof *t->list);
        if (!t->list) {
          pfail(P, nm, "out of memory");
          return NULL;
        }
        t->list[0] = arg;
        t->n = 1;
      }
      n = t;
    } else if (is_op(k, "(")) {
      jnode *c = mk(P, N_CALL, k);
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
  jtok *k = cur(P);
  if (++P->depth > MAX_DEPTH) {
    pfail(P, k, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
    return NULL;
  }
  jnode *n;
  if (is_op(k, "-") || is_op(k, "+")) {
    advance(P);
    n = mk(P, is_op(k, "-") ? N_NEG : N_POS, k);
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
  jnode *n = mk(P, kind, at);
  if (!n)
    return NULL;
  n->op = (uint8_t)op;
  n->a = a;
  n->b = b;
  return n;
}

static jnode *parse_pow(parser *P) {
  jnode *a = parse_unary(P, 1);
  while (a && is_op(cur(P), "**")) {
    jtok *k = cur(P);
    advance(P);
    a = binop(P, N_BINOP, OP_POW, k, a, parse_unary(P, 1));
  }
  return a;
}

static jnode *parse_math2(parser *P) {
  jnode *a = parse_pow(P);
  for (;;) {
    jtok *k = cur(P);
    int op = is_op(k, "*")    ? OP_MUL
             : is_op(k, "/")  ? OP_DIV
             : is_op(k, "//") ? OP_FLOORDIV
             : is_op(k, "%")  ? OP_MOD
                              : 0;
    if (!a || !op)
      return a;
    advance(P);
    a = binop(P, N_BINOP, op, k, a, parse_pow(P));
  }
}

static jnode *parse_concat(parser *P) {
  jnode *a = parse_math2(P);
  while (a && is_op(cur(P), "~")) {
    jtok *k = cur(P);
    advance(P);
    a = binop(P, N_BINOP, OP_CONCAT, k, a, parse_math2(P));
  }
  return a;
}

static jnode *parse_math1(parser *P) {
  jnode *a = parse_concat(P);
  for (;;) {
    jtok *k = cur(P);
    int op = is_op(k, "+") ? OP_ADD : is_op(k, "-") ? OP_SUB : 0;
    if (!a || !op)
      return a;
    advance(P);
    a = binop(P, N_BINOP, op, k, a, parse_concat(P));
  }
}

static int cmp_op(parser *P) {
  jtok *k = cur(P);
  if (is_op(k, "=="))
    return CMP_EQ;
  if (is_op(k, "!="))
    return CMP_NE;
  if (is_op(k, "<"))
    return CMP_LT;
  if (is_op(k, "<="))
    return CMP_LE;
  if (is_op(k, ">"))
    return CMP_GT;
  if (is_op(k, ">="))
    return CMP_GE;
  if (is_name(k, "in"))
    return CMP_IN;
  if (is_name(k, "not") && is_name(peek(P, 1), "in"))
    return CMP_NOTIN;
  return 0;
}

static jnode *parse_compare(parser *P) {
  jnode *a = parse_math1(P);
  jnode *result = a, *left = a;
  int op;
  while (left && (op = cmp_op(P))) {
    jtok *k = cur(P);
    advance(P);
    if (op == CMP_NOTIN)
      advance(P);
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
  if (is_name(cur(P), "not")) {
    jtok *k = cur(P);
    advance(P);
    if (++P->depth > MAX_DEPTH) {
      pfail(P, k, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
      return NULL;
    }
    jnode *n = mk(P, N_NOT, k);
    if (n)
      n->a = parse_not(P);
    P->depth--;
    return n && n->a ? n : NULL;
  }
  return parse_compare(P);
}

static jnode *parse_and(parser *P) {
  jnode *a = parse_not(P);
  while (a && is_name(cur(P), "and")) {
    jtok *k = cur(P);
    advance(P);
    a = binop(P, N_AND, 0, k, a, parse_not(P));
  }
  return a;
}

static jnode *parse_or(parser *P) {
  jnode *a = parse_and(P);
  while (a && is_name(cur(P), "or")) {
    jtok *k = cur(P);
    advance(P);
    a = binop(P, N_OR, 0, k, a, parse_and(P));
  }
  return a;
}

static jnode *parse_expr(parser *P) {
  jnode *a = parse_or(P);
  while (a && is_name(cur(P), "if")) {
    jtok *k = cur(P);
    advance(P);
    jnode *n = mk(P, N_COND, k);
    if (!n)
      return NULL;
    n->b = a;
    n->a = parse_or(P);
    if (!n->a)
      return NULL;
    if (is_name(cur(P), "else")) {
      advance(P);
      n->c = parse_expr(P);
      if (!n->c)
        return NULL;
    }
    a = n;
  }
  return a;
}

/* An expression that may be a bare tuple: "a, b". */
static jnode *parse_tuple_expr(parser *P, int with_cond) {
  jtok *k = cur(P);
  jnode *e = with_cond ? parse_expr(P) : parse_or(P);
  if (!e || !is_op(cur(P), ","))
    return e;
  nvec items = {0};
  if (nv_push(P, &items, e, NULL))
    return NULL;
  while (is_op(cur(P), ",")) {
    advance(P);
    if (cur(P)->kind == TK_VAR_END || cur(P)->kind == TK_BLOCK_END || is_name(cur(P), "if"))
      break;
    jnode *x = with_cond ? parse_expr(P) : parse_or(P);
    if (!x || nv_push(P, &items, x, NULL)) {
      nv_take(P, &items, NULL);
      return NULL;
    }
  }
  jnode *n = mk(P, N_TUPLE, k);
  if (!n)
    return NULL;
  n->n = items.n;
  n->list = nv_take(P, &items, NULL);
  return n;
}

/* ---- statements ---- */

static int parse_body(parser *P, const char *const *ends, jnode ***body, size_t *n,
                      const jtok *opener);

static int end_tag(parser *P) {
  return expect_kind(P, TK_BLOCK_END, "'%}'");
}

static int at_end_name(parser *P, const char *const *ends) {
  if (cur(P)->kind != TK_BLOCK_BEGIN || !ends)
    return 0;
  jtok *nm = peek(P, 1);
  for (size_t e = 0; ends[e]; e++)
    if (is_name(nm, ends[e]))
      return 1;
  return 0;
}

static jnode *parse_if(parser *P, jtok *at) {
  static const char *const ends[] = {"elif", "else", "endif", NULL};
  jnode *n = mk(P, N_IF, at);
  if (!n)
    return NULL;
  n->a = parse_expr(P);
  if (!n->a || end_tag(P) || parse_body(P, ends, &n->list, &n->n, at))
    return NULL;
  /* at {% elif / else / endif */
  advance(P);
  jtok *kw = cur(P);
  advance(P);
  if (is_name(kw, "elif")) {
    jnode *e = parse_if(P, kw);
    if (!e)
      return NULL;
    n->list2 = ja_alloc(&P->t->arena, sizeof *n->list2);
    if (!n->list2) {
      pfail(P, kw, "out of memory");
      return NULL;
    }
    n->list2[0] = e;
    n->n2 = 1;
    return n; /* the nested if consumed endif */
  }
  if (is_name(kw, "else")) {
    static const char *const ends2[] = {"endif", NULL};
    if (end_tag(P) || parse_body(P, ends2, &n->list2, &n->n2, at))
      return NULL;
    advance(P);
    advance(P);
  }
  return end_tag(P) ? NULL : n;
}

static jnode *parse_for(parser *P, jtok *at) {
  jnode *n = mk(P, N_FOR, at);
  if (!n)
    return NULL;
  nvec targets = {0};
  for (;;) {
    jtok *nm = cur(P);
    if (nm->kind != TK_NAME) {
      char b[64];
      pfail(P, nm, "expected a loop variable name, found %s", tok_desc(nm, b, sizeof b));
      nv_take(P, &targets, NULL);
      return NULL;
    }
    if (nv_push(P, &targets, NULL, name_dup(P, nm)))
      return NULL;
    advance(P);
    if (!is_op(cur(P), ","))
      break;
    advance(P);
  }
  n->nnames = targets.n;
  nv_take(P, &targets, &n->names);
  if (P->failed)
    return NULL;
  if (!is_name(cur(P), "in")) {
    char b[64];
    pfail(P, cur(P), "expected 'in' in a for tag, found %s", tok_desc(cur(P), b, sizeof b));
    return NULL;
  }
  advance(P);
  n->a = parse_tuple_expr(P, 0);
  if (!n->a)
    return NULL;
  if (is_name(cur(P), "if")) {
    advance(P);
    n->b = parse_expr(P);
    if (!n->b)
      return NULL;
  }
  if (is_name(cur(P), "recursive")) {
    pfail(P, cur(P), "unsupported construct 'recursive'");
    return NULL;
  }
  static const char *const ends[] = {"else", "endfor", NULL};
  P->loops++;
  int rc = end_tag(P) || parse_body(P, ends, &n->list, &n->n, at);
  P->loops--;
  if (rc)
    return NULL;
  advance(P);
  if (is_name(cur(P), "else")) {
    advance(P);
    static const char *const ends2[] = {"endfor", NULL};
    if (end_tag(P) || parse_body(P, ends2, &n->list2, &n->n2, at))
      return NULL;
    advance(P);
  }
  advance(P); /* endfor */
  return end_tag(P) ? NULL : n;
}

static jnode *parse_set(parser *P, jtok *at) {
  jtok *nm = cur(P);
  if (nm->kind != TK_NAME) {
    char b[64];
    pfail(P, nm, "expected a variable name after 'set', found %s", tok_desc(nm, b, sizeof b));
    return NULL;
  }
  jnode *n = mk(P, N_SET, at);
  if (!n)
    return NULL;
  n->str = name_dup(P, nm);
  n->len = nm->len;
  advance(P);
  if (is_op(cur(P), ".")) {
    advance(P);
    jtok *attr = cur(P);
    if (attr->kind != TK_NAME) {
      pfail(P, attr, "expected an attribute name after '.'");
      return NULL;
    }
    n->names = ja_alloc(&P->t->arena, sizeof *n->names);
    if (!n->names) {
      pfail(P, attr, "out of memory");
      return NULL;
    }
    n->names[0] = name_dup(P, attr);
    n->nnames = 1;
    advance(P);
  }
  if (is_op(cur(P), ",")) {
    pfail(P, cur(P), "unsupported construct 'set with several targets'");
    return NULL;
  }
  if (is_op(cur(P), "=")) {
    advance(P);
    n->a = parse_tuple_expr(P, 1);
    if (!n->a || end_tag(P))
      return NULL;
    return n;
  }
  if (n->nnames) {
    pfail(P, cur(P), "expected '=' after 'set %s.%s'", n->str, n->names[0]);
    return NULL;
  }
  if (is_op(cur(P), "|")) {
    pfail(P, cur(P), "unsupported construct 'filtered block set'");
    return NULL;
  }
  static const char *const ends[] = {"endset", NULL};
  n->kind = N_SETBLOCK;
  if (end_tag(P) || parse_body(P, ends, &n->list, &n->n, at))
    return NULL;
  advance(P);
  advance(P);
  return end_tag(P) ? NULL : n;
}

static jnode *parse_macro(parser *P, jtok *at) {
  jtok *nm = cur(P);
  if (nm->kind != TK_NAME) {
    pfail(P, nm, "expected a macro name");
    return NULL;
  }
  jnode *n = mk(P, N_MACRO, at);
  if (!n)
    return NULL;
  n->str = name_dup(P, nm);
  n->len = nm->len;
  advance(P);
  if (expect_op(P, "("))
    return NULL;
  nvec params = {0}, defaults = {0};
  while (!is_op(cur(P), ")")) {
    jtok *p = cur(P);
    if (p->kind != TK_NAME) {
      pfail(P, p, "expected a parameter name");
      goto fail;
    }
    jnode *def = NULL;
    advance(P);
    if (is_op(cur(P), "=")) {
      advance(P);
      def = parse_expr(P);
      if (!def)
        goto fail;
    } else if (defaults.n && defaults.p[defaults.n - 1]) {
      pfail(P, p, "parameter without a default after one with a default");
      goto fail;
    }
    if (nv_push(P, &params, NULL, name_dup(P, p)) || nv_push(P, &defaults, def, NULL))
      goto fail;
    if (!is_op(cur(P), ","))
      break;
    advance(P);
  }
  if (expect_op(P, ")"))
    goto fail;
  n->nnames = params.n;
  nv_take(P, &params, &n->names);
  n->n2 = defaults.n;
  n->list2 = nv_take(P, &defaults, NULL);
  static const char *const ends[] = {"endmacro", NULL};
  int loops = P->loops;
  P->loops = 0;
  int rc = end_tag(P) || parse_body(P, ends, &n->list, &n->n, at);
  P->loops = loops;
  if (rc)
    return NULL;
  advance(P);
  advance(P);
  if (cur(P)->kind == TK_NAME)
    advance(P);
  return end_tag(P) ? NULL : n;
fail:
  nv_take(P, &params, NULL);
  nv_take(P, &defaults, NULL);
  return NULL;
}

static jnode *parse_callblock(parser *P, jtok *at) {
  if (is_op(cur(P), "(")) {
    pfail(P, cur(P), "unsupported construct 'call with caller arguments'");
    return NULL;
  }
  jnode *n = mk(P, N_CALLBLOCK, at);
  if (!n)
    return NULL;
  n->a = parse_expr(P);
  if (!n->a)
    return NULL;
  if (n->a->kind != N_CALL) {
    pfail(P, at, "expected a macro call after 'call'");
    return NULL;
  }
  static const char *const ends[] = {"endcall", NULL};
  int loops = P->loops;
  P->loops = 0;
  int rc = end_tag(P) || parse_body(P, ends, &n->list, &n->n, at);
  P->loops = loops;
  if (rc)
    return NULL;
  advance(P);
  advance(P);
  return end_tag(P) ? NULL : n;
}

static jnode *parse_statement(parser *P) {
  jtok *at = cur(P); /* {% */
  advance(P);
  jtok *kw = cur(P);
  if (kw->kind != TK_NAME) {
    char b[64];
    pfail(P, kw, "expected a tag name after '{%%', found %s", tok_desc(kw, b, sizeof b));
    return NULL;
  }
  advance(P);
  if (is_name(kw, "if"))
    return parse_if(P, kw);
  if (is_name(kw, "for"))
    return parse_for(P, kw);
  if (is_name(kw, "set"))
    return parse_set(P, kw);
  if (is_name(kw, "macro"))
    return parse_macro(P, kw);
  if (is_name(kw, "call"))
    return parse_callblock(P, kw);
  if (is_name(kw, "break") || is_name(kw, "continue")) {
    if (!P->loops) {
      pfail(P, kw, "'%.*s' outside a for loop", (int)kw->len, kw->str);
      return NULL;
    }
    jnode *n = mk(P, is_name(kw, "break") ? N_BREAK : N_CONTINUE, kw);
    return !n || end_tag(P) ? NULL : n;
  }
  if (is_name(kw, "generation")) {
    jnode *n = mk(P, N_GENERATION, kw);
    static const char *const ends[] = {"endgeneration", NULL};
    if (!n || end_tag(P) || parse_body(P, ends, &n->list, &n->n, kw))
      return NULL;
    advance(P);
    advance(P);
    P->t->has_generation = 1;
    return end_tag(P) ? NULL : n;
  }
  (void)at;
  pfail(P, kw, "unsupported construct '%.*s'", (int)(kw->len > 60 ? 60 : kw->len), kw->str);
  return NULL;
}

/* Parses statements until a {% NAME %} with NAME in ends (left unconsumed)
 * or the end of the template (an error when ends is non-NULL). */
static int parse_body(parser *P, const char *const *ends, jnode ***body, size_t *n,
                      const jtok *opener) {
  nvec v = {0};
  if (++P->depth > MAX_DEPTH) {
    pfail(P, cur(P), "blocks nested too deeply (more than %d levels)", MAX_DEPTH);
    return -1;
  }
  for (;;) {
    jtok *k = cur(P);
    jnode *x = NULL;
    if (k->kind == TK_EOF) {
      if (ends) {
        char want[64];
        snprintf(want, sizeof want, "%s", ends[0]);
        for (size_t e = 0; ends[e]; e++)
          if (strncmp(ends[e], "end", 3) == 0)
            snprintf(want, sizeof want, "%s", ends[e]);
        pfail(P, opener, "'%.*s' is never closed (missing {%% %s %%})", (int)opener->len,
              opener->str, want);
        goto fail;
      }
      break;
    }
    if (at_end_name(P, ends))
      break;
    if (k->kind == TK_TEXT) {
      x = mk(P, N_TEXT, k);
      if (!x)
        goto fail;
      x->str = k->str;
      x->len = k->len;
      advance(P);
    } else if (k->kind == TK_VAR_BEGIN) {
      advance(P);
      x = mk(P, N_OUTPUT, k);
      if (!x)
        goto fail;
      x->a = parse_tuple_expr(P, 1);
      if (!x->a || expect_kind(P, TK_VAR_END, "'}}'"))
        goto fail;
    } else if (k->kind == TK_BLOCK_BEGIN) {
      jtok *nm = peek(P, 1);
      if (nm->kind == TK_NAME &&
          (strncmp(nm->str, "end", 3) == 0 || is_name(nm, "else") || is_name(nm, "elif"))) {
        pfail(P, nm, "unexpected '%.*s'", (int)(nm->len > 40 ? 40 : nm->len), nm->str);
        goto fail;
      }
      x = parse_statement(P);
      if (!x)
        goto fail;
    } else {
      char b[64];
      pfail(P, k, "unexpected %s", tok_desc(k, b, sizeof b));
      goto fail;
    }
    if (nv_push(P, &v, x, NULL))
      goto fail;
  }
  P->depth--;
  *n = v.n;
  *body = nv_take(P, &v, NULL);
  return P->failed ? -1 : 0;
fail:
  nv_take(P, &v, NULL);
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
