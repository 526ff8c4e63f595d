/* The adamw8bit plugin against references written from bitsandbytes'
 * documentation of its 8-bit blockwise optimizers (the dynamic maps, one
 * block quantized by hand, the update order), plus its checkpoint
 * conversion, thread invariance and refused inputs. The plugin is dlopened
 * from the build tree through a stub host; this file is built without FMA
 * contraction so that its fp32 reference rounds as the plugin does. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adamw8bit_math.h" /* the plugin's per-element functions, for the fast search */
#include "optim_testutil.h"

#define BLK 256

static const fsdpc_optim_v1 *vt;
static const fsdpc_component_desc *desc;

static void setup(void) {
  desc = stub_load_optim("adamw8bit", &vt);
}

static fsdpc_optimizer *create_with(double wd, double b1, double b2, double eps, double min8,
                                    int32_t *status) {
  fsdpc_optim_init in = optim_test_init(wd, b1, b2, eps);
  in.opts = optim_test_opt("min_8bit_size", min8);
  fsdpc_optimizer *opt = NULL;
  *status = optim_test_create(vt, &in, &opt);
  return opt;
}

static fsdpc_optimizer *create_ok(double wd, double b1, double b2, double eps) {
  int32_t st;
  fsdpc_optimizer *opt = create_with(wd, b1, b2, eps, 0, &st);
  ck_assert_msg(st == FSDPC_OK, "create: %s", stub_last_error());
  return opt;
}

/* A quantized tensor over caller buffers: codes (2, stride), scales (2, ss). */
static fsdpc_optim_tensor qtensor(float *p, const float *g, uint8_t *q, float *s, uint64_t n,
                                  uint64_t stride, uint64_t ss, uint64_t phase, int decay) {
  fsdpc_optim_tensor t = {.struct_size = sizeof t,
                          .param = p,
                          .grad = g,
                          .numel = n,
                          .stride = stride,
                          .decay = decay,
                          .qstate = q,
                          .qscale = s,
                          .scale_stride = ss,
                          .block_phase = phase};
  return t;
}

static uint64_t nblocks(uint64_t n, uint64_t phase) {
  return n ? (phase + n + BLK - 1) / BLK : 0;
}

/* ---------------------------------------------------------------------- */
/* The reference maps, from bitsandbytes' create_dynamic_map documentation:  */
/* for i = 0..6 the midpoints of linspace(0.1, 1, n_i) scaled by 10^(i-6),   */
/* n_i = 2^i + 1 (signed, with negatives) or 2^(i+1) + 1 (unsigned); then 0  */
/* and 1; sorted. Formed here in double and rounded once.                    */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void ref_map(int is_signed, double out[256]) {
  int n = 0;
  for (int i = 0; i < 7; i++) {
    int items = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    for (int k = 0; k + 1 < items; k++) {
      double b0 = 0.1 + 0.9 * k / (items - 1), b1 = 0.1 + 0.9 * (k + 1) / (items - 1);
      double v = pow(10.0, i - 6) * (b0 + b1) / 2;
      out[n++] = v;
      if (is_signed)
        out[n++] = -v;
    }
  }
  out[n++] = 0.0;
  out[n++] = 1.0;
  ck_assert_int_eq(n, 256);
  qsort(out, 256, sizeof *out, cmp_double);
}

/* The plugin's map, read through q_export: code c with scale 1 is map[c]. */
static void plugin_map(fsdpc_optimizer *opt, uint32_t slot, float out[256]) {
  uint8_t q[2 * 256];
  float s[2] = {1.0f, 1.0f}, p[256] = {0}, g[256] = {0}, scales[256];
  for (int c = 0; c < 256; c++)
    q[c] = q[256 + c] = (uint8_t)c;
  fsdpc_optim_tensor t = qtensor(p, g, q, s, 256, 256, 1, 0, 0);
  ck_assert_int_eq(vt->q_export(opt, &t, slot, out, scales), FSDPC_OK);
}

/* Nearest entry by brute force (ties do not occur with the values used). */
static int ref_nearest(const double map[256], double x) {
  int best = 0;
  for (int c = 1; c < 256; c++)
    if (fabs(map[c] - x) < fabs(map[best] - x))
      best = c;
  return best;
}

