/* The fsdpc_sd_host callbacks a statedict plugin drives: shard pointers and
 * unit gathers over a backend, file writes that are recorded (name, size,
 * CRC-32) for the checksum manifest, and reads that verify each file
 * against that manifest before the first byte is used. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "io/fileio.h"
#include "util/fs.h"
#include "util/log.h"

static fsdpc_ckpt_host *H(void *ctx) {
  return ctx;
}

/* Records the callback's error; the save/load driver reports it in place
 * of the plugin's (less specific) message. */
fsdpc_status fsdpc__ckpt_cb_fail(fsdpc_ckpt_host *h, fsdpc_status st) {
  if (st != FSDPC_OK)
    h->has_err = 1;
  return st;
}

static const char *rel_name(const fsdpc_ckpt_host *h, const char *path) {
  size_t n = h->dir ? strlen(h->dir) : 0;
  if (n && strncmp(path, h->dir, n) == 0 && path[n] == '/')
    return path + n + 1;
  return path;
}

static fsdpc_status record_file(fsdpc_ckpt_host *h, const char *path) {
  fsdpc_ckpt_file f = {0};
  FSDPC_TRY(fsdpc__ckpt_file_crc(path, &f.crc, &f.size, &h->err));
  if (h->n_written == h->cap_written) {
    int cap = h->cap_written ? 2 * h->cap_written : 16;
    fsdpc_ckpt_file *w = realloc(h->written, (size_t)cap * sizeof *w);
    if (!w)
      return fsdpc__fail(&h->err, FSDPC_SYSTEM_ERROR, "out of memory");
    h->written = w;
    h->cap_written = cap;
  }
  if (!(f.name = strdup(rel_name(h, path))))
    return fsdpc__fail(&h->err, FSDPC_SYSTEM_ERROR, "out of memory");
  h->written[h->n_written++] = f;
  if (h->kill_after > 0 && h->n_written >= h->kill_after) {
    /* Test hook: die mid-save the way a node failure would. */
    fprintf(stderr, "fsdpc: test hook: killing rank %d during a checkpoint save\n", h->sd.rank);
    fflush(stderr);
    raise(SIGKILL);
  }
  return FSDPC_OK;
}

/* Checks path against the manifest once (size, then CRC-32 of the whole
 * file). A checkpoint without any manifest is not verified (an HF folder
 * written by another tool); the driver warns about it. */
fsdpc_status fsdpc__ckpt_verify(fsdpc_ckpt_host *h, const char *path, fsdpc_err *err) {
  if (!h->verify)
    return FSDPC_OK;
  const char *name = rel_name(h, path);
  for (int i = 0; i < h->n_manifest; i++) {
    fsdpc_ckpt_file *m = &h->manifest[i];
    if (strcmp(m->name, name) != 0)
      continue;
    if (m->verified)
      return FSDPC_OK;
    struct stat sb;
    if (stat(path, &sb) != 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: missing from the checkpoint (listed in its checksums); the "
                         "checkpoint is incomplete, resume from an older one",
                         path);
    if ((uint64_t)sb.st_size != m->size)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %llu bytes, the checkpoint's checksums say %llu: the file is "
                         "truncated or was replaced",
                         path, (unsigned long long)sb.st_size, (unsigned long long)m->size);
    uint32_t crc;
    uint64_t size;
    FSDPC_TRY(fsdpc__ckpt_file_crc(path, &crc, &size, err));
    if (crc != m->crc)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: checksum mismatch (crc32 %08x, expected %08x): the file is "
                         "corrupt",
                         path, crc, m->crc);
    m->verified = 1;
    return FSDPC_OK;
  }
  struct stat sb;
  if (stat(path, &sb) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: missing from the checkpoint", path);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: not listed in the checkpoint's checksums (checksums.rank-*.txt)", path);
}

/* ---- memory and collectives ---- */

static float *cb_shard_ptr(void *ctx, uint32_t unit, int32_t slot) {
  fsdpc_ckpt_host *h = H(ctx);
  if (unit >= h->sd.n_units || slot < FSDPC_SD_SLOT_PARAM ||
      (slot >= 0 && (uint32_t)slot >= h->sd.n_slots))
    return NULL;
  return h->be.shard(h->be.ctx, (int)unit, slot);
}

