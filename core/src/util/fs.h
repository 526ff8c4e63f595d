/* Small file-system helpers. */
#ifndef FSDPC_UTIL_FS_H
#define FSDPC_UTIL_FS_H

#include "util/err.h"

/* mkdir -p: creates path and its missing parents (mode 0755). */
fsdpc_status fsdpc__mkdir_p(const char *path, fsdpc_err *err);

/* Creates the folder a file is about to be written in (mkdir -p of its
 * dirname); a bare file name needs nothing. */
fsdpc_status fsdpc__mkdir_parent(const char *file_path, fsdpc_err *err);

#endif
