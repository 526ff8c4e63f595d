/* safetensors writer. The header is fixed by the layout alone (names,
 * shapes, dtype), so it is written first and the data can follow in any
 * order with pwrite: a checkpoint streams out one FSDP unit at a time and
 * the whole model is never held in memory. fsdpc__st_write is the same
 * machinery with all data at hand. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/dtype.h"
#include "io/fileio.h"
#include "io/safetensors.h"
#include "io/st_common.h"

#define QCAP 160

typedef struct st_slot {
  char *name;
  uint64_t numel;
  uint64_t file_offset; /* absolute offset of the tensor's first byte */
  uint64_t written;     /* elements put so far */
} st_slot;

struct fsdpc_st_writer {
  char *path;
  int fd;
  int32_t dtype;
  uint32_t elem_size;
  uint64_t file_size;
  uint32_t n;
  st_slot *t; /* (n) in layout order */
};

static int writable_dtype(int32_t dtype) {
  return dtype == FSDPC_DTYPE_F32 || dtype == FSDPC_DTYPE_BF16 || dtype == FSDPC_DTYPE_F16;
}

/* Offsets and shapes go in as raw text: cJSON prints large doubles in
 * exponent form, which strict readers (the Rust reference) reject. */
static cJSON *raw_u64(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  return cJSON_CreateRaw(buf);
}

static fsdpc_status add_metadata(cJSON *root, const char *path, const char *metadata_json,
                                 fsdpc_err *err) {
  cJSON *meta = metadata_json ? cJSON_Parse(metadata_json) : cJSON_CreateObject();
  if (!meta)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: metadata is not valid JSON: %.60s", path,
                       metadata_json);
  if (!cJSON_IsObject(meta)) {
    cJSON_Delete(meta);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: metadata must be a JSON object of strings",
                       path);
  }
  for (const cJSON *e = meta->child; e; e = e->next) {
    if (!cJSON_IsString(e)) {
      char q[QCAP];
      fsdpc__fail(err, FSDPC_INVALID_USAGE,
                  "%s: metadata key '%s' is not a string (safetensors metadata is a map of "
                  "strings)",
                  path, fsdpc__st_quote(q, sizeof q, e->string));
      cJSON_Delete(meta);
      return FSDPC_INVALID_USAGE;
    }
  }
  if (!cJSON_GetObjectItemCaseSensitive(meta, "format"))
    cJSON_AddStringToObject(meta, "format", "pt");
  cJSON_AddItemToObject(root, "__metadata__", meta);
  return FSDPC_OK;
}

static int by_name_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the layout (names unique and non-empty, shapes sane) and builds
 * the JSON header. w->t gets names, sizes and offsets relative to data. */
