/* fsdp.mixed_precision.reduce_dtype and fsdp.cpu_offload:
 * - the config accepts both (they are implemented);
 * - on the CPU device the engine refuses reduce_dtype bf16 with one line
 *   naming the key, and under cpu_offload keeps the shards where they are
 *   (host memory already; the same shard bytes; only the schedule changes,
 *   which tests/fsdp/test_cpu_options.sh checks bit for bit);
 * - the planner: offloaded on CUDA the device holds no shard (the total peak
 *   falls by exactly the shard bytes) and host_bytes counts the shards, the
 *   bf16 staging copies and, with accumulation, the grad landing buffers;
 *   reduce_dtype bf16 halves the reduce-scatter / replica all-reduce bytes
 *   and adds its bf16 landing buffer; on the CPU both change nothing;
 *   offload.optimizer moves the state to pinned host memory and keeps two
 *   piece buffers on the device (with adamw8bit: two buffers of the
 *   largest unit's codes, scales and fp32 state). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "engine_plan.h"
#include "plan/plan.h"

static const char *tiny_yaml = "model:\n"
                               "  vocab_size: 259\n"
                               "  hidden_size: 64\n"
                               "  intermediate_size: 160\n"
                               "  num_hidden_layers: 3\n"
                               "  num_attention_heads: 4\n"
                               "  num_key_value_heads: 2\n"
                               "  max_position_embeddings: 64\n"
                               "data: {train: none.tok, seq_len: 32}\n"
                               "attention: {impl: naive}\n"
                               "train: {micro_batch_size: 2, device: %s}\n";

static fsdpc_config *load(const char *device, const char *const *ovr, int n) {
  char text[2048];
  snprintf(text, sizeof text, tiny_yaml, device);
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__config_from_string(text, "tiny.yaml", ovr, n, &c, &err);
  ck_assert_msg(st == FSDPC_OK, "%s", err.msg);
  return c;
}

START_TEST(config_accepts) {
  const char *ov[] = {"fsdp.cpu_offload=true", "fsdp.mixed_precision.reduce_dtype=bf16"};
  fsdpc_config *c = load("cuda", ov, 2);
  ck_assert(c->fsdp.cpu_offload);
  ck_assert_int_eq(c->fsdp.mixed_precision.reduce_dtype, FSDPC_DTYPE_BF16);
  fsdpc__config_destroy(c);
  c = load("cpu", ov, 2); /* the engine, not the config, knows the device's limits */
  fsdpc__config_destroy(c);
}
END_TEST

/* This rank's engine on the CPU from the tiny config with overrides, at a
 * pretend world (no communicator is needed to allocate shards). */
static fsdpc_status make_engine(const char *const *ov, int n, int world, test_engine *t,
                                fsdpc_engine_bytes *eb, fsdpc_err *err) {
  char text[2048];
  snprintf(text, sizeof text, tiny_yaml, "cpu");
  fsdpc_status st = test_engine_open(text, ov, n, world, 0, NULL, 0, t, err);
  if (st == FSDPC_OK)
    fsdpc__engine_bytes(t->eng, eb);
  return st;
}

/* The run's own plan refuses it: the CPU path reduces in fp32. */
START_TEST(cpu_refuses_bf16_reduce) {
  const char *ov[] = {"fsdp.mixed_precision.reduce_dtype=bf16"};
  fsdpc_err err = {0};
  test_engine t;
  fsdpc_engine_bytes eb;
  for (int world = 1; world <= 2; world++) {
    ck_assert_int_eq(make_engine(ov, 1, world, &t, &eb, &err), FSDPC_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "fsdp.mixed_precision.reduce_dtype=bf16 needs train.device: cuda; "
                              "the CPU path reduces gradients in fp32 (set it to fp32)");
  }
}
END_TEST

