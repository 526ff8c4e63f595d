/* The adamw8bit CPU kernels' vector forms (AVX2, AVX-512: adamw8bit_cpu.h)
 * against the scalar form, bit for bit: the quantization search on every
 * map entry, midpoint and their neighbours, special values and a random
 * sample; and whole steps over quantized tensors (block phases, partial
 * first and last blocks, tails shorter than a vector, all-zero blocks,
 * gradients over twelve decades) and fp32-state tensors (the
 * min_8bit_size path). A form this CPU lacks is reported and skipped (CI
 * machines have AVX2 at least). Built with the plugin's flags (no FMA
 * contraction). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw8bit_cpu.h"

static uint64_t rng_state = 1;
static double uniform(double lo, double hi) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * (double)(z >> 11) / 9007199254740992.0;
}

static const char *isa_name[] = {"scalar", "AVX2", "AVX-512", "AVX-512 without gathers"};

/* The last form this CPU runs: both AVX-512 forms where it has AVX-512. */
static int last_form(void) {
  const int best = q8_cpu_isa();
  return best == Q8_ISA_AVX512 ? Q8_ISA_AVX512P : best;
}

/* ---- the search ---- */

#ifdef Q8_X86
Q8_AVX2 static void search_avx2(const q8_vecmap *vm, const float *x, int n, int32_t *out,
                                uint8_t *bad, int sign_fix, const float *s) {
  for (int i = 0; i + 8 <= n; i += 8) {
    int b;
    __m256i c = q8_nearest8(vm, _mm256_loadu_ps(x + i), &b);
    if (sign_fix)
      c = q8_sign_fix8(vm, c, _mm256_loadu_ps(s + i));
    _mm256_storeu_si256((__m256i *)(out + i), c);
    for (int l = 0; l < 8; l++)
      bad[i + l] = (uint8_t)(b >> l & 1);
  }
}

Q8_AVX512 static void search_avx512(const q8_vecmap *vm, const float *x, int n, int32_t *out,
                                    uint8_t *bad, int sign_fix, const float *s, int perm) {
  for (int i = 0; i + 16 <= n; i += 16) {
    __mmask16 b;
    __m512i c = perm ? q8_nearest16p(vm, _mm512_loadu_ps(x + i), &b)
                     : q8_nearest16(vm, _mm512_loadu_ps(x + i), &b);
    if (sign_fix)
      c = q8_sign_fix16(vm, c, _mm512_loadu_ps(s + i));
    _mm512_storeu_si512(out + i, c);
    for (int l = 0; l < 16; l++)
      bad[i + l] = (uint8_t)(b >> l & 1);
  }
}
#endif

