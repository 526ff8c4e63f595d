/* The model context (activation buffers, RoPE tables, attention plugin) and
 * the embedding and head blocks, forward and backward side by side. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/ctx.h"
#include "ops/cpu/ops_cpu.h"
#include "util/mem.h"

static float *alloc_f(fsdpc_model_ctx *m, size_t n) {
  m->bytes += n * sizeof(float);
  return fsdpc__mem_alloc(FSDPC_MEM_ACTIVATIONS, n * sizeof(float));
}

static void free_f(void *p, size_t n) { fsdpc__mem_free(FSDPC_MEM_ACTIVATIONS, p, n * 4); }

fsdpc_layer_acts *fsdpc__model_acts(fsdpc_model_ctx *m, int l) {
  return &m->acts[m->n_acts == 1 ? 0 : l];
}

static void acts_sizes(const fsdpc_model_ctx *m, size_t sz[13]) {
  size_t N = (size_t)m->N, C = (size_t)m->s.C, F = (size_t)m->s.F;
  size_t QD = (size_t)m->s.NH * m->s.HD, KD = (size_t)m->s.KVH * m->s.HD;
  size_t saved = (size_t)((m->asizes.saved_bytes + 3) / 4);
  size_t v[13] = {N * C, N, N * QD, N * KD, N * KD, saved, N * QD,
                  N * C, N * C, N, N * F, N * F, N * F};
  memcpy(sz, v, sizeof v);
}

/* The 13 activation buffers of a layer, in the order of acts_sizes(). */
static void acts_fields(fsdpc_layer_acts *a, float **f[13]) {
  float **p[13] = {&a->ln1, &a->rstd1, &a->q,   &a->k,     &a->v,    &a->attn_saved, &a->attn,
                   &a->h,   &a->ln2,   &a->rstd2, &a->gate, &a->up,   &a->act};
  memcpy(f, p, sizeof p);
}

fsdpc_status fsdpc__model_ctx_create(const fsdpc_model_ctx_opts *o, fsdpc_model_ctx **out,
                                     fsdpc_err *err) {
  const fsdpc_model_shape *s = o->shape;
  FSDPC_TRY(fsdpc__model_shape_check(s, err));
  if (o->T > s->max_pos)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "data.seq_len (%d) exceeds model.max_position_embeddings (%d)", o->T,
                       s->max_pos);
  if (!o->attention || !o->attention->vtable)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "model: no attention component");
  fsdpc_model_ctx *m = calloc(1, sizeof *m);
  if (!m) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the model context");
  m->s = *s;
  m->B = o->B;
  m->T = o->T;
  m->N = o->B * o->T;
  m->ckpt = o->activation_checkpointing;
  m->attn = o->attention;
  m->av = o->attention->vtable;
  fsdpc_status st;
  if (m->av->create) {
    int32_t r = m->av->create(o->attention_opts, FSDPC_DEVICE_CPU, -1, &m->actx);
    if (r != FSDPC_OK) {
      st = fsdpc__plugin_fail(m->attn, r, err);
      goto fail;
    }
  }
  m->ashape = (fsdpc_attn_shape){.struct_size = sizeof(fsdpc_attn_shape),
                                 .B = o->B, .T = o->T, .NH = s->NH, .KVH = s->KVH,
                                 .HD = s->HD, .causal = 1,
                                 .scale = (float)(1.0 / sqrt((double)s->HD)),
                                 .dtype = FSDPC_DTYPE_F32, .device = FSDPC_DEVICE_CPU};
  if (m->av->supports && m->av->supports(&m->ashape) != FSDPC_OK) {
    st = fsdpc__plugin_fail(m->attn, FSDPC_UNSUPPORTED, err);
    goto fail;
  }
  m->asizes.struct_size = sizeof m->asizes;
  int32_t r = m->av->sizes(m->actx, &m->ashape, &m->asizes);
  if (r != FSDPC_OK) {
    st = fsdpc__plugin_fail(m->attn, r, err);
    goto fail;
  }

  size_t N = (size_t)m->N, C = (size_t)s->C, F = (size_t)s->F, V = (size_t)s->V;
  size_t QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  m->chunk_rows = o->xent_chunk_rows > 0 ? o->xent_chunk_rows : 64;
  if ((size_t)m->chunk_rows > N) m->chunk_rows = (int)N;

  m->pos = calloc(N, sizeof(int32_t));
  m->rope_cos = alloc_f(m, (size_t)s->max_pos * s->HD / 2);
  m->rope_sin = alloc_f(m, (size_t)s->max_pos * s->HD / 2);
  m->resid = calloc((size_t)s->L + 1, sizeof(float *));
  m->n_acts = m->ckpt ? 1 : s->L;
  m->acts = calloc((size_t)m->n_acts, sizeof *m->acts);
  if (!m->pos || !m->rope_cos || !m->rope_sin || !m->resid || !m->acts) goto oom;
  for (int i = 0; i < m->N; i++) m->pos[i] = i % m->T;
  fsdpc__rope_tables(m->rope_cos, m->rope_sin, s->max_pos, s->HD, s->rope_theta,
                     s->rope_llama3, s->rope_factor, s->rope_low_freq_factor,
                     s->rope_high_freq_factor, s->rope_original_max_pos);
  for (int l = 0; l <= s->L; l++)
    if (!(m->resid[l] = alloc_f(m, N * C))) goto oom;
  size_t sz[13];
  acts_sizes(m, sz);
  for (int l = 0; l < m->n_acts; l++) {
    float **f[13];
    acts_fields(&m->acts[l], f);
    for (int i = 0; i < 13; i++)
      if (!(*f[i] = alloc_f(m, sz[i] ? sz[i] : 1))) goto oom;
  }
  size_t ws = (size_t)(m->asizes.fwd_workspace > m->asizes.bwd_workspace
                           ? m->asizes.fwd_workspace
                           : m->asizes.bwd_workspace);
  m->attn_ws = ws ? alloc_f(m, (ws + 3) / 4) : NULL;
  if (ws && !m->attn_ws) goto oom;
  if (!(m->xn = alloc_f(m, N * C)) || !(m->rstdf = alloc_f(m, N)) ||
      !(m->xent_scratch = alloc_f(m, (size_t)m->chunk_rows * V)) ||
      !(m->dres = alloc_f(m, N * C)) || !(m->dh = alloc_f(m, N * C)) ||
      !(m->dtmp = alloc_f(m, N * C)) || !(m->dtmp2 = alloc_f(m, N * C)) ||
      !(m->dact = alloc_f(m, N * F)) || !(m->dgate = alloc_f(m, N * F)) ||
      !(m->dup = alloc_f(m, N * F)) || !(m->dattn = alloc_f(m, N * QD)) ||
      !(m->dq = alloc_f(m, N * QD)) || !(m->dk = alloc_f(m, N * KD)) ||
      !(m->dv = alloc_f(m, N * KD)))
    goto oom;
  *out = m;
  return FSDPC_OK;
