/* The model context: activation buffers, RoPE tables, the micro-batch in
 * device memory, and the attention plugin's per-device context. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/ctx.h"
#include "io/dtype.h"
#include "model/family.h"
#include "ops/cpu/ops_cpu.h"
#include "ops/fp8.h"
#include "plugin/call.h"

fsdpc_layer_acts *fsdpc__model_acts(fsdpc_model_ctx *m, int l) {
  return &m->acts[m->n_acts == 1 ? 0 : l];
}

/* Every fixed buffer the context holds, as (slot, bytes): one list that both
 * fsdpc__model_ctx_create (allocation) and fsdpc__model_ctx_bytes_for (the
 * planner) walk, so the two cannot drift apart. slot is NULL when counting. */
typedef struct buf {
  void **slot;
  size_t bytes;
} buf;

enum { MAX_BUFS = 38 };

typedef struct buf_list {
  buf b[MAX_BUFS];
  int n;
} buf_list;

static void add_buf(buf_list *l, void **slot, size_t bytes) {
  l->b[l->n].slot = slot;
  l->b[l->n].bytes = bytes ? bytes : 1;
  l->n++;
}

/* The per-layer activation slots (fsdpc_layer_acts), as indices of the
 * acts[] arrays below. */
enum {
  ACT_LN1,
  ACT_RSTD1,
  ACT_Q,
  ACT_K,
  ACT_V,
  ACT_ATTN_SAVED,
  ACT_ATTN,
  ACT_H,
  ACT_LN2,
  ACT_RSTD2,
  ACT_GATE,
  ACT_UP,
  ACT_ACT,
  ACT_QR,
  ACT_KR,
  ACT_RSTDQ,
  ACT_RSTDK,
  ACT_O,
  ACT_RSTDO,
  ACT_DN,
  ACT_RSTDD,
  ACT_COUNT
};
_Static_assert((int)ACT_COUNT == (int)FSDPC_LAYER_NACTS, "one index per activation slot");

