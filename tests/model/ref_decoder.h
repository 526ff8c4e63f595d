/* A double-precision reference of the decoder families, written from
 * transformers' modeling files (modeling_llama/mistral/qwen2/qwen3/phi3/
 * olmo2/granite.py, modeling_rope_utils.py, masking_utils.py) and not from
 * fsdpc's ops: its own loops, its own RoPE, its own reading of config.json.
 * The weights are looked up by their Hugging Face names, so a wrong name or
 * layout in fsdpc fails here too. Tests only. */
#ifndef FSDPC_TEST_REF_DECODER_H
#define FSDPC_TEST_REF_DECODER_H

#include <stdint.h>

struct cJSON;

/* The weight named name as n doubles (or NULL: the model has no such
 * tensor). */
typedef const double *(*ref_weight_fn)(void *ctx, const char *name, uint64_t n);

typedef struct ref_model ref_model;

/* The model a config.json describes, read as transformers' config class
 * does; NULL with *why set on a config it does not know. */
ref_model *ref_create(const struct cJSON *config, const char **why);
void ref_destroy(ref_model *r);

/* Forward over B rows of T tokens (positions restart at each document when
 * doc is non-NULL): logits (B*T, V) when non-NULL, and the mean
 * cross-entropy over labels != -100 (labels already shifted: label t is the
 * target of position t). */
double ref_forward(const ref_model *r, ref_weight_fn w, void *wctx, const int32_t *ids,
                   const int32_t *labels, const int32_t *doc, int B, int T, double *logits);

/* The sliding window of layer l (0 = none) and the RoPE attention factor,
 * as the reference derives them. */
int ref_layer_window(const ref_model *r, int l);
int ref_vocab(const ref_model *r);

#endif
