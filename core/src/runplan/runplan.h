/* The run plan: everything a run is, resolved once from a config, the
 * world (ranks, ranks per node) and the device kind, before any weight or
 * token is read. The trainer (train/setup.c), the memory planner (plan/),
 * `fsdpc convert`, `fsdpc bench` and `fsdpc config check` take a run plan;
 * none derives these numbers again.
 *
 * Two layers:
 *   fsdpc_run_modes  plain values (strategy, shard/replica groups, batch
 *                    geometry, precision, offload, checkpointing, prefetch),
 *                    resolved by fsdpc__run_modes_resolve: cheap, no plugin,
 *                    so the planner resolves one per variant it is asked
 *                    about;
 *   fsdpc_run_plan   the modes of the config's own run, plus what needs the
 *                    plugins: the model's parameter list, the chosen
 *                    attention / optimizer / wrap (/ collectives) components
 *                    with their options validated, the wrap plan, the
 *                    optimizer's state planes and the attention sizes.
 *
 * Pure: nothing here allocates model memory, opens a device or a data file,
 * or changes process state. */
#ifndef FSDPC_RUNPLAN_RUNPLAN_H
#define FSDPC_RUNPLAN_RUNPLAN_H

#include "config/config.h"
#include "data/prepare.h"
#include "model/llama.h"
#include "model/lora.h"
#include "plugin/registry.h"

/* Where the run happens. */
typedef struct fsdpc_run_world {
  int world_size;     /* ranks in the run (>= 1) */
  int nproc_per_node; /* ranks per node: HYBRID_SHARD's default group; 0 = unknown */
} fsdpc_run_world;

/* A variant of the config's run: -1 keeps the config's value. */
typedef struct fsdpc_run_variant {
  int strategy, activation_checkpointing, cpu_offload;
  int offload_optimizer; /* fsdp.offload.optimizer */
} fsdpc_run_variant;

/* Batch geometry: every rank sees micro x accum sequences of seq_len tokens
 * per optimizer step; global = micro x accum x world. */
typedef struct fsdpc_run_batch {
  int64_t global, micro, accum, seq_len;
  int64_t steps_per_epoch; /* of the training data; -1 = not known (no data opened) */
  /* Steps the run trains: train.max_steps, or train.epochs x steps_per_epoch
   * once the data is known (fsdpc__dataset_plan). Read this, not the
   * config: the config stays as the user wrote it. */
  int64_t max_steps;
} fsdpc_run_batch;

/* fsdp.keep_params: which gathered units outlive a micro-batch that is not
 * the step's last. FIRST: the units of blocks 0 and 1 (the next pass's first
 * gathers; at the end of a backward they are the last ones freed, and they
 * are held through the whole forward anyway when the head shares the
 * embedding's unit). ALL: every unit, gathered once per optimizer step (no
 * reshard inside the step: device memory of every gathered unit). */
enum { FSDPC_KEEP_NONE = 0, FSDPC_KEEP_FIRST = 1, FSDPC_KEEP_ALL = 2 };

typedef struct fsdpc_run_modes {
  fsdpc_run_world world;
  fsdpc_strategy strategy;
  int S, R;                  /* shard group size, replica group size (S x R = world) */
  int reshard_after_forward; /* FULL_SHARD, HYBRID_SHARD */
  fsdpc_run_batch batch;
  int32_t device;        /* FSDPC_DEVICE_* */
  int32_t compute_dtype; /* fp32 on the CPU, bf16 on CUDA */
  int32_t reduce_dtype;  /* FSDPC_DTYPE_F32 or (CUDA only) FSDPC_DTYPE_BF16 */
  int32_t logits_dtype;  /* lm_head output before the softmax: FSDPC_DTYPE_F32 or _BF16
                          * (auto resolved: fp32 on the CPU, bf16 on CUDA) */
  int linear_fp8;        /* the layers' projections in FP8: 0 off, else FSDPC_FP8_* (the recipe) */
  int cpu_offload;       /* in effect: shards in host memory while a device computes */
  int cpu_offload_asked; /* fsdp.cpu_offload as given (a no-op on the CPU device) */
  int activation_checkpointing; /* 0 off, else FSDPC_AC_* (the policy) */
  int no_sync;
  int align;
  int forward_prefetch, backward_prefetch;
  int offload_optim; /* fsdp.offload.optimizer in effect (not with cpu_offload, which holds the
                      * state on the host already); on the CPU device it streams through
                      * host buffers, which exercises the schedule */
  uint64_t offload_buffer_bytes; /* fsdp.offload.buffer_mib in bytes */
  int param_copy; /* in effect: fsdp.param_copy on a device, not offloaded */
  int64_t param_copy_max_bytes; /* fsdp.param_copy_max_mib in bytes; 0 = no cap */
  int keep_params;              /* fsdp.keep_params resolved: FSDPC_KEEP_* */
  int in_bwd;                   /* optim.in_backward (its refusals checked) */
} fsdpc_run_modes;

