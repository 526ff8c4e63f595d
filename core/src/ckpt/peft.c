/* Reading PEFT LoRA adapter folders for merging (see peft.h). */
#include "ckpt/peft.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/fileio.h"
#include "io/safetensors.h"
#include "model/lora.h"

#define PREFIX "base_model.model."

struct fsdpc_peft {
  char *dir;
  fsdpc_st_file *st;
  int r, n_targets;
  float scale;
  /* the last weight's factors, read whole: A (r, in), B (out, r) */
  char cached[256];
  float *a, *b;
};

int fsdpc__peft_is_folder(const char *dir) {
  char *p = fsdpc__path_join(dir, "adapter_config.json");
  struct stat sb;
  int yes = p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
  free(p);
  return yes;
}

/* A key PEFT writes that fsdpc cannot merge when it is set. */
static int is_set(const cJSON *v) {
  return v && !cJSON_IsNull(v) && !cJSON_IsFalse(v) &&
         !(cJSON_IsString(v) && strcmp(v->valuestring, "none") == 0) &&
         !((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child);
}

static fsdpc_status read_config(fsdpc_peft *p, fsdpc_err *err) {
  char *path = fsdpc__path_join(p->dir, "adapter_config.json"), *text = NULL;
  size_t len = 0;
  if (!path)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  if (fsdpc__read_small_file(path, 16u << 20, &text, &len) != 0) {
    fsdpc_status st =
        fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s", path, strerror(errno));
    free(path);
    return st;
  }
  cJSON *c = cJSON_ParseWithLength(text, len);
  free(text);
  fsdpc_status st = FSDPC_OK;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "peft_type");
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "r");
  const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(c, "lora_alpha");
  static const char *const unmergeable[] = {
      "use_dora",     "modules_to_save", "layers_to_transform",
      "rank_pattern", "alpha_pattern",   "bias"};
  if (!cJSON_IsObject(c))
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a JSON object", path);
  else if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA") != 0)
    st = fsdpc__fail(err, FSDPC_UNSUPPORTED, "%s: peft_type is not LORA; fsdpc merges LoRA only",
                     path);
  else if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 4096 ||
           !cJSON_IsNumber(alpha) || !(alpha->valuedouble > 0))
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: r and lora_alpha must be positive numbers",
                     path);
  for (size_t i = 0; st == FSDPC_OK && i < sizeof unmergeable / sizeof *unmergeable; i++)
    if (is_set(cJSON_GetObjectItemCaseSensitive(c, unmergeable[i])))
      st = fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "%s: %s is set; fsdpc merges plain LoRA adapters only (merge it with "
                       "PEFT's merge_and_unload and pass the merged folder)",
                       path, unmergeable[i]);
  if (st == FSDPC_OK) {
    p->r = (int)r->valuedouble;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "use_rslora");
    p->scale = (float)(alpha->valuedouble / (cJSON_IsTrue(rs) ? sqrt((double)p->r) : (double)p->r));
  }
  cJSON_Delete(c);
  free(path);
  return st;
}

/* The projection j and layer l of an adapter tensor name (the family's
 * module names of s: Phi-3's qkv_proj, gate_up_proj), and whether it is B;
 * 0 when the name is not one of the projections' factors. */
static int parse_name(const fsdpc_model_shape *s, const char *name, int *l, int *j, int *is_b) {
  static const char head[] = PREFIX "model.layers.";
  char part1[32], part2[32], which[4];
  int end = 0;
  if (strncmp(name, head, sizeof head - 1) != 0 ||
      sscanf(name + sizeof head - 1, "%d.%31[a-z_].%31[a-z_].lora_%3[AB].weight%n", l, part1, part2,
             which, &end) != 4 ||
      end == 0 || name[sizeof head - 1 + (size_t)end] != '\0' || which[1] != '\0')
    return 0;
  char full[72];
  snprintf(full, sizeof full, "%s.%s", part1, part2);
  for (*j = 0; *j < FSDPC_LORA_NPROJ; (*j)++)
    if (strcmp(full, fsdpc__lora_proj_module(s, *j)) == 0)
      break;
  *is_b = which[0] == 'B';
  return *j < FSDPC_LORA_NPROJ;
}

