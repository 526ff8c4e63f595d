/* bf16 / f16 <-> fp32 conversions: hand-picked values (ties, NaN, inf,
 * subnormals), exhaustive 16-bit round trips, and random fp32 inputs checked
 * against a nearest-even rule computed in double. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/dtype.h"

static uint16_t bf(uint32_t bits) { return fsdpc__f32_to_bf16(fsdpc__f32_from_bits(bits)); }
static uint16_t hf(float f) { return fsdpc__f32_to_f16(f); }

START_TEST(bf16_rne_hand_picked) {
  ck_assert_uint_eq(bf(0x3F800000u), 0x3F80);          /* 1.0 */
  ck_assert_uint_eq(bf(0x3F807FFFu), 0x3F80);          /* below half: down */
  ck_assert_uint_eq(bf(0x3F808000u), 0x3F80);          /* tie, even below: down */
  ck_assert_uint_eq(bf(0x3F808001u), 0x3F81);          /* above half: up */
  ck_assert_uint_eq(bf(0x3F818000u), 0x3F82);          /* tie, odd below: up to even */
  ck_assert_uint_eq(bf(0xBF818000u), 0xBF82);          /* same with sign */
  ck_assert_uint_eq(bf(0x80000000u), 0x8000);          /* -0 */
  ck_assert_uint_eq(bf(0x7F800000u), 0x7F80);          /* inf */
  ck_assert_uint_eq(bf(0xFF800000u), 0xFF80);          /* -inf */
  ck_assert_uint_eq(bf(0x7F7FFFFFu), 0x7F80);          /* FLT_MAX rounds to inf */
  ck_assert_uint_eq(bf(0x7F7F8000u), 0x7F80);          /* tie above the largest bf16 (odd) */
  ck_assert_uint_eq(bf(0x7F7E8000u), 0x7F7E);          /* tie, even: stays finite */
  ck_assert_uint_eq(bf(0x00000001u), 0x0000);          /* smallest subnormal */
  ck_assert_uint_eq(bf(0x00008000u), 0x0000);          /* subnormal tie to even */
  ck_assert_uint_eq(bf(0x00018000u), 0x0002);          /* subnormal tie up to even */
  ck_assert_uint_eq(bf(0x007FFFFFu), 0x0080);          /* largest subnormal -> min normal */
  ck_assert_uint_eq(bf(0x7FC00000u), 0x7FC0);          /* quiet NaN */
  ck_assert_uint_eq(bf(0x7F800001u) & 0x7FFF, 0x7FC0); /* payload only in the low half */
  ck_assert_uint_eq(bf(0xFF800001u), 0xFFC0);          /* NaN keeps its sign */
  ck_assert_uint_eq(bf(0x7FFFFFFFu), 0x7FFF);          /* NaN never carries into the sign */
  ck_assert_uint_eq(fsdpc__f32_bits(fsdpc__bf16_to_f32(0x0001)), 0x00010000u);
  ck_assert(isnan(fsdpc__bf16_to_f32(bf(0x7F800001u))));
}
END_TEST

START_TEST(bf16_exhaustive_round_trip) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = fsdpc__bf16_to_f32((uint16_t)h);
    uint16_t back = fsdpc__f32_to_bf16(f);
    if (isnan(f))
      ck_assert(isnan(fsdpc__bf16_to_f32(back)) && (back & 0x8000) == (h & 0x8000));
    else
      ck_assert_uint_eq(back, h);
  }
}
END_TEST

/* Value of bf16 bits as a double, with inf standing for 2^128 so that the
 * distance to it follows IEEE overflow rounding. */
static double bf_value(uint32_t b16) {
  if ((b16 & 0x7FFF) == 0x7F80)
    return (b16 & 0x8000) ? -ldexp(1, 128) : ldexp(1, 128);
  return (double)fsdpc__bf16_to_f32((uint16_t)b16);
}

