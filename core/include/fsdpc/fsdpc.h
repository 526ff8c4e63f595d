/* fsdpc public API: what an embedder (and the fsdpc CLI) calls.
 *
 * Every function returns an fsdpc_status (codes in plugin.h). On failure the
 * fsdpc_err passed in holds one line that says what is wrong, where and what
 * to do. Objects are made by fsdpc_x_create(..., &out) and released by
 * fsdpc_x_destroy(x); destroy(NULL) is a no-op.
 *
 * The flow (docs/api.md):
 *   fsdpc_config_load / fsdpc_config_parse    a config (file or text) + overrides
 *   fsdpc_plan_create                          what the run is, resolved, no weights read
 *   fsdpc_trainer_create                       plugins, communicators, engine, weights, data
 *   fsdpc_trainer_run                          steps, with a callback per step (metrics)
 *   fsdpc_trainer_save                         a checkpoint now
 *   fsdpc_trainer_destroy, fsdpc_config_destroy
 * and beside it what every fsdpc command does, as calls (the CLI makes no
 * other): a rank's place and the local launcher, evaluation, generation,
 * the memory planner, checkpoint conversion, the A/B bench, run metrics,
 * plugins, tokenizers, token files and datasets.
 * Library messages go to stderr unless fsdpc_set_log_sink gives a sink.
 * libfsdpc.so exports these functions and nothing else. Memory the library
 * hands out (char ** and array results) is released with fsdpc_free.
 *
 * Structs that cross start with struct_size, set by the caller to sizeof
 * the struct (or by its _init function): a result struct is filled as far
 * as it reaches, so an older, shorter one keeps working; an argument struct
 * must reach at least as far as this header's first version of it, and
 * members appended later are read only when it reaches them. */
#ifndef FSDPC_FSDPC_H
#define FSDPC_FSDPC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdpc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FSDPC_VERSION_MAJOR 0
#define FSDPC_VERSION_MINOR 1
#define FSDPC_VERSION_PATCH 0
#define FSDPC_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define FSDPC_API __attribute__((visibility("default")))
#else
#define FSDPC_API
#endif

/* Error detail for the call that failed. Caller-owned, reusable. */
typedef struct fsdpc_err {
  fsdpc_status status;
  char msg[1024];
} fsdpc_err;

/* "INVALID_USAGE" */
FSDPC_API const char *fsdpc_status_name(fsdpc_status s);
/* "invalid usage (a user or config error)" */
FSDPC_API const char *fsdpc_status_str(fsdpc_status s);
FSDPC_API const char *fsdpc_version(void);
/* Releases memory the library handed out (strings, arrays); NULL is a
 * no-op. */
FSDPC_API void fsdpc_free(void *p);
/* The candidate closest to word by edit distance, or NULL when none is
 * close enough to be a plausible typo: for "did you mean" messages. */
FSDPC_API const char *fsdpc_suggest(const char *word, const char *const *candidates, int32_t n);
/* s with control characters and malformed UTF-8 escaped (\n, \xNN), into
 * buf (cap bytes, always terminated; cut short: "..."): for printing
 * strings that came from outside (plugin descriptions, file contents). */
FSDPC_API char *fsdpc_escape(char *buf, size_t cap, const char *s);
/* Opens path for reading as a regular file, never blocking on it: a FIFO, a
 * device or a folder is refused before anything is read ("PATH: cannot
 * open: not a regular file ..."). For input files a program names. */
FSDPC_API FILE *fsdpc_open_input(const char *path, fsdpc_err *err);

/* ---- Logging ------------------------------------------------------------ */

/* A line of library output (no trailing newline) at level FSDPC_LOG_*. */
typedef void (*fsdpc_log_fn)(void *user, int32_t level, const char *line);
/* Sends every library log line to fn (NULL: back to stderr). Process-wide;
 * set it before creating objects. */
FSDPC_API void fsdpc_set_log_sink(fsdpc_log_fn fn, void *user);
/* Lines above level (FSDPC_LOG_ERROR .. FSDPC_LOG_DEBUG) are dropped. */
FSDPC_API void fsdpc_set_log_level(int32_t level);
/* Every line starts with "[rank R] " (R < 0: no prefix). Process-wide;
 * fsdpc_trainer_create and fsdpc_evaluate set it for a rank of a job of
 * more than one rank. */
FSDPC_API void fsdpc_set_log_rank(int32_t rank);
/* One line through the library's logger (level filter, rank prefix, "error: "
 * and "warn: " tags, the sink): for an embedder's own messages. */
FSDPC_API void fsdpc_log(int32_t level, const char *line);

/* ---- Config ------------------------------------------------------------- */

typedef struct fsdpc_config fsdpc_config;

/* Loads a YAML file, then applies "section.key=value" overrides (n of them,
 * may be 0), then model.config's HF config.json for unset shape keys. */
FSDPC_API fsdpc_status fsdpc_config_load(const char *path, const char *const *overrides,
                                         int32_t n_overrides, fsdpc_config **out, fsdpc_err *err);
/* The same from YAML text; name is what messages call it ("inline.yaml"). */
FSDPC_API fsdpc_status fsdpc_config_parse(const char *yaml, const char *name,
                                          const char *const *overrides, int32_t n_overrides,
                                          fsdpc_config **out, fsdpc_err *err);
FSDPC_API void fsdpc_config_destroy(fsdpc_config *cfg);
/* The value of one key (a schema path such as "log.level") as the resolved
 * YAML writes it, in *value (fsdpc_free); an unknown key is an error that
 * names the closest one. */
