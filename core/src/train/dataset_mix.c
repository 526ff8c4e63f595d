/* data.datasets: several datasets, each with its own format, fields and
 * template, mixed by weight into one token file (data/mix.h) that the run
 * then treats as data.train. Each JSONL dataset is prepared into the cache
 * as data.train would be; the mix is cached too, keyed by its sources'
 * headers (which carry their own content keys), the weights and the seed. */
#define _GNU_SOURCE
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/mix.h"
#include "train/dataset.h"
#include "util/fs.h"
#include "util/log.h"

#define STR_OPT(k, h)                                                                              \
  { sizeof(fsdpc_option_desc), k, FSDPC_OPT_STRING, "", 1, 0, h }
static const fsdpc_option_desc o_path = {sizeof o_path,
                                         "path",
                                         FSDPC_OPT_STRING,
                                         NULL,
                                         1,
                                         0,
                                         "the dataset: JSONL, JSON array or token file"};
static const fsdpc_option_desc o_weight = {
    sizeof o_weight, "weight", FSDPC_OPT_FLOAT, "1", 0, 1e9, "its share of the mix (> 0)"};
static const fsdpc_option_desc o_skip = {
    sizeof o_skip, "skip_bad_examples", FSDPC_OPT_BOOL, "false", 1, 0, "as data.*"};
static const fsdpc_option_desc o_str[] = {
    STR_OPT("format", "as data.format"),
    STR_OPT("train_on", "as data.train_on"),
    STR_OPT("chat_template", "as data.chat_template"),
    STR_OPT("chat_template_name", "as data.chat_template_name"),
    STR_OPT("text_field", "as data.*"),
    STR_OPT("prompt_field", "as data.*"),
    STR_OPT("completion_field", "as data.*"),
    STR_OPT("instruction_field", "as data.*"),
    STR_OPT("input_field", "as data.*"),
    STR_OPT("output_field", "as data.*"),
    STR_OPT("system_field", "as data.*"),
    STR_OPT("messages_field", "as data.*"),
};
enum { N_STR = sizeof o_str / sizeof o_str[0] };

/* The user's text for key, or NULL when the item does not set it. */
static const char *user_value(const fsdpc_opts *o, const char *key) {
  for (int i = 0; i < fsdpc__opts_count(o); i++) {
    const char *k, *v;
    int user;
    fsdpc__opts_entry(o, i, &k, &v, &user);
    if (user && strcmp(k, key) == 0)
      return v;
  }
  return NULL;
}

