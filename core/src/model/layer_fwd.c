/* The forward op sequence of one decoder layer, for every family: each
 * switch of the model description (llama.h) is a branch here or a
 * parameter of an op. Shared by training (layer.c) and the KV-cache
 * decoder (infer/decode.c); the attention between the two halves is theirs.
 *
 * (every rmsnorm(x) * w is rmsnorm(x) * (norm_offset + w): Gemma's 1 + w)
 *   a_in = norm_pre ? rmsnorm(x) * w_ln1 : x
 *   q, k, v = a_in @ W^T (+ b)            (+ LoRA; fused qkv_proj: row blocks)
 *   q, k = rmsnorm(q), rmsnorm(k)         (qk_norm: per head over HD, or the
 *                                          whole projection)
 *   q, k = RoPE on the first rope.dim dims of each head
 *   attn = attention(q, k, v)             (the caller's)
 *   o = attn @ Wo^T (+ bo)
 *   h = x + resid_mult * (norm_post ? rmsnorm(o) * w_post_attn : o)
 *   m_in = norm_pre ? rmsnorm(h) * w_ln2 : h
 *   act = silu(m_in @ Wgate^T (+b)) * (m_in @ Wup^T (+b))   (Gemma: gelu_tanh)
 *   dn = act @ Wdown^T (+ b)
 *   out = h + resid_mult * (norm_post ? rmsnorm(dn) * w_post_mlp : dn)
 *
 * Without a post norm and with resid_mult 1 the residual add is the GEMM's
 * (out = h + act @ Wdown^T in one op), as in a plain Llama. */
#include "model/ctx.h"

#define OP(name, ...) FSDPC_TRY(ops->name(ops->ctx, __VA_ARGS__))
#define NORM(...) FSDPC_TRY(fsdpc__model_norm_fwd(ops, s, __VA_ARGS__))

static const void *at(const void *p, size_t off, size_t act) {
  return p ? (const char *)p + off * act : NULL;
}

void fsdpc__layer_split(const fsdpc_model_shape *s, size_t act, const fsdpc_layer_w *in,
                        fsdpc_layer_w *out) {
  *out = *in;
  size_t C = (size_t)s->C, QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  size_t F = (size_t)s->F;
  if (s->fused_qkv) {
    out->wk = at(in->wq, QD * C, act);
    out->wv = at(in->wq, (QD + KD) * C, act);
    out->bias[1] = at(in->bias[0], QD, act);
    out->bias[2] = at(in->bias[0], QD + KD, act);
  }
  if (s->fused_gate_up) {
    out->wup = at(in->wgate, F * C, act);
    out->bias[5] = at(in->bias[4], F, act);
  }
}

void fsdpc__layer_split_grads(const fsdpc_model_shape *s, const fsdpc_layer_g *in,
                              fsdpc_layer_g *out) {
  *out = *in;
  size_t C = (size_t)s->C, QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  size_t F = (size_t)s->F;
  if (s->fused_qkv) {
    out->wk = in->wq ? in->wq + QD * C : NULL;
    out->wv = in->wq ? in->wq + (QD + KD) * C : NULL;
    out->bias[1] = in->bias[0] ? in->bias[0] + QD : NULL;
    out->bias[2] = in->bias[0] ? in->bias[0] + QD + KD : NULL;
  }
  if (s->fused_gate_up) {
    out->wup = in->wgate ? in->wgate + F * C : NULL;
    out->bias[5] = in->bias[4] ? in->bias[4] + F : NULL;
  }
}

/* y = x @ W^T (+ residual) (+ bias); in FP8 under io->fp8, where again
 * says that x is the previous projection's input (ops.h's inp_again). */
static fsdpc_status proj(const fsdpc_ops *ops, const fsdpc_layer_io *io, void *y, const void *x,
                         int again, const void *wt, const void *bias, const void *residual, int N,
                         int in, int out, fsdpc_err *err) {
  if (bias && !io->fp8 && ops->matmul_bias_fwd) /* the bias in the GEMM (CUDA) */
    return ops->matmul_bias_fwd(ops->ctx, y, x, wt, bias, residual, N, in, out, err);
  if (io->fp8)
    OP(fp8_matmul_fwd, io->fp8, y, x, again, wt, residual, N, in, out, io->fp8_scratch,
       io->fp8_scratch_bytes, err);
  else
    OP(matmul_fwd, y, x, wt, residual, N, in, out, err);
  if (bias)
    OP(bias_add, y, bias, N, out, err);
  return FSDPC_OK;
}

static fsdpc_status lora(const fsdpc_layer_io *io, int j, void *const *ys, const void *x,
                         fsdpc_err *err) {
  return io->lora ? io->lora(io->lora_ctx, j, ys, x, err) : FSDPC_OK;
}

/* q/k RMSNorm: per head over HD with one (HD) weight (rows N*H), or over
 * the whole projection (rows N). */
static fsdpc_status qk_norm(const fsdpc_ops *ops, const fsdpc_model_shape *s, void *out,
                            float *rstd, const void *inp, const void *weight, int N, int H,
                            fsdpc_err *err) {
  if (s->qk_norm == FSDPC_QK_NORM_HEAD)
    NORM(out, rstd, inp, weight, N * H, s->HD, err);
  else
    NORM(out, rstd, inp, weight, N, H * s->HD, err);
  return FSDPC_OK;
}

