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
#include "train/dataset.h"
#include "train/session.h"
#ifdef FSDPC_WITH_CUDA
#include "ops/cuda/cuda_ctx.h"
#endif
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

static fsdpc_status select_plugin(fsdpc_session *s, int32_t kind, const char *name,
                                  fsdpc_opts *opts, const char *section,
                                  const fsdpc_situation *sit, const fsdpc_component **out,
                                  fsdpc_err *err) {
  fsdpc_status st = fsdpc__registry_select(s->reg, kind, name, sit, out, err);
  if (st != FSDPC_OK) return fsdpc__err_prefix(err, "%s", section);
  const fsdpc_component_desc *d = (*out)->desc;
  char who[96];
  snprintf(who, sizeof who, "%s '%s'", fsdpc__kind_name(kind), d->name);
  if (opts) FSDPC_TRY(fsdpc__opts_validate(opts, d->options, d->n_options, who, err));
  FSDPC_LOGD("%s: %s %s from %s", section, who, d->version, (*out)->path);
  return FSDPC_OK;
}

void fsdpc__session_shape_from_config(const fsdpc_config *c, fsdpc_model_shape *sh) {
  const fsdpc_config_model *m = &c->model;
  memset(sh, 0, sizeof *sh);
  sh->V = (int)m->vocab_size;
  sh->C = (int)m->hidden_size;
  sh->F = (int)m->intermediate_size;
  sh->L = (int)m->num_hidden_layers;
  sh->NH = (int)m->num_attention_heads;
  sh->KVH = (int)m->num_key_value_heads;
  sh->HD = (int)m->head_dim;
  sh->max_pos = (int)m->max_position_embeddings;
  sh->eps = (float)m->rms_norm_eps;
  sh->rope_theta = m->rope_theta;
  sh->rope_llama3 = m->rope_scaling.type == FSDPC_ROPE_SCALING_LLAMA3;
  sh->rope_factor = m->rope_scaling.factor;
  sh->rope_low_freq_factor = m->rope_scaling.low_freq_factor;
  sh->rope_high_freq_factor = m->rope_scaling.high_freq_factor;
  sh->rope_original_max_pos = (int)m->rope_scaling.original_max_position_embeddings;
  sh->tied = m->tie_word_embeddings;
  sh->bos_id = (int)m->bos_token_id;
  sh->eos_id = (int)m->eos_token_id;
}


static fsdpc_status open_data(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  if (!c->data.train[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: data.train is empty; point it at a token file (make one with "
                       "`fsdpc data synth`, `tokenize` or `prepare`) or a .jsonl dataset",
                       c->source);
  char train_path[4096], eval_path[4096];
  snprintf(train_path, sizeof train_path, "%s", c->data.train);
  snprintf(eval_path, sizeof eval_path, "%s", c->data.eval);
  if (fsdpc__is_jsonl_path(c->data.train))
    FSDPC_TRY(fsdpc__dataset_prepare(c, c->data.train, s->env.rank, train_path,
                                     sizeof train_path, err));
  if (c->data.eval[0] && fsdpc__is_jsonl_path(c->data.eval))
    FSDPC_TRY(fsdpc__dataset_prepare(c, c->data.eval, s->env.rank, eval_path, sizeof eval_path,
                                     err));
  FSDPC_TRY(fsdpc__tokfile_open(train_path, &s->train_tf, err));
  if (s->train_tf->hdr.vocab_size > (uint32_t)s->shape.V)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: the token file's vocabulary (%u) is larger than model.vocab_size "
                       "(%d)",
                       c->data.train, s->train_tf->hdr.vocab_size, s->shape.V);
  fsdpc_loader_opts lo;
  fsdpc__loader_opts_default(&lo);
  lo.seq_len = (int32_t)s->T;
  lo.global_batch = s->G;
  lo.seed = (uint64_t)c->data.seed;
  lo.shuffle = c->data.shuffle;
  fsdpc__dataset_loader_opts(c, s->train_tf, &lo);
  s->examples = lo.packing != FSDPC_PACK_WINDOW;
  s->use_doc_ids = c->data.document_masking || s->examples;
  int held_out = !c->data.eval[0] && c->data.eval_fraction > 0.0;
  lo.split = held_out ? FSDPC_SPLIT_TRAIN : FSDPC_SPLIT_ALL;
  lo.eval_fraction = held_out ? c->data.eval_fraction : 0.0;
  FSDPC_TRY(fsdpc__loader_create(s->train_tf, &lo, &s->train_ld, err));
  if (held_out || c->data.eval[0]) {
    const fsdpc_tokfile *etf = s->train_tf;
    if (c->data.eval[0]) {
      FSDPC_TRY(fsdpc__tokfile_open(eval_path, &s->eval_tf, err));
      etf = s->eval_tf;
    }
    lo.split = held_out ? FSDPC_SPLIT_EVAL : FSDPC_SPLIT_ALL;
    lo.shuffle = 0;
    FSDPC_TRY(fsdpc__loader_create(etf, &lo, &s->eval_ld, err));
  } else if (c->train.eval_every > 0) {
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: train.eval_every is %lld but there is no evaluation data; set "
                       "data.eval or data.eval_fraction",
                       c->source, (long long)c->train.eval_every);
  }
  size_t n = (size_t)(s->mb * s->T);
  s->tokens = calloc(n, sizeof(int32_t));
  s->labels = calloc(n, sizeof(int32_t));
  s->doc_ids = calloc(n, sizeof(int32_t));
  if (!s->tokens || !s->labels || !s->doc_ids)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the batch");
  return FSDPC_OK;
}

