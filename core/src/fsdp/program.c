/* Building the programs of a step (see program.h).
 *
 * A micro-batch (FULL_SHARD; the others differ as noted):
 *   forward, block by block: gather the block's units (unless resident) ->
 *   wait -> [prefetch the next block's units] -> forward -> free each unit
 *   after its last forward use, except those the head needs (SHARD_GRAD_OP
 *   and NO_SHARD keep them for backward);
 *   head: gather, wait, gradient buffers, [prefetch layer L], forward and
 *   backward together (fused cross-entropy);
 *   backward, in reverse: gather (re-gather after a free; the embedding's
 *   backward reads no weight: nothing) -> wait -> gradient buffers ->
 *   [prefetch the block before] -> backward -> after a unit's last backward
 *   use: reduce its grads (not under no_sync before the last micro-batch);
 *   after the last backward block that reads its weights: free it (the
 *   root unit of embedding and head right after the head).
 * The optimizer step: replica all-reduce of each grad shard (R > 1) ->
 * global grad norm -> per unit: clip, update, zero. Under in_bwd the
 * replica all-reduce and the update of each unit move into the backward,
 * right after compute has waited for its reduction, and the optimizer step
 * keeps only the norm (for the log). */
#include "fsdp/program.h"

#include "runplan/runplan.h"

#include <stdlib.h>
#include <string.h>

typedef struct builder {
  const fsdpc_program_opts *o;
  fsdpc_program *p;
  unsigned char *resident, *pending; /* (n_units) */
  unsigned char *waited;             /* (n_units) host_async: HOST_WAIT emitted in this pass */
  int *reduced_at;                   /* (n_units) the backward block that reduced it, or -1 */
  unsigned char *keep_end;           /* (n_units) this micro-batch ends with it gathered (keep) */
  int *rel_at;                       /* (n_units) the backward block that frees it */
  unsigned char *upd;                /* (n_units) in_bwd: reduced, its UPDATE not emitted yet */
  int bwd;                           /* building a backward pass */
  int released;                      /* a RELEASE since the last fence of the comm stream */
  int failed;
} builder;

static void emit(builder *b, int op, int arg) {
  fsdpc_program *p = b->p;
  if (b->failed)
    return;
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 64;
    fsdpc_action *a = realloc(p->a, (size_t)cap * sizeof *a);
    if (!a) {
      b->failed = 1;
      return;
    }
    p->a = a;
    p->cap = cap;
  }
  p->a[p->n++] = (fsdpc_action){.op = (int16_t)op, .arg = arg};
}

/* host_async: a pass's first use of a unit waits for the host worker's
 * update of it (and nothing else: later units keep updating meanwhile). */
static void host_wait(builder *b, int u) {
  if (!b->o->host_async || b->waited[u])
    return;
  emit(b, FSDPC_ACT_HOST_WAIT, u);
  b->waited[u] = 1;
}

/* Units that are always resident: nothing to gather or free. */
static int always(const builder *b, int u) {
  const fsdpc_unit *un = &b->o->lay->units[u]; /* an NF4 unit is dequantized at each gather */
  return !un->nf4 && (b->o->full_is_master || (b->o->frozen_resident && un->frozen));
}

/* Frozen units have no gradients: nothing to allocate, reduce or update. */
static int frozen(const builder *b, int u) {
  return b->o->lay->units[u].frozen;
}

static void gather(builder *b, int u) {
  host_wait(b, u);
  if (always(b, u) || b->resident[u])
    return;
  emit(b, FSDPC_ACT_GATHER, u);
  b->resident[u] = 1;
  b->pending[u] = b->o->overlap;
}

static void wait(builder *b, int u) {
  if (!b->pending[u])
    return;
  emit(b, FSDPC_ACT_WAIT, u);
  b->pending[u] = 0;
}

static void release(builder *b, int u) {
  if (always(b, u) || !b->resident[u])
    return;
  wait(b, u); /* a free never overtakes the gather in flight */
  emit(b, FSDPC_ACT_RELEASE, u);
  b->resident[u] = 0;
  b->released = 1;
}

/* After a block's releases: the comm stream's later gathers may reuse the
 * released bytes once it has waited for the compute that read them
 * (memplan.h). Without a comm stream everything is in order already. */
