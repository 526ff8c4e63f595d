/* The resolved run configuration: typed structs, loader, dump.
 *
 * A config comes from one YAML file, then `section.key=value` overrides, then
 * (for model shape keys still unset) the Hugging Face config.json named by
 * model.config. Every key, its type, default, range and meaning is one row of
 * the schema table in schema.c; parsing, defaults, validation, dump and the
 * docs (docs/config.md) are all driven by that table.
 *
 * After a successful load every field holds its effective value: strings are
 * never NULL ("" when empty), derived defaults are resolved
 * (num_key_value_heads, head_dim, data.seed) and every `options` map is a
 * non-NULL fsdpc_opts holding the user's values, not yet validated against a
 * plugin (the caller does that with fsdpc__opts_validate once it knows the
 * plugin). The config owns all of it; fsdpc__config_destroy frees it. */
#ifndef FSDPC_CONFIG_CONFIG_H
#define FSDPC_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/opts.h"
#include "util/err.h"

/* Enum-typed keys are stored as int holding one of these values. dtypes use
 * FSDPC_DTYPE_*, train.device FSDPC_DEVICE_*, log.level FSDPC_LOG_* from
 * plugin.h. */
/* fsdp.sharding_strategy: the one strategy enum of the project (the engine,
 * the run plan, checkpoints and the CLI use it); its one name table is the
 * schema's (schema.c), read through fsdpc__strategy_name/_parse. */
typedef enum fsdpc_strategy {
  FSDPC_FULL_SHARD = 0,
  FSDPC_SHARD_GRAD_OP = 1,
  FSDPC_NO_SHARD = 2,
  FSDPC_HYBRID_SHARD = 3,
  FSDPC_STRATEGY_COUNT = 4
} fsdpc_strategy;
/* The config's spellings of the same values. */
#define FSDPC_SHARD_FULL_SHARD FSDPC_FULL_SHARD
#define FSDPC_SHARD_SHARD_GRAD_OP FSDPC_SHARD_GRAD_OP
#define FSDPC_SHARD_NO_SHARD FSDPC_NO_SHARD
#define FSDPC_SHARD_HYBRID_SHARD FSDPC_HYBRID_SHARD

/* Whether a strategy frees a unit's gathered parameters after its forward
 * (and gathers them again for backward): FULL_SHARD, HYBRID_SHARD. */
static inline int fsdpc__strategy_reshards(fsdpc_strategy s) {
  return s == FSDPC_FULL_SHARD || s == FSDPC_HYBRID_SHARD;
}
/* "FULL_SHARD", ...; "?" for a value out of range. */
const char *fsdpc__strategy_name(fsdpc_strategy s);
/* The strategy a name spells (as the config writes it), or -1. */
int fsdpc__strategy_parse(const char *name);
enum { FSDPC_STATE_DICT_FULL = 0, FSDPC_STATE_DICT_SHARDED = 1 };    /* fsdp.state_dict_type */
/* fsdp.activation_checkpointing_policy; also the run plan's and the model's
 * activation_checkpointing level (0 = off). */
enum { FSDPC_AC_FULL = 1, FSDPC_AC_SAVE_MLP = 2 };
/* fsdp.mixed_precision.fp8_recipe (ops/fp8.h); OFF = the linear projections
 * in the compute dtype (fsdp.mixed_precision.linear: bf16) */
enum { FSDPC_FP8_OFF = 0, FSDPC_FP8_TENSORWISE = 1, FSDPC_FP8_ROWWISE = 2 };
/* model.model_type: the decoder families (their table: config/family.c). */
typedef enum fsdpc_family {
  FSDPC_FAMILY_LLAMA,
  FSDPC_FAMILY_MISTRAL,
  FSDPC_FAMILY_QWEN2,
  FSDPC_FAMILY_QWEN3,
  FSDPC_FAMILY_PHI3,
  FSDPC_FAMILY_OLMO2,
  FSDPC_FAMILY_GRANITE,
  FSDPC_FAMILY_GEMMA2,
  FSDPC_FAMILY_GEMMA3, /* gemma3_text */
  FSDPC_FAMILY_COUNT
} fsdpc_family;
/* model.rope_scaling.type: the numbers are ops.h's FSDPC_ROPE_* */
enum {
  FSDPC_ROPE_SCALING_NONE = 0,
  FSDPC_ROPE_SCALING_LLAMA3 = 1,
  FSDPC_ROPE_SCALING_LINEAR = 2,
  FSDPC_ROPE_SCALING_DYNAMIC = 3,
  FSDPC_ROPE_SCALING_YARN = 4,
  FSDPC_ROPE_SCALING_LONGROPE = 5
};
/* longrope short/long factors a config may list: ops.h's FSDPC_ROPE_MAX_FACTORS */
enum { FSDPC_ROPE_SCALING_MAX_FACTORS = 256 };
enum { FSDPC_SCHED_CONSTANT = 0, FSDPC_SCHED_LINEAR = 1, FSDPC_SCHED_COSINE = 2 };
enum { FSDPC_PROGRESS_AUTO = 0, FSDPC_PROGRESS_ON = 1, FSDPC_PROGRESS_OFF = 2 };