/* The fixed buffers, and each layer's activation sizes in acts[]. */
static void list_buffers(fsdpc_model_ctx *m, const fsdpc_model_shape *s, size_t act, size_t N,
                         size_t xent_scratch, const fsdpc_attn_sizes *as, buf_list *l,
                         size_t acts[FSDPC_LAYER_NACTS]) {
  size_t C = (size_t)s->C, F = (size_t)s->F;
  size_t QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  size_t rope = (size_t)s->max_pos * (size_t)(s->rope.dim / 2) * sizeof(float);
  /* the switches' slots (1 byte when off): q/k before their norms, the
   * sublayer outputs before a post norm or multiplier */
  size_t qk = s->qk_norm ? 1 : 0, tmp = s->norm_post || s->resid_mult != 1.0f ? 1 : 0;
  size_t post = s->norm_post ? 1 : 0, pre = s->norm_pre ? 1 : 0;
  size_t rq = s->qk_norm == FSDPC_QK_NORM_HEAD ? (size_t)s->NH : 1;
  size_t rk = s->qk_norm == FSDPC_QK_NORM_HEAD ? (size_t)s->KVH : 1;
  int fwd_only = m && m->fwd_only; /* inference: no backward buffers */
  size_t ws = (size_t)(fwd_only || as->fwd_workspace > as->bwd_workspace ? as->fwd_workspace
                                                                         : as->bwd_workspace);
  size_t ib = N * sizeof(int32_t);
#define SLOT(f) (m ? (void **)&m->f : NULL)
  add_buf(l, SLOT(rope_cos), rope);
  add_buf(l, SLOT(rope_sin), rope);
  if (s->rope_local.dim > 0) { /* Gemma 3's sliding_attention layers */
    size_t local = (size_t)s->max_pos * (size_t)(s->rope_local.dim / 2) * sizeof(float);
    add_buf(l, SLOT(rope_local_cos), local);
    add_buf(l, SLOT(rope_local_sin), local);
  }
  add_buf(l, SLOT(pos), ib);
  add_buf(l, SLOT(xn), N * C * act);
  add_buf(l, SLOT(rstdf), N * sizeof(float));
  add_buf(l, SLOT(xent_scratch), xent_scratch);
  add_buf(l, SLOT(loss2), 2 * sizeof(double));
  if (fwd_only) goto no_backward;
  add_buf(l, SLOT(dres), N * C * act);
  add_buf(l, SLOT(dh), N * C * act);
  add_buf(l, SLOT(dtmp), N * C * act);
  add_buf(l, SLOT(dtmp2), N * C * act);
  add_buf(l, SLOT(dact), N * F * act);
  add_buf(l, SLOT(dgate), N * F * act);
  add_buf(l, SLOT(dup), N * F * act);
  add_buf(l, SLOT(dattn), N * QD * act);
  add_buf(l, SLOT(dq), N * QD * act);
  add_buf(l, SLOT(dk), N * KD * act);
  add_buf(l, SLOT(dv), N * KD * act);
  add_buf(l, SLOT(dqr), qk * N * QD * act);
  add_buf(l, SLOT(dkr), qk * N * KD * act);
no_backward:
  if (ws) add_buf(l, SLOT(attn_ws), ws);
#undef SLOT
  size_t a[FSDPC_LAYER_NACTS] = {[ACT_LN1] = pre * N * C * act,
                                 [ACT_RSTD1] = pre * N * sizeof(float),
                                 [ACT_Q] = N * QD * act,
                                 [ACT_K] = N * KD * act,
                                 [ACT_V] = N * KD * act,
                                 [ACT_ATTN_SAVED] = (size_t)as->saved_bytes,
                                 [ACT_ATTN] = N * QD * act,
                                 [ACT_H] = N * C * act,
                                 [ACT_LN2] = pre * N * C * act,
                                 [ACT_RSTD2] = pre * N * sizeof(float),
                                 [ACT_GATE] = N * F * act,
                                 [ACT_UP] = N * F * act,
                                 [ACT_ACT] = N * F * act,
                                 [ACT_QR] = qk * N * QD * act,
                                 [ACT_KR] = qk * N * KD * act,
                                 [ACT_RSTDQ] = qk * N * rq * sizeof(float),
                                 [ACT_RSTDK] = qk * N * rk * sizeof(float),
                                 [ACT_O] = tmp * N * C * act,
                                 [ACT_RSTDO] = post * N * sizeof(float),
                                 [ACT_DN] = tmp * N * C * act,
                                 [ACT_RSTDD] = post * N * sizeof(float)};
  for (int i = 0; i < FSDPC_LAYER_NACTS; i++) acts[i] = a[i] ? a[i] : 1;
}

/* A layer's activation slots, indexed like list_buffers' acts[]. */
static void acts_fields(fsdpc_layer_acts *a, void **f[FSDPC_LAYER_NACTS]) {
  f[ACT_LN1] = &a->ln1, f[ACT_RSTD1] = (void **)&a->rstd1, f[ACT_Q] = &a->q, f[ACT_K] = &a->k;
  f[ACT_V] = &a->v, f[ACT_ATTN_SAVED] = &a->attn_saved, f[ACT_ATTN] = &a->attn, f[ACT_H] = &a->h;
  f[ACT_LN2] = &a->ln2, f[ACT_RSTD2] = (void **)&a->rstd2, f[ACT_GATE] = &a->gate;
  f[ACT_UP] = &a->up, f[ACT_ACT] = &a->act, f[ACT_QR] = &a->qr, f[ACT_KR] = &a->kr;
  f[ACT_RSTDQ] = (void **)&a->rstdq, f[ACT_RSTDK] = (void **)&a->rstdk, f[ACT_O] = &a->o;
  f[ACT_RSTDO] = (void **)&a->rstdo, f[ACT_DN] = &a->dn, f[ACT_RSTDD] = (void **)&a->rstdd;
}

/* Bytes of one saved gate or up projection under FSDPC_AC_SAVE_MLP, else 0;
 * the shared acts[] slots are then left out (0 bytes, not allocated). */
static size_t saved_mlp_bytes(int ckpt, size_t acts[FSDPC_LAYER_NACTS]) {
  if (ckpt != FSDPC_AC_SAVE_MLP) return 0;
  size_t b = acts[ACT_GATE];
  acts[ACT_GATE] = acts[ACT_UP] = 0;
  return b;
}