START_TEST(bf16_random_is_nearest_even) {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 1000000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    uint32_t bits = (uint32_t)s;
    float x = fsdpc__f32_from_bits(bits);
    if (isnan(x) || isinf(x))
      continue;
    uint32_t lo = bits >> 16, hi = lo + 1; /* neighbours toward and away from 0 */
    uint16_t r = fsdpc__f32_to_bf16(x);
    double dlo = fabs((double)x - bf_value(lo)), dhi = fabs((double)x - bf_value(hi));
    uint32_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    ck_assert_msg(r == want, "x bits %08x: got %04x want %04x", bits, r, want);
  }
}
END_TEST

START_TEST(f16_hand_picked) {
  ck_assert_float_eq(fsdpc__f16_to_f32(0x3C00), 1.0f);
  ck_assert_float_eq(fsdpc__f16_to_f32(0xC000), -2.0f);
  ck_assert_float_eq(fsdpc__f16_to_f32(0x7BFF), 65504.0f);
  ck_assert_float_eq(fsdpc__f16_to_f32(0x0001), ldexpf(1, -24));
  ck_assert_float_eq(fsdpc__f16_to_f32(0x03FF), 1023 * ldexpf(1, -24));
  ck_assert_float_eq(fsdpc__f16_to_f32(0x0400), ldexpf(1, -14));
  ck_assert(isinf(fsdpc__f16_to_f32(0x7C00)) && fsdpc__f16_to_f32(0x7C00) > 0);
  ck_assert(isinf(fsdpc__f16_to_f32(0xFC00)) && fsdpc__f16_to_f32(0xFC00) < 0);
  ck_assert(isnan(fsdpc__f16_to_f32(0x7E00)));
  ck_assert(signbit(fsdpc__f16_to_f32(0x8000)));

  ck_assert_uint_eq(hf(65504.0f), 0x7BFF);
  ck_assert_uint_eq(hf(65519.0f), 0x7BFF);                  /* below the overflow tie */
  ck_assert_uint_eq(hf(65520.0f), 0x7C00);                  /* overflow tie rounds to inf */
  ck_assert_uint_eq(hf(1.0f + ldexpf(1, -11)), 0x3C00);     /* tie down to even */
  ck_assert_uint_eq(hf(1.0f + 3 * ldexpf(1, -11)), 0x3C02); /* tie up to even */
  ck_assert_uint_eq(hf(ldexpf(1, -24)), 0x0001);            /* smallest subnormal */
  ck_assert_uint_eq(hf(ldexpf(1, -25)), 0x0000);            /* half of it: tie to 0 */
  ck_assert_uint_eq(hf(1.5f * ldexpf(1, -25)), 0x0001);
  ck_assert_uint_eq(hf(3 * ldexpf(1, -25)), 0x0002);              /* 1.5 ulp tie -> 2 */
  ck_assert_uint_eq(hf(ldexpf(1, -14) - ldexpf(1, -26)), 0x0400); /* up into normals */
  ck_assert_uint_eq(hf(-0.0f), 0x8000);
  ck_assert_uint_eq(hf(INFINITY), 0x7C00);
  ck_assert_uint_eq(hf(-1e9f), 0xFC00);
  ck_assert(isnan(fsdpc__f16_to_f32(hf(NAN))));
  ck_assert(isnan(fsdpc__f16_to_f32(hf(fsdpc__f32_from_bits(0x7F800001u)))));
}
END_TEST

START_TEST(f16_exhaustive_round_trip) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = fsdpc__f16_to_f32((uint16_t)h);
    uint16_t back = fsdpc__f32_to_f16(f);
    if (isnan(f))
      ck_assert(isnan(fsdpc__f16_to_f32(back)));
    else
      ck_assert_msg(back == h, "f16 %04x -> %g -> %04x", h, (double)f, back);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("io_dtype");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, bf16_rne_hand_picked);
  tcase_add_test(tc, bf16_exhaustive_round_trip);
  tcase_add_test(tc, bf16_random_is_nearest_even);
  tcase_add_test(tc, f16_hand_picked);
  tcase_add_test(tc, f16_exhaustive_round_trip);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
