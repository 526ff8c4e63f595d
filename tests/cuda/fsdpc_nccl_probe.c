/* fsdpc_nccl_probe: the nccl collectives plugin over real ranks (one GPU
 * each), through the fsdpc launcher and rendezvous store, without the
 * trainer. tests/cuda/test_nccl.sh drives it.
 *
 *   fsdpc_nccl_probe gpus                       prints the visible GPU count
 *   fsdpc_nccl_probe launch [--nproc-per-node N] -- CMD ARGS...
 *   fsdpc_nccl_probe ok | hang                  (as a rank)
 * ok:   every collective on checked data (fp32, bf16, f64; odd counts; in
 *       place; every reduce op), group calls over two streams, sub-
 *       communicators from split, one-line usage errors, barrier, poll_error.
 * hang warm|cold: rank 1 never joins an all_reduce; rank 0's watchdog must
 *       abort the communicator after its 3 s timeout, naming op, unit and
 *       seq. warm: after one collective both joined (the op waits on the
 *       device); cold: the first collective (NCCL connects to its peers
 *       inside the host call, which then blocks). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/env.h"
#include "dist/job.h"
#include "dist/launch.h"
#include "ops/cuda/cuda_ctx.h"
#include "util/log.h"

static const fsdpc_collectives_v1 *C;
static fsdpc_cuda_ctx *X;
static fsdpc_err E;
static int R, W;
static char last_error[1024];

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "[rank %d] probe FAILED: ", R);                                                \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    exit(1);                                                                                       \
  } while (0)
#define CALL(expr)                                                                                 \
  do {                                                                                             \
    if ((expr) != FSDPC_OK)                                                                        \
      FAIL("%s: %s", #expr, last_error);                                                           \
  } while (0)
#define CU(expr)                                                                                   \
  do {                                                                                             \
    if ((expr) != FSDPC_OK)                                                                        \
      FAIL("%s: %s", #expr, E.msg);                                                                \
  } while (0)

static void host_log(void *ctx, int32_t level, const char *msg) {
  if (level <= FSDPC_LOG_WARN)
    fprintf(stderr, "[rank %d] plugin: %s\n", R, msg);
}
static void host_set_error(void *ctx, int32_t status, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
}
static const fsdpc_host_api g_host = {.struct_size = sizeof(fsdpc_host_api),
                                      .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
                                      .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
                                      .host_version = "test",
                                      .log = host_log,
                                      .set_error = host_set_error};

static const fsdpc_collectives_v1 *load_nccl(void) {
  const char *path = FSDPC_BINARY_DIR "/plugins/libfsdpc-collectives-nccl.so";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    FAIL("cannot load %s: %s", path, dlerror());
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(h, FSDPC_PLUGIN_ENTRY_V1);
  const fsdpc_plugin_desc *d = NULL;
  if (!entry || entry(&g_host, &d) != FSDPC_OK || d->components[0]->kind != FSDPC_KIND_COLLECTIVES)
    FAIL("%s: bad plugin descriptor", path);
  const fsdpc_collectives_v1 *v = d->components[0]->vtable;
  if (v->memory != FSDPC_COMM_MEM_DEVICE)
    FAIL("nccl plugin does not say it works on device memory");
  return v;
}

static fsdpc_op_info info(const char *op, const char *unit, uint64_t seq) {
  return (fsdpc_op_info){.struct_size = sizeof(fsdpc_op_info), .op = op, .unit = unit, .seq = seq};
}

/* Device buffers (comm category) and synchronous copies. */
static void *dalloc(size_t bytes) {
  void *p = NULL;
  CU(fsdpc__cuda_alloc(X, FSDPC_MEM_COMM, bytes, NULL, &p, &E));
  return p;
}
static void dfree(void *p, size_t bytes) {
  CU(fsdpc__cuda_free(X, FSDPC_MEM_COMM, p, bytes, NULL, &E));
}
static void *S(void) {
  return fsdpc__cuda_compute_stream(X);
}
static void h2d(void *d, const void *h, size_t b) {
  CU(fsdpc__cuda_h2d(X, d, h, b, &E));
}
static void d2h(void *h, const void *d, size_t b) {
  CU(fsdpc__cuda_sync(X, &E));
  CU(fsdpc__cuda_d2h(X, h, d, b, &E));
}