START_TEST(dynamic_maps_match_the_documentation) {
  fsdpc_optimizer *opt = create_ok(0.0, 0.9, 0.999, 1e-8);
  for (int sg = 1; sg >= 0; sg--) {
    double ref[256];
    float got[256];
    ref_map(sg, ref);
    plugin_map(opt, sg ? 0 : 1, got);
    for (int c = 0; c < 256; c++) {
      /* fp32 formation (as torch) vs double: within a few fp32 ulps */
      ck_assert_msg(fabs(got[c] - ref[c]) <= 4 * FLT_EPSILON * fabs(ref[c]),
                    "%s map[%d] = %.9g, reference %.9g", sg ? "signed" : "unsigned", c, got[c],
                    ref[c]);
      if (c)
        ck_assert(got[c] > got[c - 1]); /* sorted, no duplicates */
    }
    ck_assert_float_eq(got[255], 1.0f);
  }
  /* Known entries: signed 0 at 127, smallest magnitude 1e-6 * 0.55, the
   * largest magnitude below 1 is the last midpoint (1 + (1 - 0.9/64)) / 2. */
  float s[256], u[256];
  plugin_map(opt, 0, s);
  plugin_map(opt, 1, u);
  ck_assert_float_eq(s[127], 0.0f);
  ck_assert_float_eq_tol(s[128], 5.5e-7f, 1e-12f);
  ck_assert_float_eq_tol(s[126], -5.5e-7f, 1e-12f);
  ck_assert_float_eq_tol(s[0], -0.99296875f, 1e-7f);
  ck_assert_float_eq_tol(s[254], 0.99296875f, 1e-7f);
  ck_assert_float_eq(u[0], 0.0f);
  ck_assert_float_eq_tol(u[1], 1e-6f * 0.325f, 1e-13f); /* midpoint of 0.1, 0.55 */
  vt->destroy(opt);
}
END_TEST

/* One block of known values quantized (q_import with zero scales: absmax is
 * the block's max |x|) against the documented rule: code = nearest map
 * entry to x / absmax; for the signed map a code of the wrong sign moves one
 * entry toward the value's sign. */
START_TEST(one_block_quantized_as_documented) {
  fsdpc_optimizer *opt = create_ok(0.0, 0.9, 0.999, 1e-8);
  double smap[256], umap[256];
  ref_map(1, smap);
  ref_map(0, umap);
  float x[BLK], zero[BLK] = {0}, back[BLK], sc[BLK], p[BLK] = {0}, g[BLK] = {0};
  stub_rng r = {7};
  for (int i = 0; i < BLK; i++) /* magnitudes over 7 decades, both signs */
    x[i] = (float)(stub_uniform(&r, -1, 1) * pow(10.0, -stub_uniform(&r, 0, 7)) * 0.3);
  x[10] = -0.3f;   /* the absmax element, negative: code 0 (-0.99297) */
  x[11] = 0.0f;    /* zero: code 127 */
  x[12] = 1e-12f;  /* below the smallest entry: nearest is 0, sign keeps it positive */
  x[13] = -1e-12f; /* nearest is 0; the sign rule moves it to 126 */
  uint8_t q[2 * BLK];
  float s[2];
  fsdpc_optim_tensor t = qtensor(p, g, q, s, BLK, BLK, 1, 0, 0);
  ck_assert_int_eq(vt->q_import(opt, &t, 0, x, zero), FSDPC_OK);
  ck_assert_float_eq(s[0], 0.3f);
  for (int i = 0; i < BLK; i++) {
    int want = ref_nearest(smap, (double)(x[i] / 0.3f));
    if (!signbit(smap[want]) != !signbit(x[i]))
      want += x[i] > 0 ? 1 : -1;
    ck_assert_msg(q[i] == want, "x[%d] = %g: code %d, reference %d", i, x[i], q[i], want);
  }
  ck_assert_int_eq(q[10], 0);
  ck_assert_int_eq(q[11], 127);
  ck_assert_int_eq(q[12], 127);
  ck_assert_int_eq(q[13], 126);
  /* dequantize = map[code] * absmax */
  ck_assert_int_eq(vt->q_export(opt, &t, 0, back, sc), FSDPC_OK);
  for (int i = 0; i < BLK; i++) {
    ck_assert_float_eq(sc[i], 0.3f);
    ck_assert_float_eq_tol(back[i], (float)(smap[q[i]] * 0.3), 4e-7f * 0.3f);
  }
  /* The unsigned map for exp_avg_sq: squares of the same values. */
  for (int i = 0; i < BLK; i++)
    x[i] = x[i] * x[i];
  ck_assert_int_eq(vt->q_import(opt, &t, 1, x, zero), FSDPC_OK);
  ck_assert_float_eq(s[1], 0.09f);
  for (int i = 0; i < BLK; i++) {
    int want = ref_nearest(umap, (double)(x[i] / 0.09f));
    ck_assert_msg(q[BLK + i] == want, "v[%d] = %g: code %d, reference %d", i, x[i], q[BLK + i],
                  want);
  }
  ck_assert_int_eq(q[BLK + 10], 255);
  ck_assert_int_eq(q[BLK + 11], 0);
  vt->destroy(opt);
}
END_TEST