static int32_t cb_gather_unit(void *ctx, uint32_t unit, int32_t slot, int32_t root, float *full) {
  fsdpc_ckpt_host *h = H(ctx);
  if (unit >= h->sd.n_units || root < 0 || root >= h->sd.shard_size)
    return fsdpc__ckpt_cb_fail(h, fsdpc__fail(&h->err, FSDPC_INTERNAL_ERROR,
                                              "gather_unit: unit %u or root %d out of range", unit,
                                              root));
  return fsdpc__ckpt_cb_fail(h, h->be.gather(h->be.ctx, (int)unit, slot, root, full, &h->err));
}

static int32_t cb_agree(void *ctx, int32_t *ok) {
  fsdpc_ckpt_host *h = H(ctx);
  int v = *ok != 0;
  fsdpc_status st = h->be.agree(h->be.ctx, &v, &h->err);
  *ok = v;
  return fsdpc__ckpt_cb_fail(h, st);
}

static int32_t cb_barrier(void *ctx) {
  int32_t ok = 1;
  return cb_agree(ctx, &ok);
}

/* ---- trainer state and config.json ---- */

static const char *cb_state_json(void *ctx) {
  fsdpc_ckpt_host *h = H(ctx);
  return h->state ? h->state : "{}";
}

static int32_t cb_set_state_json(void *ctx, const char *json) {
  fsdpc_ckpt_host *h = H(ctx);
  free(h->loaded_state);
  if (!(h->loaded_state = strdup(json ? json : "{}")))
    return fsdpc__ckpt_cb_fail(h, fsdpc__fail(&h->err, FSDPC_SYSTEM_ERROR, "out of memory"));
  return FSDPC_OK;
}

static fsdpc_status record_cb(void *ctx, const char *path) { return record_file(ctx, path); }

/* config.json, generation_config.json and the tokenizer files (export.c). */
static int32_t cb_write_hf_config(void *ctx, const char *path) {
  fsdpc_ckpt_host *h = H(ctx);
  char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
  fsdpc_status st;
  if (!dir) {
    st = fsdpc__fail(&h->err, FSDPC_SYSTEM_ERROR, "out of memory");
  } else {
    if (slash) *slash = '\0';
    st = fsdpc__export_write(slash ? dir : ".", &h->shape, h->save_dtype, &h->export_src,
                             record_cb, h, &h->err);
  }
  free(dir);
  return fsdpc__ckpt_cb_fail(h, st);
}

fsdpc_status fsdpc__ckpt_host_set_export(fsdpc_ckpt_host *h, const fsdpc_config *c,
                                         fsdpc_err *err) {
  fsdpc__export_src_free(&h->export_src);
  return fsdpc__export_src_from_config(c, &h->export_src, err);
}

/* ---- files ---- */

static int32_t cb_st_write(void *ctx, const char *path, const fsdpc_st_entry *entries, uint32_t n,
                           int32_t dtype, const char *metadata_json) {
  fsdpc_ckpt_host *h = H(ctx);
  fsdpc_status st = fsdpc__st_write(path, entries, n, dtype, metadata_json, &h->err);
  if (st == FSDPC_OK)
    st = record_file(h, path);
  return fsdpc__ckpt_cb_fail(h, st);
}

typedef struct writer_handle {
  fsdpc_st_writer *w;
  char *path;
} writer_handle;

static int32_t cb_st_begin(void *ctx, const char *path, const fsdpc_st_entry *layout, uint32_t n,
                           int32_t dtype, const char *metadata_json, void **handle) {
  fsdpc_ckpt_host *h = H(ctx);
  writer_handle *wh = calloc(1, sizeof *wh);
  if (!wh || !(wh->path = strdup(path))) {
    free(wh);
    return fsdpc__ckpt_cb_fail(h, fsdpc__fail(&h->err, FSDPC_SYSTEM_ERROR, "out of memory"));
  }
  fsdpc_status st = fsdpc__st_writer_begin(path, layout, n, dtype, metadata_json, &wh->w, &h->err);
  if (st != FSDPC_OK) {
    free(wh->path);
    free(wh);
    return fsdpc__ckpt_cb_fail(h, st);
  }
  *handle = wh;
  return FSDPC_OK;
}

