/* The step programs with LoRA's frozen units (issue 14): a frozen unit gets
 * no gradient buffer, reduction, replica all-reduce or update; the frozen
 * embedding's backward (and its re-gather) is skipped; at shard group 1 a
 * frozen unit is never gathered or released (its shard is the full buffer)
 * unless offloaded; every block computes with all its units resident; the
 * adapters' units are reduced once per synced micro-batch and updated. */
#include <check.h>
#include <stdlib.h>

#include "fsdp/program.h"
#include "runplan/runplan.h"

static const char *yaml = "model: {vocab_size: 259, hidden_size: 64, intermediate_size: 160,\n"
                          "        num_hidden_layers: 3, num_attention_heads: 4,\n"
                          "        num_key_value_heads: 2, max_position_embeddings: 64}\n"
                          "data: {seq_len: 32}\n"
                          "attention: {impl: naive}\n"
                          "peft: {method: lora, r: 4, target_modules: [all-linear]}\n";

static fsdpc_config *cfg;
static fsdpc_run_plan *rp;

static void plan(int S, fsdpc_layout *lay) {
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__layout_build(&rp->shape, rp->params, rp->n_params, rp->unit_of_param,
                                    rp->n_units, S, 1, 0, lay, &err) == FSDPC_OK,
                "%s", err.msg);
}

static void setup(void) {
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__config_from_string(yaml, "t.yaml", NULL, 0, &cfg, &err) == FSDPC_OK, "%s",
                err.msg);
  fsdpc_run_world w = {1, 1};
  ck_assert_msg(fsdpc__run_plan_create(cfg, &w, 0, &rp, &err) == FSDPC_OK, "%s", err.msg);
}

static void teardown(void) {
  fsdpc__run_plan_destroy(rp);
  fsdpc__config_destroy(cfg);
}

/* Checks the invariants of one program; counts actions per unit. */
static void walk(const fsdpc_layout *lay, const fsdpc_program_opts *o, const fsdpc_program *p,
                 int *gathers, int *reduces, int *updates, int *backward0) {
  int nu = lay->n_units;
  int *res = calloc((size_t)nu, sizeof *res);
  for (int u = 0; u < nu; u++) /* always resident: nothing gathers them */
    res[u] = o->full_is_master || (o->frozen_resident && lay->units[u].frozen);
  for (int i = 0; i < p->n; i++) {
    int op = p->a[i].op, arg = p->a[i].arg;
    if (op == FSDPC_ACT_GATHER) {
      ck_assert_msg(!res[arg], "gathers resident unit %s", lay->units[arg].name);
      res[arg] = 1;
      gathers[arg]++;
    } else if (op == FSDPC_ACT_RELEASE) {
      ck_assert_msg(res[arg], "releases unit %s", lay->units[arg].name);
      res[arg] = 0;
    } else if (op == FSDPC_ACT_GRAD_ALLOC || op == FSDPC_ACT_REDUCE ||
               op == FSDPC_ACT_REPLICA_REDUCE || op == FSDPC_ACT_UPDATE) {
      ck_assert_msg(!lay->units[arg].frozen, "%s on frozen unit %s", fsdpc__act_name(op),
                    lay->units[arg].name);
      if (op == FSDPC_ACT_REDUCE)
        reduces[arg]++;
      if (op == FSDPC_ACT_UPDATE)
        updates[arg]++;
    } else if (op == FSDPC_ACT_FORWARD || op == FSDPC_ACT_BACKWARD || op == FSDPC_ACT_HEAD) {
      if (op == FSDPC_ACT_BACKWARD && arg == 0)
        (*backward0)++;
      const fsdpc_block *b = &lay->blocks[arg];
      for (int k = 0; k < b->n_units; k++)
        ck_assert_msg(res[b->units[k]], "%s of block %d without unit %s", fsdpc__act_name(op), arg,
                      lay->units[b->units[k]].name);
    }
  }
  free(res);
}

static void run_case(int S, int R, int compute_f32, int offload, int reshard) {
  fsdpc_layout lay;
  plan(S, &lay);
  int nu = lay.n_units, nfrozen = 0;
  for (int u = 0; u < nu; u++)
    nfrozen += lay.units[u].frozen;
  ck_assert_int_eq(nu - nfrozen, 3); /* one adapter unit per layer */
  fsdpc_program_opts o;
  fsdpc__program_opts_for(&lay, S, R, compute_f32, offload, reshard, 0, !compute_f32 && S > 1, 1, 1,
                          &o);
  fsdpc_program micro = {0}, opt = {0};
  fsdpc_err err;
  ck_assert(fsdpc__program_build(&o, FSDPC_PROGRAM_MICRO, &micro, &err) == FSDPC_OK);
  ck_assert(fsdpc__program_build(&o, FSDPC_PROGRAM_OPTIM, &opt, &err) == FSDPC_OK);
  int *g = calloc((size_t)nu, sizeof *g), *r = calloc((size_t)nu, sizeof *r);
  int *up = calloc((size_t)nu, sizeof *up), b0 = 0;
  walk(&lay, &o, &micro, g, r, up, &b0);
  walk(&lay, &o, &opt, g, r, up, &b0);
  ck_assert_msg(b0 == 0, "the frozen embedding's backward ran");
  for (int u = 0; u < nu; u++) {
    if (lay.units[u].frozen) {
      if (S == 1 && !offload)
        ck_assert_msg(g[u] == 0, "frozen %s gathered at S = 1", lay.units[u].name);
      continue;
    }
    ck_assert_int_eq(up[u], 1);
    ck_assert_int_eq(r[u], o.grads_in_shard ? 0 : 1);
  }
  free(g);
  free(r);
  free(up);
  fsdpc__program_free(&micro);
  fsdpc__program_free(&opt);
  fsdpc__layout_free(&lay);
}

START_TEST(full_shard_cpu) {
  run_case(2, 1, 1, 0, 1);
}
END_TEST
START_TEST(shard_grad_op_cuda) {
  run_case(4, 1, 0, 0, 0);
}
END_TEST
START_TEST(single_gpu_bf16) {
  run_case(1, 1, 0, 0, 1);
}
END_TEST
START_TEST(single_gpu_offload) {
  run_case(1, 1, 0, 1, 1);
}
END_TEST
START_TEST(hybrid_replicas) {
  run_case(2, 2, 1, 0, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("program_lora");
  TCase *tc = tcase_create("lora");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, full_shard_cpu);
  tcase_add_test(tc, shard_grad_op_cuda);
  tcase_add_test(tc, single_gpu_bf16);
  tcase_add_test(tc, single_gpu_offload);
  tcase_add_test(tc, hybrid_replicas);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
