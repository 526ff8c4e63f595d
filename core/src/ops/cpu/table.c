/* The CPU ops table: thin adapters from fsdpc_ops to the fp32 reference
 * functions of ops_cpu.h, which take no context and cannot fail. The
 * table's context, when set (fsdpc__ops_cpu_team), is the OpenMP team size
 * of its ops: each adapter that computes sets it for its call only
 * (CPU_TEAM), so the caller's OpenMP settings are never changed. */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/ops_cpu.h"
#include "ops/ops.h"
#include "util/fault.h"

static void team_restore(const int *prev) {
  fsdpc__cpu_team_set(*prev);
}
/* The team size of ctx (an int, or NULL: OpenMP's default) until the
 * adapter returns. */
#define CPU_TEAM(ctx)                                                                              \
  __attribute__((cleanup(team_restore))) const int team_prev_ =                                    \
      fsdpc__cpu_team_set((ctx) ? *(const int *)(ctx) : 0);                                        \
  (void)team_prev_

static void *cpu_alloc(void *ctx, fsdpc_mem_cat cat, size_t bytes) {
  FSDPC_FAULT_ALLOC_HOOK(NULL); /* FSDPC_FAULT=alloc=N (util/fault.h) */
  return fsdpc__mem_alloc(cat, bytes);
}
static void cpu_free(void *ctx, fsdpc_mem_cat cat, void *p, size_t bytes) {
  fsdpc__mem_free(cat, p, bytes);
}
/* The arena: one zero-filled block outside the categories, whose bytes the
 * buffers placed in it account for (fsdpc__mem_account). calloc, so that a
 * large one is fresh zero pages touched only as they are used; aligned to
 * 64 by hand, the block calloc gave kept just below the arena. */