static float val(int rank, int j, int i) {
  return (float)(rank * 1000 + j * 10 + i % 97) * 0.5f;
}
static uint16_t bf(float f) { /* exact for the small integers used here */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static float unbf(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void check_all_gather(fsdpc_comm *c, const int *m) {
  const int n = C->size(c), r = C->rank(c);
  const size_t count = 100003; /* odd */
  float *h = malloc(sizeof(float) * count * n);
  for (size_t i = 0; i < count; i++)
    h[i] = val(m[r], 0, (int)i);
  float *send = dalloc(sizeof(float) * count), *recv = dalloc(sizeof(float) * count * n);
  h2d(send, h, sizeof(float) * count);
  fsdpc_op_info oi = info("all_gather", "probe", 1);
  CALL(C->all_gather(c, send, recv, count, FSDPC_DTYPE_F32, S(), &oi));
  d2h(h, recv, sizeof(float) * count * n);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < count; i++)
      if (h[q * count + i] != val(m[q], 0, (int)i))
        FAIL("all_gather: recv[%d][%zu] = %g, want %g", q, i, h[q * count + i],
             val(m[q], 0, (int)i));
  /* bf16 in place: own slice already at recv + r*3. */
  uint16_t b[64];
  for (int i = 0; i < 3; i++)
    b[r * 3 + i] = (uint16_t)(0x3f80 + m[r] * 7 + i);
  uint16_t *db = dalloc(2 * 3 * n);
  h2d(db + r * 3, b + r * 3, 6);
  CALL(C->all_gather(c, db + r * 3, db, 3, FSDPC_DTYPE_BF16, S(), &oi));
  d2h(b, db, 2 * 3 * n);
  for (int q = 0; q < n; q++)
    for (int i = 0; i < 3; i++)
      if (b[q * 3 + i] != (uint16_t)(0x3f80 + m[q] * 7 + i))
        FAIL("bf16 in-place all_gather: slot %d.%d wrong", q, i);
  dfree(send, sizeof(float) * count), dfree(recv, sizeof(float) * count * n), dfree(db, 6 * n);
  free(h);
}

static float reduce_ref(const int *m, int n, int j, int i, int op) {
  float acc = val(m[0], j, i);
  for (int q = 1; q < n; q++) {
    float v = val(m[q], j, i);
    acc = op == FSDPC_REDUCE_MAX ? fmaxf(acc, v) : op == FSDPC_REDUCE_MIN ? fminf(acc, v) : acc + v;
  }
  return op == FSDPC_REDUCE_AVG ? acc / (float)n : acc;
}

static void check_reduce_scatter(fsdpc_comm *c, const int *m, int count) {
  const int n = C->size(c), r = C->rank(c);
  float *h = malloc(sizeof(float) * (size_t)n * count);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < count; i++)
      h[(size_t)j * count + i] = val(m[r], j, i);
  float *send = dalloc(sizeof(float) * (size_t)n * count), *recv = dalloc(sizeof(float) * count);
  h2d(send, h, sizeof(float) * (size_t)n * count);
  for (int op = FSDPC_REDUCE_SUM; op <= FSDPC_REDUCE_MIN; op++) {
    fsdpc_op_info oi = info("reduce_scatter", "probe", 2);
    CALL(C->reduce_scatter(c, send, recv, (uint64_t)count, FSDPC_DTYPE_F32, op, S(), &oi));
    d2h(h, recv, sizeof(float) * count);
    for (int i = 0; i < count; i++) {
      float want = reduce_ref(m, n, r, i, op);
      if (fabsf(h[i] - want) > 1e-5f * fabsf(want) + 1e-5f)
        FAIL("reduce_scatter op %d count %d: recv[%d] = %g, want %g", op, count, i, h[i], want);
    }
  }
  /* bf16: small integers are exact. */
  uint16_t *hb = malloc(2 * (size_t)n * count);
  for (int k = 0; k < n * count; k++)
    hb[k] = bf((float)(m[r] + 1));
  uint16_t *bs = dalloc(2 * (size_t)n * count), *br = dalloc(2 * (size_t)count);
  h2d(bs, hb, 2 * (size_t)n * count);
  fsdpc_op_info oi = info("reduce_scatter", "probe", 3);
  CALL(C->reduce_scatter(c, bs, br, (uint64_t)count, FSDPC_DTYPE_BF16, FSDPC_REDUCE_SUM, S(), &oi));
  d2h(hb, br, 2 * (size_t)count);
  float want = 0;
  for (int q = 0; q < n; q++)
    want += (float)(m[q] + 1);
  for (int i = 0; i < count; i++)
    if (unbf(hb[i]) != want)
      FAIL("bf16 reduce_scatter: %g, want %g", unbf(hb[i]), want);
  dfree(send, sizeof(float) * (size_t)n * count), dfree(recv, sizeof(float) * count);
  dfree(bs, 2 * (size_t)n * count), dfree(br, 2 * (size_t)count);
  free(h), free(hb);
}

