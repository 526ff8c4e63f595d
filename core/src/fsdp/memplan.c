/* The memory plan of one rank (memplan.h): the persistent buffers laid end
 * to end, the model context's block, and the transients of each timeline
 * replayed action by action with a vector clock per stream, then placed by
 * arena_layout.c. */
#include "fsdp/memplan.h"

#include <stdlib.h>
#include <string.h>

#include "fsdp/arena_layout.h"
#include "fsdp/nf4_unit.h"
#include "fsdp/qstate.h"
#include "ops/ops.h"
#include "quant/nf4.h"

/* ---- accounting: current and peak bytes per category, as util/mem.c and
 * the CUDA context keep them ---- */

typedef struct tracker {
  int64_t cur[FSDPC_MEM_NCAT], peak[FSDPC_MEM_NCAT];
  int64_t total, total_peak;
  /* the moment of the total's peak: what each category held then, and the
   * action (slot, index; -1: before any) that made it */
  int64_t at_peak[FSDPC_MEM_NCAT];
  int slot, act, peak_slot, peak_act;
} tracker;

static void track(tracker *t, int cat, int64_t bytes) {
  t->cur[cat] += bytes;
  t->total += bytes;
  if (t->cur[cat] > t->peak[cat])
    t->peak[cat] = t->cur[cat];
  if (t->total > t->total_peak) {
    t->total_peak = t->total;
    memcpy(t->at_peak, t->cur, sizeof t->at_peak);
    t->peak_slot = t->slot;
    t->peak_act = t->act;
  }
}

/* ---- persistent buffers ---- */

typedef struct bumper {
  uint64_t at, align;
  tracker *t;
} bumper;

static uint64_t bump(bumper *b, int cat, uint64_t bytes) {
  uint64_t o = b->at;
  b->at += fsdpc__mp_round(bytes, b->align);
  track(b->t, cat, (int64_t)bytes);
  return o;
}

/* A unit's optimizer state: on the device, or counted as pinned host
 * memory (fsdp/qstate.c fsdpc__state_alloc: codes, scales, fp32 planes). */
static void unit_state(const fsdpc_memplan_in *in, const fsdpc_unit *un, int on_host, bumper *b,
                       fsdpc_mp_unit *m, fsdpc_memplan *mp) {
  uint32_t ns = in->x->n_slots;
  int quantized = in->qf && in->qf->block > 0;
  uint64_t nf = un->shard_numel, nq = 0, nb = 0;
  if (ns == 0)
    return;
  if (quantized)
    fsdpc__qstate_count(un, in->params, in->lay->param_offset, in->qf, &nf, &nq, &nb);
  m->n_f32 = nf;
  m->n_q = nq;
  m->n_qblocks = nb;
  m->state_bytes = fsdpc__qstate_bytes(ns, un->shard_numel, nf, nq, nb, quantized);
  mp->optim += m->state_bytes;
  uint64_t fb = nf * ns * sizeof(float), qb = nq * ns, sb = nb * ns * sizeof(float);
  if (on_host) {
    mp->host_pinned += fb + qb + sb;
    return;
  }
  if (qb)
    m->qcodes = bump(b, FSDPC_MEM_OPTIM, qb);
  if (sb)
    m->qscale = bump(b, FSDPC_MEM_OPTIM, sb);
  if (fb)
    m->state = bump(b, FSDPC_MEM_OPTIM, fb);
}

/* A frozen unit's shard bytes: the compute dtype; or, an NF4 unit
 * (quantization.method nf4), its NF4 image (fsdp/nf4_unit.h) cut evenly
 * into S shards. */
static uint64_t frozen_shard_bytes(const fsdpc_memplan_in *in, const fsdpc_unit *un) {
  const fsdpc_run_exec *x = in->x;
  if (!un->nf4)
    return un->shard_numel * (uint64_t)x->act_size;
  return fsdpc__nf4_unit_shard(
      fsdpc__nf4_unit_bytes(un, in->params, x->nf4_block, x->nf4_dq, x->act_size), x->S);
}

/* The shards (the device's, or pinned host memory under cpu_offload, with
 * a bf16 staging copy and, when a second micro-batch of a step reduces, a
 * landing buffer), param_copy's bf16 copies in unit order, then the fixed
 * buffers: what fsdp/units.c makes at engine creation. */
