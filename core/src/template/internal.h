/* Internals of the Jinja subset engine: arena, memory budget, tokens, syntax
 * tree, values.
 *
 * Everything a parse makes lives in the template's arena; everything a
 * render makes lives in the render's arena and is freed in one go when the
 * render ends, so no value is reference counted. Values from the caller's
 * cJSON tree are borrowed, never copied. A render's arena and its growable
 * buffers draw on one memory budget (jmem), so that no template, however
 * it builds values (set blocks, macros, string or list doubling), holds
 * more than fsdpc_jinja_opts.max_memory bytes. */
#ifndef FSDPC_TEMPLATE_INTERNAL_H
#define FSDPC_TEMPLATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "template/jinja.h"

/* ---- memory budget, arena, growable byte buffer (arena.c) ---- */
typedef struct jmem {
  size_t used, limit; /* limit 0: none */
  int over;           /* an allocation was refused for the budget */
} jmem;

typedef struct jarena {
  struct jblock *head;
  jmem *mem; /* NULL: not accounted (the parse) */
} jarena;
void *ja_alloc(jarena *a, size_t n); /* zeroed; NULL when out of memory or budget */
char *ja_strdup(jarena *a, const char *s, size_t n);
void ja_free(jarena *a);

typedef struct jbuf {
  char *p;
  size_t n, cap;
  jmem *mem; /* NULL: not accounted */
} jbuf;
int jb_put(jbuf *b, const char *s, size_t n); /* 0 ok, -1 out of memory or budget */
int jb_putc(jbuf *b, char c);
void jb_free(jbuf *b);

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
  TK_INT,    /* ival, or str: the digits of an integer beyond 64 bits */
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
  JV_BIGINT, /* an int beyond 64 bits: u.s is its decimal text ("-123...") */
  JV_FLOAT,
  JV_STR,
  JV_LIST,   /* a sequence made while rendering: jlist.type says which */
  JV_DICT,   /* dict made while rendering (string keys) */
  JV_JSON,   /* a borrowed cJSON array or object */
  JV_NS,     /* namespace(): a mutable dict */
  JV_LOOP,   /* the loop variable */
  JV_MACRO,  /* a macro */
  JV_FUNC,   /* a global function (raise_exception, namespace, range, ...) */
  JV_METHOD, /* a method bound to a value ("x".strip) */
} jkind;

/* What a JV_LIST is in Python: printing, len(), truth and indexing differ. */
enum {
  JL_LIST,  /* list */
  JL_TUPLE, /* tuple */
  JL_ITER,  /* a generator or iterator (map, select, ...): single pass, no len */
  JL_ITEMS, /* dict_items / dict_keys / dict_values views */
  JL_KEYS,
  JL_VALUES,
  JL_RANGE, /* range(start, stop, step) */
};

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jloop jloop;
typedef struct jmethod jmethod;
struct jnode;

typedef struct jv {
  uint8_t kind;
  uint8_t safe; /* STR: a markupsafe Markup (|safe, |escape) */
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
  uint8_t type;          /* JL_* */
  size_t pos;            /* JL_ITER: items [0, pos) were consumed */
  int64_t r0, r1, rstep; /* JL_RANGE: its arguments, for printing */
};

struct jdict {
  size_t n, cap;
  const char **keys; /* string keys, or the canonical text of other keys (jv_dict_key) */
  size_t *klens;
  jv *vals;
  jv *kv; /* NULL, or the key values where a key is not a string (kind JV_UNDEF = a string) */
};

struct jloop {
  int64_t index0, length;
  const jv *items;  /* the iterated items, for previtem / nextitem */
  jv *changed_last; /* loop.changed(): the previous arguments (shared by iterations) */
  int *changed_set;
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
  N_FILTERBLOCK, /* {% filter f(args) | g %}body{% endfilter %}: a is the filter chain over N_CONST
                  */
} jnkind;

