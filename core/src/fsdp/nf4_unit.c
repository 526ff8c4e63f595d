/* The NF4 image of a frozen unit (nf4_unit.h): sizing, packing at fill
 * time, unpacking at each gather. */
#include "fsdp/nf4_unit.h"

#include <stdlib.h>
#include <string.h>

#include "io/dtype.h"
#include "ops/ops.h"

void fsdpc__nf4_mark_units(fsdpc_layout *lay, const fsdpc_param_info *params, int block) {
  for (int u = 0; u < lay->n_units; u++) {
    fsdpc_unit *un = &lay->units[u];
    un->nf4 = 0;
    for (int i = 0; block && un->frozen && i < un->n_params; i++)
      un->nf4 |= fsdpc__nf4_kind(params[un->params[i]].kind);
  }
}

uint64_t fsdpc__nf4_unit_bytes(const fsdpc_unit *un, const fsdpc_param_info *params, int block,
                               int dq, int act_size) {
  uint64_t bytes = 0;
  for (int i = 0; i < un->n_params; i++) {
    const fsdpc_param_info *pi = &params[un->params[i]];
    bytes += fsdpc__nf4_kind(pi->kind) ? fsdpc__nf4_bytes(pi->numel, block, dq)
                                       : pi->numel * (uint64_t)act_size;
  }
  return bytes;
}

/* A projection's tensor inside the image at *at: its buffers point into
 * the image (scales copied out, since they may be unaligned). */
typedef struct view {
  uint64_t codes, absmax, qabsmax, absmax2, offset, end;
} view;

static view place(uint64_t at, uint64_t n, int block, int dq) {
  uint64_t nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  view v = {.codes = at};
  at += (n + 1) / 2;
  if (dq) {
    v.qabsmax = at;
    v.absmax2 = at + nb;
    v.offset = v.absmax2 + 4 * nb2;
    at = v.offset + 4;
  } else {
    v.absmax = at;
    at += 4 * nb;
  }
  v.end = at;
  return v;
}

static fsdpc_status pack_proj(const fsdpc_param_info *pi, int block, int dq, const float *x,
                              uint8_t *image, uint64_t at, fsdpc_err *err) {
  uint64_t n = pi->numel, nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  view v = place(at, n, block, dq);
  float *absmax = malloc(nb * sizeof(float) + 1), *absmax2 = dq ? malloc(nb2 * 4 + 1) : NULL;
  if (!absmax || (dq && !absmax2)) {
    free(absmax);
    free(absmax2);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory quantizing %s to nf4",
                       pi->name);
  }
  fsdpc_nf4 q = {.n = n,
                 .block_size = block,
                 .double_quant = dq,
                 .codes = image + v.codes,
                 .absmax = absmax,
                 .qabsmax = dq ? image + v.qabsmax : NULL,
                 .absmax2 = absmax2};
  fsdpc_status st = fsdpc__nf4_quantize(x, &q, pi->name, err);
  if (st == FSDPC_OK && dq) {
    memcpy(image + v.absmax2, absmax2, nb2 * 4);
    memcpy(image + v.offset, &q.offset, 4);
  } else if (st == FSDPC_OK) {
    memcpy(image + v.absmax, absmax, nb * 4);
  }
  free(absmax);
  free(absmax2);
  return st;
}

fsdpc_status fsdpc__nf4_unit_pack(const fsdpc_unit *un, const fsdpc_param_info *params,
                                  const uint64_t *param_offset, int block, int dq, int act_size,
                                  const float *full, uint8_t *image, uint64_t image_bytes,
                                  fsdpc_err *err) {
  memset(image, 0, image_bytes);
  uint64_t at = 0;
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    const fsdpc_param_info *pi = &params[p];
    const float *x = full + param_offset[p];
    if (fsdpc__nf4_kind(pi->kind)) {
      FSDPC_TRY(pack_proj(pi, block, dq, x, image, at, err));
      at += fsdpc__nf4_bytes(pi->numel, block, dq);
      continue;
    }
    for (uint64_t k = 0; k < pi->numel; k++, at += (uint64_t)act_size) {
      if (act_size == 4) {
        memcpy(image + at, &x[k], 4);
      } else {
        uint16_t h = fsdpc__f32_to_bf16(x[k]);
        memcpy(image + at, &h, 2);
      }
    }
  }
  return FSDPC_OK;
}