START_TEST(cpu_offload_is_noop_on_cpu) {
  const char *ov[] = {"fsdp.cpu_offload=true"};
  fsdpc_err err = {0};
  for (int world = 1; world <= 2; world++) {
    test_engine a, b;
    fsdpc_engine_bytes ea, eb;
    ck_assert_msg(make_engine(ov, 1, world, &a, &ea, &err) == FSDPC_OK, "%s", err.msg);
    ck_assert_msg(make_engine(NULL, 0, world, &b, &eb, &err) == FSDPC_OK, "%s", err.msg);
    ck_assert(!fsdpc__engine_offloaded(a.eng));
    ck_assert_uint_eq(ea.params, eb.params);
    ck_assert_uint_eq(ea.optim, eb.optim);
    /* the host view of a shard is the shard itself, as without the key */
    ck_assert_ptr_eq(fsdpc__engine_host_shard(a.eng, 0, FSDPC_SD_SLOT_PARAM, &err),
                     fsdpc__engine_unit(a.eng, 0)->master);
    test_engine_close(&a);
    test_engine_close(&b);
  }
}
END_TEST

/* The planner's host total on a GPU: the pinned bytes plus the larger of
 * (the fill's bytes + the fill-time runtime) and the steady runtime: the
 * fill's bytes are freed before the runtime reaches its steady size. */
static int64_t cuda_host_total(const fsdpc_plan_mem *m) {
  fsdpc_plan_device cd;
  fsdpc__plan_device_default(FSDPC_DEVICE_CUDA, &cd);
  int64_t fill = m->host_pageable + (int64_t)cd.host_fill_runtime_bytes;
  ck_assert_int_eq(m->host_runtime, (int64_t)cd.host_runtime_bytes);
  ck_assert_int_lt((int64_t)cd.host_fill_runtime_bytes, m->host_runtime);
  return m->host_bytes + (fill > m->host_runtime ? fill : m->host_runtime);
}

