/* LoRA's outputs (docs/lora.md):
 * - the PEFT adapter folder: adapter_config.json and adapter_model.safetensors
 *   with PEFT's tensor names (base_model.model.model.layers.N.self_attn.
 *   q_proj.lora_A.weight ...), fp32, loadable with PeftModel.from_pretrained;
 * - the merged base: W + s * B @ A for each adapted projection, computed per
 *   base unit on the gathering rank, so the `full` format writes a merged HF
 *   folder through the ordinary deployable export.
 * Both are collective over the job: every rank gathers the same units in the
 * same order. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "io/fileio.h"
#include "io/safetensors.h"
#include "ops/cpu/ops_cpu.h"
#include "util/fs.h"

/* The adapter unit of layer l, and the offsets of its A and B of projection
 * j in that unit (-1 when the projection has no adapter). */
static int adapter_of(fsdpc_engine *e, int l, int j, uint64_t *a_off, uint64_t *b_off) {
  int unit = -1;
  *a_off = *b_off = (uint64_t)-1;
  for (int p = 0; p < fsdpc__engine_n_params(e); p++) {
    uint64_t off;
    int u;
    const fsdpc_param_info *pi = fsdpc__engine_param(e, p, &off, &u);
    if (pi->layer != l || !fsdpc__lora_kind(pi->kind) || fsdpc__lora_kind_proj(pi->kind) != j)
      continue;
    unit = u;
    if (fsdpc__lora_kind_is_b(pi->kind))
      *b_off = off;
    else
      *a_off = off;
  }
  return *a_off == (uint64_t)-1 ? -1 : unit;
}

fsdpc_status fsdpc__lora_merge_unit(fsdpc_engine *e, const fsdpc_model_shape *s,
                                    const fsdpc_lora *lo, int u, int root, float *full,
                                    fsdpc_err *err) {
  const fsdpc_unit *un = fsdpc__engine_unit(e, u);
  int is_root = fsdpc__engine_dist(e)->shard_rank == root && full;
  float *ad = NULL, *bs = NULL;
  int have = -1; /* the adapter unit gathered into ad */
  fsdpc_status st = FSDPC_OK;
  for (int i = 0; i < un->n_params && st == FSDPC_OK; i++) {
    uint64_t w_off;
    const fsdpc_param_info *pi = fsdpc__engine_param(e, un->params[i], &w_off, NULL);
    int j = pi->kind - FSDPC_P_Q;
    if (pi->layer < 0 || j < 0 || j >= FSDPC_LORA_NPROJ)
      continue;
    uint64_t a_off, b_off;
    int au = adapter_of(e, pi->layer, j, &a_off, &b_off);
    if (au < 0)
      continue;
    if (au != have) {
      const fsdpc_unit *an = fsdpc__engine_unit(e, au);
      free(ad);
      ad = is_root ? malloc(an->flat_numel * sizeof(float)) : NULL;
      if (is_root && !ad) {
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory merging the adapters");
        break;
      }
      st = fsdpc__engine_gather_unit(e, au, FSDPC_SD_SLOT_PARAM, root, ad, err);
      have = au;
    }
    if (st != FSDPC_OK || !is_root)
      continue;
    int in, out, r = lo->r;
    fsdpc__lora_dims(s, j, &in, &out);
    free(bs);
    if (!(bs = malloc((size_t)out * (size_t)r * sizeof(float)))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory merging the adapters");
      break;
    }
    for (size_t k = 0; k < (size_t)out * (size_t)r; k++)
      bs[k] = lo->scale * ad[b_off + k];
    /* W (out, in) += (s B) (out, r) @ A (r, in) */
    fsdpc__cpu_sgemm(0, 0, out, in, r, bs, r, ad + a_off, in, 1.0f, full + w_off, in);
  }
  free(ad);
  free(bs);
  return st;
}

/* The config's decimal value back from the float it is kept in (0.05, not
 * 0.05000000074505806). */
static double decimal(float v) {
  char b[32];
  snprintf(b, sizeof b, "%.7g", (double)v);
  return strtod(b, NULL);
}

static char *adapter_config(const fsdpc_lora *lo, const char *base, fsdpc_err *err) {
  cJSON *o = cJSON_CreateObject();
  cJSON *t = cJSON_AddArrayToObject(o, "target_modules");
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++)
    if ((lo->targets >> j) & 1)
      cJSON_AddItemToArray(t, cJSON_CreateString(fsdpc__lora_proj_name(j)));
  cJSON_AddStringToObject(o, "peft_type", "LORA");
  cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
  cJSON_AddStringToObject(o, "base_model_name_or_path", base);
  cJSON_AddNumberToObject(o, "r", lo->r);
  cJSON_AddNumberToObject(o, "lora_alpha", decimal(lo->alpha));
  cJSON_AddNumberToObject(o, "lora_dropout", decimal(lo->dropout));
  cJSON_AddBoolToObject(o, "use_rslora", lo->rslora);
  cJSON_AddStringToObject(o, "bias", "none");
  cJSON_AddBoolToObject(o, "fan_in_fan_out", 0);
  cJSON_AddBoolToObject(o, "inference_mode", 1);
  cJSON_AddBoolToObject(o, "init_lora_weights", 1);
  cJSON_AddBoolToObject(o, "use_dora", 0);
  cJSON_AddNullToObject(o, "modules_to_save");
  cJSON_AddNullToObject(o, "layers_to_transform");
  cJSON_AddNullToObject(o, "revision");
  char *txt = o ? cJSON_Print(o) : NULL;
  cJSON_Delete(o);
  if (!txt)
    fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for adapter_config.json");
  return txt;
}

