/* The data side of a run, kept in one place: JSONL training data prepared on
 * the fly (cached in data.cache_dir), the loader options that follow from
 * data.packing, train.epochs, and the data/batch summary printed before the
 * first step. */
#define _GNU_SOURCE
#include "train/dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsdpc/fsdpc.h"
#include "util/fs.h"
#include "util/log.h"

void fsdpc__dataset_cache_dir(const fsdpc_config *c, char *out, size_t cap) {
  if (c->data.cache_dir[0])
    snprintf(out, cap, "%s", c->data.cache_dir);
  else
    snprintf(out, cap, "%s/data-cache", c->log.dir);
}

/* Waits (a local rank that is not its node's leader) until the leader's
 * file is there and trusted, at most collectives.timeout_s. */
static fsdpc_status wait_for(const fsdpc_config *c, const char *jsonl, const char *path,
                             const fsdpc_cache_key *key, fsdpc_err *err) {
  char why[160];
  for (int64_t waited = 0; waited < 10 * c->collectives.timeout_s; waited++) {
    if (fsdpc__prepare_cache_trusted(path, key, why, sizeof why))
      return FSDPC_OK;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return fsdpc__fail(err, FSDPC_TIMEOUT,
                     "%s: local rank 0 of this node did not prepare %s within "
                     "collectives.timeout_s (%lld s; the last check: %s); prepare it beforehand "
                     "with `fsdpc data prepare --config`, or raise the timeout",
                     jsonl, path, (long long)c->collectives.timeout_s, why);
}

/* The cache file of o's inputs (o's inputs[0] = jsonl) and its key. */
static fsdpc_status cache_file(const fsdpc_config *c, const fsdpc_prepare_opts *o,
                               fsdpc_cache_key *key, char *out, size_t cap, fsdpc_err *err) {
  char dir[4096];
  fsdpc__dataset_cache_dir(c, dir, sizeof dir);
  FSDPC_TRY(fsdpc__prepare_cache_key(o, key, err));
  return fsdpc__prepare_cache_path(o, dir, key, out, cap, err);
}

fsdpc_status fsdpc__dataset_cache_file(const fsdpc_config *c, const fsdpc_prepare_opts *o,
                                       const char *jsonl, char *out, size_t cap, fsdpc_err *err) {
  fsdpc_prepare_opts po;
  if (o)
    po = *o;
  else
    fsdpc__prepare_opts_from_config(c, &po);
  const char *in[1] = {jsonl};
  po.inputs = in;
  po.n_inputs = 1;
  fsdpc_cache_key key;
  return cache_file(c, &po, &key, out, cap, err);
}

fsdpc_status fsdpc__dataset_prepare_opts(const fsdpc_config *c, const fsdpc_prepare_opts *o,
                                         int rank, int local_rank, char *tok_path, size_t cap,
                                         fsdpc_err *err) {
  const char *jsonl = o->inputs[0];
  char dir[4096];
  fsdpc__dataset_cache_dir(c, dir, sizeof dir);
  fsdpc_cache_key key;
  FSDPC_TRY(cache_file(c, o, &key, tok_path, cap, err));
  char why[160];
  if (fsdpc__prepare_cache_trusted(tok_path, &key, why, sizeof why)) {
    if (rank == 0)
      FSDPC_LOGI("data: %s prepared before: %s", jsonl, tok_path);
    return FSDPC_OK;
  }
  /* Every node's local rank 0 prepares its own copy, so no node waits on
   * another's file system; on a shared one the copies are identical and
   * each appears by an atomic rename. */
  if (local_rank != 0)
    return wait_for(c, jsonl, tok_path, &key, err);
  if (strcmp(why, "absent") != 0)
    FSDPC_LOGW("data: not reusing %s: %s; preparing it again", tok_path, why);
  FSDPC_TRY(fsdpc__mkdir_p(dir, err));
  fsdpc_prepare_opts po = *o;
  po.out = tok_path;
  po.tag = key.sha;
  fsdpc_prepare_stats st;
  FSDPC_TRY(fsdpc__prepare(&po, &st, err));
  FSDPC_LOGI("data: prepared %s (%s): %lld examples, %lld tokens, %lld targets in %.1f s -> %s",
             jsonl, fsdpc__prepare_format_name(st.format), (long long)st.examples,
             (long long)st.tokens, (long long)st.target_tokens, st.seconds, tok_path);
  if (st.skipped)
    FSDPC_LOGW("data: skipped %lld bad example(s); first: %s", (long long)st.skipped,
               st.first_skip);
  if (st.weight_zero)
    FSDPC_LOGI("data: left out %lld example(s) of weight 0", (long long)st.weight_zero);
  return FSDPC_OK;
}

fsdpc_status fsdpc__dataset_prepare(const fsdpc_config *c, const char *jsonl, int rank,
                                    int local_rank, char *tok_path, size_t cap, fsdpc_err *err) {
  fsdpc_prepare_opts o;
  fsdpc__prepare_opts_from_config(c, &o);
  const char *in[1] = {jsonl};
  o.inputs = in;
  o.n_inputs = 1;
  return fsdpc__dataset_prepare_opts(c, &o, rank, local_rank, tok_path, cap, err);
}

fsdpc_status fsdpc__dataset_train_path(const fsdpc_config *c, int rank, int local_rank, char *out,
                                       size_t cap, fsdpc_err *err) {
  if (c->data.datasets.n > 0) {
    if (c->data.train[0])
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: data.train and data.datasets are both set; give the training data "
                         "once (data.datasets: [{path: %s, weight: 1}, ...])",
                         c->source, c->data.train);
    return fsdpc__dataset_mix(c, rank, local_rank, out, cap, err);
  }
  if (!c->data.train[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: data.train is empty; point it at a token file (make one with "
                       "`fsdpc data synth`, `tokenize` or `prepare`), a .jsonl dataset, or list "
                       "datasets in data.datasets",
                       c->source);
  if (fsdpc__is_jsonl_path(c->data.train))
    return fsdpc__dataset_prepare(c, c->data.train, rank, local_rank, out, cap, err);
  if ((size_t)snprintf(out, cap, "%s", c->data.train) >= cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "data.train: path too long");
  return FSDPC_OK;
}

void fsdpc__dataset_loader_opts(const fsdpc_config *c, const fsdpc_tokfile *tf,
                                fsdpc_loader_opts *lo) {
  int packing = c->data.packing;
  if (packing == FSDPC_DATA_PACKING_AUTO)
    packing = (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) ? FSDPC_PACK_EXAMPLES : FSDPC_PACK_WINDOW;
  if (tf->hdr.flags & FSDPC_TOKFILE_PAIRS) /* one pair per row, whatever data.packing */
    packing = FSDPC_PACK_PAIRS;
  lo->packing = packing;
  lo->overlong_drop = c->data.overlong == FSDPC_DATA_OVERLONG_DROP;
}

fsdpc_status fsdpc__dataset_plan(const fsdpc_config *c, const fsdpc_loader *ld, fsdpc_run_batch *b,
                                 int world, int rank, fsdpc_err *err) {
  (void)err;
  int64_t spe = b->steps_per_epoch, T = b->seq_len;
  int64_t G = b->global, mb = b->micro, accum = b->accum;
  b->max_steps = c->train.epochs > 0 ? c->train.epochs * spe : c->train.max_steps;
  if (rank != 0)
    return FSDPC_OK;
  fsdpc_loader_stats ls;
  fsdpc__loader_stats(ld, &ls);
  static const char *const pk[] = {"window", "examples", "none", "pairs"};
  FSDPC_LOGI("data: %lld examples, %lld tokens, %lld target tokens; %lld windows of %lld "
             "(%s packing)",
             (long long)ls.examples, (long long)ls.tokens, (long long)ls.target_tokens,
             (long long)fsdpc__loader_total_windows(ld), (long long)T,
             pk[fsdpc__loader_packing(ld)]);
  if (ls.truncated || ls.dropped)
    FSDPC_LOGW("data: %lld example(s) longer than seq_len %lld were %s",
               (long long)(ls.truncated + ls.dropped), (long long)T,
               ls.truncated ? "truncated" : "dropped");
  FSDPC_LOGI("batch: global %lld windows = micro-batch %lld x accumulation %lld x %d rank(s); "
             "%lld tokens per step",
             (long long)G, (long long)mb, (long long)accum, world, (long long)(G * T));
  if (c->train.global_batch_size <= 0 && world > 1) /* the batch follows the world size */
    FSDPC_LOGI("batch: train.global_batch_size is not set, so the global batch grows with the "
               "world: %lld windows at world %d (%lld at world 1); set train.global_batch_size "
               "to keep it",
               (long long)G, world, (long long)(G / world));
  double epochs = (double)b->max_steps / (double)spe;
  FSDPC_LOGI("steps: %lld per epoch (%lld training windows), %s%.2f epoch(s), %lld steps in all",
             (long long)spe, (long long)fsdpc__loader_num_windows(ld),
             c->train.epochs > 0 ? "train.epochs " : "", epochs, (long long)b->max_steps);
  return FSDPC_OK;
}
