/* Statedict "full": a consolidated Hugging Face checkpoint that
 * transformers' LlamaForCausalLM.from_pretrained reads.
 *
 * Saving gathers the model to rank 0 one FSDP unit at a time and streams
 * each unit's tensors into safetensors files whose headers were written up
 * front, so rank 0 holds one unit beyond its shards, and the other ranks
 * wait at most one unit's write between gathers. Output, all deterministic
 * (the same weights give the same bytes):
 *   config.json                          LlamaConfig fields
 *   model.safetensors                    when the weights fit max_shard_size
 *   model-00001-of-0000N.safetensors     otherwise, tensors in module order
 *   model.safetensors.index.json         then, the HF weight map
 * Loading reads, on every rank, only the ranges of its own shards. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"

static int exists(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat sb;
  return stat(p, &sb) == 0;
}

static int32_t full_probe(const fsdpc_call *call, const char *dir) {
  return exists(dir, "model.safetensors") || exists(dir, "model.safetensors.index.json")
             ? FSDPC_OK
             : FSDPC_UNSUPPORTED;
}

typedef struct plan {
  uint32_t n_files;
  uint32_t *file_of, *index_of; /* (n_tensors) */
  uint32_t *count;              /* (n_files) tensors per file */
  char (*names)[64];            /* (n_files) */
  void **writers;               /* (n_files) */
} plan;

static void plan_free(plan *p) {
  free(p->file_of);
  free(p->index_of);
  free(p->count);
  free(p->names);
  free(p->writers);
}

/* Files in module order, each at most max_bytes (a tensor larger than that
 * gets a file of its own), named as transformers' save_pretrained does. */
static int32_t make_plan(const fsdpc_host_api *api, const fsdpc_sd_host *h, uint64_t max_bytes,
                         uint32_t es, plan *p) {
  uint32_t n = h->n_tensors;
  p->file_of = calloc(n + 1, sizeof(uint32_t));
  p->index_of = calloc(n + 1, sizeof(uint32_t));
  p->count = calloc(n + 1, sizeof(uint32_t));
  if (!p->file_of || !p->index_of || !p->count)
    return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "full: out of memory");
  uint64_t cur = 0;
  uint32_t f = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t b = h->tensors[i]->numel * es;
    if (cur > 0 && cur + b > max_bytes) {
      f++;
      cur = 0;
    }
    cur += b;
    p->file_of[i] = f;
    p->index_of[i] = p->count[f]++;
  }
  p->n_files = f + 1;
  p->names = calloc(p->n_files, sizeof *p->names);
  p->writers = calloc(p->n_files, sizeof(void *));
  if (!p->names || !p->writers)
    return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "full: out of memory");
  for (uint32_t k = 0; k < p->n_files; k++) {
    if (p->n_files == 1)
      snprintf(p->names[k], sizeof p->names[k], "model.safetensors");
    else
      snprintf(p->names[k], sizeof p->names[k], "model-%05u-of-%05u.safetensors", k + 1,
               p->n_files);
  }
  return FSDPC_OK;
}

static int32_t begin_files(const fsdpc_host_api *api, const fsdpc_sd_host *h, const char *dir,
                           int32_t dtype, plan *p) {
  fsdpc_st_entry *e = calloc(h->n_tensors + 1, sizeof *e);
  if (!e)
    return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "full: out of memory");
  int32_t r = FSDPC_OK;
  for (uint32_t k = 0; k < p->n_files && r == FSDPC_OK; k++) {
    uint32_t m = 0;
    for (uint32_t i = 0; i < h->n_tensors; i++) {
      if (p->file_of[i] != k)
        continue;
      const fsdpc_sd_tensor *t = h->tensors[i];
      e[m] = (fsdpc_st_entry){.struct_size = sizeof *e, .name = t->name, .ndim = t->ndim};
      memcpy(e[m].shape, t->shape, sizeof e[m].shape);
      m++;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, p->names[k]);
    r = h->st_begin(h->ctx, path, e, m, dtype, "{\"format\": \"pt\"}", &p->writers[k]);
  }
  free(e);
  return r;
}