FSDPC_API fsdpc_status fsdpc_config_get(const fsdpc_config *cfg, const char *key, char **value,
                                        fsdpc_err *err);
/* The resolved config as YAML: every key with its effective value. */
FSDPC_API fsdpc_status fsdpc_config_dump(const fsdpc_config *cfg, char **yaml, fsdpc_err *err);
enum { FSDPC_SCHEMA_TEXT = 0, FSDPC_SCHEMA_MARKDOWN = 1 };
/* Every key with its type, default and meaning (FSDPC_SCHEMA_TEXT), or the
 * config reference page docs/config.md (FSDPC_SCHEMA_MARKDOWN). */
FSDPC_API fsdpc_status fsdpc_config_schema(int32_t format, char **text, fsdpc_err *err);

/* ---- Run plan ------------------------------------------------------------ */

/* Everything a run is, resolved from a config and a world before any weight
 * is read: plugins (options checked), shard / replica groups, batch
 * geometry, precision. */
typedef struct fsdpc_run_plan fsdpc_run_plan;

typedef struct fsdpc_plan_summary {
  uint32_t struct_size; /* set by the caller: sizeof(fsdpc_plan_summary) */
  uint64_t n_params;    /* unique parameters */
  int32_t strategy;     /* 0 FULL_SHARD, 1 SHARD_GRAD_OP, 2 NO_SHARD, 3 HYBRID_SHARD */
  int32_t world_size, shard_size, replica_size;
  int32_t n_units; /* FSDP units of the wrap plan */
  int64_t global_batch, micro_batch, grad_accum, seq_len;
  int32_t device; /* FSDPC_DEVICE_* */
  int32_t activation_checkpointing, cpu_offload;
  /* chosen plugins (owned by the plan) */
  const char *strategy_name, *attention, *optim, *wrap;
  /* Appended: steps per epoch of the training data (-1 until a trainer has
   * opened it) and the steps of the run (train.max_steps, or train.epochs x
   * steps per epoch once known). */
  int64_t steps_per_epoch, max_steps;
} fsdpc_plan_summary;

/* The plan of cfg at world_size ranks, nproc_per_node per node (0 = all on
 * one node). cfg must outlive the plan. */
FSDPC_API fsdpc_status fsdpc_plan_create(const fsdpc_config *cfg, int32_t world_size,
                                         int32_t nproc_per_node, fsdpc_run_plan **out,
                                         fsdpc_err *err);
FSDPC_API fsdpc_status fsdpc_plan_summarize(const fsdpc_run_plan *plan, fsdpc_plan_summary *out,
                                            fsdpc_err *err);
FSDPC_API void fsdpc_plan_destroy(fsdpc_run_plan *plan);
/* The files the plan's config names (token files, tokenizer,
 * model.init.from, checkpoint.resume), opened as far as their headers and
 * checked against the plan: what fsdpc_trainer_create would refuse about
 * them, before any weight is read (fsdpc config check). */
FSDPC_API fsdpc_status fsdpc_plan_check_files(const fsdpc_run_plan *plan, fsdpc_err *err);

/* ---- Trainer ------------------------------------------------------------- */

typedef struct fsdpc_trainer fsdpc_trainer;

typedef struct fsdpc_step_metrics {
  uint32_t struct_size; /* sizeof(fsdpc_step_metrics) as this library knows it */
  int64_t step;         /* 1-based: steps done */
  int64_t max_steps;    /* steps of the run: train.max_steps, or train.epochs x steps per epoch */
  double loss;          /* mean over the global batch; NaN for a skipped step (a global
                         * batch without a target token) */
  double lr, grad_norm; /* grad_norm before clipping */
  double step_s;        /* wall time of the step */
  double eval_loss;     /* NaN when this step did not evaluate */
  int64_t tokens;       /* tokens of the global batch */
} fsdpc_step_metrics;

/* Called after every step on every rank; a non-zero return stops the run
 * after this step (fsdpc_trainer_run then returns FSDPC_OK). */
typedef int32_t (*fsdpc_step_fn)(void *user, const fsdpc_step_metrics *m);

/* Builds a trainer for this process: a single process, or one rank of a
 * job when the environment says so (RANK, WORLD_SIZE, ... as torchrun sets
 * them). Reads the initial weights (or resumes) and opens the data. cfg
 * must outlive the trainer and is only read: with train.epochs set, the
 * run's step count (epochs x steps per epoch) is resolved into the run
 * plan, and reported as fsdpc_step_metrics.max_steps. */
FSDPC_API fsdpc_status fsdpc_trainer_create(const fsdpc_config *cfg, fsdpc_trainer **out,
                                            fsdpc_err *err);
/* The trainer's run plan (owned by it). */
FSDPC_API const fsdpc_run_plan *fsdpc_trainer_plan(const fsdpc_trainer *t);
/* Runs up to n_steps more steps (n_steps <= 0: until the run's last step,
 * train.max_steps or what train.epochs resolves to), evaluating and
 * checkpointing as the config says; at the last step also the final
 * checkpoint and the config's train.generate_prompts (answers on stdout at
 * rank 0). fn may be NULL. Collective: when a step, save or generation
 * fails, the message names the ranks that went silent (a timeout or a
 * lost peer) and the other ranks are told to stop. */
FSDPC_API fsdpc_status fsdpc_trainer_run(fsdpc_trainer *t, int64_t n_steps, fsdpc_step_fn fn,
                                         void *user, fsdpc_err *err);
