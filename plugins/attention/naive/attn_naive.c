/* Attention plugin "naive": the fp32 CPU reference of softmax(Q K^T * scale +
 * mask) V, and (attn_naive.cu, when built with CUDA) its bf16 GPU twin with
 * fp32 softmax, which shares the shape checks, masks and saved P layout.
 * It materialises the probabilities P (B, NH, T, T) in `saved` during
 * forward and runs backward from them, so it is simple to check and memory
 * hungry (T^2 per head): use it for tests and small runs.
 *
 * B = batch, T = sequence, NH = query heads, KVH = kv heads (GQA: query head
 * h reads kv head h / (NH / KVH)), HD = head dim.
 * Layouts (row-major): q, out, dq, dout (B, T, NH, HD); k, v, dk, dv
 * (B, T, KVH, HD); P (B, NH, T, T). Masks: causal (key j <= query i), a
 * sliding window when shape->window > 0 (i - j < window) and, when doc_ids
 * is given, same document (doc_ids[b][j] == doc_ids[b][i]). With
 * shape->softcap > 0 each score s becomes softcap * tanh(s /
 * softcap) before the mask and softmax, and dS_ij below is multiplied by
 * 1 - tanh^2(s_ij / softcap).
 * A query always sees itself, so no row of P is empty.
 * Gradients dq, dk, dv are written (=).
 *
 * Backward, with s_ij = scale * q_i . k_j and P = softmax_j(s):
 *   dV_j  = sum_i P_ij dO_i
 *   dP_ij = dO_i . V_j
 *   dS_ij = P_ij (dP_ij - D_i),  D_i = sum_j P_ij dP_ij  (= dO_i . O_i)
 *   dQ_i  = scale * sum_j dS_ij K_j
 *   dK_j  = scale * sum_i dS_ij Q_i
 * and dK, dV of a kv head sum over the NH / KVH query heads that share it.
 * D_i is taken from P and dP rather than from `out`, so the gradient is that
 * of exactly the P that was saved. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "../../common/host_call.h"
#include "attn_naive_cuda.h"
#include "fsdpc/plugin.h"

/* ---- shape checks ---- */

/* INVALID_USAGE for a malformed shape, UNSUPPORTED for a device or dtype
 * this plugin does not run, OK otherwise. No per-device context: the host
 * of each call comes in the shape (ABI 1.1). */
static int32_t check_shape(const fsdpc_attn_shape *s, int sizing) {
  if (s == NULL || !FSDPC_HAS_FIELD(s, fsdpc_attn_shape, device))
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: shape is NULL or too short (struct_size)");
#ifdef FSDPC_WITH_CUDA
  if (s->device == FSDPC_DEVICE_CUDA) {
    if (s->dtype != FSDPC_DTYPE_BF16)
      return fsdpc_pl_fail(
          fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
          "attention naive: dtype %d is not supported on CUDA; only bf16 (dtype 1)", (int)s->dtype);
    if (s->HD > ATTN_NAIVE_CUDA_MAX_HD)
      return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
                           "attention naive: head dim %d > %d is not supported on CUDA", (int)s->HD,
                           ATTN_NAIVE_CUDA_MAX_HD);
    if (s->T > 65535 * 32 || s->NH > 65535 || s->B > 65535)
      return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
                           "attention naive: B=%d NH=%d T=%d too large for the grid", (int)s->B,
                           (int)s->NH, (int)s->T);
  } else
#endif
      if (s->device != FSDPC_DEVICE_CPU) {
    /* Built without CUDA: sizes() still answers for a CUDA shape (a plan for a
     * GPU made on a machine without nvcc); nothing runs it. */
    if (!sizing || s->device != FSDPC_DEVICE_CUDA)
      return fsdpc_pl_fail(
          fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
          "attention naive: CUDA device is not supported by this build (nvcc was not found "
          "at build time); use a CUDA attention plugin (e.g. flash) or run on the CPU");
  } else if (s->dtype != FSDPC_DTYPE_F32)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_UNSUPPORTED,
        "attention naive: dtype %d is not supported on the CPU; only fp32 (dtype 0)",
        (int)s->dtype);
  if (s->B < 1 || s->T < 1 || s->NH < 1 || s->KVH < 1 || s->HD < 1)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: B=%d T=%d NH=%d KVH=%d HD=%d; all must be >= 1",
                         (int)s->B, (int)s->T, (int)s->NH, (int)s->KVH, (int)s->HD);
  if (s->NH % s->KVH != 0)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: num_heads %d is not a multiple of num_kv_heads %d",
                         (int)s->NH, (int)s->KVH);
  if (!(s->scale > 0.0f) || !isfinite(s->scale))
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: scale %g must be finite and > 0", (double)s->scale);
  return FSDPC_OK;
}

