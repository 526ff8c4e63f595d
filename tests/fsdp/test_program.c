/* The step as data (core/src/fsdp/program.h): the programs the engine runs
 * and the planner costs are well formed for every strategy and option:
 * a unit is resident whenever a block that uses it computes, gathers only
 * what is not resident, waits only for gathers in flight, releases
 * everything by the end; FULL_SHARD re-gathers in backward and
 * SHARD_GRAD_OP does not; prefetches run ahead of the compute that needs
 * them only with a comm stream; no_sync keeps the grads; under cpu_offload's
 * host worker every pass waits for a unit's update before its first use and
 * hands each unit's grads over once; offload.optimizer's pieces go in, are
 * updated and come out in order, two buffers at most; fsdp.keep_params
 * keeps units gathered across a step's micro-batches; optim.in_backward
 * updates each unit in the backward after its reduction is waited for. */
#include <check.h>
#include <stdlib.h>

#include "fsdp/program.h"
#include "runplan/runplan.h"

static const char *yaml =
    "model: {vocab_size: 259, hidden_size: 64, intermediate_size: 160,\n"
    "        num_hidden_layers: 3, num_attention_heads: 4,\n"
    "        num_key_value_heads: 2, max_position_embeddings: 64}\n"
    "data: {seq_len: 32}\n"
    "attention: {impl: naive}\n"
    "fsdp: {wrap: {policy: transformer, options: {separate_embedding: true}}}\n";

static fsdpc_config *cfg;
static fsdpc_run_plan *rp;
static fsdpc_layout lay;