/* Steps done so far (a resumed run starts at its checkpoint's step). */
FSDPC_API int64_t fsdpc_trainer_step(const fsdpc_trainer *t);
/* How the run stopped early: the signal (SIGTERM, SIGUSR1) after which every
 * rank stopped, 0 when no signal stopped it; *saved (may be NULL) is 1 when
 * a checkpoint to resume from was written at that stop. A process that
 * stopped without a checkpoint should exit with 128 + the signal. */
FSDPC_API int32_t fsdpc_trainer_stop_signal(const fsdpc_trainer *t, int32_t *saved);
/* The exit code of a process whose trainer (t, or NULL when it failed to be
 * created) failed with err: 1 when its own failure is the job's first (or
 * it is a single run), 3 when another rank's, a node's or the store's came
 * first (docs/dist.md). */
FSDPC_API int32_t fsdpc_trainer_exit_code(const fsdpc_trainer *t, const fsdpc_err *err);
/* Mean loss over the evaluation batches (data.eval or data.eval_fraction). */
FSDPC_API fsdpc_status fsdpc_trainer_eval(fsdpc_trainer *t, double *loss, fsdpc_err *err);
/* Writes a checkpoint of the current step into checkpoint.dir (in
 * checkpoint.intermediate_format), resumable. Collective. */
FSDPC_API fsdpc_status fsdpc_trainer_save(fsdpc_trainer *t, fsdpc_err *err);
FSDPC_API void fsdpc_trainer_destroy(fsdpc_trainer *t);

/* ---- Jobs: a rank's place, the local launcher ---------------------------- */

/* Where this process stands in a job, as its environment says (RANK,
 * WORLD_SIZE, LOCAL_RANK, ... as torchrun, fsdpc's launcher, srun or
 * mpirun set them; a plain process is rank 0 of 1). */
typedef struct fsdpc_job_place {
  uint32_t struct_size; /* set by the caller */
  int32_t rank, world_size, local_rank, local_world_size, node_rank, nnodes;
  const char *source; /* "fsdpc", "torchrun", "slurm", "mpi" or "single" (static) */
} fsdpc_job_place;
FSDPC_API fsdpc_status fsdpc_job_place_detect(fsdpc_job_place *out, fsdpc_err *err);

/* The local launcher (fsdpc train --nproc-per-node N): runs argv once per
 * local rank with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT and FSDPC_LAUNCHER=1 set, and supervises them:
 * when one dies the others are stopped (SIGTERM, SIGKILL after grace_ms)
 * and the error names the rank and how it died. The caller must be
 * single-threaded while it runs (signals are waited for). */
typedef struct fsdpc_launcher_args {
  uint32_t struct_size;    /* set by the caller */
  int32_t nproc_per_node;  /* ranks on this node, >= 1 */
  int32_t nnodes;          /* >= 1 */
  int32_t node_rank;       /* 0 .. nnodes - 1 */
  const char *master_addr; /* node 0 (the rendezvous store); NULL = 127.0.0.1 */
  int32_t master_port;     /* 0 = a free port on one node, else 29500 */
  const char *const *argv; /* NULL-terminated command of every rank */
  int32_t grace_ms;        /* SIGTERM -> SIGKILL (dist.term_grace_s); 0 = 25000 */
} fsdpc_launcher_args;
/* OK when every rank exited 0; else the first failure, with *exit_code the
 * rank's exit code or 128 + the signal. */
FSDPC_API fsdpc_status fsdpc_launch(const fsdpc_launcher_args *a, int32_t *exit_code,
                                    fsdpc_err *err);

/* ---- Evaluation of a model (fsdpc eval) --------------------------------- */

/* The config fsdpc eval runs: the model folder's own (an fsdpc checkpoint's
 * config.yaml, else defaults and the HF config.json), its weights (an HF
 * folder as the initial model, a sharded checkpoint resumed), data as
 * data.eval (a token file or a JSONL dataset, prepared with the folder's
 * tokenizer and chat template when it ships them), no checkpointing, logs
 * in log_dir; then the overrides. */
typedef struct fsdpc_eval_args {
  uint32_t struct_size;         /* set by the caller */
  const char *model;            /* an HF folder or any fsdpc checkpoint */
  const char *data;             /* token file or JSONL dataset */
  const char *log_dir;          /* where metrics.jsonl and rank summaries go */
  const char *const *overrides; /* "section.key=value", applied last */
  int32_t n_overrides;
} fsdpc_eval_args;
FSDPC_API fsdpc_status fsdpc_eval_config(const fsdpc_eval_args *a, fsdpc_config **out,
                                         fsdpc_err *err);

/* Memory categories of the library's accounting (peaks by category). */
enum {
  FSDPC_MEM_CAT_PARAMS = 0, /* master shards (and full buffers) */
  FSDPC_MEM_CAT_GRADS = 1,  /* gradient shards and full gradient buffers */
  FSDPC_MEM_CAT_OPTIM = 2,  /* optimizer state shards */
  FSDPC_MEM_CAT_ACTIVATIONS = 3,
  FSDPC_MEM_CAT_COMM = 4, /* gathered unit buffers, communication staging */
  FSDPC_MEM_CAT_OTHER = 5
};
#define FSDPC_MEM_CATEGORY_COUNT 6
/* "params", "grads", "optim", "activations", "comm", "other"; NULL beyond. */
FSDPC_API const char *fsdpc_mem_category_name(int32_t category);