static fsdpc_status batch_geometry(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  int world = s->env.world_size;
  s->mb = c->train.micro_batch_size;
  s->T = c->data.seq_len;
  s->G = c->train.global_batch_size > 0 ? c->train.global_batch_size
                                        : s->mb * c->train.grad_accum_steps * world;
  if (s->G % (s->mb * world) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "train.global_batch_size (%lld) must be a multiple of "
                       "train.micro_batch_size (%lld) x world size (%d)",
                       (long long)s->G, (long long)s->mb, world);
  s->accum = s->G / (s->mb * world);
  return FSDPC_OK;
}

/* The device this rank computes on: the CPU reference (fp32), or the GPU
 * whose ordinal is the local rank (bf16 compute, fp32 master weights). */
static fsdpc_status setup_device(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  int want = c->fsdp.mixed_precision.param_dtype;
  if (c->train.device == FSDPC_DEVICE_CPU) {
    if (want == FSDPC_DTYPE_BF16)
      return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                         "%s: fsdp.mixed_precision.param_dtype=bf16 needs train.device: cuda; the "
                         "CPU path is the fp32 reference",
                         c->source);
    s->ops = fsdpc__ops_cpu();
    return FSDPC_OK;
  }
#ifdef FSDPC_WITH_CUDA
  if (want == FSDPC_DTYPE_F32)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "%s: the CUDA path computes in bf16 (with fp32 master weights, gradients "
                       "and optimizer state); set fsdp.mixed_precision.param_dtype to bf16 or auto",
                       c->source);
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

