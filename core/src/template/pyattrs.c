/* The attributes Python objects have (dir() without the '_' names), by
 * type, and which of them jinja2's ImmutableSandboxedEnvironment refuses.
 *
 * jinja2 resolves `obj.name` with getattr() first and `obj[name]` with the
 * subscript first: `d.items` is the dict method even when d has a key
 * "items", `d['items']` is the key. So the engine must know every name a
 * type has, not only the methods it implements; calling a method it does
 * not implement is refused (methods.c). Lists from Python 3.11. */
#include <string.h>

#include "template/internal.h"

static const char *const STR_ATTRS[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill",        NULL};
/* markupsafe.Markup adds these to str's */
static const char *const MARKUP_ATTRS[] = {"escape", "striptags", "unescape", NULL};
static const char *const DICT_ATTRS[] = {"clear",      "copy",   "fromkeys", "get",
                                         "items",      "keys",   "pop",      "popitem",
                                         "setdefault", "update", "values",   NULL};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const LIST_ATTRS[] = {"append", "clear", "copy",   "count",   "extend", "index",
                                         "insert", "pop",   "remove", "reverse", "sort",   NULL};
static const char *const LIST_UNSAFE[] = {"append", "clear",   "extend", "insert", "pop",
                                          "remove", "reverse", "sort",   NULL};
static const char *const TUPLE_ATTRS[] = {"count", "index", NULL};
static const char *const INT_ATTRS[] = {
    "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator", "from_bytes", "imag",
    "numerator",        "real",      "to_bytes",   NULL};
static const char *const FLOAT_ATTRS[] = {"as_integer_ratio", "conjugate", "fromhex", "hex", "imag",
                                          "is_integer",       "real",      NULL};
static const char *const GEN_ATTRS[] = {"close",      "gi_code",      "gi_frame",
                                        "gi_running", "gi_suspended", "gi_yieldfrom",
                                        "send",       "throw",        NULL};
static const char *const VIEW_ATTRS[] = {"isdisjoint", "mapping", NULL};
static const char *const RANGE_ATTRS[] = {"count", "index", "start", "step", "stop", NULL};

static int in_list(const char *const *l, const char *name, size_t len) {
  for (size_t i = 0; l[i]; i++)
    if (strlen(l[i]) == len && memcmp(l[i], name, len) == 0)
      return 1;
  return 0;
}

int jf_has_pyattr(const jv *v, const char *name, size_t len, int *safe) {
  *safe = 1;
  /* Every object has dunder attributes (__class__, __doc__, ...); the
   * sandbox refuses any name that starts with '_'. */
  if (len > 4 && name[0] == '_' && name[1] == '_' && name[len - 1] == '_' && name[len - 2] == '_') {
    *safe = 0;
    return 1;
  }
  switch (v->kind) {
  case JV_STR:
    return in_list(STR_ATTRS, name, len) || (v->safe && in_list(MARKUP_ATTRS, name, len));
  case JV_DICT:
    *safe = !in_list(DICT_UNSAFE, name, len);
    return in_list(DICT_ATTRS, name, len);
  case JV_JSON:
    if (cJSON_IsObject(v->u.j)) {
      *safe = !in_list(DICT_UNSAFE, name, len);
      return in_list(DICT_ATTRS, name, len);
    }
    *safe = !in_list(LIST_UNSAFE, name, len);
    return in_list(LIST_ATTRS, name, len);
  case JV_LIST:
    switch (v->u.l->type) {
    case JL_LIST:
      *safe = !in_list(LIST_UNSAFE, name, len);
      return in_list(LIST_ATTRS, name, len);
    case JL_TUPLE:
      return in_list(TUPLE_ATTRS, name, len);
    case JL_ITER:
      return in_list(GEN_ATTRS, name, len);
    case JL_RANGE:
      return in_list(RANGE_ATTRS, name, len);
    default:
      return in_list(VIEW_ATTRS, name, len);
    }
  case JV_INT:
  case JV_BIGINT:
  case JV_BOOL:
    return in_list(INT_ATTRS, name, len);
  case JV_FLOAT:
    return in_list(FLOAT_ATTRS, name, len);
  default:
    return 0;
  }
}
