/* The evaluator's shared pieces (eval.c: expressions, exec.c: statements
 * and the render, calls.c: calls): scopes, call arguments, statement
 * results and the built-in functions. */
#ifndef FSDPC_TEMPLATE_EXEC_H
#define FSDPC_TEMPLATE_EXEC_H

#include "template/internal.h"

/* A scope: a for-loop iteration, a macro call, or the template. */
struct jframe {
  jframe *parent;
  size_t n, cap;
  const char **names;
  jv *vals;
};

typedef struct jargs {
  jv *pos;
  size_t npos;
  const char **kwn;
  jv *kwv;
  size_t nkw;
} jargs;

/* What a statement did: go on, leave the loop, next iteration, or fail. */
enum { EX_OK = 0, EX_BREAK = 1, EX_CONTINUE = 2, EX_ERR = -1 };

/* Global functions (JV_FUNC ids). */
enum { F_RAISE = 1, F_STRFTIME, F_NAMESPACE, F_RANGE, F_DICT, F_LIPSUM, F_CYCLER, F_JOINER };

jframe *jx_frame_new(jctx *x, jframe *parent);
int jx_frame_set(jctx *x, jframe *f, const char *name, jv v);
jv jx_lookup(jctx *x, const char *name);

int jx_eval(jctx *x, const jnode *n, jv *out);
int jx_exec_body(jctx *x, jnode *const *body, size_t n);
/* Runs body with the output going to a string value. */
int jx_render_into(jctx *x, jnode *const *body, size_t n, jv *out, const jnode *at);

int jx_eval_args(jctx *x, const jnode *n, jargs *a);
int jx_call_value(jctx *x, const jnode *at, const jv *fn, const jargs *a, jv *out);

#endif