static size_t total_bytes(const fsdpc_model_shape *s, int B, int T, int ckpt, size_t act,
                          size_t xent_scratch, const fsdpc_attn_sizes *as) {
  buf_list l = {.n = 0};
  size_t acts[FSDPC_LAYER_NACTS], N = (size_t)B * (size_t)T, t = 0;
  list_buffers(NULL, s, act, N, xent_scratch, as, &l, acts);
  for (int i = 0; i < l.n; i++) t += l.b[i].bytes;
  t += ((size_t)s->L + 1) * N * (size_t)s->C * act; /* residual stream */
  t += 2 * (size_t)s->L * saved_mlp_bytes(ckpt, acts);
  for (int i = 0; i < FSDPC_LAYER_NACTS; i++) t += (ckpt ? 1 : (size_t)s->L) * acts[i];
  return t;
}

/* The FP8 projections' scratch on a device: the largest of the seven
 * projections' (fsdpc__fp8_linear_scratch_bytes); 0 on the CPU, whose
 * emulation allocates its own, and without FP8. */
static size_t fp8_scratch_bytes(const fsdpc_model_shape *s, int fp8, int32_t device, size_t N) {
  if (!fp8 || device == FSDPC_DEVICE_CPU)
    return 0;
  size_t C = (size_t)s->C, F = (size_t)s->F;
  size_t QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  const size_t io[5][2] = {{C, QD}, {C, KD}, {QD, C}, {C, F}, {F, C}};
  size_t b = 0;
  for (int i = 0; i < 5; i++) {
    size_t x = fsdpc__fp8_linear_scratch_bytes(N, io[i][0], io[i][1]);
    if (x > b)
      b = x;
  }
  return b;
}

int fsdpc__model_xent_chunk_rows(int opt, int N, int V) {
  int c = opt;
  if (c < 1) { /* auto: the largest multiple of 64 rows with at most 2^28 logits */
    long long r = ((1LL << 28) / (V > 0 ? V : 1)) / 64 * 64;
    c = r < 64 ? 64 : r > (1LL << 30) ? (1 << 30) : (int)r;
  }
  return c > N ? N : c;
}

uint64_t fsdpc__model_ctx_bytes_for(const fsdpc_model_shape *s, int B, int T,
                                    int activation_checkpointing, const fsdpc_attn_sizes *as,
                                    int xent_chunk_rows) {
  const fsdpc_ops *ops = fsdpc__ops_cpu();
  int N = B * T, chunk = fsdpc__model_xent_chunk_rows(xent_chunk_rows, N, s->V);
  return total_bytes(s, B, T, activation_checkpointing, ops->act_size,
                     ops->xent_scratch_bytes(N, s->V, chunk, 0), as);
}

float fsdpc__model_attn_scale(const fsdpc_model_shape *s) {
  return s->attn_scale > 0.0f ? s->attn_scale : (float)(1.0 / sqrt((double)s->HD));
}

fsdpc_status fsdpc__model_attn_window_check(const fsdpc_component *attn, const fsdpc_model_shape *s,
                                            fsdpc_err *err) {
  const fsdpc_attention_v1 *av = attn->vtable;
  if (s->window <= 0 || (FSDPC_HAS_FIELD(av, fsdpc_attention_v1, features) &&
                         (av->features & FSDPC_ATTN_FEATURE_WINDOW)))
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "attention plugin '%s' does not compute a sliding window, and this model "
                     "attends through one of %d tokens (model.sliding_window); use attention.impl "
                     "naive or flash",
                     attn->desc->name, s->window);
}

void fsdpc__model_shape_for_dtype(fsdpc_model_shape *s, int32_t act_dtype) {
  /* Gemma2Model multiplies by sqrt(hidden_size) as a tensor of the
   * activations' dtype */
  if ((s->family == FSDPC_FAMILY_GEMMA2 || s->family == FSDPC_FAMILY_GEMMA3) &&
      act_dtype == FSDPC_DTYPE_BF16)
    s->embed_mult = fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(s->embed_mult));
}