static void fence_free(builder *b) {
  if (b->o->overlap && b->released)
    emit(b, FSDPC_ACT_FENCE_FREE, -1);
  b->released = 0;
}

/* in_bwd: unit u's update once compute is ordered after its reduction
 * (the replica all-reduce first, as the optimizer step does it). */
static void update_now(builder *b, int u) {
  if (!b->upd[u])
    return;
  if (b->o->replicas > 1)
    emit(b, FSDPC_ACT_REPLICA_REDUCE, u);
  emit(b, FSDPC_ACT_UPDATE, u);
  b->upd[u] = 0;
}

/* Before backward block blk: compute waits for the reductions of the units
 * reduced at block blk + 2, whose full gradients the grads of this block
 * may then reuse (blk + 1's still reduce while blk computes); under in_bwd
 * their updates follow. */
static void reduced_wait(builder *b, int blk) {
  if (!b->o->overlap)
    return;
  for (int u = 0; u < b->o->lay->n_units; u++)
    if (b->reduced_at[u] == blk + 2) {
      emit(b, FSDPC_ACT_REDUCED, u);
      b->reduced_at[u] = -1;
      update_now(b, u);
    }
}

/* Whether a pass over block blk reads unit u's parameters. The
 * embedding's backward (blk 0 in backward, bwd) only scatter-adds the
 * output gradient into its weight gradient: it reads no parameter, so
 * backward gathers nothing for it, except a unit the step's next
 * micro-batch keeps (it must end the pass gathered). */
static int reads(const builder *b, int u, int blk, int bwd) {
  return !bwd || blk > 0 || b->keep_end[u];
}

static void gather_block(builder *b, int blk, int with_grads) {
  const fsdpc_block *bl = &b->o->lay->blocks[blk];
  for (int i = 0; i < bl->n_units; i++) {
    int u = bl->units[i];
    if (reads(b, u, blk, b->bwd)) {
      gather(b, u);
      wait(b, u);
    }
    if (with_grads && !b->o->grads_in_shard && !frozen(b, u))
      emit(b, FSDPC_ACT_GRAD_ALLOC, u);
  }
}

/* Issues a block's gathers ahead of its use (only with a comm stream). */
static void prefetch_block(builder *b, int blk) {
  if (!b->o->overlap || blk < 0 || blk >= b->o->lay->n_blocks)
    return;
  const fsdpc_block *bl = &b->o->lay->blocks[blk];
  for (int i = 0; i < bl->n_units; i++)
    if (reads(b, bl->units[i], blk, b->bwd))
      gather(b, bl->units[i]);
}

/* For each unit, the backward block after which its parameters are read
 * no more (rel_at): the lowest block that reads them, or the head when none
 * below it does (a unit of the embedding and the head, the default root
 * unit, is freed after the head instead of held through every layer's
 * backward). One pass over the blocks' units. */
static void release_points(builder *b) {
  const fsdpc_layout *lay = b->o->lay;
  for (int u = 0; u < lay->n_units; u++)
    b->rel_at[u] = lay->n_blocks - 1;
  for (int blk = lay->n_blocks - 1; blk >= 0; blk--)
    for (int i = 0; i < lay->blocks[blk].n_units; i++) {
      int u = lay->blocks[blk].units[i];
      if (reads(b, u, blk, 1))
        b->rel_at[u] = blk;
    }
}

/* After backward block blk: free the units it read last (at the head also
 * those of the embedding's block that no backward block reads); a kept
 * unit stays for the next micro-batch of the step. */
static void release_read(builder *b, int blk) {
  const fsdpc_layout *lay = b->o->lay;
  int head = lay->n_blocks - 1;
  for (int pass = 0; pass < (blk == head ? 2 : 1); pass++) {
    const fsdpc_block *bl = &lay->blocks[pass ? 0 : blk];
    for (int i = 0; i < bl->n_units; i++) {
      int u = bl->units[i];
      if (b->rel_at[u] == blk && !b->keep_end[u])
        release(b, u);
    }
  }
}

/* fsdp.keep_params: whether unit u stays gathered from one micro-batch of
 * a step to the next (program.h). */
static int kept(const builder *b, int u) {
  if (b->o->keep == FSDPC_KEEP_ALL)
    return 1;
  if (b->o->keep != FSDPC_KEEP_FIRST)
    return 0;
  const fsdpc_layout *lay = b->o->lay;
  for (int blk = 0; blk < 2 && blk < lay->n_blocks; blk++)
    for (int i = 0; i < lay->blocks[blk].n_units; i++)
      if (lay->blocks[blk].units[i] == u)
        return 1;
  return 0;
}