/* A list of owned strings. */
typedef struct fsdpc_strlist {
  char **items;
  int n;
} fsdpc_strlist;

/* A list of option maps, each kept as text with its source location and
 * validated by its consumer against its own keys (data.datasets). */
typedef struct fsdpc_opts_list {
  fsdpc_opts **items;
  int n;
} fsdpc_opts_list;

typedef struct fsdpc_config_model {
  char *config; /* HF config.json or its folder; "" = none */
  int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
  int64_t num_attention_heads, num_key_value_heads, head_dim;
  int64_t max_position_embeddings;
  double rms_norm_eps, rope_theta;
  struct {
    int type; /* FSDPC_ROPE_SCALING_* */
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_position_embeddings;
    double attention_factor, beta_fast, beta_slow, mscale, mscale_all_dim; /* yarn; 0 = unset */
    bool truncate;                                                         /* yarn */
    fsdpc_strlist short_factor, long_factor;                               /* longrope */
  } rope_scaling;
  bool tie_word_embeddings;
  /* The family and its switches (config/family.h): keys named as config.json's. */
  int model_type; /* FSDPC_FAMILY_* */
  bool attention_bias, mlp_bias;
  int64_t sliding_window;    /* tokens; 0 = none; -1 = the family's default */
  bool use_sliding_window;   /* Qwen2, Qwen3 */
  int64_t max_window_layers; /* Qwen2, Qwen3: layers before it attend fully; -1 = default */
  fsdpc_strlist layer_types; /* full_attention / sliding_attention per layer; [] = derived */
  double partial_rotary_factor;
  double embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling;
  double query_pre_attn_scalar;       /* Gemma 2; -1 = the family's default */
  double attn_logit_softcapping;      /* Gemma 2; 0 = none; -1 = the family's default */
  double final_logit_softcapping;     /* Gemma 2; 0 = none; -1 = the family's default */
  char *hidden_activation;            /* Gemma 2 */
  double rope_local_base_freq;        /* Gemma 3: RoPE base of the sliding_attention layers */
  int64_t sliding_window_pattern;     /* Gemma 3: every n-th layer attends fully (no layer_types) */
  int64_t bos_token_id, eos_token_id; /* -1 = none */
  struct {
    char *from; /* checkpoint to start from; "" = random init */
    double std;
  } init;
  char *from;    /* HF folder: shape, weights and tokenizer; "" = none (config/folder.c) */
  char *adapter; /* PEFT LoRA folder merged into the loaded weights; "" = none */
} fsdpc_config_model;

typedef struct fsdpc_config_data {
  char *train, *eval;
  char *tokenizer; /* "byte", or a tokenizer.json (or its folder) */
  int64_t seq_len;
  bool shuffle;
  int64_t seed; /* resolved: train.seed when the file says -1 */
  bool document_masking;
  double eval_fraction;
  /* JSONL datasets (data/prepare.h, docs/data.md) */
  int format;   /* FSDPC_FORMAT_* (data/prepare.h) */
  char *text_field, *prompt_field, *completion_field, *instruction_field, *input_field,
      *output_field, *system_field, *messages_field;
  int train_on; /* FSDPC_TRAIN_ON_* */
  char *chat_template, *chat_template_name;
  fsdpc_opts *template_kwargs; /* chat: extra template variables */
  bool train_on_reasoning;
  bool skip_bad_examples;
  int packing;  /* FSDPC_DATA_PACKING_* */
  int overlong; /* FSDPC_DATA_OVERLONG_* */
  char *cache_dir;                         /* prepared JSONL data; "" = log.dir/data-cache */
  int64_t max_line_bytes, max_input_bytes; /* JSONL limits (data/jsonl.h) */
  fsdpc_opts_list datasets;                /* [{path, weight, format, ...}], mixed by weight */
} fsdpc_config_data;
enum { FSDPC_DATA_PACKING_AUTO = -1 }; /* else FSDPC_PACK_* of data/loader.h */
enum { FSDPC_DATA_OVERLONG_TRUNCATE = 0, FSDPC_DATA_OVERLONG_DROP = 1 };

