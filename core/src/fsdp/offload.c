/* The offload modes of the engine.
 *
 * cpu_offload (fsdp.cpu_offload): master, grad and optimizer shards in
 * pinned host memory, the optimizer on the CPU. The step overlaps the
 * device (host_async): in the last micro-batch, each unit's reduced grad
 * shard is copied to the host as soon as its backward is done and an event
 * marks the copy (HOST_GRAD); a host worker thread waits for that event,
 * adds any earlier micro-batches' landing and sums the shard's squares
 * while the GPU runs the backward of the remaining units. The norm then
 * only adds the per-unit sums in unit order (the CPU loop's order and
 * arithmetic, so results are bit-identical); UPDATE hands each unit to the
 * worker in forward order, and the next pass waits for a unit's update
 * only at that unit's first use (HOST_WAIT). The worker also recasts the
 * unit's bf16 staging copy, so the next gather is one H2D copy. Without
 * clipping (and one replica) the update needs no global value: when the
 * trainer has said which step comes (fsdpc__engine_step_begin), the worker
 * updates each unit right after its sum of squares, in the backward.
 * On the CPU device the shards already are host memory: host_async runs
 * the same schedule (the worker updates units while the main thread goes
 * on), which is what tests check bit for bit against the plain step.
 *
 * offload_optim (fsdp.offload.optimizer): masters and grads stay on the
 * device, the optimizer state lives in pinned host memory. The optimizer
 * step streams it per unit through two device buffers: STATE_IN u+1 (copy
 * stream) runs while UPDATE u (compute stream) and STATE_OUT u (compute
 * stream, after the update) run, so each direction of the bus overlaps the
 * other and the update. A unit goes in pieces of at most one buffer
 * (fsdp.offload.buffer_mib), so the device holds two pieces, not two of the
 * largest unit (the 8B embedding's state is 4 GiB). Bytes moved are the
 * optimizer's state bytes per element (fsdpc__stream_bytes), whatever the
 * slots hold.
 *
 * A quantized state (adamw8bit: fp32 planes of small tensors, 8-bit code
 * planes, per-block scale planes; qstate.h) streams the same way, in
 * pieces of at most one buffer cut on block bounds of each parameter
 * (fsdpc__qstate_pieces_build: parameters are packed in the flat shard
 * with no block alignment, so the cuts follow each parameter's own block
 * grid). A piece's three plane groups are copied into its buffer
 * (fsdpc__qspan_planes) and the optimizer runs over them with the tensor
 * list of that range (block phases as on the host): every block is updated
 * whole, so the result is bit-identical to the state kept in place. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsdp/hostwork.h"
#include "fsdp/internal.h"
#include "fsdp/qstate.h"
#include "io/dtype.h"
#include "ops/cpu/ops_cpu.h"
#include "util/log.h"

enum { TASK_GRAD = 0, TASK_UPDATE = 1, TASK_LAND = 2 };
/* Event slots of the state streaming (the engine's streams use < 50). */
enum { EV_SIN = 50, EV_SOUT = 52, EV_OPT_FENCE = 54 };

/* The bf16 staging copy of master elements [lo, hi). */
static void recast(fsdpc_engine *e, fsdpc_unit *un, uint64_t lo, uint64_t hi) {
  const int64_t n = (int64_t)(hi - lo), chunk = 1 << 16;
  const float *src = un->master + lo;
  uint16_t *dst = un->stage + lo;
#pragma omp parallel for num_threads(e->threads) schedule(static) if (n > chunk)
  for (int64_t i = 0; i < n; i += chunk)
    fsdpc__f32_to_bf16_n(src + i, dst + i, (uint64_t)(n - i < chunk ? n - i : chunk));
}

void fsdpc__offload_refresh_stage(fsdpc_engine *e, fsdpc_unit *un) {
  if (!un->stage || !un->stage_stale)
    return;
  recast(e, un, 0, un->shard_numel);
  un->stage_stale = 0;
}

