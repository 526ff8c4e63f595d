/* The Jinja subset parser's shared state and token helpers (parser.c:
 * statements; parse_expr.c: expressions). */
#ifndef FSDPC_TEMPLATE_PARSE_H
#define FSDPC_TEMPLATE_PARSE_H

#include "template/internal.h"

/* Parser recursion (parenthesised and unary nesting, blocks). */
#define MAX_DEPTH MAX_BLOCK_DEPTH

typedef struct parser {
  fsdpc_jinja *t;
  jtok *tk;
  size_t i, n;
  fsdpc_err *err;
  int depth, loops, failed;
  uint8_t *macro_flags; /* the innermost macro being parsed: uses varargs / kwargs */
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

/* A filter chain "f(args) | g" applied to the text of a block: its
 * innermost operand is an N_CONST with flag 1 (exec.c substitutes the
 * block's text). For {% filter %} and {% set x | f %}. */
jnode *jp_parse_block_filters(parser *P);
/* Refuses an expression taller than MAX_EXPR_HEIGHT (the evaluator
 * recurses once per level) with the line and column of the node where the
 * limit is passed. Iterative: any tree the parser built can be checked. */
int jp_check_height(parser *P, jnode *root);

/* parse_expr.c */
jnode *jp_parse_expr(parser *P);
/* An expression that may be a bare tuple ("a, b"); with_cond: allow "x if c". */
jnode *jp_parse_tuple_expr(parser *P, int with_cond);

#endif
