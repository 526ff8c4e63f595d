/* NF4 (core/src/quant/nf4.c): what the bit-for-bit comparison with the numpy
 * reference (nf4_ref.py) does not show by itself: each table value
 * quantizes to its own code and back exactly; the error per element is at
 * most half the widest gap of the table times the block's scale; a range of
 * a tensor dequantizes to the same values as the whole; the storage counts
 * are 4.x bits a weight; bad block sizes, bad ranges and non-finite inputs
 * are refused with one line; the 8-bit dynamic map is the adamw8bit
 * plugin's. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "adamw8bit_math.h" /* the plugin's own copy of the signed dynamic map */
#include "check_run.h"
#include "quant/nf4.h"

typedef struct qbuf {
  fsdpc_nf4 q;
  float map[FSDPC_DYN_CODES];
} qbuf;

static void qalloc(qbuf *b, uint64_t n, int bs, int dq) {
  memset(b, 0, sizeof *b);
  b->q = (fsdpc_nf4){.n = n, .block_size = bs, .double_quant = dq};
  b->q.codes = calloc((n + 1) / 2 + 1, 1);
  b->q.absmax = calloc(fsdpc__nf4_blocks(n, bs) + 1, 4);
  b->q.qabsmax = calloc(fsdpc__nf4_blocks(n, bs) + 1, 1);
  b->q.absmax2 = calloc(fsdpc__nf4_blocks2(n, bs) + 1, 4);
  fsdpc__dynamic_map(b->map);
}

static void qfree(qbuf *b) {
  free(b->q.codes), free(b->q.absmax), free(b->q.qabsmax), free(b->q.absmax2);
}

static float gauss(unsigned *s) {
  float u = 0;
  for (int i = 0; i < 12; i++)
    u += (float)(rand_r(s) % 65536) / 65536.0f;
  return (u - 6.0f) * 0.02f;
}

START_TEST(table_round_trips) {
  qbuf b;
  qalloc(&b, 64, 64, 0);
  float x[64], y[64];
  for (int i = 0; i < 64; i++)
    x[i] = fsdpc__nf4_table[i % 16] * 3.0f;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &b.q, "t", &err), FSDPC_OK);
  ck_assert_float_eq(b.q.absmax[0], 3.0f);
  for (int i = 0; i < 64; i += 2)
    ck_assert_int_eq(b.q.codes[i / 2], (i % 16) << 4 | (i % 16 + 1));
  ck_assert_int_eq(fsdpc__nf4_dequantize(&b.q, b.map, 0, 64, y, &err), FSDPC_OK);
  for (int i = 0; i < 64; i++)
    ck_assert_float_eq(y[i], x[i]);
  qfree(&b);
}
END_TEST

START_TEST(error_bound_and_ranges) {
  const uint64_t n = 64 * 700 + 33; /* 701 blocks: 3 absmax2 blocks, odd n */
  qbuf b;
  qalloc(&b, n, 64, 1);
  float *x = malloc(n * 4), *all = malloc(n * 4), *part = malloc(n * 4);
  unsigned seed = 37;
  for (uint64_t i = 0; i < n; i++)
    x[i] = gauss(&seed);
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &b.q, "t", &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__nf4_dequantize(&b.q, b.map, 0, n, all, &err), FSDPC_OK);
  /* The widest gap of the table is -0.6961... - -1; half of it times the
   * restored scale bounds the error (double quant moves the scale a little). */
  for (uint64_t i = 0; i < n; i++) {
    float s = fsdpc__nf4_scale(&b.q, b.map, i / 64);
    ck_assert_msg(fabsf(s - b.q.absmax[i / 64]) <= 0.01f * b.q.absmax[i / 64] + 1e-6f,
                  "block %llu: scale %g vs absmax %g", (unsigned long long)(i / 64), s,
                  b.q.absmax[i / 64]);
    ck_assert_msg(fabsf(all[i] - x[i]) <= 0.152f * s + fabsf(s - b.q.absmax[i / 64]),
                  "element %llu: %g -> %g", (unsigned long long)i, x[i], all[i]);
  }
  /* Ranges that start and end inside blocks and on odd elements. */
  const uint64_t cuts[][2] = {{0, 1},     {1, 63},   {63, 2}, {64 * 255 + 7, 64 * 3},
                              {n - 1, 1}, {5, n - 5}};
  for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
    ck_assert_int_eq(fsdpc__nf4_dequantize(&b.q, b.map, cuts[c][0], cuts[c][1], part, &err),
                     FSDPC_OK);
    ck_assert_int_eq(memcmp(part, all + cuts[c][0], cuts[c][1] * 4), 0);
  }
  ck_assert_int_eq(fsdpc__nf4_dequantize(&b.q, b.map, n - 1, 2, part, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "outside the tensor"));
  free(x), free(all), free(part);
  qfree(&b);
}
END_TEST

