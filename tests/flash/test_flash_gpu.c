/* The flash attention plugin on the GPU against the CPU naive plugin.
 *
 * For each configuration: random bf16 q, k, v, dout; the reference is the
 * naive plugin in fp32 on the same (bf16-rounded) values; flash runs forward
 * and backward on the GPU into poisoned (NaN) buffers. out, dq, dk, dv must
 * be finite everywhere and within a relative error norm of TOL of the
 * reference. Shapes cover T in {1, 17, 128, 1000, 2048} (and any T given on
 * the command line), head dims 64 and 128 (80 and 96 in a few extra
 * configurations), GQA ratios 1, 4, 8, causal, full and document-masked
 * attention, sliding windows (shorter than a block, across blocks, with
 * documents), and Gemma's shapes (issue 36): head dim 256 and logit
 * soft-capping (head dims 64, 128, 256; caps of 1 and 2, which bend most
 * scores, so that a wrong derivative shows, and Gemma 2's 50), with windows
 * and documents.
 *
 * Usage: test_flash_gpu [--plugins DIR] [--t T]... [--window] [--gemma]
 * Exits 77 with the one line "skipped: no GPU" when no CUDA device is
 * present. --window runs the sliding-window configurations only, --gemma the
 * head-dim-256 and soft-capped ones only. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdpc/plugin.h"

#define TOL 1e-2

static char last_error[512];

static void host_log(void *ctx, int32_t level, const char *msg) {}
static void host_set_error(void *ctx, int32_t status, const char *msg) {
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

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static const fsdpc_attention_v1 *load(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libfsdpc-attention-%s.so", dir, name);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(1);
  }
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(dl, FSDPC_PLUGIN_ENTRY_V1);
  const fsdpc_plugin_desc *desc = NULL;
  if (!entry || entry(&host, &desc) != FSDPC_OK) {
    fprintf(stderr, "%s: entry point failed: %s\n", path, last_error);
    exit(1);
  }
  return desc->components[0]->vtable;
}

/* ---- bf16 on the host ---- */

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* uniform in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) * (1.0 / (1ull << 24))) * 2.0f - 1.0f;
}

/* Random bf16 values in both forms: b (bf16 bits) and f (the same as fp32). */
static void fill(uint16_t *b, float *f, size_t n, float amp) {
  for (size_t i = 0; i < n; i++) {
    b[i] = to_bf16(amp * urand());
    f[i] = from_bf16(b[i]);
  }
}