/* Blocks 0..L forward; under reshard each unit is freed after its last
 * forward use unless the head needs it. */
static void forward_layers(builder *b, int reshard, int prefetch) {
  const fsdpc_layout *lay = b->o->lay;
  int head = lay->n_blocks - 1;
  for (int blk = 0; blk < head; blk++) {
    gather_block(b, blk, 0);
    if (prefetch)
      prefetch_block(b, blk + 1);
    emit(b, FSDPC_ACT_FORWARD, blk);
    if (!reshard)
      continue;
    for (int i = 0; i < lay->blocks[blk].n_units; i++) {
      int u = lay->blocks[blk].units[i];
      if (lay->units[u].last_block == blk && lay->units[u].last_block != head)
        release(b, u);
    }
    fence_free(b);
  }
}

/* The embedding's backward only makes its weight gradient: a frozen
 * embedding (LoRA) skips it, and its re-gather. */
static int learns(const builder *b, int blk) {
  const fsdpc_block *bl = &b->o->lay->blocks[blk];
  if (blk != 0)
    return 1;
  for (int i = 0; i < bl->n_units; i++)
    if (!frozen(b, bl->units[i]))
      return 1;
  return 0;
}

/* One micro-batch. last: the step's last (host_async hands its grads to
 * the worker; nothing is kept past it). in: the previous micro-batch of the
 * step kept its units gathered (keep). */
static void micro(builder *b, int reduce, int last, int in) {
  const fsdpc_program_opts *o = b->o;
  const fsdpc_layout *lay = o->lay;
  int head = lay->n_blocks - 1;
  for (int u = 0; u < lay->n_units; u++) {
    b->keep_end[u] = !last && kept(b, u);
    if (in && kept(b, u) && !always(b, u))
      b->resident[u] = 1;
  }
  release_points(b);
  emit(b, FSDPC_ACT_FENCE_IN, -1);
  /* keep ALL: nothing is freed inside a step of several micro-batches */
  int hold = o->keep == FSDPC_KEEP_ALL && (in || !last);
  forward_layers(b, o->reshard && !hold, o->forward_prefetch);
  gather_block(b, head, 1);
  b->bwd = 1; /* the head's forward and backward are one action */
  if (o->backward_prefetch)
    prefetch_block(b, head - 1);
  emit(b, FSDPC_ACT_HEAD, head);
  for (int u = 0; u < lay->n_units; u++)
    b->reduced_at[u] = -1;
  for (int blk = head; blk >= 0; blk--) {
    reduced_wait(b, blk);
    if (blk < head && learns(b, blk)) {
      gather_block(b, blk, 1);
      if (o->backward_prefetch && blk > 0 && learns(b, blk - 1))
        prefetch_block(b, blk - 1);
      emit(b, FSDPC_ACT_BACKWARD, blk);
    }
    /* in_bwd: the block's parameters go before its reductions make grad
     * shards, which may then take their bytes (the program otherwise keeps
     * the order, and so the plans, it always had) */
    if (o->in_bwd)
      release_read(b, blk);
    for (int i = 0; i < lay->blocks[blk].n_units; i++) {
      int u = lay->blocks[blk].units[i];
      if (lay->units[u].first_block != blk)
        continue; /* its grads grow further back */
      if (reduce && !o->grads_in_shard && !frozen(b, u)) {
        emit(b, FSDPC_ACT_REDUCE, u);
        b->reduced_at[u] = blk;
        b->upd[u] = o->in_bwd && last;
        if (!o->overlap) /* in order already */
          update_now(b, u);
      }
      if (last && o->host_async && !frozen(b, u))
        emit(b, FSDPC_ACT_HOST_GRAD, u);
      else if (reduce && o->host_async && o->offload && !frozen(b, u))
        emit(b, FSDPC_ACT_HOST_LAND, u);
    }
    release_read(b, blk);
    fence_free(b);
  }
  b->bwd = 0;
  emit(b, FSDPC_ACT_FENCE_OUT, -1);
  for (int u = 0; u < lay->n_units; u++) /* in_bwd: reduced in the last two blocks */
    update_now(b, u);
  /* host_async: landings are the worker's (HOST_GRAD, HOST_LAND) */
  if (o->offload && !o->host_async)
    emit(b, FSDPC_ACT_ABSORB, -1);
}