static void persist(const fsdpc_memplan_in *in, fsdpc_memplan *mp, bumper *b) {
  const fsdpc_run_exec *x = in->x;
  const fsdpc_layout *lay = in->lay;
  int cpu = x->device == FSDPC_DEVICE_CPU;
  int shards_host = x->offload, state_host = x->offload || (x->offload_optim && !cpu);
  int landing = x->offload && x->accum > 1 && !x->no_sync;
  uint64_t nf4_image = 0; /* the largest NF4 unit's gathered image (S shards) */
  for (int u = 0; u < lay->n_units; u++) {
    const fsdpc_unit *un = &lay->units[u];
    fsdpc_mp_unit *m = &mp->unit[u];
    uint64_t n = un->shard_numel, sb = n * sizeof(float);
    uint64_t mb = un->frozen ? frozen_shard_bytes(in, un) : sb;
    m->nf4_shard = un->nf4 ? mb : 0;
    if (un->nf4 && mb * (uint64_t)x->S > nf4_image)
      nf4_image = mb * (uint64_t)x->S;
    mp->params += mb;
    if (shards_host)
      mp->host_pinned += mb;
    else
      m->master = bump(b, FSDPC_MEM_PARAMS, mb);
    if (un->frozen) /* no grad, no optimizer state */
      continue;
    if (!x->inference && !x->in_bwd) { /* in_bwd: a transient (REDUCE to UPDATE) */
      mp->grads += sb;
      if (shards_host)
        mp->host_pinned += sb + (landing ? sb : 0);
      else
        m->grad = bump(b, FSDPC_MEM_GRADS, sb);
    }
    unit_state(in, un, state_host, b, m, mp);
    if (shards_host)
      mp->host_pinned += n * 2; /* the bf16 staging copy */
    if (x->param_copy && fsdpc__param_copy_fits(x->param_copy_max_bytes, mp->lp_bytes, n)) {
      m->lp = bump(b, FSDPC_MEM_PARAMS, n * 2);
      mp->lp_bytes += n * 2;
      mp->lp_units++;
    }
  }
  /* nf4: an NF4 unit is dequantized into its full buffer (a transient,
   * as any gathered unit's, at S == 1 too); gathered, its image's S shards
   * land first in one buffer that every such gather reuses, in stream
   * order (fsdp/step.c gather_nf4) */
  mp->nf4buf = FSDPC_MP_NONE;
  if (x->S > 1 && nf4_image) {
    mp->nf4buf = bump(b, FSDPC_MEM_COMM, nf4_image);
    mp->nf4buf_bytes = nf4_image;
  }
  if (x->S > 1 && !fsdpc__mp_rs_direct(x) && !x->in_bwd) /* in_bwd: into the transient shard */
    mp->rs = bump(b, FSDPC_MEM_COMM, lay->max_grad_shard * 4);
  if (x->S > 1 && x->reduce_bf16)
    mp->rs16 = bump(b, FSDPC_MEM_COMM, lay->max_grad_shard * 2);
  if (x->dev_norm)
    mp->dnorm = bump(b, FSDPC_MEM_OTHER, fsdpc__mp_dnorm_bytes(x, lay->n_units));
  for (int k = 0; k < 2 && x->offload_optim; k++)
    mp->sbuf[k] = bump(b, FSDPC_MEM_OPTIM, in->sbuf_bytes);
}

/* ---- transients: the replay ---- */

enum { SC = 0, SM = 1, SD = 2, NS = 3 }; /* compute, comm, d2h streams */

/* One instance of a transient buffer, from the action that makes it to the
 * one that ends it, with its accesses per stream. */
typedef struct inst {
  int id, cat, next; /* id: the buffer (slot, action, k); next: the id's next instance */
  uint64_t bytes;
  unsigned char has[NS];
  int64_t last[NS];      /* last access on each stream */
  int64_t first[NS][NS]; /* first[Y]: stream Y's clock at its first access */
} inst;

/* An event: stream clocks when it was recorded, and its number. */
typedef struct snap {
  int64_t vc[NS];
  int64_t id;
} snap;

typedef struct walker {
  const fsdpc_memplan_in *in;
  const fsdpc_program_opts *po;
  fsdpc_memplan *mp;
  tracker *t;
  int M, D; /* the streams of gathers and reductions, of cpu_offload's grads (SC: none) */
  int hu;   /* cpu_offload's head-suffix unit, or -1 */
  int64_t pos;
  int64_t vc[NS][NS];
  snap *ev_gather, *ev_reduced; /* (n_units) the last record of each */
  int64_t n_events;
  fsdpc_mp_op *ops; /* in->trace: the operations, in order */
  int n_ops, cap_ops;
  int *full, *grad; /* (n_units) live instance, or -1 */
  int *gshard;      /* (n_units) in_bwd: the live transient grad shard, or -1 */
  inst *in_;
  int n_in, cap_in;
  int base[FSDPC_MP_NSLOTS]; /* id = base[slot] + 2 * action + k */
  int n_ids;
  int *head; /* (n_ids) first instance of each id, -1 */
  uint64_t *id_bytes;
  int failed;
} walker;

