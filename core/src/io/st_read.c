/* safetensors reader: validate the header once at open, then serve byte
 * ranges with pread. The data section is never read as a whole: a rank
 * touches only the bytes of its own shards. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/dtype.h"
#include "io/fileio.h"
#include "io/safetensors.h"
#include "io/st_common.h"

struct fsdpc_st_file {
  char *path;
  int fd;             /* -1 when memory-backed */
  const uint8_t *mem; /* the whole file image when memory-backed */
  uint64_t file_size;
  uint64_t data_start; /* 8 + header length */
  uint64_t data_size;
  uint32_t n;
  fsdpc_st_info *t;        /* (n) sorted by data offset */
  fsdpc_st_info **by_name; /* (n) pointers into t, sorted by name */
  uint32_t n_meta;
  char **meta; /* (2 * n_meta) key, value, key, value ... */
};

#define QCAP 160 /* room for a quoted tensor name in an error */

/* ---------------------------------------------------------------------- */
/* Header validation                                                       */

/* JSON numbers arrive as doubles: accept only whole numbers that a double
 * represents exactly, so that no offset is silently rounded. */
static int json_uint(const cJSON *j, uint64_t *out, int *negative) {
  *negative = 0;
  if (!cJSON_IsNumber(j))
    return 0;
  double d = j->valuedouble;
  if (!isfinite(d) || d != floor(d))
    return 0;
  if (d < 0) {
    *negative = 1;
    return 0;
  }
  if (d > 9007199254740992.0)
    return 0; /* 2^53 */
  *out = (uint64_t)d;
  return 1;
}

static fsdpc_status tensor_fail(fsdpc_err *err, const char *path, const char *name, const char *fmt,
                                ...) FSDPC_PRINTF(4, 5);
static fsdpc_status tensor_fail(fsdpc_err *err, const char *path, const char *name, const char *fmt,
                                ...) {
  char q[QCAP], what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s': %s", path,
                     fsdpc__st_quote(q, sizeof q, name), what);
}

static fsdpc_status parse_tensor(fsdpc_st_file *f, const cJSON *j, fsdpc_st_info *t,
                                 fsdpc_err *err) {
  const char *name = j->string;
  char sh[256];
  if (name[0] == '\0')
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: a tensor has an empty name", f->path);
  if (!cJSON_IsObject(j))
    return tensor_fail(err, f->path, name, "entry is not a JSON object");

  const cJSON *jd = cJSON_GetObjectItemCaseSensitive(j, "dtype");
  if (!cJSON_IsString(jd))
    return tensor_fail(err, f->path, name, "missing string field \"dtype\"");
  t->dtype_name = fsdpc__st_dtype_canon(jd->valuestring);
  if (!t->dtype_name) {
    char q[QCAP];
    return tensor_fail(err, f->path, name,
                       "dtype '%s' is unknown (expected F32, BF16, F16, I64, I32, U8, ...)",
                       fsdpc__st_quote(q, 48, jd->valuestring));
  }
  t->dtype = fsdpc__st_dtype_parse(t->dtype_name, &t->elem_size);

  const cJSON *js = cJSON_GetObjectItemCaseSensitive(j, "shape");
  if (!cJSON_IsArray(js))
    return tensor_fail(err, f->path, name, "missing array field \"shape\"");
  int nd = cJSON_GetArraySize(js);
  if (nd > FSDPC_ST_MAX_DIMS)
    return tensor_fail(err, f->path, name, "shape has %d dimensions; at most %d are supported", nd,
                       FSDPC_ST_MAX_DIMS);
  t->ndim = nd;
  uint64_t numel = 1;
  int d = 0, overflow = 0;
  for (const cJSON *e = js->child; e; e = e->next, d++) {
    uint64_t v;
    int neg;
    if (!json_uint(e, &v, &neg)) {
      if (neg)
        return tensor_fail(err, f->path, name, "shape has a negative dimension %.0f at index %d",
                           e->valuedouble, d);
      return tensor_fail(err, f->path, name,
                         "shape entry %d is not a non-negative integer below 2^53", d);
    }
    t->shape[d] = (int64_t)v;
    if (__builtin_mul_overflow(numel, v, &numel))
      overflow = 1;
  }
  uint64_t nbytes = 0;
  if (overflow || __builtin_mul_overflow(numel, (uint64_t)t->elem_size, &nbytes))
    return tensor_fail(err, f->path, name, "shape %s overflows a 64-bit byte count",
                       fsdpc__st_fmt_shape(sh, sizeof sh, t->shape, t->ndim));
  t->numel = numel;

  const cJSON *jo = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
  uint64_t b, e;
  int neg;
  if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || !json_uint(jo->child, &b, &neg) ||
      !json_uint(jo->child->next, &e, &neg))
    return tensor_fail(err, f->path, name,
                       "\"data_offsets\" must be [begin, end] with non-negative integers");
  if (b > e)
    return tensor_fail(err, f->path, name, "data_offsets [%" PRIu64 ", %" PRIu64 "] are reversed",
                       b, e);
  if (e > f->data_size)
    return tensor_fail(err, f->path, name,
                       "data_offsets [%" PRIu64 ", %" PRIu64 "] exceed the data section (%" PRIu64
                       " bytes); the file may be truncated",
                       b, e, f->data_size);
  if (e - b != nbytes)
    return tensor_fail(
        err, f->path, name,
        "data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes, but %s %s needs %" PRIu64,
        b, e, e - b, t->dtype_name, fsdpc__st_fmt_shape(sh, sizeof sh, t->shape, t->ndim), nbytes);
  t->begin = b;
  t->end = e;
  t->file_offset = f->data_start + b;
  t->name = strdup(name);
  if (!t->name)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", f->path);
  return FSDPC_OK;
}

