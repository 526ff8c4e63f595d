/* Internals of the Jinja subset engine: arena, tokens, syntax tree, values.
 *
 * Everything a parse makes lives in the template's arena; everything a
 * render makes lives in the render's arena and is freed in one go when the
 * render ends, so no value is reference counted. Values from the caller's
 * cJSON tree are borrowed, never copied. */
#ifndef FSDPC_TEMPLATE_INTERNAL_H
#define FSDPC_TEMPLATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "template/jinja.h"

/* ---- arena ---- */
typedef struct jarena {
  struct jblock *head;
} jarena;
void *ja_alloc(jarena *a, size_t n); /* zeroed; NULL when out of memory */
char *ja_strdup(jarena *a, const char *s, size_t n);
void ja_free(jarena *a);

/* ---- growable byte buffer (malloc) ---- */
typedef struct jbuf {
  char *p;
  size_t n, cap;
} jbuf;
int jb_put(jbuf *b, const char *s, size_t n); /* 0 ok, -1 out of memory */
int jb_putc(jbuf *b, char c);

/* ---- tokens ---- */
enum {
  TK_EOF,
  TK_TEXT,        /* template data: [begin, end) of the normalised source */
  TK_VAR_BEGIN,   /* {{ */
  TK_VAR_END,     /* }} */
  TK_BLOCK_BEGIN, /* {% */
  TK_BLOCK_END,   /* %} */
  TK_NAME,
  TK_STRING, /* str: the unescaped value */
  TK_INT,
  TK_FLOAT,
  TK_OP, /* str: the operator text */
};

typedef struct jtok {
  int kind;
  int line, col;
  const char *str; /* TEXT: pointer into the source; NAME/OP/STRING: text */
  size_t len;
  int64_t ival;
  double fval;
} jtok;

/* ---- values ---- */
typedef enum jkind {
  JV_UNDEF,
  JV_NONE,
  JV_BOOL,
  JV_INT,
  JV_FLOAT,
  JV_STR,
  JV_LIST,   /* list or tuple made while rendering */
  JV_DICT,   /* dict made while rendering (string keys) */
  JV_JSON,   /* a borrowed cJSON array or object */
  JV_NS,     /* namespace(): a mutable dict */
  JV_LOOP,   /* the loop variable */
  JV_MACRO,  /* a macro */
  JV_FUNC,   /* a global function (raise_exception, namespace, range, ...) */
  JV_METHOD, /* a method bound to a value ("x".strip) */
} jkind;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jloop jloop;
typedef struct jmethod jmethod;
struct jnode;

typedef struct jv {
  uint8_t kind;
  union {
    int b;
    int64_t i;
    double d;
    struct {
      const char *p;
      size_t n;
    } s;
    jlist *l;
    jdict *m; /* DICT and NS */
    const cJSON *j;
    jloop *loop;
    const struct jmacro *macro;
    int func;
    jmethod *meth;
  } u;
  const char *undef_name; /* UNDEF: what was looked up, for messages */
} jv;

struct jlist {
  size_t n;
  jv *items;
  int tuple;
};

struct jdict {
  size_t n, cap;
  const char **keys;
  size_t *klens;
  jv *vals;
};

struct jloop {
  int64_t index0, length;
  const jv *items; /* the iterated items, for previtem / nextitem */
};

struct jmethod {
  jv self;
  const char *name;
};

typedef struct jframe jframe;
struct jmacro {
  const struct jnode *node; /* N_MACRO, or N_CALLBLOCK for caller() */
  jframe *frame;            /* where it was defined */
};

/* ---- syntax tree ---- */
typedef enum jnkind {
  /* expressions */
  N_CONST,
  N_NAME,
  N_ATTR,  /* a.str */
  N_ITEM,  /* a[b] */
  N_SLICE, /* a[b:c:d], any of b c d may be NULL */
  N_CALL,  /* a(args..., names=kwargs...) */
  N_FILTER,
  N_TEST,
  N_BINOP,
  N_CMP,
  N_AND,
  N_OR,
  N_NOT,
  N_NEG,
  N_POS,
  N_COND, /* b if a else c */
  N_LIST,
  N_TUPLE,
  N_DICT,
  N_SPLAT, /* *seq among call arguments */
  /* statements */
  N_TEXT,
  N_OUTPUT,
  N_IF,
  N_FOR,
  N_SET,
  N_SETBLOCK,
  N_MACRO,
  N_CALLBLOCK,
  N_BREAK,
  N_CONTINUE,
  N_GENERATION,
} jnkind;

typedef struct jnode {
  uint8_t kind;
  uint8_t op; /* BINOP / CMP: operator; FILTER / TEST: id; TEST: negated in flag */
  uint8_t flag;
  int line, col;
  struct jnode *a, *b, *c, *d;
  struct jnode **list; /* args, items, body */
  size_t n;
  struct jnode **list2; /* keyword arg values, dict values, else body */
  size_t n2;
  const char **names; /* keyword names, for targets, macro params */
  size_t nnames;
  const char *str; /* NAME / ATTR / SET target / TEXT */
  size_t len;
  jv cval;
} jnode;

enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
enum { CMP_EQ = 1, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

struct fsdpc_jinja {
  jarena arena;
  char *origin;
  char *src; /* normalised source */
  size_t src_len;
  jnode **body;
  size_t n_body;
  int has_generation;
};

/* lexer.c: tokens of the whole template (arena-allocated). */
fsdpc_status fsdpc__jinja_lex(fsdpc_jinja *t, jtok **toks, size_t *n, fsdpc_err *err);

/* The source as Jinja sees it (line ends normalised, one final newline
 * dropped); malloc'd. */
char *fsdpc__jinja_normalise(const char *src, size_t len, size_t *out_len);

/* filters.c: name -> id (0 = unknown), shared by the parser and evaluator. */
int jf_filter_id(const char *name, size_t len);
int jf_test_id(const char *name, size_t len);
const char *jf_filter_name(int id);
const char *jf_test_name(int id);

/* ---- evaluation context ---- */
typedef struct jctx {
  const fsdpc_jinja *t;
  jarena arena;
  jbuf *out;
  const cJSON *vars;
  jframe *root;
  time_t now;
  size_t max_output;
  uint64_t max_steps, steps;
  fsdpc_err *err;
  int failed;
  int depth;
  jbuf gen; /* fsdpc_jinja_span records of {% generation %} blocks */
  jbuf *main_out;
  jframe *frame;
  const jnode *pending_caller;
  jframe *caller_frame;
} jctx;

/* Fails the render with "ORIGIN:LINE:COL: message"; returns -1. */
int jx_fail(jctx *x, const jnode *at, const char *fmt, ...) FSDPC_PRINTF(3, 4);
static inline int jx_oom(jctx *x, const jnode *at) {
  return jx_fail(x, at, "out of memory");
}
/* Ends a string built in b: copies it into the arena as *out and frees b.
 * failed != 0 (an earlier jb_put ran out of memory) or a failed copy -> the
 * "out of memory" error at `at`. */
int jx_take_str(jctx *x, const jnode *at, jbuf *b, int failed, jv *out);

/* ops.c */
int jx_undef_fail(jctx *x, const jnode *at, const jv *v);
jv jx_mkstr(jctx *x, const char *a, size_t na, const char *b, size_t nb, int *ok);
int jx_get_attr(jctx *x, const jnode *at, const jv *obj, const char *name, size_t len, jv *out);
int jx_get_item(jctx *x, const jnode *at, const jv *obj, const jv *key, jv *out);
/* obj[a:b:c]; NULL parts are omitted ones */
int jx_slice(jctx *x, const jnode *at, const jv *obj, jv *a, jv *b, jv *c, jv *out);
int jx_binop(jctx *x, const jnode *at, int op, const jv *a, const jv *b, jv *out);
int jx_contains(jctx *x, const jnode *at, const jv *item, const jv *cont, int *out);

/* value.c */
jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double d);
jv jv_str(const char *p, size_t n);
jv jv_from_json(const cJSON *j);
int jv_truthy(const jv *v);
int jv_is_seq(const jv *v);     /* list, tuple, JSON array */
int jv_is_mapping(const jv *v); /* dict, JSON object */
size_t jv_len(const jv *v);     /* sequence / mapping size; strings: code points */
jv jv_seq_at(const jv *v, size_t i);
/* Mapping lookup; returns 0 if absent. */
int jv_map_get(const jv *v, const char *key, size_t klen, jv *out);
/* i-th key/value of a mapping in insertion order. */
void jv_map_at(const jv *v, size_t i, jv *key, jv *val);
/* Python str(v) appended to b; -1 on failure (message in x). */
int jv_to_str(jctx *x, const jnode *at, const jv *v, jbuf *b);
/* Python str(v) as a value (arena). */
int jv_stringify(jctx *x, const jnode *at, const jv *v, jv *out);
int jv_repr(jctx *x, const jnode *at, const jv *v, jbuf *b);
int jv_equal(const jv *a, const jv *b);
/* <0, 0, >0; -1 return with *ok=0 when not comparable. */
int jv_compare(const jv *a, const jv *b, int *ok);
const char *jv_type_name(const jv *v);
/* json.dumps(v, ensure_ascii, indent (<0: none), separators) */
int jv_to_json(jctx *x, const jnode *at, const jv *v, int ensure_ascii, int indent,
               const char *item_sep, const char *key_sep, jbuf *b);
void jv_fmt_float(double d, char *out, size_t cap);
jdict *jd_new(jarena *a);
int jd_set(jarena *a, jdict *d, const char *k, size_t klen, jv v);
jlist *jl_new(jarena *a, size_t n);
/* UTF-8 helpers */
size_t ju_count(const char *s, size_t n);
size_t ju_offset(const char *s, size_t n, size_t cp);  /* byte offset of code point cp */
int ju_is_space(const char *s, size_t n, size_t *len); /* Python whitespace at s */

/* filters.c */
int jf_apply_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                    const char **kwn, const jv *kwv, size_t nkw, jv *out);
int jf_apply_test(jctx *x, const jnode *at, int id, const jv *v, const jv *args, size_t nargs,
                  int *out);
/* str and dict methods: v.name(args) */
int jf_call_method(jctx *x, const jnode *at, const jmethod *m, const jv *args, size_t nargs,
                   const char **kwn, const jv *kwv, size_t nkw, jv *out);
int jf_is_method(const jv *self, const char *name, size_t len);
/* strings.c: Python-like string ops and sequences for filters and methods */
int jf_need_str(jctx *x, const jnode *at, const jv *v, const char *what);
/* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 Jinja's title */
int jf_case_map(jctx *x, const jnode *at, const jv *v, int mode, jv *out);
int jf_replace(jctx *x, const jnode *at, const jv *s, const jv *old, const jv *nw, int64_t count,
               jv *out);
/* The items of a sequence, string (code points), mapping (keys) or undefined (none). */
jv *jf_seq_items(jctx *x, const jnode *at, const jv *v, size_t *n, int *rc);
int jf_mklist(jctx *x, const jnode *at, jv *items, size_t n, jv *out);
int jf_strip(const char *s, size_t n, const char *chars, size_t nchars, int left, int right,
             size_t *b, size_t *e);

#endif
