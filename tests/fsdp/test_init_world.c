/* Filling the master shards, at pretend world sizes 1, 2 and 4 (every rank
 * of a shard group in turn, no communicator needed):
 * - the random init makes the same weights at every world size, equal to
 *   fsdpc__model_init_range (the reference) element for element;
 * - an HF folder (BF16, and F32) loads to the same weights at every world
 *   size, equal to the file's values, with staging chunks much smaller than
 *   a unit (several chunks and both pinned buffers in use on a device).
 * Built twice: on the CPU, and (FSDPC_INIT_CUDA) with the shards on the GPU,
 * which checks the CUDA init and the device load pipeline against the same
 * host reference; that variant prints "skipped: no GPU" and exits 77 where
 * there is none. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "engine_plan.h"
#include "fsdp/engine.h"
#include "io/dtype.h"
#include "io/safetensors.h"
#ifdef FSDPC_INIT_CUDA
#include "ops/cuda/cuda_ctx.h"
#endif

static const char *tiny_yaml = "model:\n"
                               "  vocab_size: 259\n"
                               "  hidden_size: 64\n"
                               "  intermediate_size: 160\n"
                               "  num_hidden_layers: 2\n"
                               "  num_attention_heads: 4\n"
                               "  num_key_value_heads: 2\n"
                               "  max_position_embeddings: 64\n"
                               "data: {train: none.tok, seq_len: 32}\n"
                               "attention: {impl: naive}\n"
                               "train: {micro_batch_size: 2}\n";

static const fsdpc_ops *g_ops;
#ifdef FSDPC_INIT_CUDA
static fsdpc_cuda_ctx *g_cuda;
static fsdpc_ops g_cuda_ops;
#endif

typedef struct fixture {
  test_engine base; /* the config and its run plan at world 1: the parameters */
  const fsdpc_param_info *params;
  int n_params;
} fixture;

/* The run's device: the CPU, or CUDA in the CUDA variant. */
static const char *device_override(void) {
  return g_ops->device == FSDPC_DEVICE_CPU ? "train.device=cpu" : "train.device=cuda";
}

static void fixture_open(fixture *f) {
  fsdpc_err err = {0};
  memset(f, 0, sizeof *f);
  const char *ov[] = {device_override()};
  ck_assert_msg(test_engine_open(tiny_yaml, ov, 1, 1, 0, g_ops, 1, &f->base, &err) == FSDPC_OK,
                "%s", err.msg);
  f->params = f->base.plan->params;
  f->n_params = f->base.plan->n_params;
}

static void fixture_close(fixture *f) {
  test_engine_close(&f->base);
}

/* Rank r of a FULL_SHARD group of `world` ranks, from the same YAML (with
 * LoRA on the seven projections when lora). */
