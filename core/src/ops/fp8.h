/* FP8 formats and scaling recipes (fsdp.mixed_precision.linear: fp8), on
 * the host: the reference the CPU emulation computes with and the CUDA path
 * is checked against (docs/cuda.md, "FP8 linear projections").
 *
 * Formats (OCP FP8): E4M3 "fn" (bias 7, max 448, no infinity, S.1111.111 is
 * NaN) and E5M2 (bias 15, max 57344, IEEE-like infinity and NaN). Encoding
 * is saturating, as torchao's to_fp8_saturated: clamp to +-max (infinities
 * included), then round to nearest, ties to even; NaN stays NaN.
 *
 * Recipes, as torchao.float8 (pytorch/ao, config.py at c6c388b and
 * float8_utils.py at 2d812af, Float8LinearConfig.from_recipe_name):
 *   tensorwise  one dynamic scale per tensor: scale = fp8_max / max(amax,
 *               1e-12), the division in double, rounded to fp32; input and
 *               weight E4M3, grad_output E5M2 (torchao's default CastConfig
 *               dtypes).
 *   rowwise     one scale per row of a GEMM's left operand and per column of
 *               its right one (axiswise), rounded down to a power of two
 *               (round_scales_to_power_of_2); E4M3 for all three operands.
 * A value is cast as fp8(x * scale) (the product in fp32) and a GEMM's
 * fp32 accumulator is multiplied by 1/scale of both operands. */
#ifndef FSDPC_OPS_FP8_H
#define FSDPC_OPS_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h" /* FSDPC_FP8_OFF, _TENSORWISE, _ROWWISE */

enum { FSDPC_FP8_E4M3 = 0, FSDPC_FP8_E5M2 = 1 };
/* What one scale covers: the whole tensor, a row, or a column of a
 * row-major (rows, cols) matrix. */
enum { FSDPC_FP8_AXIS_TENSOR = 0, FSDPC_FP8_AXIS_ROW = 1, FSDPC_FP8_AXIS_COL = 2 };

#define FSDPC_FP8_AMAX_EPS 1e-12 /* torchao's EPS: the amax floor of a scale */

/* The largest finite value: 448 (E4M3), 57344 (E5M2). */
float fsdpc__fp8_max(int fmt);
/* x to the format's byte: saturating, round to nearest even, NaN -> NaN. */
uint8_t fsdpc__fp8_encode(float x, int fmt);
/* The byte's value (exact in fp32). */
float fsdpc__fp8_decode(uint8_t b, int fmt);
/* The scale of an amax: fp8_max / max(amax, 1e-12) in double, to fp32;
 * pow2: rounded down to a power of two. A NaN amax gives a NaN scale. */
float fsdpc__fp8_scale(float amax, int fmt, int pow2);

/* The format of each GEMM operand under a recipe: the forward's input and
 * weight, and the gradient of the output (both backward GEMMs). */
int fsdpc__fp8_act_format(int recipe);
int fsdpc__fp8_grad_format(int recipe);
/* Scales rounded down to powers of two (rowwise). */
int fsdpc__fp8_pow2(int recipe);

/* The scales of a row-major (rows, cols) fp32 matrix along axis: 1 (tensor),
 * rows (AXIS_ROW: amax over each row) or cols (AXIS_COL: over each column)
 * values into scale. */
void fsdpc__fp8_scales(const float *x, int rows, int cols, int axis, int fmt, int pow2,
                       float *scale);
/* q[i, j] = encode(x[i, j] * scale[axis index of (i, j)]). */
void fsdpc__fp8_cast(const float *x, int rows, int cols, int axis, const float *scale, int fmt,
                     uint8_t *q);

/* A device FP8 GEMM's scratch (ops/cuda/fp8.cu). rowwise, per GEMM: two
 * operands' FP8 copies of ea and eb bytes and four vectors of v fp32
 * values, each rounded up to 256 bytes (fsdpc__fp8_block_bytes).
 * tensorwise, per projection (fsdpc__fp8_tensor_block_bytes): 256 bytes of
 * scales, then the input's copy (x in the forward, x^T in the backward, at
 * the same offset, so that projections sharing an input cast it once), then
 * the forward's W, or the backward's dy, dy^T and W^T, each rounded up to
 * 256 bytes. fsdpc__fp8_linear_scratch_bytes: the most a linear projection
 * of N rows from in to out features needs under either recipe. The model
 * context holds one block of the largest of its projections
 * (fsdp.mixed_precision.linear: fp8). */
size_t fsdpc__fp8_block_bytes(size_t ea, size_t eb, size_t v);
size_t fsdpc__fp8_tensor_block_bytes(size_t N, size_t in, size_t out);
size_t fsdpc__fp8_linear_scratch_bytes(size_t N, size_t in, size_t out);

#endif
