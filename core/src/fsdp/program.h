/* The FSDP step as data: the actions of one micro-batch (gather, wait,
 * forward, backward, reduce, release ...) and of the optimizer step, in the
 * order they happen, built once from the unit layout and the run's modes.
 * The engine (step.c) executes a program; the memory planner (plan/)
 * costs the same program action by action, so prefetching, offload and
 * every strategy are counted the way they run.
 *
 * The builder tracks which units are resident (gathered) and which gathers
 * are still in flight, so a program never gathers a resident unit, waits
 * only for a gather in flight, and releases only what is resident. */
#ifndef FSDPC_FSDP_PROGRAM_H
#define FSDPC_FSDP_PROGRAM_H

#include <stdint.h>

#include "fsdp/engine.h"
#include "runplan/runplan.h"

typedef enum fsdpc_act_op {
  FSDPC_ACT_FENCE_IN = 0,   /* the comm stream waits for compute (before a pass) */
  FSDPC_ACT_GATHER,         /* unit: full buffer + (cast,) all-gather; on the comm stream when
                             * the run overlaps (a prefetch when ahead of its use) */
  FSDPC_ACT_WAIT,           /* unit: compute waits for its gather */
  FSDPC_ACT_GRAD_ALLOC,     /* unit: its full gradient buffer, zeroed */
  FSDPC_ACT_FORWARD,        /* block: 0 embedding, 1..L decoder layer */
  FSDPC_ACT_HEAD,           /* the head block: forward + backward (fused loss), or forward */
  FSDPC_ACT_BACKWARD,       /* block: 0 embedding, 1..L decoder layer */
  FSDPC_ACT_REDUCE,         /* unit: reduce(-scatter) its grads into the grad shard, free them
                             * (in_bwd: the grad shard is made here, a transient) */
  FSDPC_ACT_RELEASE,        /* unit: free its full buffer */
  FSDPC_ACT_FENCE_OUT,      /* compute waits for every gather and reduction issued */
  FSDPC_ACT_ABSORB,         /* offloaded: add the grads that landed beside the host shards */
  FSDPC_ACT_SYNC,           /* optimizer step, offloaded: every copy to or from the host done */
  FSDPC_ACT_REPLICA_REDUCE, /* unit: all-reduce its grad shard over the replica group */
  FSDPC_ACT_NORM,           /* the global grad norm (one all-reduce over the shard group) */
  FSDPC_ACT_UPDATE,         /* unit: clip, optimizer update, zero the grad shard (host_async:
                             * handed to the host worker, which also recasts the bf16 copy);
                             * in_bwd: in the micro-batch, after its reduction, and the
                             * transient grad shard ends */
  FSDPC_ACT_HOST_GRAD,      /* unit, host_async, last micro-batch: once its reduced grads have
                             * reached the host, the worker adds any landing and sums squares */
  FSDPC_ACT_HOST_WAIT,      /* unit, host_async: wait for the worker's update of the unit (its
                             * first use in a pass) */
  FSDPC_ACT_STATE_IN,       /* piece, offload_optim: copy its optimizer state from host
                             * memory into device buffer p % 2 (copy stream) */
  FSDPC_ACT_STATE_OUT,      /* piece, offload_optim: copy the updated state back to the host */
  FSDPC_ACT_UPDATE_PIECE,   /* piece, offload_optim: clip, update, zero its grads */
  FSDPC_ACT_HOST_LAND,      /* unit, host_async offloaded, not the last micro-batch: the worker
                             * adds its landed grads once the copy is done (no ABSORB) */
  /* With a comm stream, the orderings that let buffers share bytes
   * (fsdp/memplan.h): */
  FSDPC_ACT_FENCE_FREE, /* after a block's releases: the comm stream waits for compute, so
                         * the gathers after it may reuse the released bytes */
  FSDPC_ACT_REDUCED,    /* unit: compute waits for its reduction (two blocks back), so the
                         * grads after it may reuse its full gradient's bytes */
  FSDPC_ACT_NOPS
} fsdpc_act_op;

typedef struct fsdpc_action {
  int16_t op;  /* fsdpc_act_op */
  int32_t arg; /* the unit or the block; -1 when neither */
} fsdpc_action;

typedef struct fsdpc_program {
  fsdpc_action *a;
  int n, cap;
} fsdpc_program;

/* What shapes a program: the engine fills it from its own state, the
 * planner from the run's modes, both through this one struct. */
