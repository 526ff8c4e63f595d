/* A resident model for inference, from an HF folder or any fsdpc
 * checkpoint: the statedict plugin that recognises the folder loads it into
 * fp32 buffers laid out one unit per module at world 1 (as `fsdpc convert`
 * does), which then go to the device in its compute dtype. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/peft.h"
#include "infer/infer.h"
#include "infer/load.h"
#include "io/dtype.h"
#include "io/fileio.h"
#include "model/hf_rules.h"
#include "runplan/runplan.h"
#include "util/mem.h"
#ifdef FSDPC_WITH_CUDA
#include "ops/cuda/cuda_ctx.h"
#endif

typedef struct vbackend {
  fsdpc_layout *lay;
  float **shard;
} vbackend;

static float *vb_shard(void *ctx, int u, int slot) {
  vbackend *v = ctx;
  return slot == FSDPC_SD_SLOT_PARAM ? v->shard[u] : NULL;
}
static fsdpc_status vb_gather(void *ctx, int u, int slot, int root, float *full, fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "inference load: no gathers at world 1");
}
static fsdpc_status vb_agree(void *ctx, int *ok, fsdpc_err *err) {
  return FSDPC_OK;
}

static fsdpc_status resident_block(void *ctx, int b, void *base[FSDPC_P_NKIND], fsdpc_err *err) {
  fsdpc_infer_model *m = ctx;
  int L = m->shape.L;
  for (int k = 0; k < FSDPC_P_NKIND; k++)
    base[k] = NULL;
  for (int p = 0; p < m->n_params; p++) {
    const fsdpc_param_info *pi = &m->params[p];
    if (b == 0 && pi->kind == FSDPC_P_EMBED)
      base[FSDPC_P_EMBED] = m->w[p];
    if (b >= 1 && b <= L && pi->layer == b - 1)
      base[pi->kind] = m->w[p];
    if (b == L + 1 && (pi->kind == FSDPC_P_NORM || pi->kind == FSDPC_P_HEAD))
      base[pi->kind] = m->w[p];
    if (b == L + 1 && m->shape.tied && pi->kind == FSDPC_P_EMBED)
      base[FSDPC_P_HEAD] = m->w[p];
  }
  return FSDPC_OK;
}

static int is_file(const char *dir, const char *name) {
  char *p = fsdpc__path_join(dir, name);
  struct stat st;
  int yes = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
  free(p);
  return yes;
}

/* config.yaml of an fsdpc checkpoint, else a config made for an HF folder
 * (model.config) or a PEFT adapter folder (model.adapter, merged into the
 * base its adapter_config.json names, or model.from given). */
static fsdpc_status load_config(const fsdpc_infer_load_opts *o, fsdpc_config **cfg,
                                fsdpc_err *err) {
  int n = o->n_overrides + 3, k = 0;
  const char **ov = calloc((size_t)n, sizeof *ov);
  char *mc = malloc(strlen(o->dir) + 32), seq[64] = "", dev[64] = "", att[160] = "";
  fsdpc_status st;
  if (!ov || !mc) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  if (o->max_len > 0)
    snprintf(seq, sizeof seq, "data.seq_len=%lld", (long long)o->max_len);
  if (seq[0])
    ov[k++] = seq;
  if (o->attention && o->attention[0]) {
    snprintf(att, sizeof att, "attention.impl=%s", o->attention);
    ov[k++] = att;
  }
  (void)dev;
  for (int i = 0; i < o->n_overrides; i++)
    ov[k++] = o->overrides[i];
  if (is_file(o->dir, FSDPC_CKPT_CONFIG_FILE)) {
    char *p = fsdpc__path_join(o->dir, FSDPC_CKPT_CONFIG_FILE);
    st = p ? fsdpc__config_load_checkpoint(p, ov, k, cfg, err)
           : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    free(p);
  } else {
    sprintf(mc, "%s=%s", fsdpc__peft_is_folder(o->dir) ? "model.adapter" : "model.config", o->dir);
    /* first, so that a model.from the user gives is the base */
    memmove(ov + 1, ov, (size_t)k * sizeof *ov);
    ov[0] = mc;
    k++;
    st = fsdpc__config_from_string("train: {}\n", o->dir, ov, k, cfg, err);
  }
out:
  free(ov);
  free(mc);
  return st;
}

