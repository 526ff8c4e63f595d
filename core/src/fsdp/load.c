/* Filling the master shards from an HF checkpoint folder, fast: each rank
 * reads only the byte ranges of its own shards, with many threads and large
 * preads, and a device rank moves a unit's shard up in a few large copies
 * from pinned memory instead of one per tensor.
 *
 * Device pipeline, per unit, in chunks of at most chunk_bytes of the staged
 * type: threads read chunk k into pinned buffer k % 2 while chunk k - 1's
 * copy runs; when every tensor of the unit is BF16 the raw bytes go up (half
 * the fp32 bytes) and a kernel widens them into the fp32 master shard; any
 * other dtype is widened on the host and goes up as fp32. Host shards (CPU
 * device, offload) are read into in place by the same threads. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "io/dtype.h"
#include "io/hf_ckpt.h"
#include "model/lora.h"

#define LOAD_PIECE_BYTES (8u << 20) /* one pread: big enough to stream, small enough to share */

/* A parameter's part inside this rank's shard of a unit: elements [lo, hi)
 * of the tensor at shard element `at`. */
typedef struct seg {
  const char *name;
  uint64_t lo, hi, at;
} seg;

typedef struct piece {
  const char *name;
  uint64_t lo, n, at; /* tensor elements [lo, lo + n) at chunk element `at` */
} piece;

/* LoRA's adapter units: not in a base checkpoint (fsdpc__engine_init_adapters). */
static int is_adapter(const fsdpc_engine *e, const fsdpc_unit *un) {
  return fsdpc__lora_kind(e->params[un->params[0]].kind);
}

typedef struct loader {
  fsdpc_engine *e;
  fsdpc_hf_ckpt *ck;
  const char *dir;
  seg *segs;
  int n_segs;
  piece *pieces;
  size_t cap_pieces;
  float *unit; /* an NF4 unit's fp32 values on the host (quantized on the device) */
} loader;

/* This rank's segments of unit u, in shard order; *all_bf16 says whether
 * every one is stored as BF16. */
static fsdpc_status unit_segments(loader *L, int u, int *all_bf16, fsdpc_err *err) {
  fsdpc_engine *e = L->e;
  fsdpc_unit *un = &e->units[u];
  /* an NF4 unit is read whole (quantized whole, then sharded as bytes) */
  uint64_t s0 = un->nf4 ? 0 : un->shard_offset;
  uint64_t s1 = un->nf4 ? un->flat_numel : un->shard_offset + un->shard_numel, a, b;
  L->n_segs = 0;
  *all_bf16 = 1;
  for (int i = 0, p; fsdpc__next_segment(e, un, s0, s1, &i, &p, &a, &b);) {
    uint64_t p0 = e->param_offset[p];
    const fsdpc_st_info *t;
    FSDPC_TRY(fsdpc__hf_ckpt_find(L->ck, e->params[p].name, &t, err));
    if (t->dtype != FSDPC_DTYPE_BF16)
      *all_bf16 = 0;
    L->segs[L->n_segs++] = (seg){e->params[p].name, a - p0, b - p0, a - s0};
  }
  return FSDPC_OK;
}

/* The first non-finite value of n raw BF16 (esize 2) or fp32 values, or n.
 * A NaN or Inf in initial weights would surface as a NaN loss at step 1
 * that looks like a learning-rate problem; it is refused where it is read. */
static uint64_t first_nonfinite(const void *v, uint64_t n, size_t esize) {
  for (uint64_t i = 0; i < n; i++)
    if (esize == 2 ? (((const uint16_t *)v)[i] & 0x7f80u) == 0x7f80u
                   : !isfinite(((const float *)v)[i]))
      return i;
  return n;
}

/* Reads shard elements [c0, c1) of the current unit into dst (element 0 =
 * shard element c0), as raw BF16 (esize 2) or fp32 (esize 4); elements no
 * tensor covers (padding) are zeroed when zero_gaps. */
