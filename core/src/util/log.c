#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_level = FSDPC_LOG_INFO;
static int g_rank = -1;

void fsdpc__log_setup(int level, int rank) {
  g_level = level;
  g_rank = rank;
}

int fsdpc__log_level(void) { return g_level; }

void fsdpc__log(int level, const char *fmt, ...) {
  if (level > g_level) return;
  static const char *tags[] = {"error", "warn", "info", "debug"};
  char line[2048];
  int n = 0;
  if (g_rank >= 0) n = snprintf(line, sizeof line, "[rank %d] ", g_rank);
  if (level <= FSDPC_LOG_WARN)
    n += snprintf(line + n, sizeof line - (size_t)n, "%s: ", tags[level]);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  /* One write per line so that lines from several ranks do not interleave. */
  size_t len = strlen(line);
  if (len + 1 < sizeof line) {
    line[len] = '\n';
    line[len + 1] = '\0';
  }
  fputs(line, stderr);
}
