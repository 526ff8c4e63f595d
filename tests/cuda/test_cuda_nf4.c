/* The CUDA NF4 quantization and dequantization (ops/cuda/nf4.cu, issue 37)
 * against the CPU module. Dequantization: against the CPU
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

/* The CUDA quantization against fsdpc__nf4_quantize: codes, absmax and,
 * with double quantization, qabsmax, absmax2 and the offset, byte for
 * byte. x is the CPU's input: normal-ish values with a zero block, an
 * outlier, denormals, ties of the 8-bit search (blocks of equal absmax, so
 * absmax - offset is 0 in a block of its own), and odd sizes. */
static void quant_case(uint64_t n, int block, int dq, int equal_blocks) {
  float *x = rand_f32(n, -0.1, 0.1);
  for (uint64_t i = 0; i < n && i < (uint64_t)block && !equal_blocks; i++)
    x[i] = 0.0f;
  if (n > 3 * (uint64_t)block && !equal_blocks) {
    x[2 * block + 5] = 40.0f;
    x[2 * block + 6] = 1e-40f; /* a denormal beside it */
    x[3 * block - 1] = -1e-39f;
  }
  if (equal_blocks) /* every block's absmax is 0.05: offset = absmax, absmax2 = 0 */
    for (uint64_t i = 0; i < n; i++)
      x[i] = i % (uint64_t)block ? x[i] * 0.4f : (i / (uint64_t)block) % 2 ? 0.05f : -0.05f;
  uint64_t nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  uint64_t cb = (n + 1) / 2;
  uint8_t *codes = malloc(cb), *qabsmax = calloc(nb, 1);
  float *absmax = malloc(nb * 4), *absmax2 = calloc(nb2, 4);
  fsdpc_nf4 q = {.n = n,
                 .block_size = block,
                 .double_quant = dq,
                 .codes = codes,
                 .absmax = absmax,
                 .qabsmax = dq ? qabsmax : NULL,
                 .absmax2 = dq ? absmax2 : NULL};
  CK(fsdpc__nf4_quantize(x, &q, "case", &g_err));
  float map[FSDPC_DYN_CODES], off = -1.0f;
  fsdpc__dynamic_map(map);
  float *d_x = up_raw(x, n * 4);
  uint8_t *d_codes = dev_alloc(cb), *d_q = dev_alloc(nb);
  float *d_absmax = dev_alloc(nb * 4), *d_absmax2 = dev_alloc(nb2 * 4);
  CK(fsdpc__cuda_nf4_quant(g_ctx, d_codes, d_absmax, dq ? d_q : NULL, dq ? d_absmax2 : NULL, &off,
                           d_x, n, block, dq, map, NULL, &g_err));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  uint8_t *g_codes = malloc(cb), *g_q = malloc(nb);
  float *g_absmax = malloc(nb * 4), *g_absmax2 = malloc(nb2 * 4);
  CK(fsdpc__cuda_d2h(g_ctx, g_codes, d_codes, cb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, g_absmax, d_absmax, nb * 4, &g_err));
  for (uint64_t i = 0; i < cb; i++)
    ck_assert_msg(g_codes[i] == codes[i],
                  "n %llu block %d: code byte %llu is 0x%02x, the CPU's 0x%02x",
                  (unsigned long long)n, block, (unsigned long long)i, g_codes[i], codes[i]);
  ck_assert_msg(memcmp(g_absmax, absmax, nb * 4) == 0, "n %llu block %d: absmax differs",
                (unsigned long long)n, block);
  if (dq) {
    CK(fsdpc__cuda_d2h(g_ctx, g_q, d_q, nb, &g_err));
    CK(fsdpc__cuda_d2h(g_ctx, g_absmax2, d_absmax2, nb2 * 4, &g_err));
    ck_assert_msg(memcmp(&off, &q.offset, 4) == 0, "offset %.9g, the CPU's %.9g", off, q.offset);
    for (uint64_t b = 0; b < nb; b++)
      ck_assert_msg(g_q[b] == qabsmax[b], "n %llu: qabsmax[%llu] is %u, the CPU's %u",
                    (unsigned long long)n, (unsigned long long)b, g_q[b], qabsmax[b]);
    ck_assert_msg(memcmp(g_absmax2, absmax2, nb2 * 4) == 0, "n %llu: absmax2 differs",
                  (unsigned long long)n);
  }
  printf("nf4 quant n=%llu block=%d dq=%d%s: codes, scales = the CPU's\n", (unsigned long long)n,
         block, dq, equal_blocks ? " (equal blocks)" : "");
  dev_free(d_x, n * 4);
  dev_free(d_codes, cb), dev_free(d_q, nb), dev_free(d_absmax, nb * 4);
  dev_free(d_absmax2, nb2 * 4);
  free(x), free(codes), free(qabsmax), free(absmax), free(absmax2);
  free(g_codes), free(g_q), free(g_absmax), free(g_absmax2);
}

START_TEST(nf4_quant_against_cpu) {
  quant_case(1, 64, 1, 0);
  quant_case(4097, 64, 1, 0);         /* odd, short tail */
  quant_case(64 * 300 + 6, 64, 1, 0); /* two absmax2 blocks */
  quant_case(64 * 300 + 6, 64, 0, 0);
  quant_case(256 * 70, 256, 1, 0);
  quant_case(32 * 1000 + 1, 32, 1, 0);
  quant_case(4096 * 3 + 100, 4096, 1, 0);
  quant_case(64 * 512, 64, 1, 1);
  quant_case(4096ull * 14336ull, 64, 1, 0); /* an 8B down_proj */
}
END_TEST

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
  tcase_add_test(tc, nf4_quant_against_cpu);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(suite);
}