static void setup(void) {
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__config_from_string(yaml, "t.yaml", NULL, 0, &cfg, &err) == FSDPC_OK, "%s",
                err.msg);
  fsdpc_run_world w = {1, 1};
  ck_assert_msg(fsdpc__run_plan_create(cfg, &w, 0, &rp, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_msg(fsdpc__layout_build(&rp->shape, rp->params, rp->n_params, rp->unit_of_param,
                                    rp->n_units, 2, 1, 0, &lay, &err) == FSDPC_OK,
                "%s", err.msg);
}

static void teardown(void) {
  fsdpc__layout_free(&lay);
  fsdpc__run_plan_destroy(rp);
  fsdpc__config_destroy(cfg);
}

typedef struct counts {
  int op[FSDPC_ACT_NOPS];
  int first_gather_before_use; /* gathers issued before the compute action ahead of their block */
} counts;

/* Walks a program as an executor would and checks its invariants. */
static counts check(const fsdpc_program_opts *o, const fsdpc_program *p) {
  counts c = {0};
  int nu = lay.n_units;
  int *res = calloc((size_t)nu, sizeof *res), *pend = calloc((size_t)nu, sizeof *pend);
  int *hwait = calloc((size_t)nu, sizeof *hwait), *hgrad = calloc((size_t)nu, sizeof *hgrad);
  int *reduced = calloc((size_t)nu, sizeof *reduced);
  int pieces_in = 0, next_in = 0, next_upd = 0, next_out = 0;
  for (int i = 0; i < p->n; i++) {
    int op = p->a[i].op, arg = p->a[i].arg;
    c.op[op]++;
    switch (op) {
    case FSDPC_ACT_FENCE_IN: /* a new pass (a step's programs checked as one) */
      for (int u = 0; u < nu; u++)
        hwait[u] = hgrad[u] = reduced[u] = 0;
      break;
    case FSDPC_ACT_HOST_WAIT:
      ck_assert_msg(o->host_async && !hwait[arg], "action %d: a second host wait for unit %d", i,
                    arg);
      hwait[arg] = 1;
      break;
    case FSDPC_ACT_REDUCE:
      reduced[arg] = 1;
      break;
    case FSDPC_ACT_HOST_LAND:
      ck_assert_msg(o->host_async && o->offload && reduced[arg], "action %d: host_land of %d", i,
                    arg);
      break;
    case FSDPC_ACT_HOST_GRAD:
      /* after its reduction (where there is one), once per micro-batch */
      ck_assert_msg(o->host_async && !hgrad[arg] && (o->grads_in_shard || reduced[arg]),
                    "action %d: host_grad of unit %d out of place", i, arg);
      hgrad[arg] = 1;
      break;
    /* offload_optim: pieces go in, are updated and come out in order, at
     * most two in the device buffers at once */
    case FSDPC_ACT_STATE_IN:
      ck_assert_int_eq(arg, next_in++);
      ck_assert_msg(++pieces_in <= 2, "action %d: a third piece in the buffers", i);
      break;
    case FSDPC_ACT_UPDATE_PIECE:
      ck_assert_int_eq(arg, next_upd++);
      ck_assert_msg(next_upd <= next_in, "action %d: piece %d updated before it came in", i, arg);
      break;
    case FSDPC_ACT_STATE_OUT:
      ck_assert_int_eq(arg, next_out++);
      ck_assert_msg(next_out <= next_upd, "action %d: piece %d out before its update", i, arg);
      pieces_in--;
      break;
    case FSDPC_ACT_GATHER:
      ck_assert_msg(!o->host_async || hwait[arg], "action %d gathers unit %d before its host wait",
                    i, arg);
      ck_assert_msg(!res[arg], "action %d gathers resident unit %d", i, arg);
      res[arg] = 1;
      pend[arg] = o->overlap;
      break;
    case FSDPC_ACT_WAIT:
      ck_assert_msg(pend[arg], "action %d waits for unit %d with no gather in flight", i, arg);
      pend[arg] = 0;
      break;
    case FSDPC_ACT_RELEASE:
      ck_assert_msg(res[arg] && !pend[arg], "action %d releases unit %d", i, arg);
      res[arg] = 0;
      break;
    case FSDPC_ACT_FORWARD:
    case FSDPC_ACT_BACKWARD:
    case FSDPC_ACT_HEAD: {
      const fsdpc_block *b = &lay.blocks[arg];
      /* the embedding's backward reads no parameter (program.c reads()) */
      int reads = op != FSDPC_ACT_BACKWARD || arg > 0;
      for (int k = 0; k < b->n_units; k++) {
        int u = b->units[k];
        ck_assert_msg(o->full_is_master || !reads || (res[u] && !pend[u]),
                      "action %d (%s) runs block %d without unit %d", i, fsdpc__act_name(op), arg,
                      u);
        ck_assert_msg(!o->host_async || hwait[u],
                      "action %d (%s) uses unit %d before the host updated it", i,
                      fsdpc__act_name(op), u);
      }
      /* a prefetch: the next block's units already in flight */
      if (op == FSDPC_ACT_FORWARD && arg + 1 < lay.n_blocks)
        for (int k = 0; k < lay.blocks[arg + 1].n_units; k++)
          c.first_gather_before_use += pend[lay.blocks[arg + 1].units[k]];
      break;
    }
    default:
      break;
    }
  }
  for (int u = 0; u < nu; u++)
    ck_assert_msg(o->full_is_master || !res[u], "unit %d still resident at the end", u);
  ck_assert_int_eq(pieces_in, 0);
  ck_assert_int_eq(next_out, next_in);
  free(res);
  free(pend);
  free(hwait);
  free(hgrad);
  free(reduced);
  return c;
}

static counts build(fsdpc_program_opts *o, fsdpc_program_kind kind) {
  fsdpc_program p = {0};
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__program_build(o, kind, &p, &err) == FSDPC_OK, "%s", err.msg);
  counts c = check(o, &p);
  fsdpc__program_free(&p);
  return c;
}

START_TEST(reshard_regathers) {
  fsdpc_program_opts o;
  fsdpc__program_opts_for(&lay, 2, 1, 1, 0, 1, 0, 0, 1, 1, &o); /* FULL_SHARD, CPU */
  counts full = build(&o, FSDPC_PROGRAM_MICRO);
  ck_assert_int_gt(full.op[FSDPC_ACT_GATHER], lay.n_units); /* backward re-gathers */
  ck_assert_int_eq(full.op[FSDPC_ACT_GATHER], full.op[FSDPC_ACT_RELEASE]);
  ck_assert_int_eq(full.op[FSDPC_ACT_REDUCE], lay.n_units);
  ck_assert_int_eq(full.op[FSDPC_ACT_WAIT], 0); /* no comm stream: nothing in flight */
  ck_assert_int_eq(full.first_gather_before_use, 0);
  fsdpc__program_opts_for(&lay, 2, 1, 1, 0, 0, 0, 0, 1, 1, &o); /* SHARD_GRAD_OP */
  counts sgo = build(&o, FSDPC_PROGRAM_MICRO);
  ck_assert_int_eq(sgo.op[FSDPC_ACT_GATHER], lay.n_units);
  ck_assert_int_eq(sgo.op[FSDPC_ACT_FORWARD], full.op[FSDPC_ACT_FORWARD]);
  ck_assert_int_eq(sgo.op[FSDPC_ACT_BACKWARD], lay.n_blocks - 1);
}
END_TEST