/* The worker's update of unit u (clip scale) and the recast of its bf16
 * copy. With fp32 slots it goes in ranges of UPDATE_RANGE elements, each
 * recast right after its update while the new masters are still in the
 * CPU's cache (one read of the masters from memory instead of two); the
 * optimizer is elementwise, so the ranges change no bit. A quantized state
 * is updated whole (its blocks are per tensor). The ranges are those of
 * offload.optimizer's pieces, which tests check bit for bit. */
#define UPDATE_RANGE ((uint64_t)1 << 20)
static fsdpc_status update_and_recast(fsdpc_engine *e, int u, double scale, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  uint64_t n = un->shard_numel;
  if (e->qf.block || !un->state) {
    FSDPC_TRY(fsdpc__engine_update(e, u, 0, n, un->state, n, e->h_step, e->h_lr, scale, err));
    fsdpc__offload_refresh_stage(e, un);
    if (e->upd_prog)
      atomic_store_explicit(&e->upd_prog[u], n, memory_order_release);
    return FSDPC_OK;
  }
  for (uint64_t lo = 0; lo < n; lo += UPDATE_RANGE) {
    uint64_t hi = n - lo < UPDATE_RANGE ? n : lo + UPDATE_RANGE;
    FSDPC_TRY(
        fsdpc__engine_update(e, u, lo, hi, un->state + lo, n, e->h_step, e->h_lr, scale, err));
    if (un->stage) /* none on the CPU device: the shards are what it computes with */
      recast(e, un, lo, hi);
    /* [0, hi) may go up now (fsdpc__offload_upload) */
    if (e->upd_prog)
      atomic_store_explicit(&e->upd_prog[u], hi, memory_order_release);
  }
  un->stage_stale = 0;
  return FSDPC_OK;
}

/* This micro-batch's fp32 grad shard (device, src) goes to the host. The
 * first micro-batch of a step lands straight in the (zero) grad shard;
 * later ones land in a per-unit buffer that is added in once the copy is
 * done (ABSORB, or under host_async the worker: HOST_LAND, HOST_GRAD in the
 * last micro-batch; the next copy into the buffer waits for that add). */
fsdpc_status fsdpc__offload_grads_to_host(fsdpc_engine *e, fsdpc_unit *un, const float *src,
                                          fsdpc_err *err) {
  size_t sb = un->shard_numel * sizeof(float);
  float *dst = un->grad;
  if (e->head_sent && un - e->units == e->head_unit) { /* the suffix went after the head */
    e->head_sent = 0;
    un->grad_clean = 0;
    return e->ops->copy_on(e->ops->ctx, dst, src, e->head_at * sizeof(float), e->d2h, err);
  }
  if (!un->grad_clean) {
    /* host_async: the worker has added the previous micro-batch's landing */
    if (e->hw)
      FSDPC_TRY(fsdpc__hostwork_wait(e->hw, e->land_seq[un - e->units], err));
    if (!un->landing) {
      if (!(un->landing = e->ops->alloc_host(e->ops->ctx, sb)))
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                           "out of pinned host memory for the gradients of unit %s", un->name);
      e->host_pinned += sb;
    }
    dst = un->landing;
    un->land_pending = 1;
  }
  un->grad_clean = 0;
  return e->ops->copy_on(e->ops->ctx, dst, src, sb, e->S == 1 ? e->d2h : e->comm, err);
}

/* Event slot of the head block's end (compute -> d2h). */
enum { EV_HEAD_DONE = 57 };

/* The suffix is sent early only where it lands in the grad shard itself
 * (the step's first micro-batch that reduces: with no_sync at world 1, the
 * only one), on the d2h stream: 1.05 GB of the 1B shape's 2.1 GB root
 * unit then moves during the layers' backward instead of after the
 * embedding's, in front of the grad norm. */
