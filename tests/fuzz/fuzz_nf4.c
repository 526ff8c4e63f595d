/* libFuzzer harness for NF4 quantization (quant/nf4.c).
 *
 * Byte 0 picks the block size (32 << (b & 7)) and double quantization (bit
 * 3); the rest is the tensor, little-endian fp32 of any bit pattern (NaN,
 * inf, denormals, huge values). A tensor with a non-finite element must be
 * refused in one line; any other must quantize, dequantize every element
 * within the format's bound (|x - x'| <= 2 absmax + |scale - absmax|: a
 * code's value is within [-1, 1] of its scale, and a zero or denormal
 * block's 1/absmax may overflow), and give the same bits for any sub-range
 * as for the whole. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/nf4.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > (1u << 20))
    return 0;
  int bs = 32 << (data[0] & 7), dq = (data[0] >> 3) & 1;
  uint64_t n = (size - 1) / 4;
  float *x = malloc(n * 4 + 4), *all = malloc(n * 4 + 4), *part = malloc(n * 4 + 4);
  fsdpc_nf4 q = {.n = n, .block_size = bs, .double_quant = dq};
  q.codes = malloc((n + 1) / 2 + 1);
  q.absmax = malloc(fsdpc__nf4_blocks(n, bs) * 4 + 4);
  q.qabsmax = malloc(fsdpc__nf4_blocks(n, bs) + 1);
  q.absmax2 = malloc(fsdpc__nf4_blocks2(n, bs) * 4 + 4);
  CHECK(x && all && part && q.codes && q.absmax && q.qabsmax && q.absmax2);
  memcpy(x, data + 1, n * 4);
  int finite = 1;
  for (uint64_t i = 0; i < n; i++)
    finite &= isfinite(x[i]) != 0;
  float map[FSDPC_DYN_CODES];
  fsdpc__dynamic_map(map);
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__nf4_quantize(x, &q, "fuzz", &err);
  if (!finite) {
    CHECK(st == FSDPC_INVALID_USAGE && strchr(err.msg, '\n') == NULL);
    CHECK(strstr(err.msg, "nf4: fuzz element") == err.msg);
  } else {
    CHECK(st == FSDPC_OK);
    CHECK(fsdpc__nf4_dequantize(&q, map, 0, n, all, &err) == FSDPC_OK);
    for (uint64_t i = 0; i < n; i++) {
      double a = q.absmax[i / (uint64_t)bs], s = fsdpc__nf4_scale(&q, map, i / (uint64_t)bs);
      double d = fabs((double)all[i] - (double)x[i]);
      CHECK(isinf(s) || d <= 2 * a * (1 + 1e-6) + fabs(s - a));
    }
    uint64_t lo = n ? (uint64_t)data[size - 1] % n : 0, len = n - lo;
    CHECK(fsdpc__nf4_dequantize(&q, map, lo, len, part, &err) == FSDPC_OK);
    CHECK(memcmp(part, all + lo, len * 4) == 0);
    CHECK(fsdpc__nf4_dequantize(&q, map, lo, len + 1, part, &err) == FSDPC_INVALID_USAGE);
  }
  free(x), free(all), free(part);
  free(q.codes), free(q.absmax), free(q.qabsmax), free(q.absmax2);
  return 0;
}