static fsdpc_status parse_metadata(fsdpc_st_file *f, const cJSON *j, fsdpc_err *err) {
  if (f->meta)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: header has two \"__metadata__\" entries",
                       f->path);
  if (!cJSON_IsObject(j))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: \"__metadata__\" must be a JSON object of strings", f->path);
  uint32_t n = (uint32_t)cJSON_GetArraySize(j);
  f->meta = calloc(2 * (size_t)n + 1, sizeof *f->meta);
  if (!f->meta)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", f->path);
  for (const cJSON *e = j->child; e; e = e->next) {
    char q[QCAP];
    if (!cJSON_IsString(e))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: \"__metadata__\" key '%s' is not a string (metadata is a map of "
                         "strings)",
                         f->path, fsdpc__st_quote(q, sizeof q, e->string));
    f->meta[2 * f->n_meta] = strdup(e->string);
    f->meta[2 * f->n_meta + 1] = strdup(e->valuestring);
    f->n_meta++;
    if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", f->path);
  }
  return FSDPC_OK;
}

static int by_offset(const void *a, const void *b) {
  const fsdpc_st_info *x = a, *y = b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return 0;
}

static int by_name_cmp(const void *a, const void *b) {
  const fsdpc_st_info *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

static fsdpc_status index_tensors(fsdpc_st_file *f, fsdpc_err *err) {
  char q1[QCAP], q2[QCAP];
  if (f->n == 0)
    return FSDPC_OK;
  qsort(f->t, f->n, sizeof *f->t, by_offset);
  f->by_name = malloc(f->n * sizeof *f->by_name);
  if (!f->by_name)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", f->path);
  for (uint32_t i = 0; i < f->n; i++)
    f->by_name[i] = &f->t[i];
  qsort(f->by_name, f->n, sizeof *f->by_name, by_name_cmp);
  for (uint32_t i = 1; i < f->n; i++)
    if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s' appears twice in the header",
                         f->path, fsdpc__st_quote(q1, sizeof q1, f->by_name[i]->name));
  /* Compare each non-empty tensor with the furthest-reaching one before it,
   * so that an empty tensor in between cannot hide an overlap. */
  const fsdpc_st_info *reach = NULL;
  for (uint32_t i = 0; i < f->n; i++) {
    const fsdpc_st_info *b = &f->t[i];
    if (b->end == b->begin)
      continue;
    if (reach && reach->end > b->begin)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                         "] overlap tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
                         f->path, fsdpc__st_quote(q1, sizeof q1, b->name), b->begin, b->end,
                         fsdpc__st_quote(q2, sizeof q2, reach->name), reach->begin, reach->end);
    if (!reach || b->end > reach->end)
      reach = b;
  }
  return FSDPC_OK;
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* hdr: (hlen) bytes of JSON header; f->data_size and data_start are set. */
static fsdpc_status parse_header(fsdpc_st_file *f, const char *hdr, uint64_t hlen, fsdpc_err *err) {
  if (hlen < 2 || hdr[0] != '{')
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: header does not start with '{': not a safetensors file", f->path);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
  if (!root) {
    uint64_t at = end && end >= hdr ? (uint64_t)(end - hdr) : 0;
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: header is not valid JSON (error near byte %" PRIu64 " of %" PRIu64 ")",
                       f->path, at, hlen);
  }
  fsdpc_status s = FSDPC_OK;
  for (const char *p = end; p < hdr + hlen; p++) {
    if (!is_json_space(*p)) {
      s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                      "%s: header has bytes after its JSON object (at byte %" PRIu64
                      "); only space padding is allowed",
                      f->path, (uint64_t)(p - hdr));
      goto out;
    }
  }
  if (!cJSON_IsObject(root)) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: header is not a JSON object", f->path);
    goto out;
  }
  uint32_t n = 0;
  for (const cJSON *e = root->child; e; e = e->next)
    if (strcmp(e->string, "__metadata__") != 0)
      n++;
  f->t = calloc((size_t)n + 1, sizeof *f->t);
  if (!f->t) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", f->path);
    goto out;
  }
  for (const cJSON *e = root->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) {
      s = parse_metadata(f, e, err);
    } else {
      s = parse_tensor(f, e, &f->t[f->n], err);
      if (s == FSDPC_OK)
        f->n++;
    }
    if (s != FSDPC_OK)
      goto out;
  }
  s = index_tensors(f, err);
