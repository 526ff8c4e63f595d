/* Printing strings that came from outside (a store value, a plugin's
 * description, a file's contents): control characters and bytes that are not
 * printable UTF-8 are written as escapes, so that a terminal never receives a
 * raw newline, carriage return or escape sequence from them. */
#ifndef FSDPC_UTIL_ESCAPE_H
#define FSDPC_UTIL_ESCAPE_H

#include <stddef.h>

/* Writes src[0..len) into dst (cap bytes, always NUL-terminated) with
 * \n, \r, \t, \\ and \xNN escapes for control bytes (C0, DEL, C1) and
 * malformed UTF-8; a value cut short by cap ends in "...". Returns dst. */
char *fsdpc__escape(char *dst, size_t cap, const char *src, size_t len);

/* fsdpc__escape of a NUL-terminated string (NULL prints as ""). */
char *fsdpc__escape_str(char *dst, size_t cap, const char *src);

#endif
