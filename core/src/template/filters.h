/* The filter ids and the argument binding shared by filters.c and
 * filters_seq.c. */
#ifndef FSDPC_TEMPLATE_FILTERS_H
#define FSDPC_TEMPLATE_FILTERS_H

#include "template/internal.h"

enum {
  FL_ABS = 1,
  FL_ATTR,
  FL_BATCH,
  FL_CAPITALIZE,
  FL_CENTER,
  FL_COUNT,
  FL_D,
  FL_DEFAULT,
  FL_DICTSORT,
  FL_E,
  FL_ESCAPE,
  FL_FIRST,
  FL_FLOAT,
  FL_FORCEESCAPE,
  FL_FORMAT,
  FL_GROUPBY,
  FL_INDENT,
  FL_INT,
  FL_ITEMS,
  FL_JOIN,
  FL_LAST,
  FL_LENGTH,
  FL_LIST,
  FL_LOWER,
  FL_MAP,
  FL_MAX,
  FL_MIN,
  FL_REJECT,
  FL_REJECTATTR,
  FL_REPLACE,
  FL_REVERSE,
  FL_ROUND,
  FL_SAFE,
  FL_SELECT,
  FL_SELECTATTR,
  FL_SLICE,
  FL_SORT,
  FL_STRING,
  FL_SUM,
  FL_TITLE,
  FL_TOJSON,
  FL_TRIM,
  FL_UNIQUE,
  FL_UPPER,
  FL_WORDCOUNT,
  FL_N
};

/* Binds positional and keyword arguments to params (NULL-terminated
 * names), as Python does: got[i] is NULL for one not given. */
int jf_bind(jctx *x, const jnode *at, const char *fname, const char *const *params, const jv *args,
            size_t nargs, const char **kwn, const jv *kwv, size_t nkw, const jv **got);

#endif
