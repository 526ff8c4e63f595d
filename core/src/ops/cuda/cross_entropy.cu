/* Fused lm_head + softmax cross-entropy on the GPU, chunked over rows (twin
 * of ops/cpu/cross_entropy.c). N = rows, C = hidden, V = vocab, R = chunk.
 *
 * Per chunk: logits (R, V) = x_c W^T (cuBLASLt, fp32 accumulation), written
 * in fp32 or, with logits_bf16, rounded to bf16 (what transformers does);
 * then one block per row takes the max and the exp-sum in fp32 in one
 * online pass, writes the row's loss (lse - logit[label]) and, for the
 * backward, the bf16 gradient grad_scale * (softmax - onehot) into dlogits
 * (R, V); then dx_c = dlogits W (bf16, =) and dW += dlogits^T x_c (fp32,
 * beta = 1; the first chunk writes dW, beta 0, while the context's
 * grad_overwrite is on). At the end one block adds the per-row losses in a
 * fixed order into fp64.
 *
 * Two variants share the kernel: soft-capped logits (Gemma 2's final
 * softcap c: each logit z becomes c tanh(z / c) in fp32 before the
 * softmax, after the bf16 rounding, and the gradient is multiplied by
 * 1 - (capped / c)^2, as ops/cpu does) and per-row seeds (sequence
 * objectives: row r's gradient is seed[r] * (softmax - onehot), and each
 * row's loss goes back to the host). The seeds travel in the per-row loss
 * slots: a row's block reads its seed before its barrier and writes its
 * loss after it.
 *
 * Scratch layout, each part 256-byte aligned: fp32 logits (R, V) | dlogits
 * bf16 (R, V) | loss fp32 (N); with bf16 logits the gradient overwrites
 * them in place: logits = dlogits bf16 (R, V) | loss fp32 (N). */
#include "ops/cuda/cuda_internal.cuh"

#define XENT_THREADS 1024
#define IGNORE_INDEX (-100)

static size_t align256(size_t b) {
  return (b + 255) / 256 * 256;
}

/* ops/ops.c: the one formula, which the planner uses without CUDA */
extern "C" size_t fsdpc__xent_scratch_bytes(int32_t device, int N, int V, int chunk_rows,
                                            int logits_bf16);
extern "C" size_t fsdpc__cuda_lmhead_xent_scratch_bytes(int N, int V, int chunk_rows,
                                                        int logits_bf16) {
  return fsdpc__xent_scratch_bytes(FSDPC_DEVICE_CUDA, N, V, chunk_rows, logits_bf16);
}

/* Online max / sum-of-exp pair, combined associatively. */
static __device__ __forceinline__ void lse_combine(float &m, float &s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY)
    return; /* both empty */
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

/* Online (max, sum of exp) over one thread's share of a row. */
static __device__ __forceinline__ void lse_push(float &m, float &s, float l) {
  if (l > m) {
    s = s * expf(m - l) + 1.0f;
    m = l;
  } else {
    s += expf(l - m);
  }
}

/* (max, sum of exp) of a warp's 32 pairs, by a butterfly: every lane gets
 * the same pair. */
static __device__ __forceinline__ void lse_warp(float &m, float &s) {
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    lse_combine(m, s, m2, s2);
  }
}

/* (max, sum of exp) of a block: each warp's pair, then every warp combines
 * the warps' pairs by the same butterfly, so every thread gets the same
 * pair. sh holds 32 float2. */
static __device__ __forceinline__ void lse_block(float &m, float &s, float2 *sh) {
  lse_warp(m, s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0)
    sh[warp] = make_float2(m, s);
  __syncthreads();
  m = lane < nw ? sh[lane].x : -INFINITY;
  s = lane < nw ? sh[lane].y : 0.0f;
  lse_warp(m, s);
}

/* Logits of type T moved 16 bytes at a time: W values per vector (4 fp32 or
 * 8 bf16), their gradients stored as W bf16 (8 or 16 bytes). */
