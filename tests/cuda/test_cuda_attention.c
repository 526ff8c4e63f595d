/* The naive attention plugin on CUDA (bf16, fp32 softmax) against its own
 * CPU path (fp32) on the same bf16-rounded inputs: out, the saved P, dq, dk
 * and dv, for GQA ratios 1, 2, 3 and 6, causal or not, with document
 * masking, sliding windows shorter than T, logit soft-capping (Gemma 2; caps
 * small enough that tanh bends most scores, so a wrong derivative shows) and
 * head dims up to 256, and sequence lengths that are not multiples of the
 * block size. */
#include <dlfcn.h>

#include "cuda_testutil.h"

#define PLUGIN_PATH FSDPC_BINARY_DIR "/plugins/libfsdpc-attention-naive.so"

static char last_error[512];
static void host_log(void *ctx, int32_t level, const char *msg) {}
static void host_set_error(void *ctx, int32_t status, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
}
static const fsdpc_host_api host = {.struct_size = sizeof(fsdpc_host_api),
                                    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
                                    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
                                    .host_version = "test",
                                    .log = host_log,
                                    .set_error = host_set_error};

static const fsdpc_attention_v1 *load(void) {
  void *dl = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(dl != NULL, "dlopen %s: %s", PLUGIN_PATH, dlerror());
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(dl, FSDPC_PLUGIN_ENTRY_V1);
  const fsdpc_plugin_desc *desc = NULL;
  ck_assert_int_eq(entry(&host, &desc), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(desc->components[0]->capabilities, "cuda bf16"));
  return desc->components[0]->vtable; /* never unloaded */
}

/* window 0 = none, softcap 0 = none. */
static void attn_case_wc(int B, int T, int NH, int KVH, int HD, int causal, int with_doc,
                         int window, float softcap) {
  const fsdpc_attention_v1 *A = load();
  const size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * KVH * HD;
  const size_t np = (size_t)B * NH * T * T;
  int32_t *doc = NULL, *d_doc = NULL;
  if (with_doc) {
    doc = malloc(sizeof(int32_t) * B * T);
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++)
        doc[b * T + t] = t < T / 3 ? 0 : (t < T / 2 + b ? 1 : 2); /* 3 documents */
    d_doc = up_raw(doc, sizeof(int32_t) * B * T);
  }
  fsdpc_attn_shape s = {.struct_size = sizeof s,
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
                        .host = &host,
                        .window = window,
                        .softcap = softcap};
  fsdpc_attn_shape g = s;
  g.dtype = FSDPC_DTYPE_BF16;
  g.device = FSDPC_DEVICE_CUDA;
  g.doc_ids = d_doc;
  ck_assert_msg(A->supports(&g) == FSDPC_OK, "supports: %s", last_error);
  fsdpc_attn_sizes zs = {.struct_size = sizeof zs}, zc = {.struct_size = sizeof zc};
  ck_assert_int_eq(A->sizes(NULL, &g, &zs), FSDPC_OK);
  ck_assert_int_eq(A->sizes(NULL, &s, &zc), FSDPC_OK);
  ck_assert_uint_eq(zs.saved_bytes, np * sizeof(float));

  float *q = rand_bf16_values(nq, -1.5, 1.5), *k = rand_bf16_values(nk, -1.5, 1.5);
  float *v = rand_bf16_values(nk, -1, 1), *dout = rand_bf16_values(nq, -1, 1);
  /* CPU reference, fp32. */
  float *out = malloc(sizeof(float) * nq), *P = malloc(zc.saved_bytes);
  float *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nk);
  float *dv = malloc(sizeof(float) * nk), *ws = malloc(zc.bwd_workspace + 4);
  ck_assert_int_eq(A->forward(NULL, &s, q, k, v, out, P, NULL, NULL), FSDPC_OK);
  ck_assert_int_eq(A->backward(NULL, &s, q, k, v, out, dout, P, dq, dk, dv, ws, NULL), FSDPC_OK);
  /* GPU, bf16. */
  uint16_t *d_q = up_bf16(q, nq), *d_k = up_bf16(k, nk), *d_v = up_bf16(v, nk);
  uint16_t *d_dout = up_bf16(dout, nq), *d_out = dev_alloc(nq * 2), *d_dq = dev_alloc(nq * 2);
  uint16_t *d_dk = dev_alloc(nk * 2), *d_dv = dev_alloc(nk * 2);
  float *d_P = dev_alloc(zs.saved_bytes), *d_ws = dev_alloc(zs.bwd_workspace);
  void *stream = fsdpc__cuda_compute_stream(g_ctx);
  ck_assert_msg(A->forward(NULL, &g, d_q, d_k, d_v, d_out, d_P, NULL, stream) == FSDPC_OK, "%s",
                last_error);
  ck_assert_msg(A->backward(NULL, &g, d_q, d_k, d_v, d_out, d_dout, d_P, d_dq, d_dk, d_dv, d_ws,
                            stream) == FSDPC_OK,
                "%s", last_error);
  float *gout = down_bf16(d_out, nq), *gP = down_f32(d_P, np), *gdq = down_bf16(d_dq, nq);
  float *gdk = down_bf16(d_dk, nk), *gdv = down_bf16(d_dv, nk);
  printf("  B=%d T=%d NH=%d KVH=%d HD=%d causal=%d doc=%d window=%d softcap=%g\n", B, T, NH, KVH,
         HD, causal, with_doc, window, (double)softcap);
  CHECK_REL("attention out", gout, out, nq, TOL_BF16);
  CHECK_REL("attention saved P (fp32)", gP, P, np, TOL_F32);
  CHECK_REL("attention dq", gdq, dq, nq, TOL_BF16);
  CHECK_REL("attention dk", gdk, dk, nk, TOL_BF16);
  CHECK_REL("attention dv", gdv, dv, nk, TOL_BF16);
  free(q), free(k), free(v), free(dout), free(out), free(P), free(dq), free(dk), free(dv);
  free(ws), free(gout), free(gP), free(gdq), free(gdk), free(gdv), free(doc);
  dev_free(d_q, nq * 2), dev_free(d_k, nk * 2), dev_free(d_v, nk * 2), dev_free(d_dout, nq * 2);
  dev_free(d_out, nq * 2), dev_free(d_dq, nq * 2), dev_free(d_dk, nk * 2), dev_free(d_dv, nk * 2);
  dev_free(d_P, zs.saved_bytes), dev_free(d_ws, zs.bwd_workspace);
  if (d_doc)
    dev_free(d_doc, sizeof(int32_t) * B * T);
}