fsdpc_status fsdpc__model_features_check(const fsdpc_component *attn, const fsdpc_ops *ops,
                                         const fsdpc_model_shape *s, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__model_attn_window_check(attn, s, err));
  const fsdpc_attention_v1 *av = attn->vtable;
  if (s->attn_softcap > 0.0f && !(FSDPC_HAS_FIELD(av, fsdpc_attention_v1, features) &&
                                  (av->features & FSDPC_ATTN_FEATURE_SOFTCAP)))
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "attention plugin '%s' does not compute logit soft-capping "
                       "(model.attn_logit_softcapping %g); use attention.impl naive",
                       attn->desc->name, (double)s->attn_softcap);
  const fsdpc_family_info *fi = fsdpc__family(s->family);
  const char *mt = fi ? fi->model_type : "?";
  if ((s->norm_offset != 0.0f && !(ops->rmsnorm_off_fwd && ops->rmsnorm_off_bwd)) ||
      (s->act == FSDPC_ACT_GELU_TANH && !(ops->geglu_fwd && ops->geglu_bwd)))
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "model_type %s: this device does not compute its (1 + w) norms and "
                       "GeGLU; train it on the CPU",
                       mt);
  if (s->logit_softcap > 0.0f && !ops->lmhead_xent_capped)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "model_type %s: this device does not soft-cap the final logits "
                       "(final_logit_softcapping %g) yet; train it on the CPU",
                       mt, (double)s->logit_softcap);
  return FSDPC_OK;
}

static fsdpc_status setup_attention(fsdpc_model_ctx *m, const fsdpc_model_ctx_opts *o,
                                    fsdpc_err *err) {
  const fsdpc_model_shape *s = o->shape;
  int dev_index = m->ops->device == FSDPC_DEVICE_CPU ? -1 : 0;
  int32_t r =
      fsdpc__call_attn_create(m->attn, o->attention_opts, m->ops->device, dev_index, &m->actx);
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(m->attn, r, err);
  m->ashape = (fsdpc_attn_shape){.struct_size = sizeof(fsdpc_attn_shape),
                                 .B = o->B,
                                 .T = o->T,
                                 .NH = s->NH,
                                 .KVH = s->KVH,
                                 .HD = s->HD,
                                 .causal = 1,
                                 .scale = fsdpc__model_attn_scale(s),
                                 .dtype = m->ops->act_dtype,
                                 .device = m->ops->device,
                                 .host = m->attn->host,
                                 .num_threads = o->threads,
                                 .window = s->window,
                                 .softcap = s->attn_softcap};
  FSDPC_TRY(fsdpc__model_features_check(m->attn, m->ops, s, err));
  if (m->av->supports && m->av->supports(&m->ashape) != FSDPC_OK)
    return fsdpc__plugin_fail(m->attn, FSDPC_UNSUPPORTED, err);
  m->ashape.window = 0; /* set per layer (fsdpc__layer_window) */
  m->asizes.struct_size = sizeof m->asizes;
  r = m->av->sizes(m->actx, &m->ashape, &m->asizes);
  return r == FSDPC_OK ? FSDPC_OK : fsdpc__plugin_fail(m->attn, r, err);
}

void *fsdpc__model_mem(fsdpc_model_ctx *m, size_t bytes) {
  if (!m->blk && !m->counting)
    return m->ops->alloc(m->dev, FSDPC_MEM_ACTIVATIONS, bytes);
  size_t a = m->blk_align, r = (bytes + a - 1) / a * a;
  if (!m->counting && r > m->blk_size - m->blk_used)
    return NULL; /* the block is smaller than planned: reported as out of memory */
  void *p = m->counting ? (void *)m : m->blk + m->blk_used;
  m->blk_used += r;
  m->counted += bytes;
  if (!m->counting && m->ops->account)
    m->ops->account(m->dev, FSDPC_MEM_ACTIVATIONS, (int64_t)bytes);
  return p;
}

void fsdpc__model_mem_free(fsdpc_model_ctx *m, void *p, size_t bytes) {
  if (m->counting || !p)
    return;
  if (!m->blk) {
    m->ops->free(m->dev, FSDPC_MEM_ACTIVATIONS, p, bytes);
    return;
  }
  if (m->ops->account) /* the bytes stay the arena's */
    m->ops->account(m->dev, FSDPC_MEM_ACTIVATIONS, -(int64_t)bytes);
}

