/* Logging: one line per message to stderr, prefixed with the rank when the
 * process is part of a job ("[rank 3] ..."). The level and rank are
 * process-wide settings made once at start-up by the CLI or trainer. */
#ifndef FSDPC_UTIL_LOG_H
#define FSDPC_UTIL_LOG_H

#include "util/err.h"

void fsdpc__log_setup(int level, int rank);
int fsdpc__log_level(void);
void fsdpc__log(int level, const char *fmt, ...) FSDPC_PRINTF(2, 3);

#define FSDPC_LOGE(...) fsdpc__log(FSDPC_LOG_ERROR, __VA_ARGS__)
#define FSDPC_LOGW(...) fsdpc__log(FSDPC_LOG_WARN, __VA_ARGS__)
#define FSDPC_LOGI(...) fsdpc__log(FSDPC_LOG_INFO, __VA_ARGS__)
#define FSDPC_LOGD(...) fsdpc__log(FSDPC_LOG_DEBUG, __VA_ARGS__)

#endif
