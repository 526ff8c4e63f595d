/* The memory planner against the engine and the model context:
 * - shard bytes (params, grads, optimizer) equal fsdpc__engine_bytes exactly
 *   for every strategy's shard group size, wrap policy and optimizer;
 * - fsdpc__model_ctx_bytes_for equals what a real context allocates;
 * - the replayed step's peaks behave as step.c does (FULL_SHARD frees units
 *   after forward, SHARD_GRAD_OP keeps them, NO_SHARD has none);
 * - quantization nf4 counts the frozen projections at 4 bits. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "engine_plan.h"
#include "plan/plan.h"
#include "quant/nf4.h"
#include "runplan/runplan.h"
#include "util/mem.h"

static const char *tiny_yaml = "model:\n"
                               "  vocab_size: 259\n"
                               "  hidden_size: 64\n"
                               "  intermediate_size: 160\n"
                               "  num_hidden_layers: 3\n"
                               "  num_attention_heads: 4\n"
                               "  num_key_value_heads: 2\n"
                               "  max_position_embeddings: 64\n"
                               "  tie_word_embeddings: %s\n"
                               "data: {train: none.tok, seq_len: 32}\n"
                               "attention: {impl: naive}\n"
                               "train: {micro_batch_size: 2}\n";

static fsdpc_config *load(int tied, const char *const *ovr, int n) {
  char text[2048];
  snprintf(text, sizeof text, tiny_yaml, tied ? "true" : "false");
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__config_from_string(text, "tiny.yaml", ovr, n, &c, &err);
  ck_assert_msg(st == FSDPC_OK, "%s", err.msg);
  return c;
}

/* The run plan of the config with the strategy set, at `world` ranks (no
 * engine yet: test_engine_rank builds each rank's, which needs no
 * communicator to allocate shards). */
static void open_plan(const char *yaml, const char *const *ovr, int n, int strategy, int world,
                      test_engine *t) {
  fsdpc_err err = {0};
  char st[64];
  snprintf(st, sizeof st, "fsdp.sharding_strategy=%s", fsdpc__strategy_name(strategy));
  const char *ov[8];
  ck_assert(n < 7);
  for (int i = 0; i < n; i++)
    ov[i] = ovr[i];
  ov[n] = st;
  ck_assert_msg(test_engine_open(yaml, ov, n + 1, world, 0, NULL, 1, t, &err) == FSDPC_OK, "%s",
                err.msg);
}

/* The plan's shard bytes against the engines of rank's shard group. */
static void check_shards(fsdpc_config *cfg, fsdpc_plan_ctx *pc, const char *yaml,
                         const char *const *ovr, int n, int strategy, int world, int rank) {
  fsdpc_err err = {0};
  fsdpc_plan_variant v = {strategy, -1, -1, -1};
  fsdpc_plan_mem m;
  ck_assert_msg(fsdpc__plan_config(pc, &v, world, world, &m, &err) == FSDPC_OK, "%s", err.msg);
  /* rank's own engine (eb) and the group's largest optimizer state: the
   * planner's is the largest rank's (quantized state differs between
   * ranks; fp32 slots do not) */
  fsdpc_engine_bytes eb = {0};
  uint64_t worst = 0;
  test_engine t;
  open_plan(yaml, ovr, n, strategy, world, &t);
  int quantized = strcmp(cfg->optim.name, "adamw8bit") == 0;
  for (int r = 0; r < m.S; r++) {
    fsdpc_engine_bytes rb;
    if (!quantized && r != 0 && r != rank % m.S)
      continue; /* fp32 slots: every rank's shards are the same size */
    ck_assert_msg(test_engine_rank(&t, r, NULL, &err) == FSDPC_OK, "%s", err.msg);
    fsdpc__engine_bytes(t.eng, &rb);
    worst = rb.optim > worst ? rb.optim : worst;
    if (r == rank % m.S)
      eb = rb;
  }
  test_engine_close(&t);
  ck_assert_uint_eq(m.params, eb.params);
  ck_assert_uint_eq(m.grads, eb.grads);
  ck_assert_uint_eq(m.optim, worst);
  if (strcmp(cfg->optim.name, "adamw8bit") == 0) /* 8-bit state: well under 2 x fp32 */
    ck_assert_uint_lt(m.optim, m.params);
  ck_assert_int_eq(m.peak[FSDPC_MEM_PARAMS], (int64_t)eb.params);
  ck_assert_int_eq(m.peak[FSDPC_MEM_OPTIM], (int64_t)worst);
}

