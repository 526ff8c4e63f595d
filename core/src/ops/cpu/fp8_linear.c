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

/* A GEMM operand: a row-major (rows, cols) matrix, its scale axis and
 * format, and whether the GEMM reads it transposed. */
typedef struct operand {
  const float *x;
  int rows, cols, axis, fmt, trans;
} operand;

/* y (M, Nc) = op(a) . op(b) in FP8: the accumulator times the 1/scale of
 * output row i in a and of output column j in b (a transposed operand's
 * output index is its stored column, or row); + res when non-NULL, or
 * added to y when add. */
static fsdpc_status qgemm(const operand *a, const operand *b, int pow2, float *y, const float *res,
                          int add, fsdpc_err *err) {
  const int M = a->trans ? a->cols : a->rows, K = a->trans ? a->rows : a->cols;
  const int Nc = b->trans ? b->rows : b->cols;
  fp8_op qa = {0}, qb = {0};
  float *acc = NULL;
  fsdpc_status st = quantize(&qa, a->x, a->rows, a->cols, a->axis, a->fmt, pow2, err);
  if (st == FSDPC_OK)
    st = quantize(&qb, b->x, b->rows, b->cols, b->axis, b->fmt, pow2, err);
  if (st == FSDPC_OK && !(acc = malloc((size_t)M * Nc * sizeof(float))))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "fp8 linear (cpu): out of memory (accumulator)");
  if (st == FSDPC_OK) {
    fsdpc__cpu_sgemm(a->trans, b->trans, M, Nc, K, qa.v, a->cols, qb.v, b->cols, 0.0f, acc, Nc);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < Nc; j++) {
        float f = (a->trans ? inv_at(&qa, 0, i) : inv_at(&qa, i, 0)) *
                  (b->trans ? inv_at(&qb, j, 0) : inv_at(&qb, 0, j));
        size_t e = (size_t)i * Nc + j;
        float v = acc[e] * f;
        y[e] = add ? y[e] + v : res ? res[e] + v : v;
      }
  }
  free(acc);
  op_free(&qa);
  op_free(&qb);
  return st;
}

fsdpc_status fsdpc__cpu_fp8_linear_fwd(int recipe, float *out, const float *inp,
                                       const float *weight, const float *residual, int N, int C,
                                       int OC, fsdpc_err *err) {
  if (N <= 0 || OC <= 0)
    return FSDPC_OK;
  int ax = recipe == FSDPC_FP8_ROWWISE ? FSDPC_FP8_AXIS_ROW : FSDPC_FP8_AXIS_TENSOR;
  int fmt = fsdpc__fp8_act_format(recipe);
  const operand x = {inp, N, C, ax, fmt, 0}, w = {weight, OC, C, ax, fmt, 1};
  return qgemm(&x, &w, fsdpc__fp8_pow2(recipe), out, residual, 0, err);
}

fsdpc_status fsdpc__cpu_fp8_linear_bwd(int recipe, float *dinp, int acc_dinp, float *dweight,
                                       const float *dout, const float *inp, const float *weight,
                                       int N, int C, int OC, fsdpc_err *err) {
  if (N <= 0 || C <= 0 || OC <= 0)
    return FSDPC_OK;
  const int row = recipe == FSDPC_FP8_ROWWISE, p2 = fsdpc__fp8_pow2(recipe);
  const int T = FSDPC_FP8_AXIS_TENSOR, xf = fsdpc__fp8_act_format(recipe);
  const int gf = fsdpc__fp8_grad_format(recipe);
  if (dinp) {
    const operand g = {dout, N, OC, row ? FSDPC_FP8_AXIS_ROW : T, gf, 0};
    const operand w = {weight, OC, C, row ? FSDPC_FP8_AXIS_COL : T, xf, 0};
    FSDPC_TRY(qgemm(&g, &w, p2, dinp, NULL, acc_dinp, err));
  }
  if (dweight) {
    const operand g = {dout, N, OC, row ? FSDPC_FP8_AXIS_COL : T, gf, 1};
    const operand x = {inp, N, C, row ? FSDPC_FP8_AXIS_COL : T, xf, 0};
    FSDPC_TRY(qgemm(&g, &x, p2, dweight, NULL, 1, err));
  }
  return FSDPC_OK;
}
