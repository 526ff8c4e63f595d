#include "io/st_common.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"

typedef struct dtype_row {
  const char *name;
  int32_t dtype;
  uint32_t size;
} dtype_row;

/* Every dtype the reference implementation defines with a whole number of
 * bytes per element. Only the first three can be read as float. */
static const dtype_row dtype_table[] = {
    {"F32", FSDPC_DTYPE_F32, 4},          {"BF16", FSDPC_DTYPE_BF16, 2},
    {"F16", FSDPC_DTYPE_F16, 2},          {"I32", FSDPC_DTYPE_I32, 4},
    {"I64", FSDPC_DTYPE_I64, 8},          {"U8", FSDPC_DTYPE_U8, 1},
    {"BOOL", FSDPC_ST_DTYPE_OTHER, 1},    {"I8", FSDPC_ST_DTYPE_OTHER, 1},
    {"I16", FSDPC_ST_DTYPE_OTHER, 2},     {"U16", FSDPC_ST_DTYPE_OTHER, 2},
    {"U32", FSDPC_ST_DTYPE_OTHER, 4},     {"U64", FSDPC_ST_DTYPE_OTHER, 8},
    {"F64", FSDPC_ST_DTYPE_OTHER, 8},     {"F8_E4M3", FSDPC_ST_DTYPE_OTHER, 1},
    {"F8_E5M2", FSDPC_ST_DTYPE_OTHER, 1}, {"F8_E8M0", FSDPC_ST_DTYPE_OTHER, 1},
};

int32_t fsdpc__st_dtype_parse(const char *name, uint32_t *elem_size) {
  for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++) {
    if (strcmp(name, dtype_table[i].name) == 0) {
      if (elem_size)
        *elem_size = dtype_table[i].size;
      return dtype_table[i].dtype;
    }
  }
  return -2;
}

/* Canonical name string for a table entry, so info->dtype_name never points
 * into a freed JSON tree. */
const char *fsdpc__st_dtype_canon(const char *name) {
  for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
    if (strcmp(name, dtype_table[i].name) == 0)
      return dtype_table[i].name;
  return NULL;
}

const char *fsdpc__st_dtype_name(int32_t dtype) {
  for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
    if (dtype_table[i].dtype == dtype && dtype != FSDPC_ST_DTYPE_OTHER)
      return dtype_table[i].name;
  return NULL;
}

const char *fsdpc__st_quote(char *out, size_t cap, const char *name) {
  size_t j = 0, len = strlen(name);
  size_t keep = len + 1 > cap ? cap - 4 : len;
  for (size_t i = 0; i < keep && j + 1 < cap; i++) {
    unsigned char c = (unsigned char)name[i];
    out[j++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (keep < len) {
    memcpy(out + j, "...", 3);
    j += 3;
  }
  out[j] = '\0';
  return out;
}

const char *fsdpc__st_fmt_shape(char *out, size_t cap, const int64_t *shape, int32_t ndim) {
  size_t j = 0;
  j += (size_t)snprintf(out, cap, "[");
  for (int32_t i = 0; i < ndim && j < cap; i++)
    j += (size_t)snprintf(out + j, cap - j, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (j < cap)
    snprintf(out + j, cap - j, "]");
  return out;
}
