/* The data side of a run, kept in one place: JSONL training data prepared on
 * the fly (cached next to the data), the loader options that follow from
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

#include "config/opts.h"
#include "fsdpc/fsdpc.h"
#include "util/log.h"

/* ---- cache key ------------------------------------------------------------ */

static void fnv(uint64_t *h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    *h = (*h ^ b[i]) * 0x100000001b3ull;
}
static void fnv_str(uint64_t *h, const char *s) {
  fnv(h, s ? s : "", strlen(s ? s : "") + 1);
}

/* Hashes a file's contents (missing: a marker), so an edited tokenizer or
 * template makes a new cache entry. */
static void fnv_file(uint64_t *h, const char *path) {
  FILE *f = fopen(path, "rb");
  fnv_str(h, path);
  if (!f) {
    fnv_str(h, "<absent>");
    return;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    fnv(h, buf, n);
  fclose(f);
}

fsdpc_status fsdpc__prepare_cache_path(const fsdpc_prepare_opts *o, char *out, size_t cap,
                                       fsdpc_err *err) {
  uint64_t h = 0xcbf29ce484222325ull;
  fnv_str(&h, fsdpc_version());
  int ints[] = {o->format, o->train_on, o->skip_bad, o->train_on_reasoning};
  fnv(&h, ints, sizeof ints);
  for (int i = 0; i < fsdpc__opts_count(o->template_kwargs); i++) {
    const char *k, *v;
    int user;
    fsdpc__opts_entry(o->template_kwargs, i, &k, &v, &user);
    fnv_str(&h, k);
    fnv_str(&h, v);
  }
  fnv_str(&h, o->template_kwargs_json);
  const char *strs[] = {o->tokenizer,        o->template_name,     o->text_field,  o->prompt_field,
                        o->completion_field, o->instruction_field, o->input_field, o->output_field,
                        o->system_field,     o->messages_field};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
    fnv_str(&h, strs[i]);
  for (int i = 0; i < o->n_inputs; i++) {
    struct stat sb;
    if (stat(o->inputs[i], &sb) != 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read dataset: %s", o->inputs[i],
                         strerror(errno));
    int64_t meta[] = {(int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec, (int64_t)sb.st_mtim.tv_nsec};
    fnv_str(&h, o->inputs[i]);
    fnv(&h, meta, sizeof meta);
  }
  if (o->chat_template && o->chat_template[0])
    fnv_file(&h, o->chat_template);
  struct stat sb;
  if (strcmp(o->tokenizer, "byte") != 0) {
    int dir = stat(o->tokenizer, &sb) == 0 && S_ISDIR(sb.st_mode);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json",
                                        "tokenizer.model", "chat_template.jinja"};
    char p[4096];
    if (!dir)
      fnv_file(&h, o->tokenizer);
    for (size_t i = 0; dir && i < sizeof files / sizeof files[0]; i++) {
      snprintf(p, sizeof p, "%s/%s", o->tokenizer, files[i]);
      fnv_file(&h, p);
    }
  }
  if ((size_t)snprintf(out, cap, "%s.%016" PRIx64 ".tok", o->inputs[0], h) >= cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: path too long", o->inputs[0]);
  return FSDPC_OK;
}

fsdpc_status fsdpc__dataset_prepare(const fsdpc_config *c, const char *jsonl, int rank,
                                    char *tok_path, size_t cap, fsdpc_err *err) {
  fsdpc_prepare_opts o;
  fsdpc__prepare_opts_from_config(c, &o);
  const char *in[1] = {jsonl};
  o.inputs = in;
  o.n_inputs = 1;
  FSDPC_TRY(fsdpc__prepare_cache_path(&o, tok_path, cap, err));
  if (access(tok_path, R_OK) == 0) {
    if (rank == 0)
      FSDPC_LOGI("data: %s prepared before: %s", jsonl, tok_path);
    return FSDPC_OK;
  }
  if (rank != 0) { /* rank 0 prepares; the rename makes the file appear whole */
    for (int waited = 0; waited < 10 * (int)c->collectives.timeout_s; waited++) {
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
      if (access(tok_path, R_OK) == 0)
        return FSDPC_OK;
    }
    return fsdpc__fail(err, FSDPC_TIMEOUT,
                       "%s: rank 0 did not prepare %s within collectives.timeout_s", jsonl,
                       tok_path);
  }
  o.out = tok_path;
  fsdpc_prepare_stats st;
  FSDPC_TRY(fsdpc__prepare(&o, &st, err));
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

void fsdpc__dataset_loader_opts(const fsdpc_config *c, const fsdpc_tokfile *tf,
                                fsdpc_loader_opts *lo) {
  int packing = c->data.packing;
  if (packing == FSDPC_DATA_PACKING_AUTO)
    packing = (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) ? FSDPC_PACK_EXAMPLES : FSDPC_PACK_WINDOW;
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
  static const char *const pk[] = {"window", "examples", "none"};
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
