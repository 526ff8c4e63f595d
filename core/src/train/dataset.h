/* The data side of a run (dataset.c, dataset_mix.c): JSONL data prepared on
 * the fly and cached, datasets mixed by weight, loader options from
 * data.packing, train.epochs and the summary printed before the first
 * step. */
#ifndef FSDPC_TRAIN_DATASET_H
#define FSDPC_TRAIN_DATASET_H

#include <stddef.h>

#include "config/config.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "runplan/runplan.h"

/* fsdpc__prepare_opts_from_config, fsdpc__is_jsonl_path: runplan/runplan.h. */
/* The folder of prepared data: data.cache_dir, else log.dir/data-cache. */
void fsdpc__dataset_cache_dir(const fsdpc_config *c, char *out, size_t cap);
/* Prepares o's inputs into the cache (data/prepare.h: keyed by content,
 * reused only when trusted) unless a trusted file is there. Local rank 0 of
 * each node writes it; the node's other ranks wait for it (at most
 * collectives.timeout_s); no node waits for another. rank 0 logs.
 * tok_path (cap) gets the token file's path. */
fsdpc_status fsdpc__dataset_prepare_opts(const fsdpc_config *c, const fsdpc_prepare_opts *o,
                                         int rank, int local_rank, char *tok_path, size_t cap,
                                         fsdpc_err *err);
/* The cache file that o (NULL: the config's data.* keys) makes of jsonl,
 * whether or not it exists yet (`fsdpc data cache`). */
fsdpc_status fsdpc__dataset_cache_file(const fsdpc_config *c, const fsdpc_prepare_opts *o,
                                       const char *jsonl, char *out, size_t cap, fsdpc_err *err);
/* fsdpc__dataset_prepare_opts for one JSONL file with the config's data.* keys. */
fsdpc_status fsdpc__dataset_prepare(const fsdpc_config *c, const char *jsonl, int rank,
                                    int local_rank, char *tok_path, size_t cap, fsdpc_err *err);
/* The token file to train on: data.train (prepared when it is JSONL), or
 * the mix of data.datasets (dataset_mix.c). */
fsdpc_status fsdpc__dataset_train_path(const fsdpc_config *c, int rank, int local_rank, char *out,
                                       size_t cap, fsdpc_err *err);

/* ---- data.datasets (dataset_mix.c) ---- */
typedef struct fsdpc_dataset_spec {
  const char *path;        /* a JSONL (or JSON-array) file or a token file */
  double weight;           /* > 0 */
  fsdpc_prepare_opts prep; /* data.* with the item's keys over them; inputs = &path */
  fsdpc_opts *opts;        /* the item's validated keys (owned; path and prep point into it) */
} fsdpc_dataset_spec;
/* Checks every item of data.datasets (unknown keys with did-you-mean,
 * types, values) and resolves its options; *out (n) is freed with
 * fsdpc__dataset_specs_free. Also for `fsdpc config check`. */
fsdpc_status fsdpc__dataset_specs(const fsdpc_config *c, fsdpc_dataset_spec **out, int *n,
                                  fsdpc_err *err);
void fsdpc__dataset_specs_free(fsdpc_dataset_spec *s, int n);
/* Prepares each dataset and writes (or reuses) their mix in the cache
 * folder; rank 0 prints each dataset's count in the mix. */
fsdpc_status fsdpc__dataset_mix(const fsdpc_config *c, int rank, int local_rank, char *out,
                                size_t cap, fsdpc_err *err);
/* The mix's cache file, when every JSONL dataset is prepared (trusted)
 * already; prepares and writes nothing. */
fsdpc_status fsdpc__dataset_mix_path(const fsdpc_config *c, char *out, size_t cap, fsdpc_err *err);

/* Sets lo->packing (data.packing; auto = examples for prepared files) and
 * lo->overlong_drop. */
void fsdpc__dataset_loader_opts(const fsdpc_config *c, const fsdpc_tokfile *tf,
                                fsdpc_loader_opts *lo);
/* Resolves the run plan's b->max_steps (train.epochs x steps per epoch,
 * else train.max_steps; b->steps_per_epoch set from ld) and (rank 0) prints
 * examples, tokens, targets, windows, batch geometry, steps per epoch,
 * epochs, total steps. */
fsdpc_status fsdpc__dataset_plan(const fsdpc_config *c, const fsdpc_loader *ld, fsdpc_run_batch *b,
                                 int world, int rank, fsdpc_err *err);

#endif
