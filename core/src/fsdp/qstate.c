/* Optimizer state of unit shards: fp32 slots (ABI v1) or quantized codes and
 * block scales, their memory, the optimizer's tensor list, and the fp32
 * checkpoint views of quantized state (see qstate.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "fsdp/qstate.h"
#include "plugin/registry.h"

static int quantized_param(const fsdpc_optim_qformat *qf, uint64_t numel) {
  return fsdpc__qparam(qf, numel);
}

static uint64_t n_blocks(uint64_t n, uint64_t phase, uint32_t block) {
  return fsdpc__qblocks(n, phase, block);
}

void fsdpc__qstate_count(const fsdpc_unit *un, const fsdpc_param_info *params,
                         const uint64_t *param_offset, const fsdpc_optim_qformat *qf,
                         uint64_t *n_f32, uint64_t *n_q, uint64_t *n_blocks_out) {
  *n_f32 = *n_q = *n_blocks_out = 0;
  uint64_t s0 = un->shard_offset, s1 = s0 + un->shard_numel;
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    uint64_t p0 = param_offset[p], p1 = p0 + params[p].numel;
    uint64_t a, b;
    if (!fsdpc__overlap(p0, p1, s0, s1, &a, &b))
      continue;
    if (!quantized_param(qf, params[p].numel)) {
      *n_f32 += b - a;
      continue;
    }
    *n_q += b - a;
    *n_blocks_out += n_blocks(b - a, (a - p0) % qf->block, qf->block);
  }
}

uint64_t fsdpc__qstate_bytes(uint32_t n_slots, uint64_t shard_numel, uint64_t n_f32, uint64_t n_q,
                             uint64_t n_blocks_, int quantized) {
  if (!quantized)
    return (uint64_t)n_slots * shard_numel * sizeof(float);
  return (uint64_t)n_slots * (n_f32 * sizeof(float) + n_q + n_blocks_ * sizeof(float));
}

uint32_t fsdpc__optim_tensors_range(const fsdpc_engine *e, int u, uint64_t lo, uint64_t hi,
                                    float *master, const float *grad, const fsdpc_qplanes *pl,
                                    fsdpc_optim_tensor *out) {
  const fsdpc_unit *un = &e->units[u];
  const fsdpc_optim_qformat *qf = &e->qf;
  uint32_t n = 0;
  uint64_t s0 = un->shard_offset, r0 = s0 + lo, r1 = s0 + hi;
  uint64_t f_off = 0, q_off = 0, b_off = 0;
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    uint64_t p0 = e->param_offset[p], p1 = p0 + e->params[p].numel;
    uint64_t a = p0 > r0 ? p0 : r0, b = p1 < r1 ? p1 : r1;
    if (a >= b)
      continue;
    fsdpc_optim_tensor t = {.struct_size = sizeof(fsdpc_optim_tensor),
                            .param = master + (a - s0),
                            .grad = grad + (a - s0),
                            .numel = b - a,
                            .decay = e->params[p].decay || e->decay_norm_and_bias};
    if (qf->block == 0) { /* v1: fp32 slots element-aligned with the range */
      t.state = pl->f ? pl->f + (a - r0) : NULL;
      t.stride = pl->f_stride;
    } else if (!quantized_param(qf, e->params[p].numel)) {
      t.state = pl->f + f_off;
      t.stride = pl->f_stride;
      f_off += b - a;
    } else {
      t.qstate = pl->q + q_off;
      t.stride = pl->q_stride;
      t.qscale = pl->s + b_off;
      t.scale_stride = pl->s_stride;
      t.block_phase = (a - p0) % qf->block;
      q_off += b - a;
      b_off += n_blocks(b - a, t.block_phase, qf->block);
    }
    out[n++] = t;
  }
  return n;
}

uint32_t fsdpc__optim_tensors(const fsdpc_engine *e, int u, float *master, const float *grad,
                              float *state, uint8_t *qstate, float *qscale,
                              fsdpc_optim_tensor *out) {
  const fsdpc_unit *un = &e->units[u];
  fsdpc_qplanes pl = {.f = state,
                      .q = qstate,
                      .s = qscale,
                      .f_stride = e->qf.block ? un->n_f32 : un->shard_numel,
                      .q_stride = un->n_q,
                      .s_stride = un->n_qblocks};
  return fsdpc__optim_tensors_range(e, u, 0, un->shard_numel, master, grad, &pl, out);
}

uint32_t fsdpc__ckpt_slots(const fsdpc_engine *e) {
  return e->qf.block ? 2 * e->n_slots : e->n_slots;
}

uint64_t fsdpc__state_bytes(const fsdpc_engine *e, const fsdpc_unit *un) {
  return fsdpc__qstate_bytes(e->n_slots, un->shard_numel, un->n_f32, un->n_q, un->n_qblocks,
                             e->qf.block > 0);
}

