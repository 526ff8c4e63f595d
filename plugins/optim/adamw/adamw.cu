/* AdamW plugin, CUDA path: the same per-element update as adamw.c (same
 * fp32 operations in the same order; this file is built with -fmad=false so
 * that no multiply-add is contracted, and division and sqrt are IEEE), over
 * many tensors per launch (plugins/optim/common/optim_multitensor.cuh). */
#include "../common/optim_multitensor.cuh"
#include "adamw_cuda.h"

struct adamw_op {
  adamw_scalars sc;
  /* p: master value, g: gradient, m: exp_avg, v: exp_avg_sq; decay: flag */
  __device__ void operator()(float &p, float g, float &m, float &v, int decay) const {
    const float gi = g * sc.grad_scale;
    /* torch.lerp picks its formula by the weight */
    const float mi = sc.w1 < 0.5f ? m + sc.w1 * (gi - m) : gi - (gi - m) * (1.0f - sc.w1);
    const float vi = v * sc.beta2 + (sc.w2 * gi) * gi;
    const float denom = sqrtf(vi) / sc.bc2_sqrt + sc.eps;
    m = mi;
    v = vi;
    p = p * (decay ? sc.decay_factor : 1.0f) + (sc.neg_step_size * mi) / denom;
  }
};

static int decay_of(const fsdpc_optim_tensor &t) {
  return t.decay;
}

extern "C" int32_t adamw_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors,
                                   const adamw_scalars *sc, void *stream, char *msg, size_t cap) {
  return fsdpc_mt_apply(t, n_tensors, 2, adamw_op{*sc}, decay_of, stream, "adamw", msg, cap);
}

extern "C" int32_t adamw_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg,
                                   size_t cap) {
  return fsdpc_mt_zero(state, n_floats, stream, "adamw", msg, cap);
}
