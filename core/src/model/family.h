/* The model description's switches of a family (config/family.h holds the
 * families' table): the resolver from a config (family_resolve.c) and the
 * sliding window of a layer. */
#ifndef FSDPC_MODEL_FAMILY_H
#define FSDPC_MODEL_FAMILY_H

#include "config/family.h"
#include "model/llama.h"

/* The model description's switches from a loaded config (model.model_type
 * and the keys the family reads; its shape keys are the caller's): biases,
 * q/k norms, norm placement, fused layouts, multipliers, RoPE (with partial
 * rotary) and the sliding window of each layer. The config has passed
 * fsdpc__family_check_config. */
void fsdpc__family_resolve(const fsdpc_config *c, fsdpc_model_shape *sh);
/* Whether layer l is a sliding_attention layer (its bit is set). */
static inline int fsdpc__layer_sliding(const fsdpc_model_shape *s, int l) {
  return l < FSDPC_WINDOW_MAX_LAYERS && ((s->window_layers[l / 64] >> (l % 64)) & 1);
}
/* Whether layer l attends through the sliding window. */
static inline int fsdpc__layer_window(const fsdpc_model_shape *s, int l) {
  return s->window > 0 && fsdpc__layer_sliding(s, l) ? s->window : 0;
}
/* The RoPE of layer l: rope_local on a sliding_attention layer of a model
 * that has one (Gemma 3, whatever its window), else rope. */
static inline const fsdpc_rope *fsdpc__layer_rope(const fsdpc_model_shape *s, int l) {
  return s->rope_local.dim > 0 && fsdpc__layer_sliding(s, l) ? &s->rope_local : &s->rope;
}

#endif
