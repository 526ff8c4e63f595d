/* Hugging Face checkpoint directories: one safetensors file, or an index
 * mapping tensor names to shard files that are opened lazily. */
#include "io/hf_ckpt.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/fileio.h"
#include "io/st_common.h"

#define QCAP 160

typedef struct ck_entry {
  char *name;
  uint32_t file; /* index into files */
} ck_entry;

struct fsdpc_hf_ckpt {
  char *dir;
  const char *source; /* FSDPC_HF_INDEX_FILE or FSDPC_HF_SINGLE_FILE */
  uint32_t n_files;
  char **paths;           /* (n_files) dir/file */
  fsdpc_st_file **shards; /* (n_files) NULL until first use */
  uint32_t n;
  ck_entry *e; /* (n) sorted by name */
};

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const ck_entry *)a)->name, ((const ck_entry *)b)->name);
}

void fsdpc__hf_ckpt_close(fsdpc_hf_ckpt *ck) {
  if (!ck)
    return;
  for (uint32_t i = 0; i < ck->n_files; i++) {
    fsdpc__st_close(ck->shards[i]);
    free(ck->paths[i]);
  }
  free(ck->shards);
  free(ck->paths);
  for (uint32_t i = 0; i < ck->n; i++)
    free(ck->e[i].name);
  free(ck->e);
  free(ck->dir);
  free(ck);
}

static fsdpc_status oom(fsdpc_err *err, const char *where) {
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", where);
}

static fsdpc_status sort_and_check(fsdpc_hf_ckpt *ck, const char *where, fsdpc_err *err) {
  char q[QCAP];
  qsort(ck->e, ck->n, sizeof *ck->e, entry_cmp);
  for (uint32_t i = 1; i < ck->n; i++)
    if (strcmp(ck->e[i - 1].name, ck->e[i].name) == 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s' is listed twice", where,
                         fsdpc__st_quote(q, sizeof q, ck->e[i].name));
  return FSDPC_OK;
}

static fsdpc_status open_single(fsdpc_hf_ckpt *ck, const char *path, fsdpc_err *err) {
  ck->source = FSDPC_HF_SINGLE_FILE;
  ck->paths = calloc(1, sizeof *ck->paths);
  ck->shards = calloc(1, sizeof *ck->shards);
  if (!ck->paths || !ck->shards)
    return oom(err, ck->dir);
  ck->n_files = 1;
  ck->paths[0] = strdup(path);
  if (!ck->paths[0])
    return oom(err, ck->dir);
  FSDPC_TRY(fsdpc__st_open(path, &ck->shards[0], err));
  uint32_t n = fsdpc__st_count(ck->shards[0]);
  ck->e = calloc((size_t)n + 1, sizeof *ck->e);
  if (!ck->e)
    return oom(err, ck->dir);
  for (uint32_t i = 0; i < n; i++) {
    ck->e[i].name = strdup(fsdpc__st_at(ck->shards[0], i)->name);
    if (!ck->e[i].name)
      return oom(err, ck->dir);
    ck->n++;
  }
  return sort_and_check(ck, path, err);
}

/* Shard names must stay inside the checkpoint directory. */
static int plain_file_name(const char *s) {
  return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static fsdpc_status add_shard(fsdpc_hf_ckpt *ck, const char *file, const char *tensor,
                              const char *index_path, uint32_t *id, fsdpc_err *err) {
  char q[QCAP];
  char *path = fsdpc__path_join(ck->dir, file);
  if (!path)
    return oom(err, index_path);
  for (uint32_t i = 0; i < ck->n_files; i++) {
    if (strcmp(ck->paths[i], path) == 0) {
      free(path);
      *id = i;
      return FSDPC_OK;
    }
  }
  /* Check existence now, so a missing shard is reported at open rather
   * than halfway through loading. */
  struct stat st;
  int e = stat(path, &st) != 0 ? errno : 0;
  if (e != 0 || !S_ISREG(st.st_mode)) {
    fsdpc_status s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                                 "%s: listed in %s (for tensor '%s') but cannot be opened: %s",
                                 path, FSDPC_HF_INDEX_FILE, fsdpc__st_quote(q, sizeof q, tensor),
                                 e ? strerror(e) : "not a regular file");
    free(path);
    return s;
  }
  ck->paths[ck->n_files] = path;
  *id = ck->n_files++;
  return FSDPC_OK;
}

