/* Offline conversion between checkpoint formats, in one process that plays
 * every target rank in turn (`fsdpc convert`).
 *
 * The same statedict plugins as training do the work, over a backend of
 * plain buffers laid out by fsdpc__layout_build (one unit per module):
 * - to sharded at world W: each target shard rank r in turn builds its
 *   layout, loads only its own ranges from the source (any format), and
 *   writes its shard file; memory is one rank's shards (model / S).
 * - to full: one rank (S = 1) loads the whole model in fp32 and streams it
 *   out unit by unit; memory is the model in fp32.
 * The output carries no optimizer state: a run resumed from it starts at
 * step 0 with a fresh optimizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/convert.h"
#include "ckpt/peft.h"
#include "ckpt/state.h"
#include "io/fileio.h"
#include "model/hf_rules.h"
#include "runplan/runplan.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"

typedef struct vrank {
  fsdpc_layout lay;
  float **shard; /* (n_units) */
} vrank;

static float *v_shard(void *ctx, int u, int slot) {
  vrank *v = ctx;
  return slot == FSDPC_SD_SLOT_PARAM ? v->shard[u] : NULL;
}

static fsdpc_status v_gather(void *ctx, int u, int slot, int root, float *full, fsdpc_err *err) {
  vrank *v = ctx;
  if (v->lay.S != 1 || slot != FSDPC_SD_SLOT_PARAM)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "convert: gather needs one rank and params");
  if (full)
    memcpy(full, v->shard[u], v->lay.units[u].flat_numel * sizeof(float));
  return FSDPC_OK;
}

static fsdpc_status v_agree(void *ctx, int *ok, fsdpc_err *err) {
  return FSDPC_OK;
}

static void vrank_free(vrank *v) {
  for (int u = 0; v->shard && u < v->lay.n_units; u++)
    fsdpc__mem_free(FSDPC_MEM_PARAMS, v->shard[u], v->lay.units[u].shard_numel * sizeof(float));
  free(v->shard);
  fsdpc__layout_free(&v->lay);
}

static fsdpc_status load_config(const fsdpc_convert_opts *o, fsdpc_config **cfg, fsdpc_err *err) {
  if (o->config)
    return fsdpc__config_load(o->config, o->overrides, o->n_overrides, cfg, err);
  char *p = fsdpc__path_join(o->src, FSDPC_CKPT_CONFIG_FILE);
  struct stat sb;
  int have = p && stat(p, &sb) == 0;
  fsdpc_status st;
  if (have) {
    st = fsdpc__config_load_checkpoint(p, o->overrides, o->n_overrides, cfg, err);
  } else {
    /* An HF folder gives the model (model.from: its shape and weights, so
     * that model.adapter merges into them); the rest defaults. */
    int n = o->n_overrides + 1;
    const char **ov = calloc((size_t)n, sizeof *ov);
    char *mc = malloc(strlen(o->src) + 16);
    if (!ov || !mc) {
      free(ov);
      free(mc);
      free(p);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    }
    sprintf(mc, "model.from=%s", o->src);
    ov[0] = mc;
    for (int i = 0; i < o->n_overrides; i++)
      ov[i + 1] = o->overrides[i];
    st = fsdpc__config_from_string("train: {}\n", "fsdpc convert", ov, n, cfg, err);
    free(ov);
    free(mc);
  }
  free(p);
  return st;
}