fsdpc_status fsdpc__session_create(fsdpc_config *cfg, const fsdpc_dist_env *env,
                                   fsdpc_session **out, fsdpc_err *err) {
  fsdpc_session *s = calloc(1, sizeof *s);
  if (!s) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st;
  s->cfg = cfg;
  s->env = *env;
  s->t_start = fsdpc__now();
  int world = env->world_size, rank = env->rank;
  if (cfg->train.threads > 0) omp_set_num_threads((int)cfg->train.threads);

#define STEP(x)                                                                                \
  do {                                                                                         \
    if ((st = (x)) != FSDPC_OK) goto fail;                                                     \
  } while (0)

  STEP(batch_geometry(s, err));
  STEP(setup_device(s, err));
  fsdpc__session_shape_from_config(cfg, &s->shape);
  STEP(fsdpc__model_params(&s->shape, &s->params, &s->n_params, err));

  STEP(fsdpc__registry_create((const char *const *)cfg->plugins.paths.items, cfg->plugins.paths.n,
                              &s->reg, err));
  fsdpc_situation sit = {.struct_size = sizeof sit, .device = s->ops->device,
                         .dtype = s->ops->act_dtype, .world_size = world,
                         .num_heads = s->shape.NH, .num_kv_heads = s->shape.KVH,
                         .head_dim = s->shape.HD, .max_seq_len = (int)s->T};
  STEP(select_plugin(s, FSDPC_KIND_ATTENTION, cfg->attention.impl, cfg->attention.options,
                     "attention.impl", &sit, &s->attn, err));
  STEP(select_plugin(s, FSDPC_KIND_OPTIM, cfg->optim.name, cfg->optim.options, "optim.name",
                     &sit, &s->optim, err));
  STEP(select_plugin(s, FSDPC_KIND_WRAP, cfg->fsdp.wrap.policy, cfg->fsdp.wrap.options,
                     "fsdp.wrap.policy", &sit, &s->wrap, err));
  STEP(fsdpc__wrap_plan(s->wrap, cfg->fsdp.wrap.options, s->params, s->n_params,
                        &s->unit_of_param, &s->n_units, err));

  /* Communicators. The shard group: everyone (FULL_SHARD, SHARD_GRAD_OP),
   * nobody else (NO_SHARD), or hybrid_shard_size ranks (HYBRID_SHARD). */
  int S = world;
  if (cfg->fsdp.sharding_strategy == FSDPC_SHARD_NO_SHARD) S = 1;
  if (cfg->fsdp.sharding_strategy == FSDPC_SHARD_HYBRID_SHARD)
    S = cfg->fsdp.hybrid_shard_size > 0 ? (int)cfg->fsdp.hybrid_shard_size
                                        : env->local_world_size;
  if (world > 1) {
    STEP(select_plugin(s, FSDPC_KIND_COLLECTIVES, cfg->collectives.impl, cfg->collectives.options,
                       "collectives.impl", &sit, &s->coll, err));
    STEP(fsdpc__dist_job_start(env, cfg->collectives.timeout_s * 1000, &s->job, err));
    fsdpc__store_as_v1(s->job->store, &s->store_v1);
    fsdpc__dist_set_device(&s->dist, s->ops,
                           s->ops->device == FSDPC_DEVICE_CPU ? -1 : env->local_rank);
    STEP(fsdpc__dist_init(&s->dist, s->coll, cfg->collectives.options, &s->store_v1, "fsdpc/",
                          rank, world, S, cfg->collectives.timeout_s * 1000, err));
  } else {
    fsdpc__dist_single(&s->dist);
    if (cfg->fsdp.sharding_strategy == FSDPC_SHARD_HYBRID_SHARD && S > 1) S = 1;
  }

  fsdpc_optim_init oi = {.struct_size = sizeof oi, .opts = cfg->optim.options,
                         .weight_decay = cfg->optim.weight_decay, .beta1 = cfg->optim.betas[0],
                         .beta2 = cfg->optim.betas[1], .eps = cfg->optim.eps,
                         .momentum = cfg->optim.momentum, .nesterov = cfg->optim.nesterov,
                         .device = s->ops->device};
  fsdpc_engine_opts eo = {.shape = &s->shape,
                          .strategy = (fsdpc_strategy)cfg->fsdp.sharding_strategy,
                          .no_sync = cfg->fsdp.no_sync, .align = (int)cfg->fsdp.align,
                          .params = s->params, .n_params = s->n_params,
                          .unit_of_param = s->unit_of_param, .n_units = s->n_units,
                          .dist = &s->dist, .optim = s->optim, .optim_init = &oi,
                          .decay_norm_and_bias = cfg->optim.decay_norm_and_bias,
                          .threads = omp_get_max_threads(), .ops = s->ops,
                          .forward_prefetch = cfg->fsdp.forward_prefetch,
                          .backward_prefetch = cfg->fsdp.backward_prefetch,
                          .reduce_dtype = cfg->fsdp.mixed_precision.reduce_dtype,
                          .cpu_offload = cfg->fsdp.cpu_offload};
  STEP(fsdpc__engine_create(&eo, &s->eng, err));
  char resume_dir[4096];
  int resuming = 0;
  STEP(fsdpc__ckpt_resume_dir(cfg, resume_dir, sizeof resume_dir, &resuming, err));
  if (resuming) {
    /* the checkpoint's weights replace any init (fsdpc__ckpt_session_setup) */
  } else if (cfg->model.init.from[0]) {
    STEP(fsdpc__ckpt_load_hf_checked(s, cfg->model.init.from, err));
  } else {
    STEP(fsdpc__engine_init_random(s->eng, (uint64_t)cfg->train.seed, cfg->model.init.std, err));
  }

  fsdpc_model_ctx_opts mo = {.shape = &s->shape, .B = (int)s->mb, .T = (int)s->T,
                             .activation_checkpointing = cfg->fsdp.activation_checkpointing,
                             .attention = s->attn, .attention_opts = cfg->attention.options,
                             .ops = s->ops};
  STEP(fsdpc__model_ctx_create(&mo, &s->mctx, err));
  STEP(open_data(s, err));
  STEP(fsdpc__tokenizer_open(cfg->data.tokenizer, &s->tok, err));
  if (fsdpc__tokenizer_vocab_size(s->tok) > s->shape.V) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: data.tokenizer '%s' has %d tokens, more than model.vocab_size (%d)",
                     cfg->source, cfg->data.tokenizer, fsdpc__tokenizer_vocab_size(s->tok),
                     s->shape.V);
    goto fail;
  }
  STEP(fsdpc__dataset_plan(cfg, s->train_ld, s->G, s->mb, s->accum, world, rank, err));
  STEP(fsdpc__schedule_init(&s->sched, schedule_name(cfg->schedule.name), cfg->optim.lr,
                            cfg->train.max_steps, cfg->schedule.warmup_steps,
                            cfg->schedule.warmup_ratio, cfg->schedule.min_lr,
                            cfg->schedule.min_lr_ratio, err));
  STEP(fsdpc__ckpt_session_setup(s, err));
  if (rank == 0) {
    STEP(fsdpc__mkdir_p(cfg->log.dir, err));
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->log.dir);
    if (!(s->metrics = fopen(path, "w"))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: check log.dir", path);
      goto fail;
    }
    s->progress = cfg->log.progress == FSDPC_PROGRESS_ON ||
                  (cfg->log.progress == FSDPC_PROGRESS_AUTO && isatty(STDOUT_FILENO));
  }
#undef STEP
  *out = s;
  return FSDPC_OK;
fail:
  fsdpc__session_destroy(s);
  return st;
}

void fsdpc__session_destroy(fsdpc_session *s) {
  if (!s) return;
  fsdpc__ckpt_session_destroy(s);
  if (s->metrics) fclose(s->metrics);
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
  free(s->unit_of_param);
  free(s->params);
  fsdpc__registry_destroy(s->reg);
#ifdef FSDPC_WITH_CUDA
  fsdpc__cuda_ctx_destroy(s->cuda); /* after everything that holds device memory */
#endif
  free(s);
}