/* Dequantizes a projection from the image into out (act_size bytes an
 * element), in chunks through fp32. */
static fsdpc_status unpack_proj(const fsdpc_param_info *pi, int block, int dq, int act_size,
                                const float map[FSDPC_DYN_CODES], const uint8_t *image, uint64_t at,
                                char *out, fsdpc_err *err) {
  uint64_t n = pi->numel, nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  view v = place(at, n, block, dq);
  float *scales = malloc((dq ? nb2 : nb) * 4 + 1);
  if (!scales)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory dequantizing %s", pi->name);
  fsdpc_nf4 q = {.n = n,
                 .block_size = block,
                 .double_quant = dq,
                 .codes = (uint8_t *)image + v.codes,
                 .qabsmax = dq ? (uint8_t *)image + v.qabsmax : NULL};
  if (dq) {
    memcpy(scales, image + v.absmax2, nb2 * 4);
    memcpy(&q.offset, image + v.offset, 4);
    q.absmax2 = scales;
  } else {
    memcpy(scales, image + v.absmax, nb * 4);
    q.absmax = scales;
  }
  fsdpc_status st = FSDPC_OK;
  if (act_size == 4) {
    st = fsdpc__nf4_dequantize(&q, map, 0, n, (float *)out, err);
  } else {
    float chunk[4096];
    for (uint64_t k = 0; k < n && st == FSDPC_OK; k += 4096) {
      uint64_t c = n - k < 4096 ? n - k : 4096;
      st = fsdpc__nf4_dequantize(&q, map, k, c, chunk, err);
      if (st == FSDPC_OK)
        fsdpc__f32_to_bf16_n(chunk, (uint16_t *)out + k, c);
    }
  }
  free(scales);
  return st;
}

/* One projection dequantized on a device from the image there. */
static fsdpc_status unpack_proj_dev(const fsdpc_param_info *pi, int block, int dq,
                                    const fsdpc_ops *ops, const float map[FSDPC_DYN_CODES],
                                    const uint8_t *image, uint64_t at, char *out, void *stream,
                                    fsdpc_err *err) {
  view v = place(at, pi->numel, block, dq);
  return ops->nf4_dequant(ops->ctx, out, image + v.codes, dq ? image + v.qabsmax : NULL,
                          image + (dq ? v.absmax2 : v.absmax), dq ? image + v.offset : NULL,
                          pi->numel, block, dq, map, stream, err);
}