static fsdpc_status open_index(fsdpc_hf_ckpt *ck, const char *index_path, fsdpc_err *err) {
  char q[QCAP];
  ck->source = FSDPC_HF_INDEX_FILE;
  char *text = NULL;
  size_t len = 0;
  if (fsdpc__read_small_file(index_path, FSDPC_ST_MAX_HEADER, &text, &len) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot read: %s", index_path, strerror(errno));
  fsdpc_status s = FSDPC_OK;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!root) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not valid JSON (error near byte %zu)",
                    index_path, end && end >= text ? (size_t)(end - text) : (size_t)0);
    goto out;
  }
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  if (!cJSON_IsObject(map) || !map->child) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                    "%s: \"weight_map\" is missing, empty or not an object", index_path);
    goto out;
  }
  uint32_t n = (uint32_t)cJSON_GetArraySize(map);
  ck->e = calloc((size_t)n + 1, sizeof *ck->e);
  ck->paths = calloc((size_t)n + 1, sizeof *ck->paths);
  ck->shards = calloc((size_t)n + 1, sizeof *ck->shards);
  if (!ck->e || !ck->paths || !ck->shards) {
    s = oom(err, index_path);
    goto out;
  }
  for (const cJSON *m = map->child; m; m = m->next) {
    if (!cJSON_IsString(m) || !plain_file_name(m->valuestring) || m->string[0] == '\0') {
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                      "%s: weight_map entry '%s' must map a tensor name to a file name in "
                      "the same directory",
                      index_path, fsdpc__st_quote(q, sizeof q, m->string));
      goto out;
    }
    uint32_t id = 0;
    if ((s = add_shard(ck, m->valuestring, m->string, index_path, &id, err)) != FSDPC_OK)
      goto out;
    ck->e[ck->n].name = strdup(m->string);
    ck->e[ck->n].file = id;
    if (!ck->e[ck->n].name) {
      s = oom(err, index_path);
      goto out;
    }
    ck->n++;
  }
  s = sort_and_check(ck, index_path, err);
out:
  cJSON_Delete(root);
  free(text);
  return s;
}

fsdpc_status fsdpc__hf_ckpt_open(const char *dir, fsdpc_hf_ckpt **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_hf_ckpt *ck = calloc(1, sizeof *ck);
  if (!ck)
    return oom(err, dir);
  fsdpc_status s;
  char *index = fsdpc__path_join(dir, FSDPC_HF_INDEX_FILE);
  char *single = fsdpc__path_join(dir, FSDPC_HF_SINGLE_FILE);
  ck->dir = strdup(dir);
  if (!index || !single || !ck->dir) {
    s = oom(err, dir);
    goto done;
  }
  struct stat st;
  if (stat(index, &st) == 0) {
    s = open_index(ck, index, err);
  } else if (stat(single, &st) == 0) {
    s = open_single(ck, single, err);
  } else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a directory", dir);
  } else {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                    "%s: neither %s nor %s found (is this a Hugging Face safetensors checkpoint?)",
                    dir, FSDPC_HF_SINGLE_FILE, FSDPC_HF_INDEX_FILE);
  }
done:
  free(index);
  free(single);
  if (s != FSDPC_OK) {
    fsdpc__hf_ckpt_close(ck);
    return s;
  }
  *out = ck;
  return FSDPC_OK;
}

uint32_t fsdpc__hf_ckpt_count(const fsdpc_hf_ckpt *ck) { return ck->n; }

const char *fsdpc__hf_ckpt_name(const fsdpc_hf_ckpt *ck, uint32_t i) {
  return i < ck->n ? ck->e[i].name : NULL;
}

static const ck_entry *lookup(const fsdpc_hf_ckpt *ck, const char *name) {
  ck_entry key = {.name = (char *)name};
  return bsearch(&key, ck->e, ck->n, sizeof *ck->e, entry_cmp);
}

int fsdpc__hf_ckpt_has(const fsdpc_hf_ckpt *ck, const char *name) {
  return lookup(ck, name) != NULL;
}

/* The shard holding name, opened on first use. */
static fsdpc_status shard_of(fsdpc_hf_ckpt *ck, const char *name, fsdpc_st_file **f,
                             fsdpc_err *err) {
  char q[QCAP];
  const ck_entry *e = lookup(ck, name);
  if (!e)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s' not found in %s", ck->dir,
                       fsdpc__st_quote(q, sizeof q, name), ck->source);
  if (!ck->shards[e->file])
    FSDPC_TRY(fsdpc__st_open(ck->paths[e->file], &ck->shards[e->file], err));
  *f = ck->shards[e->file];
  return FSDPC_OK;
}

