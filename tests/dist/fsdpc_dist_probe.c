/* fsdpc_dist_probe: runs the launcher, the store and the gloo plugin
 * without the trainer, for the multi-process tests.
 *
 *   fsdpc_dist_probe launch [--nproc-per-node N ...] -- CMD ARGS...
 *   fsdpc_dist_probe free-port
 *   fsdpc_dist_probe [--timeout-s S] MODE [ARG] [MARKER...]   (as a rank)
 * MODE: ok            every collective on checked data, plus splits
 *       crash-rank R  rank R kills itself with SIGKILL after the first op
 *       hang-rank R   rank R never reaches the all_gather the others call
 *       loop DIR      write DIR/rank<R>.pid, then all_reduce every 50 ms
 * Extra arguments (MARKER) are ignored: tests use them to find processes. */
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/env.h"
#include "dist/job.h"
#include "dist/launch.h"
#include "probe_host.h"
#include "util/log.h"

static const fsdpc_collectives_v1 *C;
static int R, W; /* world rank and size */

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "[rank %d] probe FAILED: ", R);                                                \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    exit(1);                                                                                       \
  } while (0)

/* Checks a plugin call; on failure prints the plugin's one-line error. */
#define CALL(expr)                                                                                 \
  do {                                                                                             \
    int32_t st_ = (expr);                                                                          \
    if (st_ != FSDPC_OK) {                                                                         \
      fprintf(stderr, "[rank %d] error: %s\n", R, g_probe_last_error);                             \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static fsdpc_op_info info(const char *op, const char *unit, uint64_t seq) {
  return (fsdpc_op_info){.struct_size = sizeof(fsdpc_op_info), .op = op, .unit = unit, .seq = seq};
}

static float val(int rank, int j, int i) { return (float)(rank * 1000 + j * 10 + i) * 0.5f; }

static void check_all_gather(fsdpc_comm *c, const int *members) {
  int n = C->size(c), r = C->rank(c);
  enum { COUNT = 5 };
  float send[COUNT], *recv = calloc((size_t)n * COUNT, sizeof *recv);
  for (int i = 0; i < COUNT; i++)
    send[i] = val(members[r], 0, i);
  fsdpc_op_info oi = info("all_gather", "probe", 1);
  CALL(C->all_gather(c, send, recv, COUNT, FSDPC_DTYPE_F32, NULL, &oi));
  for (int q = 0; q < n; q++)
    for (int i = 0; i < COUNT; i++)
      if (recv[q * COUNT + i] != val(members[q], 0, i))
        FAIL("all_gather: recv[%d][%d] = %g, want %g", q, i, recv[q * COUNT + i],
             val(members[q], 0, i));
  /* In place: own slice already at recv + r*COUNT. bf16 as raw 2-byte data. */
  uint16_t *b = calloc((size_t)n * 3, 2);
  for (int i = 0; i < 3; i++)
    b[r * 3 + i] = (uint16_t)(0x3f80 + members[r] * 7 + i);
  CALL(C->all_gather(c, b + r * 3, b, 3, FSDPC_DTYPE_BF16, NULL, &oi));
  for (int q = 0; q < n; q++)
    for (int i = 0; i < 3; i++)
      if (b[q * 3 + i] != (uint16_t)(0x3f80 + members[q] * 7 + i))
        FAIL("bf16 in-place all_gather: slot %d.%d wrong", q, i);
  free(b);
  free(recv);
}

static float reduce_ref(const int *members, int n, int j, int i, int op) {
  float acc = val(members[0], j, i);
  for (int q = 1; q < n; q++) {
    float v = val(members[q], j, i);
    if (op == FSDPC_REDUCE_MAX)
      acc = v > acc ? v : acc;
    else if (op == FSDPC_REDUCE_MIN)
      acc = v < acc ? v : acc;
    else
      acc += v;
  }
  return op == FSDPC_REDUCE_AVG ? acc / (float)n : acc;
}

static void check_reduce_scatter(fsdpc_comm *c, const int *members, int count) {
  int n = C->size(c), r = C->rank(c);
  float *send = malloc(sizeof(float) * (size_t)n * (size_t)count);
  float *recv = malloc(sizeof(float) * (size_t)count);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < count; i++)
      send[j * count + i] = val(members[r], j, i % 97);
  for (int op = FSDPC_REDUCE_SUM; op <= FSDPC_REDUCE_MIN; op++) {
    fsdpc_op_info oi = info("reduce_scatter", "probe", 2);
    CALL(C->reduce_scatter(c, send, recv, (uint64_t)count, FSDPC_DTYPE_F32, op, NULL, &oi));
    for (int i = 0; i < count; i++) {
      float want = reduce_ref(members, n, r, i % 97, op);
      if (fabsf(recv[i] - want) > 1e-3f * fabsf(want) + 1e-3f)
        FAIL("reduce_scatter op %d count %d: recv[%d] = %g, want %g", op, count, i, recv[i], want);
    }
  }
  /* bf16 through fp32 staging: small integers are exact in bf16. */
  uint16_t *bs = malloc(2 * (size_t)n * (size_t)count), *br = malloc(2 * (size_t)count);
  for (int k = 0; k < n * count; k++) {
    float f = (float)(members[r] + 1);
    uint32_t u;
    memcpy(&u, &f, 4);
    bs[k] = (uint16_t)(u >> 16);
  }
  fsdpc_op_info oi = info("reduce_scatter", "probe", 3);
  CALL(
      C->reduce_scatter(c, bs, br, (uint64_t)count, FSDPC_DTYPE_BF16, FSDPC_REDUCE_SUM, NULL, &oi));
  float want = 0;
  for (int q = 0; q < n; q++)
    want += (float)(members[q] + 1);
  for (int i = 0; i < count; i++) {
    uint32_t u = (uint32_t)br[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    if (f != want)
      FAIL("bf16 reduce_scatter: %g, want %g", f, want);
  }
  free(bs);
  free(br);
  free(send);
  free(recv);
}

static void check_all_reduce(fsdpc_comm *c, const int *members, int count) {
  int n = C->size(c), r = C->rank(c);
  float *x = malloc(sizeof(float) * (size_t)count);
  for (int op = FSDPC_REDUCE_SUM; op <= FSDPC_REDUCE_MIN; op++) {
    for (int i = 0; i < count; i++)
      x[i] = val(members[r], 1, i % 89);
    fsdpc_op_info oi = info("all_reduce", NULL, 4);
    CALL(C->all_reduce(c, x, x, (uint64_t)count, FSDPC_DTYPE_F32, op, NULL, &oi));
    for (int i = 0; i < count; i++) {
      float want = reduce_ref(members, n, 1, i % 89, op);
      if (fabsf(x[i] - want) > 1e-3f * fabsf(want) + 1e-3f)
        FAIL("all_reduce op %d: x[%d] = %g, want %g", op, i, x[i], want);
    }
  }
  free(x);
  /* bf16 through fp32 staging. */
  uint16_t b[3];
  for (int i = 0; i < 3; i++)
    b[i] = 0x3f80; /* 1.0 */
  fsdpc_op_info oi = info("all_reduce", NULL, 6);
  CALL(C->all_reduce(c, b, b, 3, FSDPC_DTYPE_BF16, FSDPC_REDUCE_SUM, NULL, &oi));
  uint32_t u = (uint32_t)b[2] << 16;
  float f;
  memcpy(&f, &u, 4);
  if (f != (float)n)
    FAIL("bf16 all_reduce: %g, want %d", f, n);
}

/* Usage errors are one line, and leave the communicator usable. */
static void check_usage_errors(fsdpc_comm *c) {
  int32_t i32[2] = {1, 2};
  fsdpc_op_info oi = info("all_reduce", "layers.0", 9);
  if (C->all_reduce(c, i32, i32, 2, FSDPC_DTYPE_I32, FSDPC_REDUCE_SUM, NULL, &oi) !=
      FSDPC_UNSUPPORTED)
    FAIL("int32 all_reduce should be unsupported");
  if (!strstr(g_probe_last_error, "gloo: all_reduce (unit layers.0, seq 9): reductions take fp32"))
    FAIL("unexpected message: %s", g_probe_last_error);
  if (C->broadcast(c, i32, 2, FSDPC_DTYPE_I32, 99, NULL, &oi) != FSDPC_INVALID_USAGE ||
      !strstr(g_probe_last_error, "root 99 is outside"))
    FAIL("bad root: %s", g_probe_last_error);
  CALL(C->barrier(c, NULL));
}

static void check_broadcast(fsdpc_comm *c, const int *members) {
  int n = C->size(c), r = C->rank(c), root = n - 1;
  int64_t buf[4];
  for (int i = 0; i < 4; i++)
    buf[i] = r == root ? (int64_t)members[r] * 1000000007LL + i : -1;
  fsdpc_op_info oi = info("broadcast", NULL, 5);
  CALL(C->broadcast(c, buf, 4, FSDPC_DTYPE_I64, root, NULL, &oi));
  for (int i = 0; i < 4; i++)
    if (buf[i] != (int64_t)members[root] * 1000000007LL + i)
      FAIL("broadcast: buf[%d] wrong", i);
  CALL(C->barrier(c, &oi));
}

static void check_comm(fsdpc_comm *c, const int *members) {
  check_all_gather(c, members);
  check_reduce_scatter(c, members, 7);
  check_reduce_scatter(c, members, 100003);
  check_all_reduce(c, members, 1000);
  check_broadcast(c, members);
  check_usage_errors(c);
}

/* Splits world by color/key and checks the sub-communicator. */
static void check_split(fsdpc_comm *world, int color, int key, const int *expect_members,
                        int expect_n) {
  fsdpc_comm *sub = NULL;
  CALL(C->split(world, color, key, &sub));
  if (!sub)
    FAIL("split returned no communicator");
  if (C->size(sub) != expect_n)
    FAIL("split size %d, want %d", C->size(sub), expect_n);
  int me = -1;
  for (int i = 0; i < expect_n; i++)
    if (expect_members[i] == R)
      me = i;
  if (C->rank(sub) != me)
    FAIL("split rank %d, want %d", C->rank(sub), me);
  check_comm(sub, expect_members);
  C->destroy(sub);
}

static fsdpc_comm *init_world(fsdpc_dist_job *job, int64_t timeout_ms) {
  fsdpc_store_v1 sv;
  fsdpc__store_as_v1(job->store, &sv);
  static fsdpc_store_v1 s; /* must outlive the comms */
  s = sv;
  fsdpc_comm_init in = {.struct_size = sizeof in,
                        .store = &s,
                        .store_prefix = "fsdpc/0/",
                        .rank = R,
                        .world_size = W,
                        .device_index = -1,
                        .timeout_ms = timeout_ms,
                        .host = &g_probe_host};
  fsdpc_comm *c = NULL;
  CALL(C->init(&in, &c));
  return c;
}

static int run_rank(int argc, char **argv, int64_t timeout_ms) {
  const char *mode = argv[0];
  fsdpc_dist_env env;
  fsdpc_err err;
  if (fsdpc__dist_env_detect(&env, &err)) {
    fprintf(stderr, "probe: %s\n", err.msg);
    return 2;
  }
  R = env.rank;
  W = env.world_size;
  g_probe_rank = R;
  fsdpc__log_setup(FSDPC_LOG_INFO, R);
  if (!(C = probe_load_gloo()))
    return 2;
  fsdpc_dist_job *job = NULL;
  fsdpc_dist_job_opts jo = {.timeout_ms = 20000};
  if (fsdpc__dist_job_start(&env, &jo, &job, &err)) {
    fprintf(stderr, "[rank %d] error: %s\n", R, err.msg);
    return 1;
  }
  fsdpc_comm *world = init_world(job, timeout_ms);
  int members[1024];
  for (int i = 0; i < W; i++)
    members[i] = i;

  if (strcmp(mode, "ok") == 0) {
    check_comm(world, members);
    if (W == 4) {
      int even[] = {0, 2}, odd[] = {3, 1}; /* key = -rank reverses the odd group */
      check_split(world, R % 2, R % 2 ? -R : R, R % 2 ? odd : even, 2);
      int three[] = {0, 1, 2}, one[] = {3};
      check_split(world, R < 3 ? 0 : 1, 0, R < 3 ? three : one, R < 3 ? 3 : 1);
      fsdpc_comm *none = NULL; /* a negative color joins nothing */
      CALL(C->split(world, R == 0 ? -1 : 5, 0, &none));
      if ((R == 0) != (none == NULL))
        FAIL("split with color -1 on rank 0 only");
      if (none)
        C->destroy(none);
    }
    fprintf(stderr, "[rank %d] probe ok: world %d (%s, node %d/%d, local %d/%d)\n", R, W,
            env.source, env.node_rank, env.nnodes, env.local_rank, env.local_world_size);
  } else if (strcmp(mode, "crash-rank") == 0 || strcmp(mode, "hang-rank") == 0) {
    int victim = argc > 1 ? atoi(argv[1]) : 1;
    check_all_gather(world, members);
    if (R == victim) {
      if (mode[0] == 'c')
        raise(SIGKILL);
      sleep(60); /* never reaches the all_gather below */
      return 0;
    }
    float x[4] = {0}, *y = calloc((size_t)W * 4, sizeof *y);
    for (uint64_t step = 57; step < 57 + 200; step++) {
      if (fsdpc__dist_check_abort(job->store, &err)) {
        fprintf(stderr, "[rank %d] error: %s\n", R, err.msg);
        return 1;
      }
      fsdpc_op_info oi = info("all_gather", "layers.3", step);
      CALL(C->all_gather(world, x, y, 4, FSDPC_DTYPE_F32, NULL, &oi));
      usleep(20000);
    }
    FAIL("%s: the collectives kept succeeding", mode);
  } else if (strcmp(mode, "loop") == 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.pid", argc > 1 ? argv[1] : ".", R);
    FILE *f = fopen(path, "w");
    if (!f)
      FAIL("cannot write %s", path);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    for (int i = 0; i < 1200; i++) {
      float x = 1;
      fsdpc_op_info oi = info("all_reduce", "loop", (uint64_t)i);
      CALL(C->all_reduce(world, &x, &x, 1, FSDPC_DTYPE_F32, FSDPC_REDUCE_SUM, NULL, &oi));
      usleep(50000);
    }
  } else {
    fprintf(stderr, "probe: unknown mode '%s'\n", mode);
    return 2;
  }
  C->destroy(world);
  fsdpc__dist_job_stop(job);
  return 0;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
      getsockname(fd, (struct sockaddr *)&a, &l))
    return 1;
  printf("%d\n", ntohs(a.sin_port));
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "free-port") == 0)
    return free_port();
  if (argc >= 2 && strcmp(argv[1], "launch") == 0) {
    fsdpc_launch_opts o;
    fsdpc_err err;
    fsdpc__launch_opts_default(&o);
    o.master_port = 0;
    int n = argc - 1;
    char **args = argv + 1; /* args[0] = "launch" plays argv[0] */
    if (fsdpc__launch_parse_args(&n, args, &o, &err)) {
      fprintf(stderr, "launch: %s\n", err.msg);
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
    if (fsdpc__launch(&o, &code, &err))
      fprintf(stderr, "launcher: error: %s\n", err.msg);
    return code;
  }
  int64_t timeout_ms = 30000;
  int i = 1;
  if (argc >= 3 && strcmp(argv[1], "--timeout-s") == 0) {
    timeout_ms = (int64_t)(atof(argv[2]) * 1000);
    i = 3;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: fsdpc_dist_probe [--timeout-s S] MODE [ARG] [MARKER]\n");
    return 2;
  }
  return run_rank(argc - i, argv + i, timeout_ms);
}
