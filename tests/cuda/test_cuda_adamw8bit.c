/* The adamw8bit plugin's CUDA path against its CPU path: the same random
 * tensors (more than one launch's worth, a million-element one, odd sizes,
 * an empty one, block phases 0..255, fp32-state tensors among quantized
 * ones, decay on some), several steps with changing lr and grad_scale and
 * gradients over six decades. Both paths call the same per-element functions
 * with the same fp32 operations (no contraction, IEEE division and sqrt), so
 * codes, block scales, fp32 state and parameters must agree bit for bit;
 * the count of differing values is printed.
 * With FSDPC_Q8_MAPS=FILE it also writes the plugin's two quantization maps
 * (signed then unsigned, 256 values each, one "%a" per line) for the check
 * against torch (tests/gpu/check_q8_maps.py). */
#include <stdio.h>

#include "cuda_testutil.h"
#include "optim_testutil.h"

#define NT 60
#define BLK 256

typedef struct layout {
  uint64_t numel[NT], phase[NT], nb[NT], off_p[NT], off_q[NT], off_s[NT], off_f[NT];
  int quant[NT];
  uint64_t total_p, total_q, total_s, total_f;
} layout;

static void make_layout(layout *L) {
  memset(L, 0, sizeof *L);
  for (int k = 0; k < NT; k++) {
    uint64_t n = k == 7 ? 0 : (k == 33 ? 1000003 : (uint64_t)urand(1, 20000));
    L->numel[k] = n;
    L->quant[k] = k % 5 != 0;
    L->phase[k] = L->quant[k] ? (uint64_t)(k * 37) % BLK : 0;
    L->nb[k] = n ? (L->phase[k] + n + BLK - 1) / BLK : 0;
    L->off_p[k] = L->total_p;
    L->total_p += n;
    if (L->quant[k]) {
      L->off_q[k] = L->total_q;
      L->off_s[k] = L->total_s;
      L->total_q += 2 * n;
      L->total_s += 2 * L->nb[k];
    } else {
      L->off_f[k] = L->total_f;
      L->total_f += 2 * n;
    }
  }
}

static void fill(fsdpc_optim_tensor *t, const layout *L, float *p, const float *g, uint8_t *q,
                 float *s, float *f) {
  for (int k = 0; k < NT; k++) {
    memset(&t[k], 0, sizeof t[k]);
    t[k].struct_size = sizeof t[k];
    t[k].param = p + L->off_p[k];
    t[k].grad = g + L->off_p[k];
    t[k].numel = L->numel[k];
    t[k].stride = L->numel[k];
    t[k].decay = k % 2;
    if (L->quant[k]) {
      t[k].qstate = q + L->off_q[k];
      t[k].qscale = s + L->off_s[k];
      t[k].scale_stride = L->nb[k];
      t[k].block_phase = L->phase[k];
    } else {
      t[k].state = f + L->off_f[k];
    }
  }
}

static size_t ndiff(const void *a, const void *b, size_t n, size_t elem) {
  size_t d = 0;
  for (size_t i = 0; i < n; i++)
    d += memcmp((const char *)a + i * elem, (const char *)b + i * elem, elem) != 0;
  return d;
}

static void write_maps(const fsdpc_optim_v1 *vt, fsdpc_optimizer *opt, const char *path) {
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  uint8_t q[512];
  float sc[2] = {1.0f, 1.0f}, p[256] = {0}, g[256] = {0}, val[256], scale[256];
  for (int c = 0; c < 256; c++)
    q[c] = q[256 + c] = (uint8_t)c;
  fsdpc_optim_tensor t = {.struct_size = sizeof t, .param = p, .grad = g, .numel = 256,
                          .stride = 256, .qstate = q, .qscale = sc, .scale_stride = 1};
  for (uint32_t slot = 0; slot < 2; slot++) {
    ck_assert_int_eq(vt->q_export(opt, &t, slot, val, scale), FSDPC_OK);
    for (int c = 0; c < 256; c++)
      fprintf(fp, "%a\n", val[c]);
  }
  fclose(fp);
}