static void tick(walker *w) {
  w->pos++;
}

static void trace(walker *w, int kind, int stream, int64_t event, int which) {
  if (!w->in->trace || w->failed)
    return;
  if (w->n_ops == w->cap_ops) {
    int cap = w->cap_ops ? 2 * w->cap_ops : 1024;
    fsdpc_mp_op *a = realloc(w->ops, (size_t)cap * sizeof *a);
    if (!a) {
      w->failed = 1;
      return;
    }
    w->ops = a;
    w->cap_ops = cap;
  }
  w->ops[w->n_ops++] =
      (fsdpc_mp_op){.kind = kind, .stream = stream, .pos = w->pos, .event = event, .inst = which};
}

static void touch(walker *w, int i, int s) {
  if (i < 0)
    return;
  trace(w, FSDPC_MP_ACCESS, s, 0, i);
  inst *p = &w->in_[i];
  w->vc[s][s] = w->pos;
  if (!p->has[s]) {
    p->has[s] = 1;
    memcpy(p->first[s], w->vc[s], sizeof p->first[s]);
  }
  p->last[s] = w->pos;
}

/* An event recorded on stream `from` ... */
static void record(walker *w, int from, snap *ev) {
  tick(w);
  w->vc[from][from] = w->pos;
  memcpy(ev->vc, w->vc[from], sizeof ev->vc);
  ev->id = ++w->n_events;
  trace(w, FSDPC_MP_RECORD, from, ev->id, -1);
}

/* ... and waited by stream `to` (an event never recorded orders nothing). */
static void wait_on(walker *w, int to, const snap *ev) {
  if (ev->id == 0)
    return;
  for (int x = 0; x < NS; x++)
    if (ev->vc[x] > w->vc[to][x])
      w->vc[to][x] = ev->vc[x];
  trace(w, FSDPC_MP_WAIT, to, ev->id, -1);
}

static void fence(walker *w, int from, int to) {
  if (from == to)
    return;
  snap ev;
  record(w, from, &ev);
  wait_on(w, to, &ev);
}

/* The host waited for every stream. */
static void join(walker *w) {
  tick(w);
  for (int y = 0; y < NS; y++)
    for (int x = 0; x < NS; x++)
      w->vc[y][x] = w->pos;
  trace(w, FSDPC_MP_JOIN, 0, 0, -1);
}

static int make(walker *w, int slot, int action, int k, uint64_t bytes, int cat) {
  if (w->n_in == w->cap_in) {
    int cap = w->cap_in ? 2 * w->cap_in : 256;
    inst *a = realloc(w->in_, (size_t)cap * sizeof *a);
    if (!a) {
      w->failed = 1;
      return -1;
    }
    w->in_ = a;
    w->cap_in = cap;
  }
  int id = w->base[slot] + 2 * action + k, i = w->n_in++;
  inst *p = &w->in_[i];
  memset(p, 0, sizeof *p);
  p->id = id;
  p->cat = cat;
  p->bytes = bytes;
  p->next = w->head[id];
  w->head[id] = i;
  w->id_bytes[id] = bytes;
  track(w->t, cat, (int64_t)bytes);
  return i;
}

static void end(walker *w, int i) {
  if (i >= 0)
    track(w->t, w->in_[i].cat, -(int64_t)w->in_[i].bytes);
}

/* S == 1 with param_copy: the unit's bf16 copy is its full buffer (step.c
 * gather): nothing is made. */
static int in_place(const fsdpc_memplan *mp, const fsdpc_run_exec *x, int u) {
  return x->S == 1 && mp->unit[u].lp != FSDPC_MP_NONE;
}

/* Accesses of the units of block blk by a compute action: params read,
 * grads (when grads) written. */
static void compute(walker *w, int blk, int grads) {
  const fsdpc_block *bl = &w->in->lay->blocks[blk];
  tick(w);
  for (int i = 0; i < bl->n_units; i++) {
    touch(w, w->full[bl->units[i]], SC);
    if (grads)
      touch(w, w->grad[bl->units[i]], SC);
  }
}

