/* The CUDA NF4 dequantization (ops/cuda/nf4.cu, issue 37) against the CPU
 * module (quant/nf4.c) rounded to bf16: bit for bit, on tensors quantized
 * by the CPU (odd sizes, short tail blocks, a zero block, outliers, more
 * than 256 blocks, block sizes 64 and 256, with and without double
 * quantization), with the scales at odd byte offsets as inside an NF4
 * unit's image (fsdp/nf4_unit.h). */
#include "cuda_testutil.h"
#include "io/dtype.h"
#include "quant/nf4.h"

static void nf4_case(uint64_t n, int block, int dq) {
  float *x = rand_f32(n, -0.1, 0.1);
  for (uint64_t i = 0; i < n && i < (uint64_t)block; i++) /* a zero first block */
    x[i] = 0.0f;
  if (n > 3 * (uint64_t)block)
    x[2 * block + 5] = 40.0f; /* an outlier */
  uint64_t nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  uint64_t cb = (n + 1) / 2;
  /* the image: 1 pad byte, codes, qabsmax, then the fp32 scales and offset
   * unaligned */
  uint64_t bytes = 1 + cb + (dq ? nb : 0) + 4 * (dq ? nb2 : nb) + 4;
  uint8_t *img = calloc(bytes, 1);
  float *absmax = malloc(nb * 4), *absmax2 = malloc(nb2 * 4 + 4);
  fsdpc_nf4 q = {.n = n,
                 .block_size = block,
                 .double_quant = dq,
                 .codes = img + 1,
                 .absmax = absmax,
                 .qabsmax = dq ? img + 1 + cb : NULL,
                 .absmax2 = dq ? absmax2 : NULL};
  CK(fsdpc__nf4_quantize(x, &q, "case", &g_err));
  uint8_t *sc = img + 1 + cb + (dq ? nb : 0);
  memcpy(sc, dq ? absmax2 : absmax, 4 * (dq ? nb2 : nb));
  uint8_t *off = sc + 4 * (dq ? nb2 : nb);
  memcpy(off, &q.offset, 4);
  float map[FSDPC_DYN_CODES], *ref = malloc(n * 4);
  fsdpc__dynamic_map(map);
  CK(fsdpc__nf4_dequantize(&q, map, 0, n, ref, &g_err));
  uint8_t *d_img = up_raw(img, bytes);
  uint16_t *d_out = dev_alloc(n * 2);
  CK(fsdpc__cuda_nf4_dequant(g_ctx, d_out, d_img + 1, dq ? d_img + 1 + cb : NULL,
                             d_img + (sc - img), d_img + (off - img), n, block, dq, map, NULL,
                             &g_err));
  uint16_t *got = malloc(n * 2);
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, got, d_out, n * 2, &g_err));
  for (uint64_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == fsdpc__f32_to_bf16(ref[i]),
                  "n %llu block %d dq %d: element %llu is 0x%04x, the CPU's 0x%04x (%.9g)",
                  (unsigned long long)n, block, dq, (unsigned long long)i, got[i],
                  fsdpc__f32_to_bf16(ref[i]), ref[i]);
  printf("nf4 n=%llu block=%d dq=%d: %llu bf16 values = the CPU's\n", (unsigned long long)n, block,
         dq, (unsigned long long)n);
  dev_free(d_img, bytes);
  dev_free(d_out, n * 2);
  free(x), free(img), free(absmax), free(absmax2), free(ref), free(got);
}

START_TEST(nf4_against_cpu) {
  nf4_case(1, 64, 1);
  nf4_case(4097, 64, 1);         /* odd, short tail */
  nf4_case(64 * 300 + 6, 64, 1); /* two absmax2 blocks */
  nf4_case(64 * 300 + 6, 64, 0);
  nf4_case(256 * 70, 256, 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cuda_nf4");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, nf4_against_cpu);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(suite);
}
