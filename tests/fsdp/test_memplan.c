/* The planned arena (fsdp/arena_layout.h, fsdp/memplan.h):
 * - the layout on random buffers and lifetimes: two buffers live together
 *   never share a byte, offsets are aligned, the same input gives the same
 *   offsets, and the arena is never smaller than the most bytes live at once;
 * - the memory plans of CUDA runs (planned offline: no GPU is needed to lay
 *   one out), under every strategy at world 1, 2 and 4, with prefetching,
 *   bf16 reduction, no_sync, keep_params, cpu_offload, offload.optimizer,
 *   LoRA and optim.in_backward (each unit's update and its transient grad
 *   shard in the backward): the plan's own replay of the step programs (accesses per stream,
 *   events recorded and waited, host joins) is executed many times with
 *   random durations, each stream in order and each wait after its event,
 *   and no two buffers that share bytes are ever accessed at overlapping
 *   times. This checks the vector-clock reasoning of memplan.c against an
 *   independent, time-based execution; fsdp/step.c issues those very events
 *   (docs/fsdp.md). Plans are deterministic. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fsdp/arena_layout.h"
#include "fsdp/memplan.h"
#include "fsdp/qstate.h"
#include "runplan/runplan.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* ---- the layout on random inputs ---- */

START_TEST(layout_random) {
  enum { N = 60, MAXIV = 3 };
  for (int trial = 0; trial < 300; trial++) {
    uint64_t bytes[N], off[N], off2[N], total, total2;
    int first[N + 1], n = 1 + (int)(next() % N), k = 0;
    int64_t lo[N * MAXIV], hi[N * MAXIV];
    for (int i = 0; i < n; i++) {
      bytes[i] = next() % 4 == 0 ? 0 : 1 + next() % 5000;
      first[i] = k;
      int m = 1 + (int)(next() % MAXIV);
      for (int j = 0; j < m; j++, k++) {
        lo[k] = (int64_t)(next() % 100);
        hi[k] = lo[k] + 1 + (int64_t)(next() % 30);
      }
    }
    first[n] = k;
    fsdpc_alay_intervals iv = {.first = first, .lo = lo, .hi = hi};
    fsdpc_err err = {0};
    ck_assert(fsdpc__arena_layout(bytes, n, 256, fsdpc__alay_intervals_conflict, &iv, off, &total,
                                  &err) == FSDPC_OK);
    ck_assert(fsdpc__arena_layout(bytes, n, 256, fsdpc__alay_intervals_conflict, &iv, off2, &total2,
                                  &err) == FSDPC_OK);
    ck_assert_uint_eq(total, total2);
    uint64_t live_max = 0;
    for (int t = 0; t < 140; t++) { /* the most bytes live at once: a lower bound */
      uint64_t live = 0;
      for (int i = 0; i < n; i++)
        for (int j = first[i]; j < first[i + 1]; j++)
          if (lo[j] <= t && t < hi[j]) {
            live += (bytes[i] + 255) / 256 * 256;
            break;
          }
      live_max = live > live_max ? live : live_max;
    }
    ck_assert_uint_ge(total, live_max);
    for (int i = 0; i < n; i++) {
      ck_assert_uint_eq(off[i], off2[i]);
      ck_assert_uint_eq(off[i] % 256, 0);
      ck_assert_uint_le(off[i] + bytes[i], total);
      for (int j = 0; j < i; j++) {
        if (!bytes[i] || !bytes[j] || !fsdpc__alay_intervals_conflict(&iv, i, j))
          continue;
        ck_assert_msg(off[i] + bytes[i] <= off[j] || off[j] + bytes[j] <= off[i],
                      "trial %d: live buffers %d and %d share bytes", trial, i, j);
      }
    }
  }
}
END_TEST

/* ---- the plans of CUDA runs under random timing ---- */

typedef struct trace {
  fsdpc_mp_op *op;
  int n, cap;
} trace;

static void keep(void *ctx, const fsdpc_mp_op *op) {
  trace *t = ctx;
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 4096;
    t->op = realloc(t->op, (size_t)t->cap * sizeof *t->op);
    ck_assert_ptr_nonnull(t->op);
  }
  t->op[t->n++] = *op;
}

typedef struct span {
  double start, end;
  uint64_t offset, bytes;
  int used;
} span;

/* Runs the trace of one timeline with random durations and checks that
 * buffer instances that share bytes are never accessed at overlapping
 * times. Returns the number of instance pairs that share bytes (checked). */