/* One item: validated keys over the data.* options. */
static fsdpc_status resolve(const fsdpc_config *c, const fsdpc_opts *item, fsdpc_dataset_spec *s,
                            fsdpc_err *err) {
  const fsdpc_option_desc *descs[3 + N_STR] = {&o_path, &o_weight, &o_skip};
  for (int i = 0; i < N_STR; i++)
    descs[3 + i] = &o_str[i];
  const char *where = fsdpc__opts_where(item);
  FSDPC_TRY(fsdpc__opts_clone(item, &s->opts, err));
  FSDPC_TRY(fsdpc__opts_validate(s->opts, descs, 3 + N_STR, where, err));
  fsdpc__prepare_opts_from_config(c, &s->prep);
  s->path = user_value(s->opts, "path");
  FSDPC_TRY(fsdpc__opts_get(s->opts, "weight", FSDPC_OPT_FLOAT, &s->weight, 0, err));
  if (!(s->weight > 0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s.weight: %g; a weight must be above 0 (leave the dataset out instead)",
                       where, s->weight);
  if (user_value(s->opts, "skip_bad_examples")) {
    int32_t b = 0;
    FSDPC_TRY(fsdpc__opts_get(s->opts, "skip_bad_examples", FSDPC_OPT_BOOL, &b, 0, err));
    s->prep.skip_bad = b;
  }
  const char *v;
  if ((v = user_value(s->opts, "format")) && (s->prep.format = fsdpc__prepare_format_parse(v)) < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s.format: '%s' is not one of auto, text, instruction, "
                       "prompt_completion, chat",
                       where, v);
  if ((v = user_value(s->opts, "train_on")) &&
      (s->prep.train_on = fsdpc__prepare_train_on_parse(v)) < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s.train_on: '%s' is not one of assistant, all, last_assistant", where, v);
  const char **fields[] = {NULL,
                           NULL,
                           &s->prep.chat_template,
                           &s->prep.template_name,
                           &s->prep.text_field,
                           &s->prep.prompt_field,
                           &s->prep.completion_field,
                           &s->prep.instruction_field,
                           &s->prep.input_field,
                           &s->prep.output_field,
                           &s->prep.system_field,
                           &s->prep.messages_field};
  for (int i = 2; i < N_STR; i++)
    if ((v = user_value(s->opts, o_str[i].key)))
      *fields[i] = v;
  s->prep.inputs = &s->path;
  s->prep.n_inputs = 1;
  return FSDPC_OK;
}

fsdpc_status fsdpc__dataset_specs(const fsdpc_config *c, fsdpc_dataset_spec **out, int *n,
                                  fsdpc_err *err) {
  int k = c->data.datasets.n;
  *out = NULL;
  *n = 0;
  fsdpc_dataset_spec *s = calloc((size_t)(k > 0 ? k : 1), sizeof *s);
  if (!s)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int i = 0; i < k; i++) {
    fsdpc_status st = resolve(c, c->data.datasets.items[i], &s[i], err);
    if (st != FSDPC_OK) {
      fsdpc__dataset_specs_free(s, i + 1);
      return st;
    }
  }
  *out = s;
  *n = k;
  return FSDPC_OK;
}

void fsdpc__dataset_specs_free(fsdpc_dataset_spec *s, int n) {
  for (int i = 0; s && i < n; i++)
    fsdpc__opts_destroy(s[i].opts);
  free(s);
}

/* The mix's key: its sources' headers (content keys and CRCs), weights and
 * the seed. */
static fsdpc_status mix_key(fsdpc_tokfile *const *tf, const fsdpc_dataset_spec *s, int n,
                            uint64_t seed, fsdpc_cache_key *key, fsdpc_err *err) {
  EVP_MD_CTX *h = EVP_MD_CTX_new();
  int ok = h && EVP_DigestInit_ex(h, EVP_sha256(), NULL) == 1 &&
           EVP_DigestUpdate(h, "fsdpc mix 1", 11) == 1 &&
           EVP_DigestUpdate(h, &seed, sizeof seed) == 1;
  for (int i = 0; ok && i < n; i++)
    ok = EVP_DigestUpdate(h, tf[i]->map, FSDPC_TOKFILE_HEADER_BYTES) == 1 &&
         EVP_DigestUpdate(h, &s[i].weight, sizeof s[i].weight) == 1;
  unsigned int len = 0;
  ok = ok && EVP_DigestFinal_ex(h, key->sha, &len) == 1;
  EVP_MD_CTX_free(h);
  if (!ok)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "data.datasets: hashing failed (libcrypto)");
  for (int i = 0; i < 8; i++)
    snprintf(key->hex + 2 * i, 3, "%02x", key->sha[i]);
  return FSDPC_OK;
}