typedef struct fsdpc_eval_result {
  uint32_t struct_size;  /* set by the caller */
  double loss;           /* mean over the target tokens */
  double perplexity;     /* exp(loss) */
  double token_accuracy; /* share of target tokens whose argmax logit is the label */
  int64_t tokens, batches;
  int32_t world_size;
  int64_t peak_device_bytes; /* this rank's device (host for the CPU), setup included */
  int64_t peak_host_rss_bytes;
  int64_t peak_device_by_category[FSDPC_MEM_CATEGORY_COUNT];
  int64_t sequences; /* the windows evaluated (the last batch may be smaller) */
} fsdpc_eval_result;
/* Evaluates cfg as train's evaluation does (same loader, batches and
 * forward): this process as a single run or one rank of a job (the
 * environment says which; collective). Every rank gets the result. */
FSDPC_API fsdpc_status fsdpc_evaluate(const fsdpc_config *cfg, fsdpc_eval_result *out,
                                      fsdpc_err *err);

/* ---- Generation (fsdpc generate) ---------------------------------------- */

typedef struct fsdpc_model fsdpc_model;
/* A resident model from an HF folder or any fsdpc checkpoint, with its
 * tokenizer (the folder's, else data.tokenizer). */
typedef struct fsdpc_model_args {
  uint32_t struct_size; /* set by the caller */
  const char *dir;
  const char *device;           /* "cpu", "cuda", NULL or "auto" = cuda when a GPU is visible */
  const char *attention;        /* attention plugin for prompts; NULL = the config's */
  const char *const *overrides; /* "section.key=value" on the model's config */
  int32_t n_overrides;
} fsdpc_model_args;
FSDPC_API fsdpc_status fsdpc_model_load(const fsdpc_model_args *a, fsdpc_model **out,
                                        fsdpc_err *err);
FSDPC_API void fsdpc_model_destroy(fsdpc_model *m);
/* Peak bytes allocated on the model's device so far (weights, KV cache). */
FSDPC_API int64_t fsdpc_model_peak_bytes(const fsdpc_model *m);

/* How text becomes prompt ids. */
typedef struct fsdpc_prompt_args {
  uint32_t struct_size;
  int32_t chat;       /* 1: text is the user's turn in the model's chat template */
  const char *system; /* with chat: a system message first (NULL: none) */
  int32_t no_bos;     /* 1: no BOS first (plain text) */
} fsdpc_prompt_args;
/* The ids of one prompt: text (plain, or the user's turn with chat) or
 * messages_json (a JSON array of {"role", "content"} rendered with the
 * chat template and the generation prompt). *ids: fsdpc_free. */
FSDPC_API fsdpc_status fsdpc_model_prompt(fsdpc_model *m, const fsdpc_prompt_args *a,
                                          const char *text, const char *messages_json,
                                          int32_t **ids, int32_t *n, fsdpc_err *err);

typedef struct fsdpc_generate_args {
  uint32_t struct_size;   /* set by the caller */
  int32_t max_new_tokens; /* <= 0: 128 */
  /* Sampling; a value < 0 is the model's generation_config.json (as
   * transformers reads it: greedy unless do_sample), else off / greedy. */
  double temperature; /* 0 = greedy (argmax, lowest id on ties) */
  int32_t top_k;      /* 0 = off */
  double top_p;       /* 0 or 1 = off */
  uint64_t seed;
  const char *const *stop; /* stop strings: the text is cut before them */
  int32_t n_stop;
  int32_t ignore_eos;    /* 1: run to max_new_tokens */
  int32_t top_logits;    /* > 0 (at most 100): keep the top (id, logit) pairs of each step */
  int32_t no_cuda_graph; /* 1: run each decode step kernel by kernel */
  int32_t first_index;   /* index of prompt 0 among all of a caller's batches (seeds
                          * each row's sampling stream) */
  /* (optional) streaming: new text of prompt index as it is generated */
  void (*on_text)(void *user, int32_t index, const char *text, size_t len);
  void *user;
} fsdpc_generate_args;

typedef struct fsdpc_generation {
  uint32_t struct_size;
  int32_t *ids; /* generated ids (n_ids), the stop token not included */
  int32_t n_ids;
  char *text;              /* decoded, cut before a stop string */
  const char *stop_reason; /* "eos", "stop" or "length" (static) */
  int32_t *top_ids;        /* top_logits > 0: (n_ids + 1) x top_logits, highest first */
  float *top_logits;
} fsdpc_generation;
/* Generates for n prompts (ids, lens) as one padded batch (one forward per
 * token for all); stops at the generation config's EOS ids, a stop string
 * or max_new_tokens. *out: n results, released by fsdpc_generations_free. */
FSDPC_API fsdpc_status fsdpc_generate(fsdpc_model *m, const int32_t *const *prompts,
                                      const int32_t *lens, int32_t n, const fsdpc_generate_args *a,
                                      fsdpc_generation **out, fsdpc_err *err);
FSDPC_API void fsdpc_generations_free(fsdpc_generation *g, int32_t n);

/* ---- The memory planner (fsdpc plan) ------------------------------------ */

/* Per-rank memory of a config under every sharding strategy, with and
 * without activation checkpointing and, for CUDA, with optimizer-state and
 * full CPU offload: the engine's own step programs costed action by
 * action, no model memory allocated. */
typedef struct fsdpc_memplan fsdpc_memplan;
FSDPC_API fsdpc_status fsdpc_memplan_create(const fsdpc_config *cfg, int32_t world_size,
                                            int32_t nproc_per_node, fsdpc_memplan **out,
                                            fsdpc_err *err);
FSDPC_API void fsdpc_memplan_destroy(fsdpc_memplan *p);

