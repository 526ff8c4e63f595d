/* AdamW optimizer plugin (fsdpc_optim_v1): CPU path here, CUDA path in adamw.cu.
 *
 * Semantics are torch.optim.AdamW (amsgrad=False, maximize=False), step by
 * step as its single-tensor ("for-loop") path computes them, in fp32 with the
 * per-step scalars computed in double and then rounded to float, as PyTorch
 * does when it passes Python floats to fp32 tensor ops. Per element, with
 * t = info->step (1-based) and lr = info->lr:
 *
 *   g  = grad * grad_scale                      (clip coefficient first)
 *   p  = p * (1 - lr*wd)                        (only when tensor.decay)
 *   m  = lerp(m, g, 1 - b1)                     (= b1*m + (1-b1)*g)
 *   v  = v*b2 + ((1 - b2)*g)*g
 *   denom = sqrt(v) / sqrt(1 - b2^t) + eps
 *   p  = p + (-(lr / (1 - b1^t)) * m) / denom
 *
 * lerp follows torch.lerp: a + w*(b-a) when |w| < 0.5, else b - (b-a)*(1-w).
 * State: two fp32 slots, "exp_avg" (m) and "exp_avg_sq" (v), both zero at
 * the start, element-aligned with the parameter shard.
 *
 * Threads: one OpenMP region per step over the concatenated elements of all
 * tensors, split into contiguous ranges; every element is independent, so
 * the result does not depend on the thread count. The tensors of one call
 * must not overlap.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../common/optim_parallel.h"
#include "../common/optim_plugin.h"
#include "adamw_cuda.h"
#include "fsdpc/plugin.h"

#define ADAMW_N_SLOTS 2u
/* Below this many elements per step one thread is faster than a team. */
#define ADAMW_MIN_PARALLEL 32768u
/* Thread ranges start on multiples of this (a 256-byte boundary). */
#define ADAMW_GRAIN 64u

struct fsdpc_optimizer {
  double weight_decay, beta1, beta2, eps;
  int32_t device;
  const fsdpc_host_api *host; /* of the host that created it (ABI 1.1) */
};

/* ---------------------------------------------------------------------- */
/* The kernel.                                                              */

/* One copy per vector width (AVX-512, AVX2, the x86-64 baseline's SSE2),
 * picked at load time for the CPU it runs on. Every operation is an IEEE
 * add, multiply, divide or square root in the same order, and the plugin is
 * built with -ffp-contract=off (no fused multiply-add), so every copy gives
 * the same bits as the scalar loop: tests/optim checks it element by element
 * against a scalar reference. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define ADAMW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ADAMW_CLONES
#endif

ADAMW_CLONES
static void adamw_kernel(float *restrict p,       // (n)
                         const float *restrict g, // (n)
                         float *restrict m,       // (n) exp_avg
                         float *restrict v,       // (n) exp_avg_sq
                         uint64_t n, const adamw_scalars *sc, int decay) {
  const float gs = sc->grad_scale, df = decay ? sc->decay_factor : 1.0f;
  const float w1 = sc->w1, b2 = sc->beta2, w2 = sc->w2;
  const float bc2_sqrt = sc->bc2_sqrt, eps = sc->eps, nss = sc->neg_step_size;
  /* torch.lerp picks its formula by the weight, once per step. Multiplying
   * by df = 1 when decay is off is exact, so one loop serves both cases. */
  if (w1 < 0.5f) {
    for (uint64_t i = 0; i < n; i++) {
      const float gi = g[i] * gs;
      const float mi = m[i] + w1 * (gi - m[i]);
      const float vi = v[i] * b2 + (w2 * gi) * gi;
      const float denom = sqrtf(vi) / bc2_sqrt + eps;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * df + (nss * mi) / denom;
    }
  } else {
    const float w1c = 1.0f - w1;
    for (uint64_t i = 0; i < n; i++) {
      const float gi = g[i] * gs;
      const float mi = gi - (gi - m[i]) * w1c;
      const float vi = v[i] * b2 + (w2 * gi) * gi;
      const float denom = sqrtf(vi) / bc2_sqrt + eps;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * df + (nss * mi) / denom;
    }
  }
}

