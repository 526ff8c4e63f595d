/* Attention plugin "flash": exact causal attention on Hopper GPUs with
 * tiling and an online softmax (flash_fwd_sm90.cu, flash_bwd_sm90.cu: wgmma
 * + TMA; flash_fwd.cu, flash_bwd.cu: mma.sync, for other devices). No T x T matrix
 * is ever stored: forward keeps only the log-sum-exp of each query row for
 * the backward, which recomputes the probabilities tile by tile.
 *
 * B = batch, T = sequence, NH = query heads, KVH = kv heads (GQA: query head
 * h reads kv head h / (NH / KVH), never a repeated copy), HD = head dim.
 * Layouts (row-major, device memory, bf16): q, out, dq, dout (B, T, NH, HD);
 * k, v, dk, dv (B, T, KVH, HD). saved: lse (B, NH, T) fp32. Masks: causal
 * (key j <= query i) when shape->causal, same document when doc_ids
 * (B, T) int32 is given, and a sliding window (shape->window). With
 * shape->softcap > 0 each scaled score s becomes softcap * tanh(s /
 * softcap) first (Gemma 2), for head dims 64, 128 and 256. Gradients dq,
 * dk, dv are written (=).
 *
 * This file is the plugin's C face: shape checks, sizes and the descriptor.
 * Built without CUDA it loads, supports nothing and runs nothing, but
 * sizes() still answers (a plan for a GPU made on a machine without one). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"

#include "flash.h"

/* INVALID_USAGE for a malformed shape, UNSUPPORTED for a device, dtype or
 * head dim this plugin does not run, OK otherwise. CHECK_DEVICE also asks
 * the CUDA runtime whether the current GPU is a Hopper (sm_90). No
 * per-device context: the host of each call comes in the shape (ABI 1.1).
 * Built without CUDA, every mode but CHECK_SIZES refuses: sizes() still
 * answers, so that a machine without nvcc can plan a GPU run. */
enum { CHECK_SHAPE, CHECK_DEVICE, CHECK_SIZES };
static int32_t check_shape(const fsdpc_attn_shape *s, int mode) {
  if (s == NULL || !FSDPC_HAS_FIELD(s, fsdpc_attn_shape, device))
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: shape is NULL or too short (struct_size)");
#ifndef FSDPC_WITH_CUDA
  if (mode != CHECK_SIZES)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
        "attention flash: built without CUDA; rebuild with a CUDA compiler or use naive");
#endif
  if (s->device != FSDPC_DEVICE_CUDA)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
                         "attention flash: runs on CUDA only; use naive on the CPU");
  if (s->dtype != FSDPC_DTYPE_BF16)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
        "attention flash: dtype %d is not supported; only bf16 (dtype 1) in and out",
        (int)s->dtype);
  if (s->HD != 64 && s->HD != 80 && s->HD != 96 && s->HD != 128 && s->HD != 256)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
        "attention flash: head dim %d is not supported; only 64, 80, 96, 128 and 256 (use "
        "naive)",
        (int)s->HD);
  /* The capped kernels are the mma.sync ones, which have no 80 / 96 tiles. */
  if (FSDPC_HAS_FIELD(s, fsdpc_attn_shape, softcap) && s->softcap > 0.0f && s->HD != 64 &&
      s->HD != 128 && s->HD != 256)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
                         "attention flash: logit soft-capping with head dim %d is not supported; "
                         "only with 64, 128 and 256 (use naive)",
                         (int)s->HD);
  if (FSDPC_HAS_FIELD(s, fsdpc_attn_shape, softcap) &&
      !(s->softcap >= 0.0f && isfinite(s->softcap)))
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: softcap %g must be finite and >= 0 (0 = none)",
                         (double)s->softcap);
  if (s->B < 1 || s->T < 1 || s->NH < 1 || s->KVH < 1)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: B=%d T=%d NH=%d KVH=%d; all must be >= 1", (int)s->B,
                         (int)s->T, (int)s->NH, (int)s->KVH);
  if (s->NH % s->KVH != 0)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: num_heads %d is not a multiple of num_kv_heads %d",
                         (int)s->NH, (int)s->KVH);
  if ((int64_t)s->B * s->T * s->NH >= ((int64_t)1 << 31) / 2)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
                         "attention flash: B*T*NH = %lld rows is too many (< 2^30)",
                         (long long)s->B * s->T * s->NH);
  if (!(s->scale > 0.0f) || !isfinite(s->scale))
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: scale %g must be finite and > 0", (double)s->scale);
#ifdef FSDPC_WITH_CUDA
  if (mode == CHECK_DEVICE) {
    int major = 0, minor = 0;
    int rc = flash_device_check(&major, &minor);
    if (rc > 0)
      return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
                           "attention flash: no usable CUDA device (%s)", flash_error_string(rc));
    if (rc < 0)
      return fsdpc_pl_fail(
          fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
          "attention flash: the GPU is compute capability %d.%d; the kernels are built "
          "for Hopper (9.0) only",
          major, minor);
  }