static fsdpc_status setup_device(fsdpc_infer_model *m, const char *device, fsdpc_err *err) {
  int cuda = 0;
#ifdef FSDPC_WITH_CUDA
  int have = fsdpc__cuda_device_count() > 0;
#else
  int have = 0;
#endif
  if (!device || !device[0] || strcmp(device, "auto") == 0)
    cuda = have;
  else if (strcmp(device, "cuda") == 0)
    cuda = 1;
  else if (strcmp(device, "cpu") != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "--device '%s': use cpu, cuda or auto", device);
  m->ops = fsdpc__ops_cpu();
  if (!cuda)
    return FSDPC_OK;
  if (!have)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "--device cuda: no CUDA device is visible or this fsdpc was built "
                       "without CUDA");
#ifdef FSDPC_WITH_CUDA
  fsdpc_cuda_ctx_opts co;
  fsdpc__cuda_ctx_opts_default(&co);
  fsdpc_cuda_ctx *ctx = NULL;
  FSDPC_TRY(fsdpc__cuda_ctx_create(&co, &ctx, err));
  m->cuda = ctx;
  fsdpc__ops_cuda(ctx, &m->ops_dev);
  m->ops = &m->ops_dev;
#endif
  return FSDPC_OK;
}

fsdpc_status fsdpc__infer_load_dir(fsdpc_registry *reg, const fsdpc_config *cfg,
                                   const fsdpc_model_shape *shape, const fsdpc_param_info *params,
                                   int n_params, const char *dir, fsdpc_layout *lay, float ***shard,
                                   char **state, fsdpc_err *err) {
  uint32_t *unit_of = calloc((size_t)n_params, sizeof *unit_of), nu = 0;
  fsdpc_ckpt_formats fmt = {0};
  fsdpc_ckpt_host *h = NULL;
  fsdpc_status st;
  if (state)
    *state = NULL;
  if (!unit_of)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int p = 0; p < n_params; p++)
    unit_of[p] =
        p > 0 && strcmp(params[p].module, params[p - 1].module) == 0 ? unit_of[p - 1] : nu++;
  const fsdpc_component *src = NULL;
  st = fsdpc__ckpt_probe(reg, NULL, dir, &src, err);
  if (st == FSDPC_OK)
    st = fsdpc__ckpt_formats_select(reg, src->desc->name, src->desc->name, cfg->checkpoint.options,
                                    &fmt, err);
  if (st == FSDPC_OK)
    st = fsdpc__layout_build(shape, params, n_params, unit_of, nu, 1, (int)cfg->fsdp.align, 0, lay,
                             err);
  free(unit_of);
  if (st != FSDPC_OK)
    goto out;
  *shard = calloc((size_t)lay->n_units, sizeof **shard);
  if (!*shard) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  for (int u = 0; u < lay->n_units; u++)
    if (!((*shard)[u] = calloc(lay->units[u].shard_numel, sizeof(float)))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory loading %s", dir);
      goto out;
    }
  vbackend vb = {lay, *shard};
  fsdpc_ckpt_host_opts ho = {
      .shape = shape,
      .params = params,
      .n_params = n_params,
      .param_unit = lay->param_unit,
      .param_offset = lay->param_offset,
      .units = lay->units,
      .n_units = lay->n_units,
      .rank = 0,
      .world_size = 1,
      .shard_rank = 0,
      .shard_size = 1,
      .replica_rank = 0,
      .replica_size = 1,
      .strategy = "NO_SHARD",
      .backend = {.ctx = &vb, .shard = vb_shard, .gather = vb_gather, .agree = vb_agree}};
  st = fsdpc__ckpt_host_create(&ho, &h, err);
  if (st == FSDPC_OK)
    st = fsdpc__ckpt_load(h, src, fmt.opts, dir, 0, err);
  const char *js = h ? fsdpc__ckpt_host_loaded_state(h) : NULL;
  if (st == FSDPC_OK && state && js && !(*state = strdup(js)))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
out:
  fsdpc__ckpt_host_destroy(h);
  fsdpc__ckpt_formats_free(&fmt);
  return st;
}

void fsdpc__infer_shards_free(fsdpc_layout *lay, float **shard) {
  for (int u = 0; shard && u < lay->n_units; u++)
    free(shard[u]);
  free(shard);
  fsdpc__layout_free(lay);
  memset(lay, 0, sizeof *lay);
}

/* The checkpoint's weights into fp32 shards (one unit per module, world
 * 1). A LoRA run's checkpoint whose tensors are not a whole model holds
 * its adapters only: the base is rebuilt as the run built it and the
 * adapters merged (infer/lora_ckpt.c). */