/* offload.optimizer on a device: the state lives in pinned host memory
 * (fsdpc__offload_state_alloc) and is initialised there. */
static int state_on_host(const fsdpc_engine *e) {
  return e->offload_optim && e->ops->alloc_host;
}

static fsdpc_status state_zero(fsdpc_engine *e, void *p, size_t bytes, fsdpc_err *err) {
  if (state_on_host(e)) {
    memset(p, 0, bytes);
    return FSDPC_OK;
  }
  return e->sops->memset0(e->sops->ctx, p, bytes, err);
}

fsdpc_status fsdpc__state_alloc(fsdpc_engine *e, fsdpc_unit *un, fsdpc_err *err) {
  uint32_t ns = e->n_slots;
  const fsdpc_mp_unit *m = &e->mp.unit[un - e->units]; /* the planned places */
  if (ns == 0)
    return FSDPC_OK;
  uint64_t n_init = un->shard_numel * ns; /* fp32 floats for the plugin's init_state */
  if (e->qf.block) {
    fsdpc__qstate_count(un, e->params, e->param_offset, &e->qf, &un->n_f32, &un->n_q,
                        &un->n_qblocks);
    n_init = un->n_f32 * ns;
    size_t qb = un->n_q * ns, sb = un->n_qblocks * ns * sizeof(float);
    if ((qb && !(un->qstate = (uint8_t *)fsdpc__offload_state_alloc(e, m->qcodes, qb))) ||
        (sb && !(un->qscale = fsdpc__offload_state_alloc(e, m->qscale, sb))))
      goto oom;
    if (qb)
      FSDPC_TRY(state_zero(e, un->qstate, qb, err));
    if (sb)
      FSDPC_TRY(state_zero(e, un->qscale, sb, err));
  }
  if (n_init == 0)
    return FSDPC_OK;
  if (!(un->state = fsdpc__offload_state_alloc(e, m->state, n_init * sizeof(float))))
    goto oom;
  int host = state_on_host(e);
  int32_t r =
      e->ov->init_state(e->opt, un->state, n_init, host ? FSDPC_DEVICE_CPU : e->sops->device,
                        host ? NULL : e->sops->stream(e->sops->ctx));
  return r == FSDPC_OK ? FSDPC_OK : fsdpc__plugin_fail(e->optim, r, err);
oom:
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "out of %s memory for the optimizer state of unit %s; use more ranks, "
                     "cpu_offload or a smaller optimizer",
                     e->offload || state_on_host(e)       ? "pinned host"
                     : e->ops->device == FSDPC_DEVICE_CPU ? "host"
                                                          : "device",
                     un->name);
}

void fsdpc__state_free(fsdpc_engine *e, fsdpc_unit *un) {
  uint32_t ns = e->n_slots;
  if (!e->qf.block) {
    fsdpc__offload_state_free(e, un->state, un->shard_numel * ns * sizeof(float));
  } else {
    fsdpc__offload_state_free(e, un->state, un->n_f32 * ns * sizeof(float));
    fsdpc__offload_state_free(e, (float *)un->qstate, un->n_q * ns);
    fsdpc__offload_state_free(e, un->qscale, un->n_qblocks * ns * sizeof(float));
  }
  un->state = NULL;
  un->qstate = NULL;
  un->qscale = NULL;
}

/* ---- checkpoint views ---- */

/* Host copies of a unit's state: the state itself when it lives on the host,
 * else fresh buffers (downloaded when `fetch`). */
typedef struct host_state {
  float *f;
  uint8_t *q;
  float *s;
  int own;
} host_state;

static void host_state_free(host_state *h) {
  if (h->own) {
    free(h->f);
    free(h->q);
    free(h->s);
  }
}

static fsdpc_status host_state_get(fsdpc_engine *e, fsdpc_unit *un, int fetch, host_state *h,
                                   fsdpc_err *err) {
  uint32_t ns = e->n_slots;
  size_t fb = un->n_f32 * ns * sizeof(float), qb = un->n_q * ns,
         sb = un->n_qblocks * ns * sizeof(float);
  memset(h, 0, sizeof *h);
  if (e->ops->device == FSDPC_DEVICE_CPU || e->offload || state_on_host(e)) {
    *h = (host_state){un->state, un->qstate, un->qscale, 0};
    return FSDPC_OK;
  }
  h->own = 1;
  h->f = malloc(fb ? fb : 1);
  h->q = malloc(qb ? qb : 1);
  h->s = malloc(sb ? sb : 1);
  if (!h->f || !h->q || !h->s) {
    host_state_free(h);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "out of host memory staging the optimizer state of unit %s", un->name);
  }
  fsdpc_status st = FSDPC_OK;
  if (fetch && fb)
    st = e->ops->download(e->ops->ctx, h->f, un->state, fb, err);
  if (fetch && qb && st == FSDPC_OK)
    st = e->ops->download(e->ops->ctx, h->q, un->qstate, qb, err);
  if (fetch && sb && st == FSDPC_OK)
    st = e->ops->download(e->ops->ctx, h->s, un->qscale, sb, err);
  if (st != FSDPC_OK)
    host_state_free(h);
  return st;
}