START_TEST(prefetch_with_comm_stream) {
  fsdpc_program_opts o;
  fsdpc__program_opts_for(&lay, 2, 1, 0, 0, 1, 0, 1, 1, 1, &o); /* CUDA, comm stream */
  counts c = build(&o, FSDPC_PROGRAM_MICRO);
  ck_assert_int_eq(c.op[FSDPC_ACT_WAIT], c.op[FSDPC_ACT_GATHER]);
  ck_assert_int_gt(c.first_gather_before_use, 0);
  fsdpc__program_opts_for(&lay, 2, 1, 0, 0, 1, 0, 1, 0, 0, &o); /* prefetch off */
  c = build(&o, FSDPC_PROGRAM_MICRO);
  ck_assert_int_eq(c.first_gather_before_use, 0);
  c = build(&o, FSDPC_PROGRAM_FORWARD);
  ck_assert_int_eq(c.op[FSDPC_ACT_BACKWARD] + c.op[FSDPC_ACT_REDUCE], 0);
}
END_TEST

START_TEST(shard_is_full_and_no_sync) {
  fsdpc_program_opts o;
  fsdpc__program_opts_for(&lay, 1, 4, 1, 0, 1, 1, 0, 1, 1, &o); /* NO_SHARD on the CPU */
  counts c = build(&o, FSDPC_PROGRAM_MICRO);
  ck_assert_int_eq(c.op[FSDPC_ACT_GATHER] + c.op[FSDPC_ACT_RELEASE] + c.op[FSDPC_ACT_REDUCE] +
                       c.op[FSDPC_ACT_GRAD_ALLOC],
                   0);
  c = build(&o, FSDPC_PROGRAM_OPTIM);
  ck_assert_int_eq(c.op[FSDPC_ACT_REPLICA_REDUCE], lay.n_units);
  ck_assert_int_eq(c.op[FSDPC_ACT_UPDATE], lay.n_units);
  ck_assert_int_eq(c.op[FSDPC_ACT_NORM], 1);
  fsdpc__program_opts_for(&lay, 2, 1, 1, 0, 1, 1, 0, 1, 1, &o); /* FULL_SHARD, no_sync */
  ck_assert_int_eq(build(&o, FSDPC_PROGRAM_MICRO_NO_SYNC).op[FSDPC_ACT_REDUCE], 0);
  ck_assert_int_eq(build(&o, FSDPC_PROGRAM_MICRO).op[FSDPC_ACT_REDUCE], lay.n_units);
  ck_assert_int_eq(build(&o, FSDPC_PROGRAM_OPTIM).op[FSDPC_ACT_REPLICA_REDUCE], 0);
  fsdpc__program_opts_for(&lay, 1, 1, 0, 1, 1, 0, 0, 1, 1, &o); /* offloaded at S = 1 */
  c = build(&o, FSDPC_PROGRAM_MICRO);
  ck_assert_int_eq(c.op[FSDPC_ACT_REDUCE], lay.n_units); /* grads go to the host */
  ck_assert_int_eq(c.op[FSDPC_ACT_ABSORB], 1);
  ck_assert_int_eq(build(&o, FSDPC_PROGRAM_OPTIM).op[FSDPC_ACT_SYNC], 1);
}
END_TEST