typedef struct jnode {
  uint8_t kind;
  uint8_t op;   /* BINOP / CMP: operator; FILTER / TEST: id; TEST: negated in flag */
  uint8_t flag; /* TEST: negated; MACRO: 1 uses varargs, 2 uses kwargs; CONST: 1 = the
                   filtered block's text */
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

/* filters.c / tests.c: name -> id (0 = unknown), shared by the parser and evaluator. */
int jf_filter_id(const char *name, size_t len);
int jf_test_id(const char *name, size_t len);
const char *jf_filter_name(int id);
const char *jf_test_name(int id);
/* Whether jinja2 has a filter of this name (implemented here or not). */
int jf_jinja_has_filter(const char *name, size_t len);

/* ---- evaluation context ---- */
typedef struct jctx {
  const fsdpc_jinja *t;
  jmem mem;
  jarena arena;
  jbuf *out;
  const cJSON *vars;
  jframe *root;
  time_t now;
  size_t max_output;
  uint64_t max_steps, steps;
  fsdpc_err *err;
  int failed;
  int depth;  /* macro calls in progress */
  int rdepth; /* evaluator recursion in progress (bounded: MAX_RENDER_DEPTH) */
  jbuf gen;   /* fsdpc_jinja_span records of {% generation %} blocks */
  jbuf ends;  /* size_t offsets where writes to the output end (fsdpc_jinja_opts.ends) */
  int want_ends;
  jbuf *main_out;
  jframe *frame;
  const jnode *pending_caller;
  jframe *caller_frame;
  jv block; /* the text of the {% filter %} / {% set x | f %} block being filtered */
} jctx;

/* Recursion bounds. The parser refuses expressions taller than
 * MAX_EXPR_HEIGHT and blocks nested deeper than MAX_BLOCK_DEPTH; at render
 * time macro calls, nested values and the evaluator's own recursion are
 * bounded too, so that no template or data reaches the C stack's end. */
#define MAX_EXPR_HEIGHT 256
#define MAX_BLOCK_DEPTH 200
#define MAX_RENDER_DEPTH 3000
#define MAX_VALUE_DEPTH 400
#define MAX_CALL_DEPTH 100

/* Fails the render with "ORIGIN:LINE:COL: message"; returns -1. */
int jx_fail(jctx *x, const jnode *at, const char *fmt, ...) FSDPC_PRINTF(3, 4);
/* An allocation failed: "out of memory", or the memory budget's message. */
int jx_oom(jctx *x, const jnode *at);
/* Counts work proportional to n bytes (or items) towards the step limit. */
int jx_work(jctx *x, const jnode *at, size_t n);
/* Enters / leaves one level of recursion (MAX_RENDER_DEPTH). */
int jx_enter(jctx *x, const jnode *at);
static inline void jx_leave(jctx *x) {
  x->rdepth--;
}
/* A buffer accounted to this render's memory budget. */
static inline jbuf jx_buf(jctx *x) {
  jbuf b = {0};
  b.mem = &x->mem;
  return b;
}
/* Ends a string built in b: copies it into the arena as *out and frees b.
 * failed != 0 (an earlier jb_put ran out of memory) or a failed copy -> the
 * memory error at `at`. */
int jx_take_str(jctx *x, const jnode *at, jbuf *b, int failed, jv *out);

/* access.c: Python attribute and item lookup as jinja2's sandbox does it. */
int jx_undef_fail(jctx *x, const jnode *at, const jv *v);
jv jx_mkstr(jctx *x, const char *a, size_t na, const char *b, size_t nb, int *ok);
int jx_get_attr(jctx *x, const jnode *at, const jv *obj, const char *name, size_t len, jv *out);
int jx_get_item(jctx *x, const jnode *at, const jv *obj, const jv *key, jv *out);
/* obj[a:b:c]; NULL parts are omitted ones */
int jx_slice(jctx *x, const jnode *at, const jv *obj, jv *a, jv *b, jv *c, jv *out);
/* arith.c */
int jx_binop(jctx *x, const jnode *at, int op, const jv *a, const jv *b, jv *out);
int jx_contains(jctx *x, const jnode *at, const jv *item, const jv *cont, int *out);
int jx_neg(jctx *x, const jnode *at, const jv *a, int negate, jv *out);

/* value.c */
jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double d);
jv jv_str(const char *p, size_t n);
jv jv_from_json(const cJSON *j);
int jv_truthy(const jv *v);
int jv_is_seq(const jv *v);     /* list, tuple, range, JSON array (indexable sequences) */
int jv_is_mapping(const jv *v); /* dict, JSON object */
int jv_is_iterable(const jv *v);
int jv_has_len(const jv *v); /* what len() accepts */
int jv_is_int(const jv *v);  /* int or bool (Python's int type) */
size_t jv_len(const jv *v);  /* sequence / mapping size; strings: code points */
jv jv_seq_at(const jv *v, size_t i);
/* Mapping lookup; returns 0 if absent. */
int jv_map_get(const jv *v, const char *key, size_t klen, jv *out);
/* i-th key/value of a mapping in insertion order. */
void jv_map_at(const jv *v, size_t i, jv *key, jv *val);
/* What iterating v yields (Python's iter(v)); consumes a JL_ITER. Strings
 * give code points, mappings their keys, undefined nothing. *items is in
 * the arena (or v's own storage). Not iterable -> error. */