fsdpc_status fsdpc__offload_head_grads(fsdpc_engine *e, fsdpc_err *err) {
  if (e->head_unit < 0)
    return FSDPC_OK;
  fsdpc_unit *un = &e->units[e->head_unit];
  if (!un->grad_clean || !un->full_grad)
    return FSDPC_OK;
  FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_HEAD_DONE, NULL, err));
  FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, e->d2h, EV_HEAD_DONE, err));
  FSDPC_TRY(e->ops->copy_on(e->ops->ctx, un->grad + e->head_at, un->full_grad + e->head_at,
                            (un->shard_numel - e->head_at) * sizeof(float), e->d2h, err));
  e->head_sent = 1;
  return FSDPC_OK;
}

/* head_unit and head_at (internal.h): the memory plan's rule, which the
 * plan's replay models (fsdp/memplan.h). */
static void find_head_suffix(fsdpc_engine *e) {
  fsdpc_layout lay = {.units = e->units,
                      .n_units = e->n_units,
                      .n_blocks = e->n_blocks,
                      .param_unit = e->param_unit,
                      .param_offset = e->param_offset};
  memcpy(lay.param_of_kind, e->param_of_kind, sizeof lay.param_of_kind);
  e->head_unit = fsdpc__mp_head_unit(&lay, e->params, &e->x, &e->head_at);
}

fsdpc_status fsdpc__offload_absorb(fsdpc_engine *e, fsdpc_err *err) {
  int any = 0;
  for (int u = 0; u < e->n_units; u++)
    any |= e->units[u].land_pending;
  if (!any)
    return FSDPC_OK;
  FSDPC_TRY(e->ops->sync(e->ops->ctx, err));
  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    if (!un->land_pending)
      continue;
    fsdpc__cpu_add_inplace(un->grad, un->landing, un->shard_numel);
    un->land_pending = 0;
  }
  return FSDPC_OK;
}

/* ---- the worker's tasks ---- */

static fsdpc_status task_grad(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (e->offload) /* the D2H copy of the grads (and every gather copy before it) is done */
    FSDPC_TRY(e->ops->event_sync(e->ops->ctx, FSDPC_OPS_UNIT_EVENT0 + u, err));
  if (un->land_pending) {
    fsdpc__cpu_add_inplace(un->grad, un->landing, un->shard_numel);
    un->land_pending = 0;
  }
  if (!e->parts_ok)
    return FSDPC_OK;
  FSDPC_TRY(e->sops->sumsq_f32(e->sops->ctx, un->grad, un->shard_numel, &e->part[u], err));
  if (!e->early)
    return FSDPC_OK;
  /* no clipping: the update needs nothing from the other units */
  return update_and_recast(e, u, 1.0, err);
}

/* Not the last micro-batch: only add the landing (the unit's event first). */
static fsdpc_status task_land(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  FSDPC_TRY(e->ops->event_sync(e->ops->ctx, FSDPC_OPS_UNIT_EVENT0 + u, err));
  if (un->land_pending) {
    fsdpc__cpu_add_inplace(un->grad, un->landing, un->shard_numel);
    un->land_pending = 0;
  }
  return FSDPC_OK;
}

static fsdpc_status task(void *arg, int kind, int u, fsdpc_err *err) {
  fsdpc_engine *e = arg;
  if (kind == TASK_GRAD)
    return task_grad(e, u, err);
  if (kind == TASK_LAND)
    return task_land(e, u, err);
  return update_and_recast(e, u, e->h_scale, err);
}

/* ---- the actions ---- */