/* cpu_offload's host worker (host_async) and offload.optimizer's pieces. */
START_TEST(offload_modes) {
  fsdpc_program_opts o;
  for (int S = 1; S <= 2; S++)
    for (int cpu = 0; cpu < 2; cpu++) {
      /* offloaded on a device, or the host worker alone on the CPU */
      fsdpc__program_opts_for(&lay, S, 1, cpu, !cpu, 1, 0, !cpu && S > 1, 1, 1, &o);
      o.host_async = 1;
      counts c = build(&o, FSDPC_PROGRAM_MICRO);
      ck_assert_int_eq(c.op[FSDPC_ACT_HOST_GRAD], lay.n_units);
      ck_assert_int_eq(c.op[FSDPC_ACT_HOST_WAIT], lay.n_units);
      ck_assert_int_eq(c.op[FSDPC_ACT_ABSORB], 0); /* the worker absorbs the last landing */
      c = build(&o, FSDPC_PROGRAM_MICRO_NO_SYNC);
      ck_assert_int_eq(c.op[FSDPC_ACT_HOST_GRAD], 0);
      ck_assert_int_eq(c.op[FSDPC_ACT_HOST_LAND], cpu ? 0 : lay.n_units); /* landings */
      ck_assert_int_eq(c.op[FSDPC_ACT_ABSORB], 0);
      ck_assert_int_eq(build(&o, FSDPC_PROGRAM_FORWARD).op[FSDPC_ACT_HOST_WAIT], lay.n_units);
      c = build(&o, FSDPC_PROGRAM_OPTIM);
      ck_assert_int_eq(c.op[FSDPC_ACT_SYNC], 0); /* one replica: NORM waits for the worker */
      ck_assert_int_eq(c.op[FSDPC_ACT_UPDATE], lay.n_units);
    }
  fsdpc__program_opts_for(&lay, 1, 2, 0, 1, 1, 0, 0, 1, 1, &o); /* replicas: SYNC first */
  o.host_async = 1;
  ck_assert_int_eq(build(&o, FSDPC_PROGRAM_OPTIM).op[FSDPC_ACT_SYNC], 1);

  uint64_t total = 0;
  for (int u = 0; u < lay.n_units; u++)
    total += (lay.units[u].shard_numel + 4095) / 4096;
  fsdpc__program_opts_for(&lay, 2, 1, 0, 0, 1, 0, 1, 1, 1, &o);
  o.offload_optim = 1;
  for (uint64_t piece = 4096; piece <= (uint64_t)1 << 30; piece <<= 18) {
    o.piece = piece;
    counts c = build(&o, FSDPC_PROGRAM_OPTIM);
    uint64_t want = piece == 4096 ? total : (uint64_t)lay.n_units;
    ck_assert_int_eq(c.op[FSDPC_ACT_STATE_IN], (int)want);
    ck_assert_int_eq(c.op[FSDPC_ACT_UPDATE_PIECE], (int)want);
    ck_assert_int_eq(c.op[FSDPC_ACT_UPDATE], 0);
    ck_assert_int_eq(build(&o, FSDPC_PROGRAM_MICRO).op[FSDPC_ACT_HOST_GRAD], 0);
  }
  ck_assert_uint_eq(fsdpc__state_piece_elems(512u << 20, 2), 64u << 20);
  ck_assert_uint_eq(fsdpc__state_piece_elems(100, 2), 4096);
}
END_TEST

/* The programs of one optimizer step of n micro-batches, run as one. */
static counts build_step(fsdpc_program_opts *o, int n) {
  fsdpc_program step = {0}, p = {0};
  fsdpc_err err = {0};
  for (int mi = 0; mi < n; mi++) {
    ck_assert_msg(fsdpc__program_build(o, fsdpc__micro_kind(mi, n), &p, &err) == FSDPC_OK, "%s",
                  err.msg);
    step.a = realloc(step.a, (size_t)(step.n + p.n) * sizeof *step.a);
    ck_assert_ptr_nonnull(step.a);
    for (int i = 0; i < p.n; i++)
      step.a[step.n++] = p.a[i];
  }
  counts c = check(o, &step);
  fsdpc__program_free(&p);
  fsdpc__program_free(&step);
  return c;
}

/* fsdp.keep_params: a step of 3 micro-batches is well formed (kept units
 * resident whenever used, every unit freed by the step's end), gathers the
 * first two blocks' units once less in each later micro-batch (first) or
 * every unit once per step (all), and a step of one micro-batch is as
 * without it; on the CPU, with a comm stream, offloaded with the worker. */