static int32_t cb_st_put(void *ctx, void *handle, uint32_t index, const float *data,
                         uint64_t elem_offset, uint64_t n) {
  fsdpc_ckpt_host *h = H(ctx);
  writer_handle *wh = handle;
  return fsdpc__ckpt_cb_fail(h, fsdpc__st_writer_put(wh->w, index, data, elem_offset, n, &h->err));
}

static int32_t cb_st_end(void *ctx, void *handle) {
  fsdpc_ckpt_host *h = H(ctx);
  writer_handle *wh = handle;
  fsdpc_status st = fsdpc__st_writer_end(wh->w, &h->err);
  if (st == FSDPC_OK)
    st = record_file(h, wh->path);
  free(wh->path);
  free(wh);
  return fsdpc__ckpt_cb_fail(h, st);
}

static void cb_st_abort(void *ctx, void *handle) {
  writer_handle *wh = handle;
  if (!wh)
    return;
  fsdpc__st_writer_abort(wh->w);
  free(wh->path);
  free(wh);
}

static int32_t cb_write_file(void *ctx, const char *path, const void *data, uint64_t len) {
  fsdpc_ckpt_host *h = H(ctx);
  fsdpc_status st = FSDPC_OK;
  if (fsdpc__write_file_safe(path, data, (size_t)len) != 0)
    st = fsdpc__fail(&h->err, FSDPC_SYSTEM_ERROR, "cannot write %s", path);
  if (st == FSDPC_OK)
    st = record_file(h, path);
  return fsdpc__ckpt_cb_fail(h, st);
}

static int32_t cb_read_file(void *ctx, const char *path, uint64_t max, char **out, uint64_t *len) {
  fsdpc_ckpt_host *h = H(ctx);
  FSDPC_TRY(fsdpc__ckpt_cb_fail(h, fsdpc__ckpt_verify(h, path, &h->err)));
  size_t n = 0;
  if (fsdpc__read_small_file(path, (size_t)max, out, &n) != 0)
    return fsdpc__ckpt_cb_fail(h, fsdpc__fail(&h->err, FSDPC_INVALID_USAGE,
                                              "%s: cannot read it (missing, or larger than "
                                              "%llu bytes)",
                                              path, (unsigned long long)max));
  if (len)
    *len = n;
  return FSDPC_OK;
}

/* Opened files are cached for the whole load: a resharding load reads many
 * small ranges of the same few files. */