template <typename T> struct XVec;
template <> struct XVec<float> {
  static constexpr int W = 4;
  typedef float4 V;
  typedef uint2 G;
  static __device__ __forceinline__ void unpack(const float4 &v, float f[4]) {
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
  }
  static __device__ __forceinline__ uint2 pack_grad(const float g[4]) {
    __nv_bfloat162 a = __floats2bfloat162_rn(g[0], g[1]), b = __floats2bfloat162_rn(g[2], g[3]);
    uint2 u;
    memcpy(&u.x, &a, 4);
    memcpy(&u.y, &b, 4);
    return u;
  }
};
template <> struct XVec<bf16> {
  static constexpr int W = 8;
  typedef uint4 V;
  typedef uint4 G;
  static __device__ __forceinline__ void unpack(const uint4 &v, float f[8]) {
    unpack_bf16x8(v, f);
  }
  static __device__ __forceinline__ uint4 pack_grad(const float g[8]) {
    return pack_bf16x8(g);
  }
};

static __device__ __forceinline__ float logit_f(float x) {
  return x;
}
static __device__ __forceinline__ float logit_f(bf16 x) {
  return __bfloat162float(x);
}

/* The gradient of W logits f starting at column c0: grad_scale * (softmax -
 * onehot); the thread whose vector holds the label also writes the row's
 * loss (from its own registers: with bf16 logits the gradient overwrites the
 * row in place, so nobody reads the label's logit from memory afterwards).
 * CAP: f holds soft-capped logits, and the gradient gets d(capped)/dz. */
template <int W, bool CAP>
static __device__ __forceinline__ void grad_of(float g[W], const float f[W], int c0, int label,
                                               float lse, float grad_scale, float softcap,
                                               float *loss) {
#pragma unroll
  for (int j = 0; j < W; j++) {
    g[j] = grad_scale * __expf(f[j] - lse);
    if (c0 + j == label) {
      g[j] -= grad_scale;
      *loss = lse - f[j];
    }
    if (CAP) {
      const float t = f[j] / softcap;
      g[j] *= 1.0f - t * t;
    }
  }
}

/* The W logits of one vector, soft-capped as transformers does: divide,
 * tanh, multiply, in fp32. */
template <int W, bool CAP>
static __device__ __forceinline__ void cap_of(float f[W], float softcap) {
  if (CAP)
#pragma unroll
    for (int j = 0; j < W; j++)
      f[j] = tanhf(f[j] / softcap) * softcap;
}

/* One block per row of the chunk: two passes over the row (the kernel is
 * bound by them). When V is a multiple of W (rows then start 16-byte
 * aligned) the logits move 16 bytes at a time. dlogits may alias logits
 * (bf16): each vector is read, then overwritten, by the same thread.
 * seeded: row_loss[r] holds the row's seed on entry (instead of grad_scale),
 * read by every thread before the barrier in lse_block. */