/* The team size: the host's num_threads (1.1), else OpenMP's default. */
static int team_of(const fsdpc_attn_shape *s) {
  if (FSDPC_HAS_FIELD(s, fsdpc_attn_shape, num_threads) && s->num_threads > 0)
    return s->num_threads;
  return omp_get_max_threads();
}

static const int32_t *doc_ids_of(const fsdpc_attn_shape *s) {
  return FSDPC_HAS_FIELD(s, fsdpc_attn_shape, doc_ids) ? s->doc_ids : NULL;
}

static float softcap_of(const fsdpc_attn_shape *s) {
  return FSDPC_HAS_FIELD(s, fsdpc_attn_shape, softcap) && s->softcap > 0.0f ? s->softcap : 0.0f;
}

static int window_of(const fsdpc_attn_shape *s) {
  return FSDPC_HAS_FIELD(s, fsdpc_attn_shape, window) && s->window > 0 ? s->window : 0;
}

/* Whether query i may attend to key j. doc is doc_ids + b*T, or NULL;
 * window 0 = none. */
static inline int allowed(int causal, int window, const int32_t *doc, int i, int j) {
  return (!causal || j <= i) && (window == 0 || i - j < window) &&
         (doc == NULL || doc[i] == doc[j]);
}

static float dot(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int d = 0; d < n; d++)
    s += a[d] * b[d];
  return s;
}

/* ---- vtable ---- */

static int32_t naive_supports(const fsdpc_attn_shape *shape) {
  int32_t st = check_shape(shape, 0);
  return st == FSDPC_OK ? FSDPC_OK : FSDPC_UNSUPPORTED;
}

static int32_t naive_sizes(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, fsdpc_attn_sizes *out) {
  int32_t st = check_shape(s, 1);
  if (st != FSDPC_OK)
    return st;
  if (out == NULL)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: sizes() out is NULL");
  uint64_t B = (uint64_t)s->B, T = (uint64_t)s->T;
  if (FSDPC_HAS_FIELD(out, fsdpc_attn_sizes, saved_bytes))
    out->saved_bytes = B * (uint64_t)s->NH * T * T * sizeof(float);
  if (FSDPC_HAS_FIELD(out, fsdpc_attn_sizes, fwd_workspace))
    out->fwd_workspace = 0;
  /* CPU: one row of dP per (b, kv head) task; CUDA: the whole dS, like P. */
  if (FSDPC_HAS_FIELD(out, fsdpc_attn_sizes, bwd_workspace))
    out->bwd_workspace = s->device == FSDPC_DEVICE_CUDA
                             ? B * (uint64_t)s->NH * T * T * sizeof(float)
                             : B * (uint64_t)s->KVH * T * sizeof(float);
  return FSDPC_OK;
}

