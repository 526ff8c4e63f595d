/* The CUDA ops table: adapters from fsdpc_ops to ops_cuda.h. Activations and
 * weights are bf16; parameter gradients, shards and statistics are fp32.
 * Everything runs on the context's compute stream. */
#include <cuda_runtime.h>

#include "ops/cuda/ops_cuda.h"
#include "ops/ops.h"
#include "util/log.h"

/* The table's alloc / free report failure by NULL and not at all: the
 * CUDA error behind it is kept in the context for the caller to take
 * (take_error, through fsdpc__ops_oom / fsdpc__ops_freed), so that a sticky
 * device fault is not read as "out of memory". A failed free is logged too:
 * a free in a destroy path has nobody to tell. */
static void *c_alloc(void *ctx, fsdpc_mem_cat cat, size_t bytes) {
  void *p = NULL;
  fsdpc_err err;
  if (fsdpc__cuda_alloc(ctx, cat, bytes, NULL, &p, &err) == FSDPC_OK)
    return p;
  fsdpc__cuda_keep_mem_error(ctx, &err);
  return NULL;
}
static void c_free(void *ctx, fsdpc_mem_cat cat, void *p, size_t bytes) {
  fsdpc_err err;
  if (fsdpc__cuda_free(ctx, cat, p, bytes, NULL, &err) == FSDPC_OK)
    return;
  FSDPC_LOGE("%s", err.msg);
  fsdpc__cuda_keep_mem_error(ctx, &err);
}
/* The engine's arena: one cudaMalloc (see cuda_ctx.h). */
static void *c_arena_alloc(void *ctx, size_t bytes) {
  void *p = NULL;
  fsdpc_err err;
  if (fsdpc__cuda_arena_alloc(ctx, bytes, &p, &err) == FSDPC_OK)
    return p;
  fsdpc__cuda_keep_mem_error(ctx, &err);
  return NULL;
}
static void c_arena_free(void *ctx, void *p, size_t bytes) {
  fsdpc__cuda_arena_free(ctx, p, bytes);
}
static void c_account(void *ctx, fsdpc_mem_cat cat, int64_t bytes) {
  fsdpc__cuda_account(ctx, cat, bytes);
}
static fsdpc_status c_take_error(void *ctx, fsdpc_err *err) {
  return fsdpc__cuda_take_mem_error(ctx, err);
}
static void *c_stream(void *ctx) { return fsdpc__cuda_compute_stream(ctx); }
static void *c_comm_stream(void *ctx) { return fsdpc__cuda_comm_stream(ctx); }
static void *c_d2h_stream(void *ctx) { return fsdpc__cuda_d2h_stream(ctx); }
static fsdpc_status c_event_record(void *ctx, int slot, void *stream, fsdpc_err *err) {
  return fsdpc__cuda_event_record(ctx, slot, stream, err);
}
static fsdpc_status c_stream_wait(void *ctx, void *stream, int slot, fsdpc_err *err) {
  return fsdpc__cuda_stream_wait_event(ctx, stream, slot, err);
}
static fsdpc_status c_event_sync(void *ctx, int slot, fsdpc_err *err) {
  return fsdpc__cuda_event_sync(ctx, slot, err);
}
static fsdpc_status c_cast_params_on(void *ctx, void *dst, const float *src, size_t n,
                                     void *stream, fsdpc_err *err) {
  return fsdpc__cuda_cast_f32_bf16(ctx, dst, src, n, stream, err);
}
static fsdpc_status c_add_f32_on(void *ctx, float *y, const float *x, size_t n, void *stream,
                                 fsdpc_err *err) {
  return fsdpc__cuda_add_f32_inplace_on(ctx, y, x, n, stream, err);
}
static fsdpc_status c_upload(void *ctx, void *dst, const void *src, size_t bytes, fsdpc_err *err) {
  return bytes ? fsdpc__cuda_h2d(ctx, dst, src, bytes, err) : FSDPC_OK;
}
static fsdpc_status c_download(void *ctx, void *dst, const void *src, size_t bytes,
                               fsdpc_err *err) {
  return bytes ? fsdpc__cuda_d2h(ctx, dst, src, bytes, err) : FSDPC_OK;
}
static fsdpc_status c_memset0(void *ctx, void *p, size_t bytes, fsdpc_err *err) {
  return bytes ? fsdpc__cuda_memset(ctx, p, 0, bytes, err) : FSDPC_OK;
}
static fsdpc_status c_add_f32(void *ctx, float *y, const float *x, size_t n, fsdpc_err *err) {
  return fsdpc__cuda_add_f32_inplace(ctx, y, x, n, err);
}
static fsdpc_status c_sumsq_f32(void *ctx, const float *x, size_t n, double *out,
                                fsdpc_err *err) {
  /* The result lands in a device double; one small scratch per call keeps
   * the table stateless. */
  double *d = c_alloc(ctx, FSDPC_MEM_OTHER, sizeof(double));
  if (!d) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: out of memory for a norm");
  fsdpc_status st = fsdpc__cuda_sumsq(ctx, d, x, n, 0, err);
  if (st == FSDPC_OK) st = fsdpc__cuda_d2h(ctx, out, d, sizeof(double), err);
  c_free(ctx, FSDPC_MEM_OTHER, d, sizeof(double));
  return st;
}
static fsdpc_status c_sumsq_f32_dev(void *ctx, double *dout, const float *x, size_t n,
                                    int accumulate, fsdpc_err *err) {
  return fsdpc__cuda_sumsq(ctx, dout, x, n, accumulate, err);
}
static fsdpc_status c_init_f32(void *ctx, float *dst, size_t n, uint64_t key, uint64_t elem_offset,
                               double std, int ones, fsdpc_err *err) {
  return fsdpc__cuda_init_f32(ctx, dst, n, key, elem_offset, std, ones, err);
}
static void *c_alloc_host(void *ctx, size_t bytes) {
  void *p = NULL;
  return cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) == cudaSuccess ? p : NULL;
}
static void c_free_host(void *ctx, void *p) {
  if (p) cudaFreeHost(p);
}
static fsdpc_status c_nf4_dequant(void *ctx, void *out, const uint8_t *codes,
                                  const uint8_t *qabsmax, const uint8_t *scales,
                                  const uint8_t *offset, uint64_t n, int block, int dq,
                                  const float *map, void *stream, fsdpc_err *err) {
  return fsdpc__cuda_nf4_dequant(ctx, out, codes, qabsmax, scales, offset, n, block, dq, map,
                                 stream, err);
}
static fsdpc_status c_nf4_quant(void *ctx, uint8_t *codes, float *absmax, uint8_t *qabsmax,
                                float *absmax2, float *offset, const float *x, uint64_t n,
                                int block, int dq, const float *map, void *stream, fsdpc_err *err) {
  return fsdpc__cuda_nf4_quant(ctx, codes, absmax, qabsmax, absmax2, offset, x, n, block, dq, map,
                               stream, err);
}
static fsdpc_status c_copy_on(void *ctx, void *dst, const void *src, size_t bytes, void *stream,
                              fsdpc_err *err) {
  if (!bytes) return FSDPC_OK;
  cudaStream_t s = stream ? (cudaStream_t)stream : (cudaStream_t)fsdpc__cuda_compute_stream(ctx);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (e != cudaSuccess)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: async copy of %zu bytes: %s", bytes,
                       cudaGetErrorString(e));
  return FSDPC_OK;
}
static fsdpc_status c_cast_to_f32_on(void *ctx, float *dst, const void *src, size_t n,
                                     void *stream, fsdpc_err *err) {
  return fsdpc__cuda_cast_bf16_f32(ctx, dst, src, n, stream, err);
}
static fsdpc_status c_cast_params(void *ctx, void *dst, const float *src, size_t n,
                                  fsdpc_err *err) {
  return fsdpc__cuda_cast_f32_bf16(ctx, dst, src, n, NULL, err);
}
static fsdpc_status c_sync(void *ctx, fsdpc_err *err) { return fsdpc__cuda_sync(ctx, err); }
static fsdpc_status c_rope_tables(void *ctx, float *cos, float *sin, const fsdpc_rope *r, int maxT,
                                  int use_long, fsdpc_err *err) {
  return fsdpc__cuda_rope_tables(ctx, cos, sin, r, maxT, use_long, err);
}
static fsdpc_status c_embedding_fwd(void *ctx, void *out, const int32_t *tokens, const void *wte,
                                    int N, int C, int V, fsdpc_err *err) {
  return fsdpc__cuda_embedding_fwd(ctx, out, tokens, wte, N, C, V, err);
}
static fsdpc_status c_embedding_bwd(void *ctx, float *dwte, const void *dout,
                                    const int32_t *tokens, int N, int C, int V, fsdpc_err *err) {
  return fsdpc__cuda_embedding_bwd(ctx, dwte, dout, tokens, N, C, V, err);
}
static fsdpc_status c_rmsnorm_fwd(void *ctx, void *out, float *rstd, const void *inp,
                                  const void *weight, int N, int C, float eps, fsdpc_err *err) {
  return fsdpc__cuda_rmsnorm_fwd(ctx, out, rstd, inp, weight, N, C, eps, err);
}
static fsdpc_status c_rmsnorm_bwd(void *ctx, void *dinp, float *dweight, const void *dout,
                                  const void *inp, const void *weight, const float *rstd, int N,
                                  int C, fsdpc_err *err) {
  return fsdpc__cuda_rmsnorm_bwd(ctx, dinp, dweight, dout, inp, weight, rstd, N, C, err);
}
static fsdpc_status c_matmul_fwd(void *ctx, void *out, const void *inp, const void *weight,
                                 const void *residual, int N, int C, int OC, fsdpc_err *err) {
  return fsdpc__cuda_matmul_fwd(ctx, out, inp, weight, residual, N, C, OC, err);
}
static fsdpc_status c_matmul_bias_fwd(void *ctx, void *out, const void *inp, const void *weight,
                                      const void *bias, const void *residual, int N, int C, int OC,
                                      fsdpc_err *err) {
  return fsdpc__cuda_matmul_bias_fwd(ctx, out, inp, weight, bias, residual, N, C, OC, err);
}
static fsdpc_status c_matmul_bwd(void *ctx, void *dinp, float *dweight, const void *dout,
                                 const void *inp, const void *weight, int N, int C, int OC,
                                 fsdpc_err *err) {
  return fsdpc__cuda_matmul_bwd(ctx, dinp, dweight, dout, inp, weight, N, C, OC, err);
}
static fsdpc_status c_fp8_matmul_fwd(void *ctx, int recipe, void *out, const void *inp,
                                     int inp_again, const void *weight, const void *residual, int N,
                                     int C, int OC, void *scratch, size_t scratch_bytes,
                                     fsdpc_err *err) {
  return fsdpc__cuda_fp8_matmul_fwd(ctx, recipe, out, inp, inp_again, weight, residual, N, C, OC,
                                    scratch, scratch_bytes, err);
}
static fsdpc_status c_fp8_matmul_bwd(void *ctx, int recipe, void *dinp, int dinp_acc,
                                     float *dweight, const void *dout, const void *inp,
                                     int inp_again, const void *weight, int N, int C, int OC,
                                     void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  return fsdpc__cuda_fp8_matmul_bwd(ctx, recipe, dinp, dinp_acc, dweight, dout, inp, inp_again,
                                    weight, N, C, OC, scratch, scratch_bytes, err);
}
static fsdpc_status c_rope_fwd(void *ctx, void *x, const float *cos, const float *sin,
                               const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                               fsdpc_err *err) {
  return fsdpc__cuda_rope_fwd(ctx, x, cos, sin, pos, N, H, HD, RD, maxT, err);
}
static fsdpc_status c_rope_bwd(void *ctx, void *dx, const float *cos, const float *sin,
                               const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                               fsdpc_err *err) {
  return fsdpc__cuda_rope_bwd(ctx, dx, cos, sin, pos, N, H, HD, RD, maxT, err);
}
static fsdpc_status c_rmsnorm_off_fwd(void *ctx, void *out, float *rstd, const void *inp,
                                      const void *weight, int N, int C, float eps, float offset,
                                      fsdpc_err *err) {
  return fsdpc__cuda_rmsnorm_off_fwd(ctx, out, rstd, inp, weight, N, C, eps, offset, err);
}
static fsdpc_status c_rmsnorm_off_bwd(void *ctx, void *dinp, float *dweight, const void *dout,
                                      const void *inp, const void *weight, const float *rstd,
                                      int N, int C, float offset, fsdpc_err *err) {
  return fsdpc__cuda_rmsnorm_off_bwd(ctx, dinp, dweight, dout, inp, weight, rstd, N, C, offset,
                                     err);
}
static fsdpc_status c_geglu_fwd(void *ctx, void *out, const void *gate, const void *up, int N,
                                int F, fsdpc_err *err) {
  return fsdpc__cuda_geglu_fwd(ctx, out, gate, up, N, F, err);
}
static fsdpc_status c_geglu_bwd(void *ctx, void *dgate, void *dup, const void *dout,
                                const void *gate, const void *up, int N, int F, fsdpc_err *err) {
  return fsdpc__cuda_geglu_bwd(ctx, dgate, dup, dout, gate, up, N, F, err);
}
static fsdpc_status c_swiglu_fwd(void *ctx, void *out, const void *gate, const void *up, int N,
                                 int F, fsdpc_err *err) {
  return fsdpc__cuda_swiglu_fwd(ctx, out, gate, up, N, F, err);
}
static fsdpc_status c_swiglu_bwd(void *ctx, void *dgate, void *dup, const void *dout,
                                 const void *gate, const void *up, int N, int F, fsdpc_err *err) {
  return fsdpc__cuda_swiglu_bwd(ctx, dgate, dup, dout, gate, up, N, F, err);
}
static fsdpc_status c_add(void *ctx, void *out, const void *a, const void *b, size_t n,
                          fsdpc_err *err) {
  return fsdpc__cuda_add(ctx, out, a, b, n, err);
}
static fsdpc_status c_add_inplace(void *ctx, void *y, const void *x, size_t n, fsdpc_err *err) {
  return fsdpc__cuda_add_inplace(ctx, y, x, n, err);
}
static size_t c_xent_scratch_bytes(int N, int V, int chunk_rows, int logits_bf16) {
  return fsdpc__cuda_lmhead_xent_scratch_bytes(N, V, chunk_rows, logits_bf16);
}
static fsdpc_status c_lmhead_xent(void *ctx, double *out2, void *dx, float *dweight, const void *x,
                                  const void *weight, const int32_t *labels, int N, int C, int V,
                                  float grad_scale, int chunk_rows, int logits_bf16, void *scratch,
                                  size_t scratch_bytes, fsdpc_err *err) {
  return fsdpc__cuda_lmhead_xent(ctx, out2, dx, dweight, x, weight, labels, N, C, V, grad_scale,
                                 chunk_rows, logits_bf16, scratch, scratch_bytes, err);
}
static fsdpc_status c_lmhead_xent_capped(void *ctx, double *out2, void *dx, float *dweight,
                                         const void *x, const void *weight, const int32_t *labels,
                                         int N, int C, int V, float grad_scale, int chunk_rows,
                                         int logits_bf16, float softcap, void *scratch,
                                         size_t scratch_bytes, fsdpc_err *err) {
  return fsdpc__cuda_lmhead_xent_capped(ctx, out2, dx, dweight, x, weight, labels, N, C, V,
                                        grad_scale, chunk_rows, logits_bf16, softcap, scratch,
                                        scratch_bytes, err);
}
static fsdpc_status c_lmhead_xent_rows(void *ctx, double *out2, double *row_loss,
                                       const float *row_seed, void *dx, float *dweight,
                                       const void *x, const void *weight, const int32_t *labels,
                                       int N, int C, int V, int chunk_rows, int logits_bf16,
                                       void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  return fsdpc__cuda_lmhead_xent_rows(ctx, out2, row_loss, row_seed, dx, dweight, x, weight, labels,
                                      N, C, V, chunk_rows, logits_bf16, scratch, scratch_bytes,
                                      err);
}
static fsdpc_status c_logits(void *ctx, float *out, const void *x, const void *weight, int N,
                             int C, int V, fsdpc_err *err) {
  return fsdpc__cuda_logits(ctx, out, x, weight, N, C, V, err);
}