fsdpc_status fsdpc__hf_ckpt_find(fsdpc_hf_ckpt *ck, const char *name, const fsdpc_st_info **info,
                                 fsdpc_err *err) {
  char q[QCAP];
  fsdpc_st_file *f;
  *info = NULL;
  FSDPC_TRY(shard_of(ck, name, &f, err));
  *info = fsdpc__st_find(f, name);
  if (!*info)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: tensor '%s' not found in this file, although %s maps it here",
                       fsdpc__st_path(f), fsdpc__st_quote(q, sizeof q, name), ck->source);
  return FSDPC_OK;
}

fsdpc_status fsdpc__hf_ckpt_read_f32(fsdpc_hf_ckpt *ck, const char *name, uint64_t elem_offset,
                                     uint64_t n, float *dst, fsdpc_err *err) {
  const fsdpc_st_info *info;
  fsdpc_st_file *f;
  FSDPC_TRY(fsdpc__hf_ckpt_find(ck, name, &info, err));
  FSDPC_TRY(shard_of(ck, name, &f, err));
  return fsdpc__st_read_f32(f, name, elem_offset, n, dst, err);
}

fsdpc_status fsdpc__hf_ckpt_read_raw(fsdpc_hf_ckpt *ck, const char *name, uint64_t elem_offset,
                                     uint64_t n, void *dst, fsdpc_err *err) {
  fsdpc_st_file *f;
  FSDPC_TRY(shard_of(ck, name, &f, err));
  return fsdpc__st_read_raw(f, name, elem_offset, n, dst, err);
}

fsdpc_status fsdpc__hf_ckpt_expect(fsdpc_hf_ckpt *ck, const char *name, int32_t ndim,
                                   const int64_t *shape, fsdpc_err *err) {
  const fsdpc_st_info *info;
  fsdpc_st_file *f;
  FSDPC_TRY(fsdpc__hf_ckpt_find(ck, name, &info, err));
  FSDPC_TRY(shard_of(ck, name, &f, err));
  int same = info->ndim == ndim;
  for (int32_t d = 0; same && d < ndim; d++)
    same = info->shape[d] == shape[d];
  if (same)
    return FSDPC_OK;
  char q[QCAP], have[256], want[256];
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s' has shape %s, expected %s",
                     fsdpc__st_path(f), fsdpc__st_quote(q, sizeof q, name),
                     fsdpc__st_fmt_shape(have, sizeof have, info->shape, info->ndim),
                     fsdpc__st_fmt_shape(want, sizeof want, shape, ndim));
}

typedef struct name_file {
  const char *name, *file;
} name_file;

static int name_file_cmp(const void *a, const void *b) {
  return strcmp(((const name_file *)a)->name, ((const name_file *)b)->name);
}

fsdpc_status fsdpc__hf_index_write(const char *dir, const char *const *names,
                                   const char *const *files, uint32_t n, uint64_t total_size,
                                   fsdpc_err *err) {
  char q[QCAP];
  fsdpc_status s = FSDPC_OK;
  char *path = fsdpc__path_join(dir, FSDPC_HF_INDEX_FILE);
  name_file *nf = malloc(((size_t)n + 1) * sizeof *nf);
  cJSON *root = cJSON_CreateObject();
  char *text = NULL;
  if (!path || !nf || !root) {
    s = oom(err, dir);
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (!names[i] || !names[i][0] || !files[i] || !plain_file_name(files[i])) {
      s = fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                      "%s: index entry %u has an empty name or a "
                      "file name with a path",
                      path, i);
      goto out;
    }
    nf[i].name = names[i];
    nf[i].file = files[i];
  }
  qsort(nf, n, sizeof *nf, name_file_cmp);
  char total[32];
  snprintf(total, sizeof total, "%" PRIu64, total_size);
  cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
  cJSON_AddItemToObject(meta, "total_size", cJSON_CreateRaw(total));
  cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0 && strcmp(nf[i - 1].name, nf[i].name) == 0) {
      s = fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "%s: tensor '%s' is listed twice", path,
                      fsdpc__st_quote(q, sizeof q, nf[i].name));
      goto out;
    }
    cJSON_AddStringToObject(map, nf[i].name, nf[i].file);
  }
  text = cJSON_Print(root);
  if (!text) {
    s = oom(err, dir);
    goto out;
  }
  size_t len = strlen(text);
  text[len] = '\n'; /* replaces the NUL; len + 1 bytes are written */
  if (fsdpc__write_small_file(path, text, len + 1) != 0)
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", path, strerror(errno));
out:
  cJSON_free(text);
  cJSON_Delete(root);
  free(nf);
  free(path);
  return s;
}