/* Whether program p reduces unit u (step.c reduces()). */
static int reduces(const fsdpc_program *p, int u) {
  for (int i = 0; i < p->n; i++)
    if (p->a[i].op == FSDPC_ACT_REDUCE && p->a[i].arg == u)
      return 1;
  return 0;
}

/* The bf16 reduce-scatter of the full grads g (step.c reduce_scatter_bf16):
 * cast into a bf16 copy (g ends), the copy reduce-scattered (it ends). */
static void reduce_bf16(walker *w, int slot, int i, const fsdpc_unit *un, int g) {
  int h = make(w, slot, i, 1, un->flat_numel * 2, FSDPC_MEM_COMM);
  tick(w);
  touch(w, g, w->M); /* cast to bf16 */
  touch(w, h, w->M);
  end(w, g);
  tick(w);
  touch(w, h, w->M); /* reduce-scatter */
  end(w, h);
}

/* REDUCE u under in_bwd (step.c reduce_shard): the grad shard is made
 * first (at S == 1 the full grads g become it); the reduce-scatter lands
 * in it, straight or (bf16) through the fixed bf16 landing buffer. */
static void reduce_in_bwd(walker *w, int slot, int i, int u, int g) {
  const fsdpc_run_exec *x = w->in->x;
  const fsdpc_unit *un = &w->in->lay->units[u];
  if (x->S == 1) {
    w->gshard[u] = g;
    return;
  }
  int s = make(w, slot, i, 0, un->shard_numel * 4, FSDPC_MEM_GRADS);
  w->gshard[u] = s;
  if (x->reduce_bf16) {
    reduce_bf16(w, slot, i, un, g);
    tick(w);
    touch(w, s, w->M); /* widened into the shard */
    return;
  }
  tick(w);
  touch(w, g, w->M); /* reduce-scatter */
  touch(w, s, w->M);
  end(w, g);
}

/* REDUCE u as step.c reduce_grads issues it. */
static void reduce(walker *w, int slot, int i, int u) {
  const fsdpc_run_exec *x = w->in->x;
  const fsdpc_unit *un = &w->in->lay->units[u];
  int gs = x->S == 1 ? w->D : w->M;
  fence(w, SC, gs); /* the grads are ready */
  int g = w->grad[u];
  if (x->in_bwd) {
    reduce_in_bwd(w, slot, i, u, g);
  } else if (x->S > 1 && x->reduce_bf16) {
    reduce_bf16(w, slot, i, un, g);
  } else {
    if (x->S > 1) {
      tick(w);
      touch(w, g, w->M); /* reduce-scatter */
    }
    if (x->offload && x->S == 1) {
      tick(w);
      touch(w, g, gs); /* the full grads are the shard: copied to the host */
    }
    end(w, g);
  }
  w->grad[u] = -1;
  record(w, gs, &w->ev_reduced[u]);
}

