/* Statedict "sharded": each shard-group rank writes its own fp32 shards
 * (master params and optimizer state) with no gather, all in parallel, and
 * rank 0 writes one meta.json describing them. Loading reshards: for each
 * parameter segment a rank owns now, it finds where that segment lived in
 * the saved layout (any world size, strategy or wrap plan) and reads only
 * those ranges.
 *
 * Folder:
 *   meta.json                          layout, slots, files, trainer state
 *   shard-00000-of-00004.safetensors   shard-group rank 0's shards
 *   ...
 * In each shard file, unit u's shard of slot s is the 1-D F32 tensor
 * "unit.<u>.<s>", s = "param" or an optimizer slot name ("exp_avg", ...).
 * Replicas (NO_SHARD, HYBRID_SHARD) hold equal values: only replica 0
 * writes. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"
#include "meta_check.h"

#define META_FILE "meta.json"
#define META_MAX (256u << 20)

static int has_v11(const fsdpc_sd_host *h) {
  return FSDPC_HAS_FIELD(h, fsdpc_sd_host, st_shape) && h->write_file && h->read_file;
}

static void shard_file(char *buf, size_t cap, int k, int n) {
  snprintf(buf, cap, "shard-%05d-of-%05d.safetensors", k, n);
}

static int32_t sharded_probe(const fsdpc_call *call, const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s/" META_FILE, dir);
  struct stat sb;
  return stat(p, &sb) == 0 ? FSDPC_OK : FSDPC_UNSUPPORTED;
}

static cJSON *u64(uint64_t v) {
  return cJSON_CreateNumber((double)v);
}

static int32_t write_meta(const fsdpc_host_api *api, const fsdpc_sd_host *h, const char *dir,
                          uint32_t n_slots) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", "fsdpc-sharded");
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddNumberToObject(o, "world_size", h->world_size);
  cJSON_AddNumberToObject(o, "shard_size", h->shard_size);
  cJSON_AddNumberToObject(o, "replica_size", h->replica_size);
  cJSON_AddStringToObject(o, "strategy", h->strategy ? h->strategy : "");
  cJSON *slots = cJSON_AddArrayToObject(o, "slots");
  for (uint32_t s = 0; s < n_slots; s++)
    cJSON_AddItemToArray(slots, cJSON_CreateString(h->slot_names[s]));
  cJSON *files = cJSON_AddArrayToObject(o, "files");
  for (int k = 0; k < h->shard_size; k++) {
    char f[64];
    shard_file(f, sizeof f, k, h->shard_size);
    cJSON_AddItemToArray(files, cJSON_CreateString(f));
  }
  cJSON *units = cJSON_AddArrayToObject(o, "units");
  for (uint32_t u = 0; u < h->n_units; u++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", h->units[u]->name);
    cJSON_AddItemToObject(x, "flat_numel", u64(h->units[u]->flat_numel));
    cJSON_AddItemToObject(x, "shard_numel", u64(h->units[u]->shard_numel));
    cJSON_AddItemToArray(units, x);
  }
  cJSON *tensors = cJSON_AddArrayToObject(o, "tensors");
  for (uint32_t i = 0; i < h->n_tensors; i++) {
    const fsdpc_sd_tensor *t = h->tensors[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", t->name);
    cJSON *shape = cJSON_AddArrayToObject(x, "shape");
    for (int d = 0; d < t->ndim; d++)
      cJSON_AddItemToArray(shape, u64((uint64_t)t->shape[d]));
    cJSON_AddNumberToObject(x, "unit", t->unit);
    cJSON_AddItemToObject(x, "unit_offset", u64(t->unit_offset));
    cJSON_AddItemToObject(x, "numel", u64(t->numel));
    cJSON_AddItemToArray(tensors, x);
  }
  cJSON *state = cJSON_Parse(h->state_json(h->ctx));
  cJSON_AddItemToObject(o, "trainer_state", state ? state : cJSON_CreateObject());
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text)
    return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "sharded: out of memory writing " META_FILE);
  char p[4096];
  snprintf(p, sizeof p, "%s/" META_FILE, dir);
  int32_t r = h->write_file(h->ctx, p, text, strlen(text));
  cJSON_free(text);
  return r;
}

static int32_t sharded_save(const fsdpc_call *call, const fsdpc_sd_host *h, const char *dir,
                            const fsdpc_sd_save_opts *so) {
  const fsdpc_host_api *api = fsdpc_pl_call_host(call);
  if (!has_v11(h))
    return fsdpc_pl_fail(
        api, FSDPC_UNSUPPORTED,
        "sharded: this fsdpc host lacks the streaming callbacks (st_begin..st_shape)");
  uint32_t n_slots = so->with_optimizer ? h->n_slots : 0;
  if (h->replica_rank == 0) {
    uint32_t n = h->n_units * (1 + n_slots);
    fsdpc_st_entry *e = calloc(n ? n : 1, sizeof *e);
    char(*names)[96] = calloc(n ? n : 1, sizeof *names);
    if (!e || !names) {
      free(e);
      free(names);
      return fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "sharded: out of memory");
    }
    uint32_t k = 0;
    for (uint32_t u = 0; u < h->n_units; u++)
      for (int32_t s = FSDPC_SD_SLOT_PARAM; s < (int32_t)n_slots; s++, k++) {
        snprintf(names[k], sizeof names[k], "unit.%u.%s", u,
                 s == FSDPC_SD_SLOT_PARAM ? "param" : h->slot_names[s]);
        e[k] = (fsdpc_st_entry){.struct_size = sizeof e[k],
                                .name = names[k],
                                .ndim = 1,
                                .shape = {(int64_t)h->units[u]->shard_numel},
                                .data = h->shard_ptr(h->ctx, u, s)};
      }
    char f[64], p[4096];
    shard_file(f, sizeof f, h->shard_rank, h->shard_size);
    snprintf(p, sizeof p, "%s/%s", dir, f);
    int32_t r = h->st_write(h->ctx, p, e, n, FSDPC_DTYPE_F32, NULL);
    free(e);
    free(names);
    if (r != FSDPC_OK)
      return r;
  }
  return h->rank == 0 ? write_meta(api, h, dir, n_slots) : FSDPC_OK;
}

/* ---- load ---- */