/* The shard group size: FULL_SHARD / SHARD_GRAD_OP = world, NO_SHARD = 1,
 * HYBRID_SHARD = hybrid_shard_size, or the ranks per node when that is 0;
 * 1 at world 1. Checks that it divides the world. The only place that
 * derives it. */
fsdpc_status fsdpc__run_shard_size(fsdpc_strategy strategy, const fsdpc_run_world *w,
                                   int64_t hybrid_shard_size, int *S, fsdpc_err *err);

/* Resolves the modes of cfg (with variant v, NULL = as configured) at world
 * w: groups, batch geometry, precision. Refuses what the trainer would
 * refuse for these reasons, with the trainer's messages. */
fsdpc_status fsdpc__run_modes_resolve(const fsdpc_config *cfg, const fsdpc_run_variant *v,
                                      const fsdpc_run_world *w, fsdpc_run_modes *out,
                                      fsdpc_err *err);

/* The model shape a config describes. */
void fsdpc__run_shape_from_config(const fsdpc_config *c, fsdpc_model_shape *sh);

/* How the engine executes a run: every mode resolved once, from the
 * modes and the plan's plugins (fsdpc__run_exec_resolve). The engine is
 * built from it (fsdp/units.c) and the planner costs it (plan/plan.c):
 * neither decides a mode again. */
typedef struct fsdpc_run_exec {
  int32_t device;     /* FSDPC_DEVICE_* */
  int S, R;           /* shard group size, replica group size */
  int align;          /* elements a unit's flat buffer is padded to (times S): fsdp.align,
                       * widened to the quantized optimizer state's block */
  int act_size;       /* bytes of a gathered element: 4 (fp32, the CPU) or 2 (bf16) */
  int full_is_master; /* S == 1 and fp32 compute: nothing is gathered or cast */
  int reshard;        /* free a unit after its last forward use */
  int no_sync;        /* keep full grads until the step's last micro-batch */
  int accum;          /* micro-batches per optimizer step */
  int keep;           /* fsdp.keep_params (FSDPC_KEEP_*) */
  int reduce_bf16;    /* reduce-scatter and replica all-reduce in bf16 (a device only) */
  /* A comm stream: device collectives when units are sharded, and
   * cpu_offload's host copies at any S. Prefetching means something only
   * with it. */
  int overlap;
  int d2h; /* cpu_offload at S == 1: the grads' copies to the host on a third
            * stream, beside the comm stream's uploads */
  int forward_prefetch, backward_prefetch;
  int offload;                   /* fsdp.cpu_offload in effect: shards in pinned host memory */
  int host_async;                /* cpu_offload: the optimizer step on a host worker thread */
  int offload_optim;             /* fsdp.offload.optimizer in effect (an optimizer with state) */
  uint64_t offload_buffer_bytes; /* each of offload_optim's two device buffers, at most */
  int param_copy;                /* a bf16 copy of each master shard the optimizer writes */
  uint64_t param_copy_max_bytes; /* those copies' bytes at most; 0 = no cap */
  int dev_norm;     /* the grad norm is summed in device memory (a device, not offloaded) */
  int inference;    /* evaluation of weights: no gradient or optimizer state */
  uint32_t n_slots; /* the optimizer's state planes (0 under inference) */
  /* quantization.method nf4 under LoRA: the frozen projections' block size
   * and double quantization (0: the base in the compute dtype). Only the
   * planner models it so far; the engine refuses it (docs/lora.md). */
  int nf4_block, nf4_dq;
  /* optim.in_backward: each unit's update runs in the last micro-batch's
   * backward once its gradients are reduced; its grad shard is a transient
   * of the step program (fsdp/program.h), not a persistent buffer */
  int in_bwd;
} fsdpc_run_exec;

enum {
  /* Plan for a device this machine may not have (fsdpc plan, bench, config
   * check): a plugin pinned by name is looked up by name when its
   * supports() refuses, since the plan needs its sizes, not this machine's
   * ability to run it. */
  FSDPC_RUN_PLAN_OFFLINE = 1,
  /* The model and the plugin registry only: no plugin selection, no modes
   * (fsdpc convert, whose target layout comes from its own flags). */
  FSDPC_RUN_PLAN_MODEL_ONLY = 2,
  /* An evaluation of weights (fsdpc eval without a checkpoint to resume):
   * the engine holds no gradient or optimizer state. */
  FSDPC_RUN_PLAN_EVAL = 4,
};