template <typename T, bool CAP>
static __global__ void xent_row_kernel(float *row_loss, // (R) this chunk's slice of (N)
                                       bf16 *dlogits,   // (R, V) or NULL
                                       const T *logits, // (R, V)
                                       const int32_t *labels, int V, float grad_scale, int seeded,
                                       float softcap) {
  typedef XVec<T> X;
  constexpr int W = X::W;
  __shared__ float2 sh[32];
  const int r = blockIdx.x, label = labels[r];
  if (seeded)
    grad_scale = row_loss[r];
  const T *row = logits + (size_t)r * V;
  bf16 *drow = dlogits ? dlogits + (size_t)r * V : NULL;
  const int vec = V % W == 0, VV = vec ? V / W : 0;
  if (label < 0 || label >= V) { /* ignore_index or invalid: no loss, zero gradient */
    if (drow)
      for (int v = threadIdx.x; v < V; v += blockDim.x)
        drow[v] = __float2bfloat16(0.0f);
    if (threadIdx.x == 0)
      row_loss[r] = 0.0f;
    return;
  }
  float m = -INFINITY, s = 0.0f;
  const typename X::V *rowv = (const typename X::V *)row;
  for (int i = threadIdx.x; i < VV; i += blockDim.x) {
    float f[W];
    X::unpack(rowv[i], f);
    cap_of<W, CAP>(f, softcap);
#pragma unroll
    for (int j = 0; j < W; j++)
      lse_push(m, s, f[j]);
  }
  for (int v = VV * W + threadIdx.x; v < V; v += blockDim.x) {
    float f[1] = {logit_f(row[v])};
    cap_of<1, CAP>(f, softcap);
    lse_push(m, s, f[0]);
  }
  lse_block(m, s, sh);
  const float lse = m + logf(s);
  /* The label's thread writes the loss (evaluation too: the same code gives
   * the same bits as the training call) */
  float loss = 0.0f;
  int mine = 0; /* this thread met the label */
  for (int i = threadIdx.x; i < VV; i += blockDim.x) {
    float f[W], g[W];
    X::unpack(rowv[i], f);
    cap_of<W, CAP>(f, softcap);
    grad_of<W, CAP>(g, f, W * i, label, lse, grad_scale, softcap, &loss);
    mine |= label >= W * i && label < W * i + W;
    if (drow)
      ((typename X::G *)drow)[i] = X::pack_grad(g);
  }
  for (int v = VV * W + threadIdx.x; v < V; v += blockDim.x) {
    float f[1] = {logit_f(row[v])}, g[1];
    cap_of<1, CAP>(f, softcap);
    grad_of<1, CAP>(g, f, v, label, lse, grad_scale, softcap, &loss);
    mine |= v == label;
    if (drow)
      drow[v] = __float2bfloat16(g[0]);
  }
  if (mine)
    row_loss[r] = loss;
}

/* out2 = (sum of row losses, count of rows with a label in [0, V)). */
static __global__ void xent_total_kernel(double *out2, const float *row_loss, const int32_t *labels,
                                         int N, int V) {
  __shared__ double sh[2][32];
  double s = 0.0, c = 0.0;
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    s += row_loss[i];
    c += labels[i] >= 0 && labels[i] < V ? 1.0 : 0.0;
  }
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    c += __shfl_xor_sync(0xffffffffu, c, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) {
    sh[0][warp] = s;
    sh[1][warp] = c;
  }
  __syncthreads();
  if (warp == 0) {
    s = lane < nw ? sh[0][lane] : 0.0;
    c = lane < nw ? sh[1][lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      c += __shfl_xor_sync(0xffffffffu, c, o);
    }
    if (lane == 0) {
      out2[0] = s;
      out2[1] = c;
    }
  }
}

/* The row kernel of one chunk; softcap > 0 soft-caps the logits. */
template <typename T>
static fsdpc_status launch_xent_rows(fsdpc_cuda_ctx *ctx, float *row_loss, bf16 *dlogits,
                                     const T *logits, const int32_t *labels, int R, int V,
                                     float grad_scale, int seeded, float softcap, fsdpc_err *err) {
  if (softcap > 0.0f)
    xent_row_kernel<T, true><<<R, XENT_THREADS, 0, ctx->compute>>>(
        row_loss, dlogits, logits, labels, V, grad_scale, seeded, softcap);
  else
    xent_row_kernel<T, false><<<R, XENT_THREADS, 0, ctx->compute>>>(
        row_loss, dlogits, logits, labels, V, grad_scale, seeded, 0.0f);
  FSDPC_CUDA_LAUNCHED(err, "lmhead_xent (softmax)");
  return FSDPC_OK;
}

static fsdpc_status launch_xent_total(fsdpc_cuda_ctx *ctx, double *out2, const float *row_loss,
                                      const int32_t *labels, int N, int V, fsdpc_err *err) {
  xent_total_kernel<<<1, 1024, 0, ctx->compute>>>(out2, row_loss, labels, N, V);
  FSDPC_CUDA_LAUNCHED(err, "lmhead_xent (total)");
  return FSDPC_OK;
}