static void act(walker *w, int slot, const fsdpc_program *p, int i) {
  const fsdpc_run_exec *x = w->in->x;
  const fsdpc_layout *lay = w->in->lay;
  int u = p->a[i].arg;
  switch ((fsdpc_act_op)p->a[i].op) {
  case FSDPC_ACT_FENCE_IN:
  case FSDPC_ACT_FENCE_FREE:
    fence(w, SC, w->M);
    break;
  case FSDPC_ACT_FENCE_OUT:
    fence(w, w->D, SC);
    fence(w, w->M, SC);
    break;
  case FSDPC_ACT_GATHER:
    if (in_place(w->mp, x, u))
      break;
    w->full[u] =
        make(w, slot, i, 0, lay->units[u].flat_numel * (uint64_t)x->act_size, FSDPC_MEM_COMM);
    tick(w);
    touch(w, w->full[u], w->M);
    record(w, w->M, &w->ev_gather[u]);
    break;
  case FSDPC_ACT_WAIT:
    wait_on(w, SC, &w->ev_gather[u]);
    break;
  case FSDPC_ACT_GRAD_ALLOC:
    if (w->grad[u] >= 0)
      break; /* kept from a micro-batch before (no_sync) */
    w->grad[u] = make(w, slot, i, 0, lay->units[u].flat_numel * 4, FSDPC_MEM_GRADS);
    tick(w);
    touch(w, w->grad[u], SC); /* zeroed */
    break;
  case FSDPC_ACT_FORWARD:
    compute(w, u, 0);
    break;
  case FSDPC_ACT_BACKWARD:
    compute(w, u, 1);
    break;
  case FSDPC_ACT_HEAD: {
    int train = slot != FSDPC_MP_FORWARD;
    compute(w, u, train);
    int hu = w->hu; /* cpu_offload's head suffix goes to the host now */
    if (train && x->offload && hu >= 0 && reduces(p, hu)) {
      fence(w, SC, w->D);
      tick(w);
      touch(w, w->grad[hu], w->D);
    }
    break;
  }
  case FSDPC_ACT_REDUCE:
    reduce(w, slot, i, u);
    break;
  case FSDPC_ACT_REDUCED:
    wait_on(w, SC, &w->ev_reduced[u]);
    break;
  case FSDPC_ACT_RELEASE:
    end(w, w->full[u]);
    w->full[u] = -1;
    break;
  case FSDPC_ACT_SYNC:
    join(w);
    break;
  case FSDPC_ACT_REPLICA_REDUCE: { /* step.c replica_reduce: on compute, host-synchronous */
    uint64_t n = lay->units[u].shard_numel;
    int d = x->offload ? make(w, slot, i, 0, n * 4, FSDPC_MEM_COMM) : -1;
    int h = x->reduce_bf16 ? make(w, slot, i, 1, n * 2, FSDPC_MEM_COMM) : -1;
    tick(w);
    touch(w, w->gshard[u], SC); /* in_bwd: the transient grad shard */
    touch(w, d, SC);
    touch(w, h, SC);
    end(w, h);
    end(w, d);
    break;
  }
  case FSDPC_ACT_UPDATE: /* in_bwd: reads the transient grad shard, which ends */
    if (w->gshard[u] < 0)
      break;
    tick(w);
    touch(w, w->gshard[u], SC);
    end(w, w->gshard[u]);
    w->gshard[u] = -1;
    break;
  default: /* waits on the host worker, the optimizer, the norm: no transient */
    break;
  }
}

/* Whether instance a is done, on every stream, before b begins on any. */
static int before(const inst *a, const inst *b) {
  for (int y = 0; y < NS; y++) {
    if (!b->has[y])
      continue;
    for (int s = 0; s < NS; s++) {
      if (!a->has[s])
        continue;
      if (s == y ? a->last[s] >= b->first[y][y] : b->first[y][s] < a->last[s])
        return 0;
    }
  }
  return 1;
}

static int ids_conflict(const void *ctx, int a, int b) {
  const walker *w = ctx;
  for (int p = w->head[a]; p >= 0; p = w->in_[p].next)
    for (int q = w->head[b]; q >= 0; q = w->in_[q].next)
      if (!before(&w->in_[p], &w->in_[q]) && !before(&w->in_[q], &w->in_[p]))
        return 1;
  return 0;
}

/* Replays the programs of seq (slots, in order) from joined streams, lays
 * the buffers out, writes mp->off[] for them and returns the bytes. */
