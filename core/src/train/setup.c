/* Building a training session from a config: plugins, model shape, wrap
 * plan, communicators, engine, weights, data and schedule. Each step names
 * what failed and what to do; the unwinding is in fsdpc__session_destroy. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/train_hooks.h"
#include "plan/plan.h"
#include "train/dataset.h"
#include "train/session.h"
#ifdef FSDPC_WITH_CUDA
#include "ops/cuda/cuda_ctx.h"
#endif
#include "util/clock.h"
#include "util/fault.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* Preference pairs and objectives on sequence log-probs go together
 * (docs/objectives.md); an evaluation-only session reads either. */
static fsdpc_status check_pairs(const fsdpc_session *s, const char *path, int pairs,
                                fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  if (!s->objective.comp)
    return FSDPC_OK;
  if (pairs && !s->objective.seq)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s holds preference pairs, which objective.name '%s' does not train on; "
                       "set objective.name: dpo (or ipo, hinge, simpo, orpo)",
                       path, c->objective.name);
  if (!pairs && s->objective.seq)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "objective.name '%s' trains on (chosen, rejected) pairs, and %s holds none; "
                       "prepare them with `fsdpc data prepare --format preference`",
                       c->objective.name, path);
  if (pairs && c->data.packing != FSDPC_DATA_PACKING_AUTO)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s holds preference pairs, one pair a row: leave data.packing at auto",
                       path);
  return FSDPC_OK;
}

static fsdpc_status open_data(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  char train_path[4096], eval_path[4096];
  snprintf(eval_path, sizeof eval_path, "%s", c->data.eval);
  /* data.train or the mix of data.datasets, JSONL prepared into the cache */
  FSDPC_TRY(fsdpc__dataset_train_path(c, s->env.rank, s->env.local_rank, train_path,
                                      sizeof train_path, err));
  if (c->data.eval[0] && fsdpc__is_jsonl_path(c->data.eval))
    FSDPC_TRY(fsdpc__dataset_prepare(c, c->data.eval, s->env.rank, s->env.local_rank, eval_path,
                                     sizeof eval_path, err));
  FSDPC_TRY(fsdpc__tokfile_open(train_path, &s->train_tf, err));
  FSDPC_TRY(fsdpc__run_check_vocab(s->plan, "the token file's vocabulary", train_path,
                                   s->train_tf->hdr.vocab_size, err));
  fsdpc_loader_opts lo;
  fsdpc__loader_opts_default(&lo);
  lo.seq_len = (int32_t)s->plan->modes.batch.seq_len;
  lo.global_batch = s->plan->modes.batch.global;
  lo.seed = (uint64_t)c->data.seed;
  lo.shuffle = c->data.shuffle;
  fsdpc__dataset_loader_opts(c, s->train_tf, &lo);
  FSDPC_TRY(check_pairs(s, train_path, lo.packing == FSDPC_PACK_PAIRS, err));
  s->examples = lo.packing != FSDPC_PACK_WINDOW;
  s->use_doc_ids = c->data.document_masking || s->examples;
  int held_out = !c->data.eval[0] && c->data.eval_fraction > 0.0;
  lo.split = held_out ? FSDPC_SPLIT_TRAIN : FSDPC_SPLIT_ALL;
  lo.eval_fraction = held_out ? c->data.eval_fraction : 0.0;
  FSDPC_TRY(fsdpc__loader_create(s->train_tf, &lo, &s->train_ld, err));
  /* the run plan's batch geometry learns the data's length here */
  s->plan->modes.batch.steps_per_epoch = fsdpc__loader_steps_per_epoch(s->train_ld);
  if (held_out || c->data.eval[0]) {
    const fsdpc_tokfile *etf = s->train_tf;
    if (c->data.eval[0]) {
      FSDPC_TRY(fsdpc__tokfile_open(eval_path, &s->eval_tf, err));
      etf = s->eval_tf;
    }
    lo.split = held_out ? FSDPC_SPLIT_EVAL : FSDPC_SPLIT_ALL;
    lo.shuffle = 0;
    /* evaluation reads windows by index, in batches of its own with a
     * smaller last one (train/loop.c): fewer windows than a global batch
     * are fine */
    lo.global_batch = 1;
    /* the eval file's own packing: a prepared JSONL is whole examples even
     * when the training data is a plain token stream */
    fsdpc__dataset_loader_opts(c, etf, &lo);
    s->eval_doc_ids = c->data.document_masking || lo.packing != FSDPC_PACK_WINDOW;
    FSDPC_TRY(fsdpc__loader_create(etf, &lo, &s->eval_ld, err));
  } else if (c->train.eval_every > 0) {
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: train.eval_every is %lld but there is no evaluation data; set "
                       "data.eval or data.eval_fraction",
                       c->source, (long long)c->train.eval_every);
  }
  size_t n = (size_t)(s->plan->modes.batch.micro * s->plan->modes.batch.seq_len);
  s->tokens = calloc(n, sizeof(int32_t));
  s->labels = calloc(n, sizeof(int32_t));
  s->doc_ids = calloc(n, sizeof(int32_t));
  if (!s->tokens || !s->labels || !s->doc_ids)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the batch");
  return FSDPC_OK;
}