#endif
  return FSDPC_OK;
}

/* ---- vtable ---- */

static int32_t flash_supports(const fsdpc_attn_shape *shape) {
  int32_t st = check_shape(shape, CHECK_DEVICE);
  return st == FSDPC_OK ? FSDPC_OK : FSDPC_UNSUPPORTED;
}

static int32_t flash_sizes(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, fsdpc_attn_sizes *out) {
  int32_t st = check_shape(s, CHECK_SIZES);
  if (st != FSDPC_OK)
    return st;
  if (out == NULL)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: sizes() out is NULL");
  flash_params p = {s->B, s->T, s->NH, s->KVH, s->HD, s->causal, s->scale, NULL, 0, 0.0f};
  /* Everything is linear in T: the LSE, and dq in fp32 plus one float per
   * row during backward. */
  if (FSDPC_HAS_FIELD(out, fsdpc_attn_sizes, saved_bytes))
    out->saved_bytes = (uint64_t)s->B * s->NH * s->T * sizeof(float);
  if (FSDPC_HAS_FIELD(out, fsdpc_attn_sizes, fwd_workspace))
    out->fwd_workspace = 0;
  if (FSDPC_HAS_FIELD(out, fsdpc_attn_sizes, bwd_workspace))
#ifdef FSDPC_WITH_CUDA
    out->bwd_workspace = flash_bwd_workspace_bytes(&p);
#else
    out->bwd_workspace = flash_bwd_workspace_for(&p);
#endif
  return FSDPC_OK;
}

#ifdef FSDPC_WITH_CUDA
static int aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

static flash_params params_of(const fsdpc_attn_shape *s) {
  const int32_t *doc = FSDPC_HAS_FIELD(s, fsdpc_attn_shape, doc_ids) ? s->doc_ids : NULL;
  const int window = FSDPC_HAS_FIELD(s, fsdpc_attn_shape, window) && s->window > 0 ? s->window : 0;
  const float cap = FSDPC_HAS_FIELD(s, fsdpc_attn_shape, softcap) ? s->softcap : 0.0f;
  flash_params p = {s->B, s->T, s->NH, s->KVH, s->HD, s->causal != 0, s->scale, doc, window, cap};
  return p;
}
#endif

static int32_t flash_forward(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, const void *q,
                             const void *k, const void *v, void *out, void *saved, void *workspace,
                             void *stream) {
  int32_t st = check_shape(s, CHECK_SHAPE);
  if (st != FSDPC_OK)
    return st;
#ifdef FSDPC_WITH_CUDA
  if (q == NULL || k == NULL || v == NULL || out == NULL || saved == NULL)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: forward got a NULL q, k, v, out or saved");
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(out) || !aligned16(saved))
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention flash: q, k, v, out and saved must be 16-byte aligned");
  flash_params p = params_of(s);
  int rc = flash_fwd(&p, q, k, v, out, (float *)saved, stream);
  if (rc != 0)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_SYSTEM_ERROR,
                         "attention flash: forward launch failed: %s", flash_error_string(rc));
