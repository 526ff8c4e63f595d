/* Checkpoints: the host side of the statedict plugins.
 *
 * A statedict plugin owns a format; this folder owns everything around it:
 * - host.c: the fsdpc_sd_host callbacks over a "backend" (the live FSDP
 *   engine, or plain buffers for offline conversion), including the record
 *   of every file written and the checksum check of every file read;
 * - files.c: staging (write into <root>/.tmp-<name>, fsync, rename),
 *   keeping the last K, finding the latest, checksum manifests;
 * - state.c: the trainer state JSON (step, schedule, data position, seeds,
 *   config hash, model shape) and the Hugging Face config.json;
 * - train.c: the training hooks (resume, periodic and final saves, the
 *   SIGTERM/SIGUSR1 stop);
 * - convert.c: offline conversion between formats at any world size.
 *
 * Folder layout under checkpoint.dir (docs/checkpoints.md):
 *   step-000120/   an intermediate checkpoint (sharded by default)
 *   final/         the checkpoint written at the end of training (full)
 *   .tmp-<name>/   a save in progress; never loaded, removed by the next save
 * Every checkpoint folder holds config.yaml (the resolved config) and one
 * checksums.rank-NNNNN.txt per rank that wrote files. */
#ifndef FSDPC_CKPT_CKPT_H
#define FSDPC_CKPT_CKPT_H

#include <stdint.h>

#include "fsdp/engine.h"
#include "model/lora.h"
#include "plugin/registry.h"

/* What the host callbacks run on. */
typedef struct fsdpc_ckpt_backend {
  void *ctx;
  /* This rank's fp32 shard of unit u (slot FSDPC_SD_SLOT_PARAM or 0..). */
  float *(*shard)(void *ctx, int u, int slot);
  /* Collective over the shard group; full (flat_numel) used on root only. */
  fsdpc_status (*gather)(void *ctx, int u, int slot, int root, float *full, fsdpc_err *err);
  /* Collective over the job: *ok becomes the AND over ranks. */
  fsdpc_status (*agree)(void *ctx, int *ok, fsdpc_err *err);
  /* (optional) After a plugin's save (loaded 0) or successful load (loaded
   * 1): a backend that staged shards in host memory syncs and frees them. */
  fsdpc_status (*done)(void *ctx, int loaded, fsdpc_err *err);
} fsdpc_ckpt_backend;

typedef struct fsdpc_ckpt_host_opts {
  const fsdpc_model_shape *shape;
  const fsdpc_param_info *params; /* (n_params) module order */
  int n_params;
  const int *param_unit;        /* (n_params) */
  const uint64_t *param_offset; /* (n_params) element offset in the unit's flat buffer */
  const fsdpc_unit *units;      /* (n_units) sizes and shard_offset of this rank */
  int n_units;
  int rank, world_size, shard_rank, shard_size, replica_rank, replica_size;
  const char *strategy; /* "FULL_SHARD", ... */
  uint32_t n_slots;
  const char *const *slot_names; /* (n_slots) */
  fsdpc_ckpt_backend backend;
} fsdpc_ckpt_host_opts;

typedef struct fsdpc_ckpt_host fsdpc_ckpt_host;

fsdpc_status fsdpc__ckpt_host_create(const fsdpc_ckpt_host_opts *o, fsdpc_ckpt_host **out,
                                     fsdpc_err *err);
void fsdpc__ckpt_host_destroy(fsdpc_ckpt_host *h);
/* Host options describing a live engine (arrays owned by *keep, freed with
 * fsdpc__ckpt_engine_opts_free). */
fsdpc_status fsdpc__ckpt_engine_opts(fsdpc_engine *e, const fsdpc_model_shape *shape,
                                     fsdpc_ckpt_host_opts *o, void **keep, fsdpc_err *err);
void fsdpc__ckpt_engine_opts_free(void *keep);
/* The same over a view of the engine's units (LoRA): ALL, TRAINABLE (the
 * adapters: what LoRA's checkpoints hold), or MERGED (the frozen base with
 * each adapter merged in, W + s B A: the merged export; no optimizer
 * slots). lora is needed for MERGED only. */
