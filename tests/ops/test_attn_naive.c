/* The naive attention plugin, loaded through dlopen with a minimal host API
 * as the core would: descriptor, supports(), sizes(), forward against a
 * direct softmax in double, and backward against finite differences for GQA
 * ratios 1/2/4, causal and not, document masking, T = 1 and T = 17. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fd_check.h"
#include "fsdpc/plugin.h"

#define PLUGIN_PATH FSDPC_BINARY_DIR "/plugins/libfsdpc-attention-naive.so"

/* ---- minimal host ---- */

static char last_error[512];
static int32_t last_status;

static void host_log(void *ctx, int32_t level, const char *msg) {}
static void host_set_error(void *ctx, int32_t status, const char *msg) {
  last_status = status;
  snprintf(last_error, sizeof last_error, "%s", msg);
}
static void *host_alloc(void *ctx, uint64_t bytes, uint64_t align) {
  return aligned_alloc(align, (bytes + align - 1) / align * align);
}
static void host_free(void *ctx, void *p) {
  free(p);
}

static const fsdpc_host_api host = {
    .struct_size = sizeof(fsdpc_host_api),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .host_version = "test",
    .log = host_log,
    .set_error = host_set_error,
    .alloc = host_alloc,
    .free = host_free,
};

static void *dl;
static const fsdpc_component_desc *comp;
static const fsdpc_attention_v1 *attn;

static void load_plugin(void) {
  dl = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(dl != NULL, "dlopen %s: %s", PLUGIN_PATH, dlerror());
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(dl, FSDPC_PLUGIN_ENTRY_V1);
  ck_assert_ptr_nonnull(entry);
  const fsdpc_plugin_desc *desc = NULL;
  ck_assert_int_eq(entry(&host, &desc), FSDPC_OK);
  ck_assert_int_eq(desc->abi_major, FSDPC_PLUGIN_ABI_MAJOR);
  ck_assert_uint_eq(desc->n_components, 1);
  comp = desc->components[0];
  attn = comp->vtable;
}

static void unload_plugin(void) {
  if (dl)
    dlclose(dl);
  dl = NULL;
}

static fsdpc_attn_shape make_shape(int B, int T, int NH, int KVH, int HD, int causal,
                                   const int32_t *doc) {
  fsdpc_attn_shape s = {.struct_size = sizeof(fsdpc_attn_shape),
                        .B = B,
                        .T = T,
                        .NH = NH,
                        .KVH = KVH,
                        .HD = HD,
                        .causal = causal,
                        .scale = 1.0f / sqrtf((float)HD),
                        .dtype = FSDPC_DTYPE_F32,
                        .device = FSDPC_DEVICE_CPU,
                        .doc_ids = doc,
                        .host = &host};
  return s;
}

/* ---- reference: direct softmax in double ---- */

static void attn_reference(double *out, double *P, const fsdpc_attn_shape *s, const float *q,
                           const float *k, const float *v) {
  int B = s->B, T = s->T, NH = s->NH, KVH = s->KVH, HD = s->HD;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      int g = h / (NH / KVH);
      for (int i = 0; i < T; i++) {
        double *p = P + (((size_t)b * NH + h) * T + i) * T, mx = -INFINITY, sum = 0;
        for (int j = 0; j < T; j++) {
          int ok = (!s->causal || j <= i) &&
                   (!s->doc_ids || s->doc_ids[b * T + i] == s->doc_ids[b * T + j]);
          p[j] = -INFINITY;
          if (!ok)
            continue;
          double d = 0;
          for (int e = 0; e < HD; e++)
            d += (double)q[((b * T + i) * NH + h) * HD + e] * k[((b * T + j) * KVH + g) * HD + e];
          p[j] = d * s->scale;
          mx = fmax(mx, p[j]);
        }
        for (int j = 0; j < T; j++)
          sum += (p[j] = exp(p[j] - mx));
        for (int e = 0; e < HD; e++)
          out[((b * T + i) * NH + h) * HD + e] = 0;
        for (int j = 0; j < T; j++) {
          p[j] /= sum;
          for (int e = 0; e < HD; e++)
            out[((b * T + i) * NH + h) * HD + e] += p[j] * v[((b * T + j) * KVH + g) * HD + e];
        }
      }
    }
}

/* ---- one full check of a configuration ---- */

typedef struct {
  fsdpc_attn_shape s;
  float *q, *k, *v, *out, *saved;
  const float *r;
} attn_ctx;