/* Runs the kernel over elements [lo, hi) of the concatenation of tensors. */
static void adamw_range(const fsdpc_optim_tensor *t, uint32_t n_tensors, uint64_t lo, uint64_t hi,
                        const adamw_scalars *sc) {
  uint64_t base = 0;
  for (uint32_t k = 0; k < n_tensors && base < hi; k++) {
    const uint64_t end = base + t[k].numel;
    const uint64_t a = lo > base ? lo : base, b = hi < end ? hi : end;
    if (a < b) {
      const uint64_t off = a - base;
      float *m = t[k].state + off, *v = t[k].state + t[k].stride + off;
      adamw_kernel(t[k].param + off, t[k].grad + off, m, v, b - a, sc, t[k].decay);
    }
    base = end;
  }
}

/* ---------------------------------------------------------------------- */
/* Validation.                                                              */

static int32_t check_tensors(const fsdpc_host_api *h, const fsdpc_optim_tensor *t, uint32_t n,
                             uint64_t *total) {
  int32_t st = fsdpc_optim_check_list("adamw", h, t, n);
  if (st != FSDPC_OK)
    return st;
  *total = 0;
  for (uint32_t k = 0; k < n; k++) {
    if ((st = fsdpc_optim_check_tensor_v1("adamw", h, &t[k], k)) != FSDPC_OK)
      return st;
    if (t[k].numel == 0)
      continue;
    if (!t[k].param || !t[k].grad || !t[k].state)
      return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                           "adamw: tensor %u (numel %llu) has a NULL param, grad or state pointer",
                           k, (unsigned long long)t[k].numel);
    if ((st = fsdpc_optim_check_stride("adamw", h, &t[k], k)) != FSDPC_OK)
      return st;
    *total += t[k].numel;
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* The vtable.                                                              */

static int32_t adamw_supports(const fsdpc_situation *s) {
  return fsdpc_optim_supports("adamw", s);
}

static int32_t adamw_create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  const fsdpc_host_api *h = fsdpc_pl_optim_host(init);
  int32_t st = fsdpc_optim_check_create("adamw", h, init, out);
  if (st == FSDPC_OK)
    st = fsdpc_optim_check_adam("adamw", h, init);
  if (st != FSDPC_OK)
    return st;
  fsdpc_optimizer *opt = calloc(1, sizeof *opt);
  if (opt == NULL)
    return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, "adamw: out of host memory creating the optimizer");
  opt->weight_decay = init->weight_decay;
  opt->beta1 = init->beta1;
  opt->beta2 = init->beta2;
  opt->eps = init->eps;
  opt->device = init->device;
  opt->host = h;
  *out = opt;
  return FSDPC_OK;
}

static void adamw_destroy(fsdpc_optimizer *opt) {
  free(opt);
}

static uint32_t adamw_n_slots(const fsdpc_optimizer *opt) {
  return ADAMW_N_SLOTS;
}

static const char *adamw_slot_name(const fsdpc_optimizer *opt, uint32_t i) {
  static const char *const names[ADAMW_N_SLOTS] = {"exp_avg", "exp_avg_sq"};
  return i < ADAMW_N_SLOTS ? names[i] : NULL;
}

static int32_t adamw_init_state(fsdpc_optimizer *opt, float *state, uint64_t n_floats,
                                int32_t device, void *stream) {
  const fsdpc_host_api *h = opt ? opt->host : NULL;
  if (!fsdpc_optim_device_ok(device))
    return fsdpc_pl_fail(h, FSDPC_UNSUPPORTED,
                         "adamw: init_state on device %d: only CPU state is supported",
                         (int)device);
  return fsdpc_optim_zero_state("adamw", h, state, n_floats, device, stream,
                                FSDPC_OPTIM_CUDA(adamw_cuda_zero));
}