#endif
  return FSDPC_OK;
}

static int32_t flash_backward(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, const void *q,
                              const void *k, const void *v, const void *out, const void *dout,
                              const void *saved, void *dq, void *dk, void *dv, void *workspace,
                              void *stream) {
  int32_t st = check_shape(s, CHECK_SHAPE);
  if (st != FSDPC_OK)
    return st;
#ifdef FSDPC_WITH_CUDA
  if (q == NULL || k == NULL || v == NULL || out == NULL || dout == NULL || saved == NULL ||
      dq == NULL || dk == NULL || dv == NULL)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
        "attention flash: backward got a NULL q, k, v, out, dout, saved, dq, dk or dv");
  if (workspace == NULL)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
        "attention flash: backward needs a workspace of sizes().bwd_workspace bytes");
  const void *ptrs[] = {q, k, v, out, dout, saved, dq, dk, dv, workspace};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
    if (!aligned16(ptrs[i]))
      return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                           "attention flash: backward buffers must be 16-byte aligned");
  flash_params p = params_of(s);
  int rc = flash_bwd(&p, q, k, v, out, dout, (const float *)saved, dq, dk, dv, workspace, stream);
  if (rc != 0)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_SYSTEM_ERROR,
                         "attention flash: backward launch failed: %s", flash_error_string(rc));
#endif
  return FSDPC_OK;
}

/* ---- descriptors ---- */

static const fsdpc_attention_v1 flash_vtable = {
    /* .struct_size = */ sizeof(fsdpc_attention_v1),
    /* .supports    = */ flash_supports,
    /* .create      = */ NULL, /* stateless: the stream comes with each call */
    /* .destroy     = */ NULL,
    /* .sizes       = */ flash_sizes,
    /* .forward     = */ flash_forward,
    /* .backward    = */ flash_backward,
    /* .create_call = */ NULL,
    /* .features    = */ FSDPC_ATTN_FEATURE_WINDOW | FSDPC_ATTN_FEATURE_SOFTCAP,
};

static const fsdpc_component_desc flash_component = {
    /* .struct_size    = */ sizeof(fsdpc_component_desc),
    /* .kind           = */ FSDPC_KIND_ATTENTION,
    /* .name           = */ "flash",
    /* .version        = */ "1.0.0",
    /* .iface_version  = */ 1,
    /* .default_score  = */ 50,
    /* .description    = */
    "tiled exact attention with online softmax (wgmma + TMA on "
    "Hopper, mma.sync elsewhere), O(T) memory",
#ifdef FSDPC_WITH_CUDA
    /* .capabilities   = */
    "cuda sm_90 (Hopper); bf16 in/out, fp32 accumulation; head dims 64 "
    "and 128 (80 and 96 through the 128 kernels) and 256 (mma.sync kernels); any T >= 1; causal "
    "or full; GQA (NH % KVH == 0); document masking; sliding window; logit soft-capping (head "
    "dims 64, 128, 256; mma.sync kernels); saved = LSE (B, NH, T) fp32",
#else
    /* .capabilities   = */ "built without CUDA: supports nothing",
#endif
    /* .options        = */ NULL,
    /* .n_options      = */ 0,
    /* .vtable         = */ &flash_vtable,
};

static const fsdpc_component_desc *const flash_components[] = {&flash_component};

static const fsdpc_plugin_desc flash_plugin = {
    /* .struct_size   = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major     = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor     = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name          = */ "attention-flash",
    /* .components    = */ flash_components,
    /* .n_components  = */ 1,
};

FSDPC_PLUGIN_DEFINE(flash_plugin, 1)