oom:
  st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                   "out of host memory for activations (micro-batch %d x %d); lower "
                   "train.micro_batch_size or data.seq_len, or enable "
                   "fsdp.activation_checkpointing",
                   o->B, o->T);
fail:
  fsdpc__model_ctx_destroy(m);
  return st;
}

void fsdpc__model_ctx_destroy(fsdpc_model_ctx *m) {
  if (!m) return;
  const fsdpc_model_shape *s = &m->s;
  size_t N = (size_t)m->N, C = (size_t)s->C, F = (size_t)s->F, V = (size_t)s->V;
  size_t QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  if (m->actx && m->av->destroy) m->av->destroy(m->actx);
  free(m->pos);
  free_f(m->rope_cos, (size_t)s->max_pos * s->HD / 2);
  free_f(m->rope_sin, (size_t)s->max_pos * s->HD / 2);
  if (m->resid)
    for (int l = 0; l <= s->L; l++) free_f(m->resid[l], N * C);
  free(m->resid);
  if (m->acts) {
    size_t sz[13];
    acts_sizes(m, sz);
    for (int l = 0; l < m->n_acts; l++) {
      float **f[13];
      acts_fields(&m->acts[l], f);
      for (int i = 0; i < 13; i++) free_f(*f[i], sz[i] ? sz[i] : 1);
    }
  }
  free(m->acts);
  size_t ws = (size_t)(m->asizes.fwd_workspace > m->asizes.bwd_workspace
                           ? m->asizes.fwd_workspace
                           : m->asizes.bwd_workspace);
  free_f(m->attn_ws, (ws + 3) / 4);
  free_f(m->xn, N * C);
  free_f(m->rstdf, N);
  free_f(m->xent_scratch, (size_t)m->chunk_rows * V);
  free_f(m->dres, N * C);
  free_f(m->dh, N * C);
  free_f(m->dtmp, N * C);
  free_f(m->dtmp2, N * C);
  free_f(m->dact, N * F);
  free_f(m->dgate, N * F);
  free_f(m->dup, N * F);
  free_f(m->dattn, N * QD);
  free_f(m->dq, N * QD);
  free_f(m->dk, N * KD);
  free_f(m->dv, N * KD);
  free(m);
}

uint64_t fsdpc__model_ctx_bytes(const fsdpc_model_ctx *m) { return m->bytes; }