static fsdpc_status read_chunk(loader *L, uint64_t c0, uint64_t c1, void *dst, size_t esize,
                               int zero_gaps, fsdpc_err *err) {
  unsigned char *d = dst;
  uint64_t per = LOAD_PIECE_BYTES / esize, covered = c0;
  int np = 0;
  for (int i = 0; i < L->n_segs; i++) {
    const seg *s = &L->segs[i];
    uint64_t a = s->at > c0 ? s->at : c0, b = s->at + (s->hi - s->lo);
    if (b > c1)
      b = c1;
    if (a >= b)
      continue;
    if (zero_gaps && a > covered)
      memset(d + (covered - c0) * esize, 0, (a - covered) * esize);
    covered = b;
    for (uint64_t x = a; x < b; x += per) {
      if ((size_t)np == L->cap_pieces) {
        size_t cap = L->cap_pieces ? 2 * L->cap_pieces : 64;
        piece *q = realloc(L->pieces, cap * sizeof *q);
        if (!q)
          return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory loading a checkpoint");
        L->pieces = q;
        L->cap_pieces = cap;
      }
      uint64_t n = b - x < per ? b - x : per;
      L->pieces[np++] = (piece){s->name, s->lo + (x - s->at), n, x - c0};
    }
  }
  if (zero_gaps && c1 > covered)
    memset(d + (covered - c0) * esize, 0, (c1 - covered) * esize);
  fsdpc_status st = FSDPC_OK;
  fsdpc_err first = {0};
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < np; i++) {
    int stop;
#pragma omp atomic read
    stop = failed;
    if (stop)
      continue;
    const piece *q = &L->pieces[i];
    fsdpc_err le = {0};
    void *at = d + q->at * esize;
    fsdpc_status s = esize == 2 ? fsdpc__hf_ckpt_read_raw(L->ck, q->name, q->lo, q->n, at, &le)
                                : fsdpc__hf_ckpt_read_f32(L->ck, q->name, q->lo, q->n, at, &le);
    uint64_t bad = s == FSDPC_OK ? first_nonfinite(at, q->n, esize) : q->n;
    if (bad < q->n)
      s = fsdpc__fail(&le, FSDPC_INVALID_USAGE,
                      "%s: tensor %s holds a NaN or Inf at element %llu: these weights cannot be "
                      "trained or evaluated (the folder is corrupt, or was saved from a diverged "
                      "run); use another copy",
                      L->dir, q->name, (unsigned long long)(q->lo + bad));
    if (s != FSDPC_OK) {
#pragma omp critical
      if (!failed) {
        first = le;
        st = s;
#pragma omp atomic write
        failed = 1;
      }
    }
  }
  if (st != FSDPC_OK)
    *err = first;
  return st;
}

/* An NF4 unit (fsdp/nf4_unit.h): read whole in fp32 on the host,
 * quantized, this rank's bytes kept (uploaded on a device). */
static fsdpc_status load_nf4(loader *L, int u, fsdpc_err *err) {
  fsdpc_unit *un = &L->e->units[u];
  float *f = malloc((un->flat_numel + 1) * sizeof *f);
  if (!f)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory loading unit %s", un->name);
  fsdpc_status st = read_chunk(L, 0, un->flat_numel, f, 4, 1, err);
  if (st == FSDPC_OK)
    st = fsdpc__nf4_store(L->e, u, f, err);
  free(f);
  return st;
}

/* Quantizing on the device (fsdpc__nf4_fill_dev): unit u's tensors read
 * whole in fp32 on the host, then each parameter copied up for the device
 * quantizer; host memory is one unit's fp32 values, as on the host path. */