static fsdpc_status timeline(fsdpc_memplan *mp, const fsdpc_memplan_in *in,
                             const fsdpc_program_opts *po, const int *seq, int n_seq, tracker *t,
                             uint64_t *bytes, fsdpc_err *err) {
  int nu = in->lay->n_units;
  walker w = {.in = in, .po = po, .mp = mp, .t = t};
  w.M = in->x->overlap ? SM : SC;
  w.D = in->x->d2h ? SD : w.M;
  uint64_t at;
  w.hu = fsdpc__mp_head_unit(in->lay, in->params, in->x, &at);
  for (int k = 0; k < n_seq; k++) {
    int s = seq[k], dup = 0;
    for (int j = 0; j < k; j++)
      dup |= seq[j] == s;
    if (!dup) {
      w.base[s] = w.n_ids;
      w.n_ids += 2 * mp->prog[s].n;
    }
  }
  w.head = malloc(((size_t)w.n_ids + 1) * sizeof *w.head);
  w.id_bytes = calloc((size_t)w.n_ids + 1, sizeof *w.id_bytes);
  w.full = malloc(((size_t)nu + 1) * sizeof *w.full);
  w.grad = malloc(((size_t)nu + 1) * sizeof *w.grad);
  w.gshard = malloc(((size_t)nu + 1) * sizeof *w.gshard);
  w.ev_gather = calloc((size_t)nu + 1, sizeof *w.ev_gather);
  w.ev_reduced = calloc((size_t)nu + 1, sizeof *w.ev_reduced);
  uint64_t *offset = malloc(((size_t)w.n_ids + 1) * sizeof *offset);
  fsdpc_status st = FSDPC_OK;
  if (!w.head || !w.id_bytes || !w.full || !w.grad || !w.gshard || !w.ev_gather || !w.ev_reduced ||
      !offset) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory planning memory");
    goto done;
  }
  for (int i = 0; i < w.n_ids; i++)
    w.head[i] = -1;
  for (int u = 0; u < nu; u++)
    w.full[u] = w.grad[u] = w.gshard[u] = -1;
  for (int y = 0; y < NS; y++)
    for (int x = 0; x < NS; x++)
      w.vc[y][x] = -1;
  for (int k = 0; k < n_seq; k++)
    for (int i = 0; i < mp->prog[seq[k]].n; i++) {
      t->slot = seq[k];
      t->act = i;
      act(&w, seq[k], &mp->prog[seq[k]], i);
    }
  if (w.failed) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory planning memory");
    goto done;
  }
  st = fsdpc__arena_layout(w.id_bytes, w.n_ids, mp->align, ids_conflict, &w, offset, bytes, err);
  for (int k = 0; k < n_seq && st == FSDPC_OK; k++) {
    int s = seq[k];
    for (int i = 0; i < 2 * mp->prog[s].n; i++)
      mp->off[s][i] =
          w.head[w.base[s] + i] >= 0 ? mp->trans_offset + offset[w.base[s] + i] : FSDPC_MP_NONE;
  }
  for (int k = 0; st == FSDPC_OK && in->trace && k < w.n_ops; k++) {
    fsdpc_mp_op op = w.ops[k];
    op.timeline = seq[0] == FSDPC_MP_FORWARD;
    if (op.kind == FSDPC_MP_ACCESS) {
      op.offset = mp->trans_offset + offset[w.in_[op.inst].id];
      op.bytes = w.in_[op.inst].bytes;
    }
    in->trace(in->trace_ctx, &op);
  }
done:
  free(w.head);
  free(w.id_bytes);
  free(w.full);
  free(w.grad);
  free(w.gshard);
  free(w.ev_gather);
  free(w.ev_reduced);
  free(w.in_);
  free(w.ops);
  free(offset);
  return st;
}

/* The inference block path (step.c fsdpc__engine_block_weights): a unit is
 * gathered at its first block and freed after its last; each block begins
 * with the comm stream waiting for compute, so units of blocks that do not
 * overlap share bytes. */
static fsdpc_status blocks_layout(fsdpc_memplan *mp, const fsdpc_memplan_in *in,
                                  const fsdpc_program_opts *po, fsdpc_err *err) {
  const fsdpc_layout *lay = in->lay;
  int nu = lay->n_units;
  uint64_t *bytes = calloc((size_t)nu + 1, sizeof *bytes), *off = calloc((size_t)nu + 1, 8);
  int *first = calloc((size_t)nu + 2, sizeof *first);
  int64_t *lo = calloc((size_t)nu + 1, sizeof *lo), *hi = calloc((size_t)nu + 1, sizeof *hi);
  fsdpc_status st = FSDPC_OK;
  if (!bytes || !off || !first || !lo || !hi) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory planning memory");
    goto done;
  }
  for (int u = 0; u < nu; u++) {
    const fsdpc_unit *un = &lay->units[u];
    int resident = !un->nf4 && (po->full_is_master || (po->frozen_resident && un->frozen));
    bytes[u] = resident || in_place(mp, in->x, u) ? 0 : un->flat_numel * (uint64_t)in->x->act_size;
    first[u] = u;
    lo[u] = un->first_block;
    hi[u] = (int64_t)un->last_block + 1;
  }
  first[nu] = nu;
  fsdpc_alay_intervals iv = {.first = first, .lo = lo, .hi = hi};
  st = fsdpc__arena_layout(bytes, nu, mp->align, fsdpc__alay_intervals_conflict, &iv, off,
                           &mp->trans_blocks, err);
  for (int u = 0; u < nu && st == FSDPC_OK; u++)
    mp->unit[u].blk = bytes[u] ? mp->trans_offset + off[u] : FSDPC_MP_NONE;
done:
  free(bytes);
  free(off);
  free(first);
  free(lo);
  free(hi);
  return st;
}

/* A checkpoint's gather of one unit (step.c fsdpc__engine_gather_unit and
 * gather_frozen16), between steps: a full fp32 buffer, and before it the
 * unit's shard uploaded from host memory; or a frozen unit's bf16 one. */