enum { FSDPC_CKPT_VIEW_ALL = 0, FSDPC_CKPT_VIEW_TRAINABLE = 1, FSDPC_CKPT_VIEW_MERGED = 2 };
fsdpc_status fsdpc__ckpt_engine_opts_view(fsdpc_engine *e, const fsdpc_model_shape *shape,
                                          const fsdpc_lora *lora, int view, fsdpc_ckpt_host_opts *o,
                                          void **keep, fsdpc_err *err);

/* Trainer state handed to the plugin on save (copied), and the one it gave
 * back on load (NULL when the checkpoint had none; owned by h). */
fsdpc_status fsdpc__ckpt_host_set_state(fsdpc_ckpt_host *h, const char *json, fsdpc_err *err);
const char *fsdpc__ckpt_host_loaded_state(const fsdpc_ckpt_host *h);
/* The resolved config written as config.yaml into each checkpoint (copied;
 * NULL = none). */
fsdpc_status fsdpc__ckpt_host_set_config_yaml(fsdpc_ckpt_host *h, const char *yaml, fsdpc_err *err);
/* The divergence marker (ckpt/diverge.h) rank 0 writes into the next saves;
 * takes json (malloc'd; NULL: none). save.c */
void fsdpc__ckpt_host_set_loss_marker(fsdpc_ckpt_host *h, char *json);
/* A full (HF) save also writes generation_config.json and the tokenizer
 * files, and merges config.json into the source's, from the sources c
 * names (ckpt/export.h). Without this call config.json is fsdpc's own. */
struct fsdpc_config;
fsdpc_status fsdpc__ckpt_host_set_export(fsdpc_ckpt_host *h, const struct fsdpc_config *c,
                                         fsdpc_err *err);
/* Test hook: the host raises SIGKILL after this process has written `n`
 * checkpoint files in this save (0 = never). */
void fsdpc__ckpt_host_kill_after(fsdpc_ckpt_host *h, int n);

/* The statedict plugins of one run and their validated options (one
 * `checkpoint.options` map, validated against the union of their keys). */
typedef struct fsdpc_ckpt_formats {
  const fsdpc_component *intermediate, *final;
  fsdpc_opts *opts; /* owned */
} fsdpc_ckpt_formats;

fsdpc_status fsdpc__ckpt_formats_select(fsdpc_registry *reg, const char *intermediate,
                                        const char *final, const fsdpc_opts *user_opts,
                                        fsdpc_ckpt_formats *out, fsdpc_err *err);
void fsdpc__ckpt_formats_free(fsdpc_ckpt_formats *f);
/* The plugin whose probe() accepts dir, trying `first` then every loaded
 * statedict component; error naming dir when none does. */
fsdpc_status fsdpc__ckpt_probe(fsdpc_registry *reg, const fsdpc_component *first, const char *dir,
                               const fsdpc_component **out, fsdpc_err *err);

/* Collective save of a checkpoint `name` under root: staged in
 * root/.tmp-<name>, checksummed, renamed to root/<name> (replacing an older
 * one), then intermediate checkpoints beyond `keep` (0 = all) are deleted.
 * A failure on any rank fails every rank and leaves older checkpoints as
 * they were. */
fsdpc_status fsdpc__ckpt_save(fsdpc_ckpt_host *h, const fsdpc_component *plugin,
                              const fsdpc_opts *opts, const char *root, const char *name,
                              const fsdpc_sd_save_opts *so, int64_t keep, fsdpc_err *err);
/* The three parts of a save, for callers that play every rank in turn
 * (offline conversion): rank 0 creates root/.tmp-<name>; each rank writes
 * its files and checksums into tmp; rank 0 renames and rotates. */
fsdpc_status fsdpc__ckpt_stage_begin(const char *root, const char *name, fsdpc_err *err);
fsdpc_status fsdpc__ckpt_save_part(fsdpc_ckpt_host *h, const fsdpc_component *plugin,
                                   const fsdpc_opts *opts, const char *tmp,
                                   const fsdpc_sd_save_opts *so, fsdpc_err *err);