typedef struct fsdpc_config_fsdp {
  int sharding_strategy; /* FSDPC_SHARD_* */
  int64_t hybrid_shard_size;
  struct {
    char *policy;
    fsdpc_opts *options;
  } wrap;
  struct {
    /* FSDPC_DTYPE_F32 or FSDPC_DTYPE_BF16; param and logits: -1 = auto */
    int param_dtype, reduce_dtype, logits_dtype;
    int linear;     /* 0 = the compute dtype, 1 = fp8 */
    int fp8_recipe; /* FSDPC_FP8_TENSORWISE or _ROWWISE (ops/fp8.h) */
  } mixed_precision;
  bool activation_checkpointing, cpu_offload, forward_prefetch, backward_prefetch;
  int activation_checkpointing_policy; /* FSDPC_AC_FULL or FSDPC_AC_SAVE_MLP */
  int64_t max_inflight_allgathers;
  bool no_sync;
  int state_dict_type; /* FSDPC_STATE_DICT_* */
  int64_t align;       /* elements */
  struct {
    bool optimizer; /* optimizer state in pinned host memory, streamed per unit */
    double buffer_mib; /* each of the two device buffers the state streams through */
  } offload;
  bool param_copy;     /* bf16 copy of each master shard, written by the optimizer */
  int64_t param_copy_max_mib; /* cap on those copies' device memory; 0 = none */
  int keep_params;            /* -1 auto, else FSDPC_KEEP_* (runplan/runplan.h) */
  bool fit_check; /* CUDA: refuse a run whose memory plan does not fit (plan/plan_fit.c) */
} fsdpc_config_fsdp;

typedef struct fsdpc_config_collectives {
  char *impl;
  int64_t timeout_s;
  fsdpc_opts *options;
} fsdpc_config_collectives;

typedef struct fsdpc_config_attention {
  char *impl;
  fsdpc_opts *options;
} fsdpc_config_attention;

typedef struct fsdpc_config_optim {
  char *name;
  double lr, weight_decay;
  double betas[2];
  double eps, momentum;
  bool nesterov, decay_norm_and_bias;
  bool in_backward; /* each unit's update in the backward; no persistent grad shards */
  fsdpc_opts *options;
} fsdpc_config_optim;

/* objective: what a step minimises (docs/objectives.md), an objective
 * plugin and the keys it reads (TRL's names and defaults). */
typedef struct fsdpc_config_objective {
  char *name;
  double beta, label_smoothing, gamma;
  int32_t reference; /* FSDPC_OBJ_REF_* */
  fsdpc_opts *options;
} fsdpc_config_objective;
/* objective.reference: where a preference objective's reference log-probs
 * come from (train/objective.h) */
enum { FSDPC_OBJ_REF_AUTO = 0, FSDPC_OBJ_REF_PRECOMPUTE = 1 };

typedef struct fsdpc_config_schedule {
  int name; /* FSDPC_SCHED_* */
  int64_t warmup_steps;
  double warmup_ratio, min_lr, min_lr_ratio;
} fsdpc_config_schedule;

typedef struct fsdpc_config_train {
  int64_t max_steps, micro_batch_size, grad_accum_steps, global_batch_size;
  int64_t epochs; /* > 0: max_steps = epochs * steps per epoch */
  double max_grad_norm;
  int64_t seed, eval_every, eval_batches, log_every;
  int device; /* FSDPC_DEVICE_* */
  int64_t threads;
  int64_t gemm_sm_margin; /* CUDA: SMs the GEMMs leave to the collectives */
  fsdpc_strlist generate_prompts;
  int64_t generate_tokens;
} fsdpc_config_train;

typedef struct fsdpc_config_checkpoint {
  char *dir;
  int64_t save_steps, keep;
  char *resume; /* "none", "auto" or a checkpoint folder */
  char *intermediate_format, *final_format;
  int final_dtype; /* FSDPC_DTYPE_* */
  fsdpc_opts *options;
  bool allow_nonfinite; /* load weights/optimizer state holding NaN/Inf */
  double write_mib_s;   /* a save's write rate per rank for the grace warning; 0 = measure */
  double divergence_factor; /* rotation keeps the last checkpoint whose loss was not above
                               this x the run's best (ckpt/train.c); 0 = off */
} fsdpc_config_checkpoint;

typedef struct fsdpc_config_log {
  char *dir;
  int level;    /* FSDPC_LOG_* */
  int progress; /* FSDPC_PROGRESS_* */
  int64_t memory_every;
  bool tensorboard; /* TensorBoard event files under dir */
} fsdpc_config_log;

typedef struct fsdpc_config_plugins {
  fsdpc_strlist paths;
} fsdpc_config_plugins;

/* The job as a whole (launcher, signals). */
typedef struct fsdpc_config_dist {
  double term_grace_s; /* SIGTERM -> SIGKILL delay of the launcher */
  double heartbeat_timeout_s; /* a rank or the store silent this long fails the job */
} fsdpc_config_dist;