static void check_all_reduce(fsdpc_comm *c, const int *m) {
  const int n = C->size(c), r = C->rank(c), count = 1000;
  float h[1000];
  float *d = dalloc(sizeof h);
  for (int op = FSDPC_REDUCE_SUM; op <= FSDPC_REDUCE_MIN; op++) {
    for (int i = 0; i < count; i++)
      h[i] = val(m[r], 1, i);
    h2d(d, h, sizeof h);
    fsdpc_op_info oi = info("all_reduce", NULL, 4);
    CALL(C->all_reduce(c, d, d, count, FSDPC_DTYPE_F32, op, S(), &oi));
    d2h(h, d, sizeof h);
    for (int i = 0; i < count; i++) {
      float want = reduce_ref(m, n, 1, i, op);
      if (fabsf(h[i] - want) > 1e-5f * fabsf(want) + 1e-5f)
        FAIL("all_reduce op %d: x[%d] = %g, want %g", op, i, h[i], want);
    }
  }
  /* f64: a sum only double can hold (1 + k*1e-12). */
  double x[3], want = 0;
  for (int i = 0; i < 3; i++)
    x[i] = 1.0 + (m[r] + 1) * 1e-12 * (i + 1);
  for (int q = 0; q < n; q++)
    want += 1.0 + (m[q] + 1) * 1e-12 * 3;
  double *dx = dalloc(sizeof x);
  h2d(dx, x, sizeof x);
  fsdpc_op_info oi = info("all_reduce", "loss", 5);
  CALL(C->all_reduce(c, dx, dx, 3, FSDPC_DTYPE_F64, FSDPC_REDUCE_SUM, S(), &oi));
  d2h(x, dx, sizeof x);
  if (fabs(x[2] - want) > 1e-15 * want)
    FAIL("f64 all_reduce: %.17g, want %.17g", x[2], want);
  /* bf16 */
  uint16_t b[3] = {0x3f80, 0x3f80, 0x3f80}; /* 1.0 */
  uint16_t *db = dalloc(sizeof b);
  h2d(db, b, sizeof b);
  CALL(C->all_reduce(c, db, db, 3, FSDPC_DTYPE_BF16, FSDPC_REDUCE_SUM, S(), &oi));
  d2h(b, db, sizeof b);
  if (unbf(b[2]) != (float)n)
    FAIL("bf16 all_reduce: %g, want %d", unbf(b[2]), n);
  dfree(d, sizeof h), dfree(dx, sizeof x), dfree(db, sizeof b);
}

static void check_broadcast(fsdpc_comm *c, const int *m) {
  const int n = C->size(c), r = C->rank(c), root = n - 1;
  int64_t buf[4];
  for (int i = 0; i < 4; i++)
    buf[i] = r == root ? (int64_t)m[r] * 1000000007LL + i : -1;
  int64_t *d = dalloc(sizeof buf);
  h2d(d, buf, sizeof buf);
  fsdpc_op_info oi = info("broadcast", NULL, 6);
  CALL(C->broadcast(c, d, 4, FSDPC_DTYPE_I64, root, S(), &oi));
  d2h(buf, d, sizeof buf);
  for (int i = 0; i < 4; i++)
    if (buf[i] != (int64_t)m[root] * 1000000007LL + i)
      FAIL("broadcast: buf[%d] wrong", i);
  dfree(d, sizeof buf);
}

/* Two collectives on two streams batched into one group. */
static void check_group(fsdpc_comm *c, const int *m) {
  const int n = C->size(c), r = C->rank(c);
  float a[8], g[8 * 16];
  for (int i = 0; i < 8; i++)
    a[i] = val(m[r], 2, i);
  float *da = dalloc(sizeof a), *ds = dalloc(sizeof a), *dg = dalloc(sizeof(float) * 8 * n);
  h2d(da, a, sizeof a);
  h2d(ds, a, sizeof a);
  fsdpc_op_info o1 = info("all_gather", "group", 7), o2 = info("all_reduce", "group", 8);
  CALL(C->group_start(c));
  CALL(C->all_gather(c, da, dg, 8, FSDPC_DTYPE_F32, S(), &o1));
  CALL(C->all_reduce(c, ds, ds, 8, FSDPC_DTYPE_F32, FSDPC_REDUCE_SUM, fsdpc__cuda_comm_stream(X),
                     &o2));
  CALL(C->group_end(c));
  d2h(g, dg, sizeof(float) * 8 * n);
  d2h(a, ds, sizeof a);
  for (int i = 0; i < 8; i++) {
    if (fabsf(a[i] - reduce_ref(m, n, 2, i, FSDPC_REDUCE_SUM)) > 1e-3f)
      FAIL("grouped all_reduce wrong at %d", i);
    for (int q = 0; q < n; q++)
      if (g[q * 8 + i] != val(m[q], 2, i))
        FAIL("grouped all_gather wrong at %d.%d", q, i);
  }
  dfree(da, sizeof a), dfree(ds, sizeof a), dfree(dg, sizeof(float) * 8 * n);
}

