/* The data side of a run (dataset.c): JSONL data prepared on the fly and
 * cached, loader options from data.packing, train.epochs and the summary
 * printed before the first step. */
#ifndef FSDPC_TRAIN_DATASET_H
#define FSDPC_TRAIN_DATASET_H

#include <stddef.h>

#include "config/config.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "runplan/runplan.h"

/* fsdpc__prepare_opts_from_config, fsdpc__is_jsonl_path: runplan/runplan.h. */
/* Prepares jsonl with the config's data keys into its cache file (see
 * fsdpc__prepare_cache_path) unless that exists; rank 0 writes it, other
 * ranks wait for it. tok_path (cap) gets the token file's path. */
fsdpc_status fsdpc__dataset_prepare(const fsdpc_config *c, const char *jsonl, int rank,
                                    char *tok_path, size_t cap, fsdpc_err *err);
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