fsdpc_status fsdpc__offload_host_grad(fsdpc_engine *e, int u, int last, fsdpc_err *err) {
  if (e->offload) /* after the unit's D2H copy, on the stream that issued it */
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, FSDPC_OPS_UNIT_EVENT0 + u,
                                   e->S == 1 ? e->d2h : e->comm, err));
  if (last && e->early && e->upd_prog) /* the task updates the unit: from element 0 */
    atomic_store_explicit(&e->upd_prog[u], 0, memory_order_relaxed);
  FSDPC_TRY(fsdpc__hostwork_push(e->hw, last ? TASK_GRAD : TASK_LAND, u, &e->land_seq[u], err));
  if (last && e->early) /* this task updates the unit too */
    e->upd_seq[u] = e->land_seq[u];
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_step_begin(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, fsdpc_err *err) {
  if (e->x.in_bwd)
    return fsdpc__engine_in_bwd_begin(e, step, lr, max_grad_norm, err);
  if (!e->hw)
    return FSDPC_OK;
  int early = e->parts_ok && !(max_grad_norm > 0.0);
  e->early = early; /* read by TASK_GRAD, none of which is queued between steps */
  if (!early) /* the last step's updates may still run: leave their values alone */
    return FSDPC_OK;
  if (!e->early_logged && e->dist->rank == 0)
    FSDPC_LOGI("fsdp: cpu_offload without clipping: each unit's update starts on the host as "
               "soon as its gradients are there, during the backward");
  e->early_logged = 1;
  /* without clipping every update ran in the last backward: the worker is
   * idle or about to be */
  FSDPC_TRY(fsdpc__hostwork_drain(e->hw, err));
  e->h_step = step;
  e->h_lr = lr;
  e->h_scale = 1.0;
  return FSDPC_OK;
}

/* A pass's first use of unit u. An offloaded unit that is about to be
 * uploaded (not gathered yet) need not wait for the whole update: its
 * gather follows the update's ranges (fsdpc__offload_upload), so most of
 * the upload (21 ms for the 1B shape's 1.05 GB root unit) runs under the
 * update instead of after it. */
fsdpc_status fsdpc__offload_host_wait(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (e->upd_follow && e->offload && un->stage && !un->full && !un->frozen &&
      !fsdpc__hostwork_done(e->hw, e->upd_seq[u])) {
    e->upd_follow[u] = 1;
    return FSDPC_OK;
  }
  return fsdpc__hostwork_wait(e->hw, e->upd_seq[u], err);
}

/* Elements per copy of an upload that follows an update. */
#define UPLOAD_CHUNK ((uint64_t)1 << 24)

fsdpc_status fsdpc__offload_upload(fsdpc_engine *e, int u, void *dst, void *stream,
                                   fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  size_t es = e->psize;
  uint64_t n = un->shard_numel;
  if (!e->upd_follow || !e->upd_follow[u]) {
    fsdpc__offload_refresh_stage(e, un);
    return e->ops->copy_on(e->ops->ctx, dst, un->stage, n * es, stream, err);
  }
  e->upd_follow[u] = 0;
  uint64_t seq = e->upd_seq[u];
  for (uint64_t lo = 0; lo < n;) {
    uint64_t hi = n - lo < UPLOAD_CHUNK ? n : lo + UPLOAD_CHUNK;
    int done = 0;
    while (atomic_load_explicit(&e->upd_prog[u], memory_order_acquire) < hi &&
           !(done = fsdpc__hostwork_done(e->hw, seq))) {
      struct timespec ts = {0, 20000}; /* 20 us: a range of 1M elements takes ~0.4 ms */
      nanosleep(&ts, NULL);
    }
    if (done) { /* the update is over (or failed): the rest in one copy */
      FSDPC_TRY(fsdpc__hostwork_wait(e->hw, seq, err));
      hi = n;
    }
    FSDPC_TRY(e->ops->copy_on(e->ops->ctx, (char *)dst + lo * es, un->stage + lo, (hi - lo) * es,
                              stream, err));
    lo = hi;
  }
  /* the worker has marked the unit's copy fresh (stage_stale) once this returns */
  return fsdpc__hostwork_wait(e->hw, seq, err);
}

