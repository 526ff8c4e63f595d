/* Generation from a LoRA or QLoRA run's intermediate checkpoint (see
 * infer/load.h). The checkpoint holds the adapters and their optimizer
 * state only (docs/lora.md), so the base comes from where the run took it,
 * and the run's identity check of that base (the trainer state's
 * lora_base, as a resume checks it) guards against other weights. */
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "fsdp/nf4_unit.h"
#include "infer/load.h"
#include "model/lora.h"
#include "ops/cpu/ops_cpu.h"
#include "runplan/runplan.h"
#include "util/log.h"

/* The base as the run made it: read from model.init.from, else the
 * engine's seeded random init (the same elements whatever the layout). */
static fsdpc_status load_base(fsdpc_infer_model *m, fsdpc_layout *lay, float ***shard,
                              fsdpc_err *err) {
  const fsdpc_config *c = m->cfg;
  if (c->model.init.from[0])
    return fsdpc__infer_load_dir(m->reg, c, &m->shape, m->params, m->n_params, c->model.init.from,
                                 lay, shard, NULL, err);
  uint32_t *unit_of = calloc((size_t)m->n_params, sizeof *unit_of), nu = 0;
  if (!unit_of)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int p = 0; p < m->n_params; p++)
    unit_of[p] =
        p > 0 && strcmp(m->params[p].module, m->params[p - 1].module) == 0 ? unit_of[p - 1] : nu++;
  fsdpc_status st = fsdpc__layout_build(&m->shape, m->params, m->n_params, unit_of, nu, 1,
                                        (int)c->fsdp.align, 0, lay, err);
  free(unit_of);
  if (st == FSDPC_OK && !(*shard = calloc((size_t)lay->n_units, sizeof **shard)))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int u = 0; st == FSDPC_OK && u < lay->n_units; u++)
    if (!((*shard)[u] = calloc(lay->units[u].shard_numel, sizeof(float))))
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the LoRA base");
  for (int p = 0; st == FSDPC_OK && p < m->n_params; p++)
    fsdpc__model_init_range(&m->params[p], (uint64_t)c->train.seed, c->model.init.std, 0,
                            m->params[p].numel,
                            (*shard)[lay->param_unit[p]] + lay->param_offset[p]);
  return st;
}

/* QLoRA: each projection becomes its NF4 dequantization (quant/nf4.c, as
 * the engine's NF4 units hold it); norms, embedding and head stay. */
static fsdpc_status nf4_base(fsdpc_infer_model *m, const fsdpc_layout *lay, float **shard,
                             fsdpc_err *err) {
  const fsdpc_config_quant *q = &m->cfg->quantization;
  float map[FSDPC_DYN_CODES];
  fsdpc__dynamic_map(map);
  fsdpc_status st = FSDPC_OK;
  for (int p = 0; st == FSDPC_OK && p < m->n_params; p++) {
    const fsdpc_param_info *pi = &m->params[p];
    if (!fsdpc__nf4_kind(pi->kind))
      continue;
    uint64_t n = pi->numel, nb = fsdpc__nf4_blocks(n, (int)q->block_size);
    fsdpc_nf4 t = {.n = n,
                   .block_size = (int)q->block_size,
                   .double_quant = q->double_quant,
                   .codes = malloc((n + 1) / 2),
                   .absmax = malloc(nb * sizeof(float)),
                   .qabsmax = malloc(nb),
                   .absmax2 = malloc(fsdpc__nf4_blocks2(n, (int)q->block_size) * sizeof(float))};
    float *w = shard[lay->param_unit[p]] + lay->param_offset[p];
    st = t.codes && t.absmax && t.qabsmax && t.absmax2
             ? fsdpc__nf4_quantize(w, &t, pi->name, err)
             : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory quantizing %s", pi->name);
    if (st == FSDPC_OK)
      st = fsdpc__nf4_dequantize(&t, map, 0, n, w, err);
    free(t.codes);
    free(t.absmax);
    free(t.qabsmax);
    free(t.absmax2);
  }
  return st;
}

/* The checkpoint's state names the base by content: the same check as a
 * resume's, against model.init.from now (random init: crc 0). */
