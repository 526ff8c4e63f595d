/* Hugging Face checkpoints in a directory: either one `model.safetensors`
 * or `model.safetensors.index.json` whose "weight_map" sends each tensor
 * name to a shard file in the same directory. Shards are checked to exist
 * at open and parsed lazily, each once, on first use, so a rank that needs
 * a few tensors opens only the shards holding them.
 *
 * Not thread-safe while shards are still being opened (find/read may open
 * one); reads of tensors whose shard is open are safe in parallel. */
#ifndef FSDPC_IO_HF_CKPT_H
#define FSDPC_IO_HF_CKPT_H

#include <stdint.h>

#include "io/safetensors.h"

#define FSDPC_HF_SINGLE_FILE "model.safetensors"
#define FSDPC_HF_INDEX_FILE "model.safetensors.index.json"

typedef struct fsdpc_hf_ckpt fsdpc_hf_ckpt;

fsdpc_status fsdpc__hf_ckpt_open(const char *dir, fsdpc_hf_ckpt **out, fsdpc_err *err);
void fsdpc__hf_ckpt_close(fsdpc_hf_ckpt *ck); /* NULL is a no-op */

/* Tensor names in the checkpoint, sorted; i < count. */
uint32_t fsdpc__hf_ckpt_count(const fsdpc_hf_ckpt *ck);
const char *fsdpc__hf_ckpt_name(const fsdpc_hf_ckpt *ck, uint32_t i);
/* 1 when the checkpoint lists the tensor (no file is opened). */
int fsdpc__hf_ckpt_has(const fsdpc_hf_ckpt *ck, const char *name);

/* Looks a tensor up, opening its shard if needed. *info lives until close. */
fsdpc_status fsdpc__hf_ckpt_find(fsdpc_hf_ckpt *ck, const char *name, const fsdpc_st_info **info,
                                 fsdpc_err *err);
/* As fsdpc__st_read_f32 on the shard holding name. dst: (n) floats. */
fsdpc_status fsdpc__hf_ckpt_read_f32(fsdpc_hf_ckpt *ck, const char *name, uint64_t elem_offset,
                                     uint64_t n, float *dst, fsdpc_err *err);
/* As fsdpc__st_read_raw on the shard holding name. */
fsdpc_status fsdpc__hf_ckpt_read_raw(fsdpc_hf_ckpt *ck, const char *name, uint64_t elem_offset,
                                     uint64_t n, void *dst, fsdpc_err *err);
/* OK when the tensor exists with exactly this shape; otherwise one line
 * "<file>: tensor 'x' has shape [a, b], expected [c, d]". */
fsdpc_status fsdpc__hf_ckpt_expect(fsdpc_hf_ckpt *ck, const char *name, int32_t ndim,
                                   const int64_t *shape, fsdpc_err *err);

/* Writes <dir>/model.safetensors.index.json: {"metadata": {"total_size": N},
 * "weight_map": {names[i]: files[i]}} with keys sorted as transformers does.
 * Written in place and fsynced (the caller stages the directory). */
fsdpc_status fsdpc__hf_index_write(const char *dir, const char *const *names,
                                   const char *const *files, uint32_t n, uint64_t total_size,
                                   fsdpc_err *err);

#endif