/* The CPU's table-assisted search gives the binary search's answer: on
 * every entry and every midpoint (and 2 ulps around each), the extremes,
 * and 200,000 values over 8 decades of both signs. (Checked exhaustively
 * over every float of [-2, 2] once when it was written.) */
START_TEST(fast_search_equals_the_binary_search) {
  for (int sg = 0; sg < 2; sg++) {
    float map[Q8_CODES];
    q8_fastmap fm;
    q8_dynamic_map(sg, map);
    q8_fastmap_build(map, &fm);
    const float bottom = sg ? -1.0f : 0.0f;
    uint64_t n = 0;
#define Q8_SAME(xv)                                                                                \
  do {                                                                                             \
    const float x_ = (xv);                                                                         \
    if (x_ >= (sg ? -1.0f : 0.0f) && x_ <= 1.0f) {                                                 \
      ck_assert_msg(q8_nearest_fast(map, &fm, x_, bottom) == q8_nearest(map, x_, bottom),          \
                    "%s map, x = %a: fast %d, search %d", sg ? "signed" : "unsigned", x_,          \
                    q8_nearest_fast(map, &fm, x_, bottom), q8_nearest(map, x_, bottom));           \
      n++;                                                                                         \
    }                                                                                              \
  } while (0)
    for (int c = 0; c < Q8_CODES; c++) {
      const float mid = c + 1 < Q8_CODES ? (map[c] + map[c + 1]) * 0.5f : 1.0f;
      const float pts[2] = {map[c], mid};
      for (int k = 0; k < 2; k++) {
        float lo = pts[k], hi = pts[k];
        Q8_SAME(pts[k]);
        for (int u = 0; u < 2; u++) {
          lo = nextafterf(lo, -2.0f);
          hi = nextafterf(hi, 2.0f);
          Q8_SAME(lo);
          Q8_SAME(hi);
        }
      }
    }
    Q8_SAME(0.0f);
    Q8_SAME(-0.0f);
    Q8_SAME(1e-30f);
    stub_rng r = {17 + (uint64_t)sg};
    for (int i = 0; i < 200000; i++)
      Q8_SAME((float)(stub_uniform(&r, sg ? -1 : 0, 1) * pow(10.0, -stub_uniform(&r, 0, 8))));
#undef Q8_SAME
    ck_assert_uint_gt(n, 200000);
  }
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Steps against an fp32 reference of the documented update order.           */

#define WD 0.05
#define B1 0.9
#define B2 0.95
#define EPS 1e-6
#define NSTEPS 4

typedef struct rtensor {
  uint64_t n, phase;
  int decay, quant;
} rtensor;

/* Phases 0 and 100, a partial last block, fp32 state, an empty tensor,
 * more than the one-thread threshold in all. */
static const rtensor RT[] = {{1000, 0, 1, 1}, {700, 100, 0, 1}, {300, 0, 1, 0},
                             {0, 0, 1, 1},    {34000, 0, 1, 1}, {17, 255, 0, 1}};
#define NRT ((int)(sizeof RT / sizeof RT[0]))

typedef struct rstate {
  float *p[NRT], *g[NRT], *f[NRT], *s[NRT];
  uint8_t *q[NRT];
} rstate;

static void rstate_init(rstate *a, uint64_t seed) {
  stub_rng r = {seed};
  for (int k = 0; k < NRT; k++) {
    uint64_t n = RT[k].n + 1, nb = nblocks(RT[k].n, RT[k].phase) + 1;
    a->p[k] = malloc(n * sizeof(float));
    a->g[k] = malloc(n * NSTEPS * sizeof(float));
    a->f[k] = calloc(2 * n, sizeof(float));
    a->q[k] = calloc(2 * n, 1);
    a->s[k] = calloc(2 * nb, sizeof(float));
    for (uint64_t i = 0; i < RT[k].n; i++)
      a->p[k][i] = (float)stub_uniform(&r, -1, 1);
    for (uint64_t i = 0; i < RT[k].n * NSTEPS; i++) /* gradients over 4 decades */
      a->g[k][i] = (float)(stub_uniform(&r, -1, 1) * pow(10.0, -stub_uniform(&r, 0, 4)));
  }
}

static void rstate_free(rstate *a) {
  for (int k = 0; k < NRT; k++) {
    free(a->p[k]);
    free(a->g[k]);
    free(a->f[k]);
    free(a->q[k]);
    free(a->s[k]);
  }
}

static double lr_of(int step) {
  return 1e-3 * (1.0 + 0.25 * step);
}
static double gs_of(int step) {
  return step % 2 ? 0.73 : 1.0;
}

static fsdpc_optim_tensor rt_tensor(rstate *a, int k, int step) {
  uint64_t n = RT[k].n + 1, nb = nblocks(RT[k].n, RT[k].phase) + 1;
  fsdpc_optim_tensor t =
      qtensor(a->p[k], a->g[k] + (uint64_t)(step - 1) * RT[k].n, RT[k].quant ? a->q[k] : NULL,
              RT[k].quant ? a->s[k] : NULL, RT[k].n, n, nb, RT[k].phase, RT[k].decay);
  if (!RT[k].quant)
    t.state = a->f[k];
  return t;
}

static void run_plugin(rstate *a, fsdpc_optimizer *opt, int threads) {
  for (int step = 1; step <= NSTEPS; step++) {
    fsdpc_optim_tensor t[NRT];
    for (int k = 0; k < NRT; k++)
      t[k] = rt_tensor(a, k, step);
    fsdpc_optim_step_info info = optim_test_info(step, lr_of(step), gs_of(step), threads);
    ck_assert_msg(vt->step(opt, t, NRT, &info) == FSDPC_OK, "step: %s", stub_last_error());
  }
}

/* The reference: per block, dequantize (map[code] * absmax), g *= scale,
 * v = v*b2 + ((1-b2)*g)*g, m = m*b1 + (1-b1)*g, new absmax per block,
 * p += (-lr*c2/c1) * (m / (sqrt(v) + eps*c2)), p *= 1 - lr*wd, quantize. */
static void run_reference(rstate *a, const float smap[256], const float umap[256]) {
  double sm[256], um[256];
  for (int c = 0; c < 256; c++) {
    sm[c] = smap[c];
    um[c] = umap[c];
  }
  for (int step = 1; step <= NSTEPS; step++) {
    const double lr = lr_of(step), c1 = 1 - pow(B1, step), c2 = sqrt(1 - pow(B2, step));
    const float gs = (float)gs_of(step), b1 = (float)B1, w1 = (float)(1 - B1), b2 = (float)B2,
                w2 = (float)(1 - B2), ss = (float)(-lr * c2 / c1), ec = (float)(EPS * c2),
                df = (float)(1 - lr * WD);
    for (int k = 0; k < NRT; k++) {
      const rtensor *d = &RT[k];
      const float *g = a->g[k] + (uint64_t)(step - 1) * d->n;
      uint64_t n1 = d->n + 1, nb = nblocks(d->n, d->phase) + 1;
      for (uint64_t b = 0; b < (d->quant ? nblocks(d->n, d->phase) : (d->n + BLK - 1) / BLK); b++) {
        uint64_t ph = d->quant ? d->phase : 0;
        uint64_t j0 = b * BLK > ph ? b * BLK - ph : 0, j1 = (b + 1) * BLK - ph;
        if (j1 > d->n)
          j1 = d->n;
        float m[BLK], v[BLK], am = 0, av = 0;
        for (uint64_t j = j0; j < j1; j++) {
          float mo = d->quant ? smap[a->q[k][j]] * a->s[k][b] : a->f[k][j];
          float vo = d->quant ? umap[a->q[k][n1 + j]] * a->s[k][nb + b] : a->f[k][n1 + j];
          float gi = g[j] * gs;
          v[j - j0] = vo * b2 + (w2 * gi) * gi;
          m[j - j0] = mo * b1 + w1 * gi;
          am = fmaxf(am, fabsf(m[j - j0]));
          av = fmaxf(av, v[j - j0]);
        }
        for (uint64_t j = j0; j < j1; j++) {
          float mi = m[j - j0], vi = v[j - j0];
          float p = a->p[k][j] + ss * (mi / (sqrtf(vi) + ec));
          a->p[k][j] = d->decay ? p * df : p;
          if (!d->quant) {
            a->f[k][j] = mi;
            a->f[k][n1 + j] = vi;
            continue;
          }
          int cm = ref_nearest(sm, am > 0 ? (double)(mi / am) : 0.0);
          if (!signbit(sm[cm]) != !signbit(mi))
            cm += mi > 0 ? 1 : -1;
          a->q[k][j] = (uint8_t)cm;
          a->q[k][n1 + j] = (uint8_t)ref_nearest(um, av > 0 ? (double)(vi / av) : 0.0);
        }
        if (d->quant) {
          a->s[k][b] = am;
          a->s[k][nb + b] = av;
        }
      }
    }
  }
}

START_TEST(steps_match_the_reference) {
  fsdpc_optimizer *opt = create_ok(WD, B1, B2, EPS);
  float smap[256], umap[256];
  plugin_map(opt, 0, smap);
  plugin_map(opt, 1, umap);
  rstate a, b;
  rstate_init(&a, 11);
  rstate_init(&b, 11);
  run_plugin(&a, opt, 1);
  run_reference(&b, smap, umap);
  for (int k = 0; k < NRT; k++) {
    uint64_t n1 = RT[k].n + 1, nb = nblocks(RT[k].n, RT[k].phase) + 1;
    for (uint64_t j = 0; j < RT[k].n; j++) {
      ck_assert_msg(a.p[k][j] == b.p[k][j], "tensor %d p[%llu]: %.9g vs reference %.9g", k,
                    (unsigned long long)j, a.p[k][j], b.p[k][j]);
      if (RT[k].quant)
        ck_assert_msg(a.q[k][j] == b.q[k][j] && a.q[k][n1 + j] == b.q[k][n1 + j],
                      "tensor %d codes[%llu]: %d,%d vs reference %d,%d", k, (unsigned long long)j,
                      a.q[k][j], a.q[k][n1 + j], b.q[k][j], b.q[k][n1 + j]);
      else
        ck_assert(a.f[k][j] == b.f[k][j] && a.f[k][n1 + j] == b.f[k][n1 + j]);
    }
    if (RT[k].quant)
      ck_assert_int_eq(memcmp(a.s[k], b.s[k], 2 * nb * sizeof(float)), 0);
    /* the padding after numel is untouched */
    ck_assert_int_eq(a.q[k][RT[k].n], 0);
  }
  rstate_free(&a);
  rstate_free(&b);
  vt->destroy(opt);
}
END_TEST

START_TEST(thread_count_does_not_change_bits) {
  fsdpc_optimizer *opt = create_ok(WD, B1, B2, EPS);
  rstate a, b;
  rstate_init(&a, 5);
  rstate_init(&b, 5);
  run_plugin(&a, opt, 1);
  run_plugin(&b, opt, 3);
  for (int k = 0; k < NRT; k++) {
    uint64_t n1 = RT[k].n + 1, nb = nblocks(RT[k].n, RT[k].phase) + 1;
    ck_assert_int_eq(memcmp(a.p[k], b.p[k], RT[k].n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.q[k], b.q[k], 2 * n1), 0);
    ck_assert_int_eq(memcmp(a.s[k], b.s[k], 2 * nb * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.f[k], b.f[k], 2 * n1 * sizeof(float)), 0);
  }
  rstate_free(&a);
  rstate_free(&b);
  vt->destroy(opt);
}
END_TEST

/* With eps negligible the first step moves every element by lr * sign(g),
 * quantized or not (the moments are used in fp32 before quantization). */
START_TEST(first_step_is_lr_times_sign) {
  fsdpc_optimizer *opt = create_ok(0.0, 0.9, 0.999, 1e-30);
  float p[600] = {0}, g[600], f[1200] = {0}, s[8] = {0};
  uint8_t q[1200] = {0};
  stub_rng r = {3};
  for (int i = 0; i < 600; i++)
    g[i] = (float)(stub_uniform(&r, -1, 1) * pow(10.0, -stub_uniform(&r, 0, 5)));
  fsdpc_optim_tensor t[2] = {qtensor(p, g, q, s, 300, 300, 4, 7, 1),
                             qtensor(p + 300, g + 300, NULL, NULL, 300, 300, 0, 0, 1)};
  t[1].state = f;
  fsdpc_optim_step_info info = optim_test_info(1, 0.01, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, t, 2, &info), FSDPC_OK);
  for (int i = 0; i < 600; i++)
    ck_assert_float_eq_tol(p[i], g[i] > 0 ? -0.01f : 0.01f, 1e-8f);
  vt->destroy(opt);
}
END_TEST

