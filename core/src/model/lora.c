/* LoRA adapters: the parameter list, the init, the context's buffers and
 * the forward and backward of one adapter (see lora.h for the maths).
 * Parameter gradients +=, activation gradients =. */
#include "model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ctx.h"
#include "model/family.h"

#define OP(name, ...) FSDPC_TRY(m->ops->name(m->dev, __VA_ARGS__))

static const char *const proj_names[FSDPC_LORA_NPROJ] = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

const char *fsdpc__lora_proj_name(const fsdpc_model_shape *s, int j) {
  if (j == 0 && s->fused_qkv)
    return "qkv_proj";
  if (j == 4 && s->fused_gate_up)
    return "gate_up_proj";
  return proj_names[j];
}
const char *fsdpc__lora_proj_module(const fsdpc_model_shape *s, int j) {
  int bias;
  return fsdpc__layer_module(s, FSDPC_P_Q + j, &bias);
}

int fsdpc__lora_parts(const fsdpc_model_shape *s, int j, int rows[3]) {
  int QD = s->NH * s->HD, KD = s->KVH * s->HD;
  if (j == 0 && s->fused_qkv) {
    rows[0] = QD, rows[1] = KD, rows[2] = KD;
    return 3;
  }
  if (j == 4 && s->fused_gate_up) {
    rows[0] = rows[1] = s->F;
    return 2;
  }
  int in;
  fsdpc__lora_dims(s, j, &in, &rows[0]);
  return 1;
}

void fsdpc__lora_dims(const fsdpc_model_shape *s, int j, int *in, int *out) {
  int C = s->C, QD = s->NH * s->HD, KD = s->KVH * s->HD, F = s->F;
  switch (j) {
  case 0:
    *in = C, *out = s->fused_qkv ? QD + 2 * KD : QD;
    break;
  case 1:
  case 2:
    *in = C, *out = KD;
    break;
  case 3:
    *in = QD, *out = C;
    break;
  case 4:
  case 5:
    *in = C, *out = j == 4 && s->fused_gate_up ? 2 * F : F;
    break;
  default:
    *in = F, *out = C;
    break;
  }
}

int fsdpc__lora_target_proj(int fused, const char *name) {
  if (fused && strcmp(name, "qkv_proj") == 0)
    return 0;
  if (fused && strcmp(name, "gate_up_proj") == 0)
    return 4;
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++)
    if (strcmp(proj_names[j], name) == 0)
      return fused && j != 3 && j != 6 ? -1 : j;
  return -1;
}

static void add(fsdpc_param_info *q, const fsdpc_model_shape *s, int l, int j, int b, int r) {
  int in, out;
  fsdpc__lora_dims(s, j, &in, &out);
  memset(q, 0, sizeof *q);
  snprintf(q->module, sizeof q->module, "model.layers.%d.lora", l);
  snprintf(q->name, sizeof q->name, "model.layers.%d.%s.lora_%c.weight", l,
           fsdpc__lora_proj_module(s, j), b ? 'B' : 'A');
  q->module_type = "lora";
  q->kind = FSDPC_P_LORA0 + 2 * j + b;
  q->layer = l;
  q->block = l + 1;
  q->ndim = 2;
  q->shape[0] = b ? out : r;
  q->shape[1] = b ? r : in;
  q->numel = (uint64_t)q->shape[0] * (uint64_t)q->shape[1];
  q->decay = 1;
  q->tie_group = -1;
}

fsdpc_status fsdpc__lora_add_params(const fsdpc_model_shape *s, const fsdpc_lora *lo,
                                    fsdpc_param_info **params, int *n, fsdpc_err *err) {
  int nt = 0;
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++)
    nt += (lo->targets >> j) & 1;
  int total = *n + s->L * 2 * nt;
  fsdpc_param_info *p = realloc(*params, (size_t)total * sizeof *p);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the LoRA parameters");
  *params = p;
  for (int i = 0; i < *n; i++)
    p[i].frozen = 1;
  int k = *n;
  /* A of every projection, then B: the A matrices sharing an input sit side
   * by side in the unit's flat buffer. */
  for (int l = 0; l < s->L; l++)
    for (int b = 0; b < 2; b++)
      for (int j = 0; j < FSDPC_LORA_NPROJ; j++)
        if ((lo->targets >> j) & 1)
          add(&p[k++], s, l, j, b, lo->r);
  *n = k;
  return FSDPC_OK;
}

/* splitmix64, the counter-based generator of model/params.c: element i of a
 * tensor is made without elements 0..i-1. */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void fsdpc__lora_init_range(const fsdpc_param_info *p, uint64_t seed, uint64_t elem_offset,
                            uint64_t n, float *dst) {
  if (fsdpc__lora_kind_is_b(p->kind)) {
    memset(dst, 0, n * sizeof *dst);
    return;
  }
  /* PEFT: nn.init.kaiming_uniform_(A, a=sqrt(5)): gain sqrt(2 / (1 + 5)),
   * bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in). */
  double bound = 1.0 / sqrt((double)p->shape[1]);
  uint64_t key = seed ^ 0x4C6F5241ull; /* "LoRA" */
  for (const char *c = p->name; *c; c++)
    key = (key ^ (uint8_t)*c) * 1099511628211ull;
  key = mix(key);
  for (uint64_t i = 0; i < n; i++) {
    double u = (double)(mix(key + elem_offset + i) >> 11) * 0x1.0p-53; /* [0, 1) */
    dst[i] = (float)((2.0 * u - 1.0) * bound);
  }
}

