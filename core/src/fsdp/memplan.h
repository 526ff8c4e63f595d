/* The memory plan of one rank (issue 32): where every buffer the engine
 * and the model context keep in device memory lives, computed once before
 * step 1 from the run's resolved execution (runplan/runplan.h) and the step
 * programs (program.h), by the engine (fsdp/units.c) and by the planner
 * (plan/plan.c) alike, so `fsdpc plan` and the run agree by construction.
 *
 * One arena per device, in three parts:
 *   [0, persist_bytes)      shards (master, grad (not under in_bwd),
 *                           optimizer state), their
 *                           bf16 copies, the reduce-scatter landing
 *                           buffers, the grad-norm accumulator, the state
 *                           streaming buffers: live for the whole run;
 *   [act_offset, +act_bytes) the model context's activations and scratch;
 *   [trans_offset, +trans_bytes) the transients: gathered units, full
 *                           gradients, bf16 reduction copies, replica
 *                           reduction buffers. Each buffer a step's program
 *                           makes has a fixed offset here; buffers whose
 *                           lifetimes do not overlap share bytes
 *                           (arena_layout.h).
 *
 * Lifetimes respect the streams. A transient is accessed on the compute
 * stream C, the comm stream M (gathers, reductions, host uploads) or the
 * d2h stream D (cpu_offload's grads at S == 1). The plan replays each
 * program action by action with a vector clock per stream: vc[Y][X] is the
 * last position of X's work that Y is ordered after, through the events the
 * program records and waits (a gather's event, the grads-ready event of a
 * reduction, the fences, FENCE_FREE after a block's releases, REDUCED
 * before the grads of two blocks later). Buffer b may take bytes buffer a
 * held only if every first access of b, on any stream Y, happens where Y is
 * ordered after every access of a (vc[Y][X] >= a's last access on X, and a
 * strictly earlier position on Y itself); else they conflict and get
 * disjoint bytes. So no byte is reused before the GPU is done with it,
 * whatever the streams' relative speed: the ordering is the program's own
 * events, which step.c issues exactly as the replay models them.
 *
 * The step's programs run in a fixed sequence (the step's micro-batches by
 * position, then the optimizer step); evaluation's forward, the inference
 * block path (fsdpc__engine_block_weights) and a checkpoint's unit gathers
 * each start and end with every stream joined and nothing transient live,
 * so each is laid out on its own and all of them share the transient
 * region. */
#ifndef FSDPC_FSDP_MEMPLAN_H
#define FSDPC_FSDP_MEMPLAN_H

#include <stdint.h>

#include "fsdp/program.h"
#include "runplan/runplan.h"
#include "util/mem.h"

#define FSDPC_MP_NONE UINT64_MAX

/* The programs the engine runs, by role. */
typedef enum fsdpc_mp_slot {
  FSDPC_MP_FIRST = 0, /* a step's first micro-batch (its only one when accum is 1) */
  FSDPC_MP_MID,       /* a micro-batch neither first nor last (accum >= 3) */
  FSDPC_MP_LAST,      /* the last of two or more */
  FSDPC_MP_OPTIM,     /* the optimizer step */
  FSDPC_MP_FORWARD,   /* evaluation and logits: forward through the head */
  FSDPC_MP_NSLOTS
} fsdpc_mp_slot;

/* The slot of micro-batch mi (0-based) of a step of accum. */
static inline fsdpc_mp_slot fsdpc__mp_micro_slot(int mi, int accum) {
  return mi == 0 ? FSDPC_MP_FIRST : mi == accum - 1 ? FSDPC_MP_LAST : FSDPC_MP_MID;
}

/* A unit's persistent buffers: arena offsets, FSDPC_MP_NONE where it has
 * none or where it lives in pinned host memory (cpu_offload's shards,
 * offload.optimizer's state on a device). */
typedef struct fsdpc_mp_unit {
  uint64_t master, grad, state, qcodes, qscale, lp;
  uint64_t blk;                   /* the block path's full buffer (transient region) */
  uint64_t n_f32, n_q, n_qblocks; /* quantized state: fp32 elements, codes, blocks */
  uint64_t state_bytes;           /* optimizer state, every plane (host or device) */
  uint64_t nf4_shard;             /* an NF4 unit's shard bytes (else 0) */
} fsdpc_mp_unit;

/* The replay's device operations, for tests (fsdpc_memplan_in.trace): an
 * access of a transient on a stream (accesses of one position are one
 * operation: a kernel reading one buffer and writing another), an event
 * recorded or waited, every stream joined by the host. */
enum { FSDPC_MP_ACCESS, FSDPC_MP_RECORD, FSDPC_MP_WAIT, FSDPC_MP_JOIN };
typedef struct fsdpc_mp_op {
  int kind;
  int stream;             /* 0 compute, 1 comm, 2 d2h */
  int64_t pos;            /* the replay's position */
  int64_t event;          /* RECORD, WAIT: the event's number */
  int inst;               /* ACCESS: the buffer instance (numbered per timeline) */
  uint64_t offset, bytes; /* ACCESS: its planned bytes in the arena */
  int timeline;           /* 0 a step, 1 evaluation's forward */
} fsdpc_mp_op;