out:
  cJSON_Delete(root);
  return s;
}

/* Checks the 8-byte prefix against the file size and fills the layout. */
static fsdpc_status check_prefix(fsdpc_st_file *f, const uint8_t *prefix, fsdpc_err *err) {
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = (hlen << 8) | prefix[i];
  if (hlen > FSDPC_ST_MAX_HEADER)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: header length %" PRIu64
                       " exceeds the 100 MiB limit: the file is corrupt or not safetensors",
                       f->path, hlen);
  if (hlen > f->file_size - 8)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: header length %" PRIu64 " exceeds the file size (%" PRIu64
                       " bytes): the file is truncated or not safetensors",
                       f->path, hlen, f->file_size);
  f->data_start = 8 + hlen;
  f->data_size = f->file_size - f->data_start;
  return FSDPC_OK;
}

static fsdpc_status check_size(const fsdpc_st_file *f, fsdpc_err *err) {
  if (f->file_size == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: file is empty (0 bytes): not a safetensors file", f->path);
  if (f->file_size < 8)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: file is %" PRIu64
                       " bytes, too short for the 8-byte header length: truncated",
                       f->path, f->file_size);
  return FSDPC_OK;
}

static fsdpc_st_file *new_file(const char *path) {
  fsdpc_st_file *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  f->fd = -1;
  f->path = strdup(path);
  if (!f->path) {
    free(f);
    return NULL;
  }
  return f;
}