static test_engine make_engine_opt(int world, int r, int lora) {
  fsdpc_err err = {0};
  const char *ov[] = {device_override(), "train.threads=2", "peft.method=lora", "peft.r=4",
                      "peft.alpha=8", "peft.target_modules=[all-linear]"};
  test_engine t;
  ck_assert_msg(test_engine_open(tiny_yaml, ov, lora ? 6 : 2, world, r, g_ops, 0, &t, &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  return t;
}

static test_engine make_engine(int world, int r) {
  return make_engine_opt(world, r, 0);
}

/* Copies this rank's master shards into the full per-parameter arrays
 * (full[p]: numel floats), and checks the padding is zero. */
static void gather_masters(fsdpc_engine *e, float **full) {
  fsdpc_err err = {0};
  for (int u = 0; u < fsdpc__engine_n_units(e); u++) {
    const fsdpc_unit *un = fsdpc__engine_unit(e, u);
    float *m = malloc(un->shard_numel * sizeof(float) + 4);
    ck_assert(m);
    /* a frozen unit (LoRA's base) on a device holds bf16 */
    int narrow = un->frozen && g_ops->device != FSDPC_DEVICE_CPU;
    ck_assert_msg(g_ops->download(g_ops->ctx, m, un->master,
                                  un->shard_numel * (narrow ? 2 : sizeof(float)), &err) == FSDPC_OK,
                  "%s", err.msg);
    if (narrow) /* widen in place, from the end */
      for (uint64_t i = un->shard_numel; i-- > 0;)
        m[i] = fsdpc__bf16_to_f32(((const uint16_t *)m)[i]);
    uint64_t covered = 0;
    for (int p = 0; p < fsdpc__engine_n_params(e); p++) {
      uint64_t off;
      int pu;
      const fsdpc_param_info *pi = fsdpc__engine_param(e, p, &off, &pu);
      if (pu != u)
        continue;
      for (uint64_t j = 0; j < pi->numel; j++) {
        uint64_t at = off + j;
        if (at < un->shard_offset || at >= un->shard_offset + un->shard_numel)
          continue;
        full[p][j] = m[at - un->shard_offset];
        covered++;
      }
    }
    uint64_t zeros = 0;
    for (uint64_t i = 0; i < un->shard_numel; i++)
      zeros += m[i] == 0.0f;
    ck_assert_msg(zeros + covered >= un->shard_numel, "unit %d: %llu padding elements not zero", u,
                  (unsigned long long)(un->shard_numel - covered - zeros));
    free(m);
  }
}

static float **alloc_full(fixture *f) {
  float **full = calloc((size_t)f->n_params, sizeof *full);
  ck_assert(full);
  for (int p = 0; p < f->n_params; p++) {
    full[p] = malloc(f->params[p].numel * sizeof(float));
    ck_assert(full[p]);
    for (uint64_t j = 0; j < f->params[p].numel; j++)
      full[p][j] = NAN;
  }
  return full;
}

static void free_full(fixture *f, float **full) {
  for (int p = 0; p < f->n_params; p++)
    free(full[p]);
  free(full);
}

/* Every element of got equals want bit for bit. */
static void expect_equal(fixture *f, float **got, float **want, const char *what, int world) {
  for (int p = 0; p < f->n_params; p++)
    for (uint64_t j = 0; j < f->params[p].numel; j++)
      ck_assert_msg(memcmp(&got[p][j], &want[p][j], 4) == 0, "%s, world %d: %s[%llu] = %a, want %a",
                    what, world, f->params[p].name, (unsigned long long)j, got[p][j], want[p][j]);
}

START_TEST(random_init_same_at_every_world) {
  fixture f;
  fixture_open(&f);
  float **want = alloc_full(&f);
  for (int p = 0; p < f.n_params; p++)
    fsdpc__model_init_range(&f.params[p], 1234, 0.02, 0, f.params[p].numel, want[p]);
  /* a few elements of the shared function, by value (see test_init_rng) */
  ck_assert_str_eq(f.params[1].name, "model.layers.0.self_attn.q_proj.weight");
  ck_assert(want[1][0] == 0x1.c4e45ap-8f && want[1][2] == 0x1.c3f728p-6f);
  const int worlds[] = {1, 2, 4};
  for (int w = 0; w < 3; w++) {
    float **got = alloc_full(&f);
    for (int r = 0; r < worlds[w]; r++) {
      fsdpc_err err = {0};
      test_engine t = make_engine(worlds[w], r);
      ck_assert_msg(fsdpc__engine_init_random(t.eng, 1234, 0.02, &err) == FSDPC_OK, "%s", err.msg);
      gather_masters(t.eng, got);
      test_engine_close(&t);
    }
    expect_equal(&f, got, want, "random init", worlds[w]);
    free_full(&f, got);
  }
  free_full(&f, want);
  fixture_close(&f);
}
END_TEST

/* LoRA: the adapters (made on the host) and the frozen base (on a device:
 * made there and kept in bf16) equal the reference init (the base rounded
 * to bf16 on a device) at every world size. */
START_TEST(lora_random_init_same_at_every_world) {
  fixture f;
  fixture_open(&f);
  const int worlds[] = {1, 2, 4};
  test_engine t0 = make_engine_opt(1, 0, 1);
  int np = fsdpc__engine_n_params(t0.eng);
  float **want = calloc((size_t)np, sizeof *want);
  ck_assert(want);
  for (int p = 0; p < np; p++) {
    uint64_t off;
    int u;
    const fsdpc_param_info *pi = fsdpc__engine_param(t0.eng, p, &off, &u);
    want[p] = malloc(pi->numel * sizeof(float));
    ck_assert(want[p]);
    fsdpc__model_init_range(pi, 1234, 0.02, 0, pi->numel, want[p]);
    if (fsdpc__engine_unit(t0.eng, u)->frozen && g_ops->device != FSDPC_DEVICE_CPU)
      for (uint64_t j = 0; j < pi->numel; j++)
        want[p][j] = fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(want[p][j]));
  }
  for (int w = 0; w < 3; w++) {
    float **got = calloc((size_t)np, sizeof *got);
    ck_assert(got);
    for (int p = 0; p < np; p++) {
      uint64_t off;
      int u;
      got[p] = malloc(fsdpc__engine_param(t0.eng, p, &off, &u)->numel * sizeof(float));
      ck_assert(got[p]);
    }
    for (int r = 0; r < worlds[w]; r++) {
      fsdpc_err err = {0};
      test_engine t = make_engine_opt(worlds[w], r, 1);
      ck_assert_msg(fsdpc__engine_init_random(t.eng, 1234, 0.02, &err) == FSDPC_OK, "%s", err.msg);
      gather_masters(t.eng, got);
      test_engine_close(&t);
    }
    for (int p = 0; p < np; p++) {
      uint64_t off;
      int u;
      const fsdpc_param_info *pi = fsdpc__engine_param(t0.eng, p, &off, &u);
      for (uint64_t j = 0; j < pi->numel; j++)
        ck_assert_msg(memcmp(&got[p][j], &want[p][j], 4) == 0,
                      "lora random init, world %d: %s[%llu] = %a, want %a", worlds[w], pi->name,
                      (unsigned long long)j, got[p][j], want[p][j]);
      free(got[p]);
    }
    free(got);
  }
  for (int p = 0; p < np; p++)
    free(want[p]);
  free(want);
  test_engine_close(&t0);
  fixture_close(&f);
}
END_TEST

/* Writes dir/model.safetensors with every parameter (dtype), values from
 * the init with another seed; want gets the values as stored. */
static void write_folder(fixture *f, const char *dir, int32_t dtype, float **want) {
  fsdpc_st_entry *ent = calloc((size_t)f->n_params, sizeof *ent);
  ck_assert(ent);
  for (int p = 0; p < f->n_params; p++) {
    fsdpc__model_init_range(&f->params[p], 99, 0.5, 0, f->params[p].numel, want[p]);
    if (dtype == FSDPC_DTYPE_BF16)
      for (uint64_t j = 0; j < f->params[p].numel; j++)
        want[p][j] = fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(want[p][j]));
    ent[p] = (fsdpc_st_entry){.struct_size = sizeof ent[p],
                              .name = f->params[p].name,
                              .ndim = f->params[p].ndim,
                              .data = want[p]};
    for (int k = 0; k < f->params[p].ndim; k++)
      ent[p].shape[k] = f->params[p].shape[k];
  }
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__st_write(path, ent, (uint32_t)f->n_params, dtype, NULL, &err) == FSDPC_OK,
                "%s", err.msg);
  free(ent);
}