static fsdpc_status c_kv_store(void *ctx, void *kc, void *vc, const void *k, const void *v,
                               const int32_t *pos, int B, int n, int maxT, int KD,
                               fsdpc_err *err) {
  return fsdpc__cuda_kv_store(ctx, kc, vc, k, v, pos, B, n, maxT, KD, err);
}
static fsdpc_status c_argmax_rows(void *ctx, int32_t *out, const float *x, int N, int V,
                                  fsdpc_err *err) {
  return fsdpc__cuda_argmax_rows(ctx, out, x, N, V, err);
}
static fsdpc_status c_attn_cached(void *ctx, void *out, const void *q, const void *kc,
                                  const void *vc, const int32_t *pos, int B, int n, int NH, int KVH,
                                  int HD, int maxT, float scale, int window, float softcap,
                                  fsdpc_err *err) {
  return fsdpc__cuda_attn_cached(ctx, out, q, kc, vc, pos, B, n, NH, KVH, HD, maxT, scale, window,
                                 softcap, err);
}

static fsdpc_status c_scale(void *ctx, void *x, size_t n, float s, fsdpc_err *err) {
  return fsdpc__cuda_scale_bf16(ctx, x, n, s, err);
}
static fsdpc_status c_dropout(void *ctx, void *out, const void *inp, size_t n, float p,
                              uint64_t key, fsdpc_err *err) {
  return fsdpc__cuda_dropout(ctx, out, inp, n, p, key, err);
}
static fsdpc_status c_matmul_bwd_acc(void *ctx, void *dinp, float *dweight, const void *dout,
                                     const void *inp, const void *weight, int N, int C, int OC,
                                     fsdpc_err *err) {
  return fsdpc__cuda_matmul_bwd_acc(ctx, dinp, dweight, dout, inp, weight, N, C, OC, err);
}
static void c_grad_overwrite(void *ctx, int on) {
  fsdpc__cuda_grad_overwrite(ctx, on);
}
static fsdpc_status c_rmsnorm_bwd_add(void *ctx, void *dinp, float *dweight, const void *dout,
                                      const void *dresid, const void *inp, const void *weight,
                                      const float *rstd, int N, int C, fsdpc_err *err) {
  return fsdpc__cuda_rmsnorm_bwd_add(ctx, dinp, dweight, dout, dresid, inp, weight, rstd, N, C,
                                     err);
}
static fsdpc_status c_bias_add(void *ctx, void *y, const void *bias, int N, int OC,
                               fsdpc_err *err) {
  return fsdpc__cuda_bias_add(ctx, y, bias, N, OC, err);
}
static fsdpc_status c_bias_bwd(void *ctx, float *dbias, const void *dy, int N, int OC,
                               fsdpc_err *err) {
  return fsdpc__cuda_bias_bwd(ctx, dbias, dy, N, OC, err);
}
static fsdpc_status c_axpy(void *ctx, void *out, const void *x, const void *y, float a, size_t n,
                           fsdpc_err *err) {
  return fsdpc__cuda_axpy(ctx, out, x, y, a, n, err);
}