static uint64_t ckpt_bytes(const fsdpc_memplan_in *in, uint64_t align) {
  const fsdpc_run_exec *x = in->x;
  int host_src = x->device != FSDPC_DEVICE_CPU && (x->offload || x->offload_optim);
  uint64_t need = 0;
  for (int u = 0; u < in->lay->n_units && x->S > 1; u++) { /* S == 1: read where they are */
    const fsdpc_unit *un = &in->lay->units[u];
    uint64_t b;
    if (un->frozen && x->act_size != 4)
      b = fsdpc__mp_round(un->flat_numel * 2, align);
    else
      b = fsdpc__mp_round(un->flat_numel * 4, align) +
          (host_src ? fsdpc__mp_round(un->shard_numel * 4, align) : 0);
    need = b > need ? b : need;
  }
  return need;
}

int fsdpc__mp_head_unit(const fsdpc_layout *lay, const fsdpc_param_info *params,
                        const fsdpc_run_exec *x, uint64_t *at) {
  int pn = lay->param_of_kind[FSDPC_P_NORM], ph = lay->param_of_kind[FSDPC_P_HEAD];
  *at = 0;
  if (!x->offload || x->S != 1 || !x->d2h || pn < 0 || ph < 0 ||
      lay->param_unit[pn] != lay->param_unit[ph])
    return -1;
  int u = lay->param_unit[ph];
  const fsdpc_unit *un = &lay->units[u];
  if (un->frozen || un->first_block == lay->n_blocks - 1)
    return -1; /* its own unit: its REDUCE comes right after the head anyway */
  uint64_t from =
      lay->param_offset[pn] < lay->param_offset[ph] ? lay->param_offset[pn] : lay->param_offset[ph];
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    if (p != pn && p != ph && lay->param_offset[p] + params[p].numel > from)
      return -1; /* another parameter after them */
  }
  *at = from;
  return u;
}

static fsdpc_program_kind slot_kind(int slot, int accum) {
  switch (slot) {
  case FSDPC_MP_FIRST:
    return accum == 1 ? FSDPC_PROGRAM_MICRO : FSDPC_PROGRAM_MICRO_NO_SYNC;
  case FSDPC_MP_MID:
    return FSDPC_PROGRAM_MICRO_NO_SYNC_IN;
  case FSDPC_MP_LAST:
    return FSDPC_PROGRAM_MICRO_IN;
  case FSDPC_MP_OPTIM:
    return FSDPC_PROGRAM_OPTIM;
  default:
    return FSDPC_PROGRAM_FORWARD;
  }
}

