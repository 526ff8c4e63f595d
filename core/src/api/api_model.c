/* The public API of generation (fsdpc generate): a resident model with its
 * tokenizer and chat template, prompts as ids, and generation that returns
 * ids and text. */
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"

struct fsdpc_model {
  fsdpc_infer_model *m;
  fsdpc_prompter pr;
  int32_t *eos; /* the generation config's EOS ids */
  int n_eos;
};

FSDPC_API fsdpc_status fsdpc_model_load(const fsdpc_model_args *a, fsdpc_model **out,
                                        fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || !a->dir || !out || a->n_overrides < 0 ||
      (a->n_overrides && !a->overrides))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_model_load: a model folder and out are needed (struct_size set)");
  fsdpc_model *md = calloc(1, sizeof *md);
  if (!md)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  const char *dev = a->device && strcmp(a->device, "auto") != 0 ? a->device : NULL;
  fsdpc_infer_load_opts lo = {.dir = a->dir,
                              .device = dev,
                              .attention = a->attention,
                              .overrides = a->overrides,
                              .n_overrides = a->n_overrides};
  fsdpc_status st = fsdpc__infer_model_load(&lo, &md->m, err);
  if (st == FSDPC_OK)
    st = fsdpc__prompter_open(md->m, &md->pr, err);
  if (st == FSDPC_OK)
    st = fsdpc__infer_eos_ids(md->m->weights_dir, &md->m->shape, &md->eos, &md->n_eos, err);
  if (st != FSDPC_OK) {
    fsdpc_model_destroy(md);
    return st;
  }
  *out = md;
  return FSDPC_OK;
}

FSDPC_API void fsdpc_model_destroy(fsdpc_model *m) {
  if (!m)
    return;
  fsdpc__prompter_close(&m->pr);
  free(m->eos);
  fsdpc__infer_model_free(m->m);
  free(m);
}

FSDPC_API int64_t fsdpc_model_peak_bytes(const fsdpc_model *m) {
  return m ? fsdpc__infer_model_peak_bytes(m->m) : 0;
}

FSDPC_API fsdpc_status fsdpc_model_prompt(fsdpc_model *m, const fsdpc_prompt_args *a,
                                          const char *text, const char *messages_json,
                                          int32_t **ids, int32_t *n, fsdpc_err *err) {
  if (!m || !ids || !n || (a && a->struct_size < sizeof *a))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_model_prompt: NULL model, ids or n (struct_size set)");
  return fsdpc__prompter_ids(&m->pr, a, text, messages_json, ids, n, err);
}

typedef struct stream {
  const fsdpc_generate_args *a;
} stream;

static void on_text(void *ctx, int row, const char *text, size_t len) {
  const fsdpc_generate_args *a = ((const stream *)ctx)->a;
  a->on_text(a->user, a->first_index + row, text, len);
}

/* The results as the API hands them out (the internal ones are freed). */
static fsdpc_status convert_results(fsdpc_gen_result *res, int n, fsdpc_generation **out,
                                    fsdpc_err *err) {
  fsdpc_generation *g = calloc((size_t)n, sizeof *g);
  if (!g)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int i = 0; i < n; i++) {
    g[i] = (fsdpc_generation){.struct_size = sizeof g[i],
                              .ids = res[i].ids,
                              .n_ids = res[i].n_ids,
                              .text = res[i].text,
                              .stop_reason = res[i].stop_reason ? res[i].stop_reason : "length",
                              .top_ids = res[i].top_ids,
                              .top_logits = res[i].top_vals};
    /* ownership moves to g */
    res[i].ids = NULL, res[i].text = NULL, res[i].top_ids = NULL, res[i].top_vals = NULL;
  }
  *out = g;
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_generate(fsdpc_model *m, const int32_t *const *prompts,
                                      const int32_t *lens, int32_t n, const fsdpc_generate_args *a,
                                      fsdpc_generation **out, fsdpc_err *err) {
  if (!m || !prompts || !lens || n < 1 || !a || a->struct_size < sizeof *a || !out ||
      a->n_stop < 0 || (a->n_stop && !a->stop) || a->top_logits < 0 || a->top_logits > 100)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_generate: bad arguments (prompts, n >= 1, struct_size, "
                       "top_logits 0..100)");
  int *ln = malloc((size_t)n * sizeof *ln);
  if (!ln)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int i = 0; i < n; i++)
    ln[i] = lens[i];
  const fsdpc_infer_model *im = m->m;
  fsdpc_decoder_opts dopt = {.shape = &im->shape,
                             .ops = im->ops,
                             .attention = im->attn,
                             .attention_opts = im->cfg->attention.options,
                             .no_graph = a->no_cuda_graph};
  stream ctx = {a};
  fsdpc_sampling samp = {.temperature = a->temperature,
                         .top_k = a->top_k,
                         .top_p = a->top_p == 0 ? 1.0 : a->top_p,
                         .seed = a->seed};
  fsdpc__infer_sampling_defaults(im, &samp); /* what the caller left < 0 */
  fsdpc_gen_opts g = {.max_new_tokens = a->max_new_tokens > 0 ? a->max_new_tokens : 128,
                      .sampling = samp,
                      .eos = a->ignore_eos ? NULL : m->eos,
                      .n_eos = a->ignore_eos ? 0 : m->n_eos,
                      .stop = a->stop,
                      .n_stop = a->n_stop,
                      .tok = m->pr.tok,
                      .on_text = a->on_text ? on_text : NULL,
                      .cb_ctx = &ctx,
                      .first_row = a->first_index,
                      .top_logits = a->top_logits};
  fsdpc_gen_result *res = NULL;
  fsdpc_status st =
      fsdpc__generate(&dopt, &im->weights, (const int32_t *const *)prompts, ln, n, &g, &res, err);
  free(ln);
  if (st == FSDPC_OK)
    st = convert_results(res, n, out, err);
  fsdpc__gen_results_free(res, n);
  return st;
}

FSDPC_API void fsdpc_generations_free(fsdpc_generation *g, int32_t n) {
  for (int i = 0; g && i < n; i++) {
    free(g[i].ids);
    free(g[i].text);
    free(g[i].top_ids);
    free(g[i].top_logits);
  }
  free(g);
}