/* The device this rank computes on: the CPU reference (fp32), or the GPU
 * whose ordinal is the local rank (bf16 compute, fp32 master weights). */
static fsdpc_status setup_device(fsdpc_session *s, fsdpc_err *err) {
  if (s->cfg->train.device == FSDPC_DEVICE_CPU) {
    s->ops = fsdpc__ops_cpu_team(&s->ops_dev, &s->cpu_threads);
    return FSDPC_OK;
  }
#ifdef FSDPC_WITH_CUDA
  int n = fsdpc__cuda_device_count();
  if (n == 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "train.device is cuda but no CUDA device is visible (driver, "
                       "CUDA_VISIBLE_DEVICES?)");
  if (s->env.local_rank >= n)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "local rank %d needs GPU %d but this node has %d; start at most %d ranks "
                       "per node",
                       s->env.local_rank, s->env.local_rank, n, n);
  fsdpc_cuda_ctx_opts co;
  fsdpc__cuda_ctx_opts_default(&co);
  co.device_index = s->env.local_rank;
  co.gemm_sm_margin = (int)s->cfg->train.gemm_sm_margin;
  fsdpc_cuda_ctx *ctx = NULL;
  FSDPC_TRY(fsdpc__cuda_ctx_create(&co, &ctx, err));
  s->cuda = ctx;
  fsdpc__ops_cuda(ctx, &s->ops_dev);
  s->ops = &s->ops_dev;
  return FSDPC_OK;
#else
  return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "train.device is cuda but this fsdpc was built without CUDA; rebuild with "
                     "nvcc installed (cmake -DFSDPC_CUDA=ON)");
#endif
}

static const char *schedule_name(int id) {
  return id == FSDPC_SCHED_CONSTANT ? "constant" : id == FSDPC_SCHED_LINEAR ? "linear" : "cosine";
}

static fsdpc_status create(fsdpc_config *cfg, const fsdpc_dist_env *env, int eval_only,
                           fsdpc_session **out, fsdpc_err *err);

fsdpc_status fsdpc__session_create(fsdpc_config *cfg, const fsdpc_dist_env *env,
                                   fsdpc_session **out, fsdpc_err *err) {
  return create(cfg, env, 0, out, err);
}

fsdpc_status fsdpc__session_create_eval(fsdpc_config *cfg, const fsdpc_dist_env *env,
                                        fsdpc_session **out, fsdpc_err *err) {
  return create(cfg, env, 1, out, err);
}

