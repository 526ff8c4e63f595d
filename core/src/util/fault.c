/* Fault injection from FSDPC_FAULT (see fault.h). */
#include "util/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Process-wide: read by allocators and collective wrappers that know no
 * session (fault.h says why). All fields are set by arm before `on` is
 * published and only read afterwards; the counter is atomic. */
static struct {
  int on; /* atomic: hooks fire */
  int rank;
  int64_t alloc, hang, error, kernel; /* 0 = off; hang: a sequence number + 1 */
  int64_t allocs;                     /* atomic: device allocations seen */
} g_fault;

static int parse_i64(const char *v, int64_t lo, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo)
    return -1;
  *out = x;
  return 0;
}

static fsdpc_status parse(const char *spec, int self, fsdpc_err *err) {
  char buf[256];
  if (strlen(spec) >= sizeof buf)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s is longer than %zu characters",
                       FSDPC_FAULT_ENV, sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", spec);
  int64_t rank = -1, alloc = 0, hang = -1, error = 0, kernel = 0;
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s='%s': '%s' is not key=value (keys: rank, alloc, hang, error, kernel)",
                         FSDPC_FAULT_ENV, spec, kv);
    *eq = '\0';
    const char *k = kv, *v = eq + 1;
    int bad;
    if (strcmp(k, "rank") == 0)
      bad = strcmp(v, "all") == 0 ? (rank = -1, 0) : parse_i64(v, 0, &rank);
    else if (strcmp(k, "alloc") == 0)
      bad = parse_i64(v, 1, &alloc);
    else if (strcmp(k, "hang") == 0)
      bad = parse_i64(v, 0, &hang);
    else if (strcmp(k, "error") == 0)
      bad = parse_i64(v, 1, &error);
    else if (strcmp(k, "kernel") == 0)
      bad = parse_i64(v, 1, &kernel);
    else
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s='%s': unknown key '%s' (keys: rank, alloc, hang, error, kernel)",
                         FSDPC_FAULT_ENV, spec, k);
    if (bad)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s='%s': %s=%s must be a whole number (%s)",
                         FSDPC_FAULT_ENV, spec, k, v,
                         strcmp(k, "rank") == 0   ? "a rank or 'all'"
                         : strcmp(k, "hang") == 0 ? ">= 0"
                                                  : ">= 1");
  }
  if (!alloc && hang < 0 && !error && !kernel)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s='%s' names no fault (alloc=N, hang=N, error=S or kernel=S)",
                       FSDPC_FAULT_ENV, spec);
  if (rank >= 0 && rank != self)
    return FSDPC_OK; /* another rank's fault */
  g_fault.rank = self;
  g_fault.alloc = alloc;
  g_fault.hang = hang + 1;
  g_fault.error = error;
  g_fault.kernel = kernel;
  __atomic_store_n(&g_fault.allocs, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_fault.on, 1, __ATOMIC_RELEASE);
  FSDPC_LOGW("fault injection armed on rank %d: %s=%s", self, FSDPC_FAULT_ENV, spec);
  return FSDPC_OK;
}

fsdpc_status fsdpc__fault_arm(int rank, fsdpc_err *err) {
  fsdpc__fault_disarm();
  const char *spec = getenv(FSDPC_FAULT_ENV);
  if (!spec || !*spec)
    return FSDPC_OK;
  return parse(spec, rank, err);
}

void fsdpc__fault_disarm(void) {
  __atomic_store_n(&g_fault.on, 0, __ATOMIC_RELEASE);
}

static int on(void) {
  return __atomic_load_n(&g_fault.on, __ATOMIC_ACQUIRE);
}

int fsdpc__fault_alloc(void) {
  if (!on() || !g_fault.alloc)
    return 0;
  int64_t n = __atomic_add_fetch(&g_fault.allocs, 1, __ATOMIC_RELAXED);
  if (n != g_fault.alloc)
    return 0;
  FSDPC_LOGW("fault injection: device allocation %lld on rank %d fails (%s)", (long long)n,
             g_fault.rank, FSDPC_FAULT_ENV);
  return 1;
}

fsdpc_status fsdpc__fault_alloc_fail(fsdpc_err *err, const char *device, uint64_t bytes) {
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "%s: out of memory allocating %.1f MiB (injected by %s: allocation %lld)",
                     device, (double)bytes / 1048576.0, FSDPC_FAULT_ENV, (long long)g_fault.alloc);
}

int fsdpc__fault_hang(uint64_t seq) {
  if (!on() || g_fault.hang != (int64_t)seq + 1)
    return 0;
  FSDPC_LOGW("fault injection: rank %d stalls before collective seq %llu (%s)", g_fault.rank,
             (unsigned long long)seq, FSDPC_FAULT_ENV);
  return 1;
}

fsdpc_status fsdpc__fault_step(int64_t step, fsdpc_err *err) {
  if (!on() || g_fault.error != step)
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "step %lld: injected error (%s)", (long long)step,
                     FSDPC_FAULT_ENV);
}

int fsdpc__fault_kernel(int64_t step) {
  if (!on() || g_fault.kernel != step)
    return 0;
  FSDPC_LOGW("fault injection: a trapping kernel at step %lld on rank %d (%s)", (long long)step,
             g_fault.rank, FSDPC_FAULT_ENV);
  return 1;
}
