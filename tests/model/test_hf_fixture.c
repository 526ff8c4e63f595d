/* The whole CPU model against Hugging Face transformers (fixtures made by
 * tests/fixtures/make_hf_fixtures.py in float64): logits and loss within
 * 1e-5 relative, every parameter gradient within 1e-4 relative (norm-wise),
 * and the losses of 3 AdamW steps within 1e-5. Runs through the real
 * plugins (naive attention, adamw, transformer wrap) and the FSDP engine at
 * world size 1, loading the HF checkpoint range by range.
 *
 * `--families [NAME...]` (the ctests test_hf_families and
 * test_cuda_hf_families): the same for each decoder family fixture of
 * tests/gpu/make_hf_families.py under tests/fixtures/hf_families (or the
 * named ones), with its 20 AdamW steps (losses and final weights within
 * 1e-4 on the CPU); prints PASS or FAIL per family. Without the folder it
 * says so and exits 77 (ctest: skipped, with that line); with it, a family
 * listed below and missing fails. */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "fsdp/engine.h"
#include "io/safetensors.h"
#include "runplan/runplan.h"
#ifdef FSDPC_FIXTURE_CUDA
#include "ops/cuda/cuda_ctx.h"
#endif

/* Built twice: the fp32 CPU reference (tight tolerances) and, with
 * FSDPC_FIXTURE_CUDA, the bf16 CUDA path (bf16 tolerances: the relative error
 * of bf16 storage is 2^-8, and errors grow through the layers). */
#ifdef FSDPC_FIXTURE_CUDA
enum { ON_DEVICE = 1 };
static const double TOL_LOGITS = 3e-2, TOL_LOSS = 1e-2, TOL_GRAD = 6e-2, TOL_ADAMW = 2e-2;
static const double TOL_ADAMW_LONG = 4e-2; /* 20 steps */
#else
enum { ON_DEVICE = 0 };
static const double TOL_LOGITS = 1e-5, TOL_LOSS = 1e-5, TOL_GRAD = 1e-4, TOL_ADAMW = 1e-5;
static const double TOL_ADAMW_LONG = 1e-4; /* 20 steps, and the weights after */
#endif
static const fsdpc_ops *g_ops; /* the device under test */

typedef struct fixture {
  char dir[1024];
  fsdpc_config *cfg;
  fsdpc_run_plan *plan;
  const fsdpc_component *attn;
  fsdpc_model_shape shape;
  fsdpc_dist dist;
  fsdpc_engine *eng;
  fsdpc_model_ctx *m;
  fsdpc_st_file *ref;
  cJSON *meta;
  int B, T;
  int32_t *ids, *labels;
} fixture;

static void die_if(fsdpc_status st, const fsdpc_err *err) {
  ck_assert_msg(st == FSDPC_OK, "%s", err->msg);
}

static float *read_ref(fixture *f, const char *name, uint64_t *n) {
  const fsdpc_st_info *t = fsdpc__st_find(f->ref, name);
  ck_assert_msg(t != NULL, "reference tensor %s missing", name);
  float *v = malloc(t->numel * sizeof(float));
  fsdpc_err err;
  die_if(fsdpc__st_read_f32(f->ref, name, 0, t->numel, v, &err), &err);
  *n = t->numel;
  return v;
}

/* The file at path into a static buffer (NUL-terminated), or NULL when it
 * cannot be opened. One buffer: the next call overwrites it. */
static const char *read_text(const char *path) {
  static char buf[1 << 16];
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  return buf;
}

static cJSON *read_meta(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/reference.json", dir);
  const char *text = read_text(path);
  ck_assert_msg(text != NULL, "%s is missing: the fixture is incomplete", path);
  cJSON *meta = cJSON_Parse(text);
  ck_assert_ptr_nonnull(meta);
  return meta;
}