int jv_iter(jctx *x, const jnode *at, const jv *v, jv **items, size_t *n);
/* Python ==; values nested deeper than MAX_VALUE_DEPTH fail the render
 * (check x->failed) and compare unequal. */
int jv_equal(jctx *x, const jv *a, const jv *b);
/* <0, 0, >0; *ok = 0 when not comparable, 2 when unordered (nan). */
int jv_compare(jctx *x, const jv *a, const jv *b, int *ok);
const char *jv_type_name(const jv *v);
jdict *jd_new(jarena *a);
int jd_set(jarena *a, jdict *d, const char *k, size_t klen, jv v);
/* d[key] = v for any hashable key (Python: 1, 1.0 and True are one key). */
int jd_set_key(jctx *x, const jnode *at, jdict *d, const jv *key, jv v);
/* dict lookup of a key that is not a string: 1 found, 0 absent, -1 error. */
int jv_dict_get(jctx *x, const jnode *at, const jv *d, const jv *key, jv *out);
jlist *jl_new(jarena *a, size_t n);
jv jv_list(jlist *l);

/* print.c: Python str(), repr() and json.dumps of values. */
int jv_to_str(jctx *x, const jnode *at, const jv *v, jbuf *b);
/* Python str(v) as a value (arena); keeps the Markup flag of a string. */
int jv_stringify(jctx *x, const jnode *at, const jv *v, jv *out);
int jv_repr(jctx *x, const jnode *at, const jv *v, jbuf *b);
/* json.dumps(v, ensure_ascii, indent (the string of one level; NULL: none),
 * separators, sort_keys) */
int jv_to_json(jctx *x, const jnode *at, const jv *v, int ensure_ascii, const char *indent,
               const char *item_sep, const char *key_sep, int sort_keys, jbuf *b);
void jv_fmt_float(double d, char *out, size_t cap);

/* number.c: Python numbers beyond C's: big integers as text, int() and
 * float() of strings, and float // % ** with Python's results. */
/* Canonical decimal text of an integer literal ("-0012" -> "-12"); as a
 * JV_INT when it fits in 64 bits, else a JV_BIGINT (text in the arena). */
int jn_int_from_digits(jctx *x, const jnode *at, const char *s, size_t n, int neg, jv *out);
int jn_bigint_cmp(const jv *a, const jv *b); /* either may be JV_INT */
double jn_bigint_to_double(const jv *v);
/* int(str, 10) / float(str) as Python parses them; returns 0 and sets *out
 * on success, 1 when Python would raise ValueError, -1 on an error set in x. */