void fsdpc__st_close(fsdpc_st_file *f) {
  if (!f)
    return;
  if (f->fd >= 0)
    close(f->fd);
  for (uint32_t i = 0; i < f->n; i++)
    free((char *)f->t[i].name);
  free(f->t);
  free(f->by_name);
  if (f->meta)
    for (uint32_t i = 0; i < 2 * f->n_meta; i++)
      free(f->meta[i]);
  free(f->meta);
  free(f->path);
  free(f);
}

fsdpc_status fsdpc__st_open(const char *path, fsdpc_st_file **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_st_file *f = new_file(path);
  if (!f)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
  fsdpc_status s;
  char *hdr = NULL;
  f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
  if (f->fd < 0) {
    s = fsdpc__fail(err, errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                    "%s: cannot open: %s", path, strerror(errno));
    goto fail;
  }
  struct stat st;
  if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a regular file", path);
    goto fail;
  }
  f->file_size = (uint64_t)st.st_size;
  if ((s = check_size(f, err)) != FSDPC_OK)
    goto fail;
  uint8_t prefix[8];
  if (fsdpc__pread_full(f->fd, prefix, 8, 0) != 0) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot read the header length: %s", path,
                    strerror(errno));
    goto fail;
  }
  if ((s = check_prefix(f, prefix, err)) != FSDPC_OK)
    goto fail;
  uint64_t hlen = f->data_start - 8;
  hdr = malloc(hlen + 1);
  if (!hdr) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory for a %" PRIu64 "-byte header",
                    path, hlen);
    goto fail;
  }
  int r = fsdpc__pread_full(f->fd, hdr, hlen, 8);
  if (r != 0) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot read the header: %s", path,
                    r > 0 ? "file shrank while reading" : strerror(errno));
    goto fail;
  }
  hdr[hlen] = '\0';
  if ((s = parse_header(f, hdr, hlen, err)) != FSDPC_OK)
    goto fail;
  free(hdr);
  *out = f;
  return FSDPC_OK;
fail:
  free(hdr);
  fsdpc__st_close(f);
  return s;
}

fsdpc_status fsdpc__st_open_mem(const char *label, const void *buf, uint64_t len,
                                fsdpc_st_file **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_st_file *f = new_file(label);
  if (!f)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", label);
  fsdpc_status s;
  f->mem = buf;
  f->file_size = len;
  if ((s = check_size(f, err)) != FSDPC_OK)
    goto fail;
  if ((s = check_prefix(f, f->mem, err)) != FSDPC_OK)
    goto fail;
  if ((s = parse_header(f, (const char *)f->mem + 8, f->data_start - 8, err)) != FSDPC_OK)
    goto fail;
  *out = f;
  return FSDPC_OK;
fail:
  fsdpc__st_close(f);
  return s;
}

/* ---------------------------------------------------------------------- */
/* Queries                                                                  */

const char *fsdpc__st_path(const fsdpc_st_file *f) { return f->path; }
uint32_t fsdpc__st_count(const fsdpc_st_file *f) { return f->n; }

const fsdpc_st_info *fsdpc__st_at(const fsdpc_st_file *f, uint32_t i) {
  return i < f->n ? &f->t[i] : NULL;
}