/* q_import(q_export(state)) gives the same codes and scales bit for bit
 * (bit-exact resume); imported with other blocks it stays close. */
START_TEST(checkpoint_conversion_round_trips) {
  fsdpc_optimizer *opt = create_ok(WD, B1, B2, EPS);
  rstate a;
  rstate_init(&a, 9);
  run_plugin(&a, opt, 1);
  for (int k = 0; k < NRT; k++) {
    if (!RT[k].quant || RT[k].n == 0)
      continue;
    uint64_t n = RT[k].n, n1 = n + 1, nb = nblocks(n, RT[k].phase) + 1;
    fsdpc_optim_tensor t = rt_tensor(&a, k, 1);
    float *val = malloc(2 * n * sizeof(float)), *sc = malloc(2 * n * sizeof(float));
    uint8_t *q2 = calloc(2 * n1, 1), *q3 = calloc(2 * n1, 1);
    float *s2 = calloc(2 * nb, sizeof(float)), *s3 = calloc(2 * (n / BLK + 2), sizeof(float));
    fsdpc_optim_tensor u = t, w = t;
    u.qstate = q2;
    u.qscale = s2;
    w.qstate = q3;
    w.qscale = s3;
    w.scale_stride = n / BLK + 2;
    w.block_phase = (RT[k].phase + 128) % BLK; /* other blocks */
    for (uint32_t s = 0; s < 2; s++) {
      ck_assert_int_eq(vt->q_export(opt, &t, s, val + s * n, sc + s * n), FSDPC_OK);
      ck_assert_int_eq(vt->q_import(opt, &u, s, val + s * n, sc + s * n), FSDPC_OK);
      ck_assert_int_eq(memcmp(q2 + s * n1, a.q[k] + s * n1, n), 0);
      ck_assert_int_eq(memcmp(s2 + s * nb, a.s[k] + s * nb, (nb - 1) * sizeof(float)), 0);
      ck_assert_int_eq(vt->q_import(opt, &w, s, val + s * n, sc + s * n), FSDPC_OK);
      float *back = malloc(n * sizeof(float)), *bsc = malloc(n * sizeof(float));
      ck_assert_int_eq(vt->q_export(opt, &w, s, back, bsc), FSDPC_OK);
      for (uint64_t j = 0; j < n; j++) /* one map step at most: 1.5% of the block scale */
        ck_assert_msg(fabsf(back[j] - val[s * n + j]) <= 0.02f * bsc[j], "slot %u [%llu]", s,
                      (unsigned long long)j);
      free(back);
      free(bsc);
    }
    free(val);
    free(sc);
    free(q2);
    free(q3);
    free(s2);
    free(s3);
  }
  rstate_free(&a);
  vt->destroy(opt);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Descriptor, options and refused inputs.                                   */

START_TEST(descriptor_options_and_format) {
  ck_assert_str_eq(desc->name, "adamw8bit");
  ck_assert_int_lt(desc->default_score, 20); /* `auto` keeps fp32 adamw */
  ck_assert_uint_eq(desc->n_options, 1);
  ck_assert_str_eq(desc->options[0]->key, "min_8bit_size");
  ck_assert_str_eq(desc->options[0]->default_value, "4096");
  ck_assert_int_eq(desc->options[0]->type, FSDPC_OPT_INT);
  ck_assert(FSDPC_HAS_FIELD(vt, fsdpc_optim_v1, q_import) && vt->qformat && vt->q_export);
  int32_t st;
  fsdpc_optimizer *opt = create_with(0.0, 0.9, 0.999, 1e-8, 10000, &st);
  ck_assert_int_eq(st, FSDPC_OK);
  fsdpc_optim_qformat qf = {.struct_size = sizeof qf};
  ck_assert_int_eq(vt->qformat(opt, &qf), FSDPC_OK);
  ck_assert_uint_eq(qf.block, 256);
  ck_assert_uint_eq(qf.min_numel, 10000);
  ck_assert_uint_eq(vt->n_slots(opt), 2);
  ck_assert_str_eq(vt->slot_name(opt, 0), "exp_avg");
  ck_assert_str_eq(vt->slot_name(opt, 1), "exp_avg_sq");
  ck_assert_ptr_null(vt->slot_name(opt, 2));
  vt->destroy(opt);
  /* Without options (opts NULL) min_8bit_size is its declared default. */
  fsdpc_optim_init in = optim_test_init(0.0, 0.9, 0.999, 1e-8);
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_OK);
  ck_assert_int_eq(vt->qformat(opt, &qf), FSDPC_OK);
  ck_assert_uint_eq(qf.min_numel, 4096);
  vt->destroy(opt);
}
END_TEST