fsdpc_status fsdpc__offload_host_update(fsdpc_engine *e, int u, int64_t step, double lr,
                                        double scale, fsdpc_err *err) {
  if (e->early) { /* updated in the backward (TASK_GRAD) with these very values */
    if (step != e->h_step || lr != e->h_lr || scale != 1.0)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "fsdp: optimizer step %lld (lr %g, clip %g) differs from the one begun "
                         "(%lld, lr %g)",
                         (long long)step, lr, scale, (long long)e->h_step, e->h_lr);
    if (u == e->n_units - 1)
      e->early = 0; /* the step is done; the next one says again */
    return FSDPC_OK;
  }
  /* The worker is idle here (NORM or SYNC drained it), so these are not
   * read while they change. */
  e->h_step = step;
  e->h_lr = lr;
  e->h_scale = scale;
  if (e->upd_prog)
    atomic_store_explicit(&e->upd_prog[u], 0, memory_order_relaxed);
  return fsdpc__hostwork_push(e->hw, TASK_UPDATE, u, &e->upd_seq[u], err);
}

/* The local sum of squares from the worker's per-unit sums, in unit order. */
fsdpc_status fsdpc__offload_sumsq(fsdpc_engine *e, double *out, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__hostwork_drain(e->hw, err));
  double sumsq = 0.0;
  for (int u = 0; u < e->n_units; u++)
    sumsq += e->part[u];
  *out = sumsq;
  return FSDPC_OK;
}

/* A copy between host and device memory on stream (memcpy on the CPU). */
static fsdpc_status xcopy(fsdpc_engine *e, void *dst, const void *src, size_t bytes, void *stream,
                          fsdpc_err *err) {
  if (!e->ops->copy_on) {
    memcpy(dst, src, bytes);
    return FSDPC_OK;
  }
  return e->ops->copy_on(e->ops->ctx, dst, src, bytes, stream, err);
}

static int have_events(const fsdpc_engine *e) {
  return e->ops->event_record && e->ops->stream_wait;
}

/* Piece p's state, slot by slot: host shard slot k at [lo, hi) <-> device
 * buffer slot k at [0, hi - lo). */
static fsdpc_status copy_piece(fsdpc_engine *e, int p, int to_device, void *stream,
                               fsdpc_err *err) {
  const fsdpc_state_pieces *ps = &e->pieces;
  fsdpc_unit *un = &e->units[ps->unit[p]];
  uint64_t lo = ps->lo[p], len = ps->hi[p] - lo;
  float *buf = e->sbuf[p & 1];
  if (e->qf.block) { /* each slot's part of the three plane groups (qstate.h) */
    fsdpc_qspan sp;
    fsdpc_qplanes d;
    fsdpc__qstate_span(un, e->params, e->param_offset, &e->qf, lo, lo + len, &sp);
    fsdpc__qspan_planes(e->n_slots, &sp, buf, &d);
    for (uint32_t k = 0; k < e->n_slots; k++) {
      void *dev[3] = {d.f + k * sp.f_len, d.s + k * sp.b_len, d.q + k * sp.q_len};
      void *host[3] = {un->state + k * un->n_f32 + sp.f_lo,
                       un->qscale + k * un->n_qblocks + sp.b_lo,
                       un->qstate + k * un->n_q + sp.q_lo};
      size_t bytes[3] = {sp.f_len * sizeof(float), sp.b_len * sizeof(float), sp.q_len};
      for (int g = 0; g < 3; g++)
        if (bytes[g])
          FSDPC_TRY(to_device ? xcopy(e, dev[g], host[g], bytes[g], stream, err)
                              : xcopy(e, host[g], dev[g], bytes[g], stream, err));
    }
    return FSDPC_OK;
  }
  for (uint32_t k = 0; k < e->n_slots; k++) {
    float *host = un->state + (size_t)k * un->shard_numel + lo, *dev = buf + (size_t)k * len;
    FSDPC_TRY(to_device
                  ? xcopy(e, dev, host, fsdpc__stream_bytes(e, len) / e->n_slots, stream, err)
                  : xcopy(e, host, dev, fsdpc__stream_bytes(e, len) / e->n_slots, stream, err));
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__offload_state_in(fsdpc_engine *e, int p, fsdpc_err *err) {
  int b = p & 1;
  if (have_events(e)) {
    if (!e->sin_fenced) { /* the copy stream after everything before this step's updates */
      FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_OPT_FENCE, NULL, err));
      FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, e->copy_stream, EV_OPT_FENCE, err));
      e->sin_fenced = 1;
    }
    if (e->sbuf_out[b]) /* the buffer's previous piece has gone back to the host */
      FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, e->copy_stream, EV_SOUT + b, err));
  }
  FSDPC_TRY(copy_piece(e, p, 1, e->copy_stream, err));
  if (have_events(e))
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_SIN + b, e->copy_stream, err));
  return FSDPC_OK;
}