/* Root's part: the two files into root/.tmp-<name>, then the checkpoint
 * module's commit (an earlier folder of that name, of any format, is
 * replaced only once the new one is whole). */
static fsdpc_status write_folder(const char *root, const char *name, const fsdpc_lora *lo,
                                 const char *base, const fsdpc_st_entry *ents, uint32_t n,
                                 fsdpc_err *err) {
  char tmp[4096], path[4200];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", root, name);
  FSDPC_TRY(fsdpc__ckpt_stage_begin(root, name, err));
  snprintf(path, sizeof path, "%s/adapter_model.safetensors", tmp);
  fsdpc_status st = fsdpc__st_write(path, ents, n, FSDPC_DTYPE_F32, NULL, err);
  char *cfg = st == FSDPC_OK ? adapter_config(lo, base, err) : NULL;
  if (st == FSDPC_OK && !cfg) st = FSDPC_SYSTEM_ERROR;
  snprintf(path, sizeof path, "%s/adapter_config.json", tmp);
  if (st == FSDPC_OK && fsdpc__write_file_safe(path, cfg, strlen(cfg)) != 0)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write (disk full or read-only?)", path);
  free(cfg);
  if (st == FSDPC_OK) st = fsdpc__ckpt_stage_commit(root, name, 0, err);
  if (st != FSDPC_OK) {
    fsdpc_err e2;
    fsdpc__ckpt_rm_rf(tmp, &e2);
  }
  return st;
}

fsdpc_status fsdpc__lora_write_peft(fsdpc_engine *e, const fsdpc_lora *lo, const char *base,
                                    const char *root, const char *name, fsdpc_err *err) {
  int nu = fsdpc__engine_n_units(e), np = fsdpc__engine_n_params(e);
  int is_root = fsdpc__engine_dist(e)->rank == 0;
  float **full = calloc((size_t)nu, sizeof *full);
  fsdpc_st_entry *ents = calloc((size_t)np, sizeof *ents);
  char(*names)[128] = calloc((size_t)np, sizeof *names);
  fsdpc_status st = FSDPC_OK;
  if (!full || !ents || !names) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory writing the adapter folder");
    goto done;
  }
  /* every adapter unit to rank 0 (in unit order, on every rank) */
  for (int u = 0; u < nu && st == FSDPC_OK; u++) {
    const fsdpc_unit *un = fsdpc__engine_unit(e, u);
    if (un->frozen)
      continue;
    if (is_root && !(full[u] = malloc(un->flat_numel * sizeof(float)))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory writing the adapter folder");
      break;
    }
    st = fsdpc__engine_gather_unit(e, u, FSDPC_SD_SLOT_PARAM, 0, full[u], err);
  }
  if (st != FSDPC_OK || !is_root)
    goto done;
  uint32_t n = 0;
  for (int p = 0; p < np; p++) {
    uint64_t off;
    int u;
    const fsdpc_param_info *pi = fsdpc__engine_param(e, p, &off, &u);
    if (!fsdpc__lora_kind(pi->kind))
      continue;
    snprintf(names[n], sizeof names[n], "base_model.model.%s", pi->name);
    ents[n] = (fsdpc_st_entry){.struct_size = sizeof ents[n],
                               .name = names[n],
                               .ndim = 2,
                               .shape = {pi->shape[0], pi->shape[1]},
                               .data = full[u] + off};
    n++;
  }
  st = write_folder(root, name, lo, base, ents, n, err);
done:
  for (int u = 0; full && u < nu; u++)
    free(full[u]);
  free(full);
  free(ents);
  free(names);
  /* every rank learns whether rank 0 wrote it */
  double bad = st == FSDPC_OK ? 0.0 : 1.0;
  fsdpc_err e2;
  if (fsdpc__dist_all_reduce_f64(fsdpc__engine_dist(e), FSDPC_GROUP_WORLD, &bad, 1,
                                 "adapter folder", &e2) != FSDPC_OK &&
      st == FSDPC_OK)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s", e2.msg);
  if (st == FSDPC_OK && bad > 0.0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "rank 0 could not write the adapter folder %s/%s",
                       root, name);
  return st;
}
