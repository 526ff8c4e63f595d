/* LoRA adapters on the decoder's projections (Hugging Face PEFT semantics).
 *
 * A targeted projection y = x @ W^T (W frozen, (out, in)) becomes
 *   y = x @ W^T + s * (drop(x) @ A^T) @ B^T
 * with A (r, in), B (out, r), s = alpha / r (alpha / sqrt(r) with rslora) and
 * drop() inverted dropout whose mask is a counter hash of (seed, round,
 * layer, projection, element): the same mask in the forward, in the
 * recompute of activation checkpointing and in the backward, on the CPU and
 * on CUDA. No merged weight is ever formed.
 *
 * Backward (dy given; parameter grads +=, activation grads =):
 *   u   = s * drop(x) @ A^T                    (N, r), saved by the forward
 *   dB += dy^T @ u
 *   du  = s * dy @ B                           (N, r)
 *   dA += du^T @ drop(x)
 *   dx += drop(du @ A)                         (the mask again, regenerated)
 *
 * Adapters are parameters like any other (kinds FSDPC_P_LORA0..): A is
 * Kaiming-uniform with a = sqrt(5) as PEFT initialises it (bound
 * 1 / sqrt(in)), B is zero, both seeded per parameter name. The base's
 * parameters are marked frozen. Dimensions as in llama.h. */
#ifndef FSDPC_MODEL_LORA_H
#define FSDPC_MODEL_LORA_H

#include <stdint.h>

#include "model/llama.h"

enum { FSDPC_LORA_NPROJ = 7 }; /* Q K V O GATE UP DOWN: j = kind - FSDPC_P_Q */

typedef struct fsdpc_lora {
  int r;
  float alpha, scale, dropout;
  int rslora;
  unsigned targets; /* bit j: projection j has an adapter */
  uint64_t seed;    /* dropout masks */
} fsdpc_lora;

/* The projection a PEFT target_modules name means (-1: none); fused: a
 * family with Phi-3's fused qkv_proj and gate_up_proj, which the other
 * families do not have, and no q/k/v/gate/up of its own. */
int fsdpc__lora_target_proj(int fused, const char *name);
/* "q_proj", ... ("qkv_proj", "gate_up_proj" in a fused family) and the
 * module path under a layer ("self_attn.q_proj"). */
const char *fsdpc__lora_proj_name(const fsdpc_model_shape *s, int j);
const char *fsdpc__lora_proj_module(const fsdpc_model_shape *s, int j);
/* Input and output features of projection j (a fused one: all its rows). */
void fsdpc__lora_dims(const fsdpc_model_shape *s, int j, int *in, int *out);
/* The outputs projection j writes: 3 (q, k, v) for a fused qkv_proj, 2
 * (gate, up) for gate_up_proj, else 1; rows[p] = features of output p. The
 * adapter's B stacks them, as the fused weight does. */
int fsdpc__lora_parts(const fsdpc_model_shape *s, int j, int rows[3]);
/* Whether a parameter kind is an adapter, its projection and A (0) / B (1). */
static inline int fsdpc__lora_kind(int kind) {
  return kind >= FSDPC_P_LORA0;
}
static inline int fsdpc__lora_kind_proj(int kind) {
  return (kind - FSDPC_P_LORA0) / 2;
}
static inline int fsdpc__lora_kind_is_b(int kind) {
  return (kind - FSDPC_P_LORA0) % 2;
}

/* Marks every parameter of *params frozen and appends the adapters, per
 * layer after the base (A then B for each targeted projection, module
 * "model.layers.N.lora": one unit per layer). Names are PEFT's without the
 * "base_model.model." prefix: model.layers.N.self_attn.q_proj.lora_A.weight.
 * *params is realloc'd. */
fsdpc_status fsdpc__lora_add_params(const fsdpc_model_shape *s, const fsdpc_lora *lo,
                                    fsdpc_param_info **params, int *n, fsdpc_err *err);
/* Adapter init (A: U(-1/sqrt(in), 1/sqrt(in)), B: 0), elements
 * [elem_offset, elem_offset + n) of parameter p. */
void fsdpc__lora_init_range(const fsdpc_param_info *p, uint64_t seed, uint64_t elem_offset,
                            uint64_t n, float *dst);

/* The context's adapter buffers (the planner counts them without
 * allocating): saved u per layer slot and projection, scratch. */
/* Floats of the frozen norms' gradient sink (a norm's width: hidden, or a
 * q/k norm's, which may be wider: head_dim 256 over hidden 16). */
size_t fsdpc__lora_sink_floats(const fsdpc_model_shape *s);
uint64_t fsdpc__lora_ctx_bytes(const fsdpc_model_shape *s, const fsdpc_lora *lo, int N, int ckpt,
                               size_t act);
typedef struct fsdpc_model_ctx fsdpc_model_ctx;
fsdpc_status fsdpc__lora_ctx_alloc(fsdpc_model_ctx *m, const fsdpc_lora *lo, fsdpc_err *err);
void fsdpc__lora_ctx_free(fsdpc_model_ctx *m);
/* The dropout round of the next micro-batch (masks change with it) and
 * whether the passes train (dropout on) or evaluate (off). */
void fsdpc__model_set_lora_round(fsdpc_model_ctx *m, uint64_t round, int training);

/* ys[p] (N, rows[p]) += s * B_p(A(drop(x))) for projection j of layer l
 * (fsdpc__lora_parts); a no-op when it has no adapter. */
/* off = 1: forwards run without the adapters (a preference objective's
 * reference model, as TRL's disable_adapter); forward only. */
void fsdpc__model_set_lora_off(fsdpc_model_ctx *m, int off);
fsdpc_status fsdpc__lora_fwd(fsdpc_model_ctx *m, int l, int j, const fsdpc_layer_w *w,
                             void *const *ys, const void *x, fsdpc_err *err);
/* The same without dropout on any N rows, u (N, r) a scratch: ys[p] += s *
 * (x @ A^T) @ B_p^T (the decoder's one-token steps). */
fsdpc_status fsdpc__lora_apply(const fsdpc_ops *ops, const fsdpc_lora *lo, int j,
                               const fsdpc_model_shape *s, const fsdpc_layer_w *w, void *const *ys,
                               const void *x, int N, void *u, fsdpc_err *err);
/* Adapter grads of projection j from its outputs' gradients dys, and dx
 * (N, in) += its input gradient; a no-op without an adapter. */
fsdpc_status fsdpc__lora_bwd(fsdpc_model_ctx *m, int l, int j, const fsdpc_layer_w *w,
                             const fsdpc_layer_g *g, const void *const *dys, const void *x,
                             void *dx, fsdpc_err *err);

#endif