static void forward_only(builder *b) {
  const fsdpc_layout *lay = b->o->lay;
  int head = lay->n_blocks - 1;
  emit(b, FSDPC_ACT_FENCE_IN, -1);
  forward_layers(b, 1, b->o->forward_prefetch);
  gather_block(b, head, 0);
  emit(b, FSDPC_ACT_HEAD, head);
  for (int u = 0; u < lay->n_units; u++)
    release(b, u);
  emit(b, FSDPC_ACT_FENCE_OUT, -1);
}

/* The optimizer step. host_async with one replica needs no SYNC: the
 * worker waited for each unit's grads (HOST_GRAD) and NORM waits for the
 * worker; UPDATE only hands a unit to the worker, in forward order, so the
 * next pass's first units are ready first. offload_optim streams each
 * unit's state in (one unit ahead, two device buffers) and back out. */
static void optim(builder *b) {
  const fsdpc_program_opts *o = b->o;
  const fsdpc_layout *lay = o->lay;
  int nu = lay->n_units;
  if (o->in_bwd) { /* every update ran in the backward */
    emit(b, FSDPC_ACT_NORM, -1);
    return;
  }
  if ((o->offload && !o->host_async) || (o->host_async && o->replicas > 1))
    emit(b, FSDPC_ACT_SYNC, -1);
  if (o->replicas > 1)
    for (int u = 0; u < nu; u++)
      if (!frozen(b, u))
        emit(b, FSDPC_ACT_REPLICA_REDUCE, u);
  emit(b, FSDPC_ACT_NORM, -1);
  if (!o->offload_optim) {
    for (int u = 0; u < nu; u++)
      if (!frozen(b, u))
        emit(b, FSDPC_ACT_UPDATE, u);
    return;
  }
  fsdpc_state_pieces ps;
  fsdpc_err err;
  if (o->pieces)
    ps = *o->pieces;
  else if (fsdpc__state_pieces_build(lay, o->piece, &ps, &err) != FSDPC_OK) {
    b->failed = 1;
    return;
  }
  if (ps.n > 0)
    emit(b, FSDPC_ACT_STATE_IN, 0);
  for (int p = 0; p < ps.n; p++) {
    if (p + 1 < ps.n)
      emit(b, FSDPC_ACT_STATE_IN, p + 1);
    emit(b, FSDPC_ACT_UPDATE_PIECE, p);
    emit(b, FSDPC_ACT_STATE_OUT, p);
  }
  if (!o->pieces)
    fsdpc__state_pieces_free(&ps);
}

fsdpc_status fsdpc__state_pieces_build(const fsdpc_layout *lay, uint64_t piece,
                                       fsdpc_state_pieces *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  if (piece < 1)
    piece = 1;
  uint64_t n = 0;
  for (int u = 0; u < lay->n_units; u++) /* frozen units have no state */
    n += lay->units[u].frozen ? 0 : (lay->units[u].shard_numel + piece - 1) / piece;
  if (n > (uint64_t)1 << 30)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdp.offload.buffer_mib is too small: %llu pieces; raise it",
                       (unsigned long long)n);
  out->unit = malloc((size_t)(n + 1) * sizeof *out->unit);
  out->lo = malloc((size_t)(n + 1) * sizeof *out->lo);
  out->hi = malloc((size_t)(n + 1) * sizeof *out->hi);
  if (!out->unit || !out->lo || !out->hi) {
    fsdpc__state_pieces_free(out);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the optimizer state pieces");
  }
  for (int u = 0; u < lay->n_units; u++)
    for (uint64_t lo = 0; !lay->units[u].frozen && lo < lay->units[u].shard_numel; lo += piece) {
      uint64_t hi = lo + piece < lay->units[u].shard_numel ? lo + piece : lay->units[u].shard_numel;
      out->unit[out->n] = u;
      out->lo[out->n] = lo;
      out->hi[out->n] = hi;
      if (hi - lo > out->max_len)
        out->max_len = hi - lo;
      out->n++;
    }
  return FSDPC_OK;
}