static void *cpu_arena_alloc(void *ctx, size_t bytes) {
  char *p = calloc(1, bytes + 64);
  if (!p)
    return NULL;
  char *a = (char *)(((uintptr_t)p + 64) & ~(uintptr_t)63); /* at least 16 bytes above p */
  memcpy(a - sizeof p, &p, sizeof p);
  return a;
}
static void cpu_arena_free(void *ctx, void *a, size_t bytes) {
  char *p;
  if (!a)
    return;
  memcpy(&p, (char *)a - sizeof p, sizeof p);
  free(p);
}
static void cpu_account(void *ctx, fsdpc_mem_cat cat, int64_t bytes) {
  fsdpc__mem_account(cat, bytes);
}
static void *cpu_stream(void *ctx) {
  return NULL;
}
static fsdpc_status cpu_copy(void *ctx, void *dst, const void *src, size_t bytes, fsdpc_err *err) {
  if (bytes)
    memcpy(dst, src, bytes);
  return FSDPC_OK;
}
static fsdpc_status cpu_memset0(void *ctx, void *p, size_t bytes, fsdpc_err *err) {
  if (bytes)
    memset(p, 0, bytes);
  return FSDPC_OK;
}
static fsdpc_status cpu_add_f32(void *ctx, float *y, const float *x, size_t n, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_add_inplace(y, x, n);
  return FSDPC_OK;
}
static fsdpc_status cpu_sumsq_f32(void *ctx, const float *x, size_t n, double *out,
                                  fsdpc_err *err) {
  CPU_TEAM(ctx);
  *out = fsdpc__cpu_sumsq(x, n);
  return FSDPC_OK;
}
static fsdpc_status cpu_cast_params(void *ctx, void *dst, const float *src, size_t n,
                                    fsdpc_err *err) {
  if (n && dst != src)
    memcpy(dst, src, n * sizeof(float));
  return FSDPC_OK;
}
static fsdpc_status cpu_sync(void *ctx, fsdpc_err *err) {
  return FSDPC_OK;
}
static fsdpc_status cpu_rope_tables(void *ctx, float *cos, float *sin, const fsdpc_rope *r,
                                    int maxT, int use_long, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__rope_tables(cos, sin, r, maxT, use_long);
  return FSDPC_OK;
}
static fsdpc_status cpu_embedding_fwd(void *ctx, void *out, const int32_t *tokens, const void *wte,
                                      int N, int C, int V, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_embedding_fwd(out, tokens, wte, N, C);
  return FSDPC_OK;
}
static fsdpc_status cpu_embedding_bwd(void *ctx, float *dwte, const void *dout,
                                      const int32_t *tokens, int N, int C, int V, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_embedding_bwd(dwte, dout, tokens, N, C);
  return FSDPC_OK;
}
static fsdpc_status cpu_rmsnorm_fwd(void *ctx, void *out, float *rstd, const void *inp,
                                    const void *weight, int N, int C, float eps, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_rmsnorm_fwd(out, rstd, inp, weight, N, C, eps);
  return FSDPC_OK;
}
static fsdpc_status cpu_rmsnorm_bwd(void *ctx, void *dinp, float *dweight, const void *dout,
                                    const void *inp, const void *weight, const float *rstd, int N,
                                    int C, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_rmsnorm_bwd(dinp, dweight, dout, inp, weight, rstd, N, C);
  return FSDPC_OK;
}
static fsdpc_status cpu_matmul_fwd(void *ctx, void *out, const void *inp, const void *weight,
                                   const void *residual, int N, int C, int OC, fsdpc_err *err) {
  CPU_TEAM(ctx);
  if (residual && residual == out && N > 0 && OC > 0 && C > 0) {
    /* out += inp @ W^T: GEMM with beta = 1 adds in place. */
    fsdpc__cpu_sgemm(0, 1, N, OC, C, inp, C, weight, C, 1.0f, out, OC);
    return FSDPC_OK;
  }
  fsdpc__cpu_matmul_fwd(out, inp, weight, N, C, OC);
  if (residual)
    fsdpc__cpu_add(out, out, residual, (size_t)N * OC);
  return FSDPC_OK;
}
static fsdpc_status cpu_matmul_bwd(void *ctx, void *dinp, float *dweight, const void *dout,
                                   const void *inp, const void *weight, int N, int C, int OC,
                                   fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_matmul_bwd(dinp, dweight, dout, inp, weight, N, C, OC);
  return FSDPC_OK;
}
static fsdpc_status cpu_fp8_matmul_fwd(void *ctx, int recipe, void *out, const void *inp,
                                       int inp_again, const void *weight, const void *residual,
                                       int N, int C, int OC, void *scratch, size_t scratch_bytes,
                                       fsdpc_err *err) {
  CPU_TEAM(ctx);
  (void)inp_again, (void)scratch, (void)scratch_bytes; /* the emulation casts every time */
  return fsdpc__cpu_fp8_linear_fwd(recipe, out, inp, weight, residual, N, C, OC, err);
}
static fsdpc_status cpu_fp8_matmul_bwd(void *ctx, int recipe, void *dinp, int dinp_acc,
                                       float *dweight, const void *dout, const void *inp,
                                       int inp_again, const void *weight, int N, int C, int OC,
                                       void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  CPU_TEAM(ctx);
  (void)inp_again, (void)scratch, (void)scratch_bytes;
  return fsdpc__cpu_fp8_linear_bwd(recipe, dinp, dinp_acc, dweight, dout, inp, weight, N, C, OC,
                                   err);
}
static fsdpc_status cpu_rope_fwd(void *ctx, void *x, const float *cos, const float *sin,
                                 const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                                 fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_rope_fwd(x, cos, sin, pos, N, H, HD, RD);
  return FSDPC_OK;
}
static fsdpc_status cpu_rope_bwd(void *ctx, void *dx, const float *cos, const float *sin,
                                 const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                                 fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_rope_bwd(dx, cos, sin, pos, N, H, HD, RD);
  return FSDPC_OK;
}
static fsdpc_status cpu_swiglu_fwd(void *ctx, void *out, const void *gate, const void *up, int N,
                                   int F, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_swiglu_fwd(out, gate, up, N, F);
  return FSDPC_OK;
}
static fsdpc_status cpu_swiglu_bwd(void *ctx, void *dgate, void *dup, const void *dout,
                                   const void *gate, const void *up, int N, int F, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_swiglu_bwd(dgate, dup, dout, gate, up, N, F);
  return FSDPC_OK;
}
static fsdpc_status cpu_add(void *ctx, void *out, const void *a, const void *b, size_t n,
                            fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_add(out, a, b, n);
  return FSDPC_OK;
}
static fsdpc_status cpu_add_inplace(void *ctx, void *y, const void *x, size_t n, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_add_inplace(y, x, n);
  return FSDPC_OK;
}
static size_t cpu_xent_scratch_bytes(int N, int V, int chunk_rows, int logits_bf16) {
  return fsdpc__xent_scratch_bytes(FSDPC_DEVICE_CPU, N, V, chunk_rows, logits_bf16);
}
static fsdpc_status cpu_lmhead_xent(void *ctx, double *out2, void *dx, float *dweight,
                                    const void *x, const void *weight, const int32_t *labels, int N,
                                    int C, int V, float grad_scale, int chunk_rows, int logits_bf16,
                                    void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  CPU_TEAM(ctx);
  if (scratch_bytes < cpu_xent_scratch_bytes(N, V, chunk_rows, logits_bf16))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "cross-entropy scratch too small");
  int64_t count = 0;
  fsdpc__cpu_lmhead_xent(&out2[0], &count, dx, dweight, x, weight, labels, N, C, V, grad_scale,
                         chunk_rows, logits_bf16, scratch);
  out2[1] = (double)count;
  return FSDPC_OK;
}
static fsdpc_status cpu_lmhead_xent_rows(void *ctx, double *out2, double *row_loss,
                                         const float *row_seed, void *dx, float *dweight,
                                         const void *x, const void *weight, const int32_t *labels,
                                         int N, int C, int V, int chunk_rows, int logits_bf16,
                                         void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  CPU_TEAM(ctx);
  if (scratch_bytes < cpu_xent_scratch_bytes(N, V, chunk_rows, logits_bf16))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "cross-entropy scratch too small");
  int64_t count = 0;
  fsdpc__cpu_lmhead_xent_rows(&out2[0], &count, row_loss, row_seed, dx, dweight, x, weight, labels,
                              N, C, V, chunk_rows, logits_bf16, scratch);
  out2[1] = (double)count;
  return FSDPC_OK;
}
static fsdpc_status cpu_lmhead_xent_capped(void *ctx, double *out2, void *dx, float *dweight,
                                           const void *x, const void *weight, const int32_t *labels,
                                           int N, int C, int V, float grad_scale, int chunk_rows,
                                           int logits_bf16, float softcap, void *scratch,
                                           size_t scratch_bytes, fsdpc_err *err) {
  CPU_TEAM(ctx);
  if (scratch_bytes < cpu_xent_scratch_bytes(N, V, chunk_rows, logits_bf16))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "cross-entropy scratch too small");
  int64_t count = 0;
  fsdpc__cpu_lmhead_xent_capped(&out2[0], &count, dx, dweight, x, weight, labels, N, C, V,
                                grad_scale, chunk_rows, logits_bf16, softcap, scratch);
  out2[1] = (double)count;
  return FSDPC_OK;
}
static fsdpc_status cpu_rmsnorm_off_fwd(void *ctx, void *out, float *rstd, const void *inp,
                                        const void *weight, int N, int C, float eps, float offset,
                                        fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_rmsnorm_off_fwd(out, rstd, inp, weight, N, C, eps, offset);
  return FSDPC_OK;
}
static fsdpc_status cpu_rmsnorm_off_bwd(void *ctx, void *dinp, float *dweight, const void *dout,
                                        const void *inp, const void *weight, const float *rstd,
                                        int N, int C, float offset, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_rmsnorm_off_bwd(dinp, dweight, dout, inp, weight, rstd, N, C, offset);
  return FSDPC_OK;
}
static fsdpc_status cpu_geglu_fwd(void *ctx, void *out, const void *gate, const void *up, int N,
                                  int F, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_geglu_fwd(out, gate, up, N, F);
  return FSDPC_OK;
}
static fsdpc_status cpu_geglu_bwd(void *ctx, void *dgate, void *dup, const void *dout,
                                  const void *gate, const void *up, int N, int F, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_geglu_bwd(dgate, dup, dout, gate, up, N, F);
  return FSDPC_OK;
}
static fsdpc_status cpu_logits(void *ctx, float *out, const void *x, const void *weight, int N,
                               int C, int V, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_logits(out, x, weight, N, C, V);
  return FSDPC_OK;
}

