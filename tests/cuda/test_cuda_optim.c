/* The CUDA paths of the adamw and sgd plugins against their CPU paths: the
 * same random tensors (more than one launch's worth, odd sizes, an empty
 * one, padded state strides, decay on some), several steps with changing lr
 * and grad_scale; parameters and every state slot must match within 1e-5
 * (the kernels do the same fp32 operations, so they are expected to match
 * bit for bit: the count of differing elements is printed). With the
 * plugin's param_bf16 the GPU step also writes a bf16 copy of every updated
 * param (fsdp.param_copy): it must equal the round-to-nearest-even cast of
 * the GPU's fp32 params bit for bit. */
#include "cuda_testutil.h"
#include "optim_testutil.h"

#define NT 100

typedef struct layout {
  uint64_t numel[NT], stride[NT], off_p[NT], off_s[NT];
  uint64_t total_p, total_s;
} layout;

static void make_layout(layout *L, uint32_t slots) {
  L->total_p = L->total_s = 0;
  for (int k = 0; k < NT; k++) {
    L->numel[k] = k == 7 ? 0 : (k == 50 ? 100003 : (uint64_t)urand(1, 20000));
    L->stride[k] = L->numel[k] + (uint64_t)(k % 3) * 5; /* padded slots */
    L->off_p[k] = L->total_p;
    L->off_s[k] = L->total_s;
    L->total_p += L->numel[k];
    L->total_s += L->stride[k] * (slots ? slots : 1);
  }
}

static void fill_tensors(fsdpc_optim_tensor *t, const layout *L, float *p, float *g, float *s) {
  for (int k = 0; k < NT; k++) {
    memset(&t[k], 0, sizeof t[k]);
    t[k].struct_size = sizeof t[k];
    t[k].param = p + L->off_p[k];
    t[k].grad = g + L->off_p[k];
    t[k].state = s ? s + L->off_s[k] : NULL;
    t[k].numel = L->numel[k];
    t[k].stride = L->stride[k];
    t[k].decay = k % 2;
  }
}

/* Runs `steps` steps of optimizer `name` (init as given) on the CPU and on
 * the GPU from the same start and compares. */