/* What one call computes besides the mean-loss op: soft-capped logits
 * (softcap > 0), per-row seeds (host, N) and per-row losses back to the host
 * (N, as double). */
typedef struct {
  float softcap;
  const float *row_seed_h;
  double *row_loss_h;
  const char *who;
} xent_variant;

/* The row losses of the device's fp32 slots into the host's doubles: the
 * floats land in the first half of the doubles' bytes, then widen in place
 * from the last row down (double i covers floats 2i and 2i + 1, both read
 * already; row 0 reads its float before writing). */
static fsdpc_status row_losses_down(fsdpc_cuda_ctx *ctx, double *row_loss_h, const float *row_loss,
                                    int N, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__cuda_d2h(ctx, row_loss_h, row_loss, (size_t)N * sizeof(float), err));
  const float *f = (const float *)row_loss_h;
  for (int i = N - 1; i >= 0; i--) {
    const float v = f[i];
    row_loss_h[i] = (double)v;
  }
  return FSDPC_OK;
}

static fsdpc_status xent_run(fsdpc_cuda_ctx *ctx, double *out2, bf16 *dx, float *dweight,
                             const bf16 *x, const bf16 *weight, const int32_t *labels, int N, int C,
                             int V, float grad_scale, int chunk_rows, int logits_bf16,
                             void *scratch, size_t scratch_bytes, const xent_variant *k,
                             fsdpc_err *err) {
  if (!out2 || !x || !weight || !labels || !scratch)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda %s: out2, x, weight, labels or scratch is NULL", k->who);
  if (N < 0 || C < 1 || V < 1 || chunk_rows < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: bad shape N=%d C=%d V=%d chunk_rows=%d",
                       k->who, N, C, V, chunk_rows);
  const size_t need = fsdpc__cuda_lmhead_xent_scratch_bytes(N, V, chunk_rows, logits_bf16);
  if (scratch_bytes < need)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda %s: scratch of %zu bytes < %zu needed for N=%d V=%d "
                       "chunk_rows=%d",
                       k->who, scratch_bytes, need, N, V, chunk_rows);
  const int Rmax = chunk_rows < N ? chunk_rows : (N > 0 ? N : 1);
  float *logits = (float *)scratch; /* fp32 logits, or (bf16) dlogits */
  bf16 *dlogits = logits_bf16
                      ? (bf16 *)scratch
                      : (bf16 *)((char *)scratch + align256((size_t)Rmax * V * sizeof(float)));
  float *row_loss = (float *)((char *)dlogits + align256((size_t)Rmax * V * sizeof(bf16)));
  const int want_grad = dx != NULL || dweight != NULL, seeded = k->row_seed_h != NULL;
  if (seeded && want_grad) /* the seeds ride in the loss slots (the row kernel) */
    FSDPC_TRY(fsdpc__cuda_h2d(ctx, row_loss, k->row_seed_h, (size_t)N * sizeof(float), err));
  const int seed_rows = seeded && want_grad;
  for (int r0 = 0; r0 < N; r0 += chunk_rows) {
    const int R = N - r0 < chunk_rows ? N - r0 : chunk_rows;
    const bf16 *xc = x + (size_t)r0 * C;
    if (logits_bf16) {
      FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 1, 0, V, R, C, weight, C, xc, C, NULL, dlogits, V,
                                    CUDA_R_16BF, 1.0f, 0.0f, "lmhead_xent (logits)", err));
      FSDPC_TRY(launch_xent_rows(ctx, row_loss + r0, want_grad ? dlogits : NULL,
                                 (const bf16 *)dlogits, labels + r0, R, V, grad_scale, seed_rows,
                                 k->softcap, err));
    } else {
      FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 1, 0, V, R, C, weight, C, xc, C, NULL, logits, V,
                                    CUDA_R_32F, 1.0f, 0.0f, "lmhead_xent (logits)", err));
      FSDPC_TRY(launch_xent_rows(ctx, row_loss + r0, want_grad ? dlogits : NULL,
                                 (const float *)logits, labels + r0, R, V, grad_scale, seed_rows,
                                 k->softcap, err));
    }
    if (dx)
      FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 0, 0, C, R, V, weight, C, dlogits, V, NULL,
                                    dx + (size_t)r0 * C, C, CUDA_R_16BF, 1.0f, 0.0f,
                                    "lmhead_xent (dx)", err));
    const int ow = ctx->grad_overwrite && r0 == 0; /* the first chunk writes dW (beta 0) */
    if (dweight)
      FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 0, 1, C, V, R, xc, C, dlogits, V, ow ? NULL : dweight,
                                    dweight, C, CUDA_R_32F, 1.0f, ow ? 0.0f : 1.0f,
                                    "lmhead_xent (dweight)", err));
  }
  FSDPC_TRY(launch_xent_total(ctx, out2, row_loss, labels, N, V, err));
  return k->row_loss_h ? row_losses_down(ctx, k->row_loss_h, row_loss, N, err) : FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_lmhead_xent(fsdpc_cuda_ctx *ctx, double *out2, fsdpc_bf16 *dx,
                                                float *dweight, const fsdpc_bf16 *x,
                                                const fsdpc_bf16 *weight, const int32_t *labels,
                                                int N, int C, int V, float grad_scale,
                                                int chunk_rows, int logits_bf16, void *scratch,
                                                size_t scratch_bytes, fsdpc_err *err) {
  const xent_variant k = {0.0f, NULL, NULL, "lmhead_xent"};
  return xent_run(ctx, out2, (bf16 *)dx, dweight, (const bf16 *)x, (const bf16 *)weight, labels, N,
                  C, V, grad_scale, chunk_rows, logits_bf16, scratch, scratch_bytes, &k, err);
}