static fsdpc_status alloc_buffers(fsdpc_model_ctx *m, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  size_t act = m->ops->act_size, N = (size_t)m->N, C = (size_t)s->C;
  buf_list l = {.n = 0};
  size_t acts[FSDPC_LAYER_NACTS];
  m->resid = calloc((size_t)s->L + 1, sizeof(void *));
  m->n_acts = m->ckpt ? 1 : s->L;
  m->acts = calloc((size_t)m->n_acts, sizeof *m->acts);
  if (!m->resid || !m->acts) goto oom;
  list_buffers(m, s, act, N, m->xent_scratch_bytes, &m->asizes, &l, acts);
  size_t mlp = saved_mlp_bytes(m->ckpt, acts);
  if (mlp) {
    m->mlp_gate = calloc((size_t)s->L, sizeof(void *));
    m->mlp_up = calloc((size_t)s->L, sizeof(void *));
    if (!m->mlp_gate || !m->mlp_up) goto oom;
    for (int i = 0; i < s->L; i++)
      if (!(m->mlp_gate[i] = fsdpc__model_mem(m, mlp)) ||
          !(m->mlp_up[i] = fsdpc__model_mem(m, mlp)))
        goto oom;
  }
  for (int i = 0; i < l.n; i++)
    if (!(*l.b[i].slot = fsdpc__model_mem(m, l.b[i].bytes)))
      goto oom;
  for (int i = 0; i <= s->L; i++)
    if (!(m->resid[i] = fsdpc__model_mem(m, N * C * act)))
      goto oom;
  for (int a = 0; a < m->n_acts; a++) {
    void **f[FSDPC_LAYER_NACTS];
    acts_fields(&m->acts[a], f);
    for (int i = 0; i < FSDPC_LAYER_NACTS; i++)
      if (acts[i] && !(*f[i] = fsdpc__model_mem(m, acts[i])))
        goto oom;
  }
  if (m->ops->device != FSDPC_DEVICE_CPU) { /* the micro-batch goes up each step */
    size_t ib = N * sizeof(int32_t);
    if (!(m->d_tokens = fsdpc__model_mem(m, ib)) || !(m->d_labels = fsdpc__model_mem(m, ib)) ||
        !(m->d_doc_ids = fsdpc__model_mem(m, ib)))
      goto oom;
  }
  if (m->fp8_scratch_bytes && !(m->fp8_scratch = fsdpc__model_mem(m, m->fp8_scratch_bytes)))
    goto oom;
  m->bytes = total_bytes(s, m->B, m->T, m->ckpt, act, m->xent_scratch_bytes, &m->asizes) +
             m->fp8_scratch_bytes;
  return FSDPC_OK;
oom:
  return fsdpc__ops_oom(m->ops, err,
                        "for activations (micro-batch %d x %d); lower "
                        "train.micro_batch_size or data.seq_len, or enable "
                        "fsdp.activation_checkpointing",
                        m->B, m->T);
}