static fsdpc_status host_state_put(fsdpc_engine *e, fsdpc_unit *un, host_state *h, fsdpc_err *err) {
  if (!h->own)
    return FSDPC_OK;
  uint32_t ns = e->n_slots;
  size_t fb = un->n_f32 * ns * sizeof(float), qb = un->n_q * ns,
         sb = un->n_qblocks * ns * sizeof(float);
  fsdpc_status st = FSDPC_OK;
  if (fb)
    st = e->ops->upload(e->ops->ctx, un->state, h->f, fb, err);
  if (qb && st == FSDPC_OK)
    st = e->ops->upload(e->ops->ctx, un->qstate, h->q, qb, err);
  if (sb && st == FSDPC_OK)
    st = e->ops->upload(e->ops->ctx, un->qscale, h->s, sb, err);
  return st;
}

/* Converts between unit u's state (host copies in h) and its 2*n_slots
 * planes: export (to_planes) or import. */
static fsdpc_status convert(fsdpc_engine *e, int u, host_state *h, float *planes, int to_planes,
                            fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  uint32_t ns = e->n_slots;
  uint64_t sn = un->shard_numel;
  float *master = un->master; /* only to locate each tensor in the shard */
  uint32_t n = fsdpc__optim_tensors(e, u, master, un->grad, h->f, h->q, h->s, e->otensors);
  for (uint32_t k = 0; k < n; k++) {
    const fsdpc_optim_tensor *t = &e->otensors[k];
    uint64_t off = (uint64_t)(t->param - master);
    for (uint32_t s = 0; s < ns; s++) {
      float *val = planes + s * sn + off, *scale = planes + (ns + s) * sn + off;
      int32_t r = FSDPC_OK;
      if (t->qstate) {
        r = to_planes ? e->ov->q_export(e->opt, t, s, val, scale)
                      : e->ov->q_import(e->opt, t, s, val, scale);
      } else if (to_planes) {
        memcpy(val, t->state + s * t->stride, t->numel * sizeof(float));
        memset(scale, 0, t->numel * sizeof(float));
      } else {
        memcpy(t->state + s * t->stride, val, t->numel * sizeof(float));
      }
      if (r != FSDPC_OK)
        return fsdpc__plugin_fail(e->optim, r, err);
    }
  }
  return FSDPC_OK;
}

float *fsdpc__qstate_host_shard(fsdpc_engine *e, int u, int slot, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (!e->qmirror && !(e->qmirror = calloc((size_t)e->n_units, sizeof(float *)))) {
    fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory for checkpoint staging");
    return NULL;
  }
  if (!e->qmirror[u]) {
    float *planes = calloc((size_t)(2 * e->n_slots * un->shard_numel) + 1, sizeof(float));
    if (!planes) {
      fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                  "out of host memory staging the optimizer state of unit %s", un->name);
      return NULL;
    }
    host_state h;
    fsdpc_status st = host_state_get(e, un, 1, &h, err);
    if (st == FSDPC_OK) {
      st = convert(e, u, &h, planes, 1, err);
      host_state_free(&h);
    }
    if (st != FSDPC_OK) {
      free(planes);
      return NULL;
    }
    e->qmirror[u] = planes;
  }
  return e->qmirror[u] + (size_t)slot * un->shard_numel;
}

fsdpc_status fsdpc__qstate_done(fsdpc_engine *e, int upload, fsdpc_err *err) {
  if (!e->qmirror)
    return FSDPC_OK;
  fsdpc_status st = FSDPC_OK;
  for (int u = 0; u < e->n_units; u++) {
    float *planes = e->qmirror[u];
    if (!planes)
      continue;
    if (upload && st == FSDPC_OK) {
      host_state h;
      /* every element of every tensor is rewritten: nothing to fetch first */
      st = host_state_get(e, &e->units[u], 0, &h, err);
      if (st == FSDPC_OK) {
        st = convert(e, u, &h, planes, 0, err);
        if (st == FSDPC_OK)
          st = host_state_put(e, &e->units[u], &h, err);
        host_state_free(&h);
      }
    }
    free(planes);
  }
  free(e->qmirror);
  e->qmirror = NULL;
  return st;
}
