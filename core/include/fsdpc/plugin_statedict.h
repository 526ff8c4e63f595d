/* fsdpc plugin ABI: the statedict kind. Part of fsdpc/plugin.h, which
 * includes it where the kind's section stands (after the wrap kind): a
 * plugin includes fsdpc/plugin.h, never this file alone. */
#ifndef FSDPC_PLUGIN_STATEDICT_H
#define FSDPC_PLUGIN_STATEDICT_H

#ifndef FSDPC_PLUGIN_H
#error "include <fsdpc/plugin.h>, not fsdpc/plugin_statedict.h"
#endif

/* ====================================================================== */
/* Kind: statedict. Checkpoint formats, driven through host callbacks: the  */
/* host owns the shards and the collectives; the plugin owns the format.    */
/* ====================================================================== */

typedef struct fsdpc_sd_tensor {
  uint32_t struct_size;
  const char *name; /* HF name */
  int32_t ndim;
  int64_t shape[4];
  uint32_t unit;        /* FSDP unit holding it */
  uint64_t unit_offset; /* element offset inside the unit's flat buffer */
  uint64_t numel;
} fsdpc_sd_tensor;

typedef struct fsdpc_sd_unit {
  uint32_t struct_size;
  const char *name;      /* e.g. "layers.3" */
  uint64_t flat_numel;   /* padded length of the full flat buffer */
  uint64_t shard_numel;  /* flat_numel / shard group size */
  uint64_t shard_offset; /* this rank's first element */
} fsdpc_sd_unit;

/* One tensor to write into a safetensors file; data is fp32 host memory. */
typedef struct fsdpc_st_entry {
  uint32_t struct_size;
  const char *name;
  int32_t ndim;
  int64_t shape[4];
  const float *data;
} fsdpc_st_entry;

enum { FSDPC_SD_SLOT_PARAM = -1 }; /* slot index of master params */