static fsdpc_status cache_get(fsdpc_ckpt_host *h, const char *path, fsdpc_ckpt_open **out,
                              fsdpc_err *err) {
  for (int i = 0; i < h->n_cache; i++)
    if (strcmp(h->cache[i].path, path) == 0) {
      *out = &h->cache[i];
      return FSDPC_OK;
    }
  fsdpc_ckpt_open o = {0};
  struct stat sb;
  int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
  if (is_dir) {
    /* An HF folder: verify every file the manifest lists before reading. */
    for (int i = 0; i < h->n_manifest && h->verify; i++) {
      char *p = fsdpc__path_join(h->dir, h->manifest[i].name);
      if (!p)
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      fsdpc_status st = fsdpc__ckpt_verify(h, p, err);
      free(p);
      FSDPC_TRY(st);
    }
    FSDPC_TRY(fsdpc__hf_ckpt_open(path, &o.hf, err));
  } else {
    FSDPC_TRY(fsdpc__ckpt_verify(h, path, err));
    FSDPC_TRY(fsdpc__st_open(path, &o.st, err));
  }
  fsdpc_ckpt_open *c = realloc(h->cache, (size_t)(h->n_cache + 1) * sizeof *c);
  if (!c || !(o.path = strdup(path))) {
    if (c)
      h->cache = c;
    fsdpc__st_close(o.st);
    fsdpc__hf_ckpt_close(o.hf);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  h->cache = c;
  h->cache[h->n_cache] = o;
  *out = &h->cache[h->n_cache++];
  return FSDPC_OK;
}

void fsdpc__ckpt_cache_clear(fsdpc_ckpt_host *h) {
  for (int i = 0; i < h->n_cache; i++) {
    fsdpc__st_close(h->cache[i].st);
    fsdpc__hf_ckpt_close(h->cache[i].hf);
    free(h->cache[i].path);
  }
  free(h->cache);
  h->cache = NULL;
  h->n_cache = 0;
}

static int32_t cb_st_read(void *ctx, const char *path, const char *name, uint64_t elem_offset,
                          uint64_t n, float *dst) {
  fsdpc_ckpt_host *h = H(ctx);
  fsdpc_ckpt_open *o;
  FSDPC_TRY(fsdpc__ckpt_cb_fail(h, cache_get(h, path, &o, &h->err)));
  fsdpc_status st = o->hf ? fsdpc__hf_ckpt_read_f32(o->hf, name, elem_offset, n, dst, &h->err)
                          : fsdpc__st_read_f32(o->st, name, elem_offset, n, dst, &h->err);
  return fsdpc__ckpt_cb_fail(h, st);
}

static int32_t cb_st_shape(void *ctx, const char *path, const char *name, int32_t *ndim,
                           int64_t shape[4]) {
  fsdpc_ckpt_host *h = H(ctx);
  fsdpc_ckpt_open *o;
  FSDPC_TRY(fsdpc__ckpt_cb_fail(h, cache_get(h, path, &o, &h->err)));
  const fsdpc_st_info *info = NULL;
  if (o->hf) {
    if (!fsdpc__hf_ckpt_has(o->hf, name))
      return fsdpc__ckpt_cb_fail(
          h, fsdpc__fail(&h->err, FSDPC_INVALID_USAGE, "%s: no tensor '%s'", path, name));
    FSDPC_TRY(fsdpc__ckpt_cb_fail(h, fsdpc__hf_ckpt_find(o->hf, name, &info, &h->err)));
  } else if (!(info = fsdpc__st_find(o->st, name))) {
    return fsdpc__ckpt_cb_fail(
        h, fsdpc__fail(&h->err, FSDPC_INVALID_USAGE, "%s: no tensor '%s'", path, name));
  }
  if (info->ndim > 4)
    return fsdpc__ckpt_cb_fail(h, fsdpc__fail(&h->err, FSDPC_INVALID_USAGE,
                                              "%s: tensor '%s' has %d dimensions", path, name,
                                              (int)info->ndim));
  *ndim = info->ndim;
  for (int i = 0; i < 4; i++)
    shape[i] = i < info->ndim ? info->shape[i] : 0;
  return FSDPC_OK;
}

/* ---- construction ---- */

fsdpc_status fsdpc__ckpt_host_create(const fsdpc_ckpt_host_opts *o, fsdpc_ckpt_host **out,
                                     fsdpc_err *err) {
  fsdpc_ckpt_host *h = calloc(1, sizeof *h);
  if (!h)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  h->be = o->backend;
  h->shape = *o->shape;
  h->save_dtype = FSDPC_DTYPE_F32;
  snprintf(h->strategy, sizeof h->strategy, "%s", o->strategy);
  h->units = calloc((size_t)o->n_units, sizeof *h->units);
  h->unit_ptrs = calloc((size_t)o->n_units, sizeof *h->unit_ptrs);
  h->tensors = calloc((size_t)o->n_params, sizeof *h->tensors);
  h->tensor_ptrs = calloc((size_t)o->n_params, sizeof *h->tensor_ptrs);
  h->slot_names = calloc((size_t)o->n_slots + 1, sizeof *h->slot_names);
  if (!h->units || !h->unit_ptrs || !h->tensors || !h->tensor_ptrs || !h->slot_names)
    goto oom;
  for (int u = 0; u < o->n_units; u++) {
    const fsdpc_unit *un = &o->units[u];
    h->units[u] = (fsdpc_sd_unit){.struct_size = sizeof(fsdpc_sd_unit),
                                  .name = un->name,
                                  .flat_numel = un->flat_numel,
                                  .shard_numel = un->shard_numel,
                                  .shard_offset = un->shard_offset};
    h->unit_ptrs[u] = &h->units[u];
  }
  for (int p = 0; p < o->n_params; p++) {
    const fsdpc_param_info *pi = &o->params[p];
    fsdpc_sd_tensor *t = &h->tensors[p];
    *t = (fsdpc_sd_tensor){.struct_size = sizeof *t,
                           .name = pi->name,
                           .ndim = pi->ndim,
                           .unit = (uint32_t)o->param_unit[p],
                           .unit_offset = o->param_offset[p],
                           .numel = pi->numel};
    for (int d = 0; d < pi->ndim; d++)
      t->shape[d] = pi->shape[d];
    h->tensor_ptrs[p] = t;
  }
  for (uint32_t i = 0; i < o->n_slots; i++)
    if (!(h->slot_names[i] = strdup(o->slot_names[i])))
      goto oom;
  h->n_slots = o->n_slots;
  h->sd = (fsdpc_sd_host){
      .struct_size = sizeof(fsdpc_sd_host),
      .ctx = h,
      .rank = o->rank,
      .world_size = o->world_size,
      .shard_rank = o->shard_rank,
      .shard_size = o->shard_size,
      .replica_rank = o->replica_rank,
      .replica_size = o->replica_size,
      .n_units = (uint32_t)o->n_units,
      .n_tensors = (uint32_t)o->n_params,
      .n_slots = o->n_slots,
      .units = h->unit_ptrs,
      .tensors = h->tensor_ptrs,
      .slot_names = (const char *const *)h->slot_names,
      .strategy = h->strategy,
      .shard_ptr = cb_shard_ptr,
      .gather_unit = cb_gather_unit,
      .barrier = cb_barrier,
      .agree = cb_agree,
      .state_json = cb_state_json,
      .set_state_json = cb_set_state_json,
      .write_hf_config = cb_write_hf_config,
      .st_write = cb_st_write,
      .st_read = cb_st_read,
      .st_begin = cb_st_begin,
      .st_put = cb_st_put,
      .st_end = cb_st_end,
      .st_abort = cb_st_abort,
      .write_file = cb_write_file,
      .read_file = cb_read_file,
      .st_shape = cb_st_shape,
  };
  *out = h;
  return FSDPC_OK;
oom:
  fsdpc__ckpt_host_destroy(h);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the checkpoint host");
}

void fsdpc__ckpt_files_clear(fsdpc_ckpt_file **files, int *n) {
  for (int i = 0; i < *n; i++)
    free((*files)[i].name);
  free(*files);
  *files = NULL;
  *n = 0;
}

void fsdpc__ckpt_host_destroy(fsdpc_ckpt_host *h) {
  if (!h)
    return;
  fsdpc__ckpt_cache_clear(h);
  fsdpc__ckpt_files_clear(&h->written, &h->n_written);
  fsdpc__ckpt_files_clear(&h->manifest, &h->n_manifest);
  for (uint32_t i = 0; h->slot_names && i < h->n_slots; i++)
    free(h->slot_names[i]);
  free(h->slot_names);
  free(h->units);
  free(h->unit_ptrs);
  free(h->tensors);
  free(h->tensor_ptrs);
  free(h->state);
  free(h->loaded_state);
  free(h->config_yaml);
  free(h->loss_marker);
  free(h->dir);
  fsdpc__export_src_free(&h->export_src);
  free(h);
}

static fsdpc_status set_str(char **dst, const char *src, fsdpc_err *err) {
  free(*dst);
  *dst = NULL;
  if (src && !(*dst = strdup(src)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  return FSDPC_OK;
}

fsdpc_status fsdpc__ckpt_host_set_state(fsdpc_ckpt_host *h, const char *json, fsdpc_err *err) {
  return set_str(&h->state, json, err);
}
const char *fsdpc__ckpt_host_loaded_state(const fsdpc_ckpt_host *h) {
  return h->loaded_state;
}
fsdpc_status fsdpc__ckpt_host_set_config_yaml(fsdpc_ckpt_host *h, const char *yaml,
                                              fsdpc_err *err) {
  return set_str(&h->config_yaml, yaml, err);
}
void fsdpc__ckpt_host_kill_after(fsdpc_ckpt_host *h, int n) {
  h->kill_after = n;
}
