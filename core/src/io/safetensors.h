/* safetensors files: a checked reader that reads byte ranges with pread, a
 * one-call writer and a streaming writer.
 *
 * Layout (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header length N, N bytes of JSON header (padded with spaces),
 * then the data section. The header maps each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]}, offsets relative to the
 * data section; an optional "__metadata__" holds a string-to-string map.
 *
 * The reader validates the whole header at open (sizes, dtypes, shapes,
 * offsets, overlaps) so that later reads cannot go out of bounds, and never
 * reads the data section except the ranges asked for: a rank loads only its
 * shards. Every error is one line naming the file (and the tensor).
 *
 * Ownership: fsdpc_st_file and fsdpc_st_writer are owned by the caller and
 * released by fsdpc__st_close / fsdpc__st_writer_end / _abort. Info
 * pointers and strings returned by the reader live until fsdpc__st_close.
 * An open file may be read from several threads at once (pread only). */
#ifndef FSDPC_IO_SAFETENSORS_H
#define FSDPC_IO_SAFETENSORS_H

#include <stdint.h>

#include "fsdpc/plugin.h"
#include "util/err.h"

#define FSDPC_ST_MAX_DIMS 8
#define FSDPC_ST_MAX_HEADER (100u * 1024u * 1024u) /* as the reference reader */

/* dtype of a tensor whose format is valid safetensors but not one of ours
 * (F64, I8, U16, F8_E4M3, ...): listed and sized, never converted. */
#define FSDPC_ST_DTYPE_OTHER (-1)

typedef struct fsdpc_st_info {
  const char *name;
  int32_t dtype;          /* FSDPC_DTYPE_* or FSDPC_ST_DTYPE_OTHER */
  const char *dtype_name; /* as in the header: "BF16", "I64", ... */
  uint32_t elem_size;     /* bytes per element */
  int32_t ndim;
  int64_t shape[FSDPC_ST_MAX_DIMS];
  uint64_t numel;
  uint64_t begin, end;  /* data_offsets, relative to the data section */
  uint64_t file_offset; /* absolute offset of the first byte in the file */
} fsdpc_st_info;

typedef struct fsdpc_st_file fsdpc_st_file;

/* Opens and validates path. On failure *out is NULL and err names the file. */
fsdpc_status fsdpc__st_open(const char *path, fsdpc_st_file **out, fsdpc_err *err);
/* Same checks over a file image in memory (tests, fuzzing); buf is borrowed
 * and must outlive the handle. label stands for the file name in errors. */
fsdpc_status fsdpc__st_open_mem(const char *label, const void *buf, uint64_t len,
                                fsdpc_st_file **out, fsdpc_err *err);
void fsdpc__st_close(fsdpc_st_file *f); /* NULL is a no-op */

const char *fsdpc__st_path(const fsdpc_st_file *f);
uint32_t fsdpc__st_count(const fsdpc_st_file *f);
/* Tensors in order of their data offsets, i < fsdpc__st_count(f). */
const fsdpc_st_info *fsdpc__st_at(const fsdpc_st_file *f, uint32_t i);
/* NULL when the file has no tensor of that name. */
const fsdpc_st_info *fsdpc__st_find(const fsdpc_st_file *f, const char *name);

/* __metadata__ entries (header order), and lookup by key (NULL if absent). */
uint32_t fsdpc__st_meta_count(const fsdpc_st_file *f);
void fsdpc__st_meta_at(const fsdpc_st_file *f, uint32_t i, const char **key, const char **value);
const char *fsdpc__st_meta_get(const fsdpc_st_file *f, const char *key);

/* Reads elements [elem_offset, elem_offset + n) of tensor `name` (flat,
 * row-major) into dst as fp32, converting BF16 and F16. Reads only those
 * bytes. Other dtypes are refused. dst: (n) floats. */
fsdpc_status fsdpc__st_read_f32(const fsdpc_st_file *f, const char *name, uint64_t elem_offset,
                                uint64_t n, float *dst, fsdpc_err *err);
/* The same elements' bytes as stored (n * elem_size bytes, no conversion),
 * in one read: a loader that widens on the device reads BF16 this way. */
fsdpc_status fsdpc__st_read_raw(const fsdpc_st_file *f, const char *name, uint64_t elem_offset,
                                uint64_t n, void *dst, fsdpc_err *err);

/* Writes a whole file: tensors in the order given, data converted from fp32
 * to dtype (FSDPC_DTYPE_F32, BF16 or F16; narrowing rounds to nearest even).
 * metadata_json is NULL or a JSON object of strings; "format": "pt" is added
 * when absent because transformers refuses files without it. Writes path in
 * place (the caller does temp + rename), checks every write and fsyncs; on
 * failure the partial file is removed. */
fsdpc_status fsdpc__st_write(const char *path, const fsdpc_st_entry *entries, uint32_t n,
                             int32_t dtype, const char *metadata_json, fsdpc_err *err);

/* Streaming writer: the header is written from a layout (names and shapes;
 * data ignored), then each tensor's data arrives in pieces, in any order,
 * with fsdpc__st_writer_put, so a checkpoint is written a unit at a time.
 * Every element must be put exactly once; end checks the counts, fsyncs and
 * frees w. end and abort always free w; on failure (or abort) the partial
 * file is removed. */
typedef struct fsdpc_st_writer fsdpc_st_writer;

fsdpc_status fsdpc__st_writer_begin(const char *path, const fsdpc_st_entry *layout, uint32_t n,
                                    int32_t dtype, const char *metadata_json, fsdpc_st_writer **out,
                                    fsdpc_err *err);
/* data: (n) fp32, elements [elem_offset, elem_offset + n) of layout[index]. */
fsdpc_status fsdpc__st_writer_put(fsdpc_st_writer *w, uint32_t index, const float *data,
                                  uint64_t elem_offset, uint64_t n, fsdpc_err *err);
fsdpc_status fsdpc__st_writer_end(fsdpc_st_writer *w, fsdpc_err *err);
void fsdpc__st_writer_abort(fsdpc_st_writer *w); /* NULL is a no-op */
/* Total file size the writer will produce (header included). */
uint64_t fsdpc__st_writer_file_size(const fsdpc_st_writer *w);

/* "F32" -> FSDPC_DTYPE_F32 and element size; -2 for an unknown name. */
int32_t fsdpc__st_dtype_parse(const char *name, uint32_t *elem_size);
const char *fsdpc__st_dtype_name(int32_t dtype); /* NULL when not F32/BF16/F16/I32/I64/U8 */

#endif