static fsdpc_status load_weights(fsdpc_infer_model *m, fsdpc_layout *lay, float ***shard,
                                 fsdpc_err *err) {
  fsdpc_status st = fsdpc__infer_load_dir(m->reg, m->cfg, &m->shape, m->params, m->n_params,
                                          m->weights_dir, lay, shard, NULL, err);
  if (st == FSDPC_OK || m->cfg->peft.method != FSDPC_PEFT_LORA || m->cfg->model.adapter[0])
    return st;
  fsdpc_err whole = *err;
  fsdpc__infer_shards_free(lay, *shard);
  *shard = NULL;
  st = fsdpc__infer_lora_ckpt(m, lay, shard, err);
  if (st != FSDPC_OK)
    fsdpc__err_prefix(err, "%s is neither a whole model (%s) nor LoRA adapters", m->weights_dir,
                      whole.msg);
  return st;
}

/* model.adapter: W += s B A on the fp32 host copy, before the upload. */
static fsdpc_status merge_adapter(fsdpc_infer_model *m, const fsdpc_layout *lay, float **shard,
                                  fsdpc_err *err) {
  return fsdpc__peft_merge_layout(m->cfg->model.adapter, &m->shape, m->params, lay, shard, NULL,
                                  err);
}

/* Each parameter in its own device buffer of the compute dtype. bf16 is
 * rounded on the host (to nearest even, as the device cast), so no fp32
 * copy reaches the device; both go up in chunks through one small host
 * buffer. */
