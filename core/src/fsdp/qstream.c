/* Quantized optimizer state under fsdp.offload.optimizer: the pieces a
 * unit's state streams in, where a piece's state sits in its device buffer,
 * and how many bytes that takes (see qstate.h). The engine (offload.c) and
 * the planner (plan.c) both cut with fsdpc__qstate_pieces_build. */
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "fsdp/qstate.h"

static uint64_t round256(uint64_t n) {
  return (n + 255) / 256 * 256;
}

void fsdpc__qstate_span(const fsdpc_unit *un, const fsdpc_param_info *params,
                        const uint64_t *param_offset, const fsdpc_optim_qformat *qf, uint64_t lo,
                        uint64_t hi, fsdpc_qspan *out) {
  memset(out, 0, sizeof *out);
  uint64_t s0 = un->shard_offset, s1 = s0 + un->shard_numel, r0 = s0 + lo, r1 = s0 + hi;
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    uint64_t p0 = param_offset[p], p1 = p0 + params[p].numel;
    uint64_t a, b; /* in the shard */
    if (!fsdpc__overlap(p0, p1, s0, s1, &a, &b))
      continue;
    if (a >= r1)
      break;
    uint64_t c = a > r0 ? a : r0, d = b < r1 ? b : r1; /* in the piece */
    uint64_t before = (c < b ? c : b) - a, in = c < d ? d - c : 0;
    if (!fsdpc__qparam(qf, params[p].numel)) {
      out->f_lo += before;
      out->f_len += in;
      continue;
    }
    uint64_t ph = (a - p0) % qf->block;
    out->q_lo += before;
    out->q_len += in;
    /* c is a cut: a block bound of this parameter (or a itself) */
    out->b_lo += fsdpc__qblocks(before, ph, qf->block);
    out->b_len += fsdpc__qblocks(in, (c - p0) % qf->block, qf->block);
  }
}

uint64_t fsdpc__qspan_bytes(uint32_t n_slots, const fsdpc_qspan *sp) {
  return round256(n_slots * sp->f_len * sizeof(float)) +
         round256(n_slots * sp->b_len * sizeof(float)) + n_slots * sp->q_len;
}

void fsdpc__qspan_planes(uint32_t n_slots, const fsdpc_qspan *sp, void *buf, fsdpc_qplanes *out) {
  uint8_t *b = buf;
  uint64_t fb = round256(n_slots * sp->f_len * sizeof(float));
  uint64_t sb = round256(n_slots * sp->b_len * sizeof(float));
  *out = (fsdpc_qplanes){.f = (float *)b,
                         .s = (float *)(b + fb),
                         .q = b + fb + sb,
                         .f_stride = sp->f_len,
                         .s_stride = sp->b_len,
                         .q_stride = sp->q_len};
}

/* The pieces being cut. */
typedef struct cutter {
  fsdpc_state_pieces *out;
  size_t cap;
  int u;
  uint64_t lo;   /* the open piece starts here (shard element) */
  uint64_t used; /* its state bytes so far (without the buffer's rounding) */
} cutter;

static int push(cutter *c, uint64_t hi) {
  fsdpc_state_pieces *o = c->out;
  if ((size_t)o->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 64;
    int *u = realloc(o->unit, cap * sizeof *u);
    if (u)
      o->unit = u;
    uint64_t *l = realloc(o->lo, cap * sizeof *l);
    if (l)
      o->lo = l;
    uint64_t *h = realloc(o->hi, cap * sizeof *h);
    if (h)
      o->hi = h;
    if (!u || !l || !h)
      return -1;
    c->cap = cap;
  }
  o->unit[o->n] = c->u;
  o->lo[o->n] = c->lo;
  o->hi[o->n] = hi;
  if (hi - c->lo > o->max_len)
    o->max_len = hi - c->lo;
  o->n++;
  c->lo = hi;
  c->used = 0;
  return 0;
}

/* Adds items of `cost` bytes each, `count` of them, each `len` elements,
 * from shard element x on, cutting before an item that would overflow the
 * budget (never leaving a piece empty). Returns the element after them. */
static int add(cutter *c, uint64_t *x, uint64_t count, uint64_t len, uint64_t cost,
               uint64_t budget) {
  while (count > 0) {
    uint64_t k = c->used < budget ? (budget - c->used) / cost : 0;
    if (k == 0) {
      if (c->used > 0) {
        if (push(c, *x))
          return -1;
        continue;
      }
      k = 1; /* one item larger than the budget: a piece of its own */
    }
    if (k > count)
      k = count;
    c->used += k * cost;
    *x += k * len;
    count -= k;
  }
  return 0;
}

fsdpc_status fsdpc__qstate_pieces_build(const fsdpc_unit *units, int n_units,
                                        const fsdpc_param_info *params,
                                        const uint64_t *param_offset, const fsdpc_optim_qformat *qf,
                                        uint32_t n_slots, uint64_t buffer_bytes,
                                        fsdpc_state_pieces *out, uint64_t *max_bytes,
                                        fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  *max_bytes = 0;
  cutter c = {.out = out};
  uint64_t ns = n_slots, B = qf->block;
  /* room for the rounding of the two float parts (fsdpc__qspan_bytes) */
  uint64_t budget = buffer_bytes > 1024 ? buffer_bytes - 512 : 512;
  for (int u = 0; u < n_units; u++) {
    const fsdpc_unit *un = &units[u];
    if (un->frozen || un->shard_numel == 0)
      continue;
    c.u = u;
    c.lo = 0;
    c.used = 0;
    uint64_t s0 = un->shard_offset, s1 = s0 + un->shard_numel;
    for (int i = 0; i < un->n_params; i++) {
      int p = un->params[i];
      uint64_t p0 = param_offset[p], p1 = p0 + params[p].numel;
      uint64_t a, b;
      if (!fsdpc__overlap(p0, p1, s0, s1, &a, &b))
        continue;
      uint64_t x = a - s0, end = b - s0;
      int r = 0;
      if (!fsdpc__qparam(qf, params[p].numel)) {
        r = add(&c, &x, end - x, 1, ns * sizeof(float), budget);
      } else {
        uint64_t ph = (a - p0) % B;
        if (ph) { /* the partial block the shard starts with */
          uint64_t l = B - ph < end - x ? B - ph : end - x;
          r = add(&c, &x, 1, l, ns * (l + sizeof(float)), budget);
        }
        uint64_t full = (end - x) / B;
        if (!r)
          r = add(&c, &x, full, B, ns * (B + sizeof(float)), budget);
        if (!r && x < end) /* the last, partial block */
          r = add(&c, &x, 1, end - x, ns * (end - x + sizeof(float)), budget);
      }
      if (r)
        goto oom;
    }
    if (push(&c, un->shard_numel))
      goto oom;
  }
  *max_bytes = 256; /* a buffer even when no piece holds state (a padding-only shard) */
  for (int k = 0; k < out->n; k++) {
    fsdpc_qspan sp;
    fsdpc__qstate_span(&units[out->unit[k]], params, param_offset, qf, out->lo[k], out->hi[k], &sp);
    uint64_t b = fsdpc__qspan_bytes(n_slots, &sp);
    *max_bytes = b > *max_bytes ? b : *max_bytes;
  }
  return FSDPC_OK;
oom:
  fsdpc__state_pieces_free(out);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the optimizer state pieces");
}
