/* Inference: decoding with a KV cache, sampling, generation (fsdpc
 * generate, the end-of-training prompts) and a resident model loaded from
 * any checkpoint (fsdpc generate, fsdpc eval).
 *
 * The decoder does not own weights: a weights provider hands it each
 * block's parameters in order 0..L+1 (see llama.h), either a resident model
 * (model.c) or the FSDP engine's gathered units (training). Prefill runs
 * the training model's forward (model/, the attention plugin: naive or
 * flash) over the right-padded prompts and stores every layer's keys and
 * values in the cache; each later step runs one token per row at that row's
 * own position, attending to the row's cache (ops kv_store, attn_cached).
 * Right padding with per-row positions needs no attention mask: a pad
 * position is overwritten by the row's next token before anyone reads it.
 *
 * Dimensions: B rows, T prompt length, C hidden, V vocab, L layers,
 * KD = KVH * HD, maxT the cache length. */
#ifndef FSDPC_INFER_INFER_H
#define FSDPC_INFER_INFER_H

#include <stdint.h>

#include "config/config.h"
#include "data/chat.h"
#include "data/tokenizer.h"
#include "model/llama.h"

typedef struct fsdpc_infer_weights {
  void *ctx;
  /* base[k]: the device pointer of parameter kind k of block b (embedding:
   * FSDPC_P_EMBED; layer: its kinds; head: FSDPC_P_NORM, FSDPC_P_HEAD). */
  fsdpc_status (*block)(void *ctx, int b, void *base[FSDPC_P_NKIND], fsdpc_err *err);
  fsdpc_status (*done)(void *ctx, int b, fsdpc_err *err); /* (optional) */
  /* 1: block() hands out the same pointers every call and enqueues no work
   * (a resident model), so the decoder may replay a recorded step (a CUDA
   * graph); 0: gathered weights (training) run step by step. */
  int fixed;
} fsdpc_infer_weights;

/* ---- decode.c: the KV-cache decoder ---- */
typedef struct fsdpc_decoder fsdpc_decoder;

typedef struct fsdpc_decoder_opts {
  const fsdpc_model_shape *shape;
  const fsdpc_ops *ops;             /* NULL = the CPU reference */
  const fsdpc_component *attention; /* attention plugin for prefill */
  const fsdpc_opts *attention_opts;
  int B;                         /* rows */
  int max_len;                   /* cache length: prompt + new tokens, <= max_position_embeddings */
  const struct fsdpc_lora *lora; /* LoRA adapters in the weights (model/lora.h); NULL = none */
  int no_graph;                  /* 1: never record the step as a CUDA graph (measurement) */
} fsdpc_decoder_opts;

fsdpc_status fsdpc__decoder_create(const fsdpc_decoder_opts *o, fsdpc_decoder **out,
                                   fsdpc_err *err);
void fsdpc__decoder_destroy(fsdpc_decoder *d); /* NULL is a no-op */
/* Runs the prompts (host (B, T), right-padded; lens[b] in 1..T) and leaves
 * logits (host (B, V), fp32; NULL: kept on the device for
 * fsdpc__decoder_greedy) of each row's last prompt token. */
fsdpc_status fsdpc__decoder_prefill(fsdpc_decoder *d, const fsdpc_infer_weights *w,
                                    const int32_t *tokens, int T, const int *lens, float *logits,
                                    fsdpc_err *err);
/* Appends tokens[b] to row b at its next position and gives the logits
 * after it (host (B, V), or NULL as for prefill). */
fsdpc_status fsdpc__decoder_step(fsdpc_decoder *d, const fsdpc_infer_weights *w,
                                 const int32_t *tokens, float *logits, fsdpc_err *err);
/* ids (host (B)): the argmax of each row's last logits (lowest id on
 * ties), computed on the device where it can (only the ids are copied). */
fsdpc_status fsdpc__decoder_greedy(fsdpc_decoder *d, int32_t *ids, fsdpc_err *err);
/* Tokens row b holds (prompt + appended). */
int fsdpc__decoder_len(const fsdpc_decoder *d, int b);

/* ---- sample.c ---- */
typedef struct fsdpc_sampling {
  double temperature; /* 0 = greedy (argmax, lowest id on ties) */
  int top_k;          /* 0 = off */
  double top_p;       /* 1 = off */
  uint64_t seed;
} fsdpc_sampling;

/* One token from logits (V) with rng state *state (advanced). scratch:
 * (V) floats and (V) ints, or NULL for greedy. */
int32_t fsdpc__sample(const float *logits, int V, const fsdpc_sampling *s, uint64_t *state,
                      float *scratch_p, int32_t *scratch_i);

/* ---- generate.c ---- */
typedef struct fsdpc_gen_opts {
  int max_new_tokens;
  fsdpc_sampling sampling;
  const int32_t *eos; /* stop ids (the generation config's EOS list) */
  int n_eos;
  const char *const *stop; /* stop strings (the text is cut before them) */
  int n_stop;
  const fsdpc_tokenizer *tok; /* decodes for stop strings and streaming */
  /* (optional) streaming: new text of row b as it is generated */
  void (*on_text)(void *ctx, int row, const char *text, size_t len);
  void *cb_ctx;
  int first_row;  /* index of row 0 among all prompts: seeds each row's stream */
  int top_logits; /* > 0: keep the top_logits (id, logit) pairs of each step
                   * (the logits then come to the host every step) */
} fsdpc_gen_opts;

