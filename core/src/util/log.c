#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_level = FSDPC_LOG_INFO;
static int g_rank = -1;
/* Where lines go: stderr, or the embedder's sink (fsdpc_set_log_sink). */
static fsdpc_log_fn g_sink;
static void *g_sink_user;

void fsdpc_set_log_sink(fsdpc_log_fn fn, void *user) {
  g_sink_user = user;
  g_sink = fn;
}

void fsdpc_set_log_level(int32_t level) {
  g_level = level;
}

void fsdpc_set_log_rank(int32_t rank) {
  g_rank = rank;
}

void fsdpc_log(int32_t level, const char *line) {
  fsdpc__log(level, "%s", line ? line : "");
}

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
  if (g_sink) {
    g_sink(g_sink_user, level, line);
    return;
  }
  /* One write per line so that lines from several ranks do not interleave. */
  size_t len = strlen(line);
  if (len + 1 < sizeof line) {
    line[len] = '\n';
    line[len + 1] = '\0';
  }
  fputs(line, stderr);
}