/* ---- the context's buffers ---- */

static int n_targets(const fsdpc_lora *lo) {
  int nt = 0;
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++)
    nt += (lo->targets >> j) & 1;
  return nt;
}

static size_t max_in(const fsdpc_model_shape *s, const fsdpc_lora *lo) {
  size_t mx = 0;
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++) {
    int in, out;
    fsdpc__lora_dims(s, j, &in, &out);
    if (((lo->targets >> j) & 1) && (size_t)in > mx)
      mx = (size_t)in;
  }
  return mx;
}

/* The frozen norms' gradient sink: the widest norm (C, or a q norm over
 * the whole projection). */
size_t fsdpc__lora_sink_floats(const fsdpc_model_shape *s) {
  size_t q = s->qk_norm == FSDPC_QK_NORM_PROJ   ? (size_t)s->NH * s->HD
             : s->qk_norm == FSDPC_QK_NORM_HEAD ? (size_t)s->HD
                                                : 0;
  return q > (size_t)s->C ? q : (size_t)s->C;
}

uint64_t fsdpc__lora_ctx_bytes(const fsdpc_model_shape *s, const fsdpc_lora *lo, int N, int ckpt,
                               size_t act) {
  uint64_t slots = ckpt ? 1 : (uint64_t)s->L, nr = (uint64_t)N * (uint64_t)lo->r;
  uint64_t t = slots * (uint64_t)n_targets(lo) * nr * act;            /* saved u */
  t += (uint64_t)N * max_in(s, lo) * act * (lo->dropout > 0 ? 2 : 1); /* dx (, xd) */
  t += nr * act + fsdpc__lora_sink_floats(s) * sizeof(float);                     /* du, norm sink */
  return t;
}

fsdpc_status fsdpc__lora_ctx_alloc(fsdpc_model_ctx *m, const fsdpc_lora *lo, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  size_t act = m->ops->act_size, N = (size_t)m->N, nr = N * (size_t)lo->r;
  m->has_lora = 1;
  m->lora = *lo;
  m->lora_train = 1;
  m->lora_u = calloc((size_t)m->n_acts * FSDPC_LORA_NPROJ, sizeof(void *));
  if (!m->lora_u)
    goto oom;
  for (int a = 0; a < m->n_acts; a++)
    for (int j = 0; j < FSDPC_LORA_NPROJ; j++)
      if (((lo->targets >> j) & 1) &&
          !(m->lora_u[a * FSDPC_LORA_NPROJ + j] = fsdpc__model_mem(m, nr * act)))
        goto oom;
  size_t xb = N * max_in(s, lo) * act;
  if (!(m->lora_dx = fsdpc__model_mem(m, xb)) ||
      (lo->dropout > 0 && !(m->lora_xd = fsdpc__model_mem(m, xb))) ||
      !(m->lora_du = fsdpc__model_mem(m, nr * act)) ||
      !(m->dnorm_sink = fsdpc__model_mem(m, fsdpc__lora_sink_floats(s) * 4)))
    goto oom;
  m->lora_bytes = fsdpc__lora_ctx_bytes(s, lo, m->N, m->ckpt, act);
  m->bytes += m->lora_bytes;
  return FSDPC_OK;
oom:
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "out of memory for the LoRA activations (micro-batch %d x %d, r %d); lower "
                     "train.micro_batch_size or data.seq_len",
                     m->B, m->T, lo->r);
}

void fsdpc__lora_ctx_free(fsdpc_model_ctx *m) {
  if (!m->has_lora)
    return;
  const fsdpc_model_shape *s = &m->s;
  const fsdpc_lora *lo = &m->lora;
  size_t act = m->ops->act_size, N = (size_t)m->N, nr = N * (size_t)lo->r;
  size_t xb = N * max_in(s, lo) * act;
  for (int i = 0; m->lora_u && i < m->n_acts * FSDPC_LORA_NPROJ; i++)
    if (m->lora_u[i])
      fsdpc__model_mem_free(m, m->lora_u[i], nr * act);
  if (m->lora_dx)
    fsdpc__model_mem_free(m, m->lora_dx, xb);
  if (m->lora_xd)
    fsdpc__model_mem_free(m, m->lora_xd, xb);
  if (m->lora_du)
    fsdpc__model_mem_free(m, m->lora_du, nr * act);
  if (m->dnorm_sink)
    fsdpc__model_mem_free(m, m->dnorm_sink, fsdpc__lora_sink_floats(s) * 4);
  free(m->lora_u);
  m->lora_u = NULL;
}

void fsdpc__model_set_lora_round(fsdpc_model_ctx *m, uint64_t round, int training) {
  m->lora_round = round;
  m->lora_train = training;
}