typedef struct fsdpc_gen_result {
  int32_t *ids; /* generated ids (n_ids), stop token not included */
  int n_ids;
  char *text;              /* decoded, cut before a stop string; NUL-terminated */
  const char *stop_reason; /* "eos", "stop", "length" */
  /* top_logits > 0: (n_ids + 1) x top_logits ids and fp32 logits, highest
   * first, of the logits each generated token was picked from (the last
   * row: the stop token's, or the step after the length limit's: zeros) */
  int32_t *top_ids;
  float *top_vals;
} fsdpc_gen_result;

/* Generates for n prompts at once (one padded batch: one forward per token
 * for all rows). prompts[i] has lens[i] ids. *res gets n results (free with
 * fsdpc__gen_results_free). */
fsdpc_status fsdpc__generate(const fsdpc_decoder_opts *dopt, const fsdpc_infer_weights *w,
                             const int32_t *const *prompts, const int *lens, int n,
                             const fsdpc_gen_opts *g, fsdpc_gen_result **res, fsdpc_err *err);
void fsdpc__gen_results_free(fsdpc_gen_result *r, int n);

/* ---- model.c: a resident model from any checkpoint ---- */
typedef struct fsdpc_infer_model {
  fsdpc_config *cfg; /* the run's config (config.yaml) or one made for an HF folder */
  fsdpc_model_shape shape;
  const fsdpc_ops *ops;
  fsdpc_ops ops_dev;
  void *cuda; /* fsdpc_cuda_ctx with device cuda */
  fsdpc_param_info *params;
  int n_params;
  void **w; /* (n_params) device buffers of act_dtype */
  fsdpc_registry *reg;
  const fsdpc_component *attn;
  fsdpc_infer_weights weights; /* over w */
  char *dir;                   /* the checkpoint (or PEFT adapter folder) given */
  char *weights_dir;           /* where the weights load from: dir, or an adapter's base */
} fsdpc_infer_model;

typedef struct fsdpc_infer_load_opts {
  const char *dir;              /* an HF folder or any fsdpc checkpoint */
  const char *device;           /* "cpu", "cuda" or NULL = the config's train.device */
  const char *attention;        /* plugin name or NULL = the config's attention.name */
  int64_t max_len;              /* longest sequence (the sliding-window rule); 0 = unknown */
  const char *const *overrides; /* "section.key=value" */
  int n_overrides;
} fsdpc_infer_load_opts;

fsdpc_status fsdpc__infer_model_load(const fsdpc_infer_load_opts *o, fsdpc_infer_model **out,
                                     fsdpc_err *err);
void fsdpc__infer_model_free(fsdpc_infer_model *m);
/* Peak bytes allocated on the model's device so far (tracked allocations:
 * weights, KV cache, buffers; not the driver's own context). */
int64_t fsdpc__infer_model_peak_bytes(const fsdpc_infer_model *m);
/* The generation config's EOS ids (generation_config.json beside the model,
 * else config.json, else model.eos_token_id): malloc'd *ids. */
fsdpc_status fsdpc__infer_eos_ids(const char *dir, const fsdpc_model_shape *s, int32_t **ids,
                                  int *n, fsdpc_err *err);

/* ---- prompt.c: what a model folder says about prompting it ---- */
/* The tokenizer: the model folder's own (tokenizer.json / tokenizer.model),
 * an adapter's base's, else the config's data.tokenizer. */
fsdpc_status fsdpc__infer_tokenizer(const fsdpc_infer_model *m, fsdpc_tokenizer **out,
                                    fsdpc_err *err);
/* The chat template for --chat: the model folder's (chat_template.jinja or
 * tokenizer_config.json, as final/ carries the one it was trained with),
 * else the config's data.chat_template, else the base's or the tokenizer
 * folder's; an error naming the way to give one otherwise. */
fsdpc_status fsdpc__infer_chat_template(const fsdpc_infer_model *m, fsdpc_chat_template **out,
                                        fsdpc_err *err);
/* Fills the fields of s that are < 0 (not given) from the model's
 * generation_config.json as transformers reads it: greedy (temperature 0)
 * unless do_sample, then its temperature (1), top_k (50), top_p (1). */
void fsdpc__infer_sampling_defaults(const fsdpc_infer_model *m, fsdpc_sampling *s);

/* ---- prompt_ids.c: text to prompt ids ---- */
typedef struct fsdpc_prompter {
  const fsdpc_infer_model *m;
  fsdpc_tokenizer *tok;      /* fsdpc__infer_tokenizer's */
  fsdpc_chat_template *chat; /* fsdpc__infer_chat_template's, loaded on first use */
} fsdpc_prompter;
fsdpc_status fsdpc__prompter_open(const fsdpc_infer_model *m, fsdpc_prompter *pr, fsdpc_err *err);
void fsdpc__prompter_close(fsdpc_prompter *pr);
/* The ids of text (plain: BOS first as the tokenizer says, unless a->no_bos;
 * with a->chat the user's turn after a->system) or of messages_json (a JSON
 * array rendered with the chat template and the generation prompt); *ids
 * malloc'd. */
fsdpc_status fsdpc__prompter_ids(fsdpc_prompter *pr, const fsdpc_prompt_args *a, const char *text,
                                 const char *messages_json, int32_t **ids, int32_t *n,
                                 fsdpc_err *err);

#endif
