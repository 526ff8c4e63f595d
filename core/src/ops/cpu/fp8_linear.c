/* The FP8 linear projection, emulated in fp32 (fsdp.mixed_precision.linear:
 * fp8 on the CPU; the reference of the CUDA cuBLASLt path). Each GEMM
 * quantizes both operands with its recipe's scales (ops/fp8.h), multiplies
 * the DECODED fp8 values with fp32 accumulation (fsdpc__cpu_sgemm, so the
 * same tiles and sums at any thread count), then multiplies each element of
 * the accumulator by (1/scale_left) * (1/scale_right), as cuBLASLt's scale
 * pointers do. Axes (torchao's float8_linear.py, per GEMM):
 *   out   (N, OC) = x (N, C) . W^T      x per row,      W per row (OC)
 *   dinp  (N, C)  = dy (N, OC) . W      dy per row,     W per column (C)
 *   dW    (OC, C) = dy^T . x            dy per column,  x per column
 * under rowwise; one scale per tensor under tensorwise. */
#include <stdlib.h>

#include "ops/cpu/ops_cpu.h"
#include "ops/fp8.h"

/* One operand: its decoded fp8 values and 1/scale along its axis. */
typedef struct fp8_op {
  float *v, *inv;
  int axis;
} fp8_op;

static void op_free(fp8_op *o) {
  free(o->v);
  free(o->inv);
}

static fsdpc_status quantize(fp8_op *o, const float *x, int rows, int cols, int axis, int fmt,
                             int pow2, fsdpc_err *err) {
  size_t n = (size_t)rows * cols;
  int ns = axis == FSDPC_FP8_AXIS_TENSOR ? 1 : axis == FSDPC_FP8_AXIS_ROW ? rows : cols;
  o->axis = axis;
  o->v = malloc((n ? n : 1) * sizeof(float));
  o->inv = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(float));
  uint8_t *q = malloc(n ? n : 1);
  if (!o->v || !o->inv || !q) {
    free(q);
    op_free(o);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "fp8 linear (cpu): out of memory quantizing a %d x %d operand", rows, cols);
  }
  fsdpc__fp8_scales(x, rows, cols, axis, fmt, pow2, o->inv);
  fsdpc__fp8_cast(x, rows, cols, axis, o->inv, fmt, q);
  for (size_t e = 0; e < n; e++)
    o->v[e] = fsdpc__fp8_decode(q[e], fmt);
  for (int k = 0; k < ns; k++)
    o->inv[k] = 1.0f / o->inv[k];
  free(q);
  return FSDPC_OK;
}

static float inv_at(const fp8_op *o, int i, int j) {
  return o->inv[o->axis == FSDPC_FP8_AXIS_TENSOR ? 0 : o->axis == FSDPC_FP8_AXIS_ROW ? i : j];
}

/* y (M, Ncol) = acc (+ res when non-NULL; y += when add), each element
 * times the 1/scale of output row i of the left operand and of output
 * column j of the right one. left_t / right_t: that operand is stored
 * transposed to its role (dy in dW, W in the forward), so output row i is
 * its stored column i (output column j its stored row j). */
static void unscale(float *y, const float *acc, const float *res, int add, int M, int Ncol,
                    const fp8_op *l, int left_t, const fp8_op *r, int right_t) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < Ncol; j++) {
      float f = (left_t ? inv_at(l, 0, i) : inv_at(l, i, 0)) *
                (right_t ? inv_at(r, j, 0) : inv_at(r, 0, j));
      size_t e = (size_t)i * Ncol + j;
      float v = acc[e] * f;
      y[e] = add ? y[e] + v : res ? res[e] + v : v;
    }
}

static fsdpc_status oom(fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "fp8 linear (cpu): out of memory (accumulator)");
}