START_TEST(shards_equal_engine) {
  const char *variants[][2] = {
      {"fsdp.wrap.policy=transformer", "optim.name=adamw"},
      {"fsdp.wrap.policy=transformer", "fsdp.wrap.options.separate_embedding=true"},
      {"fsdp.wrap.policy=size", "fsdp.wrap.options.min_num_params=20000"},
      {"optim.name=sgd", "optim.momentum=0.9"},
      {"optim.name=sgd", "fsdp.align=1"},
      {"optim.name=adamw8bit", "fsdp.align=1"}, /* quantized state, partial blocks */
  };
  for (int tied = 0; tied < 2; tied++)
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
      fsdpc_config *cfg = load(tied, variants[i], 2);
      char text[2048];
      snprintf(text, sizeof text, tiny_yaml, tied ? "true" : "false");
      fsdpc_err err = {0};
      fsdpc_plan_ctx *pc = NULL;
      ck_assert_msg(fsdpc__plan_ctx_create(cfg, &pc, &err) == FSDPC_OK, "%s", err.msg);
      for (int s = 0; s < 4; s++)
        for (int world = 1; world <= 4; world *= 2)
          check_shards(cfg, pc, text, variants[i], 2, s, world, world - 1);
      fsdpc__plan_ctx_destroy(pc);
      fsdpc__config_destroy(cfg);
    }
}
END_TEST

/* The context's bytes of shape s, counted without allocating, against
 * what it allocates, over micro-batch shapes and checkpointing modes. */
static void ctx_bytes_case(const fsdpc_model_shape *sp, const fsdpc_component *attn) {
  const fsdpc_model_shape s = *sp;
  const fsdpc_attention_v1 *av = attn->vtable;
  fsdpc_err err = {0};
  int shapes[][3] = {{1, 8, 0},   {2, 32, 0}, {2, 32, 1}, {2, 32, 2},
                     {4, 128, 0}, {3, 17, 1}, {3, 17, 2}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int B = shapes[i][0], T = shapes[i][1], ck = shapes[i][2];
    fsdpc_model_ctx_opts o = {
        .shape = &s, .B = B, .T = T, .activation_checkpointing = ck, .attention = attn};
    fsdpc_model_ctx *m = NULL;
    int64_t before[FSDPC_MEM_NCAT];
    fsdpc_mem_stats ms;
    fsdpc__mem_stats(&ms);
    memcpy(before, ms.current, sizeof before);
    ck_assert_msg(fsdpc__model_ctx_create(&o, &m, &err) == FSDPC_OK, "%s", err.msg);
    fsdpc__mem_stats(&ms);
    fsdpc_attn_shape ash = {.struct_size = sizeof ash,
                            .B = B,
                            .T = T,
                            .NH = s.NH,
                            .KVH = s.KVH,
                            .HD = s.HD,
                            .causal = 1,
                            .scale = 0.25f,
                            .dtype = FSDPC_DTYPE_F32,
                            .device = FSDPC_DEVICE_CPU};
    fsdpc_attn_sizes as = {.struct_size = sizeof as};
    ck_assert(av->sizes(NULL, &ash, &as) == FSDPC_OK);
    uint64_t pure = fsdpc__model_ctx_bytes_for(&s, B, T, ck, &as, 0);
    ck_assert_uint_eq(pure, fsdpc__model_ctx_bytes(m));
    ck_assert_int_eq((int64_t)pure,
                     ms.current[FSDPC_MEM_ACTIVATIONS] - before[FSDPC_MEM_ACTIVATIONS]);
    if (ck == 2) { /* save_mlp: each layer's gate and up instead of one shared pair */
      uint64_t full = fsdpc__model_ctx_bytes_for(&s, B, T, 1, &as, 0);
      ck_assert_uint_eq(pure - full, 2ull * (s.L - 1) * B * T * s.F * sizeof(float));
    }
    fsdpc__model_ctx_destroy(m);
  }
}