static double meta_num(const cJSON *o, const char *k, double def) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* lr 0: the fixture's AdamW settings are not used (forward/backward). */
static void setup(fixture *f, const char *name, double lr, double wd) {
  memset(f, 0, sizeof *f);
  fsdpc_err err;
  const char *src = getenv("FSDPC_SOURCE_DIR"); /* elsewhere than the build machine */
  snprintf(f->dir, sizeof f->dir, "%s/tests/fixtures/%s", src ? src : FSDPC_SOURCE_DIR, name);
  f->meta = read_meta(f->dir);
  /* a family fixture names its own AdamW settings */
  const cJSON *aw = cJSON_GetObjectItem(f->meta, "adamw");
  const cJSON *betas = cJSON_GetObjectItem(aw, "betas");
  double beta2 = cJSON_IsArray(betas) ? cJSON_GetArrayItem(betas, 1)->valuedouble : 0.999;
  double beta1 = cJSON_IsArray(betas) ? cJSON_GetArrayItem(betas, 0)->valuedouble : 0.9;
  if (lr > 0 && aw) {
    lr = meta_num(aw, "lr", lr);
    wd = meta_num(aw, "weight_decay", wd);
  }
  /* the engine from a run plan made from YAML, as the trainer builds it */
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "model: {config: %s}\n"
           "optim: {name: adamw, lr: %g, weight_decay: %g, decay_norm_and_bias: true,\n"
           "        betas: [%g, %g], eps: 1.0e-8}\n"
           "attention: {impl: naive}\n"
           "fsdp: {sharding_strategy: FULL_SHARD, align: 16, wrap: {policy: transformer}}\n"
           "train: {device: %s}\n",
           f->dir, lr, wd, beta1, beta2, ON_DEVICE ? "cuda" : "cpu");
  die_if(fsdpc__config_from_string(yaml, "fixture.yaml", NULL, 0, &f->cfg, &err), &err);
  fsdpc_run_world w = {1, 1};
  die_if(fsdpc__run_plan_create(f->cfg, &w, 0, &f->plan, &err), &err);
  f->shape = f->plan->shape;
  f->attn = f->plan->attn;
  fsdpc__dist_single(&f->dist);
  fsdpc_engine_env env = {.dist = &f->dist, .ops = g_ops, .threads = 1};
  die_if(fsdpc__engine_create(f->plan, &env, &f->eng, &err), &err);
  die_if(fsdpc__engine_load_hf(f->eng, f->dir, &err), &err);

  char path[1200];
  f->B = cJSON_GetObjectItem(f->meta, "B")->valueint;
  f->T = cJSON_GetObjectItem(f->meta, "T")->valueint;
  snprintf(path, sizeof path, "%s/reference.safetensors", f->dir);
  die_if(fsdpc__st_open(path, &f->ref, &err), &err);
  uint64_t ni, nl;
  float *ids = read_ref(f, "input_ids", &ni), *lab = read_ref(f, "labels", &nl);
  ck_assert_int_eq((int)ni, f->B * f->T);
  f->ids = malloc(ni * sizeof(int32_t));
  f->labels = malloc(nl * sizeof(int32_t));
  for (uint64_t i = 0; i < ni; i++) {
    f->ids[i] = (int32_t)ids[i];
    f->labels[i] = (int32_t)lab[i];
  }
  free(ids);
  free(lab);
  fsdpc_model_ctx_opts mo = {.ops = g_ops, .shape = &f->shape, .B = f->B, .T = f->T, .attention = f->attn,
                             .attention_opts = f->cfg->attention.options,
                             .xent_chunk_rows = 5 /* not a divisor of B*T on purpose */};
  die_if(fsdpc__model_ctx_create(&mo, &f->m, &err), &err);
  die_if(fsdpc__model_set_batch(f->m, f->ids, f->labels, NULL, &err), &err);
}

static void teardown(fixture *f) {
  fsdpc__model_ctx_destroy(f->m);
  fsdpc__engine_destroy(f->eng);
  fsdpc__st_close(f->ref);
  fsdpc__run_plan_destroy(f->plan);
  fsdpc__config_destroy(f->cfg);
  cJSON_Delete(f->meta);
  free(f->ids);
  free(f->labels);
}