static fsdpc_status cpu_kv_store(void *ctx, void *kc, void *vc, const void *k, const void *v,
                                 const int32_t *pos, int B, int n, int maxT, int KD,
                                 fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_kv_store(kc, vc, k, v, pos, B, n, maxT, KD);
  return FSDPC_OK;
}
static fsdpc_status cpu_argmax_rows(void *ctx, int32_t *out, const float *x, int N, int V,
                                    fsdpc_err *err) {
  (void)ctx;
  (void)err;
  for (int r = 0; r < N; r++) {
    const float *row = x + (size_t)r * V;
    int32_t best = 0;
    for (int v = 1; v < V; v++)
      if (row[v] > row[best])
        best = v;
    out[r] = best;
  }
  return FSDPC_OK;
}

static fsdpc_status cpu_attn_cached(void *ctx, void *out, const void *q, const void *kc,
                                    const void *vc, const int32_t *pos, int B, int n, int NH,
                                    int KVH, int HD, int maxT, float scale, int window,
                                    float softcap, fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_attn_cached(out, q, kc, vc, pos, B, n, NH, KVH, HD, maxT, scale, window, softcap);
  return FSDPC_OK;
}

static fsdpc_status cpu_scale(void *ctx, void *x, size_t n, float s, fsdpc_err *err) {
  (void)ctx, (void)err;
  fsdpc__cpu_scale(x, s, n);
  return FSDPC_OK;
}
static fsdpc_status cpu_dropout(void *ctx, void *out, const void *inp, size_t n, float p,
                                uint64_t key, fsdpc_err *err) {
  (void)ctx, (void)err;
  fsdpc__cpu_dropout(out, inp, n, p, key);
  return FSDPC_OK;
}