typedef struct fsdpc_run_plan {
  const fsdpc_config *cfg; /* borrowed; outlives the plan */
  unsigned flags;
  fsdpc_run_modes modes;
  fsdpc_run_exec exec; /* how the engine runs the modes (not with FSDPC_RUN_PLAN_MODEL_ONLY) */
  /* the model */
  fsdpc_model_shape shape;
  fsdpc_param_info *params; /* (n_params) module order */
  int n_params;
  uint64_t numel; /* unique parameters */
  /* plugins (owned by reg) */
  fsdpc_registry *reg;
  const fsdpc_component *attn, *optim, *wrap;
  const fsdpc_component *coll; /* NULL at world 1 */
  fsdpc_optim_init optim_init; /* as the config gives it, for the engine */
  uint32_t n_slots;            /* optimizer state planes */
  fsdpc_optim_qformat qf;      /* quantized optimizer state (block 0: fp32 slots) */
  fsdpc_attn_sizes attn_sizes; /* the attention plugin's sizes() for (micro, seq_len) */
  /* the wrap plan */
  uint32_t *unit_of_param; /* (n_params) */
  uint32_t n_units;
  /* LoRA (peft.method lora): the base's n_base_params parameters come first,
   * frozen, in the wrap plugin's units; the adapters follow, one unit per
   * decoder layer after the base's units. */
  int has_lora;
  fsdpc_lora lora;
  int n_base_params;
} fsdpc_run_plan;

/* Resolves the execution of plan p under modes m (the plan's own, or a
 * variant's): what the engine is built with and the planner costs. Pure;
 * inference: an evaluation run (FSDPC_RUN_PLAN_EVAL). */
void fsdpc__run_exec_resolve(const fsdpc_run_plan *p, const fsdpc_run_modes *m, int inference,
                             fsdpc_run_exec *out);

/* The model context a run of plan p under modes m computes with: shape,
 * micro-batch, checkpointing, logits dtype, attention, LoRA (the caller adds
 * the device, threads and memory). */
void fsdpc__run_model_opts(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                           fsdpc_model_ctx_opts *out);

/* The attention plugin's sizes() for micro-batches of B x T (the plan's own
 * are p->attn_sizes). */
fsdpc_status fsdpc__run_attn_sizes(const fsdpc_run_plan *p, int B, int T, fsdpc_attn_sizes *out,
                                   fsdpc_err *err);

/* Asks the wrap plugin for the unit of each parameter. *unit_of_param is
 * allocated (n_params entries; the caller frees it). */
fsdpc_status fsdpc__wrap_plan(const fsdpc_component *wrap, const fsdpc_opts *opts,
                              const fsdpc_param_info *params, int n_params,
                              uint32_t **unit_of_param, uint32_t *n_units, fsdpc_err *err);

/* The optimizer's qformat (plugins.c) (block 0 when it has none); refuses a quantized
 * optimizer that lacks q_export / q_import or has more than 4 slots. */
fsdpc_status fsdpc__qformat_get(const fsdpc_component *c, const fsdpc_optimizer *opt,
                                fsdpc_optim_qformat *out, fsdpc_err *err);
/* The flat-buffer alignment that keeps shard boundaries on block bounds. */
int fsdpc__optim_align(int align, const fsdpc_optim_qformat *qf);
/* Builds the plan of cfg at world w (flags: FSDPC_RUN_PLAN_*). */
fsdpc_status fsdpc__run_plan_create(const fsdpc_config *cfg, const fsdpc_run_world *w,
                                    unsigned flags, fsdpc_run_plan **out, fsdpc_err *err);
void fsdpc__run_plan_destroy(fsdpc_run_plan *p);

/* The situation plugins are selected for (device, dtype, world, heads). */
void fsdpc__run_situation(const fsdpc_run_plan *p, fsdpc_situation *sit);

/* Checks a token file against the plan (its vocabulary fits the model) and
 * a tokenizer's vocabulary size; the trainer and `config check` call them. */
fsdpc_status fsdpc__run_check_vocab(const fsdpc_run_plan *p, const char *what, const char *path,
                                    int64_t vocab, fsdpc_err *err);

/* The files the config names (token files, tokenizer, model.init.from,
 * checkpoint.resume), opened as far as their headers and checked against
 * the plan: what `fsdpc train` would refuse about them (check.c). */
fsdpc_status fsdpc__run_plan_check_files(const fsdpc_run_plan *p, fsdpc_err *err);
/* What fsdpc can model (model/hf_rules.h): model.config's config.json,
 * when the config names one, against the rules, with data.seq_len as the
 * longest sequence (check.c). Run plan creation and the resident model of
 * fsdpc generate call it; a config that names no HF config passes. */
fsdpc_status fsdpc__run_check_hf_config(const fsdpc_config *c, fsdpc_err *err);
/* The adapters a config asks for (peft.method lora); *on = 0 when none
 * (lora.c). */
fsdpc_status fsdpc__lora_from_config(const fsdpc_config *c, fsdpc_lora *out, int *on,
                                     fsdpc_err *err);

/* The data.* keys of a config as preparation options (inputs, out unset):
 * what train prepares JSONL data with and config check checks it with
 * (data.c). */
void fsdpc__prepare_opts_from_config(const fsdpc_config *c, fsdpc_prepare_opts *o);
/* 1 for .jsonl, .jsonl.gz, .json, .json.gz paths (data.c). */
int fsdpc__is_jsonl_path(const char *path);

/* FLOPs per token of one training step, torchtitan's convention:
 *   6 x (params - embedding) + 12 x L x C x T. */
double fsdpc__run_flops_per_token(const fsdpc_model_shape *s, int T);

#endif