static void check_usage_errors(fsdpc_comm *c) {
  int32_t *d = dalloc(8);
  fsdpc_op_info oi = info("all_reduce", "layers.0", 9);
  if (C->all_reduce(c, d, d, 2, FSDPC_DTYPE_I32, FSDPC_REDUCE_SUM, S(), &oi) != FSDPC_UNSUPPORTED)
    FAIL("int32 all_reduce should be unsupported");
  if (!strstr(last_error, "nccl: all_reduce (unit layers.0, seq 9): reductions take fp32"))
    FAIL("unexpected message: %s", last_error);
  if (C->broadcast(c, d, 2, FSDPC_DTYPE_I32, 99, S(), &oi) != FSDPC_INVALID_USAGE ||
      !strstr(last_error, "root 99 is outside"))
    FAIL("bad root: %s", last_error);
  CALL(C->barrier(c, &oi));
  CALL(C->poll_error(c));
  dfree(d, 8);
}

static void check_comm(fsdpc_comm *c, const int *m) {
  check_all_gather(c, m);
  check_reduce_scatter(c, m, 7);
  check_reduce_scatter(c, m, 100003);
  check_all_reduce(c, m);
  check_broadcast(c, m);
  check_group(c, m);
  check_usage_errors(c);
}

static void check_split(fsdpc_comm *world, int color, int key, const int *members, int n) {
  fsdpc_comm *sub = NULL;
  CALL(C->split(world, color, key, &sub));
  if (!sub)
    FAIL("split returned no communicator");
  int me = -1;
  for (int i = 0; i < n; i++)
    if (members[i] == R)
      me = i;
  if (C->size(sub) != n || C->rank(sub) != me)
    FAIL("split: size %d rank %d, want %d and %d", C->size(sub), C->rank(sub), n, me);
  check_comm(sub, members);
  C->destroy(sub);
}