fsdpc_status fsdpc__nf4_unit_unpack_dev(const fsdpc_unit *un, const fsdpc_param_info *params,
                                        const uint64_t *param_offset, int block, int dq,
                                        int act_size, const fsdpc_ops *ops,
                                        const float map[FSDPC_DYN_CODES], const uint8_t *image,
                                        void *full, void *stream, fsdpc_err *err) {
  uint64_t at = 0;
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    const fsdpc_param_info *pi = &params[p];
    char *out = (char *)full + param_offset[p] * (uint64_t)act_size;
    uint64_t b = pi->numel * (uint64_t)act_size;
    if (fsdpc__nf4_kind(pi->kind)) {
      FSDPC_TRY(ops ? unpack_proj_dev(pi, block, dq, ops, map, image, at, out, stream, err)
                    : unpack_proj(pi, block, dq, act_size, map, image, at, out, err));
      at += fsdpc__nf4_bytes(pi->numel, block, dq);
    } else if (ops) {
      FSDPC_TRY(ops->copy_on(ops->ctx, out, image + at, b, stream, err));
      at += b;
    } else {
      memcpy(out, image + at, b);
      at += b;
    }
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__nf4_unit_unpack(const fsdpc_unit *un, const fsdpc_param_info *params,
                                    const uint64_t *param_offset, int block, int dq, int act_size,
                                    const float map[FSDPC_DYN_CODES], const uint8_t *image,
                                    void *full, fsdpc_err *err) {
  return fsdpc__nf4_unit_unpack_dev(un, params, param_offset, block, dq, act_size, NULL, map, image,
                                    full, NULL, err);
}

/* ---- packing on a device ---- */

static uint64_t round256(uint64_t b) {
  return (b + 255) / 256 * 256;
}

/* The scratch's three regions: fp32 values of the largest parameter; the
 * largest absmax (or a norm's bf16 copy); the largest absmax2. */
static uint64_t at_least(uint64_t have, uint64_t bytes) {
  bytes = round256(bytes);
  return have > bytes ? have : bytes;
}

static void scratch_sizes(const fsdpc_unit *un, const fsdpc_param_info *params, int block,
                          uint64_t r[3]) {
  r[0] = r[1] = r[2] = 256;
  for (int i = 0; i < un->n_params; i++) {
    const fsdpc_param_info *pi = &params[un->params[i]];
    uint64_t n = pi->numel;
    r[0] = at_least(r[0], 4 * n);
    r[1] = at_least(r[1], fsdpc__nf4_kind(pi->kind) ? 4 * fsdpc__nf4_blocks(n, block) : 2 * n);
    r[2] = at_least(r[2], 4 * fsdpc__nf4_blocks2(n, block));
  }
}

uint64_t fsdpc__nf4_pack_dev_scratch(const fsdpc_unit *un, const fsdpc_param_info *params,
                                     int block) {
  uint64_t r[3];
  scratch_sizes(un, params, block, r);
  return r[0] + r[1] + r[2];
}

/* One projection: x (device fp32) quantized into the image at `at`; the
 * fp32 scales made aligned in the scratch, then copied to their bytes. */
static fsdpc_status pack_proj_dev(const fsdpc_param_info *pi, int block, int dq,
                                  const fsdpc_ops *ops, const float map[FSDPC_DYN_CODES],
                                  const float *x, float *absmax, float *absmax2, uint8_t *image,
                                  uint64_t at, fsdpc_err *err) {
  uint64_t n = pi->numel, nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  view v = place(at, n, block, dq);
  float offset = 0.0f;
  FSDPC_TRY(ops->nf4_quant(ops->ctx, image + v.codes, absmax, dq ? image + v.qabsmax : NULL,
                           dq ? absmax2 : NULL, &offset, x, n, block, dq, map, NULL, err));
  if (!dq)
    return ops->copy_on(ops->ctx, image + v.absmax, absmax, nb * 4, NULL, err);
  FSDPC_TRY(ops->copy_on(ops->ctx, image + v.absmax2, absmax2, nb2 * 4, NULL, err));
  /* a plain upload: offset is a stack variable, not pinned */
  FSDPC_TRY(ops->sync(ops->ctx, err));
  return ops->upload(ops->ctx, image + v.offset, &offset, 4, err);
}

fsdpc_status fsdpc__nf4_unit_pack_dev(const fsdpc_unit *un, const fsdpc_param_info *params,
                                      int block, int dq, const fsdpc_ops *ops,
                                      const float map[FSDPC_DYN_CODES], fsdpc_nf4_make_fn make,
                                      void *arg, uint8_t *image, uint64_t image_bytes,
                                      void *scratch, fsdpc_err *err) {
  uint64_t r[3];
  scratch_sizes(un, params, block, r);
  float *x = scratch, *absmax = (float *)((char *)scratch + r[0]);
  float *absmax2 = (float *)((char *)scratch + r[0] + r[1]);
  FSDPC_TRY(ops->memset0(ops->ctx, image, image_bytes, err)); /* the padding */
  uint64_t at = 0;
  for (int i = 0; i < un->n_params; i++) {
    const fsdpc_param_info *pi = &params[un->params[i]];
    FSDPC_TRY(make(arg, un->params[i], x, err));
    if (fsdpc__nf4_kind(pi->kind)) {
      FSDPC_TRY(pack_proj_dev(pi, block, dq, ops, map, x, absmax, absmax2, image, at, err));
      at += fsdpc__nf4_bytes(pi->numel, block, dq);
      continue;
    }
    /* a norm in bf16, cast aligned, then copied to its bytes */
    FSDPC_TRY(ops->cast_params_on(ops->ctx, absmax, x, pi->numel, NULL, err));
    FSDPC_TRY(ops->copy_on(ops->ctx, image + at, absmax, pi->numel * 2, NULL, err));
    at += pi->numel * 2;
  }
  return ops->sync(ops->ctx, err);
}