static int run_once(const trace *t, int timeline) {
  enum { MAXI = 8192, MAXE = 65536 };
  static span in[MAXI];
  static double rec[MAXE];
  memset(in, 0, sizeof in);
  double at[3] = {0, 0, 0}; /* when each stream is next free */
  double done = 0;          /* when everything issued so far ends (a join) */
  int64_t group_pos = -1;   /* accesses of one position: one operation */
  int group_stream = -1;
  double gstart = 0, gend = 0;
  for (int k = 0; k < t->n; k++) {
    const fsdpc_mp_op *o = &t->op[k];
    if (o->timeline != timeline)
      continue;
    int s = o->stream;
    switch (o->kind) {
    case FSDPC_MP_ACCESS: {
      if (o->pos != group_pos || s != group_stream) { /* a new operation */
        gstart = at[s] + (double)(next() % 4);
        gend = gstart + 1 + (double)(next() % 20);
        at[s] = gend;
        group_pos = o->pos;
        group_stream = s;
      }
      ck_assert_int_lt(o->inst, MAXI);
      span *p = &in[o->inst];
      if (!p->used)
        *p = (span){gstart, gend, o->offset, o->bytes, 1};
      p->start = gstart < p->start ? gstart : p->start;
      p->end = gend > p->end ? gend : p->end;
      break;
    }
    case FSDPC_MP_RECORD:
      ck_assert_int_lt(o->event, MAXE);
      rec[o->event] = at[s]; /* complete once the stream's work before it is */
      group_pos = -1;
      break;
    case FSDPC_MP_WAIT:
      at[s] = rec[o->event] > at[s] ? rec[o->event] : at[s];
      group_pos = -1;
      break;
    default: /* JOIN: the host waited for every stream */
      for (int x = 0; x < 3; x++)
        done = at[x] > done ? at[x] : done;
      for (int x = 0; x < 3; x++)
        at[x] = done;
      group_pos = -1;
    }
  }
  int pairs = 0;
  for (int i = 0; i < MAXI; i++) {
    if (!in[i].used || !in[i].bytes)
      continue;
    for (int j = 0; j < i; j++) {
      if (!in[j].used || !in[j].bytes)
        continue;
      if (in[i].offset + in[i].bytes <= in[j].offset || in[j].offset + in[j].bytes <= in[i].offset)
        continue;
      pairs++;
      ck_assert_msg(in[i].end <= in[j].start || in[j].end <= in[i].start,
                    "timeline %d: buffers %d and %d share bytes [%llu, +%llu) but are accessed "
                    "at once ([%.0f, %.0f) and [%.0f, %.0f))",
                    timeline, i, j, (unsigned long long)in[i].offset,
                    (unsigned long long)in[i].bytes, in[i].start, in[i].end, in[j].start,
                    in[j].end);
    }
  }
  return pairs;
}

static const char *yaml = "model: {vocab_size: 259, hidden_size: 64, intermediate_size: 160,\n"
                          "        num_hidden_layers: 4, num_attention_heads: 4,\n"
                          "        num_key_value_heads: 2, max_position_embeddings: 64,\n"
                          "        tie_word_embeddings: false}\n"
                          "data: {seq_len: 32}\n"
                          "attention: {impl: naive}\n"
                          "train: {device: cuda, micro_batch_size: 2, global_batch_size: 16}\n";