static void expect_create_fails(double wd, double b1, double b2, double eps, double min8,
                                const char *word) {
  int32_t st;
  fsdpc_optimizer *opt = create_with(wd, b1, b2, eps, min8, &st);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(opt);
  ck_assert_msg(strstr(stub_last_error(), word) != NULL, "'%s' lacks '%s'", stub_last_error(),
                word);
}

START_TEST(bad_options_and_hyperparameters_rejected) {
  expect_create_fails(0.0, 0.9, 0.999, 1e-8, -1, "min_8bit_size");
  expect_create_fails(0.0, 1.0, 0.999, 1e-8, 0, "beta1");
  expect_create_fails(0.0, 0.9, -0.5, 1e-8, 0, "beta2");
  expect_create_fails(0.0, 0.9, 0.999, 0.0, 0, "eps");
  expect_create_fails(-1.0, 0.9, 0.999, 1e-8, 0, "weight_decay");
}
END_TEST

START_TEST(bad_step_and_state_arguments_rejected) {
  fsdpc_optimizer *opt = create_ok(0.0, 0.9, 0.999, 1e-8);
  float p[300] = {0}, g[300] = {0}, s[4] = {0}, val[300] = {0}, sc[300] = {0};
  uint8_t q[600] = {0};
  fsdpc_optim_step_info info = optim_test_info(1, 1e-3, 1.0, 1);
  fsdpc_optim_tensor t = qtensor(p, g, q, NULL, 300, 300, 2, 0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "no scales"));
  t = qtensor(p, g, q, s, 300, 300, 1, 0, 1); /* 300 elements need 2 blocks */
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "scale stride"));
  t = qtensor(p, g, q, s, 300, 300, 2, 256, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "block_phase"));
  t = qtensor(p, g, NULL, NULL, 300, 300, 0, 0, 1); /* neither codes nor fp32 state */
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  t = qtensor(p, g, q, s, 300, 300, 2, 0, 1);
  info = optim_test_info(0, 1e-3, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "1-based"));
  /* Corrupt checkpoint values are refused, naming the slot. */
  val[5] = NAN;
  ck_assert_int_eq(vt->q_import(opt, &t, 0, val, sc), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "exp_avg"));
  val[5] = -1.0f; /* a negative second moment */
  ck_assert_int_eq(vt->q_import(opt, &t, 1, val, sc), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "exp_avg_sq"));
  ck_assert_int_eq(vt->q_import(opt, &t, 2, val, sc), FSDPC_INVALID_USAGE);
  /* Nothing was touched by the refused calls. */
  for (int i = 0; i < 300; i++)
    ck_assert(p[i] == 0.0f && q[i] == 0);
  vt->destroy(opt);
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim_adamw8bit");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, dynamic_maps_match_the_documentation);
  tcase_add_test(tc, one_block_quantized_as_documented);
  tcase_add_test(tc, fast_search_equals_the_binary_search);
  tcase_add_test(tc, steps_match_the_reference);
  tcase_add_test(tc, thread_count_does_not_change_bits);
  tcase_add_test(tc, first_step_is_lr_times_sign);
  tcase_add_test(tc, checkpoint_conversion_round_trips);
  tcase_add_test(tc, descriptor_options_and_format);
  tcase_add_test(tc, bad_options_and_hyperparameters_rejected);
  tcase_add_test(tc, bad_step_and_state_arguments_rejected);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