START_TEST(vector_search_equals_the_scalar_search) {
  const int best = q8_cpu_isa();
  if (best == Q8_ISA_SCALAR) {
    fprintf(stderr, "this CPU has neither AVX2 nor AVX-512: nothing to compare\n");
    return;
  }
  static q8_tables tb;
  q8_tables_build(&tb);
  /* the dynamic maps allow the vector search: a bucket of 8 mantissa bits
   * holds at most one midpoint, entries' signs are sorted */
  ck_assert(tb.vec[0].ok && tb.vec[1].ok);
  ck_assert_int_eq(tb.vec[0].nonneg, 127);
  ck_assert_int_eq(tb.vec[1].nonneg, 0);
  for (int sg = 0; sg < 2; sg++) {
    const float *map = tb.maps[sg ? 0 : 1];
    const q8_fastmap *fm = &tb.fast[sg ? 0 : 1];
    const q8_vecmap *vm = &tb.vec[sg ? 0 : 1];
    const float bottom = sg ? -1.0f : 0.0f;
    enum { N = 262144 };
    static float x[N], s[N];
    static int32_t out[N];
    static uint8_t bad[N];
    int n = 0;
    for (int c = 0; c < Q8_CODES; c++) { /* entries, midpoints and two neighbours each side */
      const float pts[2] = {map[c], c + 1 < Q8_CODES ? vm->mid[c] : 1.0f};
      for (int k = 0; k < 2; k++) {
        float lo = pts[k], hi = pts[k];
        x[n++] = pts[k];
        for (int u = 0; u < 2; u++) {
          x[n++] = lo = nextafterf(lo, -2.0f);
          x[n++] = hi = nextafterf(hi, 2.0f);
        }
      }
    }
    const float special[] = {0.0f,        -0.0f,        1.0f,      -1.0f,    1e-30f,
                             -1e-30f,     5.96e-8f,     -5.96e-8f, 6e-8f,    -6e-8f,
                             0.99999994f, -0.99999994f, NAN,       INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
      x[n++] = special[k];
    while (n < N) /* over eight decades, both signs for the signed map */
      x[n++] = (float)(uniform(sg ? -1 : 0, 1) * pow(10.0, -uniform(0, 8)));
    for (int i = 0; i < N; i++) /* the moment whose sign the code keeps; zeros of both signs */
      s[i] = i % 97 == 0 ? (i % 2 ? -0.0f : 0.0f) : (x[i] == 0.0f ? (float)uniform(-1, 1) : x[i]);
    for (int isa = Q8_ISA_AVX2; isa <= last_form(); isa++) {
      for (int fix = 0; fix <= sg; fix++) {
        memset(out, 0, sizeof out);
#ifdef Q8_X86
        if (isa == Q8_ISA_AVX2)
          search_avx2(vm, x, N, out, bad, fix, s);
        else
          search_avx512(vm, x, N, out, bad, fix, s, isa == Q8_ISA_AVX512P);
#endif
        for (int i = 0; i < N; i++) {
          /* the gather-free search answers every finite |x| <= 1 */
          const int covered =
              isa == Q8_ISA_AVX512P ? fabsf(x[i]) <= 1.0f : q8_vec_covers(q8_bits(x[i]));
          ck_assert_msg(bad[i] == !covered, "%s: x = %a covered %d, bad lane %d", isa_name[isa],
                        x[i], covered, bad[i]);
          if (!covered)
            continue; /* the kernel redoes these lanes with the scalar search */
          /* the byte the kernel stores (a sign fix may step past an end) */
          uint8_t want = (uint8_t)q8_nearest_fast(map, fm, x[i], bottom);
          if (fix)
            want = q8_sign_fix(map, want, s[i]);
          ck_assert_msg((uint8_t)out[i] == want, "%s %s map%s: x = %a: %d, scalar %d",
                        isa_name[isa], sg ? "signed" : "unsigned", fix ? " + sign fix" : "", x[i],
                        out[i], want);
        }
      }
    }
  }
}
END_TEST

/* ---- whole steps ---- */

typedef struct tdesc {
  uint64_t n, phase;
  int quant, decay;
  double grad_decades; /* gradients of magnitude 10^-[0, grad_decades) */
  int zero_blocks;     /* every third block's gradients are 0, and every fifth element's */
} tdesc;

static const tdesc TD[] = {
    {1000, 0, 1, 1, 4, 0}, {700, 100, 1, 0, 4, 0}, {3000, 7, 1, 1, 12, 1}, {17, 255, 1, 1, 4, 0},
    {256, 0, 1, 0, 4, 0},  {255, 1, 1, 1, 4, 1},   {1, 0, 1, 1, 4, 0},     {4133, 200, 1, 1, 8, 0},
    {1000, 0, 0, 1, 4, 0}, {33, 0, 0, 0, 4, 0},    {4095, 0, 0, 1, 12, 1}, {0, 0, 1, 1, 4, 0},
};
#define NT ((int)(sizeof TD / sizeof TD[0]))
#define STEPS 5

typedef struct tstate {
  float *p[NT], *g[NT], *f[NT], *s[NT];
  uint8_t *q[NT];
} tstate;

static uint64_t nb_of(int k) {
  return q8_n_blocks(TD[k].n, TD[k].phase);
}

static void tstate_init(tstate *a, uint64_t seed) {
  rng_state = seed;
  for (int k = 0; k < NT; k++) {
    uint64_t n = TD[k].n + 1, nb = nb_of(k) + 1;
    a->p[k] = malloc(n * sizeof(float));
    a->g[k] = malloc(n * STEPS * sizeof(float));
    a->f[k] = calloc(2 * n, sizeof(float));
    a->q[k] = calloc(2 * n, 1);
    a->s[k] = calloc(2 * nb, sizeof(float));
    for (uint64_t i = 0; i < TD[k].n; i++)
      a->p[k][i] = (float)uniform(-1, 1);
    for (int st = 0; st < STEPS; st++)
      for (uint64_t i = 0; i < TD[k].n; i++) {
        uint64_t blk = (TD[k].phase + i) / Q8_BLOCK;
        double gv = uniform(-1, 1) * pow(10.0, -uniform(0, TD[k].grad_decades));
        /* zero_blocks: whole zero blocks (absmax 0) and zeros inside the others */
        int zero = TD[k].zero_blocks && (blk % 3 == 0 || i % 5 == 0);
        a->g[k][st * TD[k].n + i] = zero ? 0.0f : (float)gv;
      }
  }
}

static void tstate_free(tstate *a) {
  for (int k = 0; k < NT; k++) {
    free(a->p[k]);
    free(a->g[k]);
    free(a->f[k]);
    free(a->q[k]);
    free(a->s[k]);
  }
}

/* The plugin's step scalars (adamw8bit.c q8_step) for step t. */
static q8_scalars scalars(int t, double lr, double gs) {
  const double b1 = 0.9, b2 = 0.95, eps = 1e-6, wd = 0.05;
  const double c1 = 1.0 - pow(b1, t), c2 = sqrt(1.0 - pow(b2, t));
  q8_scalars sc = {.grad_scale = (float)gs,
                   .beta1 = (float)b1,
                   .w1 = (float)(1.0 - b1),
                   .beta2 = (float)b2,
                   .w2 = (float)(1.0 - b2),
                   .step_size = (float)(-lr * c2 / c1),
                   .eps_c2 = (float)(eps * c2),
                   .decay_factor = (float)(1.0 - lr * wd)};
  return sc;
}

static void run_steps(tstate *a, int isa, const q8_tables *tb) {
  q8_block_fn block;
  q8_piece_fn piece;
  q8_cpu_pick(isa, tb, &block, &piece);
  for (int st = 1; st <= STEPS; st++) {
    const q8_scalars sc = scalars(st, 1e-3 * (1 + 0.5 * st), st % 2 ? 0.73 : 1.0);
    for (int k = 0; k < NT; k++) {
      uint64_t n = TD[k].n + 1, nb = nb_of(k) + 1;
      fsdpc_optim_tensor t = {.struct_size = sizeof t,
                              .param = a->p[k],
                              .grad = a->g[k] + (uint64_t)(st - 1) * TD[k].n,
                              .state = TD[k].quant ? NULL : a->f[k],
                              .numel = TD[k].n,
                              .stride = n,
                              .decay = TD[k].decay,
                              .qstate = TD[k].quant ? a->q[k] : NULL,
                              .qscale = TD[k].quant ? a->s[k] : NULL,
                              .scale_stride = nb,
                              .block_phase = TD[k].quant ? TD[k].phase : 0};
      for (uint64_t b = 0; b < q8_n_blocks(t.numel, t.block_phase); b++)
        if (TD[k].quant)
          block(&t, b, &sc, tb);
        else
          piece(&t, b, &sc);
    }
  }
}

START_TEST(vector_steps_equal_the_scalar_steps) {
  const int best = q8_cpu_isa();
  if (best == Q8_ISA_SCALAR) {
    fprintf(stderr, "this CPU has neither AVX2 nor AVX-512: nothing to compare\n");
    return;
  }
  static q8_tables tb;
  q8_tables_build(&tb);
  tstate ref;
  tstate_init(&ref, 99);
  run_steps(&ref, Q8_ISA_SCALAR, &tb);
  for (int isa = Q8_ISA_AVX2; isa <= last_form(); isa++) {
    tstate a;
    tstate_init(&a, 99);
    run_steps(&a, isa, &tb);
    int zero_scales = 0;
    for (int k = 0; k < NT; k++) {
      uint64_t n = TD[k].n, n1 = n + 1, nb = nb_of(k) + 1;
      for (uint64_t j = 0; j < n; j++)
        ck_assert_msg(memcmp(&a.p[k][j], &ref.p[k][j], 4) == 0,
                      "%s tensor %d p[%llu]: %a vs scalar %a", isa_name[isa], k,
                      (unsigned long long)j, a.p[k][j], ref.p[k][j]);
      ck_assert_msg(memcmp(a.q[k], ref.q[k], 2 * n1) == 0, "%s tensor %d: codes differ",
                    isa_name[isa], k);
      ck_assert_msg(memcmp(a.s[k], ref.s[k], 2 * nb * sizeof(float)) == 0,
                    "%s tensor %d: scales differ", isa_name[isa], k);
      ck_assert_msg(memcmp(a.f[k], ref.f[k], 2 * n1 * sizeof(float)) == 0,
                    "%s tensor %d: fp32 state differs", isa_name[isa], k);
      for (uint64_t b = 0; TD[k].quant && b + 1 < nb; b++)
        zero_scales += a.s[k][b] == 0.0f;
    }
    ck_assert_int_gt(zero_scales, 0); /* the all-zero blocks took the absmax = 0 path */
    tstate_free(&a);
  }
  tstate_free(&ref);
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim_adamw8bit_simd");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, vector_search_equals_the_scalar_search);
  tcase_add_test(tc, vector_steps_equal_the_scalar_steps);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  printf("adamw8bit CPU forms compared with the scalar one: up to %s\n", isa_name[last_form()]);
  return failed ? 1 : 0;
}