/* peft: parameter-efficient fine-tuning (docs/lora.md), Hugging Face PEFT's
 * names and meanings. */
enum { FSDPC_PEFT_NONE = 0, FSDPC_PEFT_LORA = 1 }; /* peft.method */
typedef struct fsdpc_config_peft {
  int method; /* FSDPC_PEFT_* */
  int64_t r;
  double alpha, dropout;
  fsdpc_strlist target_modules; /* q_proj ... down_proj, or all-linear */
  bool rslora, merge_on_save;
} fsdpc_config_peft;

/* quantization: a frozen 4-bit base under LoRA (QLoRA, docs/lora.md), the
 * names of transformers' BitsAndBytesConfig where they map. */
enum { FSDPC_QUANT_NONE = 0, FSDPC_QUANT_NF4 = 1 }; /* quantization.method */
typedef struct fsdpc_config_quant {
  int method;         /* FSDPC_QUANT_* (load_in_4bit + bnb_4bit_quant_type) */
  bool double_quant;  /* bnb_4bit_use_double_quant */
  int64_t block_size; /* bitsandbytes' blocksize */
  int compute_dtype;  /* bnb_4bit_compute_dtype: -1 auto (the run's), FSDPC_DTYPE_* */
} fsdpc_config_quant;

typedef struct fsdpc_config_meta fsdpc_config_meta; /* where each key came from */

typedef struct fsdpc_config {
  char *source; /* the file name (or the name given to from_string) */
  fsdpc_config_model model;
  fsdpc_config_data data;
  fsdpc_config_fsdp fsdp;
  fsdpc_config_collectives collectives;
  fsdpc_config_attention attention;
  fsdpc_config_optim optim;
  fsdpc_config_objective objective;
  fsdpc_config_schedule schedule;
  fsdpc_config_train train;
  fsdpc_config_checkpoint checkpoint;
  fsdpc_config_log log;
  fsdpc_config_plugins plugins;
  fsdpc_config_dist dist;
  fsdpc_config_peft peft;
  fsdpc_config_quant quantization;
  fsdpc_config_meta *meta; /* private */
} fsdpc_config;

/* Loads path, applies overrides ("section.key=value", in order), reads
 * model.config, resolves derived defaults and validates. On failure *out is
 * NULL and err holds one line naming file:line:col (or the override text)
 * and the key path. */
fsdpc_status fsdpc__config_load(const char *path, const char *const *overrides, int n_overrides,
                                fsdpc_config **out, fsdpc_err *err);
/* A checkpoint's config.yaml (the resolved config of the run that wrote
 * it): as fsdpc__config_load, but its model folders need not be there
 * (model.from cleared and a model.config that is gone not read: every
 * shape key is in the file; model.adapter cleared: the checkpoint's
 * weights hold it), so that its checkpoints load where the base has moved
 * or is gone. */
fsdpc_status fsdpc__config_load_checkpoint(const char *path, const char *const *overrides,
                                           int n_overrides, fsdpc_config **out, fsdpc_err *err);
/* Same from YAML text; name stands for the file name in messages. */
fsdpc_status fsdpc__config_from_string(const char *yaml_text, const char *name,
                                       const char *const *overrides, int n_overrides,
                                       fsdpc_config **out, fsdpc_err *err);
void fsdpc__config_destroy(fsdpc_config *c);

/* Writes the resolved config as YAML: every key with its effective value.
 * Loading the output gives an equal config. */
fsdpc_status fsdpc__config_dump(const fsdpc_config *c, FILE *f);

/* True when every key has the same value (options compared as text). When
 * they differ and first_diff is non-NULL, it gets the first differing key. */
bool fsdpc__config_equal(const fsdpc_config *a, const fsdpc_config *b, const char **first_diff);

/* Writes where key `path` got its value, for messages by later stages:
 * "cfg.yaml:12:9", "override 'optim.lr=1e-3'", "llama/config.json field
 * 'hidden_size'", or the file name when the key has its default. */
void fsdpc__config_where(const fsdpc_config *c, const char *path, char *buf, size_t cap);

/* One line for the start of a run when model.config gives only the shape
 * (the weights start random); "" otherwise. */
void fsdpc__config_model_note(const fsdpc_config *c, char *buf, size_t cap);
/* Whether two paths name the same model folder (a config.json names its
 * folder; compared after resolving links and relative spellings). */
bool fsdpc__cfg_same_folder(const char *a, const char *b);

/* The reference page (docs/config.md) generated from the schema table. */
void fsdpc__config_schema_markdown(FILE *f);
/* One line per key: path, type, default, help. */
void fsdpc__config_schema_text(FILE *f);

#endif