void fsdpc__state_pieces_free(fsdpc_state_pieces *p) {
  free(p->unit);
  free(p->lo);
  free(p->hi);
  memset(p, 0, sizeof *p);
}

void fsdpc__program_opts_for(const fsdpc_layout *lay, int S, int R, int compute_f32, int offload,
                             int reshard, int no_sync, int overlap, int forward_prefetch,
                             int backward_prefetch, fsdpc_program_opts *out) {
  *out = (fsdpc_program_opts){.lay = lay,
                              .full_is_master = S == 1 && compute_f32,
                              .grads_in_shard = S == 1 && !offload,
                              .reshard = reshard,
                              .no_sync = no_sync,
                              .overlap = overlap,
                              .forward_prefetch = forward_prefetch,
                              .backward_prefetch = backward_prefetch,
                              .offload = offload,
                              .replicas = R,
                              .frozen_resident = S == 1 && !offload};
}

void fsdpc__program_opts_exec(const fsdpc_layout *lay, const fsdpc_run_exec *x,
                              const fsdpc_state_pieces *pieces, fsdpc_program_opts *out) {
  fsdpc__program_opts_for(lay, x->S, x->R, x->act_size == 4, x->offload, x->reshard, x->no_sync,
                          x->overlap, x->forward_prefetch, x->backward_prefetch, out);
  out->host_async = x->host_async;
  out->offload_optim = x->offload_optim;
  out->piece = fsdpc__state_piece_elems(x->offload_buffer_bytes, x->n_slots);
  out->pieces = x->offload_optim ? pieces : NULL;
  out->keep = x->keep;
  out->in_bwd = x->in_bwd;
  if (x->in_bwd) /* the grad shard is a transient: at S == 1 the full grads */
    out->grads_in_shard = 0;
}

fsdpc_status fsdpc__program_build(const fsdpc_program_opts *o, fsdpc_program_kind kind,
                                  fsdpc_program *out, fsdpc_err *err) {
  out->n = 0;
  int nu = o->lay->n_units;
  builder b = {.o = o, .p = out};
  b.resident = calloc((size_t)nu + 1, 1);
  b.pending = calloc((size_t)nu + 1, 1);
  b.waited = calloc((size_t)nu + 1, 1);
  b.reduced_at = calloc((size_t)nu + 1, sizeof *b.reduced_at);
  b.keep_end = calloc((size_t)nu + 1, 1);
  b.rel_at = calloc((size_t)nu + 1, sizeof *b.rel_at);
  b.upd = calloc((size_t)nu + 1, 1);
  if (b.resident && b.pending && b.waited && b.reduced_at && b.keep_end && b.rel_at && b.upd) {
    switch (kind) {
    case FSDPC_PROGRAM_MICRO:
    case FSDPC_PROGRAM_MICRO_IN:
      micro(&b, 1, 1, kind == FSDPC_PROGRAM_MICRO_IN);
      break;
    case FSDPC_PROGRAM_MICRO_NO_SYNC:
    case FSDPC_PROGRAM_MICRO_NO_SYNC_IN:
      micro(&b, !o->no_sync, 0, kind == FSDPC_PROGRAM_MICRO_NO_SYNC_IN);
      break;
    case FSDPC_PROGRAM_FORWARD:
      forward_only(&b);
      break;
    case FSDPC_PROGRAM_OPTIM:
      optim(&b);
      break;
    default:
      b.failed = 1;
    }
  } else {
    b.failed = 1;
  }
  free(b.resident);
  free(b.pending);
  free(b.waited);
  free(b.reduced_at);
  free(b.keep_end);
  free(b.rel_at);
  free(b.upd);
  if (b.failed)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory building the step program");
  return FSDPC_OK;
}

void fsdpc__program_free(fsdpc_program *p) {
  free(p->a);
  memset(p, 0, sizeof *p);
}

const char *fsdpc__act_name(int op) {
  static const char *names[FSDPC_ACT_NOPS] = {
      "fence_in",       "gather",       "wait",      "grad_alloc", "forward",   "head",
      "backward",       "reduce",       "release",   "fence_out",  "absorb",    "sync",
      "replica_reduce", "norm",         "update",    "host_grad",  "host_wait", "state_in",
      "state_out",      "update_piece", "host_land", "fence_free", "reduced"};
  return op >= 0 && op < FSDPC_ACT_NOPS ? names[op] : "?";
}