typedef struct saved {
  int shard_size;
  uint32_t n_units, n_tensors, n_slots;
  uint64_t *shard_numel; /* (n_units) */
  cJSON *tensors;        /* array */
  const char *slots[16];
} saved;

static uint64_t num_u64(const cJSON *o, const char *k, int *ok) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0) {
    *ok = 0;
    return 0;
  }
  return (uint64_t)v->valuedouble;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int d = 0; d < ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (n < cap)
    snprintf(buf + n, cap - n, "]");
}

/* Reads elements [lo, hi) of a saved tensor (saved unit su, offset soff)
 * for slot into dst, piece by piece across saved shard boundaries. */
static int32_t read_range(const fsdpc_sd_host *h, const char *dir, const saved *sv, uint32_t su,
                          uint64_t soff, uint64_t lo, uint64_t hi, const char *slot, float *dst) {
  uint64_t ssn = sv->shard_numel[su];
  while (lo < hi) {
    uint64_t f = soff + lo, k = f / ssn, off = f % ssn, cnt = ssn - off;
    if (cnt > hi - lo)
      cnt = hi - lo;
    char file[64], p[4096], name[96];
    shard_file(file, sizeof file, (int)k, sv->shard_size);
    snprintf(p, sizeof p, "%s/%s", dir, file);
    snprintf(name, sizeof name, "unit.%u.%s", su, slot);
    int32_t r = h->st_read(h->ctx, p, name, off, cnt, dst);
    if (r != FSDPC_OK)
      return r;
    lo += cnt;
    dst += cnt;
  }
  return FSDPC_OK;
}

