/* SGD plugin, CUDA path: the same per-element update as sgd.c (same fp32
 * operations in the same order, built with -fmad=false so nothing is
 * contracted into multiply-adds), over many tensors per launch
 * (plugins/optim/common/optim_multitensor.cuh). */
#include "../common/optim_multitensor.cuh"
#include "sgd_cuda.h"

struct sgd_op {
  sgd_scalars sc;
  /* p: master value, g: gradient, buf: momentum_buffer (unused without
   * momentum); decay: flag */
  __device__ void operator()(float &p, float g, float &buf, float &unused, int decay) const {
    (void)unused;
    float d = g * sc.grad_scale;
    if (decay)
      d = d + sc.weight_decay * p;
    if (sc.momentum_on) {
      const float b = sc.first ? d : buf * sc.momentum + sc.w * d;
      buf = b;
      d = sc.nesterov ? d + sc.momentum * b : b;
    }
    p = p + sc.neg_lr * d;
  }
};

struct sgd_decay {
  float weight_decay;
  int operator()(const fsdpc_optim_tensor &t) const {
    return t.decay && weight_decay != 0.0f;
  }
};

extern "C" int32_t sgd_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors,
                                 const sgd_scalars *sc, void *stream, char *msg, size_t cap) {
  return fsdpc_mt_apply(t, n_tensors, sc->momentum_on ? 1 : 0, sgd_op{*sc},
                        sgd_decay{sc->weight_decay}, stream, "sgd", msg, cap);
}

extern "C" int32_t sgd_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg,
                                 size_t cap) {
  return fsdpc_mt_zero(state, n_floats, stream, "sgd", msg, cap);
}