typedef struct fsdpc_memplan_info {
  uint32_t struct_size; /* set by the caller */
  int32_t world_size, nproc_per_node, device, n_rows;
  int64_t micro_batch, seq_len;
  uint64_t n_params;
} fsdpc_memplan_info;
FSDPC_API void fsdpc_memplan_describe(const fsdpc_memplan *p, fsdpc_memplan_info *out);

typedef struct fsdpc_memplan_row {
  uint32_t struct_size; /* set by the caller */
  int32_t strategy;     /* 0 FULL_SHARD .. 3 HYBRID_SHARD */
  const char *strategy_name;
  const char *checkpointing; /* "off", "full" or "save_mlp" */
  const char *offload;       /* "off", "full" (fsdp.cpu_offload) or "optim" (state only) */
  int32_t is_config;         /* the config's own variant */
  int32_t shard_size, replica_size;
  int64_t params, grads, optim, activations; /* shard and context bytes */
  int64_t peak[FSDPC_MEM_CATEGORY_COUNT];    /* per-category peaks over a step */
  int64_t total_peak, reserved; /* reserved: the planned arena + the CUDA runtime outside it */
  int64_t host_pinned, host_pageable, host_runtime, host_total; /* per rank */
  /* The one device reservation the engine makes (>= total_peak) and its
   * parts; late: device memory the run takes after its fit check. */
  int64_t arena, arena_shards, arena_activations, arena_transients, late;
  /* The moment of total_peak: each category's bytes then, the pass
   * ("first micro-batch", "last micro-batch", "optimizer step", ...), the
   * step program's action ("head", "backward", "grad_alloc", ...) and its
   * block or unit (-1: none); strings live as long as the library. */
  int64_t at_peak[FSDPC_MEM_CATEGORY_COUNT];
  const char *peak_pass, *peak_action;
  int32_t peak_arg;
} fsdpc_memplan_row;
FSDPC_API fsdpc_status fsdpc_memplan_row_get(const fsdpc_memplan *p, int32_t i,
                                             fsdpc_memplan_row *out, fsdpc_err *err);

/* ---- Checkpoint conversion (fsdpc convert) ------------------------------ */

typedef struct fsdpc_convert_args {
  uint32_t struct_size;  /* set by the caller */
  const char *src, *dst; /* a checkpoint folder of any format; the folder to make */
  const char *to;        /* "hf" (= "full") or "sharded" */
  const char *dtype;     /* full output: "bf16" (NULL) or "fp32" */
  int32_t world;         /* sharded output: ranks (0 = 1) */
  const char *strategy;  /* sharded output (NULL = FULL_SHARD) */
  int32_t hybrid_shard_size;
  const char *config; /* the run's YAML; NULL = src/config.yaml, else src's HF config */
  const char *const *overrides;
  int32_t n_overrides;
} fsdpc_convert_args;
FSDPC_API fsdpc_status fsdpc_convert(const fsdpc_convert_args *a, fsdpc_err *err);

/* ---- A/B benchmarks (fsdpc bench) --------------------------------------- */

typedef struct fsdpc_bench_args {
  uint32_t struct_size;    /* set by the caller */
  const char *path;        /* the bench file */
  const char *const *sets; /* "section.key=value" for every variant */
  int32_t n_sets;
  const char *out_dir, *baseline;                    /* NULL = the file's */
  int32_t repeats, steps, nproc_per_node, timeout_s; /* <= 0 = the file's */
  int32_t warmup;                                    /* -1 = the file's */
  int32_t dry_run; /* 1: list the variants and their planned memory, run nothing */
  const char *exe; /* the fsdpc executable every run starts; NULL = this process's */
  FILE *report;    /* the table, the dry-run list, what was written (NULL = stdout) */
  FILE *progress;  /* one line per run (NULL = stderr) */
} fsdpc_bench_args;
/* Runs every variant of the bench file's matrix in fresh `fsdpc train`
 * processes (repeats interleaved across variants) and writes bench.csv,
 * bench.json, bench.svg (and bench.png with cairo). *failed: variants that
 * failed (each a row saying why; the files are written anyway). */
FSDPC_API fsdpc_status fsdpc_bench(const fsdpc_bench_args *a, int32_t *failed, fsdpc_err *err);

/* ---- Run metrics (fsdpc metrics, fsdpc plot) ---------------------------- */

/* The last run of dir/metrics.jsonl (or a .jsonl given directly), resumes
 * folded in (each step once). NaN: never logged. */
typedef struct fsdpc_run_summary {
  uint32_t struct_size; /* set by the caller */
  char run_id[64];
  int32_t world, n_starts, n_older; /* starts (1 + resumes); earlier runs in the file */
  int64_t last_resumed_from;
  int32_t n_steps; /* steps logged */
  int64_t first_step, last_step;
  double first_loss, last_loss, min_loss;
  int64_t min_loss_step;
  double last_eval_loss;
  int64_t last_eval_step;
  double tokens_per_s, step_s; /* means over the steps that logged them (0: none) */
  double last_lr, peak_bytes;  /* peak: rank 0, tracked */
} fsdpc_run_summary;
FSDPC_API fsdpc_status fsdpc_metrics_summary(const char *dir, fsdpc_run_summary *out,
                                             fsdpc_err *err);
/* The runs' loss and eval loss against step, loss against tokens, learning
 * rate and gradient norm, one colour per run, as PNG or SVG (by out's
 * extension; its folder is made). title NULL: one made of the first run. */
FSDPC_API fsdpc_status fsdpc_plot(const char *const *dirs, int32_t n, const char *title,
                                  const char *out, fsdpc_err *err);

/* ---- The prepared-data cache (fsdpc data cache) ------------------------- */