/* ||a - b|| / ||b|| in double. */
static double rel_err(const float *a, const float *b, uint64_t n) {
  double num = 0.0, den = 0.0;
  for (uint64_t i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  return sqrt(num) / (sqrt(den) + 1e-30);
}

static int64_t count_labels(const fixture *f) {
  int64_t c = 0;
  for (int i = 0; i < f->B * f->T; i++) c += f->labels[i] != -100;
  return c;
}

/* On CUDA, a bound no tighter than 1.5x transformers' own bf16 error on
 * this fixture (bf16_floor.json beside the family fixtures, written by
 * tests/gpu/bf16_floor.py; key "logits" or "worst_grad"): a tiny Gemma's
 * bf16 gradients are further from float64 than the fixed bounds allow, in
 * transformers as in fsdpc. Elsewhere, or without an entry, tol. */
static double floor_bound(const fixture *f, const char *key, double tol) {
  if (!ON_DEVICE)
    return tol;
  char path[1200], name[256];
  const char *slash = strrchr(f->dir, '/');
  if (!slash)
    return tol;
  snprintf(path, sizeof path, "%.*s/bf16_floor.json", (int)(slash - f->dir), f->dir);
  snprintf(name, sizeof name, "%s", slash + 1);
  const char *text = read_text(path);
  if (!text)
    return tol;
  cJSON *j = cJSON_Parse(text);
  const cJSON *v =
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "fixtures"), name), key);
  double b = cJSON_IsNumber(v) && 1.5 * v->valuedouble > tol ? 1.5 * v->valuedouble : tol;
  cJSON_Delete(j);
  return b;
}

static void check_forward_backward(const char *name) {
  fixture f;
  setup(&f, name, 0.0, 0.0);
  fsdpc_err err;
  /* logits, position by position (each call reruns the forward) */
  uint64_t nref;
  float *ref_logits = read_ref(&f, "logits", &nref);
  ck_assert_int_eq((int)nref, f.B * f.T * f.shape.V);
  float *logits = malloc(nref * sizeof(float)), *row = malloc((size_t)f.B * f.shape.V * 4);
  for (int t = 0; t < f.T; t++) {
    die_if(fsdpc__engine_logits_at(f.eng, f.m, t, row, &err), &err);
    for (int b = 0; b < f.B; b++)
      memcpy(logits + ((size_t)b * f.T + t) * f.shape.V, row + (size_t)b * f.shape.V,
             (size_t)f.shape.V * 4);
  }
  double le = rel_err(logits, ref_logits, nref);
  double tol_logits = floor_bound(&f, "logits", TOL_LOGITS);
  printf("%s: logits relative error %.3e (bound %.1e)\n", name, le, tol_logits);
  ck_assert_msg(isfinite(le) && le < tol_logits, "%s: logits relative error %.3e", name, le);

  /* loss and gradients */
  int64_t count = count_labels(&f);
  double loss_sum = 0.0;
  int64_t cnt = 0;
  die_if(fsdpc__engine_micro_step(f.eng, f.m, (float)(1.0 / count), 1, &loss_sum, &cnt, &err),
         &err);
  ck_assert_int_eq(cnt, count);
  double loss = loss_sum / (double)count;
  double ref_loss = cJSON_GetObjectItem(f.meta, "loss")->valuedouble;
  printf("%s: loss %.8f vs HF %.8f\n", name, loss, ref_loss);
  ck_assert_msg(fabs(loss - ref_loss) / ref_loss < TOL_LOSS, "%s: loss %.8f vs HF %.8f", name, loss,
                ref_loss);
  /* every gradient is compared before the worst is asserted, so that a
   * failure names the worst parameter; FSDPC_FIXTURE_VERBOSE=1 prints each */
  const char *ve = getenv("FSDPC_FIXTURE_VERBOSE");
  int verbose = ve && strcmp(ve, "1") == 0;
  double worst = 0.0;
  char worst_name[160] = "-";
  for (int p = 0; p < fsdpc__engine_n_params(f.eng); p++) {
    uint64_t off;
    int u;
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, &off, &u);
    char rn[160];
    snprintf(rn, sizeof rn, "grad.%s", pi->name);
    uint64_t ng;
    float *rg = read_ref(&f, rn, &ng);
    ck_assert_int_eq((int)ng, (int)pi->numel);
    /* world 1: the shard is the full gradient; bring it to the host */
    float *g = malloc(ng * sizeof(float));
    die_if(g_ops->download(g_ops->ctx, g, fsdpc__engine_unit(f.eng, u)->grad + off,
                           ng * sizeof(float), &err),
           &err);
    double ge = rel_err(g, rg, ng);
    free(g);
    free(rg);
    if (verbose)
      printf("%s: gradient of %s relative error %.3e\n", name, pi->name, ge);
    if (!(ge <= worst)) { /* NaN first */
      worst = ge;
      snprintf(worst_name, sizeof worst_name, "%s", pi->name);
    }
  }
  double tol_grad = floor_bound(&f, "worst_grad", TOL_GRAD);
  printf("%s: gradients worst relative error %.3e (%s; bound %.1e)\n", name, worst, worst_name,
         tol_grad);
  ck_assert_msg(isfinite(worst) && worst < tol_grad, "%s: gradient of %s relative error %.3e",
                name, worst_name, worst);
  free(ref_logits);
  free(logits);
  free(row);
  teardown(&f);
}