static void compare(const char *name, fsdpc_optim_init in, int steps) {
  const fsdpc_optim_v1 *vt = NULL;
  stub_load_optim(name, &vt);
  fsdpc_optimizer *cpu = NULL, *gpu = NULL;
  in.device = FSDPC_DEVICE_CPU;
  ck_assert_int_eq(vt->create(&in, &cpu), FSDPC_OK);
  in.device = FSDPC_DEVICE_CUDA;
  ck_assert_msg(vt->create(&in, &gpu) == FSDPC_OK, "%s", stub_last_error());
  fsdpc_situation sit = {
      .struct_size = sizeof sit, .device = FSDPC_DEVICE_CUDA, .host = stub_host()};
  ck_assert_int_eq(vt->supports(&sit), FSDPC_OK);
  const uint32_t slots = vt->n_slots(gpu);
  layout L;
  make_layout(&L, slots);
  float *p = rand_f32(L.total_p, -1, 1), *s = malloc(sizeof(float) * L.total_s);
  float *d_p = up_raw(p, sizeof(float) * L.total_p);
  float *d_s = dev_alloc(sizeof(float) * L.total_s), *d_g = dev_alloc(sizeof(float) * L.total_p);
  ck_assert_int_ge(vt->struct_size, offsetof(fsdpc_optim_v1, param_bf16) + sizeof(int32_t));
  ck_assert_int_eq(vt->param_bf16, 1);
  uint16_t *d_lp = dev_alloc(2 * (L.total_p ? L.total_p : 1)); /* 0xFFFF (NaN) until written */
  ck_assert_int_eq(vt->init_state(cpu, s, L.total_s, FSDPC_DEVICE_CPU, NULL), FSDPC_OK);
  ck_assert_msg(vt->init_state(gpu, d_s, L.total_s, FSDPC_DEVICE_CUDA,
                               fsdpc__cuda_compute_stream(g_ctx)) == FSDPC_OK,
                "%s", stub_last_error());
  fsdpc_optim_tensor tc[NT], tg[NT];
  for (int step = 1; step <= steps; step++) {
    float *g = rand_f32(L.total_p, -2, 2);
    CK(fsdpc__cuda_h2d(g_ctx, d_g, g, sizeof(float) * L.total_p, &g_err));
    fill_tensors(tc, &L, p, g, s);
    fill_tensors(tg, &L, d_p, d_g, d_s);
    for (int k = 0; k < NT; k++)
      tg[k].param_bf16 = d_lp + L.off_p[k];
    fsdpc_optim_step_info info = optim_test_info(step, 1e-2 / step, step == 2 ? 0.25 : 1.0, 2);
    ck_assert_int_eq(vt->step(cpu, tc, NT, &info), FSDPC_OK);
    info.stream = fsdpc__cuda_compute_stream(g_ctx);
    ck_assert_msg(vt->step(gpu, tg, NT, &info) == FSDPC_OK, "%s", stub_last_error());
    free(g);
  }
  float *gp = down_f32(d_p, L.total_p), *gs = down_f32(d_s, L.total_s);
  size_t diff_p = 0, diff_s = 0;
  for (uint64_t i = 0; i < L.total_p; i++)
    diff_p += memcmp(&gp[i], &p[i], 4) != 0;
  /* Compare only the slots' elements, not the padding between them. */
  float *ss = malloc(sizeof(float) * L.total_s), *rs = malloc(sizeof(float) * L.total_s);
  uint64_t ns = 0;
  for (int k = 0; k < NT; k++)
    for (uint32_t sl = 0; sl < slots; sl++)
      for (uint64_t i = 0; i < L.numel[k]; i++) {
        uint64_t at = L.off_s[k] + sl * L.stride[k] + i;
        ss[ns] = gs[at];
        rs[ns] = s[at];
        diff_s += memcmp(&gs[at], &s[at], 4) != 0;
        ns++;
      }
  char label[96];
  snprintf(label, sizeof label, "%s params (%d steps, %d tensors)", name, steps, NT);
  CHECK_REL(label, gp, p, L.total_p, TOL_F32);
  if (ns) {
    snprintf(label, sizeof label, "%s state (%u slots)", name, slots);
    CHECK_REL(label, ss, rs, ns, TOL_F32);
  }
  printf("  %s: %zu of %llu params and %zu of %llu state values differ in any bit\n", name, diff_p,
         (unsigned long long)L.total_p, diff_s, (unsigned long long)ns);
  uint16_t *lp = malloc(2 * (L.total_p ? L.total_p : 1));
  CK(fsdpc__cuda_d2h(g_ctx, lp, d_lp, 2 * L.total_p, &g_err));
  size_t diff_lp = 0;
  for (uint64_t i = 0; i < L.total_p; i++)
    diff_lp += lp[i] != f2bf(gp[i]);
  printf("  %s: bf16 copy: %zu of %llu differ from the cast of the fp32 params\n", name, diff_lp,
         (unsigned long long)L.total_p);
  ck_assert_uint_eq(diff_lp, 0);
  free(lp);
  dev_free(d_lp, 2 * (L.total_p ? L.total_p : 1));
  free(p), free(s), free(gp), free(gs), free(ss), free(rs);
  dev_free(d_p, sizeof(float) * L.total_p), dev_free(d_s, sizeof(float) * L.total_s);
  dev_free(d_g, sizeof(float) * L.total_p);
  vt->destroy(cpu);
  vt->destroy(gpu);
}

START_TEST(adamw_matches_cpu) {
  fsdpc_optim_init in = optim_test_init(0.1, 0.9, 0.95, 1e-8);
  compare("adamw", in, 3);
  in.beta1 = 0.3; /* the other lerp formula (weight >= 0.5) */
  compare("adamw", in, 2);
}
END_TEST

START_TEST(sgd_matches_cpu) {
  fsdpc_optim_init in = optim_test_init(0.0, 0.0, 0.0, 0.0);
  compare("sgd", in, 2); /* plain, no state */
  in.momentum = 0.9, in.weight_decay = 0.01;
  compare("sgd", in, 3);
  in.nesterov = 1;
  compare("sgd", in, 3);
}
END_TEST

START_TEST(host_state_refused_on_cuda) {
  const fsdpc_optim_v1 *vt = NULL;
  stub_load_optim("adamw", &vt);
  fsdpc_optim_init in = optim_test_init(0.0, 0.9, 0.999, 1e-8);
  in.device = FSDPC_DEVICE_CUDA;
  fsdpc_optimizer *opt = NULL;
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_OK);
  float host[4];
  stub_clear_error();
  ck_assert_int_eq(vt->init_state(opt, host, 4, FSDPC_DEVICE_CUDA, NULL), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "not device memory"));
  vt->destroy(opt);
}
END_TEST

static Suite *make_suite(void) {
  Suite *s = suite_create("cuda_optim");
  TCase *tc = tcase_create("optim");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, adamw_matches_cpu);
  tcase_add_test(tc, sgd_matches_cpu);
  tcase_add_test(tc, host_state_refused_on_cuda);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(make_suite);
}
