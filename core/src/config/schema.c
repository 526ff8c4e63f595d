/* The schema table: every config key, one row each.
 *
 * To add a key: add a field to the struct in config.h and a row here, in its
 * section (rows of one section must stay together: the dump nests by them).
 * To ship an option that was "not implemented": delete its NOT_IMPL(...) in
 * the row. That column is the single switch the loader checks. */
#include "config/schema.h"

#include <string.h>

/* Offset of field f, checked at compile time to have C type T, so a row can
 * never point at a field of the wrong type. */
#define FIELD_(f, T) _Generic(((fsdpc_config *)0)->f, T : offsetof(fsdpc_config, f))

#define ROW_(p, t, off, d, h, ...)                                                                 \
  { .path = p, .type = t, .offset = off, .def = d, .help = h, __VA_ARGS__ }
#define BOOL_(p, f, d, h, ...) ROW_(p, FSDPC_CFG_BOOL, FIELD_(f, bool), d, h, __VA_ARGS__)
#define INT_(p, f, d, h, ...) ROW_(p, FSDPC_CFG_INT, FIELD_(f, int64_t), d, h, __VA_ARGS__)
#define FLOAT_(p, f, d, h, ...) ROW_(p, FSDPC_CFG_FLOAT, FIELD_(f, double), d, h, __VA_ARGS__)
#define STR_(p, f, d, h, ...) ROW_(p, FSDPC_CFG_STRING, FIELD_(f, char *), d, h, __VA_ARGS__)
#define PATH_(p, f, d, h, ...) ROW_(p, FSDPC_CFG_PATH, FIELD_(f, char *), d, h, __VA_ARGS__)
#define ENUM_(p, f, d, e, h, ...)                                                                  \
  ROW_(p, FSDPC_CFG_ENUM, FIELD_(f, int), d, h, .enums = e, __VA_ARGS__)
#define FLOATS_(p, f, n, d, h, ...)                                                                \
  ROW_(p, FSDPC_CFG_FLOATS, FIELD_(f, double *), d, h, .list_len = n, __VA_ARGS__)
#define STRS_(p, f, d, h, ...)                                                                     \
  ROW_(p, FSDPC_CFG_STRINGS, FIELD_(f, fsdpc_strlist), d, h, __VA_ARGS__)
#define OPTS_(p, f, h) ROW_(p, FSDPC_CFG_OPTS, FIELD_(f, fsdpc_opts *), "{}", h, .flags = 0)
#define OPTS_LIST_(p, f, h)                                                                        \
  ROW_(p, FSDPC_CFG_OPTS_LIST, FIELD_(f, fsdpc_opts_list), "[]", h, .flags = 0)

/* Modifiers for the trailing arguments. Each range modifier sets .flags, so
 * a row takes at most one; rows that need more flags (required, derived)
 * set .min and .flags directly. */
#define MIN_(lo) .min = (lo), .flags = FSDPC_CFG_HAS_MIN
#define GT_(lo) .min = (lo), .flags = FSDPC_CFG_HAS_MIN | FSDPC_CFG_MIN_EXCL
#define RANGE_(lo, hi) .min = (lo), .max = (hi), .flags = FSDPC_CFG_HAS_MIN | FSDPC_CFG_HAS_MAX
#define RANGE_EXCL_(lo, hi)                                                                        \
  .min = (lo), .max = (hi), .flags = FSDPC_CFG_HAS_MIN | FSDPC_CFG_HAS_MAX | FSDPC_CFG_MAX_EXCL
#define HF_(name) .hf = name
#define NOT_IMPL(values) .unimpl = values
#define NONE_ .flags = 0

static const fsdpc_cfg_enum_item sharding_values[] = {{"FULL_SHARD", FSDPC_SHARD_FULL_SHARD},
                                                      {"SHARD_GRAD_OP", FSDPC_SHARD_SHARD_GRAD_OP},
                                                      {"NO_SHARD", FSDPC_SHARD_NO_SHARD},
                                                      {"HYBRID_SHARD", FSDPC_SHARD_HYBRID_SHARD},
                                                      {NULL, 0}};
/* The strategy names: this table is the only one (config/config.h). */
const char *fsdpc__strategy_name(fsdpc_strategy s) {
  for (const fsdpc_cfg_enum_item *it = sharding_values; it->name; it++)
    if (it->value == (int)s)
      return it->name;
  return "?";
}

int fsdpc__strategy_parse(const char *name) {
  for (const fsdpc_cfg_enum_item *it = sharding_values; name && it->name; it++)
    if (strcmp(it->name, name) == 0)
      return it->value;
  return -1;
}

static const fsdpc_cfg_enum_item dtype_values[] = {
    {"fp32", FSDPC_DTYPE_F32}, {"bf16", FSDPC_DTYPE_BF16}, {NULL, 0}};
/* Compute dtype: "auto" is the device's own (fp32 on the CPU, bf16 on CUDA). */
static const fsdpc_cfg_enum_item param_dtype_values[] = {
    {"auto", -1}, {"fp32", FSDPC_DTYPE_F32}, {"bf16", FSDPC_DTYPE_BF16}, {NULL, 0}};
static const fsdpc_cfg_enum_item state_dict_values[] = {
    {"FULL", FSDPC_STATE_DICT_FULL}, {"SHARDED", FSDPC_STATE_DICT_SHARDED}, {NULL, 0}};
/* fsdp.activation_checkpointing_policy: what the recompute does not redo */
/* fsdp.mixed_precision.linear: 0 = the compute dtype, 1 = fp8 (ops/fp8.h) */
static const fsdpc_cfg_enum_item linear_values[] = {{"bf16", 0}, {"fp8", 1}, {NULL, 0}};
static const fsdpc_cfg_enum_item fp8_recipe_values[] = {
    {"tensorwise", FSDPC_FP8_TENSORWISE}, {"rowwise", FSDPC_FP8_ROWWISE}, {NULL, 0}};
static const fsdpc_cfg_enum_item ac_policy_values[] = {
    {"full", FSDPC_AC_FULL}, {"save_mlp", FSDPC_AC_SAVE_MLP}, {NULL, 0}};
/* fsdp.keep_params: -1 = auto, else FSDPC_KEEP_* of runplan/runplan.h */
static const fsdpc_cfg_enum_item keep_values[] = {
    {"auto", -1}, {"none", 0}, {"first", 1}, {"all", 2}, {NULL, 0}};