/* ||got - ref|| / ||ref||, or +inf when got has a non-finite element. */
static double rel_err(const uint16_t *got, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double g = from_bf16(got[i]);
    if (!isfinite(g))
      return INFINITY;
    num += (g - ref[i]) * (g - ref[i]);
    den += (double)ref[i] * ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct {
  int B, T, NH, KVH, HD, causal, docs;
} config;

static const fsdpc_attention_v1 *naive, *flash;

static void *dev_copy(const void *h, size_t bytes) {
  void *d = NULL;
  CUDA_OK(cudaMalloc(&d, bytes ? bytes : 16));
  if (h)
    CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  else
    CUDA_OK(cudaMemset(d, 0xff, bytes)); /* bf16 0xffff is NaN: unwritten shows */
  return d;
}

/* Runs one configuration (window: a sliding window, 0 = none; softcap: the
 * logit soft-cap, 0 = none); returns 1 if it passes. */
static int run_config(const config *c, int window, float softcap) {
  const size_t nq = (size_t)c->B * c->T * c->NH * c->HD, nk = (size_t)c->B * c->T * c->KVH * c->HD;
  uint16_t *qb = malloc(nq * 2), *kb = malloc(nk * 2), *vb = malloc(nk * 2), *dob = malloc(nq * 2);
  float *qf = malloc(nq * 4), *kf = malloc(nk * 4), *vf = malloc(nk * 4), *dof = malloc(nq * 4);
  float *of = malloc(nq * 4), *dqf = malloc(nq * 4), *dkf = malloc(nk * 4), *dvf = malloc(nk * 4);
  uint16_t *og = malloc(nq * 2), *dqg = malloc(nq * 2), *dkg = malloc(nk * 2), *dvg = malloc(nk * 2);
  int32_t *doc = malloc((size_t)c->B * c->T * 4);
  fill(qb, qf, nq, 2.0f); /* scores spread over several units: a peaked softmax */
  fill(kb, kf, nk, 2.0f);
  fill(vb, vf, nk, 1.0f);
  fill(dob, dof, nq, 1.0f);
  for (int b = 0; b < c->B; b++) { /* documents of random lengths 1..T/3+1 */
    int id = 0, left = 0;
    for (int t = 0; t < c->T; t++) {
      if (left == 0) {
        id++;
        left = 1 + (int)((urand() + 1.0f) * 0.5f * (c->T / 3 + 1));
      }
      left--;
      doc[b * c->T + t] = id;
    }
  }

  fsdpc_attn_shape s = {.struct_size = sizeof s,
                        .B = c->B,
                        .T = c->T,
                        .NH = c->NH,
                        .KVH = c->KVH,
                        .HD = c->HD,
                        .causal = c->causal,
                        .scale = 1.0f / sqrtf((float)c->HD),
                        .dtype = FSDPC_DTYPE_F32,
                        .device = FSDPC_DEVICE_CPU,
                        .doc_ids = c->docs ? doc : NULL,
                        .host = &host,
                        .window = window,
                        .softcap = softcap};
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  if (naive->sizes(NULL, &s, &sz) != FSDPC_OK) {
    fprintf(stderr, "naive sizes: %s\n", last_error);
    exit(1);
  }
  void *saved = malloc(sz.saved_bytes), *ws = malloc(sz.bwd_workspace + 16);
  if (naive->forward(NULL, &s, qf, kf, vf, of, saved, NULL, NULL) != FSDPC_OK ||
      naive->backward(NULL, &s, qf, kf, vf, of, dof, saved, dqf, dkf, dvf, ws, NULL) != FSDPC_OK) {
    fprintf(stderr, "naive: %s\n", last_error);
    exit(1);
  }
  free(saved);
  free(ws);

  int32_t *doc_d = c->docs ? dev_copy(doc, (size_t)c->B * c->T * 4) : NULL;
  s.dtype = FSDPC_DTYPE_BF16;
  s.device = FSDPC_DEVICE_CUDA;
  s.doc_ids = doc_d;
  int ok = 1;
  if (flash->supports(&s) != FSDPC_OK || flash->sizes(NULL, &s, &sz) != FSDPC_OK) {
    fprintf(stderr, "flash does not support the shape: %s\n", last_error);
    exit(1);
  }
  void *q_d = dev_copy(qb, nq * 2), *k_d = dev_copy(kb, nk * 2), *v_d = dev_copy(vb, nk * 2);
  void *do_d = dev_copy(dob, nq * 2), *o_d = dev_copy(NULL, nq * 2), *dq_d = dev_copy(NULL, nq * 2);
  void *dk_d = dev_copy(NULL, nk * 2), *dv_d = dev_copy(NULL, nk * 2);
  void *saved_d = dev_copy(NULL, sz.saved_bytes), *ws_d = dev_copy(NULL, sz.bwd_workspace);
  if (flash->forward(NULL, &s, q_d, k_d, v_d, o_d, saved_d, NULL, NULL) != FSDPC_OK ||
      flash->backward(NULL, &s, q_d, k_d, v_d, o_d, do_d, saved_d, dq_d, dk_d, dv_d, ws_d, NULL) !=
          FSDPC_OK) {
    fprintf(stderr, "flash: %s\n", last_error);
    exit(1);
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(og, o_d, nq * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dqg, dq_d, nq * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dkg, dk_d, nk * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dvg, dv_d, nk * 2, cudaMemcpyDeviceToHost));
  double e[4] = {rel_err(og, of, nq), rel_err(dqg, dqf, nq), rel_err(dkg, dkf, nk),
                 rel_err(dvg, dvf, nk)};
  for (int i = 0; i < 4; i++)
    ok = ok && e[i] < TOL;
  printf("%s B=%d T=%-5d NH=%d KVH=%d HD=%-3d %-6s W=%-4d cap=%-3g  out %.2e  dq %.2e  dk %.2e  "
         "dv %.2e\n",
         ok ? "ok  " : "FAIL", c->B, c->T, c->NH, c->KVH, c->HD,
         c->docs ? (c->causal ? "c+docs" : "docs") : (c->causal ? "causal" : "full"), window,
         (double)softcap, e[0], e[1], e[2], e[3]);
  fflush(stdout);
  void *dev[] = {q_d, k_d, v_d, do_d, o_d, dq_d, dk_d, dv_d, saved_d, ws_d, doc_d};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i])
      CUDA_OK(cudaFree(dev[i]));
  void *hostp[] = {qb, kb, vb, dob, qf, kf, vf, dof, of, dqf, dkf, dvf, og, dqg, dkg, dvg, doc};
  for (size_t i = 0; i < sizeof hostp / sizeof hostp[0]; i++)
    free(hostp[i]);
  return ok;
}