static int32_t write_index(const fsdpc_host_api *api, const fsdpc_sd_host *h, const char *dir,
                           const plan *p, uint32_t es) {
  /* Keys sorted by name, as transformers writes them. */
  uint32_t n = h->n_tensors;
  uint32_t *order = malloc((n + 1) * sizeof *order);
  if (!order)
    return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "full: out of memory");
  for (uint32_t i = 0; i < n; i++)
    order[i] = i;
  for (uint32_t i = 1; i < n; i++) /* insertion sort: a few hundred names */
    for (uint32_t j = i;
         j > 0 && strcmp(h->tensors[order[j - 1]]->name, h->tensors[order[j]]->name) > 0; j--) {
      uint32_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++)
    total += h->tensors[i]->numel * es;
  cJSON *o = cJSON_CreateObject();
  cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
  char tot[32];
  snprintf(tot, sizeof tot, "%llu", (unsigned long long)total);
  cJSON_AddItemToObject(meta, "total_size", cJSON_CreateRaw(tot));
  cJSON *map = cJSON_AddObjectToObject(o, "weight_map");
  for (uint32_t i = 0; i < n; i++)
    cJSON_AddStringToObject(map, h->tensors[order[i]]->name, p->names[p->file_of[order[i]]]);
  free(order);
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text)
    return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "full: out of memory");
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  int32_t r = h->write_file(h->ctx, path, text, strlen(text));
  cJSON_free(text);
  return r;
}

static const fsdpc_option_desc opt_max = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "max_shard_size",
    .type = FSDPC_OPT_INT,
    .default_value = "5000000000",
    .min = 1,
    .max = 9.0e18,
    .help = "full: split the weights into files of at most this many bytes (HF's 5 GB default)",
};
static const fsdpc_option_desc *const options[] = {&opt_max};

static int32_t full_save(const fsdpc_call *call, const fsdpc_sd_host *h, const char *dir,
                         const fsdpc_sd_save_opts *so) {
  const fsdpc_host_api *api = fsdpc_pl_call_host(call);
  const fsdpc_opts *opts = fsdpc_pl_call_opts(call);
  if (!FSDPC_HAS_FIELD(h, fsdpc_sd_host, st_shape) || !h->st_begin || !h->write_file)
    return fsdpc_pl_fail(
        api, FSDPC_UNSUPPORTED,
        "full: this fsdpc host lacks the streaming callbacks (st_begin..st_shape)");
  if (so->dtype != FSDPC_DTYPE_F32 && so->dtype != FSDPC_DTYPE_BF16)
    return fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "full: dtype must be fp32 or bf16");
  /* Replicas hold equal values: only the first shard group gathers. */
  if (h->replica_rank != 0)
    return FSDPC_OK;
  int writer = h->rank == 0;
  int64_t max_bytes = (int64_t)so->max_shard_bytes;
  if (max_bytes <= 0 && opts &&
      fsdpc_pl_opt(api, opts, "max_shard_size", FSDPC_OPT_INT, &max_bytes, sizeof max_bytes) !=
          FSDPC_OK)
    max_bytes = 5000000000LL;
  if (max_bytes <= 0)
    max_bytes = 5000000000LL;
  uint32_t es = so->dtype == FSDPC_DTYPE_BF16 ? 2 : 4;
  plan p = {0};
  int32_t r = FSDPC_OK;
  uint64_t max_flat = 0;
  for (uint32_t u = 0; u < h->n_units; u++)
    if (h->units[u]->flat_numel > max_flat)
      max_flat = h->units[u]->flat_numel;
  float *full = NULL;
  if (writer) {
    r = make_plan(api, h, (uint64_t)max_bytes, es, &p);
    if (r == FSDPC_OK)
      r = begin_files(api, h, dir, so->dtype, &p);
    if (r == FSDPC_OK && !(full = malloc(max_flat * sizeof(float))))
      r = fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "full: out of memory for one unit (%llu floats)",
                        (unsigned long long)max_flat);
  }
  /* Every rank takes part in every gather, even after rank 0 failed to
   * write: leaving would hang the others in the collective. */
  for (uint32_t u = 0; u < h->n_units; u++) {
    int32_t g = h->gather_unit(h->ctx, u, FSDPC_SD_SLOT_PARAM, 0, r == FSDPC_OK ? full : NULL);
    if (g != FSDPC_OK) {
      r = g;
      break; /* a failed collective: the others fail too */
    }
    if (!writer || r != FSDPC_OK)
      continue;
    for (uint32_t i = 0; i < h->n_tensors && r == FSDPC_OK; i++) {
      const fsdpc_sd_tensor *t = h->tensors[i];
      if (t->unit != u)
        continue;
      r = h->st_put(h->ctx, p.writers[p.file_of[i]], p.index_of[i], full + t->unit_offset, 0,
                    t->numel);
    }
  }
  if (writer) {
    for (uint32_t k = 0; k < p.n_files && p.writers; k++) {
      if (!p.writers[k])
        continue;
      if (r == FSDPC_OK)
        r = h->st_end(h->ctx, p.writers[k]);
      else
        h->st_abort(h->ctx, p.writers[k]);
      p.writers[k] = NULL;
    }
    if (r == FSDPC_OK) {
      char path[4096];
      snprintf(path, sizeof path, "%s/config.json", dir);
      r = h->write_hf_config(h->ctx, path);
    }
    if (r == FSDPC_OK && p.n_files > 1)
      r = write_index(api, h, dir, &p, es);
    free(full);
  }
  plan_free(&p);
  return r;
}

