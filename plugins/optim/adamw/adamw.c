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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../common/host_call.h"
#include "../common/optim_parallel.h"
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
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
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
  if (n > 0 && t == NULL)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "adamw: step got n_tensors=%u but tensors is NULL",
                         n);
  *total = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (!FSDPC_HAS_FIELD(&t[k], fsdpc_optim_tensor, decay))
      return fsdpc_pl_fail(
          h, FSDPC_INVALID_USAGE,
          "adamw: tensor %u has struct_size %u, too small for fsdpc_optim_tensor v1", k,
          t[k].struct_size);
    if (t[k].numel == 0)
      continue;
    if (!t[k].param || !t[k].grad || !t[k].state)
      return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                           "adamw: tensor %u (numel %llu) has a NULL param, grad or state pointer",
                           k, (unsigned long long)t[k].numel);
    if (t[k].stride < t[k].numel)
      return fsdpc_pl_fail(
          h, FSDPC_INVALID_USAGE,
          "adamw: tensor %u has state stride %llu < numel %llu; slots would overlap", k,
          (unsigned long long)t[k].stride, (unsigned long long)t[k].numel);
    *total += t[k].numel;
  }
  return FSDPC_OK;
}

static int32_t check_beta(const fsdpc_host_api *h, const char *name, double x,
                          const char *example) {
  if (!(x >= 0.0 && x < 1.0))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: %s = %g is out of range [0, 1); set optim.%s to e.g. %s", name, x,
                         name, example);
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* The vtable.                                                              */

/* CPU always; CUDA when the plugin was built with its CUDA path. */
static int device_ok(int32_t device) {
#ifdef FSDPC_WITH_CUDA
  if (device == FSDPC_DEVICE_CUDA)
    return 1;
#endif
  return device == FSDPC_DEVICE_CPU;
}

static int32_t adamw_supports(const fsdpc_situation *s) {
  if (s == NULL || !FSDPC_HAS_FIELD(s, fsdpc_situation, device) || device_ok(s->device))
    return FSDPC_OK;
  return fsdpc_pl_fail(
      fsdpc_pl_sit_host(s), FSDPC_UNSUPPORTED,
      "adamw: device %d is not supported: this build of the plugin has only the CPU "
      "path (nvcc was not found at build time); use CPU offload or rebuild with CUDA",
      (int)s->device);
}

static int32_t adamw_create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  const fsdpc_host_api *h = fsdpc_pl_optim_host(init);
  if (out == NULL)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "adamw: create got a NULL out pointer");
  *out = NULL;
  if (!FSDPC_HAS_FIELD(init, fsdpc_optim_init, device))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: create got a NULL or too small fsdpc_optim_init");
  if (!device_ok(init->device))
    return fsdpc_pl_fail(
        h, FSDPC_UNSUPPORTED,
        "adamw: device %d is not supported: this build of the plugin has only the CPU "
        "path (nvcc was not found at build time)",
        (int)init->device);
  int32_t st = check_beta(h, "beta1", init->beta1, "0.9");
  if (st == FSDPC_OK)
    st = check_beta(h, "beta2", init->beta2, "0.999");
  if (st != FSDPC_OK)
    return st;
  if (!(init->eps > 0.0) || !isfinite(init->eps))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: eps = %g must be a finite number > 0; set optim.eps to e.g. 1e-8",
                         init->eps);
  if (!(init->weight_decay >= 0.0) || !isfinite(init->weight_decay))
    return fsdpc_pl_fail(
        h, FSDPC_INVALID_USAGE,
        "adamw: weight_decay = %g must be a finite number >= 0; set optim.weight_decay to "
        "e.g. 0.01",
        init->weight_decay);
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
  if (!device_ok(device))
    return fsdpc_pl_fail(h, FSDPC_UNSUPPORTED,
                         "adamw: init_state on device %d: only CPU state is supported",
                         (int)device);
  if (n_floats > 0 && state == NULL)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: init_state got a NULL state for %llu floats",
                         (unsigned long long)n_floats);
#ifdef FSDPC_WITH_CUDA
  if (device == FSDPC_DEVICE_CUDA) {
    char msg[256];
    int32_t st = adamw_cuda_zero(state, n_floats, stream, msg, sizeof msg);
    return st == FSDPC_OK ? st : fsdpc_pl_fail(h, st, "%s", msg);
  }
#endif
  for (uint64_t i = 0; i < n_floats; i++)
    state[i] = 0.0f;
  return FSDPC_OK;
}

static int32_t adamw_step(fsdpc_optimizer *opt, const fsdpc_optim_tensor *tensors,
                          uint32_t n_tensors, const fsdpc_optim_step_info *info) {
  if (opt == NULL)
    return FSDPC_INVALID_USAGE; /* no optimizer, no host to tell */
  const fsdpc_host_api *h = opt->host;
  if (!FSDPC_HAS_FIELD(info, fsdpc_optim_step_info, grad_scale))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: step got a NULL or too small fsdpc_optim_step_info");
  if (info->step < 1)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: step count %lld must be >= 1 (it is 1-based)",
                         (long long)info->step);
  if (!(info->lr >= 0.0) || !isfinite(info->lr))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw: learning rate %g must be a finite number >= 0", info->lr);
  if (!isfinite(info->grad_scale))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "adamw: grad_scale %g is not finite",
                         info->grad_scale);
  uint64_t total = 0;
  int32_t st = check_tensors(h, tensors, n_tensors, &total);
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
    void *stream = FSDPC_HAS_FIELD(info, fsdpc_optim_step_info, stream) ? info->stream : NULL;
    st = adamw_cuda_step(tensors, n_tensors, &sc, stream, msg, sizeof msg);
    return st == FSDPC_OK ? st : fsdpc_pl_fail(h, st, "%s", msg);
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

static const fsdpc_component_desc *const adamw_components[] = {&adamw_component};

static const fsdpc_plugin_desc adamw_plugin = {
    /* .struct_size = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name = */ "adamw",
    /* .components = */ adamw_components,
    /* .n_components = */ 1,
};

FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *h,
                                                  const fsdpc_plugin_desc **out) {
  if (h == NULL || out == NULL)
    return FSDPC_INVALID_USAGE;
  if (h->abi_major != FSDPC_PLUGIN_ABI_MAJOR)
    return FSDPC_UNSUPPORTED;
  *out = &adamw_plugin;
  return FSDPC_OK;
}