static fsdpc_status create(fsdpc_config *cfg, const fsdpc_dist_env *env, int eval_only,
                           fsdpc_session **out, fsdpc_err *err) {
  fsdpc_session *s = calloc(1, sizeof *s);
  if (!s) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st;
  s->cfg = cfg;
  s->env = *env;
  s->t_start = fsdpc__now();
  /* launch: from the launcher's start when it started this rank */
  double age = fsdpc__process_age(getenv("FSDPC_LAUNCHER") ? (int)getppid() : 0);
  if (age < 0)
    age = fsdpc__process_age(0);
  s->startup.launch = age > 0 ? age : 0.0;
  double t_phase = s->t_start;
#define PHASE(field)                                                                               \
  do {                                                                                             \
    double now_ = fsdpc__now();                                                                    \
    s->startup.field += now_ - t_phase;                                                            \
    t_phase = now_;                                                                                \
  } while (0)
  int world = env->world_size, rank = env->rank;
  /* train.threads is the OpenMP team size of the CPU ops, the optimizer and
   * the attention plugin, handed to each call (never omp_set_num_threads:
   * the caller's OpenMP settings stay as they are). */
  s->cpu_threads = cfg->train.threads > 0 ? (int)cfg->train.threads : 0;

#define STEP(x)                                                                                \
  do {                                                                                         \
    if ((st = (x)) != FSDPC_OK) goto fail;                                                     \
  } while (0)

  /* FSDPC_FAULT (util/fault.h): inert unless set */
  STEP(fsdpc__fault_arm(rank, err));
  /* The device first: "no GPU here" says more than a plugin refusing it. */
  STEP(setup_device(s, err));
  PHASE(device);
  char resume_dir[4096];
  int resuming = 0;
  STEP(fsdpc__ckpt_resume_dir(cfg, resume_dir, sizeof resume_dir, &resuming, err));
  fsdpc_run_world rw = {.world_size = world, .nproc_per_node = env->local_world_size};
  /* evaluation of weights (an HF folder): no grads or optimizer state; a
   * sharded checkpoint's resume reads its optimizer state, so keeps them */
  STEP(fsdpc__run_plan_create(cfg, &rw, eval_only && !resuming ? FSDPC_RUN_PLAN_EVAL : 0, &s->plan,
                              err));
  fsdpc__registry_set_threads(s->plan->reg, s->cpu_threads); /* host device_info */
  if (!eval_only) /* a bad objective stops the run before any memory is taken */
    STEP(fsdpc__objective_open(cfg, s->plan->reg, &s->objective, err));
  const fsdpc_run_plan *p = s->plan;
  const fsdpc_run_modes *md = &p->modes;
  PHASE(plugins);
#ifdef FSDPC_WITH_CUDA
  /* the plan is a promise: a run that does not fit stops here, before any work */
  if (s->cuda && cfg->fsdp.fit_check) {
    uint64_t free_b = 0, total_b = 0;
    STEP(fsdpc__cuda_mem_info(s->cuda, &free_b, &total_b, err));
    STEP(fsdpc__plan_fit_check(p, free_b, env->local_rank, err));
  }
#endif

  /* Communicators: the shard group and the replica group of the plan. */
  if (world > 1) {
    fsdpc_dist_job_opts jo = {.timeout_ms = cfg->collectives.timeout_s * 1000,
                              .heartbeat_timeout_ms =
                                  (int64_t)(cfg->dist.heartbeat_timeout_s * 1000.0)};
    STEP(fsdpc__dist_job_start(env, &jo, &s->job, err));
    fsdpc__store_as_v1(s->job->store, &s->store_v1);
    fsdpc__dist_set_watch(&s->dist, s->job->watch);
    fsdpc__dist_set_device(&s->dist, s->ops,
                           s->ops->device == FSDPC_DEVICE_CPU ? -1 : env->local_rank);
    STEP(fsdpc__dist_init(&s->dist, p->coll, cfg->collectives.options, &s->store_v1, "fsdpc/", rank,
                          world, md->S, cfg->collectives.timeout_s * 1000, err));
  } else {
    fsdpc__dist_single(&s->dist);
  }
  PHASE(comm);

  /* The engine is the plan's; what the plan cannot hold (it is the same on
   * every rank and in `fsdpc plan`) comes beside it: this rank's
   * communicators, the device and the host threads. */
  fsdpc_engine_env ee = {.dist = &s->dist,
                         .ops = s->ops,
                         .threads = s->cpu_threads > 0 ? s->cpu_threads : omp_get_max_threads()};
  STEP(fsdpc__engine_create(p, &ee, &s->eng, err));
  PHASE(alloc);
  if (resuming && !p->has_lora) {
    /* the checkpoint's weights replace any init (fsdpc__ckpt_session_setup);
     * under LoRA it holds only the adapters, so the base is loaded first */
    s->startup.weights_how = "resume";
  } else if (cfg->model.init.from[0]) {
    STEP(fsdpc__ckpt_load_hf_checked(s->eng, s->plan, cfg->model.init.from, err));
    if (p->has_lora)
      STEP(fsdpc__engine_init_adapters(s->eng, (uint64_t)cfg->train.seed, err));
    s->startup.weights_how = "HF load";
  } else {
    char note[4200]; /* model.config alone: the shape only, said once */
    fsdpc__config_model_note(cfg, note, sizeof note);
    if (note[0] && s->env.rank == 0)
      FSDPC_LOGI("%s", note);
    STEP(fsdpc__engine_init_random(s->eng, (uint64_t)cfg->train.seed, cfg->model.init.std, err));
    s->startup.weights_how = s->ops->init_f32 && !md->cpu_offload_asked
                                 ? "random init on the device"
                                 : "random init on the host";
  }
  PHASE(weights);

  /* the plan's model context, in the block the engine's arena holds for it */
  fsdpc_model_ctx_opts mo;
  fsdpc__run_model_opts(p, md, &mo);
  mo.ops = s->ops;
  mo.threads = s->cpu_threads;
  mo.arena = fsdpc__engine_act_block(s->eng, &mo.arena_bytes);
  STEP(fsdpc__model_ctx_create(&mo, &s->mctx, err));
  PHASE(model);
  STEP(open_data(s, err));
  STEP(fsdpc__tokenizer_open(cfg->data.tokenizer, &s->tok, err));
  STEP(fsdpc__run_check_vocab(p, "the data.tokenizer vocabulary", cfg->data.tokenizer,
                              fsdpc__tokenizer_vocab_size(s->tok), err));
  STEP(fsdpc__dataset_plan(cfg, s->train_ld, &s->plan->modes.batch, world, rank, err));
  STEP(fsdpc__schedule_init(&s->sched, schedule_name(cfg->schedule.name), cfg->optim.lr,
                            p->modes.batch.max_steps, cfg->schedule.warmup_steps,
                            cfg->schedule.warmup_ratio, cfg->schedule.min_lr,
                            cfg->schedule.min_lr_ratio, err));
  s->ckpt = (fsdpc_ckpt_train){.cfg = cfg,
                               .plan = p,
                               .rank = rank,
                               .eng = s->eng,
                               .dist = &s->dist,
                               .train_ld = s->train_ld,
                               .weights_only = eval_only,
                               .lr = {.name = fsdpc__schedule_name(&s->sched),
                                      .base_lr = s->sched.base_lr,
                                      .min_lr_rate = s->sched.min_lr_rate,
                                      .warmup_steps = s->sched.warmup_steps,
                                      .max_steps = s->sched.max_steps}};
  PHASE(data);
  STEP(fsdpc__ckpt_session_setup(&s->ckpt, err));
  if (resuming)
    PHASE(weights); /* the checkpoint's shards were read here */
  s->next_step = s->ckpt.start_step;
  if (rank == 0) {
    STEP(fsdpc__session_open_logs(s, err));
    s->progress = fsdpc__progress_wanted(cfg, env);
  }
  PHASE(data);
  s->startup.t_ready = t_phase;
#undef PHASE
#undef STEP
  *out = s;
  return FSDPC_OK;
fail:
  fsdpc__dist_job_fail(s->job, st, err); /* the other ranks learn of it at once */
  fsdpc__session_destroy(s);
  return st;
}

void fsdpc__session_destroy(fsdpc_session *s) {
  if (!s) return;
  fsdpc__ckpt_session_destroy(&s->ckpt);
  fsdpc__session_close_logs(s);
  free(s->tokens);
  free(s->labels);
  free(s->doc_ids);
  fsdpc__loader_destroy(s->train_ld);
  fsdpc__loader_destroy(s->eval_ld);
  fsdpc__tokfile_close(s->train_tf);
  fsdpc__tokfile_close(s->eval_tf);
  fsdpc__tokenizer_destroy(s->tok);
  fsdpc__model_ctx_destroy(s->mctx);
  fsdpc__engine_destroy(s->eng);
  fsdpc__dist_destroy(&s->dist);
  fsdpc__dist_job_stop(s->job);
  fsdpc__objective_close(&s->objective); /* before the registry that holds its plugin */
  fsdpc__pref_free(s->pref);
  fsdpc__run_plan_destroy(s->plan);
  fsdpc__fault_disarm();
#ifdef FSDPC_WITH_CUDA
  fsdpc__cuda_ctx_destroy(s->cuda); /* after everything that holds device memory */
#endif
  free(s);
}
