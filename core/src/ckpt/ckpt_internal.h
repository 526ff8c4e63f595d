/* Private to core/src/ckpt: the host object behind fsdpc_sd_host. */
#ifndef FSDPC_CKPT_INTERNAL_H
#define FSDPC_CKPT_INTERNAL_H

#include "ckpt/ckpt.h"
#include "ckpt/export.h"
#include "io/hf_ckpt.h"
#include "io/safetensors.h"

/* A file of a checkpoint: name relative to the checkpoint folder. */
typedef struct fsdpc_ckpt_file {
  char *name;
  uint32_t crc;
  uint64_t size;
  int verified;
} fsdpc_ckpt_file;

/* An open file (or HF folder) during a load. */
typedef struct fsdpc_ckpt_open {
  char *path;
  fsdpc_st_file *st;
  fsdpc_hf_ckpt *hf;
} fsdpc_ckpt_open;

struct fsdpc_ckpt_host {
  fsdpc_sd_host sd; /* what the plugin sees; sd.ctx == this */
  fsdpc_ckpt_backend be;
  fsdpc_model_shape shape;
  fsdpc_sd_unit *units;
  const fsdpc_sd_unit **unit_ptrs;
  fsdpc_sd_tensor *tensors;
  const fsdpc_sd_tensor **tensor_ptrs;
  char **slot_names;
  uint32_t n_slots;
  char strategy[32];
  char *state, *loaded_state, *config_yaml;
  char *loss_marker;  /* ckpt/diverge.h: written with the next save (rank 0) */
  int32_t save_dtype; /* torch_dtype of config.json */

  /* The last callback error (reported instead of the plugin's message). */
  fsdpc_err err;
  int has_err;

  char *dir;                /* the folder being written (staging) or read */
  fsdpc_ckpt_file *written; /* files this rank wrote in the current save */
  int n_written, cap_written;
  fsdpc_ckpt_file *manifest; /* every rank's checksums, on load */
  int n_manifest;
  int verify; /* 0: no manifest (not written by fsdpc) */
  fsdpc_ckpt_open *cache;
  int n_cache;
  int kill_after;
  fsdpc_export_src export_src; /* where config.json's extras come from */
  int allow_nonfinite; /* verify.c: load NaN/Inf without refusing */
};

fsdpc_status fsdpc__ckpt_cb_fail(fsdpc_ckpt_host *h, fsdpc_status st);
fsdpc_status fsdpc__ckpt_verify(fsdpc_ckpt_host *h, const char *path, fsdpc_err *err);
void fsdpc__ckpt_cache_clear(fsdpc_ckpt_host *h);
void fsdpc__ckpt_files_clear(fsdpc_ckpt_file **files, int *n);

/* files.c: checksums.rank-NNNNN.txt, one line per file: "crc32hex size name". */
fsdpc_status fsdpc__ckpt_manifest_write(const char *dir, int rank, const fsdpc_ckpt_file *files,
                                        int n, fsdpc_err *err);
/* Reads every checksums.rank-*.txt in dir into *files (*n 0 when none). */
fsdpc_status fsdpc__ckpt_manifest_read(const char *dir, fsdpc_ckpt_file **files, int *n,
                                       fsdpc_err *err);

/* state.c: a Hugging Face LlamaConfig config.json for shape (malloc'd). */
fsdpc_status fsdpc__ckpt_hf_config_json(const fsdpc_model_shape *shape, int32_t dtype, char **out,
                                        fsdpc_err *err);

#endif