static const fsdpc_cfg_enum_item rope_values[] = {{"none", FSDPC_ROPE_SCALING_NONE},
                                                  {"llama3", FSDPC_ROPE_SCALING_LLAMA3},
                                                  {"linear", FSDPC_ROPE_SCALING_LINEAR},
                                                  {"dynamic", FSDPC_ROPE_SCALING_DYNAMIC},
                                                  {"yarn", FSDPC_ROPE_SCALING_YARN},
                                                  {"longrope", FSDPC_ROPE_SCALING_LONGROPE},
                                                  {NULL, 0}};
/* model.model_type: the families of config/family.c */
static const fsdpc_cfg_enum_item family_values[] = {
    {"llama", FSDPC_FAMILY_LLAMA},        {"mistral", FSDPC_FAMILY_MISTRAL},
    {"qwen2", FSDPC_FAMILY_QWEN2},        {"qwen3", FSDPC_FAMILY_QWEN3},
    {"phi3", FSDPC_FAMILY_PHI3},          {"olmo2", FSDPC_FAMILY_OLMO2},
    {"granite", FSDPC_FAMILY_GRANITE},    {"gemma2", FSDPC_FAMILY_GEMMA2},
    {"gemma3_text", FSDPC_FAMILY_GEMMA3}, {NULL, 0}};
static const fsdpc_cfg_enum_item sched_values[] = {{"constant", FSDPC_SCHED_CONSTANT},
                                                   {"linear", FSDPC_SCHED_LINEAR},
                                                   {"cosine", FSDPC_SCHED_COSINE},
                                                   {NULL, 0}};
static const fsdpc_cfg_enum_item device_values[] = {
    {"cpu", FSDPC_DEVICE_CPU}, {"cuda", FSDPC_DEVICE_CUDA}, {NULL, 0}};
static const fsdpc_cfg_enum_item level_values[] = {{"error", FSDPC_LOG_ERROR},
                                                   {"warn", FSDPC_LOG_WARN},
                                                   {"info", FSDPC_LOG_INFO},
                                                   {"debug", FSDPC_LOG_DEBUG},
                                                   {NULL, 0}};
static const fsdpc_cfg_enum_item progress_values[] = {{"auto", FSDPC_PROGRESS_AUTO},
                                                      {"on", FSDPC_PROGRESS_ON},
                                                      {"off", FSDPC_PROGRESS_OFF},
                                                      {NULL, 0}};

static const fsdpc_cfg_enum_item format_values[] = {
    {"auto", 0}, {"text", 1},       {"instruction", 2}, {"prompt_completion", 3},
    {"chat", 4}, {"preference", 5}, {NULL, 0}}; /* FSDPC_FORMAT_* */
static const fsdpc_cfg_enum_item train_on_values[] = {
    {"assistant", 0}, {"all", 1}, {"last_assistant", 2}, {NULL, 0}}; /* FSDPC_TRAIN_ON_* */
static const fsdpc_cfg_enum_item packing_values[] = {
    {"auto", -1}, {"window", 0}, {"examples", 1}, {"none", 2}, {NULL, 0}}; /* FSDPC_PACK_* */
static const fsdpc_cfg_enum_item reference_values[] = {
    {"auto", 0}, {"precompute", 1}, {NULL, 0}}; /* FSDPC_OBJ_REF_* */
static const fsdpc_cfg_enum_item overlong_values[] = {
    {"truncate", 0}, {"drop", 1}, {NULL, 0}}; /* FSDPC_DATA_OVERLONG_* */

static const fsdpc_cfg_enum_item peft_values[] = {
    {"none", FSDPC_PEFT_NONE}, {"lora", FSDPC_PEFT_LORA}, {NULL, 0}};

static const fsdpc_cfg_enum_item quant_values[] = {
    {"none", FSDPC_QUANT_NONE}, {"nf4", FSDPC_QUANT_NF4}, {NULL, 0}};

#define REQ_ FSDPC_CFG_REQUIRED | FSDPC_CFG_HAS_MIN