START_TEST(keep_params) {
  ck_assert_int_eq(fsdpc__micro_kind(0, 1), FSDPC_PROGRAM_MICRO);
  ck_assert_int_eq(fsdpc__micro_kind(0, 3), FSDPC_PROGRAM_MICRO_NO_SYNC);
  ck_assert_int_eq(fsdpc__micro_kind(1, 3), FSDPC_PROGRAM_MICRO_NO_SYNC_IN);
  ck_assert_int_eq(fsdpc__micro_kind(2, 3), FSDPC_PROGRAM_MICRO_IN);
  int kept = lay.blocks[0].n_units + lay.blocks[1].n_units;
  ck_assert_int_eq(kept, 2); /* separate_embedding: the embedding's unit, layer 0's */
  for (int mode = 0; mode < 3; mode++) {
    fsdpc_program_opts o;
    if (mode == 0) /* FULL_SHARD on the CPU */
      fsdpc__program_opts_for(&lay, 2, 1, 1, 0, 1, 0, 0, 1, 1, &o);
    else if (mode == 1) /* a comm stream, no_sync */
      fsdpc__program_opts_for(&lay, 2, 1, 0, 0, 1, 1, 1, 1, 1, &o);
    else { /* cpu_offload at S = 1 with the worker */
      fsdpc__program_opts_for(&lay, 1, 1, 0, 1, 1, 1, 1, 1, 1, &o);
      o.host_async = 1;
    }
    counts one = build(&o, FSDPC_PROGRAM_MICRO);
    o.keep = FSDPC_KEEP_NONE;
    ck_assert_int_eq(build_step(&o, 3).op[FSDPC_ACT_GATHER], 3 * one.op[FSDPC_ACT_GATHER]);
    o.keep = FSDPC_KEEP_FIRST;
    ck_assert_int_eq(build_step(&o, 1).op[FSDPC_ACT_GATHER], one.op[FSDPC_ACT_GATHER]);
    counts c = build_step(&o, 3);
    /* minus the kept units' gathers in the two later micro-batches, plus
     * the embedding's unit gathered in the backward of the two that keep
     * it (one micro-batch alone does not: its backward reads no weight) */
    ck_assert_int_eq(c.op[FSDPC_ACT_GATHER],
                     3 * one.op[FSDPC_ACT_GATHER] - 2 * kept + 2 * lay.blocks[0].n_units);
    ck_assert_int_eq(c.op[FSDPC_ACT_GATHER], c.op[FSDPC_ACT_RELEASE]);
    o.keep = FSDPC_KEEP_ALL;
    ck_assert_int_eq(build_step(&o, 1).op[FSDPC_ACT_GATHER], one.op[FSDPC_ACT_GATHER]);
    c = build_step(&o, 3);
    ck_assert_int_eq(c.op[FSDPC_ACT_GATHER], lay.n_units);
    ck_assert_int_eq(c.op[FSDPC_ACT_RELEASE], lay.n_units);
    ck_assert_int_eq(c.op[FSDPC_ACT_HOST_GRAD], o.host_async ? lay.n_units : 0);
  }
}
END_TEST

/* The default root unit (embedding, final norm, head: blocks 0 and the
 * head) is freed right after the head at S > 1, under every strategy that
 * gathers, and the backward never gathers it again: the embedding's
 * backward reads no weight (issue 32: its bf16 bytes are not held through
 * every layer's backward). A kept unit (keep_params, a micro-batch before
 * the step's last) still ends the pass gathered. */