fsdpc_status fsdpc__offload_update_piece(fsdpc_engine *e, int p, int64_t step, double lr,
                                         double scale, fsdpc_err *err) {
  const fsdpc_state_pieces *ps = &e->pieces;
  if (have_events(e))
    FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, NULL, EV_SIN + (p & 1), err));
  return fsdpc__engine_update(e, ps->unit[p], ps->lo[p], ps->hi[p], e->sbuf[p & 1],
                              ps->hi[p] - ps->lo[p], step, lr, scale, err);
}

fsdpc_status fsdpc__offload_state_out(fsdpc_engine *e, int p, fsdpc_err *err) {
  int b = p & 1;
  FSDPC_TRY(copy_piece(e, p, 0, NULL, err));
  if (have_events(e))
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_SOUT + b, NULL, err));
  e->sbuf_out[b] = 1;
  if (p == e->pieces.n - 1) /* the step's last: the next step starts afresh */
    e->sin_fenced = e->sbuf_out[0] = e->sbuf_out[1] = 0;
  return FSDPC_OK;
}

/* ---- memory and set-up ---- */

float *fsdpc__offload_state_alloc(fsdpc_engine *e, uint64_t off, size_t bytes) {
  if (!e->offload_optim || !e->ops->alloc_host)
    return fsdpc__salloc(e, FSDPC_MEM_OPTIM, off, bytes);
  float *p = e->ops->alloc_host(e->ops->ctx, bytes);
  if (p)
    e->host_pinned += bytes;
  return p;
}

void fsdpc__offload_state_free(fsdpc_engine *e, float *p, size_t bytes) {
  if (!p)
    return;
  if (!e->offload_optim || !e->ops->alloc_host) {
    fsdpc__sfree(e, FSDPC_MEM_OPTIM, p, bytes);
    return;
  }
  e->ops->free_host(e->ops->ctx, p);
  e->host_pinned -= bytes;
}

/* Bytes of unit u's optimizer state in host memory (0 when frozen). */
static uint64_t unit_state_bytes(const fsdpc_engine *e, int u) {
  const fsdpc_unit *un = &e->units[u];
  if (un->frozen)
    return 0;
  if (!e->qf.block)
    return fsdpc__stream_bytes(e, un->shard_numel);
  uint64_t nf, nq, nb;
  fsdpc__qstate_count(un, e->params, e->param_offset, &e->qf, &nf, &nq, &nb);
  return fsdpc__qstate_bytes(e->n_slots, un->shard_numel, nf, nq, nb, 1);
}