fsdpc_status fsdpc__cpu_fp8_linear_fwd(int recipe, float *out, const float *inp,
                                       const float *weight, const float *residual, int N, int C,
                                       int OC, fsdpc_err *err) {
  if (N <= 0 || OC <= 0)
    return FSDPC_OK;
  int ax = recipe == FSDPC_FP8_ROWWISE ? FSDPC_FP8_AXIS_ROW : FSDPC_FP8_AXIS_TENSOR;
  int fmt = fsdpc__fp8_act_format(recipe), p2 = fsdpc__fp8_pow2(recipe);
  fp8_op x = {0}, w = {0};
  fsdpc_status st = quantize(&x, inp, N, C, ax, fmt, p2, err);
  if (st == FSDPC_OK)
    st = quantize(&w, weight, OC, C, ax, fmt, p2, err);
  float *acc = st == FSDPC_OK ? malloc((size_t)N * OC * sizeof(float)) : NULL;
  if (st == FSDPC_OK && !acc)
    st = oom(err);
  if (st == FSDPC_OK) {
    fsdpc__cpu_sgemm(0, 1, N, OC, C, x.v, C, w.v, C, 0.0f, acc, OC);
    /* w's scales are per row of W, i.e. per output column j */
    unscale(out, acc, residual, 0, N, OC, &x, 0, &w, 1);
  }
  free(acc);
  op_free(&x);
  op_free(&w);
  return st;
}

static fsdpc_status bwd_dinp(int recipe, float *dinp, int acc_dinp, const float *dout,
                             const float *weight, int N, int C, int OC, fsdpc_err *err) {
  int row = recipe == FSDPC_FP8_ROWWISE;
  int p2 = fsdpc__fp8_pow2(recipe);
  fp8_op g = {0}, w = {0};
  fsdpc_status st = quantize(&g, dout, N, OC, row ? FSDPC_FP8_AXIS_ROW : FSDPC_FP8_AXIS_TENSOR,
                             fsdpc__fp8_grad_format(recipe), p2, err);
  if (st == FSDPC_OK)
    st = quantize(&w, weight, OC, C, row ? FSDPC_FP8_AXIS_COL : FSDPC_FP8_AXIS_TENSOR,
                  fsdpc__fp8_act_format(recipe), p2, err);
  float *acc = st == FSDPC_OK ? malloc((size_t)N * C * sizeof(float)) : NULL;
  if (st == FSDPC_OK && !acc)
    st = oom(err);
  if (st == FSDPC_OK) {
    fsdpc__cpu_sgemm(0, 0, N, C, OC, g.v, OC, w.v, C, 0.0f, acc, C);
    unscale(dinp, acc, NULL, acc_dinp, N, C, &g, 0, &w, 0);
  }
  free(acc);
  op_free(&g);
  op_free(&w);
  return st;
}

static fsdpc_status bwd_dweight(int recipe, float *dweight, const float *dout, const float *inp,
                                int N, int C, int OC, fsdpc_err *err) {
  int ax = recipe == FSDPC_FP8_ROWWISE ? FSDPC_FP8_AXIS_COL : FSDPC_FP8_AXIS_TENSOR;
  int p2 = fsdpc__fp8_pow2(recipe);
  fp8_op g = {0}, x = {0};
  fsdpc_status st = quantize(&g, dout, N, OC, ax, fsdpc__fp8_grad_format(recipe), p2, err);
  if (st == FSDPC_OK)
    st = quantize(&x, inp, N, C, ax, fsdpc__fp8_act_format(recipe), p2, err);
  float *acc = st == FSDPC_OK ? malloc((size_t)OC * C * sizeof(float)) : NULL;
  if (st == FSDPC_OK && !acc)
    st = oom(err);
  if (st == FSDPC_OK) {
    fsdpc__cpu_sgemm(1, 0, OC, C, N, g.v, OC, x.v, C, 0.0f, acc, C);
    /* row o of dW is column o of dy; column c is column c of x */
    unscale(dweight, acc, NULL, 1, OC, C, &g, 1, &x, 0);
  }
  free(acc);
  op_free(&g);
  op_free(&x);
  return st;
}

fsdpc_status fsdpc__cpu_fp8_linear_bwd(int recipe, float *dinp, int acc_dinp, float *dweight,
                                       const float *dout, const float *inp, const float *weight,
                                       int N, int C, int OC, fsdpc_err *err) {
  if (N <= 0 || C <= 0 || OC <= 0)
    return FSDPC_OK;
  if (dinp)
    FSDPC_TRY(bwd_dinp(recipe, dinp, acc_dinp, dout, weight, N, C, OC, err));
  if (dweight)
    FSDPC_TRY(bwd_dweight(recipe, dweight, dout, inp, N, C, OC, err));
  return FSDPC_OK;
}