static void plan(fsdpc_config *c, int strategy, int offload, int world, fsdpc_plan_mem *m) {
  fsdpc_err err = {0};
  fsdpc_plan_ctx *pc = NULL;
  ck_assert_msg(fsdpc__plan_ctx_create(c, &pc, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_variant v = {strategy, -1, offload, -1};
  ck_assert_msg(fsdpc__plan_config(pc, &v, world, world, m, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc__plan_ctx_destroy(pc);
}

START_TEST(plan_offload_cuda) {
  for (int accum = 1; accum <= 2; accum++) {
    char gb[64];
    snprintf(gb, sizeof gb, "train.grad_accum_steps=%d", accum);
    /* cpu_offload's default keep_params (first) for both: the same
     * schedule, so the same gathers and full grads */
    const char *ov[] = {gb, "fsdp.keep_params=first"};
    fsdpc_config *c = load("cuda", ov, 2);
    const char *ov2[] = {"train.grad_accum_steps=2", "fsdp.keep_params=first"};
    fsdpc_config *c2 = load("cuda", ov2, 2);
    for (int world = 1; world <= 4; world *= 2)
      for (int s = 0; s < 4; s++) {
        fsdpc_plan_mem a, b, a2;
        plan(c, s, 0, world, &a);
        plan(c, s, 1, world, &b);
        /* the reduce-scatter landing buffer: offloaded runs have it, the
         * others only when accumulating (fsdpc__mp_rs_direct) */
        plan(c2, s, 0, world, &a2);
        int64_t landing = accum == 1 ? a2.arena_shards - a.arena_shards : 0;
        int64_t shards = (int64_t)(a.params + a.grads + a.optim);
        ck_assert_int_eq(a.host_bytes, 0);
        ck_assert_int_eq(b.peak[FSDPC_MEM_PARAMS], 0);
        ck_assert_int_eq(b.peak[FSDPC_MEM_OPTIM], 0);
        /* grads on the device are only this micro-batch's full buffers */
        ck_assert_int_le(b.peak[FSDPC_MEM_GRADS], a.peak[FSDPC_MEM_GRADS]);
        int64_t want_host = shards + (int64_t)a.params / 2 + (accum > 1 ? (int64_t)a.grads : 0);
        ck_assert_int_eq(b.host_bytes, want_host);
        if (a.S > 1 && s != FSDPC_NO_SHARD) {
          /* same gathers and full grads: the peak falls by the resident shards
           * (and the 8-byte device norm accumulator) */
          /* (landing is read off the arena: rounded up to 256 bytes) */
          int64_t d = a.total_peak + landing - b.total_peak - (shards + 8);
          ck_assert_msg(d >= 0 && d < 256, "off by %lld", (long long)d);
        } else {
          /* S == 1: offloaded, full grads live apart from the (host) shard */
          ck_assert_int_lt(b.total_peak, a.total_peak);
        }
      }
    fsdpc__config_destroy(c);
    fsdpc__config_destroy(c2);
  }
}
END_TEST

/* fsdp.offload.optimizer on CUDA: the state shards move to pinned host
 * memory; the device keeps two buffers of one piece (a piece is at most
 * buffer_mib, a multiple of 4096 elements); the rest is unchanged. On the
 * CPU the buffers come on top of the (host) state. */
START_TEST(plan_offload_optimizer) {
  const char *ov[] = {"fsdp.offload.buffer_mib=0.0625"}; /* 8192 elements of 2 fp32 slots */
  fsdpc_config *c = load("cuda", ov, 1), *h = load("cpu", ov, 1);
  for (int world = 1; world <= 4; world *= 2) {
    fsdpc_plan_mem a, b;
    fsdpc_err err = {0};
    fsdpc_plan_ctx *pc = NULL;
    ck_assert_msg(fsdpc__plan_ctx_create(c, &pc, &err) == FSDPC_OK, "%s", err.msg);
    fsdpc_plan_variant off = {FSDPC_FULL_SHARD, -1, 0, 0}, on = {FSDPC_FULL_SHARD, -1, 0, 1};
    ck_assert(fsdpc__plan_config(pc, &off, world, world, &a, &err) == FSDPC_OK);
    ck_assert(fsdpc__plan_config(pc, &on, world, world, &b, &err) == FSDPC_OK);
    fsdpc__plan_ctx_destroy(pc);
    int64_t bufs = 2 * 8192 * 4 * 2;
    ck_assert_int_eq(a.host_bytes, 0);
    ck_assert_int_eq(b.host_bytes, (int64_t)a.optim);
    ck_assert_int_eq(b.peak[FSDPC_MEM_OPTIM], bufs);
    ck_assert_int_eq(a.total_peak - b.total_peak, (int64_t)a.optim - bufs);
    ck_assert_int_eq(b.host_pageable, 0); /* a random init runs on the device */
    ck_assert_int_eq(b.host_total, cuda_host_total(&b));
    ck_assert(memcmp(&a.comm, &b.comm, sizeof a.comm) == 0);
    /* the same on the CPU device: the state stays, the buffers come on top */
    ck_assert(fsdpc__plan_ctx_create(h, &pc, &err) == FSDPC_OK);
    ck_assert(fsdpc__plan_config(pc, &off, world, world, &a, &err) == FSDPC_OK);
    ck_assert(fsdpc__plan_config(pc, &on, world, world, &b, &err) == FSDPC_OK);
    fsdpc__plan_ctx_destroy(pc);
    ck_assert_int_eq(b.host_bytes, 0);
    ck_assert_int_eq(b.total_peak - a.total_peak, bufs);
    ck_assert_int_eq(b.host_pageable, b.arena); /* the CPU device's arena is host memory */
  }
  fsdpc__config_destroy(c);
  fsdpc__config_destroy(h);
}
END_TEST

/* fsdp.offload.optimizer with adamw8bit on CUDA: the codes, scales and the
 * small tensors' fp32 state move to pinned host memory (host_bytes: exactly
 * the state bytes); the device keeps two buffers of the largest piece. With
 * the default 512 MiB a piece is a whole unit; at world 1 the largest is a
 * layer: fp32 m, v of k, v and the two norms (2 x 4224 floats = 33792
 * bytes), block scales of q, o, gate, up, down (2 x 152 floats = 1216,
 * rounded up to 1280) and their codes (2 x 38912 bytes): 112896 bytes.
 * With buffer_mib 0.0625 (65536 bytes) units go in pieces of at most that. */
START_TEST(plan_offload_optimizer_8bit) {
  const char *ov[] = {"optim.name=adamw8bit", "fsdp.offload.buffer_mib=0.0625"};
  fsdpc_config *cfg[3] = {load("cuda", ov, 1), load("cuda", ov, 2), load("cuda", ov + 1, 1)};
  for (int world = 1; world <= 4; world *= 2) {
    fsdpc_plan_mem a, b, big, e;
    fsdpc_err err = {0};
    fsdpc_plan_variant off = {FSDPC_FULL_SHARD, -1, 0, 0}, on = {FSDPC_FULL_SHARD, -1, 0, 1};
    fsdpc_plan_ctx *pc[3];
    for (int k = 0; k < 3; k++)
      ck_assert_msg(fsdpc__plan_ctx_create(cfg[k], &pc[k], &err) == FSDPC_OK, "%s", err.msg);
    ck_assert(fsdpc__plan_config(pc[1], &off, world, world, &a, &err) == FSDPC_OK);
    ck_assert(fsdpc__plan_config(pc[1], &on, world, world, &b, &err) == FSDPC_OK);
    ck_assert(fsdpc__plan_config(pc[0], &on, world, world, &big, &err) == FSDPC_OK);
    ck_assert(fsdpc__plan_config(pc[2], &on, world, world, &e, &err) == FSDPC_OK); /* fp32 */
    for (int k = 0; k < 3; k++)
      fsdpc__plan_ctx_destroy(pc[k]);
    int64_t bufs = b.peak[FSDPC_MEM_OPTIM], bigbufs = big.peak[FSDPC_MEM_OPTIM];
    ck_assert_int_eq(a.host_bytes, 0);
    ck_assert_int_eq(b.host_bytes, (int64_t)a.optim);
    ck_assert_int_eq(big.host_bytes, (int64_t)a.optim);
    ck_assert_int_lt(b.host_bytes, e.host_bytes / 2); /* k, v and norms stay fp32 here */
    ck_assert_int_eq(a.total_peak - b.total_peak, (int64_t)a.optim - bufs);
    ck_assert_int_eq(b.host_total, cuda_host_total(&b));
    if (world == 1)
      ck_assert_int_eq(bigbufs, 2 * 112896);
    else /* a shard of the largest unit, each part rounded up */
      ck_assert(bigbufs < 2 * 112896 && bigbufs >= 2 * 112896 / world);
    ck_assert(bufs <= 2 * 65536 && bufs >= 2 * 65536 / 2);
    ck_assert(memcmp(&a.comm, &b.comm, sizeof a.comm) == 0);
  }
  for (int k = 0; k < 3; k++)
    fsdpc__config_destroy(cfg[k]);
}
END_TEST

/* On CUDA a random init runs on the device: no pageable host staging shard
 * in the plan; a load (here checkpoint.resume) stages one unit's fp32
 * shard on the host. */
START_TEST(plan_host_staging_cuda) {
  const char *ov[] = {"checkpoint.resume=auto"};
  fsdpc_config *c = load("cuda", NULL, 0), *d = load("cuda", ov, 1);
  fsdpc_plan_mem a, b;
  plan(c, FSDPC_FULL_SHARD, 0, 1, &a);
  plan(d, FSDPC_FULL_SHARD, 0, 1, &b);
  ck_assert_int_eq(a.host_pageable, 0);
  ck_assert_int_gt(b.host_pageable, 0);
  ck_assert_int_eq(b.host_pageable % 4, 0);
  /* the staging shard is freed before the runtime reaches its steady size:
   * on this small model it stays under the difference of the two */
  ck_assert_int_eq(a.host_total, cuda_host_total(&a));
  ck_assert_int_eq(b.host_total, cuda_host_total(&b));
  ck_assert_int_eq(b.host_total, a.host_total);
  fsdpc__config_destroy(c);
  fsdpc__config_destroy(d);
}
END_TEST

START_TEST(plan_bf16_reduce_cuda) {
  const char *ov[] = {"fsdp.mixed_precision.reduce_dtype=bf16"};
  fsdpc_config *f = load("cuda", NULL, 0), *h = load("cuda", ov, 1);
  fsdpc_plan_mem a, b;
  plan(f, FSDPC_FULL_SHARD, 0, 4, &a);
  plan(h, FSDPC_FULL_SHARD, 0, 4, &b);
  ck_assert_uint_gt(a.comm.reduce_scatter, 0);
  ck_assert_uint_eq(b.comm.reduce_scatter * 2, a.comm.reduce_scatter);
  ck_assert_uint_eq(b.comm.all_gather, a.comm.all_gather);
  ck_assert_int_gt(b.peak[FSDPC_MEM_COMM], a.peak[FSDPC_MEM_COMM]);
  ck_assert_int_eq(b.peak[FSDPC_MEM_PARAMS], a.peak[FSDPC_MEM_PARAMS]);
  plan(f, FSDPC_NO_SHARD, 0, 2, &a);
  plan(h, FSDPC_NO_SHARD, 0, 2, &b);
  ck_assert_uint_gt(a.comm.all_reduce, 0);
  ck_assert_uint_eq(b.comm.all_reduce * 2, a.comm.all_reduce);
  fsdpc__config_destroy(f);
  fsdpc__config_destroy(h);
}
END_TEST

/* With one micro-batch a step (fp32 reduce, not offloaded) each
 * reduce-scatter lands in its grad shard: no landing buffer of the largest
 * grad shard among the shards (fsdpc__mp_rs_direct). Accumulating, the
 * buffer is there; at S = 1 there is none either way. */
START_TEST(plan_rs_direct) {
  const char *acc[] = {"train.grad_accum_steps=2"};
  for (int cuda = 0; cuda < 2; cuda++) {
    fsdpc_config *one = load(cuda ? "cuda" : "cpu", NULL, 0);
    fsdpc_config *two = load(cuda ? "cuda" : "cpu", acc, 1);
    for (int world = 1; world <= 4; world *= 2) {
      fsdpc_plan_mem a, b;
      plan(one, FSDPC_FULL_SHARD, 0, world, &a);
      plan(two, FSDPC_FULL_SHARD, 0, world, &b);
      int64_t landing = b.arena_shards - a.arena_shards;
      if (world == 1) {
        ck_assert_int_eq(landing, 0);
      } else {
        ck_assert_int_gt(landing, 0);
        ck_assert_int_le(landing, (int64_t)a.grads);
      }
    }
    fsdpc__config_destroy(one);
    fsdpc__config_destroy(two);
  }
}
END_TEST

START_TEST(plan_cpu_unchanged) {
  const char *ov[] = {"fsdp.mixed_precision.reduce_dtype=bf16"};
  fsdpc_config *f = load("cpu", NULL, 0), *h = load("cpu", ov, 1);
  for (int world = 1; world <= 4; world *= 2)
    for (int s = 0; s < 4; s++) {
      fsdpc_plan_mem a, b;
      plan(f, s, 0, world, &a);
      plan(h, s, 1, world, &b);
      ck_assert_int_eq(b.host_bytes, 0);
      ck_assert_int_eq(a.total_peak, b.total_peak);
      ck_assert(memcmp(a.peak, b.peak, sizeof a.peak) == 0);
      ck_assert(memcmp(&a.comm, &b.comm, sizeof a.comm) == 0);
    }
  fsdpc__config_destroy(f);
  fsdpc__config_destroy(h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fsdp_opts");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, config_accepts);
  tcase_add_test(tc, cpu_refuses_bf16_reduce);
  tcase_add_test(tc, cpu_offload_is_noop_on_cpu);
  tcase_add_test(tc, plan_offload_optimizer);
  tcase_add_test(tc, plan_offload_optimizer_8bit);
  tcase_add_test(tc, plan_host_staging_cuda);
  tcase_add_test(tc, plan_offload_cuda);
  tcase_add_test(tc, plan_bf16_reduce_cuda);
  tcase_add_test(tc, plan_cpu_unchanged);
  tcase_add_test(tc, plan_rs_direct);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