static fsdpc_status nf4_read_unit(void *arg, int u, fsdpc_err *err) {
  loader *L = arg;
  fsdpc_unit *un = &L->e->units[u];
  int bf16;
  free(L->unit);
  if (!(L->unit = malloc((un->flat_numel + 1) * sizeof *L->unit)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory loading unit %s", un->name);
  FSDPC_TRY(unit_segments(L, u, &bf16, err));
  return read_chunk(L, 0, un->flat_numel, L->unit, 4, 1, err);
}

static fsdpc_status nf4_upload_param(void *arg, int p, float *x, fsdpc_err *err) {
  loader *L = arg;
  const fsdpc_ops *o = L->e->ops;
  /* x is the quantizer's input buffer: the previous parameter's kernels
   * must be done with it before it is overwritten */
  FSDPC_TRY(o->sync(o->ctx, err));
  return o->upload(o->ctx, x, L->unit + L->e->param_offset[p], L->e->params[p].numel * sizeof *x,
                   err);
}

/* Device shards through two pinned buffers and, for BF16, one device
 * buffer of raw values. */
static fsdpc_status load_device(loader *L, size_t chunk_bytes, fsdpc_err *err) {
  fsdpc_engine *e = L->e;
  const fsdpc_ops *o = e->ops;
  int can_widen = o->cast_to_f32_on && o->act_dtype == FSDPC_DTYPE_BF16;
  size_t buf_bytes = chunk_bytes;
  if (buf_bytes > e->max_shard * 4)
    buf_bytes = e->max_shard * 4;
  if (buf_bytes < 4)
    buf_bytes = 4;
  void *stage[2] = {o->alloc_host(o->ctx, buf_bytes), o->alloc_host(o->ctx, buf_bytes)};
  void *raw = can_widen ? o->alloc(o->ctx, FSDPC_MEM_OTHER, buf_bytes) : NULL;
  fsdpc_status st = FSDPC_OK;
  if (!stage[0] || !stage[1] || (can_widen && !raw)) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "out of %s memory for the %zu-byte checkpoint staging buffers",
                     raw || !can_widen ? "pinned host" : "device", buf_bytes);
    goto out;
  }
  int k = 0;
  for (int u = 0; u < e->n_units && st == FSDPC_OK; u++) {
    fsdpc_unit *un = &e->units[u];
    int bf16 = 0;
    if (is_adapter(e, un))
      continue;
    if (un->nf4 && fsdpc__nf4_on_device(e))
      continue; /* below, quantized on the device */
    if ((st = unit_segments(L, u, &bf16, err)) != FSDPC_OK)
      break;
    if (un->nf4) {
      st = load_nf4(L, u, err);
      continue;
    }
    size_t esize = bf16 && can_widen ? 2 : 4;
    uint64_t per = buf_bytes / esize;
    for (uint64_t c0 = 0; c0 < un->shard_numel && st == FSDPC_OK; c0 += per, k++) {
      uint64_t c1 = un->shard_numel - c0 < per ? un->shard_numel : c0 + per;
      void *b = stage[k & 1];
      /* buffer k & 1 last held chunk k - 2, whose copy the sync after
       * chunk k - 1's read has waited for */
      if ((st = read_chunk(L, c0, c1, b, esize, 1, err)) != FSDPC_OK)
        break;
      if ((st = o->sync(o->ctx, err)) != FSDPC_OK)
        break;
      size_t bytes = (size_t)(c1 - c0) * esize;
      if (un->frozen) { /* LoRA's base: the bf16 shard itself */
        uint16_t *m16 = (uint16_t *)(void *)un->master + c0;
        if (esize == 2)
          st = o->copy_on(o->ctx, m16, b, bytes, NULL, err);
        else if ((st = o->copy_on(o->ctx, raw, b, bytes, NULL, err)) == FSDPC_OK)
          st = o->cast_params_on(o->ctx, m16, raw, (size_t)(c1 - c0), NULL, err);
      } else if (esize == 4) {
        st = o->copy_on(o->ctx, un->master + c0, b, bytes, NULL, err);
      } else if ((st = o->copy_on(o->ctx, raw, b, bytes, NULL, err)) == FSDPC_OK) {
        st = o->cast_to_f32_on(o->ctx, un->master + c0, raw, (size_t)(c1 - c0), NULL, err);
      }
    }
  }
  if (st == FSDPC_OK)
    st = o->sync(o->ctx, err);
  if (st == FSDPC_OK && fsdpc__nf4_on_device(e))
    st = fsdpc__nf4_fill_dev(e, nf4_read_unit, nf4_upload_param, L, err);
  free(L->unit);
  L->unit = NULL;
out:
  if (st != FSDPC_OK) {
    fsdpc_err ignore;
    (void)o->sync(o->ctx, &ignore); /* no copy may still read the buffers */
  }
  if (raw)
    o->free(o->ctx, FSDPC_MEM_OTHER, raw, buf_bytes);
  for (int i = 0; i < 2; i++)
    if (stage[i])
      o->free_host(o->ctx, stage[i]);
  return st;
}