/* Where cfg's JSONL data is prepared to: data.cache_dir, else
 * log.dir/data-cache; into dir (cap bytes). */
FSDPC_API fsdpc_status fsdpc_data_cache_dir(const fsdpc_config *cfg, char *dir, size_t cap,
                                            fsdpc_err *err);
/* Calls each(user, path) for every cache file cfg's data maps to now (its
 * JSONL inputs, whether written yet or not, and the mix of data.datasets
 * once its datasets are prepared); a file whose key cannot be made (a
 * missing input) is left out. Fails only on a bad data.datasets. */
FSDPC_API fsdpc_status fsdpc_data_cache_current(const fsdpc_config *cfg,
                                                void (*each)(void *user, const char *path),
                                                void *user, fsdpc_err *err);
/* 1 when a file name in a cache folder is one the cache writes (a prepared
 * file "X.<key>.tok" or the temporary file of one, which starts with '.'),
 * 0 for anything else, which a cleanup must leave alone. */
FSDPC_API int32_t fsdpc_data_cache_name(const char *name);

/* ---- Recipes (fsdpc recipes) -------------------------------------------- */

/* The ready-made configs and chat templates this fsdpc ships: the source
 * tree's configs/ for a program run from its build tree, else the
 * installation's <datadir>/fsdpc/configs (found from the executable). dir
 * (cap bytes) gets the folder. */
FSDPC_API fsdpc_status fsdpc_recipes_dir(char *dir, size_t cap, fsdpc_err *err);
/* Calls each(user, name, file, about) for every recipe under dir, sorted by
 * name: name is its path there without ".yaml" ("tiny-cpu",
 * "bench/llama3-1b-base"; a template keeps its extension), about the first
 * line of its leading comment ("" when none). Strings live for the call. */
FSDPC_API fsdpc_status fsdpc_recipes_list(const char *dir,
                                          void (*each)(void *user, const char *name,
                                                       const char *file, const char *about),
                                          void *user, fsdpc_err *err);
/* Copies recipe name of dir to dest (a file, or a folder to put it in),
 * never overwriting; a config's chat template reference into the recipes
 * becomes the shipped template's absolute path, so the copy runs from any
 * folder. written (cap bytes) gets the path written. */
FSDPC_API fsdpc_status fsdpc_recipes_copy(const char *dir, const char *name, const char *dest,
                                          char *written, size_t cap, fsdpc_err *err);

/* ---- Plugins (fsdpc plugins) -------------------------------------------- */

/* What the search path holds: paths first, then FSDPC_PLUGIN_PATH, the
 * install folder and (from inside a build tree) the build's plugins. Every
 * file is loaded; one that fails is refused with a reason. An entry of
 * paths that does not exist is an error (FSDPC_INVALID_USAGE). */
typedef struct fsdpc_plugins fsdpc_plugins;
FSDPC_API fsdpc_status fsdpc_plugins_open(const char *const *paths, int32_t n_paths,
                                          fsdpc_plugins **out, fsdpc_err *err);
FSDPC_API void fsdpc_plugins_destroy(fsdpc_plugins *p);

/* One component. Strings are the plugin's own (escape them before
 * printing, fsdpc_escape) and live as long as p. */
typedef struct fsdpc_plugin_info {
  uint32_t struct_size; /* set by the caller */
  int32_t kind;         /* FSDPC_KIND_* */
  const char *kind_name, *name, *version, *description, *capabilities, *path;
  uint32_t abi_major, abi_minor, iface_version;
  int32_t score; /* for auto selection */
  uint32_t n_options;
  const fsdpc_option_desc *const *options;
} fsdpc_plugin_info;
FSDPC_API int32_t fsdpc_plugins_count(const fsdpc_plugins *p);
/* Components in search order, i in 0 .. count - 1. */
FSDPC_API fsdpc_status fsdpc_plugins_get(const fsdpc_plugins *p, int32_t i, fsdpc_plugin_info *out,
                                         fsdpc_err *err);
/* The component "NAME" or "KIND/NAME": FSDPC_INVALID_USAGE for an unknown
 * kind or a name two kinds have; FSDPC_UNSUPPORTED with the refusal reason
 * (or "not found" and what there is) when it did not load. */
FSDPC_API fsdpc_status fsdpc_plugins_find(fsdpc_plugins *p, const char *spec,
                                          fsdpc_plugin_info *out, fsdpc_err *err);
/* Refused files: count, then each one's path and reason (owned by p). */
FSDPC_API int32_t fsdpc_plugins_refused_count(const fsdpc_plugins *p);
FSDPC_API void fsdpc_plugins_refused(const fsdpc_plugins *p, int32_t i, const char **path,
                                     const char **reason);
/* The folders and files searched, in order. */
FSDPC_API int32_t fsdpc_plugins_searched_count(const fsdpc_plugins *p);
FSDPC_API const char *fsdpc_plugins_searched(const fsdpc_plugins *p, int32_t i);
/* "collectives", "attention", "optim", "wrap", "statedict"; NULL beyond. */
FSDPC_API const char *fsdpc_plugin_kind_name(int32_t kind);

/* ---- Tokenizers --------------------------------------------------------- */

typedef struct fsdpc_tokenizer fsdpc_tokenizer;
enum { FSDPC_TOKENIZER_NO_SPECIAL = 1 }; /* encode special-token strings as text */
/* "byte", a tokenizer.json, a tokenizer.model or a model folder holding one
 * (with its tokenizer_config.json); flags FSDPC_TOKENIZER_*. */
FSDPC_API fsdpc_status fsdpc_tokenizer_open(const char *spec, uint32_t flags, fsdpc_tokenizer **out,
                                            fsdpc_err *err);