typedef struct fsdpc_sd_host {
  uint32_t struct_size;
  void *ctx;
  int32_t rank, world_size;       /* the whole job */
  int32_t shard_rank, shard_size; /* within this rank's shard group */
  int32_t replica_rank, replica_size;
  uint32_t n_units, n_tensors, n_slots;
  const fsdpc_sd_unit *const *units;
  const fsdpc_sd_tensor *const *tensors;
  const char *const *slot_names; /* optimizer state slots */
  const char *strategy;          /* "FULL_SHARD", ... */

  /* This rank's fp32 shard of a unit (host memory; staged from the device
   * by the host when needed). slot = FSDPC_SD_SLOT_PARAM or 0..n_slots-1.
   * Writable during load. */
  float *(*shard_ptr)(void *ctx, uint32_t unit, int32_t slot);
  /* Collective over the shard group: rank `root` of the group receives the
   * full flat buffer of the unit (flat_numel floats) in full. */
  int32_t (*gather_unit)(void *ctx, uint32_t unit, int32_t slot, int32_t root, float *full);
  int32_t (*barrier)(void *ctx);
  /* Collective over the job: *ok becomes the AND of every rank's *ok, so
   * that all ranks agree whether a save or load succeeded. */
  int32_t (*agree)(void *ctx, int32_t *ok);
  /* Trainer state (step, schedule, RNG, data position, config hash, model
   * config) as a JSON object; the host owns the string. */
  const char *(*state_json)(void *ctx);
  /* Restores trainer state from JSON written by state_json. */
  int32_t (*set_state_json)(void *ctx, const char *json);
  /* Writes a Hugging Face config.json for the model to path. */
  int32_t (*write_hf_config)(void *ctx, const char *path);
  /* Writes a safetensors file; tensors are stored as dtype (F32/BF16). */
  int32_t (*st_write)(void *ctx, const char *path, const fsdpc_st_entry *entries, uint32_t n,
                      int32_t dtype, const char *metadata_json);
  /* Reads n elements starting at elem_offset of tensor `name` in a
   * safetensors file, converted to fp32, without reading the rest. */
  int32_t (*st_read)(void *ctx, const char *path, const char *name, uint64_t elem_offset,
                     uint64_t n, float *dst);

  /* Appended after the first 1.0 fields (check with FSDPC_HAS_FIELD). When a host callback
   * fails it records its own one-line message; the plugin just returns the
   * status (calling set_error too is harmless: the host's message wins). */

  /* Streaming safetensors writer, so that a consolidated checkpoint never
   * holds more than one unit: begin writes the header from the layout
   * (entries' data ignored) and gives a handle; put writes elements
   * [elem_offset, elem_offset + n) of layout[index] (fp32 in, stored as
   * dtype) in any order; end checks that every element came, fsyncs and
   * closes; abort removes the partial file. end and abort free the handle. */
  int32_t (*st_begin)(void *ctx, const char *path, const fsdpc_st_entry *layout, uint32_t n,
                      int32_t dtype, const char *metadata_json, void **handle);
  int32_t (*st_put)(void *ctx, void *handle, uint32_t index, const float *data,
                    uint64_t elem_offset, uint64_t n);
  int32_t (*st_end)(void *ctx, void *handle);
  void (*st_abort)(void *ctx, void *handle);
  /* Writes a small file (metadata) in full and fsyncs it. Every file a
   * plugin writes must go through st_write, st_begin..st_end or write_file:
   * the host records a checksum of each and verifies it on load. */
  int32_t (*write_file)(void *ctx, const char *path, const void *data, uint64_t len);
  /* Reads a whole small file (at most max bytes), checksum-verified; *out is
   * NUL-terminated and freed with fsdpc_host_api.free. */
  int32_t (*read_file)(void *ctx, const char *path, uint64_t max, char **out, uint64_t *len);
  /* Sizes of the tensor `name` in a safetensors file (or an HF folder, when
   * path is a directory): ndim and shape; FSDPC_INVALID_USAGE if absent. */
  int32_t (*st_shape)(void *ctx, const char *path, const char *name, int32_t *ndim,
                      int64_t shape[4]);
} fsdpc_sd_host;

typedef struct fsdpc_sd_save_opts {
  uint32_t struct_size;
  int32_t dtype;            /* FSDPC_DTYPE_F32 or BF16 for weights */
  int32_t with_optimizer;   /* 1 = include optimizer state */
  uint64_t max_shard_bytes; /* split files above this (full format); 0 = plugin default */
} fsdpc_sd_save_opts;

typedef struct fsdpc_statedict_v1 {
  uint32_t struct_size;
  /* (optional) OK if dir holds a checkpoint of this format. */
  int32_t (*probe)(const char *dir);
  /* Collective: every rank calls it. dir exists and is empty. */
  int32_t (*save)(const fsdpc_opts *opts, const fsdpc_sd_host *host, const char *dir,
                  const fsdpc_sd_save_opts *save_opts);
  /* Collective: fills every rank's shards (and optimizer state and trainer
   * state when present and with_optimizer is set) from dir. */
  int32_t (*load)(const fsdpc_opts *opts, const fsdpc_sd_host *host, const char *dir,
                  int32_t with_optimizer);

  /* Appended in 1.1: the same three with the call context (call->opts
   * replaces opts). A 1.1 host calls these instead when set; save and load
   * may then be NULL (one of each pair must be set). */
  int32_t (*probe_call)(const fsdpc_call *call, const char *dir); /* (optional) */
  int32_t (*save_call)(const fsdpc_call *call, const fsdpc_sd_host *host, const char *dir,
                       const fsdpc_sd_save_opts *save_opts);
  int32_t (*load_call)(const fsdpc_call *call, const fsdpc_sd_host *host, const char *dir,
                       int32_t with_optimizer);
} fsdpc_statedict_v1;

#endif