fsdpc_status fsdpc__layer_qkv(const fsdpc_ops *ops, const fsdpc_model_shape *s,
                              const fsdpc_layer_w *w, const fsdpc_layer_io *io, fsdpc_err *err) {
  const fsdpc_layer_acts *a = &io->a;
  int N = io->N, C = s->C, QD = s->NH * s->HD, KD = s->KVH * s->HD, P = s->max_pos;
  const void *in = io->x;
  if (s->norm_pre) {
    NORM(a->ln1, a->rstd1, io->x, w->ln1, N, C, err);
    in = a->ln1;
  }
  void *q = s->qk_norm ? a->qr : a->q, *k = s->qk_norm ? a->kr : a->k;
  FSDPC_TRY(proj(ops, io, q, in, 0, w->wq, w->bias[0], NULL, N, C, QD, err));
  FSDPC_TRY(proj(ops, io, k, in, 1, w->wk, w->bias[1], NULL, N, C, KD, err));
  FSDPC_TRY(proj(ops, io, a->v, in, 1, w->wv, w->bias[2], NULL, N, C, KD, err));
  if (s->fused_qkv) {
    void *ys[3] = {q, k, a->v};
    FSDPC_TRY(lora(io, 0, ys, in, err));
  } else {
    FSDPC_TRY(lora(io, 0, &q, in, err));
    FSDPC_TRY(lora(io, 1, &k, in, err));
    FSDPC_TRY(lora(io, 2, (void *const *)&a->v, in, err));
  }
  if (s->qk_norm) {
    FSDPC_TRY(qk_norm(ops, s, a->q, a->rstdq, a->qr, w->qnorm, N, s->NH, err));
    FSDPC_TRY(qk_norm(ops, s, a->k, a->rstdk, a->kr, w->knorm, N, s->KVH, err));
  }
  OP(rope_fwd, a->q, io->cos, io->sin, io->pos, N, s->NH, s->HD, s->rope.dim, P, err);
  OP(rope_fwd, a->k, io->cos, io->sin, io->pos, N, s->KVH, s->HD, s->rope.dim, P, err);
  return FSDPC_OK;
}

/* dst = res + resid_mult * (norm_post ? rmsnorm(y) * post : y), y = the
 * sublayer's projection already in tmp (or added into dst by the GEMM when
 * plain: see below). */
static fsdpc_status residual(const fsdpc_ops *ops, const fsdpc_model_shape *s, void *dst,
                             const void *res, const void *tmp, float *rstd, const void *post, int N,
                             fsdpc_err *err) {
  size_t n = (size_t)N * s->C;
  if (s->norm_post) {
    NORM(dst, rstd, tmp, post, N, s->C, err);
    OP(axpy, dst, res, dst, s->resid_mult, n, err);
  } else {
    OP(axpy, dst, res, tmp, s->resid_mult, n, err);
  }
  return FSDPC_OK;
}

/* Whether a sublayer's output goes through tmp (a post norm or a
 * multiplier), or is added to the residual stream inside its GEMM. */
static int through_tmp(const fsdpc_model_shape *s) {
  return s->norm_post || s->resid_mult != 1.0f;
}

fsdpc_status fsdpc__layer_out(const fsdpc_ops *ops, const fsdpc_model_shape *s,
                              const fsdpc_layer_w *w, const fsdpc_layer_io *io, fsdpc_err *err) {
  const fsdpc_layer_acts *a = &io->a;
  int N = io->N, C = s->C, F = s->F, QD = s->NH * s->HD;
  int tmp = through_tmp(s);
  /* attention output: h = x + ... */
  void *o = tmp ? a->o : a->h;
  FSDPC_TRY(proj(ops, io, o, a->attn, 0, w->wo, w->bias[3], tmp ? NULL : io->x, N, QD, C, err));
  FSDPC_TRY(lora(io, 3, &o, a->attn, err));
  if (tmp)
    FSDPC_TRY(residual(ops, s, a->h, io->x, a->o, a->rstdo, w->post_attn, N, err));
  /* MLP */
  const void *in = a->h;
  if (s->norm_pre) {
    NORM(a->ln2, a->rstd2, a->h, w->ln2, N, C, err);
    in = a->ln2;
  }
  if (!io->keep_gate_up) {
    FSDPC_TRY(proj(ops, io, a->gate, in, 0, w->wgate, w->bias[4], NULL, N, C, F, err));
    FSDPC_TRY(proj(ops, io, a->up, in, 1, w->wup, w->bias[5], NULL, N, C, F, err));
    if (s->fused_gate_up) {
      void *ys[2] = {a->gate, a->up};
      FSDPC_TRY(lora(io, 4, ys, in, err));
    } else {
      FSDPC_TRY(lora(io, 4, (void *const *)&a->gate, in, err));
      FSDPC_TRY(lora(io, 5, (void *const *)&a->up, in, err));
    }
  }
  if (s->act == FSDPC_ACT_GELU_TANH)
    OP(geglu_fwd, a->act, a->gate, a->up, N, F, err);
  else
    OP(swiglu_fwd, a->act, a->gate, a->up, N, F, err);
  if (io->skip_down)
    return FSDPC_OK;
  void *dn = tmp ? a->dn : io->out;
  FSDPC_TRY(proj(ops, io, dn, a->act, 0, w->wdown, w->bias[6], tmp ? NULL : a->h, N, F, C, err));
  FSDPC_TRY(lora(io, 6, &dn, a->act, err));
  if (tmp)
    FSDPC_TRY(residual(ops, s, io->out, a->h, a->dn, a->rstdd, w->post_mlp, N, err));
  return FSDPC_OK;
}
