#include "util/mem.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t g_cur[FSDPC_MEM_NCAT];
static _Atomic int64_t g_peak[FSDPC_MEM_NCAT];
static _Atomic int64_t g_total_cur, g_total_peak;

static void raise_peak(_Atomic int64_t *peak, int64_t v) {
  int64_t old = atomic_load(peak);
  while (v > old && !atomic_compare_exchange_weak(peak, &old, v)) {
  }
}

void *fsdpc__mem_alloc(fsdpc_mem_cat cat, size_t bytes) {
  void *p = NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  if (rounded == 0) rounded = 64;
  if (posix_memalign(&p, 64, rounded) != 0) return NULL;
  memset(p, 0, rounded);
  raise_peak(&g_peak[cat], atomic_fetch_add(&g_cur[cat], (int64_t)bytes) + (int64_t)bytes);
  raise_peak(&g_total_peak,
             atomic_fetch_add(&g_total_cur, (int64_t)bytes) + (int64_t)bytes);
  return p;
}

void fsdpc__mem_free(fsdpc_mem_cat cat, void *ptr, size_t bytes) {
  if (!ptr) return;
  free(ptr);
  atomic_fetch_sub(&g_cur[cat], (int64_t)bytes);
  atomic_fetch_sub(&g_total_cur, (int64_t)bytes);
}

void fsdpc__mem_account(fsdpc_mem_cat cat, int64_t bytes) {
  raise_peak(&g_peak[cat], atomic_fetch_add(&g_cur[cat], bytes) + bytes);
  raise_peak(&g_total_peak, atomic_fetch_add(&g_total_cur, bytes) + bytes);
}

void fsdpc__mem_stats(fsdpc_mem_stats *out) {
  for (int i = 0; i < FSDPC_MEM_NCAT; i++) {
    out->current[i] = atomic_load(&g_cur[i]);
    out->peak[i] = atomic_load(&g_peak[i]);
  }
  out->total_current = atomic_load(&g_total_cur);
  out->total_peak = atomic_load(&g_total_peak);
}

void fsdpc__mem_reset_peak(void) {
  for (int i = 0; i < FSDPC_MEM_NCAT; i++)
    atomic_store(&g_peak[i], atomic_load(&g_cur[i]));
  atomic_store(&g_total_peak, atomic_load(&g_total_cur));
}

const char *fsdpc__mem_cat_name(fsdpc_mem_cat cat) {
  static const char *names[] = {
#define FSDPC_MEM_NAME_(name, text) text,
      FSDPC_MEM_CATEGORIES(FSDPC_MEM_NAME_)
#undef FSDPC_MEM_NAME_
  };
  return (unsigned)cat < FSDPC_MEM_NCAT ? names[cat] : "?";
}

void fsdpc__mem_rss(int64_t *current, int64_t *peak) {
  *current = *peak = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  long long kb;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmRSS: %lld kB", &kb) == 1) *current = kb * 1024;
    if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) *peak = kb * 1024;
  }
  fclose(f);
}
