/* The public API of data/: tokenizers, token files (read, write, served as
 * the loader serves them) and datasets (synthetic tasks, JSONL
 * preparation), behind `fsdpc data`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_fill.h"
#include "config/config.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/synth.h"
#include "data/tokenizer.h"
#include "data/tokfile.h"
#include "train/dataset.h"

/* ---- tokenizers --------------------------------------------------------- */

FSDPC_API fsdpc_status fsdpc_tokenizer_open(const char *spec, uint32_t flags, fsdpc_tokenizer **out,
                                            fsdpc_err *err) {
  if (!spec || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokenizer_open: NULL spec or out");
  if (!(flags & FSDPC_TOKENIZER_NO_SPECIAL) || strcmp(spec, "byte") == 0)
    return fsdpc__tokenizer_load(spec, out, err);
  /* special-token strings as plain text: a tokenizer.json only */
  fsdpc_bpe_opts o;
  fsdpc__bpe_opts_default(&o);
  o.parse_special = 0;
  return fsdpc__tokenizer_bpe_create(spec, &o, out, err);
}

FSDPC_API void fsdpc_tokenizer_destroy(fsdpc_tokenizer *t) {
  fsdpc__tokenizer_destroy(t);
}

FSDPC_API void fsdpc_tokenizer_describe(const fsdpc_tokenizer *t, fsdpc_tokenizer_info *out) {
  if (!t || !FSDPC_API_SIZED(out))
    return;
  fsdpc_tokenizer_info full = {.name = fsdpc__tokenizer_name(t),
                               .vocab_size = fsdpc__tokenizer_vocab_size(t),
                               .bos = fsdpc__tokenizer_bos(t),
                               .eos = fsdpc__tokenizer_eos(t),
                               .pad = fsdpc__tokenizer_pad(t),
                               .adds_bos = fsdpc__tokenizer_adds_bos(t),
                               .adds_eos = fsdpc__tokenizer_adds_eos(t)};
  FSDPC_API_FILL(out, full);
}

FSDPC_API fsdpc_status fsdpc_tokenizer_encode(const fsdpc_tokenizer *t, const char *text,
                                              size_t len, int32_t **ids, int64_t *n,
                                              int64_t **offsets, fsdpc_err *err) {
  if (!t || (!text && len) || !ids || !n)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokenizer_encode: NULL argument");
  *ids = NULL;
  *n = 0;
  if (!offsets)
    return fsdpc__tokenizer_encode_alloc(t, text ? text : "", len, ids, n, err);
  size_t(*offs)[2] = NULL;
  *offsets = NULL;
  FSDPC_TRY(fsdpc__tokenizer_encode_offsets(t, text ? text : "", len, ids, &offs, n, err));
  int64_t *o = malloc(((size_t)*n * 2 + 1) * sizeof *o);
  if (!o) {
    free(offs);
    free(*ids);
    *ids = NULL;
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  for (int64_t i = 0; i < *n; i++) {
    o[2 * i] = (int64_t)offs[i][0];
    o[2 * i + 1] = (int64_t)offs[i][1];
  }
  free(offs);
  *offsets = o;
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_tokenizer_decode(const fsdpc_tokenizer *t, const int32_t *ids,
                                              int64_t n, char **text, size_t *len, fsdpc_err *err) {
  if (!t || (!ids && n) || n < 0 || !text)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokenizer_decode: NULL argument");
  /* A first pass sizes the text: it fails for a buffer too small (and sets
   * the length), or for an id outside the vocabulary (length 0, which the
   * second pass then reports). */
  size_t need = 0;
  fsdpc__tokenizer_decode(t, ids, n, NULL, 0, &need, NULL);
  char *buf = malloc(need + 1);
  if (!buf)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = fsdpc__tokenizer_decode(t, ids, n, buf, need + 1, &need, err);
  if (st != FSDPC_OK) {
    free(buf);
    return st;
  }
  buf[need] = '\0';
  *text = buf;
  if (len)
    *len = need;
  return FSDPC_OK;
}

FSDPC_API const char *fsdpc_tokenizer_token(const fsdpc_tokenizer *t, int32_t id) {
  return t ? fsdpc__tokenizer_token_str(t, id) : NULL;
}

/* ---- token files -------------------------------------------------------- */

FSDPC_API fsdpc_status fsdpc_tokfile_open(const char *path, fsdpc_tokfile **out, fsdpc_err *err) {
  if (!path || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokfile_open: NULL path or out");
  return fsdpc__tokfile_open(path, out, err);
}

FSDPC_API void fsdpc_tokfile_close(fsdpc_tokfile *tf) {
  fsdpc__tokfile_close(tf);
}

/* Token i of document d is trained on under the file's default packing:
 * its mask bit, and a token before predicts it (nothing predicts an
 * example's first token in a file of examples; in a stream only the
 * file's first token is unpredicted). */
static int token_is_target(const fsdpc_tokfile *tf, int64_t d, int64_t i) {
  int examples = (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) != 0;
  if (i == 0 && (examples || d == 0))
    return 0;
  return fsdpc__tokfile_mask(tf, (int64_t)tf->offsets[d] + i);
}

FSDPC_API void fsdpc_tokfile_describe(const fsdpc_tokfile *tf, fsdpc_tokfile_info *out) {
  if (!tf || !FSDPC_API_SIZED(out))
    return;
  const fsdpc_tokfile_header *h = &tf->hdr;
  int64_t N = fsdpc__tokfile_n_tokens(tf), D = fsdpc__tokfile_n_docs(tf);
  int64_t lo = D ? INT64_MAX : 0, hi = 0, targets = 0;
  for (int64_t d = 0; d < D; d++) {
    int64_t len = (int64_t)(tf->offsets[d + 1] - tf->offsets[d]);
    lo = len < lo ? len : lo;
    hi = len > hi ? len : hi;
  }
  for (int64_t d = 0; d < D; d++)
    for (int64_t i = (int64_t)tf->offsets[d]; i < (int64_t)tf->offsets[d + 1]; i++)
      targets += token_is_target(tf, d, i - (int64_t)tf->offsets[d]);
  fsdpc_tokfile_info full = {.version = h->version,
                             .token_bytes = h->token_bytes,
                             .vocab_size = h->vocab_size,
                             .eos_id = h->eos_id,
                             .header_crc = h->header_crc,
                             .payload_crc = h->payload_crc,
                             .has_mask = tf->mask != NULL,
                             .examples = (h->flags & FSDPC_TOKFILE_EXAMPLES) != 0,
                             .file_bytes = (int64_t)tf->map_bytes,
                             .n_tokens = N,
                             .n_docs = D,
                             .target_tokens = targets,
                             .min_doc = lo,
                             .max_doc = hi};
  FSDPC_API_FILL(out, full);
}

FSDPC_API fsdpc_status fsdpc_tokfile_doc(const fsdpc_tokfile *tf, int64_t d, int64_t *start,
                                         int64_t *len, fsdpc_err *err) {
  if (!tf || d < 0 || d >= fsdpc__tokfile_n_docs(tf) || !start || !len)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokfile_doc: no document %lld",
                       (long long)d);
  *start = (int64_t)tf->offsets[d];
  *len = (int64_t)(tf->offsets[d + 1] - tf->offsets[d]);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_tokfile_read(const fsdpc_tokfile *tf, int64_t start, int64_t n,
                                          int32_t *ids, uint8_t *targets, fsdpc_err *err) {
  if (!tf || !ids || start < 0 || n < 0 || start + n > fsdpc__tokfile_n_tokens(tf))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_tokfile_read: tokens [%lld, %lld) outside the file's %lld",
                       (long long)start, (long long)(start + n),
                       tf ? (long long)fsdpc__tokfile_n_tokens(tf) : 0LL);
  fsdpc__tokfile_read(tf, start, n, ids);
  for (int64_t i = 0; targets && i < n; i++)
    targets[i] = (uint8_t)fsdpc__tokfile_mask(tf, start + i);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_tokfile_doc_targets(const fsdpc_tokfile *tf, int64_t d, int64_t n,
                                                 uint8_t *targets, fsdpc_err *err) {
  if (!tf || !targets || d < 0 || d >= fsdpc__tokfile_n_docs(tf) || n < 0 ||
      n > (int64_t)(tf->offsets[d + 1] - tf->offsets[d]))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_tokfile_doc_targets: no document %lld of %lld tokens or more",
                       (long long)d, (long long)n);
  for (int64_t i = 0; i < n; i++)
    targets[i] = (uint8_t)token_is_target(tf, d, i);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_tokfile_writer_open(const char *path, uint32_t vocab_size,
                                                 uint32_t eos_id, uint32_t flags,
                                                 fsdpc_tokfile_writer **out, fsdpc_err *err) {
  if (!path || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokfile_writer_open: NULL path or out");
  return fsdpc__tokfile_writer_create(path, vocab_size, eos_id,
                                      (flags & FSDPC_TOKFILE_WRITE_MASK) ? 1 : 0, out, err);
}

FSDPC_API fsdpc_status fsdpc_tokfile_writer_add(fsdpc_tokfile_writer *w, const int32_t *ids,
                                                const uint8_t *targets, int64_t n, fsdpc_err *err) {
  if (!w || (!ids && n) || n < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokfile_writer_add: NULL argument");
  return fsdpc__tokfile_writer_add_doc(w, ids, targets, n, err);
}

FSDPC_API fsdpc_status fsdpc_tokfile_writer_finish(fsdpc_tokfile_writer *w, fsdpc_err *err) {
  if (!w)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_tokfile_writer_finish: NULL writer");
  return fsdpc__tokfile_writer_finish(w, err);
}

FSDPC_API void fsdpc_tokfile_writer_destroy(fsdpc_tokfile_writer *w) {
  fsdpc__tokfile_writer_destroy(w);
}

/* ---- one global batch --------------------------------------------------- */

struct fsdpc_batch {
  fsdpc_loader *ld;
  int64_t step, G, T, count;
  int32_t *buf; /* (3 T): ids, labels, doc ids of the last row asked for */
};

FSDPC_API void fsdpc_batch_args_init(fsdpc_batch_args *a) {
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  *a = (fsdpc_batch_args){.struct_size = sizeof *a,
                          .seed = o.seed,
                          .shuffle = o.shuffle,
                          .split = "all",
                          .split_seed = o.split_seed,
                          .overlong_drop = o.overlong_drop};
}

/* name's index in names (n), or -1 with an error naming the choices. */
static int pick(const char *what, const char *name, const char *const *names, int n,
                fsdpc_err *err) {
  for (int i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s '%s': expected %s, %s or %s", what, name, names[0],
              names[1], names[2]);
  return -1;
}

static fsdpc_status batch_opts(const fsdpc_tokfile *tf, const fsdpc_batch_args *a,
                               fsdpc_loader_opts *o, fsdpc_err *err) {
  static const char *const splits[] = {"all", "train", "eval"};      /* FSDPC_SPLIT_* */
  static const char *const packs[] = {"window", "examples", "none"}; /* FSDPC_PACK_* */
  if (a->struct_size < sizeof *a || a->seq_len < 1 || a->seq_len > (1 << 24) ||
      a->global_batch < 1 || a->step < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_batch_create: seq_len and global_batch must be >= 1 and step >= 0 "
                       "(struct_size set by fsdpc_batch_args_init)");
  fsdpc__loader_opts_default(o);
  o->seq_len = (int32_t)a->seq_len;
  o->global_batch = a->global_batch;
  o->seed = a->seed;
  o->shuffle = a->shuffle != 0;
  o->eval_fraction = a->eval_fraction;
  o->split_seed = a->split_seed;
  o->overlong_drop = a->overlong_drop != 0;
  int split = pick("split", a->split ? a->split : "all", splits, 3, err);
  int pack = a->packing                                 ? pick("packing", a->packing, packs, 3, err)
             : (tf->hdr.flags & FSDPC_TOKFILE_EXAMPLES) ? FSDPC_PACK_EXAMPLES
                                                        : FSDPC_PACK_WINDOW;
  if (split < 0 || pack < 0)
    return FSDPC_INVALID_USAGE;
  o->split = split;
  o->packing = pack;
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_batch_create(const fsdpc_tokfile *tf, const fsdpc_batch_args *a,
                                          fsdpc_batch **out, fsdpc_err *err) {
  if (!tf || !a || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_batch_create: NULL argument");
  fsdpc_loader_opts o;
  FSDPC_TRY(batch_opts(tf, a, &o, err));
  fsdpc_batch *b = calloc(1, sizeof *b);
  if (!b || !(b->buf = malloc((size_t)(3 * a->seq_len) * sizeof *b->buf))) {
    free(b);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  b->step = a->step;
  b->G = a->global_batch;
  b->T = a->seq_len;
  fsdpc_status st = fsdpc__loader_create(tf, &o, &b->ld, err);
  if (st == FSDPC_OK)
    st = fsdpc__loader_count_labels(b->ld, b->step, b->G, &b->count, err);
  if (st != FSDPC_OK) {
    fsdpc_batch_destroy(b);
    return st;
  }
  *out = b;
  return FSDPC_OK;
}

FSDPC_API void fsdpc_batch_destroy(fsdpc_batch *b) {
  if (!b)
    return;
  fsdpc__loader_destroy(b->ld);
  free(b->buf);
  free(b);
}

FSDPC_API void fsdpc_batch_describe(const fsdpc_batch *b, fsdpc_batch_info *out) {
  if (!b || !FSDPC_API_SIZED(out))
    return;
  static const char *const packs[] = {"window", "examples", "none"};
  fsdpc_loader_stats ls;
  fsdpc__loader_stats(b->ld, &ls);
  int64_t spe = fsdpc__loader_steps_per_epoch(b->ld);
  int32_t pk = fsdpc__loader_packing(b->ld);
  fsdpc_batch_info full = {.epoch = spe > 0 ? b->step / spe : 0,
                           .target_labels = b->count,
                           .split_windows = fsdpc__loader_num_windows(b->ld),
                           .total_windows = fsdpc__loader_total_windows(b->ld),
                           .steps_per_epoch = spe,
                           .packing = pk >= 0 && pk < 3 ? packs[pk] : "window",
                           .examples = ls.examples,
                           .tokens = ls.tokens,
                           .target_tokens = ls.target_tokens,
                           .truncated = ls.truncated,
                           .dropped = ls.dropped};
  FSDPC_API_FILL(out, full);
}

FSDPC_API fsdpc_status fsdpc_batch_row(fsdpc_batch *b, int64_t i, int64_t *window,
                                       const int32_t **ids, const int32_t **labels,
                                       const int32_t **doc_ids, fsdpc_err *err) {
  if (!b || i < 0 || i >= b->G)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_batch_row: no row %lld", (long long)i);
  int64_t idx, T = b->T;
  FSDPC_TRY(fsdpc__loader_batch_window(b->ld, b->step, i, &idx, err));
  FSDPC_TRY(fsdpc__loader_window(b->ld, idx, b->buf, b->buf + T, b->buf + 2 * T, err));
  if (window)
    *window = idx;
  if (ids)
    *ids = b->buf;
  if (labels)
    *labels = b->buf + T;
  if (doc_ids)
    *doc_ids = fsdpc__loader_packing(b->ld) != FSDPC_PACK_WINDOW ? b->buf + 2 * T : NULL;
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_batch_row_targets(fsdpc_batch *b, int64_t i, uint8_t *targets,
                                               fsdpc_err *err) {
  if (!b || !targets || i < 0 || i >= b->G)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_batch_row_targets: no row %lld",
                       (long long)i);
  int64_t idx;
  FSDPC_TRY(fsdpc__loader_batch_window(b->ld, b->step, i, &idx, err));
  return fsdpc__loader_window_targets(b->ld, idx, targets, err);
}

/* ---- datasets ----------------------------------------------------------- */

FSDPC_API void fsdpc_synth_args_init(fsdpc_synth_args *a) {
  fsdpc_synth_opts o;
  fsdpc__synth_opts_default(&o);
  *a = (fsdpc_synth_args){.struct_size = sizeof *a,
                          .n = o.n_docs,
                          .seed = o.seed,
                          .mask_prompt = o.mask_prompt,
                          .max_operand = o.max_operand,
                          .max_len = o.max_len};
}

FSDPC_API fsdpc_status fsdpc_data_synth(const fsdpc_synth_args *a, fsdpc_synth_result *out,
                                        fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || !a->task || !a->out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_data_synth: a task and an output file are needed (struct_size "
                       "set by fsdpc_synth_args_init)");
  if (a->n < 1 || a->max_len < 1 || a->max_len > 50 || a->max_operand < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "synth: n must be >= 1, max_len in 1..50, max_operand >= 0");
  fsdpc_synth_result r = {
      .struct_size = sizeof r, .examples = a->n, .vocab_size = FSDPC_BYTE_VOCAB};
  if (strcmp(a->task, "chat") == 0 || strcmp(a->task, "tools") == 0) {
    FSDPC_TRY((a->task[0] == 'c' ? fsdpc__synth_chat_write
                                 : fsdpc__synth_tools_write)(a->n, a->seed, a->out, err));
    r.masked = 1; /* chat is trained on the assistant's turns */
  } else {
    fsdpc_synth_opts o;
    fsdpc__synth_opts_default(&o);
    FSDPC_TRY(fsdpc__synth_task_parse(a->task, &o.task, err));
    o.n_docs = a->n;
    o.seed = a->seed;
    o.mask_prompt = a->mask_prompt;
    o.max_operand = a->max_operand;
    o.max_len = a->max_len;
    FSDPC_TRY(fsdpc__synth_write(&o, a->out, &r.tokens, err));
    r.masked = o.mask_prompt < 0 ? o.task == FSDPC_SYNTH_QA : o.mask_prompt;
  }
  if (FSDPC_API_SIZED(out))
    FSDPC_API_FILL(out, r);
  return FSDPC_OK;
}

FSDPC_API void fsdpc_prepare_args_init(fsdpc_prepare_args *a) {
  *a = (fsdpc_prepare_args){
      .struct_size = sizeof *a, .skip_bad = -1, .threads = 0, .show = -1, .train_on_reasoning = -1};
}

/* The options: the config's data.* keys (or the defaults), then what a
 * sets. */
static fsdpc_status prepare_opts(const fsdpc_prepare_args *a, fsdpc_prepare_opts *o,
                                 fsdpc_err *err) {
  fsdpc__prepare_opts_default(o);
  if (a->config)
    fsdpc__prepare_opts_from_config(a->config, o);
  const struct {
    const char *given;
    const char **to;
  } strs[] = {{a->tokenizer, &o->tokenizer},
              {a->chat_template, &o->chat_template},
              {a->template_name, &o->template_name},
              {a->text_field, &o->text_field},
              {a->prompt_field, &o->prompt_field},
              {a->completion_field, &o->completion_field},
              {a->instruction_field, &o->instruction_field},
              {a->input_field, &o->input_field},
              {a->output_field, &o->output_field},
              {a->system_field, &o->system_field},
              {a->messages_field, &o->messages_field},
              {a->template_kwargs, &o->template_kwargs_json}};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
    if (strs[i].given)
      *strs[i].to = strs[i].given;
  if (a->format && (o->format = fsdpc__prepare_format_parse(a->format)) < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "format '%s': expected text, instruction, prompt_completion, chat or auto",
                       a->format);
  if (a->train_on && (o->train_on = fsdpc__prepare_train_on_parse(a->train_on)) < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "train_on '%s': expected assistant, all or last_assistant", a->train_on);
  if (a->skip_bad >= 0)
    o->skip_bad = a->skip_bad != 0;
  if (a->train_on_reasoning >= 0)
    o->train_on_reasoning = a->train_on_reasoning != 0;
  o->threads = a->threads > 0 ? a->threads : 0;
  o->dry_run = a->dry_run != 0;
  o->out = a->out;
  o->show = a->show >= 0 ? a->show : (a->dry_run ? 3 : 0);
  o->inputs = a->inputs;
  o->n_inputs = a->n_inputs;
  if (a->n_inputs == 0 && a->config && a->config->data.train[0]) {
    o->inputs = (const char *const *)&a->config->data.train;
    o->n_inputs = 1;
  }
  if (o->n_inputs == 0 || (!o->out && !o->dry_run))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "prepare needs input files (or a config with data.train) and an output "
                       "file (unless it is a dry run)");
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_data_prepare(const fsdpc_prepare_args *a, fsdpc_prepare_result *out,
                                          fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || a->n_inputs < 0 || (a->n_inputs && !a->inputs))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_data_prepare: bad arguments (struct_size set by "
                       "fsdpc_prepare_args_init)");
  fsdpc_prepare_opts o;
  FSDPC_TRY(prepare_opts(a, &o, err));
  fsdpc_prepare_stats st;
  FSDPC_TRY(fsdpc__prepare(&o, &st, err));
  if (!FSDPC_API_SIZED(out))
    return FSDPC_OK;
  fsdpc_prepare_result r = {.format = fsdpc__prepare_format_name(st.format),
                            .lines = st.lines,
                            .examples = st.examples,
                            .skipped = st.skipped,
                            .weight_zero = st.weight_zero,
                            .tokens = st.tokens,
                            .target_tokens = st.target_tokens,
                            .bytes_in = st.bytes_in,
                            .seconds = st.seconds};
  snprintf(r.first_skip, sizeof r.first_skip, "%s", st.first_skip);
  FSDPC_API_FILL(out, r);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_data_cache_dir(const fsdpc_config *cfg, char *dir, size_t cap,
                                            fsdpc_err *err) {
  if (!cfg || !dir || cap == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_data_cache_dir: NULL config or buffer");
  fsdpc__dataset_cache_dir(cfg, dir, cap);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_data_cache_current(const fsdpc_config *cfg,
                                                void (*each)(void *user, const char *path),
                                                void *user, fsdpc_err *err) {
  if (!cfg || !each)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_data_cache_current: NULL config or each");
  char p[4096];
  fsdpc_err skip = {0}; /* a file whose key cannot be made now is not in use */
  const char *single[2] = {cfg->data.train, cfg->data.eval};
  for (int i = 0; i < 2; i++)
    if (single[i][0] && fsdpc__is_jsonl_path(single[i]) &&
        fsdpc__dataset_cache_file(cfg, NULL, single[i], p, sizeof p, &skip) == FSDPC_OK)
      each(user, p);
  if (cfg->data.datasets.n == 0)
    return FSDPC_OK;
  fsdpc_dataset_spec *s = NULL;
  int k = 0;
  FSDPC_TRY(fsdpc__dataset_specs(cfg, &s, &k, err));
  for (int i = 0; i < k; i++)
    if (fsdpc__is_jsonl_path(s[i].path) &&
        fsdpc__dataset_cache_file(cfg, &s[i].prep, s[i].path, p, sizeof p, &skip) == FSDPC_OK)
      each(user, p);
  fsdpc__dataset_specs_free(s, k);
  /* the mix has a name once every dataset of it is prepared */
  if (fsdpc__dataset_mix_path(cfg, p, sizeof p, &skip) == FSDPC_OK)
    each(user, p);
  return FSDPC_OK;
}

FSDPC_API int32_t fsdpc_data_cache_name(const char *name) {
  return name ? fsdpc__prepare_cache_name(name) : 0;
}
