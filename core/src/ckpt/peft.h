/* Reading a PEFT LoRA adapter folder (adapter_config.json +
 * adapter_model.safetensors, what `peft.method: lora` writes and
 * PeftModel.save_pretrained writes) to merge it into its base's weights:
 * W += s * B A, s = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora).
 * `model.adapter` names such a folder; generate, eval and train then run
 * on the merged weights. Tensor names are PEFT's:
 * base_model.model.<weight name without .weight>.lora_A.weight (r, in) and
 * .lora_B.weight (out, r). What fsdpc cannot merge exactly is refused:
 * DoRA, biases, modules_to_save, per-layer ranks, layers_to_transform, an
 * adapter on a module that is not one of the seven projections. */
#ifndef FSDPC_CKPT_PEFT_H
#define FSDPC_CKPT_PEFT_H

#include <stddef.h>
#include <stdint.h>

#include "fsdp/engine.h"
#include "model/llama.h"
#include "util/err.h"

typedef struct fsdpc_peft fsdpc_peft;

/* Whether dir holds adapter_config.json. */
int fsdpc__peft_is_folder(const char *dir);
/* Opens and validates the folder's config; checks every adapter tensor
 * against the shape (a projection of it, A (r, in), B (out, r)). */
fsdpc_status fsdpc__peft_open(const char *dir, const fsdpc_model_shape *shape, fsdpc_peft **out,
                              fsdpc_err *err);
void fsdpc__peft_close(fsdpc_peft *p); /* NULL is a no-op */
/* Adds s * (B A) elements [lo, hi) of weight `name` (an HF tensor name, row
 * major (out, in)) to dst (hi - lo floats); nothing when the adapter has no
 * tensors for that weight. Not thread-safe (it caches the last A and B). */
fsdpc_status fsdpc__peft_merge_range(fsdpc_peft *p, const char *name, int64_t in, uint64_t lo,
                                     uint64_t hi, float *dst, fsdpc_err *err);
/* How many weights the adapter changes. */
int fsdpc__peft_n_targets(const fsdpc_peft *p);
/* Merges the adapter in dir into this rank's master shards of the engine
 * (after the base's load; on a device through the host mirrors). Not
 * collective: each rank changes only its own elements. */
fsdpc_status fsdpc__peft_merge_engine(fsdpc_engine *e, const fsdpc_model_shape *shape,
                                      const char *dir, int *n_merged, fsdpc_err *err);
/* The same into host shards laid out by fsdpc__layout_build (shard[u]
 * holds unit u's shard at the layout's shard rank): `fsdpc convert` and
 * the inference load. n_merged may be NULL. */
fsdpc_status fsdpc__peft_merge_layout(const char *dir, const fsdpc_model_shape *shape,
                                      const fsdpc_param_info *params, const fsdpc_layout *lay,
                                      float *const *shard, int *n_merged, fsdpc_err *err);

#endif