static double attn_loss(void *p) {
  attn_ctx *c = p;
  ck_assert_int_eq(attn->forward(NULL, &c->s, c->q, c->k, c->v, c->out, c->saved, NULL, NULL),
                   FSDPC_OK);
  return dot_d(c->r, c->out, (size_t)c->s.B * c->s.T * c->s.NH * c->s.HD);
}

static void check_config(int B, int T, int NH, int KVH, int HD, int causal, int with_doc,
                         uint64_t seed) {
  test_rng rng = {seed};
  int32_t *doc = NULL;
  if (with_doc) { /* documents of random lengths, different per batch row */
    doc = malloc(sizeof(int32_t) * B * T);
    for (int b = 0; b < B; b++)
      for (int t = 0, id = 0; t < T; t++) {
        if (t > 0 && rng_int(&rng, 4) == 0)
          id++;
        doc[b * T + t] = id;
      }
  }
  fsdpc_attn_shape s = make_shape(B, T, NH, KVH, HD, causal, doc);
  ck_assert_int_eq(attn->supports(&s), FSDPC_OK);
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  ck_assert_int_eq(attn->sizes(NULL, &s, &sz), FSDPC_OK);
  ck_assert_uint_eq(sz.saved_bytes, (uint64_t)B * NH * T * T * 4);

  size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * KVH * HD;
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *out = malloc(nq * 4);
  float *r = malloc(nq * 4), *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
  float *saved = malloc(sz.saved_bytes), *ws = malloc(sz.bwd_workspace + 4);
  rng_fill(&rng, q, nq, 2.0f); /* peaked enough that softmax is not uniform */
  rng_fill(&rng, k, nk, 2.0f);
  rng_fill(&rng, v, nk, 1.0f);
  rng_fill(&rng, r, nq, 1.0f);

  /* forward vs reference, output and saved probabilities */
  double *ref = malloc(nq * sizeof(double)), *P = malloc((size_t)B * NH * T * T * sizeof(double));
  attn_reference(ref, P, &s, q, k, v);
  attn_ctx c = {s, q, k, v, out, saved, r};
  attn_loss(&c);
  for (size_t i = 0; i < nq; i++)
    ck_assert_double_eq_tol(out[i], ref[i], 1e-5);
  for (size_t i = 0; i < (size_t)B * NH * T * T; i++)
    ck_assert_double_eq_tol(saved[i], P[i], 1e-6);

  /* backward writes (=): garbage in the outputs must not leak through, and a
   * second call gives the same bits. */
  for (size_t i = 0; i < nq; i++)
    dq[i] = NAN;
  for (size_t i = 0; i < nk; i++)
    dk[i] = dv[i] = NAN;
  ck_assert_int_eq(attn->backward(NULL, &s, q, k, v, out, r, saved, dq, dk, dv, ws, NULL),
                   FSDPC_OK);
  float *dq2 = malloc(nq * 4);
  ck_assert_int_eq(attn->backward(NULL, &s, q, k, v, out, r, saved, dq2, dk, dv, ws, NULL),
                   FSDPC_OK);
  ck_assert_mem_eq(dq, dq2, nq * 4);

  char what[96];
  snprintf(what, sizeof what, "dq B%d T%d NH%d KVH%d causal%d doc%d", B, T, NH, KVH, causal,
           with_doc);
  if (T == 1) {
    /* softmax over one key is 1 whatever q and k are: dq = dk = 0 exactly,
     * and out = v. */
    for (size_t i = 0; i < nq; i++)
      ck_assert(dq[i] == 0.0f);
    for (size_t i = 0; i < nk; i++)
      ck_assert(dk[i] == 0.0f);
  } else {
    ck_assert_int_eq(fd_check(what, q, dq, nq, attn_loss, &c, 1e-3f, 1e-2), 0);
    what[1] = 'k';
    ck_assert_int_eq(fd_check(what, k, dk, nk, attn_loss, &c, 1e-3f, 1e-2), 0);
  }
  what[1] = 'v';
  ck_assert_int_eq(fd_check(what, v, dv, nk, attn_loss, &c, 1e-3f, 1e-2), 0);

  free(q), free(k), free(v), free(out), free(r), free(dq), free(dq2), free(dk), free(dv);
  free(saved), free(ws), free(ref), free(P), free(doc);
}

/* ---- tests ---- */

