/* The Jinja subset parser's shared state and token helpers (parser.c:
 * statements; parse_expr.c: expressions). */
#ifndef FSDPC_TEMPLATE_PARSE_H
#define FSDPC_TEMPLATE_PARSE_H

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

int jp_fail(parser *P, const jtok *at, const char *fmt, ...) FSDPC_PRINTF(3, 4);
jtok *jp_cur(parser *P);
jtok *jp_peek(parser *P, size_t k);
int jp_is_op(const jtok *k, const char *op);
int jp_is_name(const jtok *k, const char *name);
void jp_advance(parser *P);
const char *jp_tok_desc(const jtok *k, char *buf, size_t cap);
int jp_expect_op(parser *P, const char *op);
int jp_expect_kind(parser *P, int kind, const char *what);
jnode *jp_mk(parser *P, int kind, const jtok *at);
int jp_nv_push(parser *P, nvec *v, jnode *x, const char *name);
/* Moves the vector into the template's arena. */
jnode **jp_nv_take(parser *P, nvec *v, const char ***names);
const char *jp_name_dup(parser *P, const jtok *k);

/* parse_expr.c */
jnode *jp_parse_expr(parser *P);
/* An expression that may be a bare tuple ("a, b"); with_cond: allow "x if c". */
jnode *jp_parse_tuple_expr(parser *P, int with_cond);

#endif