fsdpc_status fsdpc__ckpt_stage_commit(const char *root, const char *name, int64_t keep,
                                      fsdpc_err *err);
/* Collective load from dir (checksums verified on every file read). */
fsdpc_status fsdpc__ckpt_load(fsdpc_ckpt_host *h, const fsdpc_component *plugin,
                              const fsdpc_opts *opts, const char *dir, int with_optimizer,
                              fsdpc_err *err);

/* files.c */
#define FSDPC_CKPT_STEP_PREFIX "step-"
#define FSDPC_CKPT_FINAL_NAME "final"
#define FSDPC_CKPT_MERGED_NAME "final-merged" /* LoRA with peft.merge_on_save */

/* LoRA (ckpt/lora.c). Collective. The PEFT adapter folder of the engine's
 * adapters (base: base_model_name_or_path), written whole as root/name (an
 * earlier folder of that name replaced) or not at all; and, for the merged export, full (unit u of the frozen base, gathered
 * to root) += s * B @ A of every adapted projection in it. */
fsdpc_status fsdpc__lora_write_peft(fsdpc_engine *e, const fsdpc_lora *lo, const char *base,
                                    const char *root, const char *name, fsdpc_err *err);
/* The identity of a LoRA run's base by content (base_id.c): CRC-32 over
 * every tensor's name, dtype, shape and bytes in name order, whatever
 * files hold them; zeros for a random init (dir ""). Threads (OpenMP) read
 * the tensors. */
typedef struct fsdpc_base_id {
  uint32_t crc, tensors;
  uint64_t bytes;
} fsdpc_base_id;
fsdpc_status fsdpc__base_id(const char *dir, fsdpc_base_id *out, fsdpc_err *err);
/* Adds "lora_base" {path (informative), tensors_crc32, tensors, bytes} to a
 * trainer-state JSON (*json is replaced). */
fsdpc_status fsdpc__lora_state_add_base(const char *path, const fsdpc_base_id *id, char **json,
                                        fsdpc_err *err);
/* A resume's check: the state's lora_base against id (the base at path
 * now); another content is refused naming both. A state of an older fsdpc
 * (lora_base as a string) is accepted with a warning (rank 0). */
fsdpc_status fsdpc__lora_check_base(const char *state_json, const char *path,
                                    const fsdpc_base_id *id, const char *dir, int rank,
                                    fsdpc_err *err);
fsdpc_status fsdpc__lora_merge_unit(fsdpc_engine *e, const fsdpc_model_shape *s,
                                    const fsdpc_lora *lo, int u, int root, float *full,
                                    fsdpc_err *err);
#define FSDPC_CKPT_CONFIG_FILE "config.yaml"
/* "step-000120" */
void fsdpc__ckpt_step_name(int64_t step, char *buf, size_t cap);
/* The complete intermediate checkpoint with the highest step under root:
 * *found 0 when there is none (or root does not exist). */
fsdpc_status fsdpc__ckpt_latest(const char *root, char *out, size_t cap, int *found,
                                fsdpc_err *err);
/* The k-th newest complete intermediate checkpoint (k = 0: the newest). */
fsdpc_status fsdpc__ckpt_nth_latest(const char *root, int k, char *out, size_t cap, int *found,
                                    fsdpc_err *err);
/* Deletes step-* folders under root beyond the newest `keep`, except the
 * newest one not marked diverging (ckpt/diverge.h). */
fsdpc_status fsdpc__ckpt_rotate(const char *root, int64_t keep, fsdpc_err *err);
/* rm -rf; OK when path does not exist. */
fsdpc_status fsdpc__ckpt_rm_rf(const char *path, fsdpc_err *err);
/* fsync of a folder (so that a rename in it is durable). */
void fsdpc__ckpt_fsync_dir(const char *path);
/* CRC-32 and size of a whole file. */
fsdpc_status fsdpc__ckpt_file_crc(const char *path, uint32_t *crc, uint64_t *size, fsdpc_err *err);

#endif
