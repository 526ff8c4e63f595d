/* Drives the out-of-tree lion plugin the way a host does, using only the
 * installed <fsdpc/plugin.h>: dlopen, entry point, create, init_state, two
 * steps checked against hand-computed values, supports() veto; a host of
 * plugin ABI 1.0 (which does not hand its table to each call) refused.
 * Built and run by test_example_plugin.sh. Usage: lion_check PLUGIN.so */
#include <dlfcn.h>
#include <fsdpc/plugin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char last_error[512];

static void h_log(void *ctx, int32_t level, const char *msg) {}
static void h_set_error(void *ctx, int32_t st, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
}
static void *h_alloc(void *ctx, uint64_t bytes, uint64_t align) {
  void *p = NULL;
  return posix_memalign(&p, align, bytes) == 0 ? p : NULL;
}
static void h_free(void *ctx, void *p) { free(p); }
static int32_t h_opt_get(void *ctx, const fsdpc_opts *o, const char *k, int32_t t, void *out,
                         uint64_t cap) {
  return FSDPC_UNSUPPORTED;
}
static int32_t h_device_info(void *ctx, fsdpc_device_info *out) { return FSDPC_UNSUPPORTED; }

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "lion_check: " __VA_ARGS__);                                                 \
      fprintf(stderr, "\n");                                                                       \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  CHECK(argc == 2, "usage: lion_check PLUGIN.so");
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(h, "dlopen: %s", dlerror());
  void *sym = dlsym(h, FSDPC_PLUGIN_ENTRY_V1);
  CHECK(sym, "no entry point");
  fsdpc_plugin_entry_v1_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  fsdpc_host_api host = {.struct_size = sizeof host,
                         .abi_major = 1,
                         .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
                         .host_version = "test",
                         .log = h_log,
                         .set_error = h_set_error,
                         .alloc = h_alloc,
                         .free = h_free,
                         .opt_get = h_opt_get,
                         .device_info = h_device_info};
  const fsdpc_plugin_desc *d = NULL;
  fsdpc_host_api host10 = host;
  host10.abi_minor = 0;
  CHECK(entry(&host10, &d) == FSDPC_UNSUPPORTED && strstr(last_error, "1.1"),
        "a 1.0 host was not refused with a reason: '%s'", last_error);
  CHECK(entry(&host, &d) == FSDPC_OK && d, "entry failed");
  CHECK(d->abi_major == 1 && d->n_components == 1, "bad descriptor");
  const fsdpc_component_desc *c = d->components[0];
  CHECK(c->kind == FSDPC_KIND_OPTIM && strcmp(c->name, "lion") == 0, "not optim/lion");
  const fsdpc_optim_v1 *vt = c->vtable;

  fsdpc_situation cuda = {.struct_size = sizeof cuda, .device = FSDPC_DEVICE_CUDA, .host = &host};
  CHECK(vt->supports(&cuda) == FSDPC_UNSUPPORTED, "supports() accepted CUDA");
  CHECK(strstr(last_error, "CPU only"), "no reason for the veto: '%s'", last_error);

  fsdpc_optim_init init = {
      .struct_size = sizeof init, .weight_decay = 0.1, .device = FSDPC_DEVICE_CPU, .host = &host};
  fsdpc_optimizer *opt = NULL;
  CHECK(vt->create(&init, &opt) == FSDPC_OK, "create: %s", last_error);
  CHECK(vt->n_slots(opt) == 1 && strcmp(vt->slot_name(opt, 0), "exp_avg") == 0, "slots");

  enum { N = 4 };
  float param[N] = {1.0f, -1.0f, 0.5f, 2.0f};
  float grad[N] = {0.5f, -2.0f, 0.0f, 1.0f};
  float state[N] = {9, 9, 9, 9};
  CHECK(vt->init_state(opt, state, N, FSDPC_DEVICE_CPU, NULL) == FSDPC_OK, "init_state");
  for (int i = 0; i < N; i++)
    CHECK(state[i] == 0.0f, "state not zeroed");
  fsdpc_optim_tensor t = {.struct_size = sizeof t,
                          .param = param,
                          .grad = grad,
                          .state = state,
                          .numel = N,
                          .stride = N,
                          .decay = 1};
  fsdpc_optim_step_info info = {
      .struct_size = sizeof info, .step = 1, .lr = 0.01, .grad_scale = 1.0, .num_threads = 1};
  CHECK(vt->step(opt, &t, 1, &info) == FSDPC_OK, "step 1");
  /* Step 1 (m = 0): p = p * (1 - 0.01 * 0.1) - 0.01 * sign(g); m = 0.01 g. */
  const float want1[N] = {0.989f, -0.989f, 0.4995f, 1.988f};
  const float m1[N] = {0.005f, -0.02f, 0.0f, 0.01f};
  for (int i = 0; i < N; i++) {
    CHECK(fabsf(param[i] - want1[i]) < 1e-6f, "step 1 param[%d] = %.7f, want %.7f", i, param[i],
          want1[i]);
    CHECK(fabsf(state[i] - m1[i]) < 1e-7f, "step 1 m[%d] = %.7f, want %.7f", i, state[i], m1[i]);
  }
  /* Step 2 with the opposite gradient on element 3: c = 0.9 * 0.01 + 0.1 *
   * (-0.05) = 0.004 > 0, so the momentum still wins the sign. */
  grad[3] = -0.05f;
  CHECK(vt->step(opt, &t, 1, &info) == FSDPC_OK, "step 2");
  float want = 1.988f * 0.999f - 0.01f;
  CHECK(fabsf(param[3] - want) < 1e-6f, "step 2 param[3] = %.7f, want %.7f", param[3], want);
  vt->destroy(opt);

  init.device = FSDPC_DEVICE_CUDA;
  CHECK(vt->create(&init, &opt) == FSDPC_UNSUPPORTED, "create accepted CUDA");
  printf("lion_check: ok\n");
  return 0;
}