START_TEST(root_freed_after_head) {
  static const char *root_yaml =
      "model: {vocab_size: 259, hidden_size: 64, intermediate_size: 160,\n"
      "        num_hidden_layers: 3, num_attention_heads: 4,\n"
      "        num_key_value_heads: 2, max_position_embeddings: 64,\n"
      "        tie_word_embeddings: false}\n"
      "data: {seq_len: 32}\n"
      "attention: {impl: naive}\n";
  fsdpc_config *c2 = NULL;
  fsdpc_run_plan *rp2 = NULL;
  fsdpc_layout l2;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__config_from_string(root_yaml, "r.yaml", NULL, 0, &c2, &err) == FSDPC_OK,
                "%s", err.msg);
  fsdpc_run_world w = {1, 1};
  ck_assert_msg(fsdpc__run_plan_create(c2, &w, 0, &rp2, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_msg(fsdpc__layout_build(&rp2->shape, rp2->params, rp2->n_params, rp2->unit_of_param,
                                    rp2->n_units, 2, 1, 0, &l2, &err) == FSDPC_OK,
                "%s", err.msg);
  int head = l2.n_blocks - 1, root = -1;
  for (int u = 0; u < l2.n_units; u++)
    if (l2.units[u].first_block == 0 && l2.units[u].last_block == head)
      root = u;
  ck_assert_int_ge(root, 0);
  for (int mode = 0; mode < 4; mode++) {
    fsdpc_program_opts o; /* FULL_SHARD / SHARD_GRAD_OP, CPU / comm stream */
    fsdpc__program_opts_for(&l2, 2, 1, mode < 2, 0, mode % 2 == 0, 0, mode >= 2, 1, 1, &o);
    for (int keep = 0; keep < 2; keep++) {
      o.keep = keep ? FSDPC_KEEP_FIRST : FSDPC_KEEP_NONE;
      fsdpc_program p = {0};
      fsdpc_program_kind kind = keep ? FSDPC_PROGRAM_MICRO_NO_SYNC : FSDPC_PROGRAM_MICRO;
      ck_assert_msg(fsdpc__program_build(&o, kind, &p, &err) == FSDPC_OK, "%s", err.msg);
      int seen_head = 0, freed = -1, first_bwd = -1, regathered = 0;
      for (int i = 0; i < p.n; i++) {
        int op = p.a[i].op, arg = p.a[i].arg;
        seen_head |= op == FSDPC_ACT_HEAD;
        if (op == FSDPC_ACT_BACKWARD && first_bwd < 0)
          first_bwd = i;
        if (op == FSDPC_ACT_RELEASE && arg == root)
          freed = i;
        regathered += seen_head && op == FSDPC_ACT_GATHER && arg == root;
      }
      if (keep) { /* kept for the next micro-batch: gathered at the end */
        ck_assert_int_eq(freed, -1);
      } else {
        ck_assert_msg(freed >= 0 && freed < first_bwd,
                      "mode %d: root released at action %d, first backward at %d", mode, freed,
                      first_bwd);
        ck_assert_int_eq(regathered, 0);
      }
      fsdpc__program_free(&p);
    }
  }
  fsdpc__layout_free(&l2);
  fsdpc__run_plan_destroy(rp2);
  fsdpc__config_destroy(c2);
}
END_TEST

/* optim.in_backward: every unit is reduced once and updated once, after
 * compute waited for its reduction (REDUCED, or FENCE_OUT; in order without
 * a comm stream), its replica all-reduce right before its update; the
 * first updates run before the backward ends; the optimizer step is the
 * norm alone. FULL_SHARD and NO_SHARD (the full grads at S == 1), the CPU
 * and a comm stream. */
START_TEST(in_backward_updates) {
  for (int mode = 0; mode < 4; mode++) {
    int S = mode < 2 ? 2 : 1, R = mode < 2 ? 1 : 2, overlap = mode % 2;
    fsdpc_program_opts o;
    fsdpc__program_opts_for(&lay, S, R, !overlap, 0, 1, 0, overlap, 1, 1, &o);
    o.in_bwd = 1;
    o.grads_in_shard = 0; /* as fsdpc__program_opts_exec sets it */
    counts c = build(&o, FSDPC_PROGRAM_MICRO);
    ck_assert_int_eq(c.op[FSDPC_ACT_REDUCE], lay.n_units);
    ck_assert_int_eq(c.op[FSDPC_ACT_UPDATE], lay.n_units);
    ck_assert_int_eq(c.op[FSDPC_ACT_REPLICA_REDUCE], R > 1 ? lay.n_units : 0);
    fsdpc_program p = {0};
    fsdpc_err err = {0};
    ck_assert(fsdpc__program_build(&o, FSDPC_PROGRAM_MICRO, &p, &err) == FSDPC_OK);
    int reduced[64] = {0}, waited[64] = {0}, fenced = 0, before_end = 0;
    ck_assert_int_lt(lay.n_units, 64);
    for (int i = 0; i < p.n; i++) {
      int op = p.a[i].op, u = p.a[i].arg;
      if (op == FSDPC_ACT_REDUCE)
        reduced[u]++;
      if (op == FSDPC_ACT_REDUCED)
        waited[u] = 1;
      fenced |= op == FSDPC_ACT_FENCE_OUT;
      if (op != FSDPC_ACT_UPDATE)
        continue;
      before_end += !fenced;
      ck_assert_msg(reduced[u] == 1 && (!overlap || waited[u] || fenced),
                    "mode %d: unit %d updated at action %d before its reduction is done", mode, u,
                    i);
      ck_assert(R == 1 || (p.a[i - 1].op == FSDPC_ACT_REPLICA_REDUCE && p.a[i - 1].arg == u));
    }
    ck_assert_msg(before_end > 0, "mode %d: no update inside the backward", mode);
    fsdpc__program_free(&p);
    c = build(&o, FSDPC_PROGRAM_OPTIM);
    ck_assert_int_eq(c.op[FSDPC_ACT_NORM], 1);
    ck_assert_int_eq(c.op[FSDPC_ACT_UPDATE] + c.op[FSDPC_ACT_REPLICA_REDUCE], 0);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("fsdp_program");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, reshard_regathers);
  tcase_add_test(tc, prefetch_with_comm_stream);
  tcase_add_test(tc, shard_is_full_and_no_sync);
  tcase_add_test(tc, offload_modes);
  tcase_add_test(tc, keep_params);
  tcase_add_test(tc, root_freed_after_head);
  tcase_add_test(tc, in_backward_updates);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