static fsdpc_status check_tensors(fsdpc_peft *p, const fsdpc_model_shape *s, fsdpc_err *err) {
  const char *file = fsdpc__st_path(p->st);
  for (uint32_t i = 0; i < fsdpc__st_count(p->st); i++) {
    const fsdpc_st_info *t = fsdpc__st_at(p->st, i);
    int l, j, is_b, in, out;
    if (!parse_name(s, t->name, &l, &j, &is_b) || l < 0 || l >= s->L)
      return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                         "%s: tensor %s is not a LoRA factor of one of this model's %d layers' "
                         "projections; fsdpc cannot merge it",
                         file, t->name, s->L);
    fsdpc__lora_dims(s, j, &in, &out);
    int64_t want0 = is_b ? out : p->r, want1 = is_b ? p->r : in;
    if (t->ndim != 2 || t->shape[0] != want0 || t->shape[1] != want1)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: tensor %s has shape [%lld, %lld], the base model needs [%lld, %lld] "
                         "(r %d): is this the adapter of another base?",
                         file, t->name, (long long)(t->ndim > 0 ? t->shape[0] : 0),
                         (long long)(t->ndim > 1 ? t->shape[1] : 0), (long long)want0,
                         (long long)want1, p->r);
    p->n_targets += !is_b;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__peft_open(const char *dir, const fsdpc_model_shape *shape, fsdpc_peft **out,
                              fsdpc_err *err) {
  *out = NULL;
  fsdpc_peft *p = calloc(1, sizeof *p);
  if (!p || !(p->dir = strdup(dir))) {
    free(p);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  fsdpc_status st = read_config(p, err);
  char *path = st == FSDPC_OK ? fsdpc__path_join(dir, "adapter_model.safetensors") : NULL;
  if (st == FSDPC_OK && !path)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  if (st == FSDPC_OK)
    st = fsdpc__st_open(path, &p->st, err);
  if (st == FSDPC_OK)
    st = check_tensors(p, shape, err);
  free(path);
  if (st != FSDPC_OK) {
    fsdpc__peft_close(p);
    return st;
  }
  *out = p;
  return FSDPC_OK;
}

void fsdpc__peft_close(fsdpc_peft *p) {
  if (!p)
    return;
  fsdpc__st_close(p->st);
  free(p->a);
  free(p->b);
  free(p->dir);
  free(p);
}

int fsdpc__peft_n_targets(const fsdpc_peft *p) {
  return p->n_targets;
}

/* Reads the factors of weight `stem` (its name without ".weight") into
 * p->a and p->b; *have 0 when the adapter has none. */
static fsdpc_status load_factors(fsdpc_peft *p, const char *stem, int *have, fsdpc_err *err) {
  *have = 1;
  if (strcmp(p->cached, stem) == 0)
    return FSDPC_OK;
  char na[320], nb[320];
  snprintf(na, sizeof na, PREFIX "%s.lora_A.weight", stem);
  snprintf(nb, sizeof nb, PREFIX "%s.lora_B.weight", stem);
  const fsdpc_st_info *a = fsdpc__st_find(p->st, na), *b = fsdpc__st_find(p->st, nb);
  if (!a && !b) {
    *have = 0;
    return FSDPC_OK;
  }
  if (!a || !b)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s has only one of lora_A and lora_B",
                       fsdpc__st_path(p->st), stem);
  p->cached[0] = '\0';
  float *fa = realloc(p->a, a->numel * sizeof *fa),
        *fb = fa ? realloc(p->b, b->numel * sizeof *fb) : NULL;
  if (fa)
    p->a = fa;
  if (fb)
    p->b = fb;
  if (!fa || !fb)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reading %s", na);
  FSDPC_TRY(fsdpc__st_read_f32(p->st, na, 0, a->numel, p->a, err));
  FSDPC_TRY(fsdpc__st_read_f32(p->st, nb, 0, b->numel, p->b, err));
  for (uint64_t i = 0; i < a->numel + b->numel; i++)
    if (!isfinite(i < a->numel ? p->a[i] : p->b[i - a->numel]))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: the factors of %s hold a NaN or Inf",
                         fsdpc__st_path(p->st), stem);
  snprintf(p->cached, sizeof p->cached, "%s", stem);
  return FSDPC_OK;
}