static fsdpc_status cpu_bias_add(void *ctx, void *y, const void *bias, int N, int OC,
                                 fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_bias_add(y, bias, N, OC);
  return FSDPC_OK;
}
static fsdpc_status cpu_bias_bwd(void *ctx, float *dbias, const void *dy, int N, int OC,
                                 fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_bias_bwd(dbias, dy, N, OC);
  return FSDPC_OK;
}
static fsdpc_status cpu_axpy(void *ctx, void *out, const void *x, const void *y, float a, size_t n,
                             fsdpc_err *err) {
  CPU_TEAM(ctx);
  fsdpc__cpu_axpy(out, x, y, a, n);
  return FSDPC_OK;
}

static const fsdpc_ops cpu_ops = {
    /* .device = */ FSDPC_DEVICE_CPU,
    /* .act_dtype = */ FSDPC_DTYPE_F32,
    /* .act_size = */ sizeof(float),
    /* .ctx = */ NULL,
    /* .alloc = */ cpu_alloc,
    /* .free = */ cpu_free,
    /* .arena_alloc = */ cpu_arena_alloc,
    /* .arena_free = */ cpu_arena_free,
    /* .account = */ cpu_account,
    /* .stream = */ cpu_stream,
    /* .comm_stream = */ NULL, /* host collectives block: nothing to overlap */
    /* .event_record = */ NULL,
    /* .stream_wait = */ NULL,
    /* .cast_params_on = */ NULL,
    /* .add_f32_on = */ NULL,
    /* .upload = */ cpu_copy,
    /* .download = */ cpu_copy,
    /* .memset0 = */ cpu_memset0,
    /* .add_f32 = */ cpu_add_f32,
    /* .sumsq_f32 = */ cpu_sumsq_f32,
    /* .sumsq_f32_dev = */ NULL, /* the host sum is already sync-free */
    /* .init_f32 = */ NULL,      /* the engine inits host shards with model/params.c */
    /* .alloc_host = */ NULL,
    /* .free_host = */ NULL,
    /* .copy_on = */ NULL,
    /* .cast_to_f32_on = */ NULL,
    /* .cast_params = */ cpu_cast_params,
    /* .sync = */ cpu_sync,
    /* .rope_tables = */ cpu_rope_tables,
    /* .embedding_fwd = */ cpu_embedding_fwd,
    /* .embedding_bwd = */ cpu_embedding_bwd,
    /* .rmsnorm_fwd = */ cpu_rmsnorm_fwd,
    /* .rmsnorm_bwd = */ cpu_rmsnorm_bwd,
    /* .matmul_fwd = */ cpu_matmul_fwd,
    /* .matmul_bwd = */ cpu_matmul_bwd,
    /* .rope_fwd = */ cpu_rope_fwd,
    /* .rope_bwd = */ cpu_rope_bwd,
    /* .swiglu_fwd = */ cpu_swiglu_fwd,
    /* .swiglu_bwd = */ cpu_swiglu_bwd,
    /* .add = */ cpu_add,
    /* .add_inplace = */ cpu_add_inplace,
    /* .xent_scratch_bytes = */ cpu_xent_scratch_bytes,
    /* .lmhead_xent = */ cpu_lmhead_xent,
    /* .logits = */ cpu_logits,
    /* .kv_store = */ cpu_kv_store,
    /* .attn_cached = */ cpu_attn_cached,
    /* .scale = */ cpu_scale,
    /* .dropout = */ cpu_dropout,
    /* .take_error = */ NULL,     /* alloc and free fail only for want of memory */
    /* .matmul_bwd_acc = */ NULL, /* the layer keeps the unfused sequence */
    /* .rmsnorm_bwd_add = */ NULL,
    /* .argmax_rows = */ cpu_argmax_rows,
    /* .event_sync = */ NULL,
    /* .grad_overwrite = */ NULL, /* zeroed gradients, exact sums */
    /* .d2h_stream = */ NULL,
    /* .bias_add = */ cpu_bias_add,
    /* .bias_bwd = */ cpu_bias_bwd,
    /* .axpy = */ cpu_axpy,
    /* .fp8_matmul_fwd = */ cpu_fp8_matmul_fwd,
    /* .fp8_matmul_bwd = */ cpu_fp8_matmul_bwd,
    /* .lmhead_xent_rows = */ cpu_lmhead_xent_rows,
    /* .nf4_dequant = */ NULL, /* NF4 units dequantize on the host (fsdp/nf4_unit.c) */
    /* .nf4_quant = */ NULL,   /* and are quantized there (quant/nf4.c) */
    /* .rmsnorm_off_fwd = */ cpu_rmsnorm_off_fwd,
    /* .rmsnorm_off_bwd = */ cpu_rmsnorm_off_bwd,
    /* .geglu_fwd = */ cpu_geglu_fwd,
    /* .geglu_bwd = */ cpu_geglu_bwd,
    /* .lmhead_xent_capped = */ cpu_lmhead_xent_capped,
    /* .matmul_bias_fwd = */ NULL, /* matmul_fwd then bias_add, the oracle's order */
};

const fsdpc_ops *fsdpc__ops_cpu(void) {
  return &cpu_ops;
}

const fsdpc_ops *fsdpc__ops_cpu_team(fsdpc_ops *out, const int *threads) {
  *out = cpu_ops;
  out->ctx = (void *)threads;
  return out;
}
