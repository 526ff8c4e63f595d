/* Structural check of a sharded checkpoint's meta.json (meta_check.c). */
#ifndef FSDPC_SHARDED_META_CHECK_H
#define FSDPC_SHARDED_META_CHECK_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* 0 when o is well formed; else -1 and one line (without the file name) in
 * why. */
int fsdpc_sharded_check_meta(const cJSON *o, char *why, size_t cap);

#endif