fsdpc_status fsdpc__offload_setup(fsdpc_engine *e, fsdpc_err *err) {
  int on_cpu = e->ops->device == FSDPC_DEVICE_CPU;
  uint64_t buffer_bytes = e->x.offload_buffer_bytes;
  e->offload_optim = e->x.offload_optim;
  e->host_async = e->x.host_async;
  if (e->host_async && !on_cpu && !e->ops->event_sync)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: cpu_offload's host worker needs host event waits on this device");
  if (e->offload && !e->host_async && e->dist->rank == 0)
    FSDPC_LOGI("fsdp: cpu_offload: %d units (more than %d) or no host event wait on this device: "
               "the optimizer step does not overlap the device",
               e->n_units, FSDPC_OPS_UNIT_EVENTS);
  if (e->host_async) {
    e->upd_seq = calloc((size_t)e->n_units + 1, sizeof *e->upd_seq);
    e->land_seq = calloc((size_t)e->n_units + 1, sizeof *e->land_seq);
    e->part = calloc((size_t)e->n_units + 1, sizeof *e->part);
    if (e->offload) { /* uploads that follow the updates */
      e->upd_prog = calloc((size_t)e->n_units + 1, sizeof *e->upd_prog);
      e->upd_follow = calloc((size_t)e->n_units + 1, 1);
      if (!e->upd_prog || !e->upd_follow)
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the host worker");
    }
    if (!e->upd_seq || !e->land_seq || !e->part)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the host worker");
    e->parts_ok = e->dist->replica_size == 1;
    FSDPC_TRY(fsdpc__hostwork_create(task, e, &e->hw, err));
  }
  if (e->offload_optim) {
    fsdpc_layout lay = {.units = e->units, .n_units = e->n_units};
    if (e->qf.block) {
      FSDPC_TRY(fsdpc__qstate_pieces_build(e->units, e->n_units, e->params, e->param_offset, &e->qf,
                                           e->n_slots, buffer_bytes, &e->pieces, &e->sbuf_bytes,
                                           err));
    } else {
      FSDPC_TRY(fsdpc__state_pieces_build(&lay, fsdpc__state_piece_elems(buffer_bytes, e->n_slots),
                                          &e->pieces, err));
      e->sbuf_bytes = fsdpc__stream_bytes(e, e->pieces.max_len);
    }
    /* the two buffers are the memory plan's (fsdp/units.c places them) */
    e->copy_stream = e->ops->comm_stream ? e->ops->comm_stream(e->ops->ctx) : NULL;
  }
  find_head_suffix(e);
  if (e->dist->rank == 0 && e->host_async)
    FSDPC_LOGI("fsdp: cpu_offload: the optimizer step runs on a host worker thread, unit by "
               "unit, overlapping the %s",
               on_cpu ? "next pass (the shards already live in host memory on the CPU device)"
                      : "backward (grad sums) and the next forward (updates)");
  if (e->dist->rank == 0 && e->offload_optim) {
    double total = 0.0;
    for (int u = 0; u < e->n_units; u++)
      total += (double)unit_state_bytes(e, u);
    FSDPC_LOGI("fsdp: offload.optimizer: optimizer state in %shost memory (%.1f MiB), streamed "
               "in %d pieces through 2 device buffers of %.1f MiB",
               on_cpu ? "" : "pinned ", total / 1048576.0, e->pieces.n,
               (double)e->sbuf_bytes / 1048576.0);
  }
  return FSDPC_OK;
}

void fsdpc__offload_teardown(fsdpc_engine *e) {
  fsdpc__hostwork_destroy(e->hw);
  e->hw = NULL;
  for (int b = 0; b < 2; b++)
    if (e->sbuf[b])
      fsdpc__acct(e, FSDPC_MEM_OPTIM, -(int64_t)e->sbuf_bytes);
  free(e->upd_seq);
  free((void *)e->upd_prog);
  free(e->upd_follow);
  free(e->land_seq);
  free(e->part);
  fsdpc__state_pieces_free(&e->pieces);
}

fsdpc_status fsdpc__engine_quiesce(fsdpc_engine *e, fsdpc_err *err) {
  if (e->hw)
    FSDPC_TRY(fsdpc__hostwork_drain(e->hw, err));
  if (e->offload_optim && e->ops->device != FSDPC_DEVICE_CPU)
    FSDPC_TRY(e->ops->sync(e->ops->ctx, err));
  return FSDPC_OK;
}