/* Writes the mix (local rank 0) or waits for it (the others). */
static fsdpc_status make_mix(const fsdpc_config *c, fsdpc_tokfile *const *tf,
                             const fsdpc_dataset_spec *s, const int64_t *k, int n, int local_rank,
                             const char *path, const fsdpc_cache_key *key, fsdpc_err *err) {
  char why[160];
  for (int64_t waited = 0; local_rank != 0; waited++) {
    if (fsdpc__prepare_cache_trusted(path, key, why, sizeof why))
      return FSDPC_OK;
    if (waited >= 10 * c->collectives.timeout_s)
      return fsdpc__fail(err, FSDPC_TIMEOUT,
                         "data.datasets: local rank 0 did not write %s within "
                         "collectives.timeout_s (%lld s)",
                         path, (long long)c->collectives.timeout_s);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (fsdpc__prepare_cache_trusted(path, key, why, sizeof why))
    return FSDPC_OK;
  const fsdpc_tokfile *srcs[64];
  const char *names[64];
  for (int i = 0; i < n; i++) {
    srcs[i] = tf[i];
    names[i] = s[i].path;
  }
  return fsdpc__mix_write(srcs, names, k, n, (uint64_t)c->data.seed, path, key->sha, err);
}

static void print_mix(const fsdpc_dataset_spec *s, fsdpc_tokfile *const *tf, const int64_t *k,
                      int n, const char *path) {
  int64_t total = 0;
  for (int i = 0; i < n; i++)
    total += k[i];
  FSDPC_LOGI("data: %d datasets mixed by weight, %lld examples -> %s", n, (long long)total, path);
  for (int i = 0; i < n; i++) {
    int64_t have = fsdpc__tokfile_n_docs(tf[i]);
    FSDPC_LOGI("data:   %s: weight %g, %lld examples in the mix (%.1f%%) from its %lld%s",
               s[i].path, s[i].weight, (long long)k[i],
               total ? 100.0 * (double)k[i] / (double)total : 0.0, (long long)have,
               k[i] > have   ? " (repeated)"
               : k[i] < have ? " (a sample)"
                             : "");
  }
}

/* Opens each dataset's token file (tf, n): JSONL datasets prepared into
 * the cache first (prepare set) or, without, only when they are there and
 * trusted. */
static fsdpc_status open_sources(const fsdpc_config *c, const fsdpc_dataset_spec *s, int n,
                                 int prepare, int rank, int local_rank, fsdpc_tokfile **tf,
                                 fsdpc_err *err) {
  char path[4096], why[160];
  for (int i = 0; i < n; i++) {
    if (!fsdpc__is_jsonl_path(s[i].path)) {
      snprintf(path, sizeof path, "%s", s[i].path);
    } else if (prepare) {
      FSDPC_TRY(
          fsdpc__dataset_prepare_opts(c, &s[i].prep, rank, local_rank, path, sizeof path, err));
    } else {
      fsdpc_cache_key key;
      FSDPC_TRY(fsdpc__prepare_cache_key(&s[i].prep, &key, err));
      char dir[4096];
      fsdpc__dataset_cache_dir(c, dir, sizeof dir);
      FSDPC_TRY(fsdpc__prepare_cache_path(&s[i].prep, dir, &key, path, sizeof path, err));
      if (!fsdpc__prepare_cache_trusted(path, &key, why, sizeof why))
        return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not prepared (%s)", s[i].path, why);
    }
    FSDPC_TRY(fsdpc__tokfile_open(path, &tf[i], err));
  }
  return FSDPC_OK;
}

/* Both entry points: prepare and write (write set) or only name the mix. */
static fsdpc_status mix(const fsdpc_config *c, int write, int rank, int local_rank, char *out,
                        size_t cap, fsdpc_err *err) {
  fsdpc_dataset_spec *s = NULL;
  int n = 0;
  FSDPC_TRY(fsdpc__dataset_specs(c, &s, &n, err));
  if (n > 64) {
    fsdpc__dataset_specs_free(s, n);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "data.datasets: %d datasets; at most 64", n);
  }
  fsdpc_tokfile *tf[64] = {0};
  int64_t k[64], docs[64];
  double w[64];
  fsdpc_status st = open_sources(c, s, n, write, rank, local_rank, tf, err);
  for (int i = 0; i < n && st == FSDPC_OK; i++) {
    docs[i] = fsdpc__tokfile_n_docs(tf[i]);
    w[i] = s[i].weight;
  }
  fsdpc_cache_key key;
  char dir[4096];
  fsdpc__dataset_cache_dir(c, dir, sizeof dir);
  if (st == FSDPC_OK)
    st = mix_key(tf, s, n, (uint64_t)c->data.seed, &key, err);
  if (st == FSDPC_OK && (size_t)snprintf(out, cap, "%s/mix.%s.tok", dir, key.hex) >= cap)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "data.cache_dir: path too long");
  if (st == FSDPC_OK && write && local_rank == 0)
    st = fsdpc__mkdir_p(dir, err);
  if (st == FSDPC_OK && write) {
    fsdpc__mix_counts(docs, w, n, k);
    st = make_mix(c, tf, s, k, n, local_rank, out, &key, err);
  }
  if (st == FSDPC_OK && write && rank == 0)
    print_mix(s, tf, k, n, out);
  for (int i = 0; i < n; i++)
    fsdpc__tokfile_close(tf[i]);
  fsdpc__dataset_specs_free(s, n);
  return st;
}

fsdpc_status fsdpc__dataset_mix(const fsdpc_config *c, int rank, int local_rank, char *out,
                                size_t cap, fsdpc_err *err) {
  return mix(c, 1, rank, local_rank, out, cap, err);
}

fsdpc_status fsdpc__dataset_mix_path(const fsdpc_config *c, char *out, size_t cap, fsdpc_err *err) {
  return mix(c, 0, -1, -1, out, cap, err);
}