static const fsdpc_cfg_key keys[] = {
    /* ---- model ---- */
    PATH_("model.from", model.from, "",
          "Hugging Face model folder that supplies the shape (config.json), the weights and, "
          "when it ships one, the tokenizer: model.config, model.init.from and data.tokenizer in "
          "one key; shape keys given here must match the folder; \"\" = none",
          NONE_),
    PATH_("model.config", model.config, "",
          "Hugging Face config.json (or its folder) for the shape keys below that are not given "
          "here: the shape only, the weights start random (said at start; model.from takes the "
          "weights too); \"\" = none",
          NONE_),
    ENUM_("model.model_type", model.model_type, "llama", family_values,
          "decoder family (docs/model.md): its tensor names and the switches it fixes",
          HF_("model_type")),
    INT_("model.vocab_size", model.vocab_size, NULL, "vocabulary size", .min = 1, .max = 1 << 24,
         .flags = REQ_ | FSDPC_CFG_HAS_MAX, HF_("vocab_size")),
    INT_("model.hidden_size", model.hidden_size, NULL, "width of the residual stream", .min = 1,
         .max = 1 << 17, .flags = REQ_ | FSDPC_CFG_HAS_MAX, HF_("hidden_size")),
    INT_("model.intermediate_size", model.intermediate_size, NULL, "width of the SwiGLU MLP",
         .min = 1, .max = 1 << 20, .flags = REQ_ | FSDPC_CFG_HAS_MAX, HF_("intermediate_size")),
    INT_("model.num_hidden_layers", model.num_hidden_layers, NULL, "number of decoder layers",
         .min = 1, .max = 1 << 17, .flags = REQ_ | FSDPC_CFG_HAS_MAX, HF_("num_hidden_layers")),
    INT_("model.num_attention_heads", model.num_attention_heads, NULL, "query heads", .min = 1,
         .max = 1 << 12, .flags = REQ_ | FSDPC_CFG_HAS_MAX, HF_("num_attention_heads")),
    INT_("model.num_key_value_heads", model.num_key_value_heads, "num_attention_heads",
         "key/value heads (grouped-query attention); must divide num_attention_heads", .min = 1,
         .max = 1 << 12, .flags = FSDPC_CFG_DERIVED | FSDPC_CFG_HAS_MIN | FSDPC_CFG_HAS_MAX,
         HF_("num_key_value_heads")),
    INT_("model.head_dim", model.head_dim, "hidden_size / num_attention_heads",
         "size of one attention head", .min = 1, .max = 1 << 12,
         .flags = FSDPC_CFG_DERIVED | FSDPC_CFG_HAS_MIN | FSDPC_CFG_HAS_MAX, HF_("head_dim")),
    INT_("model.max_position_embeddings", model.max_position_embeddings, "2048",
         "longest sequence the position encoding is set up for", RANGE_(1, 1 << 24),
         HF_("max_position_embeddings")),
    FLOAT_("model.rms_norm_eps", model.rms_norm_eps, "1e-5", "epsilon of RMSNorm", .min = 0,
           .max = 1, .flags = FSDPC_CFG_HAS_MIN | FSDPC_CFG_MIN_EXCL | FSDPC_CFG_HAS_MAX,
           HF_("rms_norm_eps")),
    FLOAT_("model.rope_theta", model.rope_theta, "10000", "RoPE base frequency", GT_(0),
           HF_("rope_theta")),
    ENUM_("model.rope_scaling.type", model.rope_scaling.type, "none", rope_values,
          "RoPE frequency scaling (llama3 = Llama 3.1 long-context scaling)",
          HF_("rope_scaling.rope_type")),
    FLOAT_("model.rope_scaling.factor", model.rope_scaling.factor, "8", "llama3 scaling factor",
           GT_(0), HF_("rope_scaling.factor")),
    FLOAT_("model.rope_scaling.low_freq_factor", model.rope_scaling.low_freq_factor, "1",
           "llama3 low-frequency factor", GT_(0), HF_("rope_scaling.low_freq_factor")),
    FLOAT_("model.rope_scaling.high_freq_factor", model.rope_scaling.high_freq_factor, "4",
           "llama3 high-frequency factor", GT_(0), HF_("rope_scaling.high_freq_factor")),
    INT_("model.rope_scaling.original_max_position_embeddings",
         model.rope_scaling.original_max_position_embeddings, "8192",
         "context length the model was pre-trained with (llama3; yarn and longrope: "
         "max_position_embeddings when unset)",
         MIN_(1), HF_("rope_scaling.original_max_position_embeddings")),
    FLOAT_("model.rope_scaling.attention_factor", model.rope_scaling.attention_factor, "0",
           "yarn/longrope scale of cos and sin; 0 = derived from the factor", MIN_(0),
           HF_("rope_scaling.attention_factor")),
    FLOAT_("model.rope_scaling.beta_fast", model.rope_scaling.beta_fast, "0",
           "yarn: rotations where extrapolation starts; 0 = 32", MIN_(0),
           HF_("rope_scaling.beta_fast")),
    FLOAT_("model.rope_scaling.beta_slow", model.rope_scaling.beta_slow, "0",
           "yarn: rotations where interpolation ends; 0 = 1", MIN_(0),
           HF_("rope_scaling.beta_slow")),
    FLOAT_("model.rope_scaling.mscale", model.rope_scaling.mscale, "0",
           "yarn: attention factor numerator scale; 0 = unset", MIN_(0),
           HF_("rope_scaling.mscale")),
    FLOAT_("model.rope_scaling.mscale_all_dim", model.rope_scaling.mscale_all_dim, "0",
           "yarn: attention factor denominator scale; 0 = unset", MIN_(0),
           HF_("rope_scaling.mscale_all_dim")),
    BOOL_("model.rope_scaling.truncate", model.rope_scaling.truncate, "true",
          "yarn: round the correction range to whole dims", HF_("rope_scaling.truncate")),
    STRS_("model.rope_scaling.short_factor", model.rope_scaling.short_factor, "[]",
          "longrope: per-frequency factors (rotary dims / 2 numbers) for short sequences",
          HF_("rope_scaling.short_factor")),
    STRS_("model.rope_scaling.long_factor", model.rope_scaling.long_factor, "[]",
          "longrope: per-frequency factors for sequences past original_max_position_embeddings",
          HF_("rope_scaling.long_factor")),
    BOOL_("model.tie_word_embeddings", model.tie_word_embeddings, "false",
          "lm_head shares the embedding matrix", HF_("tie_word_embeddings")),
    BOOL_("model.attention_bias", model.attention_bias, "false",
          "q/k/v/o projection biases (llama, qwen3, olmo2, granite; qwen2 always has q/k/v "
          "biases)",
          HF_("attention_bias")),
    BOOL_("model.mlp_bias", model.mlp_bias, "false",
          "gate/up/down projection biases (llama, granite)", HF_("mlp_bias")),
    INT_("model.sliding_window", model.sliding_window, "-1",
         "sliding attention window in tokens (mistral, phi3; qwen2/qwen3 with "
         "use_sliding_window); 0 = none; -1 = the family's default",
         MIN_(-1), HF_("sliding_window")),
    BOOL_("model.use_sliding_window", model.use_sliding_window, "false",
          "qwen2/qwen3: the layers from max_window_layers on use sliding_window",
          HF_("use_sliding_window")),
    INT_("model.max_window_layers", model.max_window_layers, "-1",
         "qwen2/qwen3: layers below it attend fully; -1 = the family's default (28)", MIN_(-1),
         HF_("max_window_layers")),
    STRS_("model.layer_types", model.layer_types, "[]",
          "full_attention or sliding_attention per layer (qwen2/qwen3/gemma2/gemma3_text); [] = "
          "derived",
          HF_("layer_types")),
    FLOAT_("model.partial_rotary_factor", model.partial_rotary_factor, "1",
           "phi3: fraction of each head's dims that RoPE turns", RANGE_(0, 1),
           HF_("partial_rotary_factor")),
    FLOAT_("model.embedding_multiplier", model.embedding_multiplier, "1",
           "granite: embeddings are scaled by it", GT_(0), HF_("embedding_multiplier")),
    FLOAT_("model.residual_multiplier", model.residual_multiplier, "1",
           "granite: attention and MLP outputs are scaled by it before the residual add", GT_(0),
           HF_("residual_multiplier")),
    FLOAT_("model.attention_multiplier", model.attention_multiplier, "1",
           "granite: the attention softmax scale (instead of 1/sqrt(head_dim))", GT_(0),
           HF_("attention_multiplier")),
    FLOAT_("model.logits_scaling", model.logits_scaling, "1", "granite: logits are divided by it",
           GT_(0), HF_("logits_scaling")),
    FLOAT_("model.query_pre_attn_scalar", model.query_pre_attn_scalar, "-1",
           "gemma2/gemma3_text: the attention softmax scale is its -1/2 power; -1 = the "
           "family's default (256)",
           MIN_(-1), HF_("query_pre_attn_scalar")),
    FLOAT_("model.attn_logit_softcapping", model.attn_logit_softcapping, "-1",
           "gemma2/gemma3_text: attention scores become c tanh(s / c); 0 (or null) = none; "
           "-1 = the family's default (gemma2 50, gemma3_text none)",
           MIN_(-1), HF_("attn_logit_softcapping")),
    FLOAT_("model.final_logit_softcapping", model.final_logit_softcapping, "-1",
           "gemma2/gemma3_text: logits become c tanh(z / c); 0 (or null) = none; -1 = the "
           "family's default (gemma2 30, gemma3_text none)",
           MIN_(-1), HF_("final_logit_softcapping")),
    STR_("model.hidden_activation", model.hidden_activation, "gelu_pytorch_tanh",
         "gemma2/gemma3_text: the MLP's gate activation (only gelu_pytorch_tanh is computed)",
         HF_("hidden_activation")),
    FLOAT_("model.rope_local_base_freq", model.rope_local_base_freq, "10000",
           "gemma3_text: the RoPE base of the sliding_attention layers (plain RoPE; rope_theta "
           "and rope_scaling are the full_attention layers')",
           GT_(0), HF_("rope_local_base_freq")),
    INT_("model.sliding_window_pattern", model.sliding_window_pattern, "6",
         "gemma3_text without layer_types: layer i attends fully when (i + 1) is a multiple of "
         "it, the others through sliding_window",
         RANGE_(1, 1 << 20), HF_("sliding_window_pattern")),
    INT_("model.bos_token_id", model.bos_token_id, "-1", "beginning-of-sequence token; -1 = none",
         MIN_(-1), HF_("bos_token_id")),
    INT_("model.eos_token_id", model.eos_token_id, "-1",
         "end-of-sequence token (the first one when config.json lists several); -1 = none",
         MIN_(-1), HF_("eos_token_id")),
    PATH_("model.init.from", model.init.from, "",
          "Hugging Face folder (config.json + safetensors) to start from; each rank reads only "
          "its own shards; alone (no model.config) it also supplies the shape and the tokenizer, "
          "as model.from; \"\" = random init",
          NONE_),
    FLOAT_("model.init.std", model.init.std, "0.02", "standard deviation of the random init",
           MIN_(0)),
    PATH_("model.adapter", model.adapter, "",
          "PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) merged into "
          "the weights as they load (W += s B A); alone, its base_model_name_or_path is the model "
          "folder (as model.from); \"\" = none",
          NONE_),

    /* ---- data ---- */
    PATH_("data.train", data.train, "",
          "training data; needed by `fsdpc train` (checked there, not at load)", NONE_),
    PATH_("data.eval", data.eval, "", "evaluation data; \"\" = none (see eval_fraction)", NONE_),
    STR_("data.tokenizer", data.tokenizer, "byte",
         "tokenizer for generation prompts and output, and for preparing a JSONL data.train: "
         "byte, or a Hugging Face tokenizer.json (or the model folder holding it)",
         NONE_),
    INT_("data.seq_len", data.seq_len, "512", "tokens per sequence", RANGE_(1, 1048576)),
    BOOL_("data.shuffle", data.shuffle, "true", "shuffle training sequences each epoch", NONE_),
    INT_("data.seed", data.seed, "-1", "data order seed; -1 = train.seed",
         RANGE_(-1, 4294967295.0)),
    BOOL_("data.document_masking", data.document_masking, "false",
          "attend only within each packed document", NONE_),
    FLOAT_("data.eval_fraction", data.eval_fraction, "0.0",
           "fraction of data.train held out for eval when data.eval is \"\"", RANGE_(0, 0.5)),
    ENUM_("data.format", data.format, "auto", format_values,
          "format of a JSONL data.train (prepared on the fly and cached in data.cache_dir): "
          "text, instruction, prompt_completion, chat, preference (pairs for dpo and its "
          "family); auto = detected from the first example",
          NONE_),
    STR_("data.text_field", data.text_field, "text", "text format: the field holding the document",
         NONE_),
    STR_("data.prompt_field", data.prompt_field, "prompt", "prompt_completion: prompt field",
         NONE_),
    STR_("data.completion_field", data.completion_field, "completion",
         "prompt_completion: completion field (trained)", NONE_),
    STR_("data.instruction_field", data.instruction_field, "instruction",
         "instruction format: instruction field", NONE_),
    STR_("data.input_field", data.input_field, "input", "instruction format: optional input field",
         NONE_),
    STR_("data.output_field", data.output_field, "output",
         "instruction format: response field (trained)", NONE_),
    STR_("data.system_field", data.system_field, "system",
         "instruction format: optional system prompt field", NONE_),
    STR_("data.messages_field", data.messages_field, "messages",
         "chat format: list of {role, content} (or ShareGPT {from, value}; 'conversations' "
         "is tried when 'messages' is absent)",
         NONE_),
    ENUM_("data.train_on", data.train_on, "assistant", train_on_values,
          "chat: what is trained: assistant turns, last_assistant, or all of the text; an "
          "assistant message with \"train\": false or \"weight\": 0 is not",
          NONE_),
    PATH_("data.chat_template", data.chat_template, "",
          "Jinja chat template file; \"\" = the model's own (tokenizer_config.json or "
          "chat_template.jinja beside data.tokenizer); also renders instruction and "
          "prompt_completion data when set",
          NONE_),
    STR_("data.chat_template_name", data.chat_template_name, "",
         "which of several named templates in tokenizer_config.json; \"\" = default", NONE_),
    OPTS_("data.template_kwargs", data.template_kwargs,
          "chat: extra variables for the chat template (enable_thinking: false, ...), as "
          "apply_chat_template's kwargs; an example's chat_template_kwargs win"),
    BOOL_("data.train_on_reasoning", data.train_on_reasoning, "true",
          "chat: train on the reasoning of assistant turns (reasoning_content / thinking); "
          "true as TRL's SFT",
          NONE_),
    BOOL_("data.skip_bad_examples", data.skip_bad_examples, "false",
          "skip (and count) malformed or invalid JSONL examples instead of failing", NONE_),
    ENUM_("data.packing", data.packing, "auto", packing_values,
          "examples: whole examples packed into seq_len rows (document masking, positions "
          "restart); none: one example per row; window: a token stream cut every seq_len; "
          "auto = examples for prepared (JSONL) data, window otherwise",
          NONE_),
    ENUM_("data.overlong", data.overlong, "truncate", overlong_values,
          "packing examples/none: an example longer than seq_len is truncated or dropped", NONE_),
    PATH_("data.cache_dir", data.cache_dir, "",
          "folder of prepared JSONL data, reused while its inputs are unchanged (keyed by "
          "content); each node writes its own; \"\" = log.dir/data-cache",
          NONE_),
    INT_("data.max_line_bytes", data.max_line_bytes, "33554432",
         "longest JSONL line (or JSON-array element) in bytes; a line costs about 30 times its "
         "size in memory while it is converted",
         RANGE_(1024, 4294967296.0)),
    INT_("data.max_input_bytes", data.max_input_bytes, "1099511627776",
         "largest JSONL file after decompression, in bytes (a .gz that expands without end)",
         RANGE_(1, 1125899906842624.0)),
    OPTS_LIST_("data.datasets", data.datasets,
               "datasets mixed by weight instead of data.train: [{path, weight, format, "
               "train_on, chat_template, *_field, skip_bad_examples}], keys not given follow "
               "data.*; weights 3 and 1 train on 3 examples of the first per example of the "
               "second"),

    /* ---- fsdp ---- */
    ENUM_("fsdp.sharding_strategy", fsdp.sharding_strategy, "FULL_SHARD", sharding_values,
          "what is sharded: params+grads+optimizer (FULL_SHARD), grads+optimizer "
          "(SHARD_GRAD_OP), nothing (NO_SHARD), FULL_SHARD within groups (HYBRID_SHARD)",
          NONE_),
    INT_("fsdp.hybrid_shard_size", fsdp.hybrid_shard_size, "0",
         "ranks per shard group for HYBRID_SHARD; 0 = ranks per node", MIN_(0)),
    STR_("fsdp.wrap.policy", fsdp.wrap.policy, "transformer",
         "wrap plugin that decides FSDP unit boundaries (transformer, size, or any installed)",
         NONE_),
    OPTS_("fsdp.wrap.options", fsdp.wrap.options, "options of the wrap plugin"),
    ENUM_("fsdp.mixed_precision.param_dtype", fsdp.mixed_precision.param_dtype, "auto",
          param_dtype_values,
          "dtype of gathered parameters and activations: auto = fp32 on the CPU, bf16 on CUDA "
          "(the only ones each device computes in)",
          NONE_),
    ENUM_("fsdp.mixed_precision.reduce_dtype", fsdp.mixed_precision.reduce_dtype, "fp32",
          dtype_values,
          "dtype of gradient reduce-scatter / replica all-reduce; bf16 (CUDA only) halves the "
          "traffic, grads still accumulate in fp32",
          NONE_),
    ENUM_("fsdp.mixed_precision.logits_dtype", fsdp.mixed_precision.logits_dtype, "auto",
          param_dtype_values,
          "dtype the lm_head GEMM writes its logits in (accumulating in fp32 either way) "
          "before the fp32 softmax cross-entropy: auto = fp32 on the CPU (the reference), bf16 "
          "on CUDA, what transformers, torchtune and TRL compute with a bf16 model (a bf16 "
          "lm_head, then .float()): on CUDA bf16 needs a third of the loss's scratch and is "
          "faster, fp32 keeps the GEMM's full precision; bf16 on the CPU rounds its fp32 "
          "logits to bf16 values",
          NONE_),
    ENUM_("fsdp.mixed_precision.linear", fsdp.mixed_precision.linear, "bf16", linear_values,
          "the decoder layers' linear projections (q, k, v, o, gate, up, down; not the lm_head, "
          "attention or LoRA adapters): bf16 = GEMMs in the compute dtype (fp32 on the CPU); "
          "fp8 = both operands of each GEMM (forward, input and weight gradients) scaled to FP8 "
          "with fp32 accumulation (docs/cuda.md): cuBLASLt on CUDA, emulated in fp32 on the CPU",
          NONE_),
    ENUM_("fsdp.mixed_precision.fp8_recipe", fsdp.mixed_precision.fp8_recipe, "tensorwise",
          fp8_recipe_values,
          "scaling with linear: fp8, as torchao's recipes: tensorwise = one dynamic scale per "
          "tensor (448 / amax), E4M3 input and weight, E5M2 output gradient; rowwise = a scale "
          "per row of each GEMM's left operand and per column of its right one, rounded down "
          "to a power of two, E4M3 throughout",
          NONE_),
    BOOL_("fsdp.activation_checkpointing", fsdp.activation_checkpointing, "false",
          "recompute each decoder layer's activations in backward", NONE_),
    ENUM_("fsdp.activation_checkpointing_policy", fsdp.activation_checkpointing_policy, "full",
          ac_policy_values,
          "with activation_checkpointing: full keeps only each layer's input and recomputes "
          "its forward up to the down projection; save_mlp also keeps each layer's gate and "
          "up projections (2 x micro-batch tokens x intermediate_size values a layer, in the "
          "compute dtype), so that the recompute skips their GEMMs (about two thirds of its "
          "FLOPs); with LoRA on gate_proj or up_proj those are still recomputed",
          NONE_),
    BOOL_("fsdp.cpu_offload", fsdp.cpu_offload, "false",
          "CUDA: keep master, grad and optimizer shards in pinned host memory and run the "
          "optimizer on the CPU, on a host thread that overlaps the GPU unit by unit (the "
          "device holds only gathered units, activations and comm buffers); includes "
          "fsdp.offload.optimizer; on the CPU device the shards stay where they are and only "
          "the overlapped schedule runs",
          NONE_),
    BOOL_("fsdp.param_copy", fsdp.param_copy, "false",
          "CUDA: keep a bf16 copy of each parameter shard, written by the optimizer step in "
          "its own pass, so gathers need no fp32->bf16 cast (at world 1: no gather at all); "
          "costs 2 bytes per shard element of device memory; ignored on the CPU and with "
          "cpu_offload",
          NONE_),
    INT_("fsdp.param_copy_max_mib", fsdp.param_copy_max_mib, "0",
         "with fsdp.param_copy: at most this many MiB of copies, given to units in order "
         "(embedding, layers, head) while they fit; the others cast at each gather as without "
         "it; 0 = every unit (see fsdpc plan for the memory left)",
         MIN_(0)),
    /* Prefetch and overlap happen on GPUs (collectives on a second stream);
     * CPU collectives block, so there the keys change nothing. */
    BOOL_("fsdp.forward_prefetch", fsdp.forward_prefetch, "true",
          "GPU: issue the next unit's all-gather before computing the current one", NONE_),
    BOOL_("fsdp.backward_prefetch", fsdp.backward_prefetch, "true",
          "GPU: issue the previous unit's all-gather before the current backward", NONE_),
    INT_("fsdp.max_inflight_allgathers", fsdp.max_inflight_allgathers, "2",
         "gathered units in flight at once: the current one and one prefetched",
         .flags = FSDPC_CFG_HAS_MIN | FSDPC_CFG_HAS_MAX, .min = 1, .max = 8, NOT_IMPL("*")),
    BOOL_("fsdp.no_sync", fsdp.no_sync, "false",
          "keep full gradients across micro-batches and reduce once (more memory)", NONE_),
    ENUM_("fsdp.state_dict_type", fsdp.state_dict_type, "SHARDED", state_dict_values,
          "PyTorch spelling of checkpoint.intermediate_format (FULL = full, SHARDED = sharded); "
          "used only when that key is not set, an error when both are set and differ",
          NONE_),
    INT_("fsdp.align", fsdp.align, "16", "flat buffer padding, in elements", RANGE_(1, 4096)),
    BOOL_("fsdp.fit_check", fsdp.fit_check, "true",
          "CUDA: before any work, compare the memory plan (`fsdpc plan`) with the device's free "
          "memory and refuse, in one line naming the options that fit, a run that does not "
          "fit; false skips the check, and a run that does not fit fails when it reserves its "
          "arena (cuda: out of memory for the planned arena)",
          NONE_),
    BOOL_("fsdp.offload.optimizer", fsdp.offload.optimizer, "false",
          "keep the optimizer state in pinned host memory and stream it through two device "
          "buffers per unit for the update (masters and grads stay on the device); "
          "fsdp.cpu_offload (everything on the host, optimizer on the CPU) includes it",
          NONE_),
    FLOAT_("fsdp.offload.buffer_mib", fsdp.offload.buffer_mib, "512",
           "fsdp.offload.optimizer: MiB of each of the two device buffers the state streams "
           "through; a unit's state larger than one goes in pieces",
           RANGE_(0.015625, 1048576)),
    ENUM_("fsdp.keep_params", fsdp.keep_params, "auto", keep_values,
          "gathered units a micro-batch leaves for the next one of the same optimizer step "
          "(parameters do not change inside a step): none; first = the units of the first two "
          "blocks (the embedding's, the first layer's: the next forward's first gathers); all = "
          "every unit, gathered once per step (device memory of all gathered units); auto = "
          "first with fsdp.cpu_offload on a device, else none",
          NONE_),

    /* ---- collectives ---- */
    STR_("collectives.impl", collectives.impl, "auto",
         "collectives plugin (gloo, nccl, any installed); auto = best that supports the run",
         NONE_),
    INT_("collectives.timeout_s", collectives.timeout_s, "300",
         "seconds before a collective is declared hung", RANGE_(1, 86400)),
    OPTS_("collectives.options", collectives.options, "options of the collectives plugin"),
    FLOAT_("dist.term_grace_s", dist.term_grace_s, "25",
           "seconds the launcher gives ranks between SIGTERM and SIGKILL (a save under way gets "
           "more); SLURM's KillWait and Kubernetes give 30",
           RANGE_(0.1, 3600)),
    FLOAT_("dist.heartbeat_timeout_s", dist.heartbeat_timeout_s, "10",
           "seconds a rank's heartbeat (or, seen from another node, the store) may stand still "
           "before the job fails naming it: a stopped, frozen or cut-off process or node",
           RANGE_(0.5, 3600)),

    /* ---- attention ---- */
    STR_("attention.impl", attention.impl, "auto",
         "attention plugin (naive, flash, any installed); auto = best that supports the run",
         NONE_),
    OPTS_("attention.options", attention.options, "options of the attention plugin"),

    /* ---- optim ---- */
    STR_("optim.name", optim.name, "adamw",
         "optimizer plugin (adamw, adamw8bit, sgd, any installed)", NONE_),
    FLOAT_("optim.lr", optim.lr, "3e-4", "peak learning rate", MIN_(0)),
    FLOAT_("optim.weight_decay", optim.weight_decay, "0.0", "decoupled weight decay", MIN_(0)),
    FLOATS_("optim.betas", optim.betas, 2, "[0.9, 0.999]", "Adam beta1, beta2", RANGE_EXCL_(0, 1)),
    FLOAT_("optim.eps", optim.eps, "1e-8", "Adam epsilon", MIN_(0)),
    FLOAT_("optim.momentum", optim.momentum, "0.0", "SGD momentum", RANGE_EXCL_(0, 1)),
    BOOL_("optim.nesterov", optim.nesterov, "false", "SGD Nesterov momentum (needs momentum > 0)",
          NONE_),
    BOOL_("optim.decay_norm_and_bias", optim.decay_norm_and_bias, "false",
          "also apply weight decay to norm weights and biases", NONE_),
    BOOL_("optim.in_backward", optim.in_backward, "false",
          "run each unit's optimizer update during the backward, as soon as its gradients are "
          "reduced, and drop its gradient shard then (no persistent gradient shards; torchtune's "
          "optimizer_in_bwd): needs train.max_grad_norm 0 and one micro-batch a step; see "
          "docs/fsdp.md",
          NONE_),
    OPTS_("optim.options", optim.options,
          "options of the optimizer plugin (adamw8bit: min_8bit_size, default 4096; sgd: "
          "dampening; see docs/optim.md)"),

    /* ---- objective ---- */
    STR_("objective.name", objective.name, "sft",
         "training objective plugin (sft, dpo, ipo, hinge, simpo, orpo, any installed); see "
         "docs/objectives.md",
         NONE_),
    FLOAT_("objective.beta", objective.beta, "0.1",
           "preference objectives: temperature of the implicit reward (ORPO: lambda)", GT_(0)),
    FLOAT_("objective.label_smoothing", objective.label_smoothing, "0.0",
           "dpo, simpo: assumed rate of flipped preference labels (conservative DPO)",
           RANGE_(0, 0.49)),
    FLOAT_("objective.gamma", objective.gamma, "0.5", "simpo: target reward margin", MIN_(0)),
    ENUM_("objective.reference", objective.reference, "auto", reference_values,
          "preference objectives with a reference: auto = the base model with the LoRA adapters "
          "off (a full fine-tune is refused); precompute = every step's reference log-probs "
          "from the initial weights in a pass before the first step",
          NONE_),
    OPTS_("objective.options", objective.options, "options of the objective plugin"),

    /* ---- schedule ---- */
    ENUM_("schedule.name", schedule.name, "cosine", sched_values,
          "learning-rate decay after warmup", NONE_),
    INT_("schedule.warmup_steps", schedule.warmup_steps, "0", "linear warmup steps", MIN_(0)),
    FLOAT_("schedule.warmup_ratio", schedule.warmup_ratio, "0.0",
           "warmup as a fraction of train.max_steps (instead of warmup_steps)", RANGE_(0, 1)),
    FLOAT_("schedule.min_lr", schedule.min_lr, "0.0", "learning rate at the end of decay", MIN_(0)),
    FLOAT_("schedule.min_lr_ratio", schedule.min_lr_ratio, "0.0",
           "min_lr as a fraction of optim.lr (instead of min_lr)", RANGE_(0, 1)),

    /* ---- train ---- */
    INT_("train.max_steps", train.max_steps, "100", "optimizer steps to run", MIN_(1)),
    INT_("train.epochs", train.epochs, "0",
         "passes over the training data; > 0 sets max_steps to epochs x steps per epoch", MIN_(0)),
    INT_("train.micro_batch_size", train.micro_batch_size, "1",
         "sequences per rank per forward/backward", MIN_(1)),
    INT_("train.grad_accum_steps", train.grad_accum_steps, "1",
         "micro-batches accumulated per optimizer step", MIN_(1)),
    INT_("train.global_batch_size", train.global_batch_size, "0",
         "sequences per optimizer step; 0 = micro_batch_size * grad_accum_steps * data-parallel "
         "ranks (checked against them when set)",
         MIN_(0)),
    FLOAT_("train.max_grad_norm", train.max_grad_norm, "1.0",
           "clip the global gradient norm to this; 0 = no clipping", MIN_(0)),
    INT_("train.seed", train.seed, "42", "seed for weight init (and data order unless data.seed)",
         RANGE_(0, 4294967295.0)),
    INT_("train.eval_every", train.eval_every, "0", "evaluate every N steps; 0 = never", MIN_(0)),
    INT_("train.eval_batches", train.eval_batches, "0",
         "global batches per evaluation, the last one smaller when the data ends inside it; 0 = "
         "every example of the eval data (then eval_loss does not depend on the batch size or "
         "the world size)",
         MIN_(0)),
    INT_("train.log_every", train.log_every, "1", "log every N steps", MIN_(1)),
    ENUM_("train.device", train.device, "cpu", device_values,
          "where compute runs (cuda: one GPU per local rank)", NONE_),
    INT_("train.threads", train.threads, "0", "CPU threads per rank; 0 = all cores",
         RANGE_(0, 1024)),
    INT_("train.gemm_sm_margin", train.gemm_sm_margin, "0",
         "CUDA: multiprocessors the GEMMs leave free for the collectives running beside them "
         "(cuBLASLt SM count target); 0 = GEMMs may use every SM",
         MIN_(0)),
    STRS_("train.generate_prompts", train.generate_prompts, "[]",
          "prompts to sample from after training (greedy)", NONE_),
    INT_("train.generate_tokens", train.generate_tokens, "32",
         "tokens to generate per prompt; 0 = no samples", MIN_(0)),

    /* ---- checkpoint ---- */
    PATH_("checkpoint.dir", checkpoint.dir, "", "folder for checkpoints; \"\" = none are written",
          NONE_),
    INT_("checkpoint.save_steps", checkpoint.save_steps, "0",
         "save an intermediate checkpoint every N steps; 0 = never", MIN_(0)),
    INT_("checkpoint.keep", checkpoint.keep, "2", "intermediate checkpoints kept; 0 = all",
         MIN_(0)),
    STR_("checkpoint.resume", checkpoint.resume, "none",
         "none, auto (latest in checkpoint.dir) or a checkpoint folder", NONE_),
    STR_("checkpoint.intermediate_format", checkpoint.intermediate_format, "sharded",
         "statedict plugin for intermediate checkpoints (every save_steps, and on SIGTERM/SIGUSR1)",
         NONE_),
    STR_("checkpoint.final_format", checkpoint.final_format, "full",
         "statedict plugin for the final checkpoint, written to checkpoint.dir/final", NONE_),
    ENUM_("checkpoint.final_dtype", checkpoint.final_dtype, "bf16", dtype_values,
          "dtype of weights in the final checkpoint", NONE_),
    OPTS_("checkpoint.options", checkpoint.options, "options of the statedict plugins"),
    BOOL_("checkpoint.allow_nonfinite", checkpoint.allow_nonfinite, "false",
          "load a checkpoint whose weights or optimizer state hold NaN/Inf (refused by default, "
          "naming the tensor)",
          NONE_),
    FLOAT_("checkpoint.write_mib_s", checkpoint.write_mib_s, "0",
           "MiB/s a save writes per rank, for the start-up warning that a save may not fit "
           "dist.term_grace_s; 0 = measure it (a probe write in checkpoint.dir, when the save "
           "exceeds 10 MiB/s x the grace)",
           RANGE_(0, 1e6)),
    FLOAT_("checkpoint.divergence_factor", checkpoint.divergence_factor, "2",
           "a checkpoint whose mean loss over the last 10 steps is above this x the run's best "
           "such mean is diverging: rotation (checkpoint.keep) never deletes the newest one "
           "that is not; 0 = off",
           RANGE_(0, 1e6)),

    /* ---- log ---- */
    PATH_("log.dir", log.dir, "out", "folder for logs, metrics and (by default) checkpoints",
          NONE_),
    ENUM_("log.level", log.level, "info", level_values, "log verbosity", NONE_),
    ENUM_("log.progress", log.progress, "auto", progress_values,
          "progress line on the terminal (auto = when stderr is a terminal)", NONE_),
    INT_("log.memory_every", log.memory_every, "0",
         "log memory per category every N steps; 0 = only at start and end", MIN_(0)),
    BOOL_("log.tensorboard", log.tensorboard, "false",
          "also write TensorBoard event files (scalars) under log.dir", NONE_),

    /* ---- plugins ---- */
    STRS_("plugins.paths", plugins.paths, "[]",
          "extra folders (or .so files) searched for plugins first", NONE_),

    /* ---- peft (docs/lora.md) ---- */
    ENUM_("peft.method", peft.method, "none", peft_values,
          "none: every weight trains; lora: the base is frozen and low-rank adapters train", NONE_),
    INT_("peft.r", peft.r, "8", "LoRA rank (PEFT's r)", RANGE_(1, 4096)),
    FLOAT_("peft.alpha", peft.alpha, "8", "LoRA alpha (PEFT's lora_alpha): scaling alpha / r",
           GT_(0)),
    FLOAT_("peft.dropout", peft.dropout, "0.0",
           "dropout on the adapters' input (PEFT's lora_dropout), masks seeded by train.seed",
           RANGE_EXCL_(0, 1)),
    STRS_("peft.target_modules", peft.target_modules, "[q_proj, v_proj]",
          "projections that get adapters: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
          "down_proj, or all-linear (all seven)",
          NONE_),
    BOOL_("peft.rslora", peft.rslora, "false", "rank-stabilised scaling alpha / sqrt(r)", NONE_),
    BOOL_("peft.merge_on_save", peft.merge_on_save, "false",
          "also write the merged full model (checkpoint.dir/final-merged) beside the adapter "
          "folder",
          NONE_),

    /* ---- quantization (docs/lora.md, QLoRA) ---- */
    ENUM_("quantization.method", quantization.method, "none", quant_values,
          "none: the frozen base stays in the compute dtype; nf4: its linear projections are "
          "held as bitsandbytes' 4-bit NormalFloat (transformers' load_in_4bit with "
          "bnb_4bit_quant_type nf4); needs peft.method lora; not with fsdp.cpu_offload "
          "(docs/lora.md)",
          NONE_),
    BOOL_("quantization.double_quant", quantization.double_quant, "true",
          "quantize the per-block scales too, to 8 bits in blocks of 256 "
          "(bnb_4bit_use_double_quant, QLoRA's recipe; transformers defaults to false)",
          NONE_),
    INT_("quantization.block_size", quantization.block_size, "64",
         "weights per fp32 scale (bitsandbytes' blocksize): 32, 64, ..., 4096", RANGE_(32, 4096)),
    ENUM_("quantization.compute_dtype", quantization.compute_dtype, "auto", param_dtype_values,
          "dtype the 4-bit weights are dequantized to for the GEMM (bnb_4bit_compute_dtype): "
          "auto = the run's compute dtype (fsdp.mixed_precision.param_dtype), the only one "
          "it can be",
          NONE_),
};