static void load_at_every_world(int32_t dtype) {
  fixture f;
  fixture_open(&f);
  char dir[] = "/tmp/fsdpc-init-world-XXXXXX";
  ck_assert(mkdtemp(dir));
  float **want = alloc_full(&f);
  write_folder(&f, dir, dtype, want);
  const int worlds[] = {1, 2, 4};
  const size_t chunks[] = {64u << 20, 4096, 1000}; /* default; several per unit; odd */
  for (int w = 0; w < 3; w++) {
    float **got = alloc_full(&f);
    for (int r = 0; r < worlds[w]; r++) {
      fsdpc_err err = {0};
      test_engine t = make_engine(worlds[w], r);
      ck_assert_msg(fsdpc__engine_load_hf_chunked(t.eng, dir, chunks[w], &err) == FSDPC_OK, "%s",
                    err.msg);
      gather_masters(t.eng, got);
      test_engine_close(&t);
    }
    expect_equal(&f, got, want, dtype == FSDPC_DTYPE_BF16 ? "BF16 load" : "F32 load", worlds[w]);
    free_full(&f, got);
  }
  char path[600];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  unlink(path);
  rmdir(dir);
  free_full(&f, want);
  fixture_close(&f);
}

START_TEST(hf_bf16_load_same_at_every_world) {
  load_at_every_world(FSDPC_DTYPE_BF16);
}
END_TEST

START_TEST(hf_f32_load_same_at_every_world) {
  load_at_every_world(FSDPC_DTYPE_F32);
}
END_TEST

int main(void) {
  g_ops = fsdpc__ops_cpu();
#ifdef FSDPC_INIT_CUDA
  if (fsdpc__cuda_device_count() == 0) {
    printf("skipped: no GPU\n");
    return 77;
  }
  fsdpc_cuda_ctx_opts co;
  fsdpc__cuda_ctx_opts_default(&co);
  fsdpc_err err = {0};
  if (fsdpc__cuda_ctx_create(&co, &g_cuda, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  fsdpc__ops_cuda(g_cuda, &g_cuda_ops);
  g_ops = &g_cuda_ops;
#endif
  Suite *s = suite_create("init_world");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, random_init_same_at_every_world);
  tcase_add_test(tc, lora_random_init_same_at_every_world);
  tcase_add_test(tc, hf_bf16_load_same_at_every_world);
  tcase_add_test(tc, hf_f32_load_same_at_every_world);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
#ifdef FSDPC_INIT_CUDA
  srunner_set_fork_status(sr, CK_NOFORK); /* the CUDA context is not fork-safe */
#endif
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
#ifdef FSDPC_INIT_CUDA
  fsdpc__cuda_ctx_destroy(g_cuda);
#endif
  return failed ? 1 : 0;
}
