/* Scalar text <-> typed values, shared by the config loader and plugin
 * options so that both accept exactly the same spellings. */
#ifndef FSDPC_CONFIG_SCALAR_H
#define FSDPC_CONFIG_SCALAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* true/false, yes/no, on/off in lower, Title or UPPER case. */
bool fsdpc__parse_bool(const char *s, bool *out);
/* A decimal integer, or a number literal with an integral value (1e6). */
bool fsdpc__parse_int(const char *s, int64_t *out);
/* A finite number (strtod syntax, whole string). */
bool fsdpc__parse_float(const char *s, double *out);
/* Shortest text that parses back to exactly v. */
void fsdpc__format_float(double v, char *buf, size_t cap);
/* Checks v against a range; on failure writes e.g. "must be >= 0" or
 * "must be in [0, 1)" into why and returns false. */
bool fsdpc__check_range(double v, bool has_min, double min, bool min_excl, bool has_max, double max,
                        bool max_excl, char *why, size_t cap);
/* Rewrites control characters in msg (a newline in a quoted YAML value or
 * an override) as \n, \t, \xNN so that every error stays one line. */
void fsdpc__one_line(char *msg, size_t cap);
/* "file:line:col", or just "file" when line is 0. */
void fsdpc__format_where(char *buf, size_t cap, const char *file, int line, int col);

#endif