void fsdpc__model_set_lora_off(fsdpc_model_ctx *m, int off) {
  m->lora_off = off;
}

/* ---- forward and backward ---- */

static uint64_t mask_key(const fsdpc_model_ctx *m, int l, int j) {
  return mix(mix(m->lora.seed ^ 0x44524F50ull /* "DROP" */) ^ mix(m->lora_round) ^
             ((uint64_t)l * FSDPC_LORA_NPROJ + (uint64_t)j + 1) * 0xD1B54A32D192ED03ull);
}

static int dropping(const fsdpc_model_ctx *m) {
  return m->lora.dropout > 0 && m->lora_train;
}

/* Row block p of B (out_p rows of r) inside the adapter of a fused
 * projection, and of its gradient. */
static const void *b_part(const void *b, int off, int r, size_t act) {
  return (const char *)b + (size_t)off * r * act;
}

fsdpc_status fsdpc__lora_apply(const fsdpc_ops *ops, const fsdpc_lora *lo, int j,
                               const fsdpc_model_shape *s, const fsdpc_layer_w *w, void *const *ys,
                               const void *x, int N, void *u, fsdpc_err *err) {
  if (!w->lora_a[j])
    return FSDPC_OK;
  int in, out, rows[3], np = fsdpc__lora_parts(s, j, rows);
  fsdpc__lora_dims(s, j, &in, &out);
  FSDPC_TRY(ops->matmul_fwd(ops->ctx, u, x, w->lora_a[j], NULL, N, in, lo->r, err));
  FSDPC_TRY(ops->scale(ops->ctx, u, (size_t)N * lo->r, lo->scale, err));
  for (int p = 0, off = 0; p < np; off += rows[p], p++) /* y_p += u B_p^T */
    FSDPC_TRY(ops->matmul_fwd(ops->ctx, ys[p], u, b_part(w->lora_b[j], off, lo->r, ops->act_size),
                              ys[p], N, lo->r, rows[p], err));
  return FSDPC_OK;
}

fsdpc_status fsdpc__lora_fwd(fsdpc_model_ctx *m, int l, int j, const fsdpc_layer_w *w,
                             void *const *ys, const void *x, fsdpc_err *err) {
  if (!m->has_lora || m->lora_off || !w->lora_a[j])
    return FSDPC_OK;
  int in, out, N = m->N;
  fsdpc__lora_dims(&m->s, j, &in, &out);
  const void *xd = x;
  if (dropping(m)) {
    OP(dropout, m->lora_xd, x, (size_t)N * in, m->lora.dropout, mask_key(m, l, j), err);
    xd = m->lora_xd;
  }
  int slot = m->n_acts == 1 ? 0 : l;
  void *u = m->lora_u[slot * FSDPC_LORA_NPROJ + j]; /* (N, r), saved for the backward */
  return fsdpc__lora_apply(m->ops, &m->lora, j, &m->s, w, ys, xd, N, u, err);
}

fsdpc_status fsdpc__lora_bwd(fsdpc_model_ctx *m, int l, int j, const fsdpc_layer_w *w,
                             const fsdpc_layer_g *g, const void *const *dys, const void *x,
                             void *dx, fsdpc_err *err) {
  if (!m->has_lora || !w->lora_a[j])
    return FSDPC_OK;
  int in, out, N = m->N, r = m->lora.r, rows[3], np = fsdpc__lora_parts(&m->s, j, rows);
  size_t act = m->ops->act_size;
  fsdpc__lora_dims(&m->s, j, &in, &out);
  int slot = m->n_acts == 1 ? 0 : l;
  const void *u = m->lora_u[slot * FSDPC_LORA_NPROJ + j];
  /* du = sum_p dy_p @ B_p, dB_p += dy_p^T @ u (a part's du through lora_dx,
   * free until dx); then du *= s */
  for (int p = 0, off = 0; p < np; off += rows[p], p++) {
    void *dst = p == 0 ? m->lora_du : m->lora_dx;
    float *db = g->lora_b[j] ? g->lora_b[j] + (size_t)off * r : NULL;
    OP(matmul_bwd, dst, db, dys[p], u, b_part(w->lora_b[j], off, r, act), N, r, rows[p], err);
    if (p > 0)
      OP(add_inplace, m->lora_du, m->lora_dx, (size_t)N * r, err);
  }
  OP(scale, m->lora_du, (size_t)N * r, m->lora.scale, err);
  const void *xd = x;
  uint64_t key = mask_key(m, l, j);
  if (dropping(m)) { /* the forward's mask, made again */
    OP(dropout, m->lora_xd, x, (size_t)N * in, m->lora.dropout, key, err);
    xd = m->lora_xd;
  }
  OP(matmul_bwd, m->lora_dx, g->lora_a[j], m->lora_du, xd, w->lora_a[j], N, in, r, err);
  if (dropping(m))
    OP(dropout, m->lora_dx, m->lora_dx, (size_t)N * in, m->lora.dropout, key, err);
  OP(add_inplace, dx, m->lora_dx, (size_t)N * in, err);
  return FSDPC_OK;
}