static fsdpc_status build_header(fsdpc_st_writer *w, const fsdpc_st_entry *layout,
                                 const char *metadata_json, char **out, fsdpc_err *err) {
  char q[QCAP];
  fsdpc_status s = FSDPC_OK;
  const char **names = NULL;
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", w->path);
  if ((s = add_metadata(root, w->path, metadata_json, err)) != FSDPC_OK)
    goto out;

  names = malloc(((size_t)w->n + 1) * sizeof *names);
  if (!names) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", w->path);
    goto out;
  }
  uint64_t off = 0;
  for (uint32_t i = 0; i < w->n; i++) {
    const fsdpc_st_entry *e = &layout[i];
    if (!e->name || !e->name[0] || strcmp(e->name, "__metadata__") == 0) {
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: entry %u has an invalid tensor name '%s'",
                      w->path, i, e->name ? e->name : "(null)");
      goto out;
    }
    if (e->ndim < 0 || e->ndim > 4) {
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s': ndim %d is outside 0..4", w->path,
                      fsdpc__st_quote(q, sizeof q, e->name), e->ndim);
      goto out;
    }
    uint64_t numel = 1, nbytes;
    int overflow = 0;
    cJSON *shape = cJSON_CreateArray();
    for (int32_t d = 0; d < e->ndim; d++) {
      if (e->shape[d] < 0)
        overflow = 2;
      else if (__builtin_mul_overflow(numel, (uint64_t)e->shape[d], &numel))
        overflow = 1;
      cJSON_AddItemToArray(shape, raw_u64((uint64_t)e->shape[d]));
    }
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)w->elem_size, &nbytes) ||
        __builtin_add_overflow(off, nbytes, &nbytes)) {
      char sh[256];
      cJSON_Delete(shape);
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s': shape %s is %s", w->path,
                      fsdpc__st_quote(q, sizeof q, e->name),
                      fsdpc__st_fmt_shape(sh, sizeof sh, e->shape, e->ndim),
                      overflow == 2 ? "negative" : "too large");
      goto out;
    }
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "dtype", fsdpc__st_dtype_name(w->dtype));
    cJSON_AddItemToObject(t, "shape", shape);
    cJSON *offs = cJSON_CreateArray();
    cJSON_AddItemToArray(offs, raw_u64(off));
    cJSON_AddItemToArray(offs, raw_u64(nbytes));
    cJSON_AddItemToObject(t, "data_offsets", offs);
    cJSON_AddItemToObject(root, e->name, t);
    w->t[i].name = strdup(e->name);
    w->t[i].numel = numel;
    w->t[i].file_offset = off; /* made absolute once the header size is known */
    names[i] = e->name;
    off = nbytes;
    if (!w->t[i].name) {
      s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", w->path);
      goto out;
    }
  }
  qsort(names, w->n, sizeof *names, by_name_cmp);
  for (uint32_t i = 1; i < w->n; i++) {
    if (strcmp(names[i - 1], names[i]) == 0) {
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s' is listed twice", w->path,
                      fsdpc__st_quote(q, sizeof q, names[i]));
      goto out;
    }
  }
  *out = cJSON_PrintUnformatted(root);
  if (!*out)
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", w->path);
  w->file_size = off; /* data bytes for now */
out:
  free(names);
  cJSON_Delete(root);
  return s;
}

static void writer_free(fsdpc_st_writer *w, int remove_file) {
  if (w->fd >= 0)
    close(w->fd);
  if (remove_file && w->fd >= 0)
    unlink(w->path);
  for (uint32_t i = 0; i < w->n; i++)
    free(w->t[i].name);
  free(w->t);
  free(w->path);
  free(w);
}

void fsdpc__st_writer_abort(fsdpc_st_writer *w) {
  if (w)
    writer_free(w, 1);
}

uint64_t fsdpc__st_writer_file_size(const fsdpc_st_writer *w) { return w->file_size; }

fsdpc_status fsdpc__st_writer_begin(const char *path, const fsdpc_st_entry *layout, uint32_t n,
                                    int32_t dtype, const char *metadata_json, fsdpc_st_writer **out,
                                    fsdpc_err *err) {
  *out = NULL;
  if (!writable_dtype(dtype))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot write dtype %d; use F32, BF16 or F16",
                       path, dtype);
  fsdpc_st_writer *w = calloc(1, sizeof *w);
  if (!w)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
  w->fd = -1;
  w->dtype = dtype;
  w->elem_size = dtype == FSDPC_DTYPE_F32 ? 4 : 2;
  w->n = n;
  w->path = strdup(path);
  w->t = calloc((size_t)n + 1, sizeof *w->t);
  fsdpc_status s;
  char *hdr = NULL;
  if (!w->path || !w->t) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
    goto fail;
  }
  if ((s = build_header(w, layout, metadata_json, &hdr, err)) != FSDPC_OK)
    goto fail;

  /* Pad with spaces to a multiple of 8 so the data section is aligned, as
   * the reference writer does. */
  size_t len = strlen(hdr), padded = (len + 7) & ~(size_t)7;
  if (padded > FSDPC_ST_MAX_HEADER) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                    "%s: header would be %zu bytes, above the 100 MiB readers accept", path,
                    padded);
    goto fail;
  }
  char *buf = malloc(8 + padded);
  if (!buf) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
    goto fail;
  }
  for (int i = 0; i < 8; i++)
    buf[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
  memcpy(buf + 8, hdr, len);
  memset(buf + 8 + len, ' ', padded - len);
  for (uint32_t i = 0; i < n; i++)
    w->t[i].file_offset += 8 + padded;
  w->file_size += 8 + padded;

  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    free(buf);
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot create: %s", path, strerror(errno));
    goto fail;
  }
  /* Size the file now so that a full disk shows up early where the file
   * system reserves blocks, and unwritten gaps read as zeros. */
  int r = fsdpc__pwrite_full(w->fd, buf, 8 + padded, 0);
  free(buf);
  if (r != 0 || ftruncate(w->fd, (off_t)w->file_size) != 0) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write the header: %s", path,
                    strerror(errno));
    goto fail;
  }
  cJSON_free(hdr);
  *out = w;
  return FSDPC_OK;
