/* The flash attention plugin without a GPU: its descriptor, which shapes it
 * refuses and why (CPU, fp32, head dims other than 64/80/96/128/256,
 * soft-capping with head dims 80/96, no CUDA build),
 * and that its memory is linear in T where naive's is quadratic. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdpc/plugin.h"

#define PLUGIN_DIR FSDPC_BINARY_DIR "/plugins"

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

static const fsdpc_component_desc *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, PLUGIN_DIR "/libfsdpc-attention-%s.so", name);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(dl != NULL, "dlopen %s: %s", path, dlerror());
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(dl, FSDPC_PLUGIN_ENTRY_V1);
  ck_assert_ptr_nonnull(entry);
  const fsdpc_plugin_desc *desc = NULL;
  ck_assert_int_eq(entry(&host, &desc), FSDPC_OK);
  ck_assert_uint_eq(desc->n_components, 1);
  return desc->components[0];
}

static fsdpc_attn_shape cuda_shape(int B, int T, int NH, int KVH, int HD) {
  fsdpc_attn_shape s = {.struct_size = sizeof(fsdpc_attn_shape),
                        .B = B,
                        .T = T,
                        .NH = NH,
                        .KVH = KVH,
                        .HD = HD,
                        .causal = 1,
                        .scale = 1.0f / sqrtf((float)HD),
                        .dtype = FSDPC_DTYPE_BF16,
                        .device = FSDPC_DEVICE_CUDA,
                        .host = &host};
  return s;
}

START_TEST(descriptor) {
  const fsdpc_component_desc *f = load("flash"), *n = load("naive");
  ck_assert_str_eq(f->name, "flash");
  ck_assert_int_eq(f->kind, FSDPC_KIND_ATTENTION);
  ck_assert_uint_eq(f->iface_version, 1);
  /* auto must prefer flash wherever it supports the run. */
  ck_assert_int_gt(f->default_score, n->default_score);
  const fsdpc_attention_v1 *v = f->vtable;
  ck_assert_uint_ge(v->struct_size, sizeof(fsdpc_attention_v1));
  ck_assert_ptr_nonnull(v->supports);
  ck_assert_ptr_nonnull(v->forward);
  ck_assert_ptr_nonnull(v->backward);
  ck_assert_uint_eq(v->features, FSDPC_ATTN_FEATURE_WINDOW | FSDPC_ATTN_FEATURE_SOFTCAP);
#ifdef FSDPC_TEST_HAVE_CUDA
  ck_assert_ptr_nonnull(strstr(f->capabilities, "head dims 64 and 128"));
  ck_assert_ptr_nonnull(strstr(f->capabilities, "logit soft-capping"));
  ck_assert_ptr_nonnull(strstr(f->capabilities, "GQA"));
#else
  ck_assert_ptr_nonnull(strstr(f->capabilities, "without CUDA"));
#endif
}
END_TEST