/* Host shards (CPU device, or offloaded): read in place, fp32. */
static fsdpc_status load_host(loader *L, fsdpc_err *err) {
  fsdpc_engine *e = L->e;
  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    int bf16;
    if (is_adapter(e, un))
      continue;
    FSDPC_TRY(unit_segments(L, u, &bf16, err));
    un->stage_stale = 1;
    if (un->nf4) {
      FSDPC_TRY(load_nf4(L, u, err));
      continue;
    }
    if (un->frozen && e->psize != sizeof(float)) { /* LoRA's offloaded base: bf16 */
      float *f = calloc(un->shard_numel + 1, sizeof *f);
      if (!f)
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory loading unit %s",
                           un->name);
      fsdpc_status st = read_chunk(L, 0, un->shard_numel, f, 4, 0, err);
      if (st == FSDPC_OK)
        fsdpc__f32_to_bf16_n(f, (uint16_t *)(void *)un->master, un->shard_numel);
      free(f);
      FSDPC_TRY(st);
      continue;
    }
    /* the padding is zero from create */
    FSDPC_TRY(read_chunk(L, 0, un->shard_numel, un->master, 4, 0, err));
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_load_hf_chunked(fsdpc_engine *e, const char *dir, size_t chunk_bytes,
                                           fsdpc_err *err) {
  fsdpc_hf_ckpt *ck = NULL;
  FSDPC_TRY(fsdpc__hf_ckpt_open(dir, &ck, err));
  fsdpc_status st = FSDPC_OK;
  /* every tensor's shape first; this also opens every shard file, after
   * which reads are safe from many threads (io/hf_ckpt.h) */
  for (int p = 0; p < e->n_params && st == FSDPC_OK; p++)
    if (!fsdpc__lora_kind(e->params[p].kind)) /* adapters are not in a base checkpoint */
      st = fsdpc__hf_ckpt_expect(ck, e->params[p].name, e->params[p].ndim, e->params[p].shape,
                                 err);
  loader L = {.e = e, .ck = ck, .dir = dir};
  int most = 0;
  for (int u = 0; u < e->n_units; u++)
    if (e->units[u].n_params > most)
      most = e->units[u].n_params;
  if (st == FSDPC_OK && !(L.segs = calloc((size_t)most + 1, sizeof *L.segs)))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory loading a checkpoint");
  if (st == FSDPC_OK) {
    int on_host = e->ops->device == FSDPC_DEVICE_CPU || e->offload;
    st = on_host ? load_host(&L, err) : load_device(&L, chunk_bytes, err);
  }
  free(L.segs);
  free(L.pieces);
  fsdpc__hf_ckpt_close(ck);
  return st;
}

fsdpc_status fsdpc__engine_load_hf(fsdpc_engine *e, const char *dir, fsdpc_err *err) {
  return fsdpc__engine_load_hf_chunked(e, dir, (size_t)64 << 20, err);
}