FSDPC_API void fsdpc_tokenizer_destroy(fsdpc_tokenizer *t);

typedef struct fsdpc_tokenizer_info {
  uint32_t struct_size; /* set by the caller */
  const char *name;     /* "byte", "bpe", "sentencepiece" */
  int32_t vocab_size;
  int32_t bos, eos, pad;      /* -1 = none */
  int32_t adds_bos, adds_eos; /* add_bos_token / add_eos_token */
} fsdpc_tokenizer_info;
FSDPC_API void fsdpc_tokenizer_describe(const fsdpc_tokenizer *t, fsdpc_tokenizer_info *out);
/* The ids of text (len bytes) in *ids (fsdpc_free); with offsets non-NULL
 * also each id's byte range [begin, end) of text, 2 per id (fsdpc_free). */
FSDPC_API fsdpc_status fsdpc_tokenizer_encode(const fsdpc_tokenizer *t, const char *text,
                                              size_t len, int32_t **ids, int64_t *n,
                                              int64_t **offsets, fsdpc_err *err);
/* The text of ids (BOS/EOS/PAD write nothing) in *text (len bytes plus a
 * NUL; fsdpc_free). An id outside the vocabulary is an error. */
FSDPC_API fsdpc_status fsdpc_tokenizer_decode(const fsdpc_tokenizer *t, const int32_t *ids,
                                              int64_t n, char **text, size_t *len, fsdpc_err *err);
/* The vocabulary string of id ("<|eot_id|>"), NULL when it has none. */
FSDPC_API const char *fsdpc_tokenizer_token(const fsdpc_tokenizer *t, int32_t id);

/* ---- Token files (docs/data.md) ----------------------------------------- */

typedef struct fsdpc_tokfile fsdpc_tokfile;
/* Maps and validates a token file: header, sizes, offsets, checksums. */
FSDPC_API fsdpc_status fsdpc_tokfile_open(const char *path, fsdpc_tokfile **out, fsdpc_err *err);
FSDPC_API void fsdpc_tokfile_close(fsdpc_tokfile *tf);

typedef struct fsdpc_tokfile_info {
  uint32_t struct_size; /* set by the caller */
  uint32_t version, token_bytes, vocab_size, eos_id, header_crc, payload_crc;
  int32_t has_mask; /* a loss mask: some tokens are not targets */
  int32_t examples; /* whole examples with their own BOS/end tokens (data prepare) */
  int64_t file_bytes, n_tokens, n_docs;
  int64_t target_tokens;    /* trained on under the default packing (fsdpc_tokfile_doc_targets) */
  int64_t min_doc, max_doc; /* document lengths (0 without documents) */
} fsdpc_tokfile_info;
FSDPC_API void fsdpc_tokfile_describe(const fsdpc_tokfile *tf, fsdpc_tokfile_info *out);
/* Document d's first token and length. */
FSDPC_API fsdpc_status fsdpc_tokfile_doc(const fsdpc_tokfile *tf, int64_t d, int64_t *start,
                                         int64_t *len, fsdpc_err *err);
/* Tokens [start, start + n) into ids and (NULL: not wanted) their loss
 * mask bits (1 = may be a training target, 0 = context). */
FSDPC_API fsdpc_status fsdpc_tokfile_read(const fsdpc_tokfile *tf, int64_t start, int64_t n,
                                          int32_t *ids, uint8_t *targets, fsdpc_err *err);
/* The first n tokens of document d marked as training on the file under
 * its default packing does (1/0 into targets): the mask bit, and a token
 * before predicts it (in a file of whole examples nothing predicts an
 * example's first token; in a token stream, only the file's first). As
 * `data batch` marks them; target_tokens of fsdpc_tokfile_info counts them. */
FSDPC_API fsdpc_status fsdpc_tokfile_doc_targets(const fsdpc_tokfile *tf, int64_t d, int64_t n,
                                                 uint8_t *targets, fsdpc_err *err);

typedef struct fsdpc_tokfile_writer fsdpc_tokfile_writer;
enum { FSDPC_TOKFILE_WRITE_MASK = 1 }; /* store a loss mask (targets per token) */
/* A new token file at path (PATH.tmp until finish renames it); flags
 * FSDPC_TOKFILE_WRITE_*. */
FSDPC_API fsdpc_status fsdpc_tokfile_writer_open(const char *path, uint32_t vocab_size,
                                                 uint32_t eos_id, uint32_t flags,
                                                 fsdpc_tokfile_writer **out, fsdpc_err *err);
/* One document; targets NULL = every token a target (a file without a mask
 * takes NULL only). */
FSDPC_API fsdpc_status fsdpc_tokfile_writer_add(fsdpc_tokfile_writer *w, const int32_t *ids,
                                                const uint8_t *targets, int64_t n, fsdpc_err *err);
FSDPC_API fsdpc_status fsdpc_tokfile_writer_finish(fsdpc_tokfile_writer *w, fsdpc_err *err);
FSDPC_API void fsdpc_tokfile_writer_destroy(fsdpc_tokfile_writer *w);

/* One global batch as the training loader serves it (fsdpc data batch). */
typedef struct fsdpc_batch_args {
  uint32_t struct_size;  /* set by fsdpc_batch_args_init */
  int64_t seq_len;       /* T */
  int64_t global_batch;  /* G: windows of the batch */
  int64_t step;          /* global step */
  uint64_t seed;         /* shuffle seed (0) */
  int32_t shuffle;       /* 1 (default): a new order every epoch */
  const char *split;     /* "all" (default), "train" or "eval" */
  double eval_fraction;  /* held-out share of windows */
  uint64_t split_seed;   /* chooses the held-out windows (0x5EED5EED) */
  const char *packing;   /* "window", "examples", "none"; NULL = by the file */
  int32_t overlong_drop; /* packed examples longer than T: 1 drop, 0 truncate */
} fsdpc_batch_args;
FSDPC_API void fsdpc_batch_args_init(fsdpc_batch_args *a);

