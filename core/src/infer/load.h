/* The inference load's pieces (infer/model.c, infer/lora_ckpt.c): fp32
 * host shards laid out one unit per module at world 1, as `fsdpc convert`
 * lays them out, before they go to the device. */
#ifndef FSDPC_INFER_LOAD_H
#define FSDPC_INFER_LOAD_H

#include "fsdp/engine.h"
#include "infer/infer.h"

/* Loads params from dir (any fsdpc checkpoint or an HF folder, through the
 * statedict plugin that recognises it) into *lay and *shard (allocated
 * here; freed by fsdpc__infer_shards_free, also after a failure). state:
 * the trainer state the checkpoint holds (NULL when none; the caller frees
 * it), or NULL when not wanted. */
fsdpc_status fsdpc__infer_load_dir(fsdpc_registry *reg, const fsdpc_config *cfg,
                                   const fsdpc_model_shape *shape, const fsdpc_param_info *params,
                                   int n_params, const char *dir, fsdpc_layout *lay, float ***shard,
                                   char **state, fsdpc_err *err);
void fsdpc__infer_shards_free(fsdpc_layout *lay, float **shard);

/* A LoRA (or QLoRA) run's intermediate checkpoint m->weights_dir, which
 * holds the adapters only: m's base weights into *lay / *shard as the run
 * built them (model.init.from, else the seeded random init; with
 * quantization.method nf4, each projection quantized and dequantized as
 * the engine does), checked against the base the checkpoint records, then
 * W + s B A merged in fp32 as the run's merged export computes it. */
fsdpc_status fsdpc__infer_lora_ckpt(fsdpc_infer_model *m, fsdpc_layout *lay, float ***shard,
                                    fsdpc_err *err);

#endif