START_TEST(sizes_and_refusals) {
  /* 8B-like projection 4096 x 4096, block 64: 0.5 byte a weight plus one
   * byte a block and 4 bytes per 256 blocks (+ the offset). */
  const uint64_t n = 4096ull * 4096ull, nb = n / 64;
  ck_assert_uint_eq(fsdpc__nf4_bytes(n, 64, 1), n / 2 + nb + 4 * (nb / 256) + 4);
  ck_assert_uint_eq(fsdpc__nf4_bytes(n, 64, 0), n / 2 + 4 * nb);
  ck_assert_uint_eq(fsdpc__nf4_bytes(3, 64, 1), 2 + 1 + 4 + 4);
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__nf4_check_block(64, &err), FSDPC_OK);
  const int64_t bad[] = {0, -64, 16, 48, 65, 8192};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(fsdpc__nf4_check_block(bad[i], &err), FSDPC_INVALID_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "quantization.block_size"));
    ck_assert_ptr_null(strchr(err.msg, '\n'));
  }
  qbuf b;
  qalloc(&b, 100, 64, 1);
  float x[100] = {0};
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &b.q, "w", &err), FSDPC_OK);
  x[77] = NAN;
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &b.q, "model.layers.0.mlp.up_proj.weight", &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "up_proj.weight element 77 is nan"));
  x[77] = -INFINITY;
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &b.q, "w", &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "is inf"));
  b.q.block_size = 100;
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &b.q, "w", &err), FSDPC_INVALID_USAGE);
  b.q.block_size = 64;
  b.q.n = 0; /* an empty tensor is nothing to do */
  ck_assert_int_eq(fsdpc__nf4_quantize(NULL, &b.q, "w", &err), FSDPC_OK);
  qfree(&b);
}
END_TEST

/* A large tensor is quantized by an OpenMP team: 1 thread and 4 give the
 * same bytes (codes, scales, 8-bit scales, offset), with an odd tail, a
 * zero block and outliers; the first non-finite element is the one named,
 * whichever thread meets it. */
START_TEST(threads_give_the_same_bytes) {
  const uint64_t n = 64ull * 5000 + 33; /* over the parallel threshold */
  float *x = malloc(n * sizeof *x);
  unsigned seed = 11;
  for (uint64_t i = 0; i < n; i++)
    x[i] = i >= 640 && i < 704 ? 0.0f : gauss(&seed);
  x[12345] = 3.0f, x[200001] = -7.5f;
  qbuf one, four;
  fsdpc_err err = {0};
  for (int dq = 0; dq < 2; dq++) {
    qalloc(&one, n, 64, dq);
    qalloc(&four, n, 64, dq);
    omp_set_num_threads(1);
    ck_assert_int_eq(fsdpc__nf4_quantize(x, &one.q, "w", &err), FSDPC_OK);
    omp_set_num_threads(4);
    ck_assert_int_eq(fsdpc__nf4_quantize(x, &four.q, "w", &err), FSDPC_OK);
    uint64_t nb = fsdpc__nf4_blocks(n, 64), nb2 = fsdpc__nf4_blocks2(n, 64);
    ck_assert_mem_eq(one.q.codes, four.q.codes, (n + 1) / 2);
    ck_assert_mem_eq(one.q.absmax, four.q.absmax, nb * 4);
    if (dq) {
      ck_assert_mem_eq(one.q.qabsmax, four.q.qabsmax, nb);
      ck_assert_mem_eq(one.q.absmax2, four.q.absmax2, nb2 * 4);
      ck_assert_mem_eq(&one.q.offset, &four.q.offset, 4);
    }
    qfree(&one);
    qfree(&four);
  }
  qalloc(&four, n, 64, 1);
  x[300000] = INFINITY, x[250000] = NAN, x[310000] = NAN;
  ck_assert_int_eq(fsdpc__nf4_quantize(x, &four.q, "w", &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "w element 250000 is nan"));
  qfree(&four);
  free(x);
}
END_TEST

/* The core's dynamic map is the adamw8bit plugin's signed one (a plugin
 * cannot link the core's internals, so each forms it); the GPU host has
 * compared the plugin's with torch's (tests/gpu/check_q8_maps.py). */
START_TEST(dynamic_map_is_the_plugins) {
  float core[FSDPC_DYN_CODES], plugin[Q8_CODES];
  fsdpc__dynamic_map(core);
  q8_dynamic_map(1, plugin);
  ck_assert_int_eq(memcmp(core, plugin, sizeof core), 0);
  ck_assert_float_eq(core[127], 0.0f);
  ck_assert_float_eq(core[255], 1.0f);
  for (int i = 1; i < FSDPC_DYN_CODES; i++)
    ck_assert(core[i - 1] < core[i]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("quant_nf4");
  TCase *tc = tcase_create("nf4");
  tcase_add_test(tc, table_round_trips);
  tcase_add_test(tc, error_bound_and_ranges);
  tcase_add_test(tc, sizes_and_refusals);
  tcase_add_test(tc, dynamic_map_is_the_plugins);
  tcase_add_test(tc, threads_give_the_same_bytes);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