fsdpc_status fsdpc__peft_merge_range(fsdpc_peft *p, const char *name, int64_t in, uint64_t lo,
                                     uint64_t hi, float *dst, fsdpc_err *err) {
  size_t n = strlen(name);
  if (n < 8 || strcmp(name + n - 7, ".weight") != 0 || n - 7 >= 256)
    return FSDPC_OK;
  char stem[256];
  snprintf(stem, sizeof stem, "%.*s", (int)(n - 7), name);
  int have;
  FSDPC_TRY(load_factors(p, stem, &have, err));
  if (!have)
    return FSDPC_OK;
  int r = p->r;
  /* dst[e - lo] += s * sum_k B[o, k] A[k, i] for e = o * in + i */
  for (uint64_t e = lo; e < hi; e++) {
    uint64_t o = e / (uint64_t)in, i = e % (uint64_t)in;
    const float *brow = p->b + o * (uint64_t)r;
    double acc = 0.0;
    for (int k = 0; k < r; k++)
      acc += (double)brow[k] * (double)p->a[(uint64_t)k * (uint64_t)in + i];
    dst[e - lo] += (float)(p->scale * acc);
  }
  return FSDPC_OK;
}

/* The part [lo, hi) of parameter pi (at flat offset `at` of unit un) that
 * the unit's shard holds and an adapter may change; 0 when none. */
static int merge_span(const fsdpc_param_info *pi, uint64_t at, const fsdpc_unit *un, uint64_t *lo,
                      uint64_t *hi) {
  *lo = at > un->shard_offset ? at : un->shard_offset;
  *hi = at + pi->numel < un->shard_offset + un->shard_numel ? at + pi->numel
                                                            : un->shard_offset + un->shard_numel;
  return pi->ndim == 2 && !fsdpc__lora_kind(pi->kind) && *lo < *hi;
}

/* Merges that span into `shard`, the unit's shard. */
static fsdpc_status merge_param(fsdpc_peft *pf, const fsdpc_param_info *pi, uint64_t at,
                                const fsdpc_unit *un, uint64_t lo, uint64_t hi, float *shard,
                                fsdpc_err *err) {
  return fsdpc__peft_merge_range(pf, pi->name, pi->shape[1], lo - at, hi - at,
                                 shard + (lo - un->shard_offset), err);
}

fsdpc_status fsdpc__peft_merge_engine(fsdpc_engine *e, const fsdpc_model_shape *shape,
                                      const char *dir, int *n_merged, fsdpc_err *err) {
  fsdpc_peft *pf = NULL;
  FSDPC_TRY(fsdpc__peft_open(dir, shape, &pf, err));
  fsdpc_status st = FSDPC_OK;
  for (int p = 0; p < fsdpc__engine_n_params(e) && st == FSDPC_OK; p++) {
    uint64_t at;
    int u;
    const fsdpc_param_info *pi = fsdpc__engine_param(e, p, &at, &u);
    const fsdpc_unit *un = fsdpc__engine_unit(e, u);
    uint64_t lo, hi;
    if (!merge_span(pi, at, un, &lo, &hi))
      continue;
    float *shard = fsdpc__engine_host_shard(e, u, FSDPC_SD_SLOT_PARAM, err);
    st = shard ? merge_param(pf, pi, at, un, lo, hi, shard, err) : FSDPC_SYSTEM_ERROR;
  }
  fsdpc_err e2;
  fsdpc_status st2 = fsdpc__engine_host_shards_done(e, st == FSDPC_OK, &e2);
  if (st == FSDPC_OK && st2 != FSDPC_OK) {
    *err = e2;
    st = st2;
  }
  *n_merged = pf->n_targets;
  fsdpc__peft_close(pf);
  return st;
}

fsdpc_status fsdpc__peft_merge_layout(const char *dir, const fsdpc_model_shape *shape,
                                      const fsdpc_param_info *params, const fsdpc_layout *lay,
                                      float *const *shard, int *n_merged, fsdpc_err *err) {
  fsdpc_peft *pf = NULL;
  FSDPC_TRY(fsdpc__peft_open(dir, shape, &pf, err));
  fsdpc_status st = FSDPC_OK;
  for (int p = 0; p < lay->n_params && st == FSDPC_OK; p++) {
    int u = lay->param_unit[p];
    uint64_t at = lay->param_offset[p], lo, hi;
    if (merge_span(&params[p], at, &lay->units[u], &lo, &hi))
      st = merge_param(pf, &params[p], at, &lay->units[u], lo, hi, shard[u], err);
  }
  if (n_merged)
    *n_merged = pf->n_targets;
  fsdpc__peft_close(pf);
  return st;
}
