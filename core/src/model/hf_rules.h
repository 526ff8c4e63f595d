/* What fsdpc can model: the one place that decides whether a Hugging Face
 * folder (config.json + safetensors) is a model fsdpc computes exactly as
 * transformers does. Everything that reads an HF folder (train's
 * model.config and model.init.from, convert, generate, eval) asks here, so a
 * model fsdpc would compute differently is refused with one line naming the
 * key or tensor, never trained or served silently wrong.
 *
 * Accepted: a model_type of config/family.c (absent = llama); hidden_act
 * silu; a RoPE type transformers ships (default, llama3, linear, dynamic,
 * yarn, longrope), one for all layers; layer types full or sliding
 * attention; and none of the keys of the refusal table (hf_rules.c:
 * quantization, dropout, MoE, vision/audio towers, cross-attention,
 * multimodal RoPE, a window in a family without one); tensors exactly
 * those of the family's causal LM for the config, in F32, BF16 or F16 (the
 * non-persistent rotary_emb.inv_freq buffers of old exports are ignored).
 * docs/model.md lists the families, their switches and the refusals. */
#ifndef FSDPC_MODEL_HF_RULES_H
#define FSDPC_MODEL_HF_RULES_H

#include <stdint.h>

#include "model/llama.h"

struct cJSON;

/* The config.json rules over a parsed object; label names the file in
 * errors. max_len: the longest sequence the caller runs (0 = unknown: the
 * config's max_position_embeddings). */
fsdpc_status fsdpc__hf_rules_config(const struct cJSON *root, const char *label, int64_t max_len,
                                    fsdpc_err *err);
/* The same over a file (config.json) or a folder holding one. */
fsdpc_status fsdpc__hf_rules_config_file(const char *path, int64_t max_len, fsdpc_err *err);
/* The safetensors of folder dir (model.safetensors or its index) hold
 * exactly the tensors of shape s, with their shapes, in F32/BF16/F16. */
fsdpc_status fsdpc__hf_rules_tensors(const char *dir, const fsdpc_model_shape *s, fsdpc_err *err);
/* 1 when dir holds model.safetensors or model.safetensors.index.json. */
int fsdpc__hf_is_folder(const char *dir);
/* Both checks on an HF folder (config.json when present, then tensors). */
fsdpc_status fsdpc__hf_rules_folder(const char *dir, const fsdpc_model_shape *s, int64_t max_len,
                                    fsdpc_err *err);

#endif