static int32_t adamw_step(fsdpc_optimizer *opt, const fsdpc_optim_tensor *tensors,
                          uint32_t n_tensors, const fsdpc_optim_step_info *info) {
  if (opt == NULL)
    return FSDPC_INVALID_USAGE; /* no optimizer, no host to tell */
  const fsdpc_host_api *h = opt->host;
  uint64_t total = 0;
  int32_t st = fsdpc_optim_check_step("adamw", h, info);
  if (st == FSDPC_OK)
    st = check_tensors(h, tensors, n_tensors, &total);
  if (st != FSDPC_OK || total == 0)
    return st;

  /* Scalars as PyTorch forms them: Python floats (double), rounded to fp32
   * where they meet the fp32 tensors. */
  const double t = (double)info->step, lr = info->lr;
  const double bc1 = 1.0 - pow(opt->beta1, t), bc2 = 1.0 - pow(opt->beta2, t);
  const adamw_scalars sc = {
      .grad_scale = (float)info->grad_scale,
      .decay_factor = (float)(1.0 - lr * opt->weight_decay),
      .w1 = (float)(1.0 - opt->beta1),
      .beta2 = (float)opt->beta2,
      .w2 = (float)(1.0 - opt->beta2),
      .bc2_sqrt = (float)sqrt(bc2),
      .eps = (float)opt->eps,
      .neg_step_size = (float)(-(lr / bc1)),
  };

#ifdef FSDPC_WITH_CUDA
  if (opt->device == FSDPC_DEVICE_CUDA) {
    char msg[256];
    st = adamw_cuda_step(tensors, n_tensors, &sc, fsdpc_optim_stream(info), msg, sizeof msg);
    return fsdpc_optim_relay(h, st, msg);
  }
#endif
  int nt = fsdpc_optim_threads(info, total, ADAMW_MIN_PARALLEL);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    uint64_t lo, hi;
    fsdpc_optim_range(total, ADAMW_GRAIN, &lo, &hi);
    adamw_range(tensors, n_tensors, lo, hi, &sc);
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* Descriptors and the entry point.                                          */

static const fsdpc_optim_v1 adamw_vtable = {
    /* .struct_size = */ sizeof(fsdpc_optim_v1),
    /* .supports = */ adamw_supports,
    /* .create = */ adamw_create,
    /* .destroy = */ adamw_destroy,
    /* .n_slots = */ adamw_n_slots,
    /* .slot_name = */ adamw_slot_name,
    /* .init_state = */ adamw_init_state,
    /* .step = */ adamw_step,
#ifdef FSDPC_WITH_CUDA
    /* .param_bf16 = */ 1, /* the CUDA kernel (optim_multitensor.cuh) */
#else
    /* .param_bf16 = */ 0,
#endif
    /* .qformat = */ NULL, /* fp32 state */
    /* .q_export = */ NULL,
    /* .q_import = */ NULL,
};

static const fsdpc_component_desc adamw_component = {
    /* .struct_size = */ sizeof(fsdpc_component_desc),
    /* .kind = */ FSDPC_KIND_OPTIM,
    /* .name = */ "adamw",
    /* .version = */ "1.0.0",
    /* .iface_version = */ 1,
    /* .default_score = */ 20,
    /* .description = */ "AdamW with decoupled weight decay (torch.optim.AdamW semantics)",
    /* .capabilities = */
    "cpu (OpenMP, SIMD); fp32 params and state; slots exp_avg, exp_avg_sq; "
#ifdef FSDPC_WITH_CUDA
    "cuda (multi-tensor kernel, bit-identical to the CPU path)",
#else
    "cuda: not in this build",
#endif
    /* .options = */ NULL,
    /* .n_options = */ 0,
    /* .vtable = */ &adamw_vtable,
};

FSDPC_OPTIM_PLUGIN("adamw", adamw_component)