static fsdpc_status init_tables(fsdpc_model_ctx *m, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  size_t N = (size_t)m->N;
  int32_t *pos = malloc(N * sizeof(int32_t));
  if (!pos) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (size_t i = 0; i < N; i++) pos[i] = (int32_t)(i % (size_t)m->T);
  fsdpc_status st = m->ops->upload(m->dev, m->pos, pos, N * sizeof(int32_t), err);
  free(pos);
  FSDPC_TRY(st);
  m->rope_long = fsdpc__rope_uses_long(&s->rope, m->T);
  if (s->rope_local.dim > 0) /* plain RoPE: one table at every length */
    FSDPC_TRY(m->ops->rope_tables(m->dev, m->rope_local_cos, m->rope_local_sin, &s->rope_local,
                                  s->max_pos, 0, err));
  return m->ops->rope_tables(m->dev, m->rope_cos, m->rope_sin, &s->rope, s->max_pos, m->rope_long,
                             err);
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
  const fsdpc_ops *ops = o->ops ? o->ops : fsdpc__ops_cpu();
  if (o->linear_fp8 && (!ops->fp8_matmul_fwd || !ops->fp8_matmul_bwd))
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "fsdp.mixed_precision.linear=fp8: this device's ops have no FP8 GEMM; "
                       "set it to bf16");
  fsdpc_model_ctx *m = calloc(1, sizeof *m);
  if (!m) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the model context");
  m->s = *s;
  fsdpc__model_shape_for_dtype(&m->s, o->ops ? o->ops->act_dtype : FSDPC_DTYPE_F32);
  m->ops = ops;
  m->dev = m->ops->ctx;
  m->B = o->B;
  m->T = o->T;
  m->N = o->B * o->T;
  m->ckpt = o->activation_checkpointing;
  m->fwd_only = o->forward_only;
  m->attn = o->attention;
  m->av = o->attention->vtable;
  m->chunk_rows = fsdpc__model_xent_chunk_rows(o->xent_chunk_rows, m->N, s->V);
  m->logits_bf16 = o->logits_bf16;
  m->fp8 = o->linear_fp8;
  m->fp8_scratch_bytes = fp8_scratch_bytes(s, m->fp8, m->ops->device, (size_t)m->N);
  m->xent_scratch_bytes = m->ops->xent_scratch_bytes(m->N, s->V, m->chunk_rows, m->logits_bf16);
  if (o->arena) { /* carved from the engine's arena (fsdp/memplan.h) */
    m->blk = o->arena;
    m->blk_size = o->arena_bytes;
    m->blk_align = fsdpc__ops_arena_align(m->ops->device);
  }
  fsdpc_status st = setup_attention(m, o, err);
  if (st == FSDPC_OK) st = alloc_buffers(m, err);
  if (st == FSDPC_OK) st = init_tables(m, err);
  if (st == FSDPC_OK && o->lora)
    st = fsdpc__lora_ctx_alloc(m, o->lora, err);
  if (st != FSDPC_OK) {
    fsdpc__model_ctx_destroy(m);
    return st;
  }
  *out = m;
  return FSDPC_OK;
}

void fsdpc__model_ctx_destroy(fsdpc_model_ctx *m) {
  if (!m) return;
  const fsdpc_model_shape *s = &m->s;
  size_t act = m->ops->act_size, N = (size_t)m->N, C = (size_t)s->C, ib = N * sizeof(int32_t);
  if (m->actx && m->av->destroy) m->av->destroy(m->actx);
  fsdpc__lora_ctx_free(m);
  buf_list l = {.n = 0};
  size_t acts[FSDPC_LAYER_NACTS];
  list_buffers(m, s, act, N, m->xent_scratch_bytes, &m->asizes, &l, acts);
  size_t mlp = saved_mlp_bytes(m->ckpt, acts);
  for (int i = 0; i < l.n; i++)
    if (*l.b[i].slot)
      fsdpc__model_mem_free(m, *l.b[i].slot, l.b[i].bytes);
  for (int i = 0; i < s->L; i++) {
    if (m->mlp_gate && m->mlp_gate[i])
      fsdpc__model_mem_free(m, m->mlp_gate[i], mlp);
    if (m->mlp_up && m->mlp_up[i])
      fsdpc__model_mem_free(m, m->mlp_up[i], mlp);
  }
  free(m->mlp_gate);
  free(m->mlp_up);
  for (int i = 0; m->resid && i <= s->L; i++)
    if (m->resid[i])
      fsdpc__model_mem_free(m, m->resid[i], N * C * act);
  for (int a = 0; m->acts && a < m->n_acts; a++) {
    void **f[FSDPC_LAYER_NACTS];
    acts_fields(&m->acts[a], f);
    for (int i = 0; i < FSDPC_LAYER_NACTS; i++)
      if (*f[i])
        fsdpc__model_mem_free(m, *f[i], acts[i]);
  }
  if (m->d_tokens)
    fsdpc__model_mem_free(m, m->d_tokens, ib);
  if (m->d_labels)
    fsdpc__model_mem_free(m, m->d_labels, ib);
  if (m->d_doc_ids)
    fsdpc__model_mem_free(m, m->d_doc_ids, ib);
  if (m->loss_host) m->ops->free_host(m->dev, m->loss_host);
  free(m->resid);
  free(m->acts);
  free(m);
}

uint64_t fsdpc__model_ctx_bytes(const fsdpc_model_ctx *m) { return m->bytes; }