const fsdpc_cfg_key *fsdpc__cfg_keys(int *n) {
  *n = (int)(sizeof keys / sizeof keys[0]);
  return keys;
}

const fsdpc_cfg_key *fsdpc__cfg_find(const char *path, int *index) {
  int n;
  const fsdpc_cfg_key *k = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++) {
    if (strcmp(k[i].path, path) == 0) {
      if (index)
        *index = i;
      return &k[i];
    }
  }
  return NULL;
}

bool fsdpc__cfg_is_section(const char *path) {
  size_t len = strlen(path);
  if (len == 0)
    return true;
  int n;
  const fsdpc_cfg_key *k = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n; i++) {
    if (strncmp(k[i].path, path, len) == 0 && k[i].path[len] == '.')
      return true;
  }
  return false;
}

int fsdpc__cfg_children(const char *section, const char **names, char (*buf)[64], int cap) {
  size_t len = strlen(section);
  int n, count = 0;
  const fsdpc_cfg_key *k = fsdpc__cfg_keys(&n);
  for (int i = 0; i < n && count < cap; i++) {
    const char *rest = k[i].path;
    if (len > 0) {
      if (strncmp(rest, section, len) != 0 || rest[len] != '.')
        continue;
      rest += len + 1;
    }
    size_t seg = strcspn(rest, ".");
    if (seg >= 64)
      continue;
    bool seen = false;
    for (int j = 0; j < count; j++) {
      if (strlen(names[j]) == seg && strncmp(names[j], rest, seg) == 0)
        seen = true;
    }
    if (seen)
      continue;
    memcpy(buf[count], rest, seg);
    buf[count][seg] = '\0';
    names[count] = buf[count];
    count++;
  }
  return count;
}

const char *fsdpc__cfg_type_name(fsdpc_cfg_type t) {
  switch (t) {
  case FSDPC_CFG_BOOL:
    return "bool";
  case FSDPC_CFG_INT:
    return "int";
  case FSDPC_CFG_FLOAT:
    return "float";
  case FSDPC_CFG_STRING:
    return "string";
  case FSDPC_CFG_PATH:
    return "path";
  case FSDPC_CFG_ENUM:
    return "enum";
  case FSDPC_CFG_FLOATS:
    return "list of float";
  case FSDPC_CFG_STRINGS:
    return "list of string";
  case FSDPC_CFG_OPTS:
    return "map";
  case FSDPC_CFG_OPTS_LIST:
    return "list of map";
  }
  return "?";
}

const char *fsdpc__cfg_enum_name(const fsdpc_cfg_key *k, int value) {
  for (const fsdpc_cfg_enum_item *e = k->enums; e && e->name; e++) {
    if (e->value == value)
      return e->name;
  }
  return "?";
}