/* The plan of rank 0 of a CUDA run of yaml + overrides at `world`, traced. */
static void plan_case(const char *const *ov, int n, int world, int *shared) {
  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  ck_assert_msg(fsdpc__config_from_string(yaml, "t.yaml", ov, n, &cfg, &err) == FSDPC_OK, "%s",
                err.msg);
  /* planned as `fsdpc plan` does: the plugins of one rank, the modes of
   * the world (no collectives plugin is needed) */
  fsdpc_run_world one = {1, 1}, w = {world, world};
  fsdpc_run_plan *p = NULL;
  ck_assert_msg(fsdpc__run_plan_create(cfg, &one, FSDPC_RUN_PLAN_OFFLINE, &p, &err) == FSDPC_OK,
                "%s", err.msg);
  fsdpc_run_modes m;
  ck_assert_msg(fsdpc__run_modes_resolve(cfg, NULL, &w, &m, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_run_exec ex;
  fsdpc__run_exec_resolve(p, &m, 0, &ex);
  const fsdpc_run_exec *x = &ex;
  fsdpc_layout lay;
  ck_assert(fsdpc__layout_build(&p->shape, p->params, p->n_params, p->unit_of_param, p->n_units,
                                x->S, x->align, 0, &lay, &err) == FSDPC_OK);
  fsdpc_state_pieces ps = {0};
  if (x->offload_optim)
    ck_assert(fsdpc__state_pieces_build(
                  &lay, fsdpc__state_piece_elems(x->offload_buffer_bytes, x->n_slots), &ps, &err) ==
              FSDPC_OK);
  trace t = {0}, t2 = {0};
  fsdpc_memplan_in in = {.x = x,
                         .lay = &lay,
                         .params = p->params,
                         .qf = &p->qf,
                         .pieces = x->offload_optim ? &ps : NULL,
                         .sbuf_bytes = ps.max_len * 4 * x->n_slots,
                         .act_bytes = 4096,
                         .act_tracked = 4000,
                         .trace = keep,
                         .trace_ctx = &t};
  fsdpc_memplan a, b;
  ck_assert_msg(fsdpc__memplan_build(&in, &a, &err) == FSDPC_OK, "%s", err.msg);
  in.trace_ctx = &t2;
  ck_assert_msg(fsdpc__memplan_build(&in, &b, &err) == FSDPC_OK, "%s", err.msg);
  /* deterministic */
  ck_assert_uint_eq(a.arena_bytes, b.arena_bytes);
  ck_assert_int_eq(t.n, t2.n);
  for (int s = 0; s < FSDPC_MP_NSLOTS; s++)
    for (int i = 0; a.has[s] && i < 2 * a.prog[s].n; i++)
      ck_assert_uint_eq(a.off[s][i], b.off[s][i]);
  /* the run's overlap shows up as more than one stream in the trace */
  int streams = 0;
  for (int k = 0; k < t.n; k++)
    streams |= 1 << t.op[k].stream;
  if (streams) /* a run with nothing transient (S == 1 with param_copy) has no trace */
    ck_assert_int_eq((streams & ~1) != 0, x->overlap);
  for (int trial = 0; trial < 40; trial++) {
    *shared += run_once(&t, 0);
    run_once(&t, 1);
  }
  free(t.op);
  free(t2.op);
  fsdpc__memplan_free(&a);
  fsdpc__memplan_free(&b);
  fsdpc__state_pieces_free(&ps);
  fsdpc__layout_free(&lay);
  fsdpc__run_plan_destroy(p);
  fsdpc__config_destroy(cfg);
}

START_TEST(cuda_plans_under_random_timing) {
  const char *cases[][4] = {
      {"fsdp.sharding_strategy=FULL_SHARD", "", "", ""},
      {"fsdp.sharding_strategy=SHARD_GRAD_OP", "fsdp.mixed_precision.reduce_dtype=bf16", "", ""},
      {"fsdp.sharding_strategy=HYBRID_SHARD", "fsdp.hybrid_shard_size=2", "", ""},
      {"fsdp.sharding_strategy=NO_SHARD", "fsdp.mixed_precision.reduce_dtype=bf16", "", ""},
      {"fsdp.forward_prefetch=false", "fsdp.backward_prefetch=false", "", ""},
      {"fsdp.no_sync=true", "fsdp.keep_params=all", "", ""},
      {"fsdp.keep_params=first", "fsdp.activation_checkpointing=true", "", ""},
      {"fsdp.cpu_offload=true", "", "", ""},
      {"fsdp.cpu_offload=true", "fsdp.no_sync=true", "", ""},
      {"fsdp.offload.optimizer=true", "fsdp.offload.buffer_mib=0.05", "", ""},
      {"fsdp.param_copy=true", "", "", ""},
      {"peft.method=lora", "peft.target_modules=[q_proj, v_proj]", "fsdp.cpu_offload=false", ""},
      {"peft.method=lora", "peft.target_modules=[all-linear]", "fsdp.cpu_offload=true", ""},
  };
  /* the same with optim.in_backward (one micro-batch a step, no clipping) */
  const char *in_bwd[][4] = {
      {"fsdp.sharding_strategy=FULL_SHARD", "", "", ""},
      {"fsdp.sharding_strategy=SHARD_GRAD_OP", "fsdp.mixed_precision.reduce_dtype=bf16", "", ""},
      {"fsdp.sharding_strategy=HYBRID_SHARD", "fsdp.hybrid_shard_size=2", "", ""},
      {"fsdp.sharding_strategy=NO_SHARD", "fsdp.mixed_precision.reduce_dtype=bf16", "", ""},
      {"fsdp.param_copy=true", "fsdp.backward_prefetch=false", "", ""},
      {"peft.method=lora", "peft.target_modules=[q_proj, v_proj]",
       "fsdp.activation_checkpointing=true", ""},
  };
  const int n_plain = (int)(sizeof cases / sizeof cases[0]);
  const int n_in_bwd = (int)(sizeof in_bwd / sizeof in_bwd[0]);
  const int worlds[] = {1, 2, 4};
  int shared = 0;
  for (int c = 0; c < n_plain + n_in_bwd; c++) {
    const char *const *row = c < n_plain ? cases[c] : in_bwd[c - n_plain];
    const char *ov[7];
    int n = 0;
    if (c >= n_plain) {
      ov[n++] = "optim.in_backward=true";
      ov[n++] = "train.max_grad_norm=0";
      ov[n++] = "train.global_batch_size=0";
    }
    for (int k = 0; k < 4; k++)
      if (row[k][0])
        ov[n++] = row[k];
    for (int wi = 0; wi < 3; wi++) {
      if (strstr(row[0], "HYBRID") && worlds[wi] != 4)
        continue;
      plan_case(ov, n, worlds[wi], &shared);
    }
  }
  /* the plans do share bytes: the check is not vacuous */
  ck_assert_int_gt(shared, 1000);
}
END_TEST

int main(void) {
  Suite *s = suite_create("memplan");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, layout_random);
  tcase_add_test(tc, cuda_plans_under_random_timing);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