fsdpc_status fsdpc__convert(const fsdpc_convert_opts *o, fsdpc_err *err) {
  fsdpc_config *cfg = NULL;
  fsdpc_run_plan *rp = NULL;
  uint32_t *unit_of = NULL;
  fsdpc_ckpt_formats fmt = {0};
  fsdpc_ckpt_host *h = NULL;
  char *yaml = NULL, *state = NULL;
  vrank v = {0};
  int staged = 0, merged = 0;
  fsdpc_status st;
  const char *name = strrchr(o->dst, '/');
  char root[4096];
  snprintf(root, sizeof root, "%s", o->dst);
  if (name && name != o->dst) {
    root[name - o->dst] = '\0';
    name++;
  } else {
    snprintf(root, sizeof root, ".");
    name = name ? name + 1 : o->dst;
  }
  if (!name[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "convert: bad output folder '%s'", o->dst);
  struct stat sb;
  if (stat(o->src, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "checkpoint %s: no such folder", o->src);
  if (stat(o->dst, &sb) == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "convert: %s already exists; remove it or choose another folder", o->dst);

#define STEP(x)                                                                                    \
  do {                                                                                             \
    if ((st = (x)) != FSDPC_OK)                                                                    \
      goto out;                                                                                    \
  } while (0)
  STEP(load_config(o, &cfg, err));
  /* The model and the plugins; the target's groups come from the flags. */
  STEP(fsdpc__run_plan_create(cfg, NULL, FSDPC_RUN_PLAN_MODEL_ONLY, &rp, err));
  fsdpc_model_shape shape = rp->shape, lay_shape = rp->shape;
  const fsdpc_param_info *params = rp->params;
  int n_params = rp->n_params;
  if (rp->has_lora) {
    /* A LoRA checkpoint holds the adapters only (docs/lora.md): convert
     * those, between sharded layouts; the merged model is the run's
     * peft.merge_on_save output, not a conversion. */
    if (strcmp(o->to, "sharded") != 0)
      STEP(fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "convert: %s is a LoRA checkpoint (adapters only): it converts --to "
                       "sharded; for a Hugging Face model train with peft.merge_on_save: true",
                       o->src));
    params += rp->n_base_params;
    n_params -= rp->n_base_params;
    lay_shape.tied = 0; /* no embedding among the adapters */
  }
  fsdpc_registry *reg = rp->reg;
  const fsdpc_component *src;
  STEP(fsdpc__ckpt_probe(reg, NULL, o->src, &src, err));
  if (fsdpc__hf_is_folder(o->src)) /* what fsdpc can model */
    STEP(fsdpc__hf_rules_folder(o->src, &shape, cfg->data.seq_len, err));
  STEP(fsdpc__ckpt_formats_select(reg, src->desc->name, o->to, cfg->checkpoint.options, &fmt, err));
  int to_full = strcmp(fmt.final->desc->name, "full") == 0;

  /* One unit per module: valid for any format, and the full format then
   * streams a module at a time. */
  unit_of = calloc((size_t)n_params, sizeof *unit_of);
  if (!unit_of)
    STEP(fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory"));
  uint32_t n_units = 0;
  for (int p = 0; p < n_params; p++) {
    int same = p > 0 && strcmp(params[p].module, params[p - 1].module) == 0;
    unit_of[p] = same ? unit_of[p - 1] : n_units++;
  }
  int world = to_full ? 1 : o->world;
  const char *strategy = to_full ? "NO_SHARD" : o->strategy;
  int sid = fsdpc__strategy_parse(strategy);
  if (world < 1 || sid < 0)
    STEP(fsdpc__fail(err, FSDPC_INVALID_USAGE, "convert: bad world size %d or strategy '%s'", world,
                     strategy));
  /* Offline there is no node layout: HYBRID_SHARD needs its group size. */
  fsdpc_run_world rw = {.world_size = world, .nproc_per_node = 0};
  int S = 1;
  if ((st = fsdpc__run_shard_size((fsdpc_strategy)sid, &rw, o->hybrid_shard_size, &S, err)) !=
      FSDPC_OK) {
    fsdpc__err_prefix(err, "convert (--world, --strategy, --hybrid-shard-size)");
    goto out;
  }

  /* The trainer state of a converted checkpoint: step 0, model only. */
  fsdpc_ckpt_state cs = {
      .loader_epoch = -1, .loader_step = -1, .world_size = world, .model = shape};
  snprintf(cs.strategy, sizeof cs.strategy, "%s", strategy);
  cs.config_text = fsdpc__ckpt_config_text(cfg);
  if (cs.config_text)
    cs.config_hash = fsdpc__ckpt_hash(cs.config_text);
  state = fsdpc__ckpt_state_build(&cs);
  free(cs.config_text);
  if (state && rp->has_lora) { /* the base, by content (docs/lora.md) */
    fsdpc_base_id id = {0};
    if (cfg->model.init.from[0] &&
        (st = fsdpc__base_id(cfg->model.init.from, &id, err)) != FSDPC_OK) {
      fsdpc__err_prefix(err, "convert: the LoRA checkpoint's base (model.init.from; give it with "
                             "model.init.from=PATH)");
      goto out;
    }
    STEP(fsdpc__lora_state_add_base(cfg->model.init.from, &id, &state, err));
  }
  size_t ylen = 0;
  FILE *yf = open_memstream(&yaml, &ylen);
  if (yf) {
    fsdpc__config_dump(cfg, yf);
    fclose(yf);
  }
  if (!state || !yaml)
    STEP(fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory"));

  STEP(fsdpc__ckpt_stage_begin(root, name, err));
  staged = 1;
  double t0 = fsdpc__now();
  for (int r = 0; r < S; r++) {
    STEP(fsdpc__layout_build(&lay_shape, params, n_params, unit_of, n_units, S,
                             (int)cfg->fsdp.align, r, &v.lay, err));
    v.shard = calloc((size_t)v.lay.n_units, sizeof *v.shard);
    if (!v.shard)
      STEP(fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory"));
    for (int u = 0; u < v.lay.n_units; u++)
      if (!(v.shard[u] =
                fsdpc__mem_alloc(FSDPC_MEM_PARAMS, v.lay.units[u].shard_numel * sizeof(float))))
        STEP(fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for rank %d's shards", r));
    fsdpc_ckpt_host_opts ho = {
        .shape = &shape,
        .params = params,
        .n_params = n_params,
        .param_unit = v.lay.param_unit,
        .param_offset = v.lay.param_offset,
        .units = v.lay.units,
        .n_units = v.lay.n_units,
        .rank = r,
        .world_size = world,
        .shard_rank = r,
        .shard_size = S,
        .replica_rank = 0,
        .replica_size = world / S,
        .strategy = fsdpc__strategy_name((fsdpc_strategy)sid),
        .backend = {.ctx = &v, .shard = v_shard, .gather = v_gather, .agree = v_agree}};
    STEP(fsdpc__ckpt_host_create(&ho, &h, err));
    STEP(fsdpc__ckpt_host_set_state(h, state, err));
    STEP(fsdpc__ckpt_host_set_config_yaml(h, yaml, err));
    STEP(fsdpc__ckpt_host_set_export(h, cfg, err));
    STEP(fsdpc__ckpt_load(h, src, fmt.opts, o->src, 0, err));
    /* model.adapter: W + s B A into each rank's ranges, as a run merges it
     * into the weights it loads (PEFT's merge_and_unload) */
    if (cfg->model.adapter[0])
      STEP(fsdpc__peft_merge_layout(cfg->model.adapter, &shape, params, &v.lay, v.shard, &merged,
                                    err));
    char tmp[8192];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", root, name);
    fsdpc_sd_save_opts so = {.struct_size = sizeof so,
                             .dtype = to_full ? o->dtype : FSDPC_DTYPE_F32,
                             .with_optimizer = 0};
    STEP(fsdpc__ckpt_save_part(h, fmt.final, fmt.opts, tmp, &so, err));
    fsdpc__ckpt_host_destroy(h);
    h = NULL;
    vrank_free(&v);
    memset(&v, 0, sizeof v);
  }
  STEP(fsdpc__ckpt_stage_commit(root, name, 0, err));
  staged = 0;
  int64_t rss, hwm;
  fsdpc__mem_rss(&rss, &hwm);
  FSDPC_LOGI("converted %s (%s) -> %s (%s, world %d %s) in %.2f s; peak host RSS %.1f MiB", o->src,
             src->desc->name, o->dst, fmt.final->desc->name, world, strategy, fsdpc__now() - t0,
             hwm / 1048576.0);
  if (cfg->model.adapter[0])
    FSDPC_LOGI("merged the LoRA adapter %s into %d weights of %s", cfg->model.adapter, merged,
               o->src);
out:
  if (staged) {
    char tmp[8192];
    fsdpc_err e2;
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", root, name);
    fsdpc__ckpt_rm_rf(tmp, &e2);
  }
  fsdpc__ckpt_host_destroy(h);
  vrank_free(&v);
  fsdpc__ckpt_formats_free(&fmt);
  fsdpc__run_plan_destroy(rp);
  free(unit_of);
  free(state);
  free(yaml);
  fsdpc__config_destroy(cfg);
  return st;
#undef STEP
}