uint64_t fsdpc__model_ctx_arena_bytes(const fsdpc_model_ctx_opts *o, const fsdpc_attn_sizes *as,
                                      int32_t device, size_t act_size, size_t align,
                                      uint64_t *tracked) {
  /* the context's own allocation code, counting instead of allocating */
  fsdpc_ops ops = {.device = device, .act_size = act_size};
  fsdpc_model_ctx m = {.s = *o->shape, .ops = &ops, .B = o->B, .T = o->T, .N = o->B * o->T};
  m.ckpt = o->activation_checkpointing;
  m.fwd_only = o->forward_only;
  m.chunk_rows = fsdpc__model_xent_chunk_rows(o->xent_chunk_rows, m.N, o->shape->V);
  m.logits_bf16 = o->logits_bf16;
  m.fp8_scratch_bytes = fp8_scratch_bytes(o->shape, o->linear_fp8, device, (size_t)m.N);
  m.xent_scratch_bytes =
      fsdpc__xent_scratch_bytes(device, m.N, o->shape->V, m.chunk_rows, m.logits_bf16);
  m.asizes = *as;
  m.counting = 1;
  m.blk_align = align;
  fsdpc_err err;
  fsdpc_status st = alloc_buffers(&m, &err);
  if (st == FSDPC_OK && o->lora)
    st = fsdpc__lora_ctx_alloc(&m, o->lora, &err);
  free(m.resid);
  free(m.acts);
  free(m.mlp_gate);
  free(m.mlp_up);
  free(m.lora_u);
  *tracked = st == FSDPC_OK ? m.counted : 0;
  return st == FSDPC_OK ? m.blk_used : 0;
}

/* longrope switches to its long factors when the batch's largest position
 * + 1 passes original_max_position_embeddings, as transformers does for
 * each forward: the tables are made again when that changes. */
static fsdpc_status rope_for(fsdpc_model_ctx *m, int seq_len, fsdpc_err *err) {
  int want = fsdpc__rope_uses_long(&m->s.rope, seq_len);
  if (want == m->rope_long)
    return FSDPC_OK;
  m->rope_long = want;
  return m->ops->rope_tables(m->dev, m->rope_cos, m->rope_sin, &m->s.rope, m->s.max_pos, want, err);
}

/* Positions: 0..T-1 per row, or, with document ids (packed examples), 0 at
 * the first token of each document so that every example sees the
 * positions it would have alone. Uploaded only when they change. */
static fsdpc_status set_positions(fsdpc_model_ctx *m, const int32_t *doc_ids, fsdpc_err *err) {
  if (!doc_ids && !m->pos_per_doc)
    return rope_for(m, m->T, err);
  size_t N = (size_t)m->N, T = (size_t)m->T, longest = 0;
  int32_t *pos = malloc(N * sizeof(int32_t));
  if (!pos) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (size_t i = 0, p = 0; i < N; i++, p++) {
    if (i % T == 0 || (doc_ids && doc_ids[i] != doc_ids[i - 1])) p = 0;
    pos[i] = (int32_t)p;
    if (p + 1 > longest)
      longest = p + 1;
  }
  fsdpc_status st = m->ops->upload(m->dev, m->pos, pos, N * sizeof(int32_t), err);
  free(pos);
  m->pos_per_doc = doc_ids != NULL;
  return st == FSDPC_OK ? rope_for(m, (int)longest, err) : st;
}

fsdpc_status fsdpc__model_set_batch(fsdpc_model_ctx *m, const int32_t *tokens,
                                    const int32_t *labels, const int32_t *doc_ids,
                                    fsdpc_err *err) {
  m->h_tokens = tokens;
  m->h_labels = labels;
  FSDPC_TRY(set_positions(m, doc_ids, err));
  if (m->ops->device == FSDPC_DEVICE_CPU) {
    m->tokens = tokens;
    m->labels = labels;
    m->doc_ids = doc_ids;
    return FSDPC_OK;
  }
  size_t ib = (size_t)m->N * sizeof(int32_t);
  FSDPC_TRY(m->ops->upload(m->dev, m->d_tokens, tokens, ib, err));
  FSDPC_TRY(m->ops->upload(m->dev, m->d_labels, labels, ib, err));
  if (doc_ids) FSDPC_TRY(m->ops->upload(m->dev, m->d_doc_ids, doc_ids, ib, err));
  m->tokens = m->d_tokens;
  m->labels = m->d_labels;
  m->doc_ids = doc_ids ? m->d_doc_ids : NULL;
  return FSDPC_OK;
}
