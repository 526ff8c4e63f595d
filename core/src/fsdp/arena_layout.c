/* Greedy-by-size placement of buffers in one arena (arena_layout.h). */
#include "fsdp/arena_layout.h"

#include <stdlib.h>

typedef struct span {
  uint64_t lo, hi;
} span;

typedef struct item {
  uint64_t bytes;
  int i;
} item;

/* Largest first; the lower index first on ties (a total order: the layout
 * does not depend on the sort's stability). */
static int by_size(const void *a, const void *b) {
  const item *x = a, *y = b;
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

static int by_lo(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->lo != y->lo)
    return x->lo < y->lo ? -1 : 1;
  return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static uint64_t round_up(uint64_t v, uint64_t align) {
  return (v + align - 1) & ~(align - 1);
}

fsdpc_status fsdpc__arena_layout(const uint64_t *bytes, int n, uint64_t align,
                                 fsdpc_alay_conflict conflict, const void *ctx, uint64_t *offset,
                                 uint64_t *total, fsdpc_err *err) {
  *total = 0;
  if (align == 0 || (align & (align - 1)))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "arena layout: alignment %llu is not a power of two",
                       (unsigned long long)align);
  if (n <= 0)
    return FSDPC_OK;
  item *idx = malloc((size_t)n * sizeof *idx);
  int *placed = malloc((size_t)n * sizeof *placed);
  span *busy = malloc((size_t)n * sizeof *busy);
  if (!idx || !placed || !busy) {
    free(idx);
    free(placed);
    free(busy);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory laying out %d buffers", n);
  }
  for (int i = 0; i < n; i++)
    idx[i] = (item){bytes[i], i};
  qsort(idx, (size_t)n, sizeof *idx, by_size);
  int np = 0;
  uint64_t end = 0;
  for (int k = 0; k < n; k++) {
    int i = idx[k].i;
    uint64_t size = round_up(bytes[i], align);
    offset[i] = 0;
    if (size == 0)
      continue;
    int nb = 0; /* the placed buffers live with i, by offset */
    for (int q = 0; q < np; q++) {
      int j = placed[q];
      if (conflict(ctx, i, j))
        busy[nb++] = (span){offset[j], offset[j] + round_up(bytes[j], align)};
    }
    qsort(busy, (size_t)nb, sizeof *busy, by_lo);
    uint64_t at = 0; /* the lowest gap that holds size */
    for (int q = 0; q < nb && busy[q].lo < at + size; q++)
      if (busy[q].hi > at)
        at = busy[q].hi;
    offset[i] = at;
    placed[np++] = i;
    if (at + size > end)
      end = at + size;
  }
  *total = end;
  free(idx);
  free(placed);
  free(busy);
  return FSDPC_OK;
}

int fsdpc__alay_intervals_conflict(const void *ctx, int a, int b) {
  const fsdpc_alay_intervals *iv = ctx;
  for (int p = iv->first[a]; p < iv->first[a + 1]; p++)
    for (int q = iv->first[b]; q < iv->first[b + 1]; q++)
      if (iv->lo[p] < iv->hi[q] && iv->lo[q] < iv->hi[p])
        return 1;
  return 0;
}