START_TEST(refusals) {
  const fsdpc_attention_v1 *v = load("flash")->vtable;
  fsdpc_attn_shape s = cuda_shape(1, 128, 8, 2, 128);
  s.device = FSDPC_DEVICE_CPU;
  s.dtype = FSDPC_DTYPE_F32;
  last_error[0] = '\0';
  ck_assert_int_eq(v->supports(&s), FSDPC_UNSUPPORTED);
#ifdef FSDPC_TEST_HAVE_CUDA
  ck_assert_ptr_nonnull(strstr(last_error, "CUDA only"));
  s = cuda_shape(1, 128, 8, 2, 128);
  s.dtype = FSDPC_DTYPE_F32;
  ck_assert_int_eq(v->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "bf16"));
  s = cuda_shape(1, 128, 8, 2, 112);
  ck_assert_int_eq(v->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "head dim 112"));
  /* Soft-capping runs in the mma.sync kernels, which have no 80 / 96 tiles. */
  s = cuda_shape(1, 128, 8, 2, 96);
  s.softcap = 50.0f;
  ck_assert_int_eq(v->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "soft-capping with head dim 96"));
  s = cuda_shape(1, 128, 8, 2, 256);
  s.softcap = NAN;
  ck_assert_int_eq(v->supports(&s), FSDPC_UNSUPPORTED);
  fsdpc_attn_sizes bad = {.struct_size = sizeof bad};
  ck_assert_int_eq(v->sizes(NULL, &s, &bad), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(last_error, "softcap"));
  s = cuda_shape(1, 128, 6, 4, 64);
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  ck_assert_int_eq(v->sizes(NULL, &s, &sz), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(last_error, "multiple"));
  /* NULL buffers are a usage error, caught before any launch. */
  s = cuda_shape(1, 128, 8, 2, 64);
  ck_assert_int_eq(v->forward(NULL, &s, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                   FSDPC_INVALID_USAGE);
  char buf[64] __attribute__((aligned(16)));
  ck_assert_int_eq(v->backward(NULL, &s, buf, buf, buf, buf, buf, buf, buf, buf, buf, NULL, NULL),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(last_error, "workspace"));
#else
  ck_assert_ptr_nonnull(strstr(last_error, "built without CUDA"));
  s = cuda_shape(1, 128, 8, 2, 128);
  ck_assert_int_eq(v->supports(&s), FSDPC_UNSUPPORTED);
  /* Nothing runs, but a CUDA shape still has sizes (a plan for a GPU made
   * on a machine without nvcc), and a malformed one is still refused. */
  ck_assert_int_eq(v->forward(NULL, &s, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                   FSDPC_UNSUPPORTED);
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  ck_assert_int_eq(v->sizes(NULL, &s, &sz), FSDPC_OK);
  ck_assert_uint_eq(sz.saved_bytes, 8ull * 128 * 4);
  s = cuda_shape(1, 128, 6, 4, 64);
  ck_assert_int_eq(v->sizes(NULL, &s, &sz), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(last_error, "multiple"));
  const fsdpc_attention_v1 *n = load("naive")->vtable;
  s = cuda_shape(1, 128, 8, 2, 64);
  last_error[0] = '\0';
  ck_assert_int_eq(n->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_int_eq(n->forward(NULL, &s, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                   FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(last_error, "not supported by this build"));
  ck_assert_int_eq(n->sizes(NULL, &s, &sz), FSDPC_OK);
  ck_assert_uint_eq(sz.saved_bytes, 8ull * 128 * 128 * 4);
#endif
}
END_TEST

/* The 1B shape (32 heads, 8 kv heads, head dim 128) at T = 8192: flash keeps
 * the LSE (B*NH*T floats) and needs O(T) backward scratch; naive keeps
 * B*NH*T*T floats, 8 GiB per layer. The same with or without CUDA in the
 * build (the planner sizes GPU runs anywhere). */
START_TEST(memory_linear_in_t) {
  const fsdpc_attention_v1 *f = load("flash")->vtable;
  fsdpc_attn_sizes a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
  fsdpc_attn_shape s = cuda_shape(1, 8192, 32, 8, 128);
  ck_assert_int_eq(f->sizes(NULL, &s, &a), FSDPC_OK);
  ck_assert_uint_eq(a.saved_bytes, 32ull * 8192 * 4);
  ck_assert_uint_eq(a.fwd_workspace, 0);
  s.T = 2 * 8192;
  ck_assert_int_eq(f->sizes(NULL, &s, &b), FSDPC_OK);
  ck_assert_uint_eq(b.saved_bytes, 2 * a.saved_bytes);
  ck_assert(b.bwd_workspace <= 2 * a.bwd_workspace + 512 &&
            b.bwd_workspace >= 2 * a.bwd_workspace - 512);
  /* Backward scratch: dq in fp32 plus one float per row. */
  ck_assert_uint_le(a.bwd_workspace, 8192ull * 32 * (128 + 1) * 4 + 512);

  const fsdpc_attention_v1 *n = load("naive")->vtable;
  fsdpc_attn_sizes c = {.struct_size = sizeof c};
  s = cuda_shape(1, 8192, 32, 8, 128);
  s.device = FSDPC_DEVICE_CPU;
  s.dtype = FSDPC_DTYPE_F32;
  ck_assert_int_eq(n->sizes(NULL, &s, &c), FSDPC_OK);
  ck_assert_uint_eq(c.saved_bytes, 32ull * 8192 * 8192 * 4);
  ck_assert_uint_eq(c.saved_bytes / a.saved_bytes, 8192);
}
END_TEST

int main(void) {
  Suite *s = suite_create("flash_desc");
  TCase *tc = tcase_create("plugin");
  tcase_add_test(tc, descriptor);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, memory_linear_in_t);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
