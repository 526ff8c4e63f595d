/* Pieces shared by the safetensors reader and writer (private to io/). */
#ifndef FSDPC_IO_ST_COMMON_H
#define FSDPC_IO_ST_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O assumes a little-endian host (x86-64, aarch64)"
#endif

/* Copies name into out for an error message: control bytes become '?' and
 * long names are cut with "...", so a hostile header cannot break the
 * one-line error rule. Returns out. */
const char *fsdpc__st_quote(char *out, size_t cap, const char *name);
/* The table's own copy of a dtype name ("BF16"), or NULL if unknown. */
const char *fsdpc__st_dtype_canon(const char *name);
/* "[2, 3]" into out; returns out. */
const char *fsdpc__st_fmt_shape(char *out, size_t cap, const int64_t *shape, int32_t ndim);

#endif
