/* Offline checkpoint conversion (convert.c), behind `fsdpc convert`. */
#ifndef FSDPC_CKPT_CONVERT_H
#define FSDPC_CKPT_CONVERT_H

#include <stdint.h>

#include "util/err.h"

typedef struct fsdpc_convert_opts {
  const char *src;      /* a checkpoint folder of any installed format */
  const char *dst;      /* the folder to create (must not exist) */
  const char *to;       /* target statedict plugin: "full" or "sharded" */
  int32_t dtype;        /* FSDPC_DTYPE_F32 or BF16 (full) */
  int world;            /* target world size (sharded) */
  const char *strategy; /* target strategy (sharded), e.g. "FULL_SHARD" */
  int hybrid_shard_size;
  /* The run's config; NULL = src/config.yaml, else the HF config.json in src. */
  const char *config;
  const char *const *overrides; /* "section.key=value" applied to it */
  int n_overrides;
} fsdpc_convert_opts;

fsdpc_status fsdpc__convert(const fsdpc_convert_opts *o, fsdpc_err *err);

#endif