static fsdpc_status check_base(const fsdpc_infer_model *m, const char *state, fsdpc_err *err) {
  fsdpc_base_id id = {0};
  const char *from = m->cfg->model.init.from;
  if (from[0])
    FSDPC_TRY(fsdpc__base_id(from, &id, err));
  return fsdpc__lora_check_base(state ? state : "{}", from, &id, m->weights_dir, 1, err);
}

/* W (out, in) += (s B) (out, r) @ A (r, in) for each adapted projection,
 * the arithmetic of the run's merged export (fsdpc__lora_merge_unit). */
static fsdpc_status merge(fsdpc_infer_model *m, const fsdpc_lora *lo, const fsdpc_layout *lay,
                          float **shard, const fsdpc_param_info *ap, int na,
                          const fsdpc_layout *alay, float **ashard, fsdpc_err *err) {
  for (int p = 0; p < m->n_params; p++) {
    const fsdpc_param_info *pi = &m->params[p];
    int j = pi->kind - FSDPC_P_Q;
    if (pi->layer < 0 || j < 0 || j >= FSDPC_LORA_NPROJ)
      continue;
    const float *a = NULL, *b = NULL;
    for (int k = 0; k < na; k++)
      if (ap[k].layer == pi->layer && fsdpc__lora_kind_proj(ap[k].kind) == j) {
        const float *x = ashard[alay->param_unit[k]] + alay->param_offset[k];
        *(fsdpc__lora_kind_is_b(ap[k].kind) ? &b : &a) = x;
      }
    if (!a || !b)
      continue;
    int in, out;
    fsdpc__lora_dims(&m->shape, j, &in, &out);
    float *sb = malloc((size_t)out * (size_t)lo->r * sizeof *sb);
    if (!sb)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory merging the adapters");
    for (size_t k = 0; k < (size_t)out * (size_t)lo->r; k++)
      sb[k] = lo->scale * b[k];
    fsdpc__cpu_sgemm(0, 0, out, in, lo->r, sb, lo->r, a, in, 1.0f,
                     shard[lay->param_unit[p]] + lay->param_offset[p], in);
    free(sb);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__infer_lora_ckpt(fsdpc_infer_model *m, fsdpc_layout *lay, float ***shard,
                                    fsdpc_err *err) {
  fsdpc_lora lo;
  int on = 0;
  FSDPC_TRY(fsdpc__lora_from_config(m->cfg, &lo, &on, err));
  /* the run's parameter list: the base (frozen), then the adapters */
  int n = m->n_params;
  fsdpc_param_info *all = malloc((size_t)n * sizeof *all);
  if (!all)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  memcpy(all, m->params, (size_t)n * sizeof *all);
  fsdpc_layout alay = {0};
  float **ashard = NULL;
  char *state = NULL;
  fsdpc_model_shape ashape = m->shape;
  ashape.tied = 0; /* no embedding among the adapters */
  fsdpc_status st = fsdpc__lora_add_params(&m->shape, &lo, &all, &n, err);
  if (st == FSDPC_OK)
    st = fsdpc__infer_load_dir(m->reg, m->cfg, &ashape, all + m->n_params, n - m->n_params,
                               m->weights_dir, &alay, &ashard, &state, err);
  if (st == FSDPC_OK)
    st = check_base(m, state, err);
  if (st == FSDPC_OK)
    st = load_base(m, lay, shard, err);
  if (st == FSDPC_OK && m->cfg->quantization.method == FSDPC_QUANT_NF4)
    st = nf4_base(m, lay, *shard, err);
  if (st == FSDPC_OK)
    st = merge(m, &lo, lay, *shard, all + m->n_params, n - m->n_params, &alay, ashard, err);
  if (st == FSDPC_OK)
    FSDPC_LOGI("%s: LoRA adapters merged into %s%s", m->weights_dir,
               m->cfg->model.init.from[0] ? m->cfg->model.init.from : "the seeded random init",
               m->cfg->quantization.method == FSDPC_QUANT_NF4 ? " (its NF4 dequantization)" : "");
  fsdpc__infer_shards_free(&alay, ashard);
  free(state);
  free(all);
  return st;
}