void fsdpc__ops_cuda(void *cuda_ctx, fsdpc_ops *t) {
  *t = (fsdpc_ops){.device = FSDPC_DEVICE_CUDA,
                   .act_dtype = FSDPC_DTYPE_BF16,
                   .act_size = 2,
                   .ctx = cuda_ctx,
                   .alloc = c_alloc,
                   .free = c_free,
                   .arena_alloc = c_arena_alloc,
                   .arena_free = c_arena_free,
                   .account = c_account,
                   .stream = c_stream,
                   .comm_stream = c_comm_stream,
                   .d2h_stream = c_d2h_stream,
                   .event_record = c_event_record,
                   .stream_wait = c_stream_wait,
                   .cast_params_on = c_cast_params_on,
                   .add_f32_on = c_add_f32_on,
                   .upload = c_upload,
                   .download = c_download,
                   .memset0 = c_memset0,
                   .add_f32 = c_add_f32,
                   .sumsq_f32 = c_sumsq_f32,
                   .sumsq_f32_dev = c_sumsq_f32_dev,
                   .init_f32 = c_init_f32,
                   .alloc_host = c_alloc_host,
                   .free_host = c_free_host,
                   .copy_on = c_copy_on,
                   .nf4_dequant = c_nf4_dequant,
                   .nf4_quant = c_nf4_quant,
                   .cast_to_f32_on = c_cast_to_f32_on,
                   .cast_params = c_cast_params,
                   .sync = c_sync,
                   .rope_tables = c_rope_tables,
                   .embedding_fwd = c_embedding_fwd,
                   .embedding_bwd = c_embedding_bwd,
                   .rmsnorm_fwd = c_rmsnorm_fwd,
                   .rmsnorm_bwd = c_rmsnorm_bwd,
                   .matmul_fwd = c_matmul_fwd,
                   .matmul_bwd = c_matmul_bwd,
                   .rope_fwd = c_rope_fwd,
                   .rope_bwd = c_rope_bwd,
                   .rmsnorm_off_fwd = c_rmsnorm_off_fwd,
                   .rmsnorm_off_bwd = c_rmsnorm_off_bwd,
                   .geglu_fwd = c_geglu_fwd,
                   .geglu_bwd = c_geglu_bwd,
                   .swiglu_fwd = c_swiglu_fwd,
                   .swiglu_bwd = c_swiglu_bwd,
                   .add = c_add,
                   .add_inplace = c_add_inplace,
                   .xent_scratch_bytes = c_xent_scratch_bytes,
                   .lmhead_xent = c_lmhead_xent,
                   .logits = c_logits,
                   .kv_store = c_kv_store,
                   .attn_cached = c_attn_cached,
                   .take_error = c_take_error,
                   .matmul_bwd_acc = c_matmul_bwd_acc,
                   .rmsnorm_bwd_add = c_rmsnorm_bwd_add,

                   .argmax_rows = c_argmax_rows,
                   .event_sync = c_event_sync,
                   .grad_overwrite = c_grad_overwrite};
  t->scale = c_scale;
  t->dropout = c_dropout;
  t->bias_add = c_bias_add;
  t->bias_bwd = c_bias_bwd;
  t->axpy = c_axpy;
  t->fp8_matmul_fwd = c_fp8_matmul_fwd;
  t->fp8_matmul_bwd = c_fp8_matmul_bwd;
  t->matmul_bias_fwd = c_matmul_bias_fwd;
  t->lmhead_xent_capped = c_lmhead_xent_capped;
  t->lmhead_xent_rows = c_lmhead_xent_rows;
}