const fsdpc_st_info *fsdpc__st_find(const fsdpc_st_file *f, const char *name) {
  uint32_t lo = 0, hi = f->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    int c = strcmp(f->by_name[mid]->name, name);
    if (c == 0)
      return f->by_name[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

uint32_t fsdpc__st_meta_count(const fsdpc_st_file *f) { return f->n_meta; }

void fsdpc__st_meta_at(const fsdpc_st_file *f, uint32_t i, const char **key, const char **value) {
  *key = i < f->n_meta ? f->meta[2 * i] : NULL;
  *value = i < f->n_meta ? f->meta[2 * i + 1] : NULL;
}

const char *fsdpc__st_meta_get(const fsdpc_st_file *f, const char *key) {
  for (uint32_t i = 0; i < f->n_meta; i++)
    if (strcmp(f->meta[2 * i], key) == 0)
      return f->meta[2 * i + 1];
  return NULL;
}

/* ---------------------------------------------------------------------- */
/* Reads                                                                    */

static fsdpc_status read_bytes(const fsdpc_st_file *f, const fsdpc_st_info *t, void *dst,
                               uint64_t len, uint64_t off, fsdpc_err *err) {
  if (len == 0) return FSDPC_OK;
  if (f->mem) {
    memcpy(dst, f->mem + off, (size_t)len);
    return FSDPC_OK;
  }
  int r = fsdpc__pread_full(f->fd, dst, (size_t)len, off);
  if (r == 0)
    return FSDPC_OK;
  char q[QCAP];
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "%s: tensor '%s': read of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s",
                     f->path, fsdpc__st_quote(q, sizeof q, t->name), len, off,
                     r > 0 ? "the file is shorter than when it was opened" : strerror(errno));
}

/* The tensor called name, or a one-line error. */
static fsdpc_status find_tensor(const fsdpc_st_file *f, const char *name, const fsdpc_st_info **t,
                                fsdpc_err *err) {
  char q[QCAP];
  *t = fsdpc__st_find(f, name);
  if (!*t)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: tensor '%s' not found", f->path,
                       fsdpc__st_quote(q, sizeof q, name));
  return FSDPC_OK;
}

/* Elements [elem_offset, elem_offset + n) lie inside tensor t. */
static fsdpc_status check_range(const fsdpc_st_file *f, const fsdpc_st_info *t, const char *name,
                                uint64_t elem_offset, uint64_t n, fsdpc_err *err) {
  char q[QCAP];
  if (elem_offset > t->numel || n > t->numel - elem_offset)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: tensor '%s': elements [%" PRIu64 ", %" PRIu64 " + %" PRIu64
                       ") are outside its %" PRIu64 " elements",
                       f->path, fsdpc__st_quote(q, sizeof q, name), elem_offset, elem_offset, n,
                       t->numel);
  return FSDPC_OK;
}

fsdpc_status fsdpc__st_read_f32(const fsdpc_st_file *f, const char *name, uint64_t elem_offset,
                                uint64_t n, float *dst, fsdpc_err *err) {
  const fsdpc_st_info *t;
  FSDPC_TRY(find_tensor(f, name, &t, err));
  if (t->dtype != FSDPC_DTYPE_F32 && t->dtype != FSDPC_DTYPE_BF16 && t->dtype != FSDPC_DTYPE_F16)
    return tensor_fail(err, f->path, name, "dtype %s cannot be read as float (F32, BF16, F16)",
                       t->dtype_name);
  FSDPC_TRY(check_range(f, t, name, elem_offset, n, err));
  uint64_t off = t->file_offset + elem_offset * t->elem_size;
  if (t->dtype == FSDPC_DTYPE_F32)
    return read_bytes(f, t, dst, n * 4, off, err);

  /* 16-bit formats: one read of the raw values into the upper half of dst,
   * then widen in place from the front: element i's float (bytes 4i..4i+3)
   * only overwrites raw values before i, already consumed. */
  unsigned char *b = (unsigned char *)dst; /* byte copies: the halves alias */
  FSDPC_TRY(read_bytes(f, t, b + n * 2, n * 2, off, err));
  int bf16 = t->dtype == FSDPC_DTYPE_BF16;
  for (uint64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, b + n * 2 + i * 2, 2);
    float v = bf16 ? fsdpc__bf16_to_f32(h) : fsdpc__f16_to_f32(h);
    memcpy(b + i * 4, &v, 4);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__st_read_raw(const fsdpc_st_file *f, const char *name, uint64_t elem_offset,
                                uint64_t n, void *dst, fsdpc_err *err) {
  const fsdpc_st_info *t;
  FSDPC_TRY(find_tensor(f, name, &t, err));
  FSDPC_TRY(check_range(f, t, name, elem_offset, n, err));
  return read_bytes(f, t, dst, n * t->elem_size, t->file_offset + elem_offset * t->elem_size, err);
}