/* The fixture's AdamW steps (3, or "steps") on its batch: each step's loss
 * and, where the fixture has them (final.<param>), the weights after. */
static void check_adamw(const char *name) {
  fixture f;
  setup(&f, name, 1e-2, 0.1);
  fsdpc_err err;
  cJSON *ref = cJSON_GetObjectItem(f.meta, "adamw_losses");
  int steps = (int)meta_num(f.meta, "steps", 3);
  double lr = meta_num(cJSON_GetObjectItem(f.meta, "adamw"), "lr", 1e-2);
  double tol = steps > 3 ? TOL_ADAMW_LONG : TOL_ADAMW;
  int64_t count = count_labels(&f);
  for (int step = 0; step < steps; step++) {
    double loss_sum = 0.0, gn;
    int64_t cnt;
    die_if(fsdpc__engine_micro_step(f.eng, f.m, (float)(1.0 / count), 1, &loss_sum, &cnt, &err),
           &err);
    double loss = loss_sum / (double)count, r = cJSON_GetArrayItem(ref, step)->valuedouble;
    ck_assert_msg(fabs(loss - r) / r < tol, "%s: AdamW step %d loss %.8f vs HF %.8f", name, step,
                  loss, r);
    die_if(fsdpc__engine_optim_step(f.eng, step + 1, lr, 0.0, &gn, &err), &err);
  }
  for (int p = 0; p < fsdpc__engine_n_params(f.eng) && !ON_DEVICE; p++) {
    uint64_t off;
    int u;
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, &off, &u);
    char rn[160];
    snprintf(rn, sizeof rn, "final.%s", pi->name);
    if (!fsdpc__st_find(f.ref, rn))
      continue;
    uint64_t nw;
    float *rw = read_ref(&f, rn, &nw);
    ck_assert_int_eq((int)nw, (int)pi->numel);
    double we = rel_err(fsdpc__engine_unit(f.eng, u)->master + off, rw, nw);
    ck_assert_msg(isfinite(we) && we < TOL_ADAMW_LONG, "%s: %s after %d steps: error %.3e", name,
                  pi->name, steps, we);
    free(rw);
  }
  teardown(&f);
}

/* tests/gpu/make_hf_families.py's fixtures, under hf_families/. */
static const char *const families[] = {
    "llama_biases_llama3",   "mistral_window",        "qwen2_tied_window",
    "qwen2_dynamic",         "qwen3_qknorm_yarn",     "phi3_longrope_long",
    "phi3_longrope_short",   "olmo2_postnorm_linear", "granite_multipliers",
    "gemma2_softcap_window", "gemma2_nocap_untied",   "gemma3_local_rope_window",
    "gemma3_softcap_untied"};
enum { N_FAMILIES = sizeof families / sizeof families[0] };
/* Families younger than a fixture set (its manifest.json does not list
 * them: made by an older make_hf_families.py) are skipped with a line until
 * the set is made again. Every family runs on CUDA too (gemma2's attention
 * soft-capping through the naive plugin's CUDA path, issue 36).
 * Returns the reason, or NULL. */
static const char *family_skip(const char *dir, const char *name) {
  char path[1400], want[200];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  snprintf(want, sizeof want, "\"%s\"", name);
  const char *text = read_text(path);
  if (!text)
    return NULL;
  return strstr(text, want) ? NULL
                            : "not in this fixture set (made before it: scripts/gpu/agree.sh "
                              "families makes it again)";
}
static char g_family[160]; /* hf_families/<the family under test> */