static int32_t load_tensors(const fsdpc_host_api *api, const fsdpc_sd_host *h, const char *dir,
                            const char *meta, const saved *sv, int with_opt) {
  uint32_t n_slots = with_opt ? sv->n_slots : 0;
  for (uint32_t i = 0; i < h->n_tensors; i++) {
    const fsdpc_sd_tensor *t = h->tensors[i];
    const cJSON *x = NULL, *it;
    cJSON_ArrayForEach(it, sv->tensors) {
      const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
      if (cJSON_IsString(nm) && strcmp(nm->valuestring, t->name) == 0) {
        x = it;
        break;
      }
    }
    if (!x)
      return fsdpc_pl_fail(api, FSDPC_INVALID_USAGE,
                           "%s is for another model: it has no tensor '%s'", meta, t->name);
    int ok = 1, nd = 0;
    int64_t shape[4] = {0};
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(x, "shape"), *d;
    cJSON_ArrayForEach(d, sh) {
      if (nd < 4 && cJSON_IsNumber(d))
        shape[nd] = (int64_t)d->valuedouble;
      nd++;
    }
    uint32_t su = (uint32_t)num_u64(x, "unit", &ok);
    uint64_t soff = num_u64(x, "unit_offset", &ok);
    uint64_t numel = num_u64(x, "numel", &ok);
    if (!ok || su >= sv->n_units)
      return fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "%s: tensor '%s' has a bad unit or offset",
                           meta, t->name);
    int same = nd == t->ndim && numel == t->numel;
    for (int k = 0; same && k < nd; k++)
      same = shape[k] == t->shape[k];
    if (!same) {
      char a[96], b[96];
      shape_text(a, sizeof a, nd, shape);
      shape_text(b, sizeof b, t->ndim, t->shape);
      return fsdpc_pl_fail(api, FSDPC_INVALID_USAGE,
                           "%s is for another model: tensor '%s' is %s there, %s in this model",
                           meta, t->name, a, b);
    }
    if (soff + numel > sv->shard_numel[su] * (uint64_t)sv->shard_size)
      return fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "%s: tensor '%s' lies outside its unit", meta,
                           t->name);
    /* The part of this tensor inside this rank's current shard. */
    const fsdpc_sd_unit *cu = h->units[t->unit];
    uint64_t s0 = cu->shard_offset, s1 = s0 + cu->shard_numel;
    uint64_t p0 = t->unit_offset, p1 = p0 + t->numel;
    uint64_t a = p0 > s0 ? p0 : s0, b = p1 < s1 ? p1 : s1;
    if (a >= b)
      continue;
    for (int32_t s = FSDPC_SD_SLOT_PARAM; s < (int32_t)n_slots; s++) {
      float *dst = h->shard_ptr(h->ctx, t->unit, s);
      if (!dst)
        return fsdpc_pl_fail(api, FSDPC_INTERNAL_ERROR, "sharded: no shard for unit %u", t->unit);
      int32_t r = read_range(h, dir, sv, su, soff, a - p0, b - p0,
                             s == FSDPC_SD_SLOT_PARAM ? "param" : sv->slots[s], dst + (a - s0));
      if (r != FSDPC_OK)
        return r;
    }
  }
  return FSDPC_OK;
}