extern "C" fsdpc_status
fsdpc__cuda_lmhead_xent_capped(fsdpc_cuda_ctx *ctx, double *out2, fsdpc_bf16 *dx, float *dweight,
                               const fsdpc_bf16 *x, const fsdpc_bf16 *weight, const int32_t *labels,
                               int N, int C, int V, float grad_scale, int chunk_rows,
                               int logits_bf16, float softcap, void *scratch, size_t scratch_bytes,
                               fsdpc_err *err) {
  if (!(softcap > 0.0f))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda lmhead_xent_capped: softcap %g must be > 0 (the uncapped head is "
                       "lmhead_xent)",
                       (double)softcap);
  const xent_variant k = {softcap, NULL, NULL, "lmhead_xent_capped"};
  return xent_run(ctx, out2, (bf16 *)dx, dweight, (const bf16 *)x, (const bf16 *)weight, labels, N,
                  C, V, grad_scale, chunk_rows, logits_bf16, scratch, scratch_bytes, &k, err);
}

extern "C" fsdpc_status fsdpc__cuda_lmhead_xent_rows(fsdpc_cuda_ctx *ctx, double *out2,
                                                     double *row_loss, const float *row_seed,
                                                     fsdpc_bf16 *dx, float *dweight,
                                                     const fsdpc_bf16 *x, const fsdpc_bf16 *weight,
                                                     const int32_t *labels, int N, int C, int V,
                                                     int chunk_rows, int logits_bf16, void *scratch,
                                                     size_t scratch_bytes, fsdpc_err *err) {
  const xent_variant k = {0.0f, row_seed, row_loss, "lmhead_xent_rows"};
  const int bwd = row_seed != NULL; /* no seeds: the forward only, as the CPU's */
  return xent_run(ctx, out2, bwd ? (bf16 *)dx : NULL, bwd ? dweight : NULL, (const bf16 *)x,
                  (const bf16 *)weight, labels, N, C, V, 0.0f, chunk_rows, logits_bf16, scratch,
                  scratch_bytes, &k, err);
}