typedef struct fsdpc_batch fsdpc_batch;
FSDPC_API fsdpc_status fsdpc_batch_create(const fsdpc_tokfile *tf, const fsdpc_batch_args *a,
                                          fsdpc_batch **out, fsdpc_err *err);
FSDPC_API void fsdpc_batch_destroy(fsdpc_batch *b);

typedef struct fsdpc_batch_info {
  uint32_t struct_size;         /* set by the caller */
  int64_t epoch, target_labels; /* of this step's batch */
  int64_t split_windows, total_windows, steps_per_epoch;
  const char *packing;                                         /* "window", "examples" or "none" */
  int64_t examples, tokens, target_tokens, truncated, dropped; /* the packing's counts */
} fsdpc_batch_info;
FSDPC_API void fsdpc_batch_describe(const fsdpc_batch *b, fsdpc_batch_info *out);
/* Row i (0 .. G - 1): its window index and T input ids, labels (-100 = not
 * a target) and document ids (NULL unless rows pack examples); owned by b
 * until the next call. */
FSDPC_API fsdpc_status fsdpc_batch_row(fsdpc_batch *b, int64_t i, int64_t *window,
                                       const int32_t **ids, const int32_t **labels,
                                       const int32_t **doc_ids, fsdpc_err *err);
/* Which of row i's T input tokens are trained on (predicted with loss, by a
 * label of the row or, for a stream window's first token, by the window
 * before): targets (T) gets 1/0. The rule `fsdpc data batch` and
 * fsdpc_tokfile_doc_targets (`data info`) mark by (docs/data.md). */
FSDPC_API fsdpc_status fsdpc_batch_row_targets(fsdpc_batch *b, int64_t i, uint8_t *targets,
                                               fsdpc_err *err);

/* ---- Datasets: synthetic tasks, JSONL preparation ----------------------- */

typedef struct fsdpc_synth_args {
  uint32_t struct_size; /* set by fsdpc_synth_args_init */
  const char *task;     /* "arith", "qa", "copy", "reverse" (token files), "chat" or "tools"
                         * (JSONL: conversations, tool calls) */
  const char *out;
  int64_t n;           /* examples (30000) */
  uint64_t seed;       /* (1) */
  int32_t mask_prompt; /* 1 train on answers only, 0 on every token, -1 the task's (qa: 1) */
  int32_t max_operand; /* arith (20) */
  int32_t max_len;     /* copy, reverse: 1..50 (6) */
} fsdpc_synth_args;
FSDPC_API void fsdpc_synth_args_init(fsdpc_synth_args *a);
typedef struct fsdpc_synth_result {
  uint32_t struct_size;     /* set by the caller */
  int64_t examples, tokens; /* tokens: 0 for chat JSONL */
  int32_t masked;           /* the loss is on answers only */
  int32_t vocab_size;       /* of the byte tokenizer the file is in */
} fsdpc_synth_result;
FSDPC_API fsdpc_status fsdpc_data_synth(const fsdpc_synth_args *a, fsdpc_synth_result *out,
                                        fsdpc_err *err);

/* JSONL examples (text, instruction, prompt/completion, chat) rendered and
 * tokenized into a token file of whole examples with a loss mask. NULL
 * strings and negative numbers take the config's data.* value (when
 * config is given), else the default. */
typedef struct fsdpc_prepare_args {
  uint32_t struct_size;      /* set by fsdpc_prepare_args_init */
  const char *const *inputs; /* .jsonl[.gz]; none: the config's data.train */
  int32_t n_inputs;
  const char *out;            /* unused with dry_run */
  const fsdpc_config *config; /* data.* defaults (format, fields, train_on, ...) */
  const char *format;         /* "text", "instruction", "prompt_completion", "chat", "auto" */
  const char *tokenizer, *chat_template, *template_name;
  const char *text_field, *prompt_field, *completion_field, *instruction_field;
  const char *input_field, *output_field, *system_field, *messages_field;
  const char *train_on;        /* "assistant", "all", "last_assistant" */
  int32_t skip_bad;            /* 1: skip and count bad examples */
  int32_t threads;             /* 0 = all cores */
  int32_t dry_run;             /* 1: check, write nothing */
  int64_t show;                /* print the first examples with their masks (-1: 3 on a dry run) */
  const char *template_kwargs; /* chat: extra template variables, a JSON object */
  int32_t train_on_reasoning;  /* chat: 0 leaves assistant reasoning out of the loss */
} fsdpc_prepare_args;
FSDPC_API void fsdpc_prepare_args_init(fsdpc_prepare_args *a);
typedef struct fsdpc_prepare_result {
  uint32_t struct_size; /* set by the caller */
  const char *format;   /* the format used (static) */
  int64_t lines, examples, skipped, weight_zero, tokens, target_tokens;
  uint64_t bytes_in;
  double seconds;
  char first_skip[512]; /* the first skipped example's message */
} fsdpc_prepare_result;
FSDPC_API fsdpc_status fsdpc_data_prepare(const fsdpc_prepare_args *a, fsdpc_prepare_result *out,
                                          fsdpc_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FSDPC_FSDPC_H */