START_TEST(family_forward_backward) {
  check_forward_backward(g_family);
}
END_TEST
START_TEST(family_adamw) {
  check_adamw(g_family);
}
END_TEST

START_TEST(untied_forward_backward) { check_forward_backward("hf_tiny_untied"); }
END_TEST
START_TEST(tied_llama3_forward_backward) { check_forward_backward("hf_tiny_tied_llama3"); }
END_TEST
START_TEST(untied_adamw) { check_adamw("hf_tiny_untied"); }
END_TEST
START_TEST(tied_llama3_adamw) { check_adamw("hf_tiny_tied_llama3"); }
END_TEST

static int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  if (ON_DEVICE)
    srunner_set_fork_status(sr, CK_NOFORK); /* the CUDA context is not fork-safe */
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed;
}

/* One suite per family, so that each gets its own PASS or FAIL line. */
static int run_families(int argc, char **argv) {
  const char *src = getenv("FSDPC_SOURCE_DIR");
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/tests/fixtures/hf_families", src ? src : FSDPC_SOURCE_DIR);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    printf("skipped: no family fixtures: %s does not exist (scripts/gpu/agree.sh families "
           "makes them on the GPU host: unpack its hf_families.tar.gz into tests/fixtures)\n",
           dir);
    return 77;
  }
  int n = argc > 0 ? argc : N_FAMILIES, fails = 0, skipped = 0;
  for (int i = 0; i < n; i++) {
    const char *name = argc > 0 ? argv[i] : families[i];
    const char *skip = family_skip(dir, name);
    if (skip) {
      printf("SKIP %s %s: %s\n", ON_DEVICE ? "cuda" : "cpu", name, skip);
      skipped++;
      continue;
    }
    snprintf(g_family, sizeof g_family, "hf_families/%s", name);
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("family");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, family_forward_backward);
    tcase_add_test(tc, family_adamw);
    suite_add_tcase(s, tc);
    int failed = run_suite(s);
    printf("%s %s %s: logits, loss, gradients and the fixture's AdamW steps\n",
           failed ? "FAIL" : "PASS", ON_DEVICE ? "cuda" : "cpu", name);
    fflush(stdout);
    fails += failed != 0;
  }
  printf("%d of %d families passed (%s; %d skipped)\n", n - fails - skipped, n - skipped,
         ON_DEVICE ? "cuda bf16" : "cpu fp32", skipped);
  return fails ? 1 : 0;
}

int main(int argc, char **argv) {
  int families_mode = argc > 1 && strcmp(argv[1], "--families") == 0;
  g_ops = fsdpc__ops_cpu();
#ifdef FSDPC_FIXTURE_CUDA
  if (fsdpc__cuda_device_count() == 0) {
    printf("skipped: no GPU\n");
    return 77;
  }
  fsdpc_cuda_ctx_opts co;
  fsdpc__cuda_ctx_opts_default(&co);
  fsdpc_cuda_ctx *cuda = NULL;
  fsdpc_err cerr;
  if (fsdpc__cuda_ctx_create(&co, &cuda, &cerr) != FSDPC_OK) {
    fprintf(stderr, "%s\n", cerr.msg);
    return 1;
  }
  static fsdpc_ops cuda_ops;
  fsdpc__ops_cuda(cuda, &cuda_ops);
  g_ops = &cuda_ops;
#endif
  if (families_mode) {
    int rc = run_families(argc - 2, argv + 2);
#ifdef FSDPC_FIXTURE_CUDA
    fsdpc__cuda_ctx_destroy(cuda);
#endif
    return rc;
  }
  Suite *s = suite_create(ON_DEVICE ? "hf_fixture_cuda" : "hf_fixture");
  TCase *tc = tcase_create("model");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, untied_forward_backward);
  tcase_add_test(tc, tied_llama3_forward_backward);
  tcase_add_test(tc, untied_adamw);
  tcase_add_test(tc, tied_llama3_adamw);
  suite_add_tcase(s, tc);
  int failed = run_suite(s);
#ifdef FSDPC_FIXTURE_CUDA
  fsdpc__cuda_ctx_destroy(cuda);
#endif
  return failed ? 1 : 0;
}