static int32_t full_load(const fsdpc_call *call, const fsdpc_sd_host *h, const char *dir,
                         int32_t with_optimizer) {
  const fsdpc_host_api *api = fsdpc_pl_call_host(call);
  if (!FSDPC_HAS_FIELD(h, fsdpc_sd_host, st_shape) || !h->st_shape)
    return fsdpc_pl_fail(
        api, FSDPC_UNSUPPORTED,
        "full: this fsdpc host lacks the streaming callbacks (st_begin..st_shape)");
  for (uint32_t i = 0; i < h->n_tensors; i++) {
    const fsdpc_sd_tensor *t = h->tensors[i];
    int32_t nd = 0;
    int64_t shape[4] = {0};
    int32_t r = h->st_shape(h->ctx, dir, t->name, &nd, shape);
    if (r != FSDPC_OK)
      return r;
    int same = nd == t->ndim;
    for (int d = 0; same && d < nd; d++)
      same = shape[d] == t->shape[d];
    if (!same)
      return fsdpc_pl_fail(
          api, FSDPC_INVALID_USAGE,
          "%s is for another model: tensor '%s' has %d dims [%lld, %lld], this model "
          "[%lld, %lld]",
          dir, t->name, nd, (long long)shape[0], (long long)(nd > 1 ? shape[1] : 0),
          (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 0));
    const fsdpc_sd_unit *u = h->units[t->unit];
    uint64_t s0 = u->shard_offset, s1 = s0 + u->shard_numel;
    uint64_t p0 = t->unit_offset, p1 = p0 + t->numel;
    uint64_t a = p0 > s0 ? p0 : s0, b = p1 < s1 ? p1 : s1;
    if (a >= b)
      continue;
    float *dst = h->shard_ptr(h->ctx, t->unit, FSDPC_SD_SLOT_PARAM);
    if (!dst)
      return fsdpc_pl_fail(api, FSDPC_INTERNAL_ERROR, "full: no shard for unit %u", t->unit);
    r = h->st_read(h->ctx, dir, t->name, a - p0, b - a, dst + (a - s0));
    if (r != FSDPC_OK)
      return r;
  }
  return FSDPC_OK;
}

static const fsdpc_statedict_v1 vtable = {
    .struct_size = sizeof(fsdpc_statedict_v1),
    /* 1.0's probe, save and load: the host calls the *_call members */
    .probe_call = full_probe,
    .save_call = full_save,
    .load_call = full_load,
};

static const fsdpc_component_desc component = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_STATEDICT,
    .name = "full",
    .version = "1.0.0",
    .iface_version = 1,
    .default_score = 50,
    .description = "consolidated Hugging Face checkpoint (config.json + safetensors), one unit "
                   "at a time",
    .capabilities = "fp32 or bf16; index above max_shard_size; weights only; needs the streaming "
                    "host callbacks",
    .options = options,
    .n_options = 1,
    .vtable = &vtable,
};
static const fsdpc_component_desc *const components[] = {&component};

static const fsdpc_plugin_desc plugin = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .name = "statedict-full",
    .components = components,
    .n_components = 1,
};

FSDPC_PLUGIN_DEFINE(plugin, 1)