static int32_t sharded_load(const fsdpc_call *call, const fsdpc_sd_host *h, const char *dir,
                            int32_t with_optimizer) {
  const fsdpc_host_api *api = fsdpc_pl_call_host(call);
  if (!api || !api->free)
    return FSDPC_INVALID_USAGE; /* read_file's text is freed through the host */
  if (!has_v11(h))
    return fsdpc_pl_fail(
        api, FSDPC_UNSUPPORTED,
        "sharded: this fsdpc host lacks the streaming callbacks (st_begin..st_shape)");
  char meta[4096];
  snprintf(meta, sizeof meta, "%s/" META_FILE, dir);
  char *text = NULL;
  uint64_t len = 0;
  int32_t r = h->read_file(h->ctx, meta, META_MAX, &text, &len);
  if (r != FSDPC_OK)
    return r;
  cJSON *o = cJSON_Parse(text);
  api->free(api->host_ctx, text);
  saved sv = {0};
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
  int ok = 1;
  if (!o || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "fsdpc-sharded") != 0) {
    r = fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "%s: not the meta.json of a sharded checkpoint",
                      meta);
    goto done;
  }
  char why[512];
  if (fsdpc_sharded_check_meta(o, why, sizeof why) != 0) {
    r = fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "%s: %s; the checkpoint was edited or is corrupt",
                      meta, why);
    goto done;
  }
  sv.shard_size = (int)num_u64(o, "shard_size", &ok);
  const cJSON *units = cJSON_GetObjectItemCaseSensitive(o, "units"), *u;
  sv.tensors = cJSON_GetObjectItemCaseSensitive(o, "tensors");
  const cJSON *slots = cJSON_GetObjectItemCaseSensitive(o, "slots"), *s;
  if (!ok || sv.shard_size < 1 || !cJSON_IsArray(units) || !cJSON_IsArray(sv.tensors) ||
      !cJSON_IsArray(slots) || cJSON_GetArraySize(slots) > 16) {
    r = fsdpc_pl_fail(api, FSDPC_INVALID_USAGE,
                      "%s: missing or bad shard_size, units, tensors or slots", meta);
    goto done;
  }
  sv.n_units = (uint32_t)cJSON_GetArraySize(units);
  sv.n_tensors = (uint32_t)cJSON_GetArraySize(sv.tensors);
  sv.shard_numel = calloc(sv.n_units + 1, sizeof(uint64_t));
  if (!sv.shard_numel) {
    r = fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "sharded: out of memory");
    goto done;
  }
  uint32_t k = 0;
  cJSON_ArrayForEach(u, units) {
    sv.shard_numel[k] = num_u64(u, "shard_numel", &ok);
    if (!ok || sv.shard_numel[k] == 0) {
      r = fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "%s: unit %u has no shard_numel", meta, k);
      goto done;
    }
    k++;
  }
  cJSON_ArrayForEach(s, slots) {
    if (!cJSON_IsString(s)) {
      r = fsdpc_pl_fail(api, FSDPC_INVALID_USAGE, "%s: a slot name is not a string", meta);
      goto done;
    }
    sv.slots[sv.n_slots++] = s->valuestring;
  }
  if (sv.n_tensors != h->n_tensors) {
    r = fsdpc_pl_fail(api, FSDPC_INVALID_USAGE,
                      "%s is for another model: %u tensors there, %u in this model", meta,
                      sv.n_tensors, h->n_tensors);
    goto done;
  }
  int with_opt = with_optimizer && sv.n_slots > 0;
  if (with_opt) {
    int same = sv.n_slots == h->n_slots;
    for (uint32_t i = 0; same && i < sv.n_slots; i++)
      same = strcmp(sv.slots[i], h->slot_names[i]) == 0;
    if (!same) {
      char a[256] = "", b[256] = "";
      for (uint32_t i = 0; i < sv.n_slots; i++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%s%s", i ? ", " : "", sv.slots[i]);
      for (uint32_t i = 0; i < h->n_slots; i++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%s%s", i ? ", " : "", h->slot_names[i]);
      r = fsdpc_pl_fail(
          api, FSDPC_INVALID_USAGE,
          "%s: the saved optimizer state has slots [%s], this run's optimizer [%s]; resume "
          "with the optimizer it was saved with",
          meta, a, b);
      goto done;
    }
  }
  r = load_tensors(api, h, dir, meta, &sv, with_opt);
  if (r == FSDPC_OK) {
    cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "trainer_state");
    if (cJSON_IsObject(st) && st->child) {
      /* Tell the trainer whether optimizer state really came back. */
      cJSON_ReplaceItemInObjectCaseSensitive(st, "has_optimizer", cJSON_CreateBool(with_opt));
      char *js = cJSON_PrintUnformatted(st);
      r = js ? h->set_state_json(h->ctx, js)
             : fsdpc_pl_fail(api, FSDPC_SYSTEM_ERROR, "out of memory");
      cJSON_free(js);
    }
  }
done:
  free(sv.shard_numel);
  cJSON_Delete(o);
  return r;
}

static const fsdpc_statedict_v1 vtable = {
    .struct_size = sizeof(fsdpc_statedict_v1),
    /* 1.0's probe, save and load: the host calls the *_call members */
    .probe_call = sharded_probe,
    .save_call = sharded_save,
    .load_call = sharded_load,
};

static const fsdpc_component_desc component = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_STATEDICT,
    .name = "sharded",
    .version = "1.0.0",
    .iface_version = 1,
    .default_score = 100,
    .description = "per-rank fp32 shards + optimizer state, no gather; reshards on load",
    .capabilities =
        "resumable; any world size and strategy on load; needs the streaming host callbacks",
    .options = NULL,
    .n_options = 0,
    .vtable = &vtable,
};
static const fsdpc_component_desc *const components[] = {&component};

static const fsdpc_plugin_desc plugin = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .name = "statedict-sharded",
    .components = components,
    .n_components = 1,
};

FSDPC_PLUGIN_DEFINE(plugin, 1)