int jn_parse_int(jctx *x, const jnode *at, const char *s, size_t n, jv *out);
int jn_parse_float(const char *s, size_t n, double *out);
/* int(f) of a finite float (truncation), exact beyond 64 bits. */
int jn_int_from_double(jctx *x, const jnode *at, double d, jv *out);
int jn_float_floordiv(double a, double b, double *out); /* -1: division by zero */
int jn_float_mod(double a, double b, double *out);
/* Python's a ** b; returns -1 with an error set for what Python raises or
 * a complex result. */
int jn_pow(jctx *x, const jnode *at, const jv *a, const jv *b, jv *out);

/* UTF-8 helpers (value.c) */
size_t ju_count(const char *s, size_t n);
size_t ju_offset(const char *s, size_t n, size_t cp);  /* byte offset of code point cp */
int ju_is_space(const char *s, size_t n, size_t *len); /* Python whitespace at s */
uint32_t ju_decode(const char *s, size_t n, size_t i, size_t *len);

/* filters.c */
int jf_apply_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                    const char **kwn, const jv *kwv, size_t nkw, jv *out);
int jf_apply_test(jctx *x, const jnode *at, int id, const jv *v, const jv *args, size_t nargs,
                  int *out);
/* filters_seq.c: the filters over sequences (map, select, sort, ...) */
int jf_seq_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                  const char **kwn, const jv *kwv, size_t nkw, jv *out);
int jf_is_seq_filter(int id);
/* Named argument helpers shared by the filters. */
const jv *jf_kwarg(const char **kwn, const jv *kwv, size_t nkw, const char *name);
int jf_check_kwargs(jctx *x, const jnode *at, const char *what, const char **kwn, size_t nkw,
                    const char *const *allowed);
/* Jinja's attribute path ("a.b.0") lookup of make_attrgetter. */
int jf_attr_path(jctx *x, const jnode *at, const jv *item, const jv *path, jv *out);

/* methods.c: str, dict and list methods: v.name(args) */
int jf_call_method(jctx *x, const jnode *at, const jmethod *m, const jv *args, size_t nargs,
                   const char **kwn, const jv *kwv, size_t nkw, jv *out);
/* pyattrs.c: whether a Python object of v's type has attribute `name`
 * (*safe = 0 for what the immutable sandbox refuses: '_' names and the
 * methods that modify lists and dicts). */
int jf_has_pyattr(const jv *v, const char *name, size_t len, int *safe);
/* strings.c: Python-like string ops and sequences for filters and methods */
int jf_need_str(jctx *x, const jnode *at, const jv *v, const char *what);
/* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 Jinja's title */
int jf_case_map(jctx *x, const jnode *at, const jv *v, int mode, jv *out);
int jf_replace(jctx *x, const jnode *at, const jv *s, const jv *old, const jv *nw, int64_t count,
               jv *out);
/* A new list value of n items (copied). */
int jf_mklist(jctx *x, const jnode *at, jv *items, size_t n, jv *out);
/* The same, as a one-pass iterator (what Jinja's generator filters return). */
int jf_mkiter(jctx *x, const jnode *at, jv *items, size_t n, jv *out);
int jf_strip(const char *s, size_t n, const char *chars, size_t nchars, int left, int right,
             size_t *b, size_t *e);
/* markupsafe.escape(s) appended to b. */
int jf_escape_into(const char *s, size_t n, jbuf *b);
/* The Markup-aware string of v for an operation on a Markup: str -> escaped. */
int jf_markup_operand(jctx *x, const jnode *at, const jv *v, jv *out);

/* pyformat.c: printf-style "fmt % args" (str.__mod__) and the format filter. */
int jf_percent_format(jctx *x, const jnode *at, const jv *fmt, const jv *args, jv *out);
/* str.format(*args, **kwargs) through jinja2's sandboxed formatter. */
int jf_str_format(jctx *x, const jnode *at, const jv *fmt, const jv *args, size_t nargs,
                  const char **kwn, const jv *kwv, size_t nkw, jv *out);

#endif