uint64_t fsdpc__model_ctx_bytes_for(const fsdpc_model_shape *s, int B, int T,
                                    int activation_checkpointing, const fsdpc_attn_sizes *as,
                                    int xent_chunk_rows) {
  /* Mirrors fsdpc__model_ctx_create's alloc_f calls, in elements. */
  uint64_t N = (uint64_t)B * (uint64_t)T, C = (uint64_t)s->C, F = (uint64_t)s->F;
  uint64_t V = (uint64_t)s->V, QD = (uint64_t)s->NH * s->HD, KD = (uint64_t)s->KVH * s->HD;
  uint64_t chunk = xent_chunk_rows > 0 ? (uint64_t)xent_chunk_rows : 64;
  if (chunk > N)
    chunk = N;
  uint64_t saved = (as->saved_bytes + 3) / 4;
  uint64_t layer[13] = {N * C, N,     N * QD, N * KD, N * KD, saved, N * QD,
                        N * C, N * C, N,      N * F,  N * F,  N * F};
  uint64_t per_layer = 0;
  for (int i = 0; i < 13; i++)
    per_layer += layer[i] ? layer[i] : 1;
  uint64_t n_acts = activation_checkpointing ? 1 : (uint64_t)s->L;
  uint64_t ws = as->fwd_workspace > as->bwd_workspace ? as->fwd_workspace : as->bwd_workspace;
  uint64_t el = 2 * ((uint64_t)s->max_pos * s->HD / 2) /* rope tables */
                + ((uint64_t)s->L + 1) * N * C         /* residual stream */
                + n_acts * per_layer + (ws ? (ws + 3) / 4 : 0) + N * C + N +
                chunk * V                                          /* final norm, CE chunk */
                + 4 * N * C + 3 * N * F + 2 * N * QD + 2 * N * KD; /* backward scratch */
  return el * 4;
}

void fsdpc__model_set_batch(fsdpc_model_ctx *m, const int32_t *tokens, const int32_t *labels,
                            const int32_t *doc_ids) {
  m->tokens = tokens;
  m->labels = labels;
  m->doc_ids = doc_ids;
}

fsdpc_status fsdpc__model_embed_fwd(fsdpc_model_ctx *m, const float *wte, fsdpc_err *err) {
  for (int i = 0; i < m->N; i++)
    if (m->tokens[i] < 0 || m->tokens[i] >= m->s.V)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "token id %d at batch position %d is outside the vocabulary "
                         "(model.vocab_size %d)",
                         m->tokens[i], i, m->s.V);
  fsdpc__cpu_embedding_fwd(m->resid[0], m->tokens, wte, m->N, m->s.C);
  return FSDPC_OK;
}

fsdpc_status fsdpc__model_embed_bwd(fsdpc_model_ctx *m, float *dwte, fsdpc_err *err) {
  fsdpc__cpu_embedding_bwd(dwte, m->dres, m->tokens, m->N, m->s.C);
  return FSDPC_OK;
}

fsdpc_status fsdpc__model_head_fwd_bwd(fsdpc_model_ctx *m, const float *norm_w,
                                       const float *head_w, float grad_scale, float *dnorm_w,
                                       float *dhead_w, double *loss_sum, int64_t *count,
                                       fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C;
  for (int i = 0; i < N; i++)
    if (m->labels[i] != -100 && (m->labels[i] < 0 || m->labels[i] >= s->V))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "label %d at batch position %d is outside the vocabulary (%d)",
                         m->labels[i], i, s->V);
  const float *x = m->resid[s->L];
  fsdpc__cpu_rmsnorm_fwd(m->xn, m->rstdf, x, norm_w, N, C, s->eps);
  int bwd = grad_scale != 0.0f;
  fsdpc__cpu_lmhead_xent(loss_sum, count, bwd ? m->dtmp : NULL, bwd ? dhead_w : NULL, m->xn,
                         head_w, m->labels, N, C, s->V, grad_scale, m->chunk_rows,
                         m->xent_scratch);
  if (bwd) fsdpc__cpu_rmsnorm_bwd(m->dres, dnorm_w, m->dtmp, x, norm_w, m->rstdf, N, C);
  return FSDPC_OK;
}

fsdpc_status fsdpc__model_logits_at(fsdpc_model_ctx *m, int pos, const float *norm_w,
                                    const float *head_w, float *out, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int C = s->C;
  if (pos < 0 || pos >= m->T)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "logits position %d outside [0, %d)", pos, m->T);
  for (int b = 0; b < m->B; b++) {
    const float *x = m->resid[s->L] + ((size_t)b * m->T + pos) * C;
    float rstd;
    float *xn = m->xn; /* one row of scratch */
    fsdpc__cpu_rmsnorm_fwd(xn, &rstd, x, norm_w, 1, C, s->eps);
    fsdpc__cpu_logits(out + (size_t)b * s->V, xn, head_w, 1, C, s->V);
  }
  return FSDPC_OK;
}