#define UPLOAD_CHUNK ((size_t)1 << 22) /* elements */
static fsdpc_status to_device(fsdpc_infer_model *m, const fsdpc_layout *lay, float **shard,
                              fsdpc_err *err) {
  const fsdpc_ops *ops = m->ops;
  int bf16 = ops->act_dtype != FSDPC_DTYPE_F32;
  if (bf16 && ops->act_dtype != FSDPC_DTYPE_BF16)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "inference load: compute dtype not fp32/bf16");
  if (!(m->w = calloc((size_t)m->n_params, sizeof *m->w)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  uint16_t *h = bf16 ? malloc(UPLOAD_CHUNK * sizeof(uint16_t)) : NULL;
  if (bf16 && !h)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = FSDPC_OK;
  for (int p = 0; st == FSDPC_OK && p < m->n_params; p++) {
    size_t n = m->params[p].numel, a = ops->act_size;
    const float *src = shard[lay->param_unit[p]] + lay->param_offset[p];
    if (!(m->w[p] = ops->alloc(ops->ctx, FSDPC_MEM_PARAMS, n * a))) {
      st = fsdpc__ops_oom(ops, err, "for %s", m->params[p].name);
      break;
    }
    for (size_t i = 0; st == FSDPC_OK && i < n; i += UPLOAD_CHUNK) {
      size_t k = n - i < UPLOAD_CHUNK ? n - i : UPLOAD_CHUNK;
      if (bf16)
        fsdpc__f32_to_bf16_n(src + i, h, k);
      st = ops->upload(ops->ctx, (char *)m->w[p] + i * a, bf16 ? (const void *)h : src + i, k * a,
                       err);
    }
  }
  free(h);
  return st;
}

fsdpc_status fsdpc__infer_model_load(const fsdpc_infer_load_opts *o, fsdpc_infer_model **out,
                                     fsdpc_err *err) {
  struct stat sb;
  if (stat(o->dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: no such model folder", o->dir);
  fsdpc_infer_model *m = calloc(1, sizeof *m);
  if (!m || !(m->dir = strdup(o->dir))) {
    free(m);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  fsdpc_layout lay = {0};
  float **shard = NULL;
  fsdpc_status st = load_config(o, &m->cfg, err);
  if (st == FSDPC_OK) {
    fsdpc__run_shape_from_config(m->cfg, &m->shape);
    st = fsdpc__model_params(&m->shape, &m->params, &m->n_params, err);
  }
  /* an adapter folder's weights are its base's (model.init.from, resolved
   * by the config from adapter_config.json or given) */
  if (st == FSDPC_OK &&
      !(m->weights_dir = strdup(m->cfg->model.adapter[0] ? m->cfg->model.init.from : o->dir)))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* what fsdpc can model: the HF config.json (as every run plan checks
   * it), then the tensors; a checkpoint's config.yaml holds the whole shape
   * and its base folder may be gone (issue 42.1): checked when it is there */
  if (st == FSDPC_OK &&
      (!is_file(o->dir, FSDPC_CKPT_CONFIG_FILE) || access(m->cfg->model.config, F_OK) == 0))
    st = fsdpc__run_check_hf_config(m->cfg, err);
  if (st == FSDPC_OK && fsdpc__hf_is_folder(m->weights_dir))
    st = fsdpc__hf_rules_tensors(m->weights_dir, &m->shape, err);
  if (st == FSDPC_OK)
    st = fsdpc__registry_create((const char *const *)m->cfg->plugins.paths.items,
                                m->cfg->plugins.paths.n, &m->reg, err);
  if (st == FSDPC_OK)
    st = setup_device(m, o->device, err);
  /* The statedict plugin loads first: the registry loads plugins lazily and
   * a component pointer taken before a later load may move. */
  if (st == FSDPC_OK)
    st = load_weights(m, &lay, &shard, err);
  if (st == FSDPC_OK && m->cfg->model.adapter[0])
    st = merge_adapter(m, &lay, shard, err);
  if (st == FSDPC_OK) {
    fsdpc_situation sit = {.struct_size = sizeof sit,
                           .device = m->ops->device,
                           .dtype = m->ops->act_dtype,
                           .world_size = 1,
                           .num_heads = m->shape.NH,
                           .num_kv_heads = m->shape.KVH,
                           .head_dim = m->shape.HD,
                           .max_seq_len = m->shape.max_pos};
    st = fsdpc__registry_select(m->reg, FSDPC_KIND_ATTENTION, m->cfg->attention.impl, &sit,
                                &m->attn, err);
  }
  if (st == FSDPC_OK)
    st = to_device(m, &lay, shard, err);
  fsdpc__infer_shards_free(&lay, shard);
  if (st != FSDPC_OK) {
    fsdpc__infer_model_free(m);
    return st;
  }
  m->weights = (fsdpc_infer_weights){.ctx = m, .block = resident_block, .fixed = 1};
  *out = m;
  return FSDPC_OK;
}

int64_t fsdpc__infer_model_peak_bytes(const fsdpc_infer_model *m) {
#ifdef FSDPC_WITH_CUDA
  if (m->cuda) {
    fsdpc_cuda_mem_stats cs;
    fsdpc_err e;
    return fsdpc__cuda_mem_stats(m->cuda, &cs, &e) == FSDPC_OK ? cs.total_allocated_peak : -1;
  }
#endif
  fsdpc_mem_stats ms;
  fsdpc__mem_stats(&ms);
  return ms.total_peak;
}

void fsdpc__infer_model_free(fsdpc_infer_model *m) {
  if (!m)
    return;
  for (int p = 0; m->w && p < m->n_params; p++)
    if (m->w[p])
      m->ops->free(m->ops->ctx, FSDPC_MEM_PARAMS, m->w[p], m->params[p].numel * m->ops->act_size);
  free(m->w);
#ifdef FSDPC_WITH_CUDA
  fsdpc__cuda_ctx_destroy(m->cuda);
#endif
  fsdpc__registry_destroy(m->reg);
  free(m->params);
  fsdpc__config_destroy(m->cfg);
  free(m->dir);
  free(m->weights_dir);
  free(m);
}

/* ids of an eos_token_id value (a number or a list); 0 when absent. */
static int eos_from(const cJSON *v, int32_t **ids, int *n) {
  if (cJSON_IsNumber(v)) {
    if (!(*ids = malloc(sizeof **ids)))
      return -1;
    (*ids)[0] = (int32_t)v->valuedouble;
    *n = 1;
    return 1;
  }
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
    return 0;
  *ids = malloc((size_t)cJSON_GetArraySize(v) * sizeof **ids);
  if (!*ids)
    return -1;
  *n = 0;
  for (const cJSON *e = v->child; e; e = e->next)
    if (cJSON_IsNumber(e))
      (*ids)[(*n)++] = (int32_t)e->valuedouble;
  return 1;
}

fsdpc_status fsdpc__infer_eos_ids(const char *dir, const fsdpc_model_shape *s, int32_t **ids,
                                  int *n, fsdpc_err *err) {
  *ids = NULL;
  *n = 0;
  const char *files[] = {"generation_config.json", "config.json"};
  for (int f = 0; f < 2; f++) {
    char *p = fsdpc__path_join(dir, files[f]), *text = NULL;
    size_t len = 0;
    int got = 0;
    if (p && fsdpc__read_small_file(p, 16u << 20, &text, &len) == 0) {
      cJSON *root = cJSON_ParseWithLength(text, len);
      got = eos_from(cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"), ids, n);
      cJSON_Delete(root);
    }
    free(p);
    free(text);
    if (got < 0)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    if (got)
      return FSDPC_OK;
  }
  if (s->eos_id >= 0) {
    if (!(*ids = malloc(sizeof **ids)))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    (*ids)[0] = s->eos_id;
    *n = 1;
  }
  return FSDPC_OK;
}
