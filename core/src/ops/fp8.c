/* FP8 formats and recipe scales on the host (fp8.h). Encoding works on the
 * value, not on bits: after saturation |x| lies in a binade [2^e, 2^(e+1))
 * (or the subnormal range, e = emin), where the format's values are the
 * multiples of 2^(e - mantissa bits); the nearest multiple, ties to even,
 * is the result. Every step is exact in double. */
#include "ops/fp8.h"

#include <math.h>

typedef struct fp8_fmt {
  int mbits, bias;
  float max;
} fp8_fmt;

static const fp8_fmt FMT[2] = {{3, 7, 448.0f}, {2, 15, 57344.0f}};

float fsdpc__fp8_max(int fmt) {
  return FMT[fmt].max;
}

/* n >= 0 to the nearest integer, ties to even, independent of the FPU's
 * rounding mode. */
static double round_even(double n) {
  double f = floor(n), d = n - f;
  if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
    f += 1.0;
  return f;
}

uint8_t fsdpc__fp8_encode(float x, int fmt) {
  const fp8_fmt *f = &FMT[fmt];
  uint8_t sign = signbit(x) ? 0x80 : 0;
  if (isnan(x)) /* E4M3: S.1111.111; E5M2: S.11111.10 (a quiet NaN) */
    return sign | (fmt == FSDPC_FP8_E4M3 ? 0x7F : 0x7E);
  double a = fabs((double)x);
  if (a > f->max) /* saturation, infinities included */
    a = f->max;
  if (a == 0.0)
    return sign;
  const int emin = 1 - f->bias;
  int e;
  frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  e -= 1;
  if (e < emin)
    e = emin;
  long m = (long)round_even(ldexp(a, f->mbits - e)); /* in [0, 2^(mbits+1)] */
  if (m == 0)
    return sign;
  if (m == 2L << f->mbits) { /* rounded up into the next binade */
    m >>= 1;
    e += 1;
  }
  if (m < 1L << f->mbits) /* subnormal: exponent field 0 */
    return sign | (uint8_t)m;
  return sign | (uint8_t)(((e + f->bias) << f->mbits) | (m - (1L << f->mbits)));
}

float fsdpc__fp8_decode(uint8_t b, int fmt) {
  const fp8_fmt *f = &FMT[fmt];
  const int emask = fmt == FSDPC_FP8_E4M3 ? 15 : 31, mmask = (1 << f->mbits) - 1;
  int ef = (b >> f->mbits) & emask, m = b & mmask;
  double sign = (b & 0x80) ? -1.0 : 1.0;
  if (fmt == FSDPC_FP8_E4M3 && ef == 15 && m == 7)
    return (float)copysign(NAN, sign);
  if (fmt == FSDPC_FP8_E5M2 && ef == 31)
    return (float)(m == 0 ? sign * INFINITY : copysign(NAN, sign));
  double v = ef == 0 ? ldexp(m, 1 - f->bias - f->mbits)
                     : ldexp((1 << f->mbits) + m, ef - f->bias - f->mbits);
  return (float)(sign * v);
}

float fsdpc__fp8_scale(float amax, int fmt, int pow2) {
  double a = amax;
  if (a < FSDPC_FP8_AMAX_EPS) /* false for NaN, which stays */
    a = FSDPC_FP8_AMAX_EPS;
  float s = (float)((double)FMT[fmt].max / a);
  if (pow2 && isfinite(s) && s > 0.0f) {
    /* floor(log2(s)) exactly (torchao: exp2(floor(log2(s))) in fp32, the
     * same except where log2f rounds up to the next integer) */
    int e;
    frexpf(s, &e);
    s = ldexpf(1.0f, e - 1);
  }
  return s;
}

static size_t up256(size_t n) {
  return (n + 255) & ~(size_t)255;
}

size_t fsdpc__fp8_block_bytes(size_t ea, size_t eb, size_t v) {
  return up256(ea) + up256(eb) + 4 * up256(v * sizeof(float));
}

static size_t max2(size_t a, size_t b) {
  return a > b ? a : b;
}

size_t fsdpc__fp8_tensor_block_bytes(size_t N, size_t in, size_t out) {
  /* the backward's x^T, dy, dy^T, W^T hold at least the forward's x, W */
  return 256 + up256(N * in) + 2 * up256(N * out) + up256(out * in);
}

size_t fsdpc__fp8_linear_scratch_bytes(size_t N, size_t in, size_t out) {
  size_t fwd = fsdpc__fp8_block_bytes(out * in, N * in, max2(N, out));
  size_t dinp = fsdpc__fp8_block_bytes(out * in, N * out, max2(N, in));
  size_t dw = fsdpc__fp8_block_bytes(N * in, N * out, max2(in, out));
  return max2(max2(fwd, fsdpc__fp8_tensor_block_bytes(N, in, out)), max2(dinp, dw));
}

int fsdpc__fp8_act_format(int recipe) {
  (void)recipe;
  return FSDPC_FP8_E4M3;
}

int fsdpc__fp8_grad_format(int recipe) {
  return recipe == FSDPC_FP8_ROWWISE ? FSDPC_FP8_E4M3 : FSDPC_FP8_E5M2;
}

int fsdpc__fp8_pow2(int recipe) {
  return recipe == FSDPC_FP8_ROWWISE;
}

/* max(|v|, m) that keeps a NaN once seen (torch.amax propagates NaN). */
static float amax_step(float m, float v) {
  if (isnan(m))
    return m;
  v = fabsf(v);
  return (isnan(v) || v > m) ? v : m;
}

void fsdpc__fp8_scales(const float *x, int rows, int cols, int axis, int fmt, int pow2,
                       float *scale) {
  int n = axis == FSDPC_FP8_AXIS_TENSOR ? 1 : axis == FSDPC_FP8_AXIS_ROW ? rows : cols;
  for (int k = 0; k < n; k++)
    scale[k] = 0.0f; /* the amax, until the end */
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      int k = axis == FSDPC_FP8_AXIS_TENSOR ? 0 : axis == FSDPC_FP8_AXIS_ROW ? i : j;
      scale[k] = amax_step(scale[k], x[(size_t)i * cols + j]);
    }
  for (int k = 0; k < n; k++)
    scale[k] = fsdpc__fp8_scale(scale[k], fmt, pow2);
}

void fsdpc__fp8_cast(const float *x, int rows, int cols, int axis, const float *scale, int fmt,
                     uint8_t *q) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      int k = axis == FSDPC_FP8_AXIS_TENSOR ? 0 : axis == FSDPC_FP8_AXIS_ROW ? i : j;
      size_t e = (size_t)i * cols + j;
      q[e] = fsdpc__fp8_encode(x[e] * scale[k], fmt);
    }
}