static fsdpc_status programs(fsdpc_memplan *mp, const fsdpc_memplan_in *in,
                             const fsdpc_program_opts *po, fsdpc_err *err) {
  const fsdpc_run_exec *x = in->x;
  int train = !x->inference;
  mp->has[FSDPC_MP_FIRST] = mp->has[FSDPC_MP_OPTIM] = train;
  mp->has[FSDPC_MP_MID] = train && x->accum >= 3;
  mp->has[FSDPC_MP_LAST] = train && x->accum >= 2;
  mp->has[FSDPC_MP_FORWARD] = 1;
  for (int s = 0; s < FSDPC_MP_NSLOTS; s++) {
    if (!mp->has[s])
      continue;
    FSDPC_TRY(fsdpc__program_build(po, slot_kind(s, x->accum), &mp->prog[s], err));
    if (!(mp->off[s] = malloc(((size_t)mp->prog[s].n + 1) * 2 * sizeof *mp->off[s])))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory planning memory");
    for (int i = 0; i < 2 * mp->prog[s].n; i++)
      mp->off[s][i] = FSDPC_MP_NONE;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__memplan_build(const fsdpc_memplan_in *in, fsdpc_memplan *out, fsdpc_err *err) {
  const fsdpc_run_exec *x = in->x;
  const fsdpc_layout *lay = in->lay;
  memset(out, 0, sizeof *out);
  out->align = fsdpc__ops_arena_align(x->device);
  out->n_units = lay->n_units;
  out->rs = out->rs16 = out->dnorm = out->sbuf[0] = out->sbuf[1] = out->nf4buf = FSDPC_MP_NONE;
  if (!(out->unit = malloc(((size_t)lay->n_units + 1) * sizeof *out->unit)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory planning memory");
  for (int u = 0; u < lay->n_units; u++)
    out->unit[u] = (fsdpc_mp_unit){.master = FSDPC_MP_NONE,
                                   .grad = FSDPC_MP_NONE,
                                   .state = FSDPC_MP_NONE,
                                   .qcodes = FSDPC_MP_NONE,
                                   .qscale = FSDPC_MP_NONE,
                                   .lp = FSDPC_MP_NONE,
                                   .blk = FSDPC_MP_NONE};
  tracker t = {.slot = -1, .act = -1, .peak_slot = -1, .peak_act = -1}, scratch = t;
  bumper b = {.align = out->align, .t = &t};
  persist(in, out, &b);
  out->persist_bytes = b.at;
  out->act_offset = b.at;
  out->act_bytes = fsdpc__mp_round(in->act_bytes, out->align);
  b.at += out->act_bytes;
  track(&t, FSDPC_MEM_ACTIVATIONS, (int64_t)in->act_tracked);
  out->trans_offset = b.at;
  fsdpc_program_opts po;
  fsdpc__program_opts_exec(lay, x, in->pieces, &po);
  fsdpc_status st = programs(out, in, &po, err);
  /* one step: its micro-batches by position (two middle ones stand for
   * any number: each starts and ends with the same buffers live), then the
   * optimizer step */
  int seq[5], n = 0;
  if (st == FSDPC_OK && out->has[FSDPC_MP_FIRST]) {
    seq[n++] = FSDPC_MP_FIRST;
    for (int k = 0; k < (x->accum >= 4 ? 2 : 1) && out->has[FSDPC_MP_MID]; k++)
      seq[n++] = FSDPC_MP_MID;
    if (out->has[FSDPC_MP_LAST])
      seq[n++] = FSDPC_MP_LAST;
    seq[n++] = FSDPC_MP_OPTIM;
    st = timeline(out, in, &po, seq, n, &t, &out->trans_step, err);
  }
  int fwd = FSDPC_MP_FORWARD;
  if (st == FSDPC_OK)
    st = timeline(out, in, &po, &fwd, 1, &scratch, &out->trans_forward, err);
  if (st == FSDPC_OK)
    st = blocks_layout(out, in, &po, err);
  if (st != FSDPC_OK) {
    fsdpc__memplan_free(out);
    return st;
  }
  out->trans_ckpt = ckpt_bytes(in, out->align);
  uint64_t tb = out->trans_step;
  tb = out->trans_forward > tb ? out->trans_forward : tb;
  tb = out->trans_blocks > tb ? out->trans_blocks : tb;
  tb = out->trans_ckpt > tb ? out->trans_ckpt : tb;
  out->trans_bytes = tb;
  out->arena_bytes = out->trans_offset + tb;
  memcpy(out->peak, t.peak, sizeof out->peak);
  out->total_peak = t.total_peak;
  memcpy(out->at_peak, t.at_peak, sizeof out->at_peak);
  out->peak_slot = t.peak_slot;
  out->peak_action = t.peak_act;
  return FSDPC_OK;
}

const char *fsdpc__mp_slot_name(int s) {
  static const char *names[FSDPC_MP_NSLOTS] = {"first micro-batch", "middle micro-batch",
                                               "last micro-batch", "optimizer step", "forward"};
  return s >= 0 && s < FSDPC_MP_NSLOTS ? names[s] : "start-up";
}

void fsdpc__memplan_free(fsdpc_memplan *mp) {
  free(mp->unit);
  for (int s = 0; s < FSDPC_MP_NSLOTS; s++) {
    fsdpc__program_free(&mp->prog[s]);
    free(mp->off[s]);
  }
  memset(mp, 0, sizeof *mp);
}

fsdpc_status fsdpc__memplan_act_bytes(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                                      const fsdpc_run_exec *x, uint64_t *bytes, uint64_t *tracked,
                                      fsdpc_err *err) {
  fsdpc_model_ctx_opts mo;
  fsdpc__run_model_opts(p, m, &mo);
  fsdpc_attn_sizes as = p->attn_sizes;
  if (m->batch.micro != p->modes.batch.micro || m->batch.seq_len != p->modes.batch.seq_len)
    FSDPC_TRY(fsdpc__run_attn_sizes(p, mo.B, mo.T, &as, err));
  *bytes = fsdpc__model_ctx_arena_bytes(&mo, &as, x->device, (size_t)x->act_size,
                                        fsdpc__ops_arena_align(x->device), tracked);
  return FSDPC_OK;
}