fail:
  cJSON_free(hdr);
  writer_free(w, 1);
  return s;
}

fsdpc_status fsdpc__st_writer_put(fsdpc_st_writer *w, uint32_t index, const float *data,
                                  uint64_t elem_offset, uint64_t n, fsdpc_err *err) {
  char q[QCAP];
  if (index >= w->n)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "%s: tensor index %u is past the %u in the layout", w->path, index, w->n);
  st_slot *t = &w->t[index];
  if (elem_offset > t->numel || n > t->numel - elem_offset)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "%s: tensor '%s': put of elements [%" PRIu64 ", %" PRIu64 " + %" PRIu64
                       ") is outside its %" PRIu64 " elements",
                       w->path, fsdpc__st_quote(q, sizeof q, t->name), elem_offset, elem_offset, n,
                       t->numel);
  uint64_t off = t->file_offset + elem_offset * w->elem_size;
  int r = 0;
  if (w->dtype == FSDPC_DTYPE_F32) {
    r = fsdpc__pwrite_full(w->fd, data, (size_t)(n * 4), off);
  } else {
    /* Narrow a bounded chunk at a time: no allocation per call. */
    enum { CHUNK = 8192 };
    uint16_t buf[CHUNK];
    for (uint64_t done = 0; done < n && r == 0;) {
      uint64_t k = n - done < CHUNK ? n - done : CHUNK;
      if (w->dtype == FSDPC_DTYPE_BF16)
        fsdpc__f32_to_bf16_n(data + done, buf, k);
      else
        fsdpc__f32_to_f16_n(data + done, buf, k);
      r = fsdpc__pwrite_full(w->fd, buf, (size_t)(k * 2), off + done * 2);
      done += k;
    }
  }
  if (r != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: tensor '%s': write failed: %s", w->path,
                       fsdpc__st_quote(q, sizeof q, t->name), strerror(errno));
  t->written += n;
  return FSDPC_OK;
}

fsdpc_status fsdpc__st_writer_end(fsdpc_st_writer *w, fsdpc_err *err) {
  char q[QCAP];
  fsdpc_status s = FSDPC_OK;
  for (uint32_t i = 0; i < w->n && s == FSDPC_OK; i++) {
    if (w->t[i].written != w->t[i].numel)
      s = fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                      "%s: tensor '%s': %" PRIu64 " of %" PRIu64
                      " elements were written (each must be put exactly once)",
                      w->path, fsdpc__st_quote(q, sizeof q, w->t[i].name), w->t[i].written,
                      w->t[i].numel);
  }
  if (s == FSDPC_OK && fsync(w->fd) != 0)
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: fsync failed: %s", w->path, strerror(errno));
  if (s == FSDPC_OK) {
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
      s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: close failed: %s", w->path, strerror(errno));
      unlink(w->path);
    }
  }
  writer_free(w, s != FSDPC_OK);
  return s;
}

fsdpc_status fsdpc__st_write(const char *path, const fsdpc_st_entry *entries, uint32_t n,
                             int32_t dtype, const char *metadata_json, fsdpc_err *err) {
  fsdpc_st_writer *w;
  FSDPC_TRY(fsdpc__st_writer_begin(path, entries, n, dtype, metadata_json, &w, err));
  for (uint32_t i = 0; i < n; i++) {
    uint64_t numel = w->t[i].numel;
    if (numel > 0 && !entries[i].data) {
      char q[QCAP];
      fsdpc__st_writer_abort(w);
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "%s: tensor '%s' has no data", path,
                         fsdpc__st_quote(q, sizeof q, entries[i].name));
    }
    fsdpc_status s = fsdpc__st_writer_put(w, i, entries[i].data, 0, numel, err);
    if (s != FSDPC_OK) {
      fsdpc__st_writer_abort(w);
      return s;
    }
  }
  return fsdpc__st_writer_end(w, err);
}