static void attn_case(int B, int T, int NH, int KVH, int HD, int causal, int with_doc) {
  attn_case_wc(B, T, NH, KVH, HD, causal, with_doc, 0, 0.0f);
}

START_TEST(gqa_causal) {
  attn_case(2, 37, 4, 2, 64, 1, 0);
}
END_TEST
START_TEST(mha_noncausal_doc) {
  attn_case(1, 50, 3, 3, 80, 0, 1);
}
END_TEST
START_TEST(gqa6_causal_doc) {
  attn_case(2, 133, 6, 1, 128, 1, 1);
}
END_TEST
START_TEST(single_token) {
  attn_case(3, 1, 2, 1, 16, 1, 0);
}
END_TEST

/* Sliding windows shorter than T and soft-capping; caps 0.5 and 1 bend most
 * scores (a wrong derivative shows), 50 is Gemma 2's. */
static const struct {
  int B, T, NH, KVH, HD, causal, doc, window;
  float softcap;
} wc_cases[] = {
    {2, 45, 4, 1, 32, 1, 0, 7, 0.0f},   /* GQA 4, window only */
    {2, 61, 4, 2, 64, 1, 0, 16, 0.5f},  /* GQA 2, window and cap */
    {1, 50, 3, 3, 80, 0, 1, 0, 1.0f},   /* MHA, not causal, documents */
    {1, 70, 6, 2, 256, 1, 1, 33, 1.0f}, /* GQA 3, head dim 256, documents, window */
    {2, 40, 4, 2, 256, 1, 0, 0, 50.0f}, /* Gemma 2's cap */
};
START_TEST(window_softcap) {
  attn_case_wc(wc_cases[_i].B, wc_cases[_i].T, wc_cases[_i].NH, wc_cases[_i].KVH, wc_cases[_i].HD,
               wc_cases[_i].causal, wc_cases[_i].doc, wc_cases[_i].window, wc_cases[_i].softcap);
}
END_TEST

START_TEST(refuses_fp32_on_cuda) {
  const fsdpc_attention_v1 *A = load();
  fsdpc_attn_shape s = {.struct_size = sizeof s,
                        .B = 1,
                        .T = 4,
                        .NH = 2,
                        .KVH = 1,
                        .HD = 8,
                        .causal = 1,
                        .scale = 0.35f,
                        .dtype = FSDPC_DTYPE_F32,
                        .device = FSDPC_DEVICE_CUDA,
                        .host = &host};
  ck_assert_int_eq(A->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "only bf16"));
  s.dtype = FSDPC_DTYPE_BF16;
  s.HD = 1024;
  ck_assert_int_eq(A->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "head dim"));
}
END_TEST

static Suite *make_suite(void) {
  Suite *s = suite_create("cuda_attention");
  TCase *tc = tcase_create("naive");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, gqa_causal);
  tcase_add_test(tc, mha_noncausal_doc);
  tcase_add_test(tc, gqa6_causal_doc);
  tcase_add_test(tc, single_token);
  tcase_add_loop_test(tc, window_softcap, 0, sizeof wc_cases / sizeof wc_cases[0]);
  tcase_add_test(tc, refuses_fp32_on_cuda);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(make_suite);
}