START_TEST(ctx_bytes_match_allocation) {
  fsdpc_err err = {0};
  fsdpc_registry *reg = NULL;
  ck_assert(fsdpc__registry_create(NULL, 0, &reg, &err) == FSDPC_OK);
  const fsdpc_component *attn = NULL;
  ck_assert(fsdpc__registry_select(reg, FSDPC_KIND_ATTENTION, "naive", NULL, &attn, &err) ==
            FSDPC_OK);
  fsdpc_model_shape s = {.V = 259,
                         .C = 64,
                         .F = 160,
                         .L = 3,
                         .NH = 4,
                         .KVH = 2,
                         .HD = 16,
                         .max_pos = 128,
                         .eps = 1e-5f,
                         .rope.theta = 10000.0};
  fsdpc__model_shape_llama(&s);
  ctx_bytes_case(&s, attn);
  /* Gemma 3's switches: q/k norms per head, four norms, the local RoPE
   * tables (issue 36) */
  s.family = FSDPC_FAMILY_GEMMA3;
  s.qk_norm = FSDPC_QK_NORM_HEAD;
  s.norm_post = 1;
  s.norm_offset = 1.0f;
  s.act = FSDPC_ACT_GELU_TANH;
  s.rope_local = s.rope;
  s.rope_local.theta = 100.0;
  s.window_layers[0] = 3; /* layers 0 and 1 sliding_attention */
  ctx_bytes_case(&s, attn);
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(transients_follow_the_schedule) {
  fsdpc_config *cfg = load(1, NULL, 0);
  fsdpc_err err = {0};
  fsdpc_plan_ctx *pc = NULL;
  ck_assert_msg(fsdpc__plan_ctx_create(cfg, &pc, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_mem full, sgo, none, hyb, ckpt;
  fsdpc_plan_variant v = {FSDPC_FULL_SHARD, 0, 0, -1};
  ck_assert(fsdpc__plan_config(pc, &v, 4, 4, &full, &err) == FSDPC_OK);
  v.strategy = FSDPC_SHARD_GRAD_OP;
  ck_assert(fsdpc__plan_config(pc, &v, 4, 4, &sgo, &err) == FSDPC_OK);
  v.strategy = FSDPC_NO_SHARD;
  ck_assert(fsdpc__plan_config(pc, &v, 4, 4, &none, &err) == FSDPC_OK);
  v.strategy = FSDPC_HYBRID_SHARD;
  ck_assert(fsdpc__plan_config(pc, &v, 4, 2, &hyb, &err) == FSDPC_OK);
  v = (fsdpc_plan_variant){FSDPC_FULL_SHARD, 1, 0, -1};
  ck_assert(fsdpc__plan_config(pc, &v, 4, 4, &ckpt, &err) == FSDPC_OK);
  ck_assert_int_eq(none.peak[FSDPC_MEM_COMM], 0);
  ck_assert_int_eq(none.peak[FSDPC_MEM_GRADS], (int64_t)none.grads);
  ck_assert_int_gt(sgo.peak[FSDPC_MEM_COMM], full.peak[FSDPC_MEM_COMM]);
  ck_assert_int_eq(sgo.S, 4);
  ck_assert_int_eq(hyb.S, 2);
  ck_assert_int_eq(hyb.R, 2);
  ck_assert_uint_eq(full.comm.all_reduce, 0);
  ck_assert_uint_gt(hyb.comm.all_reduce, 0);
  /* FULL_SHARD gathers every unit twice (forward, backward) except the ones
   * the head keeps; SHARD_GRAD_OP once. */
  ck_assert_uint_gt(full.comm.all_gather, sgo.comm.all_gather);
  ck_assert_uint_eq(full.comm.reduce_scatter, sgo.comm.reduce_scatter);
  ck_assert_uint_lt(ckpt.activations, full.activations);
  ck_assert_int_eq(full.total_peak - ckpt.total_peak,
                   (int64_t)(full.activations - ckpt.activations));
  /* A shard group that does not divide the world is refused in one line. */
  v.strategy = FSDPC_HYBRID_SHARD;
  ck_assert(fsdpc__plan_config(pc, &v, 4, 3, &hyb, &err) == FSDPC_INVALID_USAGE);
  ck_assert(strstr(err.msg, "must divide") != NULL);
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
}
END_TEST

/* quantization.method nf4 (QLoRA, docs/lora.md): the planner holds each
 * frozen projection as its NF4 codes and scales (fsdpc__nf4_bytes of the
 * weight) and the rest of the base as LoRA does; a layer is dequantized
 * into its gathered (transient) buffer, at a shard group of one too;
 * gathers move the 4-bit bytes. The CPU engine runs it. */
static void plan_qlora(const char *method, int world, fsdpc_plan_mem *m) {
  const char *ovr[] = {"train.device=cuda", "fsdp.align=1", "peft.method=lora",
                       "peft.target_modules=[all-linear]", method};
  fsdpc_config *cfg = load(0, ovr, 5);
  fsdpc_err err = {0};
  fsdpc_plan_ctx *pc = NULL;
  ck_assert_msg(fsdpc__plan_ctx_create(cfg, &pc, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_variant v = {FSDPC_FULL_SHARD, 0, 0, -1};
  ck_assert_msg(fsdpc__plan_config(pc, &v, world, world, m, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
}

START_TEST(nf4_base_planned) {
  fsdpc_plan_mem lora, qlora, lora2, qlora2;
  plan_qlora("quantization.method=none", 1, &lora);
  plan_qlora("quantization.method=nf4", 1, &qlora);
  /* tiny_yaml's layer: q, k, v, o (kv heads 2 x 16), gate, up, down */
  const uint64_t proj[] = {64 * 64, 32 * 64, 32 * 64, 64 * 64, 160 * 64, 160 * 64, 64 * 160};
  uint64_t saved = 0, layer = 2 * 64; /* the layer's two norms */
  for (int j = 0; j < 7; j++) {
    saved += 3 * (proj[j] * 2 - fsdpc__nf4_bytes(proj[j], 64, 1));
    layer += proj[j];
  }
  ck_assert_uint_eq(lora.params - qlora.params, saved);
  ck_assert_uint_eq(lora.grads, qlora.grads);
  ck_assert_uint_eq(lora.optim, qlora.optim);
  ck_assert_int_eq(lora.peak[FSDPC_MEM_PARAMS], (int64_t)lora.params);
  /* the dequantized layer is a gathered unit's transient (bf16), not a shard */
  ck_assert_int_eq(qlora.peak[FSDPC_MEM_PARAMS], (int64_t)qlora.params);
  ck_assert_int_ge(qlora.peak[FSDPC_MEM_COMM], (int64_t)(layer * 2));
  plan_qlora("quantization.method=none", 2, &lora2);
  plan_qlora("quantization.method=nf4", 2, &qlora2);
  ck_assert_uint_lt(qlora2.comm.all_gather, lora2.comm.all_gather);
  ck_assert_uint_eq(qlora2.comm.reduce_scatter, lora2.comm.reduce_scatter);

  char text[2048];
  snprintf(text, sizeof text, tiny_yaml, "false");
  const char *ovr[] = {"peft.method=lora", "quantization.method=nf4"};
  test_engine t;
  fsdpc_err err = {0};
  ck_assert_msg(test_engine_open(text, ovr, 2, 1, 0, NULL, 0, &t, &err) == FSDPC_OK, "%s",
                err.msg);
  int nf4_units = 0;
  for (int u = 0; u < fsdpc__engine_n_units(t.eng); u++)
    nf4_units += fsdpc__engine_unit(t.eng, u)->nf4;
  ck_assert_int_eq(nf4_units, 3); /* the CPU engine holds the 3 layers in NF4 */
  test_engine_close(&t);
}
END_TEST

/* fsdp.cpu_offload with an nf4 base: refused by the modes resolution that
 * the engine's run plan and `fsdpc plan` share, so the plan's table has no
 * cpu_offload rows for a QLoRA config (it has them for LoRA) and a QLoRA
 * config that asks for it is refused with the engine's message. */
static int offload_rows(const char *method, const char *offload, fsdpc_status *st,
                        char msg[sizeof(fsdpc_err){0}.msg]) {
  const char *ovr[] = {"train.device=cuda", "peft.method=lora", "peft.target_modules=[all-linear]",
                       method, offload};
  fsdpc_config *cfg = load(0, ovr, 5);
  fsdpc_err err = {0};
  fsdpc_memplan *mp = NULL;
  int full = 0;
  if ((*st = fsdpc_memplan_create(cfg, 1, 1, &mp, &err)) == FSDPC_OK) {
    fsdpc_memplan_info info = {.struct_size = sizeof info};
    fsdpc_memplan_describe(mp, &info);
    for (int i = 0; i < info.n_rows; i++) {
      fsdpc_memplan_row r = {.struct_size = sizeof r};
      ck_assert(fsdpc_memplan_row_get(mp, i, &r, &err) == FSDPC_OK);
      full += strcmp(r.offload, "full") == 0;
    }
  }
  memcpy(msg, err.msg, sizeof err.msg);
  fsdpc_memplan_destroy(mp);
  fsdpc__config_destroy(cfg);
  return full;
}

START_TEST(nf4_plan_refuses_cpu_offload) {
  fsdpc_status st;
  char msg[sizeof(fsdpc_err){0}.msg];
  ck_assert_int_eq(offload_rows("quantization.method=none", "fsdp.cpu_offload=false", &st, msg), 8);
  ck_assert_int_eq(st, FSDPC_OK);
  ck_assert_int_eq(offload_rows("quantization.method=nf4", "fsdp.cpu_offload=false", &st, msg), 0);
  ck_assert_msg(st == FSDPC_OK, "%s", msg);
  offload_rows("quantization.method=nf4", "fsdp.cpu_offload=true", &st, msg);
  ck_assert_int_eq(st, FSDPC_UNSUPPORTED);
  ck_assert_msg(strstr(msg, "nf4 with fsdp.cpu_offload") && strstr(msg, "cpu_offload: false"), "%s",
                msg);
  /* the engine's run plan resolves its modes the same way */
  const char *ovr[] = {"train.device=cuda", "peft.method=lora", "quantization.method=nf4",
                       "fsdp.cpu_offload=true"};
  fsdpc_config *cfg = load(0, ovr, 4);
  fsdpc_run_world one = {.world_size = 1, .nproc_per_node = 1};
  fsdpc_run_plan *rp = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__run_plan_create(cfg, &one, FSDPC_RUN_PLAN_OFFLINE, &rp, &err),
                   FSDPC_UNSUPPORTED);
  ck_assert_str_eq(err.msg, msg);
  fsdpc__config_destroy(cfg);
}
END_TEST

/* fsdp.param_copy: the planned device params grow by the bf16 copies (2
 * bytes per shard element, i.e. half the fp32 shards), by whole units in
 * order up to fsdp.param_copy_max_mib, and not at all on the CPU device. */
static int64_t planned_params_peak(const char *device, const char *copy, const char *cap,
                                   uint64_t *shards) {
  const char *ovr[] = {device,
                       copy,
                       cap,
                       "model.hidden_size=512",
                       "model.intermediate_size=1376",
                       "model.num_attention_heads=8"};
  fsdpc_config *cfg = load(0, ovr, 6);
  fsdpc_err err = {0};
  fsdpc_plan_ctx *pc = NULL;
  ck_assert_msg(fsdpc__plan_ctx_create(cfg, &pc, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_mem m;
  fsdpc_plan_variant v = {FSDPC_FULL_SHARD, 0, 0, -1};
  ck_assert_msg(fsdpc__plan_config(pc, &v, 1, 1, &m, &err) == FSDPC_OK, "%s", err.msg);
  *shards = m.params;
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
  return m.peak[FSDPC_MEM_PARAMS];
}

START_TEST(param_copy_planned) {
  uint64_t shards = 0;
  const char *cuda = "train.device=cuda", *cpu = "train.device=cpu";
  int64_t off =
      planned_params_peak(cuda, "fsdp.param_copy=false", "fsdp.param_copy_max_mib=0", &shards);
  int64_t on =
      planned_params_peak(cuda, "fsdp.param_copy=true", "fsdp.param_copy_max_mib=0", &shards);
  int64_t capped =
      planned_params_peak(cuda, "fsdp.param_copy=true", "fsdp.param_copy_max_mib=8", &shards);
  int64_t on_cpu =
      planned_params_peak(cpu, "fsdp.param_copy=true", "fsdp.param_copy_max_mib=0", &shards);
  ck_assert_int_eq(off, (int64_t)shards);
  ck_assert_int_eq(on - off, (int64_t)shards / 2);
  /* 3 layer units of about 6.3 MiB of copies each: one fits under 8 MiB */
  ck_assert_int_gt(capped, off);
  ck_assert_int_lt(capped, on);
  ck_assert_int_le(capped - off, 8 << 20);
  ck_assert_int_eq(on_cpu, (int64_t)shards);
}
END_TEST

/* CUDA reserved memory: the arena the engine plans (at least the peak of
 * the accounting, which lays out into it) plus what lies outside it: the
 * runtime, the late buffers and, with collectives, NCCL's. */
START_TEST(reserved_is_the_arena) {
  const char *ovr[] = {"train.device=cuda"};
  fsdpc_config *cfg = load(0, ovr, 1);
  fsdpc_err err = {0};
  fsdpc_plan_ctx *pc = NULL;
  ck_assert_msg(fsdpc__plan_ctx_create(cfg, &pc, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_device dev;
  fsdpc__plan_device_default(FSDPC_DEVICE_CUDA, &dev);
  struct {
    int strategy, world;
  } cases[] = {
      {FSDPC_FULL_SHARD, 1}, {FSDPC_NO_SHARD, 4}, {FSDPC_FULL_SHARD, 4}, {FSDPC_SHARD_GRAD_OP, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fsdpc_plan_mem m;
    fsdpc_plan_variant v = {cases[i].strategy, 0, 0, -1};
    ck_assert_msg(fsdpc__plan_config(pc, &v, cases[i].world, cases[i].world, &m, &err) ==
                      FSDPC_OK,
                  "%s", err.msg);
    ck_assert_int_ge(m.arena, m.total_peak);
    ck_assert_int_eq(m.arena, m.arena_shards + m.arena_activations + m.arena_transients);
    int64_t late =
        (int64_t)dev.late_bytes + (cases[i].world > 1 ? (int64_t)dev.late_comm_bytes : 0);
    ck_assert_int_eq(m.late, late);
    ck_assert_int_eq(m.reserved, m.arena + (int64_t)dev.runtime_bytes + late);
  }
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
}
END_TEST

/* The plan as a promise: a CUDA run whose arena (and what it takes after
 * start-up) exceeds the free memory is refused in one line that gives the
 * planner's figures and the variants that would fit; with enough it runs. */
START_TEST(fit_check_refuses) {
  const char *ovr[] = {"train.device=cuda", "train.micro_batch_size=8", "data.seq_len=64",
                       "model.max_position_embeddings=64"};
  fsdpc_config *cfg = load(0, ovr, 4);
  fsdpc_err err = {0};
  fsdpc_run_world w = {1, 1};
  fsdpc_run_plan *p = NULL;
  ck_assert_msg(fsdpc__run_plan_create(cfg, &w, FSDPC_RUN_PLAN_OFFLINE, &p, &err) == FSDPC_OK, "%s",
                err.msg);
  fsdpc_plan_mem m, ck;
  ck_assert(fsdpc__plan_modes(p, &p->modes, &m, &err) == FSDPC_OK);
  uint64_t want = (uint64_t)(m.arena + m.late);
  ck_assert_int_eq(fsdpc__plan_fit_check(p, want, 0, &err), FSDPC_OK);
  /* between the checkpointed variant's need and the run's own */
  fsdpc_run_variant v = {-1, 1, -1, -1};
  fsdpc_run_modes cm;
  ck_assert(fsdpc__run_modes_resolve(cfg, &v, &w, &cm, &err) == FSDPC_OK);
  ck_assert(fsdpc__plan_modes(p, &cm, &ck, &err) == FSDPC_OK);
  ck_assert_int_lt(ck.arena, m.arena);
  uint64_t some = (uint64_t)(ck.arena + ck.late);
  ck_assert_int_eq(fsdpc__plan_fit_check(p, some, 3, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "does not fit GPU 3"));
  ck_assert_ptr_nonnull(strstr(err.msg, "would fit: fsdp.activation_checkpointing=true"));
  ck_assert_ptr_null(strchr(err.msg, '\n'));
  char planned[64];
  snprintf(planned, sizeof planned, "it plans %.2f GiB", (double)want / 1073741824.0);
  ck_assert_msg(strstr(err.msg, planned) != NULL, "%s", err.msg);
  /* nothing fits in almost nothing */
  ck_assert_int_eq(fsdpc__plan_fit_check(p, 4096, 0, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "use more GPUs"));
  fsdpc__run_plan_destroy(p);
  fsdpc__config_destroy(cfg);
}
END_TEST

START_TEST(flops_formula) {
  /* Llama-3.2-1B shape (untied): 1.498 B params; 6 x (N - V x C) + 12 x L x C x T. */
  fsdpc_model_shape s = {.V = 128256, .C = 2048, .F = 8192, .L = 16, .NH = 32, .KVH = 8, .HD = 64};
  fsdpc__model_shape_llama(&s);
  double n = (double)fsdpc__model_numel(&s);
  ck_assert_double_eq_tol(n, 1498482688.0, 0.5);
  double want = 6.0 * (n - 128256.0 * 2048.0) + 12.0 * 16 * 2048 * 2048;
  ck_assert_double_eq_tol(fsdpc__plan_flops_per_token(&s, 2048), want, 1.0);
}
END_TEST

/* The bench configs of the Qwen and Gemma 3 shapes resolve to the released
 * models' parameter counts (Qwen2.5-7B: q/k/v biases; Qwen3-8B: per-head
 * q/k norms; Gemma-3-1B: (1 + w) q/k norms, four norms, tied). */
START_TEST(family_bench_shapes) {
  static const struct {
    const char *file;
    uint64_t numel;
  } want[] = {{"configs/bench/qwen2.5-7b-base.yaml", 7615616512ull},
              {"configs/bench/qwen3-8b-base.yaml", 8190735360ull},
              {"configs/bench/gemma3-1b-base.yaml", 999885952ull}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", FSDPC_SOURCE_DIR, want[i].file);
    fsdpc_config *c = NULL;
    fsdpc_err err = {0};
    const char *ovr[] = {"fsdp.activation_checkpointing=true"};
    ck_assert_msg(fsdpc__config_load(path, ovr, 1, &c, &err) == FSDPC_OK, "%s", err.msg);
    fsdpc_model_shape s;
    fsdpc__run_shape_from_config(c, &s);
    ck_assert_msg(fsdpc__model_numel(&s) == want[i].numel, "%s: %llu parameters, want %llu",
                  want[i].file, (unsigned long long)fsdpc__model_numel(&s),
                  (unsigned long long)want[i].numel);
    fsdpc__config_destroy(c);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, shards_equal_engine);
  tcase_add_test(tc, ctx_bytes_match_allocation);
  tcase_add_test(tc, transients_follow_the_schedule);
  tcase_add_test(tc, flops_formula);
  tcase_add_test(tc, param_copy_planned);
  tcase_add_test(tc, reserved_is_the_arena);
  tcase_add_test(tc, fit_check_refuses);
  tcase_add_test(tc, family_bench_shapes);
  tcase_add_test(tc, nf4_base_planned);
  tcase_add_test(tc, nf4_plan_refuses_cpu_offload);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