static int run_rank(const char *mode, const char *variant) {
  fsdpc_dist_env env;
  if (fsdpc__dist_env_detect(&env, &E)) {
    fprintf(stderr, "probe: %s\n", E.msg);
    return 2;
  }
  R = env.rank;
  W = env.world_size;
  fsdpc__log_setup(FSDPC_LOG_INFO, R);
  C = load_nccl();
  fsdpc_cuda_ctx_opts o;
  fsdpc__cuda_ctx_opts_default(&o);
  o.device_index = env.local_rank;
  CU(fsdpc__cuda_ctx_create(&o, &X, &E));
  fsdpc_dist_job *job = NULL;
  fsdpc_dist_job_opts jo = {.timeout_ms = 30000};
  if (fsdpc__dist_job_start(&env, &jo, &job, &E))
    FAIL("job start: %s", E.msg);
  static fsdpc_store_v1 store; /* outlives the comms */
  fsdpc__store_as_v1(job->store, &store);
  const int hang = strcmp(mode, "hang") == 0;
  fsdpc_comm_init in = {.struct_size = sizeof in,
                        .store = &store,
                        .store_prefix = "fsdpc/0/",
                        .rank = R,
                        .world_size = W,
                        .device_index = env.local_rank,
                        .timeout_ms = hang ? 3000 : 60000,
                        .host = &g_host};
  fsdpc_comm *world = NULL;
  CALL(C->init(&in, &world));
  int members[64];
  for (int i = 0; i < W && i < 64; i++)
    members[i] = i;
  if (!hang) {
    check_comm(world, members);
    if (W == 2) {
      int rev[2] = {1, 0}, self[1] = {R};
      check_split(world, 0, -R, rev, 2); /* key = -rank reverses the order */
      check_split(world, R, 0, self, 1); /* singletons */
      fsdpc_comm *none = NULL;           /* a negative color joins nothing */
      CALL(C->split(world, R == 0 ? -1 : 5, 0, &none));
      if ((R == 0) != (none == NULL))
        FAIL("split with color -1 on rank 0 only");
      if (none)
        C->destroy(none);
    }
    fsdpc_cuda_mem_stats ms;
    CU(fsdpc__cuda_mem_stats(X, &ms, &E));
    fprintf(stderr, "[rank %d] probe ok: world %d on GPU %d (comm peak %lld KiB allocated)\n", R, W,
            env.local_rank, (long long)(ms.allocated_peak[FSDPC_MEM_COMM] >> 10));
    C->destroy(world);
  } else if (strcmp(variant, "warm") == 0 && R == 1) {
    float *d = dalloc(sizeof(float) * 1024);
    fsdpc_op_info oi = info("all_reduce", "warmup", 1);
    CALL(C->all_reduce(world, d, d, 1024, FSDPC_DTYPE_F32, FSDPC_REDUCE_SUM, S(), &oi));
    CU(fsdpc__cuda_sync(X, &E));
    dfree(d, sizeof(float) * 1024);
  }
  if (hang && R == 1) {
    sleep(6); /* never joins the all_reduce below */
    C->abort(world, "test: rank 1 leaves");
    C->destroy(world);
    fprintf(stderr, "[rank 1] left without joining\n");
  } else if (hang) {
    float *d = dalloc(sizeof(float) * 1024);
    if (strcmp(variant, "warm") == 0) {
      fsdpc_op_info w = info("all_reduce", "warmup", 1);
      CALL(C->all_reduce(world, d, d, 1024, FSDPC_DTYPE_F32, FSDPC_REDUCE_SUM, S(), &w));
      CU(fsdpc__cuda_sync(X, &E));
    }
    fsdpc_op_info oi = info("all_reduce", "layers.3", 57);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* cold: the call itself may come back with the watchdog's error */
    int32_t st = C->all_reduce(world, d, d, 1024, FSDPC_DTYPE_F32, FSDPC_REDUCE_SUM, S(), &oi);
    if (st != FSDPC_OK)
      fprintf(stderr, "[rank 0] the all_reduce call itself returned %d\n", (int)st);
    for (int i = 0; i < 200 && st == FSDPC_OK; i++) {
      usleep(100000);
      st = C->poll_error(world);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (st != FSDPC_TIMEOUT)
      FAIL("poll_error gave %d, want TIMEOUT (%s)", (int)st, last_error);
    if (!strstr(last_error, "all_reduce (unit layers.3, seq 57)") || !strstr(last_error, "aborted"))
      FAIL("watchdog message lacks op/unit/seq or abort: %s", last_error);
    if (dt < 2.9 || dt > 10.0)
      FAIL("watchdog fired after %.1f s, want about 3 s", dt);
    if (C->all_gather(world, d, d, 1, FSDPC_DTYPE_F32, S(), &oi) == FSDPC_OK ||
        !strstr(last_error, "unusable"))
      FAIL("an aborted communicator accepted more work: %s", last_error);
    CU(fsdpc__cuda_sync(X, &E)); /* the aborted kernel must have ended */
    fprintf(stderr, "[rank 0] watchdog ok (%s) after %.1f s: %s\n", variant, dt, last_error);
    C->destroy(world);
    dfree(d, sizeof(float) * 1024);
  }
  fsdpc__dist_job_stop(job);
  fsdpc__cuda_ctx_destroy(X);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "gpus") == 0) {
    printf("%d\n", fsdpc__cuda_device_count());
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "launch") == 0) {
    fsdpc_launch_opts o;
    fsdpc__launch_opts_default(&o);
    o.master_port = 0;
    int n = argc - 1;
    char **args = argv + 1;
    if (fsdpc__launch_parse_args(&n, args, &o, &E)) {
      fprintf(stderr, "launch: %s\n", E.msg);
      return 2;
    }
    int k = 1;
    while (k < n && strcmp(args[k], "--") != 0)
      k++;
    if (k + 1 >= n) {
      fprintf(stderr, "launch: usage: launch [flags] -- CMD ARGS...\n");
      return 2;
    }
    o.argv = args + k + 1;
    int code = 1;
    if (fsdpc__launch(&o, &code, &E))
      fprintf(stderr, "launcher: error: %s\n", E.msg);
    return code;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: fsdpc_nccl_probe gpus | launch ... | ok | hang\n");
    return 2;
  }
  return run_rank(argv[1], argc > 2 ? argv[2] : "warm");
}