static int32_t naive_forward(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, const void *q_,
                             const void *k_, const void *v_, void *out_, void *saved_,
                             void *workspace, void *stream) {
  int32_t st = check_shape(s, 0);
  if (st != FSDPC_OK)
    return st;
  if (q_ == NULL || k_ == NULL || v_ == NULL || out_ == NULL || saved_ == NULL)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: forward got a NULL q, k, v, out or saved");
#ifdef FSDPC_WITH_CUDA
  if (s->device == FSDPC_DEVICE_CUDA) {
    char msg[256];
    st = attn_naive_cuda_forward(s, q_, k_, v_, out_, saved_, stream, msg, sizeof msg);
    return st == FSDPC_OK ? st : fsdpc_pl_fail(fsdpc_pl_shape_host(s), st, "%s", msg);
  }
#endif
  const float *q = q_;   // (B, T, NH, HD)
  const float *k = k_;   // (B, T, KVH, HD)
  const float *v = v_;   // (B, T, KVH, HD)
  float *out = out_;     // (B, T, NH, HD)
  float *saved = saved_; // (B, NH, T, T)
  const int B = s->B, T = s->T, NH = s->NH, KVH = s->KVH, HD = s->HD, causal = s->causal;
  const int rep = NH / KVH;
  const float scale = s->scale;
  const int32_t *doc_ids = doc_ids_of(s); // (B, T) or NULL
  const int window = window_of(s);
  const float cap = softcap_of(s);

#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(team_of(s))
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const int g = h / rep;
      const int32_t *doc = doc_ids ? doc_ids + (size_t)b * T : NULL;
      float *P = saved + ((size_t)b * NH + h) * T * T; // (T, T)
      for (int i = 0; i < T; i++) {
        const float *qi = q + (((size_t)b * T + i) * NH + h) * HD;
        float *prow = P + (size_t)i * T;
        float mx = -INFINITY;
        for (int j = 0; j < T; j++) {
          if (!allowed(causal, window, doc, i, j))
            continue;
          const float *kj = k + (((size_t)b * T + j) * KVH + g) * HD;
          prow[j] = scale * dot(qi, kj, HD);
          if (cap > 0.0f) /* as transformers: divide, tanh, multiply */
            prow[j] = tanhf(prow[j] / cap) * cap;
          mx = prow[j] > mx ? prow[j] : mx;
        }
        double sum = 0.0;
        for (int j = 0; j < T; j++) {
          if (!allowed(causal, window, doc, i, j)) {
            prow[j] = 0.0f;
            continue;
          }
          prow[j] = expf(prow[j] - mx);
          sum += prow[j];
        }
        const float inv = (float)(1.0 / sum);
        float *oi = out + (((size_t)b * T + i) * NH + h) * HD;
        for (int d = 0; d < HD; d++)
          oi[d] = 0.0f;
        for (int j = 0; j < T; j++) {
          prow[j] *= inv;
          if (prow[j] == 0.0f)
            continue;
          const float *vj = v + (((size_t)b * T + j) * KVH + g) * HD;
          for (int d = 0; d < HD; d++)
            oi[d] += prow[j] * vj[d];
        }
      }
    }
  }
  return FSDPC_OK;
}