START_TEST(descriptor) {
  ck_assert_int_eq(comp->kind, FSDPC_KIND_ATTENTION);
  ck_assert_str_eq(comp->name, "naive");
  ck_assert_uint_eq(comp->iface_version, 1);
  ck_assert_int_eq(comp->default_score, 10);
  /* A CUDA build appends its bf16 path. */
  const char *cpu =
      "cpu fp32; causal; GQA; doc masking; sliding window; logit soft-capping; any head dim";
  ck_assert_int_eq(strncmp(comp->capabilities, cpu, strlen(cpu)), 0);
  ck_assert_uint_eq(attn->features & FSDPC_ATTN_FEATURE_SOFTCAP, FSDPC_ATTN_FEATURE_SOFTCAP);
  ck_assert_ptr_nonnull(attn->forward);
  ck_assert_ptr_nonnull(attn->backward);
  ck_assert_ptr_nonnull(attn->sizes);
  ck_assert_ptr_null(attn->create); /* no context: ctx is NULL in every call */
}
END_TEST

START_TEST(gqa_ratios_causal) {
  check_config(2, 17, 4, 4, 8, 1, 0, 101); /* MHA */
  check_config(2, 17, 4, 2, 8, 1, 0, 102); /* GQA 2 */
  check_config(2, 17, 4, 1, 8, 1, 0, 103); /* GQA 4 (MQA) */
}
END_TEST

START_TEST(non_causal) {
  check_config(1, 17, 4, 2, 6, 0, 0, 201);
}
END_TEST

START_TEST(doc_masking) {
  check_config(2, 17, 4, 2, 8, 1, 1, 301);
  check_config(2, 13, 2, 1, 5, 0, 1, 302); /* doc mask alone, odd head dim */
}
END_TEST

START_TEST(single_token) {
  check_config(3, 1, 4, 2, 8, 1, 0, 401);
  check_config(1, 1, 2, 2, 3, 0, 1, 402);
}
END_TEST

START_TEST(refuses_what_it_cannot_run) {
  fsdpc_attn_shape s = make_shape(1, 4, 4, 2, 8, 1, NULL);
  s.device = FSDPC_DEVICE_CUDA;
  last_error[0] = 0;
  ck_assert_int_eq(attn->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "CUDA"));
  s.device = FSDPC_DEVICE_CPU;
  s.dtype = FSDPC_DTYPE_BF16;
  last_error[0] = 0;
  ck_assert_int_eq(attn->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "fp32"));

  /* A malformed shape is a usage error with a message, not a crash. */
  float buf[64] = {0};
  s = make_shape(1, 2, 3, 2, 4, 1, NULL);
  last_error[0] = 0;
  ck_assert_int_eq(attn->forward(NULL, &s, buf, buf, buf, buf, buf, NULL, NULL),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(last_error, "multiple of num_kv_heads"));
  ck_assert_int_eq(last_status, FSDPC_INVALID_USAGE);
  s = make_shape(1, 2, 2, 2, 4, 1, NULL);
  ck_assert_int_eq(attn->forward(NULL, &s, buf, NULL, buf, buf, buf, NULL, NULL),
                   FSDPC_INVALID_USAGE);
  ck_assert_int_eq(
      attn->backward(NULL, &s, buf, buf, buf, buf, buf, buf, buf, buf, buf, NULL, NULL),
      FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(last_error, "workspace"));
  s.T = 0;
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  ck_assert_int_eq(attn->sizes(NULL, &s, &sz), FSDPC_INVALID_USAGE);
  /* An old host whose shape struct ends before doc_ids: the field is not read. */
  s = make_shape(1, 3, 2, 2, 4, 1, (const int32_t *)0x1);
  s.struct_size = offsetof(fsdpc_attn_shape, doc_ids);
  ck_assert_int_eq(attn->forward(NULL, &s, buf, buf, buf, buf, buf, NULL, NULL), FSDPC_OK);
}
END_TEST

int main(void) {
  Suite *s = suite_create("attn_naive");
  TCase *tc = tcase_create("plugin");
  tcase_add_checked_fixture(tc, load_plugin, unload_plugin);
  tcase_add_test(tc, descriptor);
  tcase_add_test(tc, gqa_ratios_causal);
  tcase_add_test(tc, non_causal);
  tcase_add_test(tc, doc_masking);
  tcase_add_test(tc, single_token);
  tcase_add_test(tc, refuses_what_it_cannot_run);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
