/* Static memory layout: offsets in one arena for buffers whose lifetimes
 * may overlap, so that buffers that are never live together share bytes
 * (what TFLite's arena planner and XLA's buffer assignment do). A pure
 * function: buffers and a conflict relation in, offsets and the arena's size
 * out; nothing is allocated but the answer.
 *
 * Greedy by size: buffers go largest first (ties: lower index first), each
 * at the lowest aligned offset whose bytes no already placed buffer it
 * conflicts with covers. Deterministic: the same input gives the same
 * offsets. Two conflicting buffers never overlap in bytes
 * (tests/fsdp/test_arena_layout.c checks both on random inputs). */
#ifndef FSDPC_FSDP_ARENA_LAYOUT_H
#define FSDPC_FSDP_ARENA_LAYOUT_H

#include <stdint.h>

#include "util/err.h"

/* Whether buffers a and b may be live at once (so must not share bytes).
 * Must be symmetric; a buffer's conflict with itself is never asked. */
typedef int (*fsdpc_alay_conflict)(const void *ctx, int a, int b);

/* bytes[i] (0: a buffer of no bytes, placed at 0) in, offset[i] out, each
 * a multiple of align (a power of two); *total: the arena's size, the
 * largest offset + bytes rounded up to align. */
fsdpc_status fsdpc__arena_layout(const uint64_t *bytes, int n, uint64_t align,
                                 fsdpc_alay_conflict conflict, const void *ctx, uint64_t *offset,
                                 uint64_t *total, fsdpc_err *err);

/* The conflict relation of buffers live over intervals of a timeline: two
 * buffers conflict when one of a's intervals intersects one of b's.
 * Buffer i's intervals are [lo[k], hi[k]) for k in [first[i], first[i + 1]). */
typedef struct fsdpc_alay_intervals {
  const int *first; /* (n + 1) */
  const int64_t *lo, *hi;
} fsdpc_alay_intervals;

int fsdpc__alay_intervals_conflict(const void *ctx, int a, int b);

#endif