int main(int argc, char **argv) {
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    printf("skipped: no GPU\n");
    return 77;
  }
  const char *dir = FSDPC_BINARY_DIR "/plugins";
  int Ts[16] = {1, 17, 128, 1000, 2048}, nT = 5, window_only = 0, gemma_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--plugins") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (strcmp(argv[i], "--t") == 0 && i + 1 < argc && nT < 16)
      Ts[nT++] = atoi(argv[++i]);
    else if (strcmp(argv[i], "--window") == 0)
      window_only = 1;
    else if (strcmp(argv[i], "--gemma") == 0)
      gemma_only = 1;
    else {
      fprintf(stderr, "usage: %s [--plugins DIR] [--t T]... [--window] [--gemma]\n", argv[0]);
      return 2;
    }
  }
  naive = load(dir, "naive");
  flash = load(dir, "flash");

  int fails = 0, runs = 0;
  const int kvh_of_ratio[3] = {8, 2, 1}; /* NH = 8: GQA ratios 1, 4, 8 */
  const int base = !window_only && !gemma_only;
  for (int ti = 0; ti < nT && base; ti++)
    for (int hd = 64; hd <= 128; hd *= 2)
      for (int r = 0; r < 3; r++) {
        int T = Ts[ti];
        config c = {T <= 128 ? 2 : 1, T, 8, kvh_of_ratio[r], hd, 1, 0};
        fails += !run_config(&c, 0, 0.0f);
        runs++;
      }
  /* Full attention and document masking, causal and not. */
  const config extra[] = {{2, 300, 8, 2, 64, 0, 0},
                          {1, 1000, 8, 8, 128, 0, 0},
                          {2, 777, 8, 1, 128, 1, 1},
                          {1, 1000, 8, 2, 64, 1, 1},
                          {2, 200, 4, 4, 128, 0, 1},
                          {1, 2048, 8, 1, 128, 1, 1},
                          /* head dims 80 and 96 (Hopper: the 128 kernels, zero-filled) */
                          {2, 300, 8, 2, 80, 1, 0},
                          {1, 1000, 8, 8, 96, 1, 0},
                          {2, 777, 8, 1, 96, 1, 1},
                          {1, 500, 4, 4, 80, 0, 0}};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0] && base; i++) {
    fails += !run_config(&extra[i], 0, 0.0f);
    runs++;
  }
  /* Sliding windows (Mistral, Qwen2's use_sliding_window): shorter than a
   * block, across blocks, with documents, of one token. */
  static const struct {
    config c;
    int window;
  } windows[] = {{{2, 300, 8, 2, 64, 1, 0}, 37},
                 {{1, 1000, 8, 8, 128, 1, 0}, 256},
                 {{1, 777, 8, 1, 128, 1, 1}, 300},
                 {{2, 777, 8, 2, 96, 1, 0}, 129},
                 {{1, 1000, 4, 4, 64, 1, 0}, 1}};
  for (size_t i = 0; i < sizeof windows / sizeof windows[0] && !gemma_only; i++) {
    fails += !run_config(&windows[i].c, windows[i].window, 0.0f);
    runs++;
  }
  /* Gemma (issue 36): head dim 256 (the mma.sync kernels, on a Hopper too),
   * and soft-capping at head dims 64, 128 and 256, with windows and
   * documents. */
  static const struct {
    config c;
    int window;
    float softcap;
  } gemma[] = {{{2, 1, 8, 2, 256, 1, 0}, 0, 0.0f},     {{2, 17, 8, 2, 256, 1, 0}, 0, 0.0f},
               {{2, 128, 8, 8, 256, 1, 0}, 0, 0.0f},   {{1, 1000, 8, 2, 256, 1, 0}, 0, 0.0f},
               {{1, 500, 8, 1, 256, 1, 1}, 0, 0.0f},   {{2, 300, 4, 4, 256, 0, 0}, 0, 0.0f},
               {{1, 600, 8, 4, 256, 1, 0}, 200, 0.0f}, {{2, 300, 8, 2, 64, 1, 0}, 0, 1.0f},
               {{1, 600, 8, 8, 128, 1, 0}, 0, 2.0f},   {{1, 500, 8, 1, 128, 1, 1}, 150, 1.0f},
               {{2, 200, 4, 4, 64, 0, 1}, 0, 1.0f},    {{2, 1, 8, 2, 256, 1, 0}, 0, 1.0f},
               {{2, 17, 8, 2, 256, 1, 0}, 0, 1.0f},    {{1, 1000, 8, 2, 256, 1, 0}, 0, 50.0f},
               {{1, 600, 8, 4, 256, 1, 0}, 200, 1.0f}, {{2, 300, 4, 2, 256, 0, 1}, 0, 2.0f}};
  for (size_t i = 0; i < sizeof gemma / sizeof gemma[0] && !window_only; i++) {
    fails += !run_config(&gemma[i].c, gemma[i].window, gemma[i].softcap);
    runs++;
  }
  printf("%d of %d configurations passed (tolerance %.0e)\n", runs - fails, runs, TOL);
  return fails ? 1 : 0;
}