static int32_t naive_backward(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, const void *q_,
                              const void *k_, const void *v_, const void *out_, const void *dout_,
                              const void *saved_, void *dq_, void *dk_, void *dv_, void *workspace,
                              void *stream) {
  int32_t st = check_shape(s, 0);
  if (st != FSDPC_OK)
    return st;
  if (q_ == NULL || k_ == NULL || v_ == NULL || dout_ == NULL || saved_ == NULL || dq_ == NULL ||
      dk_ == NULL || dv_ == NULL)
    return fsdpc_pl_fail(fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
                         "attention naive: backward got a NULL q, k, v, dout, saved, dq, dk or dv");
  if (workspace == NULL)
    return fsdpc_pl_fail(
        fsdpc_pl_shape_host(s), FSDPC_INVALID_USAGE,
        "attention naive: backward needs a workspace of sizes().bwd_workspace bytes");
#ifdef FSDPC_WITH_CUDA
  if (s->device == FSDPC_DEVICE_CUDA) {
    char msg[256];
    st = attn_naive_cuda_backward(s, q_, k_, v_, dout_, saved_, dq_, dk_, dv_, workspace, stream,
                                  msg, sizeof msg);
    return st == FSDPC_OK ? st : fsdpc_pl_fail(fsdpc_pl_shape_host(s), st, "%s", msg);
  }
#endif
  const float *q = q_;         // (B, T, NH, HD)
  const float *k = k_;         // (B, T, KVH, HD)
  const float *v = v_;         // (B, T, KVH, HD)
  const float *dout = dout_;   // (B, T, NH, HD)
  const float *saved = saved_; // (B, NH, T, T)
  float *dq = dq_;             // (B, T, NH, HD)
  float *dk = dk_;             // (B, T, KVH, HD)
  float *dv = dv_;             // (B, T, KVH, HD)
  float *ws = workspace;       // (B, KVH, T)
  const int B = s->B, T = s->T, NH = s->NH, KVH = s->KVH, HD = s->HD, causal = s->causal;
  const int rep = NH / KVH;
  const float scale = s->scale;
  const int32_t *doc_ids = doc_ids_of(s);
  const int window = window_of(s);
  const float cap = softcap_of(s);

  /* One task per (b, kv head): it owns dk, dv of that head and dq of the
   * query heads that read it, so no two threads write the same element. */
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(team_of(s))
  for (int b = 0; b < B; b++) {
    for (int g = 0; g < KVH; g++) {
      const int32_t *doc = doc_ids ? doc_ids + (size_t)b * T : NULL;
      float *dp = ws + ((size_t)b * KVH + g) * T; // (T) one row of dP
      for (int j = 0; j < T; j++) {
        size_t o = (((size_t)b * T + j) * KVH + g) * HD;
        memset(dk + o, 0, (size_t)HD * sizeof(float));
        memset(dv + o, 0, (size_t)HD * sizeof(float));
      }
      for (int h = g * rep; h < (g + 1) * rep; h++) {
        const float *P = saved + ((size_t)b * NH + h) * T * T; // (T, T)
        for (int i = 0; i < T; i++) {
          size_t qo = (((size_t)b * T + i) * NH + h) * HD;
          const float *qi = q + qo, *doi = dout + qo;
          float *dqi = dq + qo;
          const float *prow = P + (size_t)i * T;
          double D = 0.0;
          for (int j = 0; j < T; j++) {
            if (!allowed(causal, window, doc, i, j))
              continue;
            const float *vj = v + (((size_t)b * T + j) * KVH + g) * HD;
            dp[j] = dot(doi, vj, HD);
            D += (double)prow[j] * dp[j];
          }
          for (int d = 0; d < HD; d++)
            dqi[d] = 0.0f;
          for (int j = 0; j < T; j++) {
            if (!allowed(causal, window, doc, i, j))
              continue;
            size_t ko = (((size_t)b * T + j) * KVH + g) * HD;
            const float *kj = k + ko;
            float *dkj = dk + ko, *dvj = dv + ko;
            const float pij = prow[j];
            float ds = scale * (float)(pij * (dp[j] - D));
            if (cap > 0.0f) { /* through the cap: d(c tanh(s / c))/ds = 1 - tanh^2 */
              float t = tanhf(scale * dot(qi, kj, HD) / cap);
              ds *= 1.0f - t * t;
            }
            for (int d = 0; d < HD; d++) {
              dqi[d] += ds * kj[d];
              dkj[d] += ds * qi[d];
              dvj[d] += pij * doi[d];
            }
          }
        }
      }
    }
  }
  return FSDPC_OK;
}

/* ---- descriptors ---- */

static const fsdpc_attention_v1 naive_vtable = {
    /* .struct_size = */ sizeof(fsdpc_attention_v1),
    /* .supports    = */ naive_supports,
    /* .create      = */ NULL, /* no per-device state on the CPU */
    /* .destroy     = */ NULL,
    /* .sizes       = */ naive_sizes,
    /* .forward     = */ naive_forward,
    /* .backward    = */ naive_backward,
    /* .create_call = */ NULL,
    /* .features    = */ FSDPC_ATTN_FEATURE_WINDOW | FSDPC_ATTN_FEATURE_SOFTCAP,
};

static const fsdpc_component_desc naive_component = {
    /* .struct_size    = */ sizeof(fsdpc_component_desc),
    /* .kind           = */ FSDPC_KIND_ATTENTION,
    /* .name           = */ "naive",
    /* .version        = */ "1.0.0",
    /* .iface_version  = */ 1,
    /* .default_score  = */ 10,
    /* .description    = */ "reference attention that materialises the T x T probabilities",
    /* .capabilities   = */
    "cpu fp32; causal; GQA; doc masking; sliding window; logit soft-capping; any head dim"
#ifdef FSDPC_WITH_CUDA
    "; cuda bf16 (fp32 softmax, head dim <= 512; the same masks and soft-capping)"
#endif
    ,
    /* .options        = */ NULL,
    /* .n_options      = */ 0,
    /* .vtable         = */ &naive_vtable,
};

static const fsdpc_component_desc *const naive_components[] = {&naive_component};

static const fsdpc_plugin_desc naive_plugin = {
    /* .struct_size   = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major     = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor     = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name          = */ "attention-naive",
    /* .components    = */ naive_components,
    /* .n_components  = */ 1,
};

FSDPC_PLUGIN_DEFINE(naive_plugin, 1)