typedef struct fsdpc_memplan_in {
  const fsdpc_run_exec *x;
  const fsdpc_layout *lay;          /* this rank's (shard offsets set) */
  const fsdpc_param_info *params;   /* (lay->n_params) */
  const fsdpc_optim_qformat *qf;    /* quantized state (block 0: none) */
  const fsdpc_state_pieces *pieces; /* offload_optim with quantized state: the engine's cuts;
                                     * NULL: cut by the fp32 rule */
  uint64_t sbuf_bytes;              /* offload_optim: each of the two streaming buffers */
  uint64_t act_bytes;               /* the model context's block (0: none in the arena) */
  uint64_t act_tracked;             /* the bytes it accounts (its buffers' sizes, unrounded) */
  /* (optional, tests) every operation of the replays, in order, once laid out */
  void (*trace)(void *ctx, const fsdpc_mp_op *op);
  void *trace_ctx;
} fsdpc_memplan_in;

typedef struct fsdpc_memplan {
  uint64_t align; /* every offset's: 256 on a device, 64 on the CPU */
  uint64_t arena_bytes;
  uint64_t persist_bytes;
  uint64_t act_offset, act_bytes;
  uint64_t trans_offset, trans_bytes;
  /* the transient region each timeline needs (trans_bytes is the largest) */
  uint64_t trans_step, trans_forward, trans_blocks, trans_ckpt;
  fsdpc_mp_unit *unit; /* (n_units) */
  int n_units;
  uint64_t rs, rs16, dnorm, sbuf[2]; /* fixed buffers (FSDPC_MP_NONE: none) */
  uint64_t nf4buf, nf4buf_bytes;     /* nf4 at S > 1: the gathered NF4 image (fsdp/nf4_unit.h) */
  uint64_t lp_bytes;
  int lp_units;
  /* The programs of each slot (has[slot]: the run has it) and, for action
   * i of slot s, the arena offsets of the buffers it makes: off[s][2i] (a
   * gather's full buffer, a unit's full grads, a replica reduction's fp32
   * buffer) and off[s][2i + 1] (a bf16 copy); FSDPC_MP_NONE: none. */
  fsdpc_program prog[FSDPC_MP_NSLOTS];
  int has[FSDPC_MP_NSLOTS];
  uint64_t *off[FSDPC_MP_NSLOTS];
  /* Accounting (what the engine's ops->account calls add up to over one
   * step, alloc and free as the engine issues them): per-category peaks,
   * the peak of the total, the shard bytes; and the pinned host bytes. */
  int64_t peak[FSDPC_MEM_NCAT], total_peak;
  /* The moment of total_peak: each category's bytes then, and the action
   * that reached it (prog[peak_slot].a[peak_action]; -1: the persistent
   * buffers alone) */
  int64_t at_peak[FSDPC_MEM_NCAT];
  int peak_slot, peak_action;
  uint64_t params, grads, optim;
  uint64_t host_pinned;
} fsdpc_memplan;

/* "first micro-batch", "optimizer step", ... for slot s; "start-up" for -1. */
const char *fsdpc__mp_slot_name(int s);

fsdpc_status fsdpc__memplan_build(const fsdpc_memplan_in *in, fsdpc_memplan *out, fsdpc_err *err);
void fsdpc__memplan_free(fsdpc_memplan *mp);

/* The model context's block for a run of plan p under modes m with
 * execution x: its bytes in the arena, and (*tracked) the bytes it
 * accounts as activations (the attention plugin asked again when m's
 * micro-batch is not the plan's). */
fsdpc_status fsdpc__memplan_act_bytes(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                                      const fsdpc_run_exec *x, uint64_t *bytes, uint64_t *tracked,
                                      fsdpc_err *err);

/* cpu_offload at S == 1 with a d2h stream: the unit whose flat buffer ends
 * with the final norm and the (untied) head and that blocks before the
 * head use too (the root unit), whose suffix from *at goes to the host
 * right after the head block (fsdp/offload.c); -1: none. */
int fsdpc__mp_head_unit(const fsdpc_layout *lay, const fsdpc_param_info *params,
                        const fsdpc_run_exec *x, uint64_t *at);

/* Whether a unit's fp32 reduce-scatter lands straight in its grad shard
 * instead of a landing buffer added into it: with one micro-batch a step
 * the shard holds zeros then (the update zeroes it) and 0 + x is x, so the
 * result is the same and the landing buffer (the largest grad shard) is
 * not needed. Offloaded, bf16-reduced or accumulated runs keep it. */
static inline int fsdpc__mp_rs_direct(const fsdpc_run_exec *x) {
  return x->S > 1 && x->accum == 1 && !x->offload && !x->reduce_bf16;
}

/* The device grad-norm buffer: one double, or under in_bwd one per unit
 * (each unit's sum of squares, taken before its update ends its grads,
 * summed in unit order at the norm). */
static inline uint64_t fsdpc__mp_dnorm_bytes(const fsdpc_run_exec *x, int n_units) {
  return x->in_bwd ? (uint64_t)n_units * sizeof(double) : sizeof(double);
}

/* Bytes of a buffer of n bytes in the arena (rounded up to mp's alignment). */
static inline uint64_t fsdpc__mp_round(uint64_t n, uint64_t align) {
  return (n + align - 1) & ~(align - 1);
}

#endif