START_TEST(cuda_matches_cpu_bit_for_bit) {
  const fsdpc_optim_v1 *vt = NULL;
  stub_load_optim("adamw8bit", &vt);
  fsdpc_optim_init in = optim_test_init(0.1, 0.9, 0.95, 1e-8);
  fsdpc_optimizer *cpu = NULL, *gpu = NULL;
  in.device = FSDPC_DEVICE_CPU;
  ck_assert_int_eq(vt->create(&in, &cpu), FSDPC_OK);
  in.device = FSDPC_DEVICE_CUDA;
  ck_assert_msg(vt->create(&in, &gpu) == FSDPC_OK, "%s", stub_last_error());
  const char *maps = getenv("FSDPC_Q8_MAPS");
  if (maps && *maps)
    write_maps(vt, cpu, maps);
  layout L;
  make_layout(&L);
  float *p = rand_f32(L.total_p, -1, 1);
  uint8_t *q = calloc(L.total_q + 1, 1);
  float *s = calloc(L.total_s + 1, sizeof(float)), *f = calloc(L.total_f + 1, sizeof(float));
  float *d_p = up_raw(p, sizeof(float) * L.total_p), *d_g = dev_alloc(sizeof(float) * L.total_p);
  uint8_t *d_q = up_raw(q, L.total_q + 1);
  float *d_s = up_raw(s, sizeof(float) * (L.total_s + 1));
  float *d_f = up_raw(f, sizeof(float) * (L.total_f + 1));
  fsdpc_optim_tensor tc[NT], tg[NT];
  for (int step = 1; step <= 4; step++) {
    float *g = rand_f32(L.total_p, -1, 1);
    for (uint64_t i = 0; i < L.total_p; i++) /* six decades */
      g[i] *= (float)pow(10.0, -urand(0, 6));
    CK(fsdpc__cuda_h2d(g_ctx, d_g, g, sizeof(float) * L.total_p, &g_err));
    fill(tc, &L, p, g, q, s, f);
    fill(tg, &L, d_p, d_g, d_q, d_s, d_f);
    fsdpc_optim_step_info info = optim_test_info(step, 1e-2 / step, step == 2 ? 0.25 : 1.0, 2);
    ck_assert_msg(vt->step(cpu, tc, NT, &info) == FSDPC_OK, "%s", stub_last_error());
    info.stream = fsdpc__cuda_compute_stream(g_ctx);
    ck_assert_msg(vt->step(gpu, tg, NT, &info) == FSDPC_OK, "%s", stub_last_error());
    free(g);
  }
  float *gp = down_f32(d_p, L.total_p), *gs = down_f32(d_s, L.total_s + 1);
  float *gf = down_f32(d_f, L.total_f + 1);
  uint8_t *gq = malloc(L.total_q + 1);
  CK(fsdpc__cuda_d2h(g_ctx, gq, d_q, L.total_q + 1, &g_err));
  size_t dp = ndiff(gp, p, L.total_p, 4), dq = ndiff(gq, q, L.total_q, 1);
  size_t ds = ndiff(gs, s, L.total_s, 4), df = ndiff(gf, f, L.total_f, 4);
  printf("  adamw8bit: differing values, GPU vs CPU: params %zu of %llu, codes %zu of %llu, "
         "scales %zu of %llu, fp32 state %zu of %llu\n",
         dp, (unsigned long long)L.total_p, dq, (unsigned long long)L.total_q, ds,
         (unsigned long long)L.total_s, df, (unsigned long long)L.total_f);
  CHECK_REL("adamw8bit params", gp, p, L.total_p, TOL_F32);
  ck_assert_msg(dp == 0 && dq == 0 && ds == 0 && df == 0, "GPU and CPU paths differ");
  free(p), free(q), free(s), free(f), free(gp), free(gs), free(gf), free(gq);
  dev_free(d_p, sizeof(float) * L.total_p), dev_free(d_g, sizeof(float) * L.total_p);
  dev_free(d_q, L.total_q + 1), dev_free(d_s, sizeof(float) * (L.total_s + 1));
  dev_free(d_f, sizeof(float) * (L.total_f + 1));
  vt->destroy(cpu);
  vt->destroy(gpu);
}
END_TEST

static Suite *make_suite(void) {
  Suite *s = suite_create("cuda_adamw8bit");
  TCase *tc = tcase_create("optim");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, cuda_matches_cpu_bit_for_bit);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cuda_test_main(make_suite); }
