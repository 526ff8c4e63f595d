/* CPU cost of one optimizer plugin step per element: dlopens
 * libfsdpc-optim-NAME.so from DIR, steps one tensor of 2^20 elements 8 times
 * (gradients uniform in +-0.5 scaled over 4 decades, sign flipped each step)
 * on one thread, and prints the best step's thread CPU time per element (CPU
 * time, not wall time, so that a shared machine's preemption does not count).
 *   cc -O2 -std=gnu11 -Icore/include bench/optim/optim_step_bench.c -o /tmp/ob -ldl -lm
 *   /tmp/ob build/plugins adamw8bit        (add "f32" for fp32 state)
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsdpc/plugin.h"

static void set_error(void *ctx, int32_t st, const char *msg) {
  (void)ctx, (void)st;
  fprintf(stderr, "error: %s\n", msg);
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PLUGIN_DIR NAME [f32]\n", argv[0]);
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/libfsdpc-optim-%s.so", argv[1], argv[2]);
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(h, FSDPC_PLUGIN_ENTRY_V1);
  static fsdpc_host_api host;
  host.struct_size = sizeof host;
  host.abi_major = FSDPC_PLUGIN_ABI_MAJOR;
  host.set_error = set_error;
  const fsdpc_plugin_desc *d = NULL;
  if (!entry || entry(&host, &d) != FSDPC_OK)
    return 1;
  const fsdpc_optim_v1 *vt = d->components[0]->vtable;
  fsdpc_optim_init in = {
      .struct_size = sizeof in, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  fsdpc_optimizer *opt = NULL;
  if (vt->create(&in, &opt) != FSDPC_OK)
    return 1;
  const uint64_t n = 1u << 20, nb = n / 256 + 2;
  float *p = calloc(n, 4), *g = malloc(n * 4), *f = calloc(2 * n, 4), *s = calloc(2 * nb, 4);
  uint8_t *q = calloc(2 * n, 1);
  uint64_t r = 88172645463325252ull;
  for (uint64_t i = 0; i < n; i++) {
    double u[2];
    for (int k = 0; k < 2; k++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      u[k] = (double)(r >> 11) / 9007199254740992.0;
    }
    g[i] = (float)((u[0] - 0.5) * pow(10.0, -4 * u[1]));
  }
  fsdpc_optim_tensor t = {
      .struct_size = sizeof t, .param = p, .grad = g, .numel = n, .stride = n, .decay = 1};
  int quant = FSDPC_HAS_FIELD(vt, fsdpc_optim_v1, qformat) && vt->qformat && argc < 4;
  if (quant)
    t.qstate = q, t.qscale = s, t.scale_stride = nb;
  else
    t.state = f;
  fsdpc_optim_step_info si = {
      .struct_size = sizeof si, .lr = 1e-3, .grad_scale = 1, .num_threads = 1};
  double best = 1e9;
  for (int k = 1; k <= 8; k++) {
    for (uint64_t i = 0; i < n; i++)
      g[i] = -g[i];
    si.step = k;
    double t0 = cpu_now();
    if (vt->step(opt, &t, 1, &si) != FSDPC_OK)
      return 1;
    double dt = cpu_now() - t0;
    best = dt < best ? dt : best;
  }
  printf("%s%s: %.2f ns per element (best of 8 steps, 1 thread, %llu elements)\n", argv[2],
         quant ? " (8-bit state)" : " (fp32 state)", best / (double)n * 1e9, (unsigned long long)n);
  vt->destroy(opt);
  return 0;
}