typedef struct fsdpc_program_opts {
  const fsdpc_layout *lay;
  int full_is_master; /* S == 1 and fp32 compute: units are always resident */
  int grads_in_shard; /* S == 1 and not offloaded: grads accumulate in the shard */
  int reshard;        /* free a unit after its last forward use (FULL_SHARD, HYBRID_SHARD) */
  int no_sync;        /* keep full grads until the last micro-batch */
  int overlap;        /* collectives on a comm stream: prefetching means something */
  int forward_prefetch, backward_prefetch;
  int offload;  /* shards in host memory */
  int replicas; /* replica group size R */
  /* Set after fsdpc__program_opts_for (engine and planner alike): */
  int host_async;    /* cpu_offload: the optimizer step runs on a host worker thread, unit by
                      * unit, overlapping the GPU (or, on the CPU, the main thread) */
  int offload_optim; /* optimizer state in host memory, streamed through two device buffers */
  uint64_t piece;    /* offload_optim: elements per piece of a unit's state (>= 1) */
  /* S == 1 and not offloaded: frozen units (the base under LoRA) are their
   * own full buffer, in the compute dtype, always resident */
  int frozen_resident;
  /* offload_optim: the pieces, when cut otherwise than by `piece` (quantized
   * state: fsdpc__qstate_pieces_build); NULL: cut by `piece` */
  const struct fsdpc_state_pieces *pieces;
  /* fsdp.keep_params (FSDPC_KEEP_*): units a micro-batch that is not the
   * step's last leaves gathered for the next one (parameters do not change
   * inside an optimizer step); the *_IN programs start with them resident */
  int keep;
  /* optim.in_backward (one micro-batch a step, nothing clipped): unit u's
   * REPLICA_REDUCE and UPDATE run in the micro-batch as soon as compute has
   * waited for its reduction (REDUCED; at once without a comm stream; after
   * FENCE_OUT for the last units reduced); the optimizer step is NORM only.
   * The grad shard lives from REDUCE to UPDATE (at S == 1 the full grads,
   * from GRAD_ALLOC: grads_in_shard is 0). */
  int in_bwd;
} fsdpc_program_opts;

/* offload_optim streams each unit's state in pieces of at most `piece`
 * elements (a unit of n elements: ceil(n / piece) pieces, in unit order).
 * Piece p is elements [lo[p], hi[p]) of unit unit[p]'s shard. */
typedef struct fsdpc_state_pieces {
  int n;
  int *unit;         /* (n) */
  uint64_t *lo, *hi; /* (n) */
  uint64_t max_len;  /* the longest piece, elements */
} fsdpc_state_pieces;

fsdpc_status fsdpc__state_pieces_build(const fsdpc_layout *lay, uint64_t piece,
                                       fsdpc_state_pieces *out, fsdpc_err *err);
void fsdpc__state_pieces_free(fsdpc_state_pieces *p);
/* Elements per piece for device buffers of buffer_bytes and n_slots fp32
 * state planes: a multiple of 4096 elements (so pieces start on a block of
 * any blockwise state), at least 4096. */
static inline uint64_t fsdpc__state_piece_elems(uint64_t buffer_bytes, uint32_t n_slots) {
  uint64_t per = (uint64_t)(n_slots ? n_slots : 1) * 4;
  uint64_t n = buffer_bytes / per / 4096 * 4096;
  return n < 4096 ? 4096 : n;
}

/* The one derivation of the options above from the facts of a run: the
 * layout, group sizes S and R, whether compute is fp32 (the CPU), offload,
 * reshard-after-forward, no_sync, a comm stream, the prefetch settings. */
void fsdpc__program_opts_for(const fsdpc_layout *lay, int S, int R, int compute_f32, int offload,
                             int reshard, int no_sync, int overlap, int forward_prefetch,
                             int backward_prefetch, fsdpc_program_opts *out);

struct fsdpc_run_exec;
/* The same from a run's resolved execution (runplan/runplan.h), for the
 * engine and the planner alike: the prefetch settings count only with a
 * comm stream; pieces: offload_optim's, when cut otherwise than by the
 * fp32 rule (quantized state), else NULL. */
void fsdpc__program_opts_exec(const fsdpc_layout *lay, const struct fsdpc_run_exec *x,
                              const fsdpc_state_pieces *pieces, fsdpc_program_opts *out);

typedef enum fsdpc_program_kind {
  FSDPC_PROGRAM_MICRO = 0,     /* one training micro-batch, grads reduced */
  FSDPC_PROGRAM_MICRO_NO_SYNC, /* one training micro-batch, grads kept (no_sync, not last) */
  FSDPC_PROGRAM_FORWARD,       /* forward through the head only (evaluation, generation) */
  FSDPC_PROGRAM_OPTIM,         /* the optimizer step */
  /* keep != NONE: the same two micro-batches after a micro-batch of the same
   * step, which left its kept units gathered */
  FSDPC_PROGRAM_MICRO_IN,         /* the step's last micro-batch */
  FSDPC_PROGRAM_MICRO_NO_SYNC_IN, /* neither the step's first nor its last */
  FSDPC_PROGRAM_NKINDS
} fsdpc_program_kind;

/* The kind of micro-batch mi (0-based) of a step of accum micro-batches. */
static inline fsdpc_program_kind fsdpc__micro_kind(int mi, int accum) {
  if (mi == accum - 1)
    return mi > 0 ? FSDPC_PROGRAM_MICRO_IN : FSDPC_PROGRAM_MICRO;
  return mi > 0 ? FSDPC_PROGRAM_MICRO_NO_SYNC_IN : FSDPC_PROGRAM_MICRO_NO_SYNC;
}

/* Builds the program of one kind into out (emptied first). */
fsdpc_status fsdpc__program_build(const fsdpc_program_opts *o, fsdpc_program_kind kind,
                                  fsdpc_program *out, fsdpc_err *err);
void fsdpc__program_free(fsdpc_program *p);

/* "gather", "forward", ... for logs and tests. */
const char *fsdpc__act_name(int op);

#endif
