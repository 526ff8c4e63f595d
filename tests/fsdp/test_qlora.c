/* QLoRA on the CPU engine (issue 37): with quantization.method nf4 the
 * frozen layer units hold their NF4 image (fsdp/nf4_unit.h) and a gather
 * dequantizes it:
 *   - the base the model computes with is, bit for bit, the seeded init
 *     quantized and dequantized by quant/nf4.c tensor by tensor (each
 *     projection whole, block 64, double quantization) with the norms,
 *     embedding and head unquantized; the layer units' shards are the NF4
 *     bytes the planner counts, under a sixth of their fp32 bytes;
 *   - the adapters' gradients match central finite differences of the loss
 *     (B != 0), with and without activation checkpointing; the base gets
 *     no gradient;
 *   - activation checkpointing gives the same loss and gradients bit for bit;
 *   - the run differs from the same run without quantization (the base
 *     really is quantized). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "fsdp/nf4_unit.h"
#include "quant/nf4.h"
#include "tiny_model.h"

typedef tiny_model fx;

static void setup(fx *f, int ckpt, int nf4) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "model: {vocab_size: 40, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2,\n"
           "        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 16,\n"
           "        tie_word_embeddings: false, init: {std: 0.2}}\n"
           "data: {seq_len: 12}\n"
           "attention: {impl: naive}\n"
           "train: {micro_batch_size: 2, seed: 5}\n"
           "fsdp: {activation_checkpointing: %s}\n"
           "peft: {method: lora, r: 3, alpha: 6, target_modules: [all-linear]}\n"
           "quantization: {method: %s}\n",
           ckpt ? "true" : "false", nf4 ? "nf4" : "none");
  tiny_model_open(f, yaml, "qlora.yaml", ckpt ? FSDPC_AC_FULL : 0);
  tiny_model_lm_batch(f, 40);
}

static void teardown(fx *f) {
  tiny_model_close(f);
}

/* An adapter's master values and gradient (world 1, CPU: fp32 shards). */
static float *adapter(fx *f, int p, float **grad) {
  int u;
  fsdpc__engine_param(f->eng, p, NULL, &u);
  ck_assert_msg(!fsdpc__engine_unit(f->eng, u)->frozen, "parameter %d is frozen", p);
  return tiny_master(f, p, grad);
}

/* B != 0: every adapter term contributes. */
static void set_b(fx *f) {
  tiny_set_b(f, 0.3f);
}

static double loss(void *f) {
  return tiny_loss(f);
}

START_TEST(base_is_nf4) {
  fx f;
  setup(&f, 0, 1);
  float map[FSDPC_DYN_CODES];
  fsdpc__dynamic_map(map);
  int layers = 0, nproj = 0;
  fsdpc_err err;
  for (int u = 0; u < fsdpc__engine_n_units(f.eng); u++) {
    const fsdpc_unit *un = fsdpc__engine_unit(f.eng, u);
    if (!un->frozen)
      continue;
    float *full = malloc(un->flat_numel * sizeof(float));
    ok(fsdpc__engine_gather_unit(f.eng, u, FSDPC_SD_SLOT_PARAM, 0, full, &err), &err);
    uint64_t want_bytes = 0;
    for (int i = 0; i < un->n_params; i++) {
      uint64_t off;
      const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, un->params[i], &off, NULL);
      float *x = malloc(pi->numel * sizeof(float)), *y = malloc(pi->numel * sizeof(float));
      fsdpc__model_init_range(pi, 5, 0.2, 0, pi->numel, x);
      int proj = pi->kind >= FSDPC_P_Q && pi->kind <= FSDPC_P_DOWN;
      if (proj) {
        uint64_t nb = fsdpc__nf4_blocks(pi->numel, 64);
        fsdpc_nf4 q = {.n = pi->numel,
                       .block_size = 64,
                       .double_quant = 1,
                       .codes = malloc((pi->numel + 1) / 2),
                       .absmax = malloc(nb * 4),
                       .qabsmax = malloc(nb),
                       .absmax2 = malloc(fsdpc__nf4_blocks2(pi->numel, 64) * 4)};
        ok(fsdpc__nf4_quantize(x, &q, pi->name, &err), &err);
        ok(fsdpc__nf4_dequantize(&q, map, 0, pi->numel, y, &err), &err);
        free(q.codes);
        free(q.absmax);
        free(q.qabsmax);
        free(q.absmax2);
        ck_assert_msg(memcmp(x, y, pi->numel * 4) != 0, "%s: NF4 changed nothing", pi->name);
        want_bytes += fsdpc__nf4_bytes(pi->numel, 64, 1);
        nproj++;
      } else {
        memcpy(y, x, pi->numel * sizeof(float));
        want_bytes += pi->numel * 4;
      }
      for (uint64_t k = 0; k < pi->numel; k++)
        ck_assert_msg(memcmp(&full[off + k], &y[k], 4) == 0, "%s[%llu]: %.9g, reference %.9g",
                      pi->name, (unsigned long long)k, full[off + k], y[k]);
      free(x);
      free(y);
    }
    if (un->nf4) { /* its shard: the image's bytes (world 1: all of them) */
      layers++;
      ck_assert_uint_eq(un->nf4_shard, want_bytes);
      ck_assert_msg(un->nf4_shard * 6 < un->flat_numel * 4, "%s: %llu bytes", un->name,
                    (unsigned long long)un->nf4_shard);
    }
    free(full);
  }
  ck_assert_int_eq(layers, 2);
  ck_assert_int_eq(nproj, 2 * 7);
  teardown(&f);
}
END_TEST

static void check_fd(int ckpt) {
  fx f;
  setup(&f, ckpt, 1);
  set_b(&f);
  double ls;
  int64_t cnt = 0;
  fsdpc_err err;
  ok(fsdpc__engine_eval(f.eng, f.m, &ls, &cnt, &err), &err);
  ok(fsdpc__engine_micro_step(f.eng, f.m, (float)(1.0 / (double)cnt), 1, &ls, &cnt, &err), &err);
  int checked = 0;
  for (int p = 0; p < fsdpc__engine_n_params(f.eng); p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, NULL, NULL);
    if (!fsdpc__lora_kind(pi->kind))
      continue;
    float *g, *w = adapter(&f, p, &g);
    ck_assert_ptr_nonnull(g);
    for (uint64_t k = 0; k < 2; k++) {
      uint64_t i = (k * 37 + (uint64_t)p) % pi->numel;
      double fd = tiny_central_diff(&w[i], loss, &f), an = g[i];
      ck_assert_msg(fabs(fd - an) <= 2e-3 + 2e-2 * fabs(fd),
                    "%s[%llu]: backward %.6g, finite differences %.6g", pi->name,
                    (unsigned long long)i, an, fd);
      checked++;
    }
  }
  ck_assert_int_eq(checked, 2 * 2 * 7 * 2);
  for (int u = 0; u < fsdpc__engine_n_units(f.eng); u++) /* no gradient for the base */
    ck_assert_msg(!fsdpc__engine_unit(f.eng, u)->frozen || !fsdpc__engine_unit(f.eng, u)->grad,
                  "unit %d: the frozen base has a gradient", u);
  teardown(&f);
}

START_TEST(fd_adapters) {
  check_fd(0);
}
END_TEST

START_TEST(fd_adapters_checkpointing) {
  check_fd(1);
}
END_TEST

/* One micro-step's loss and the adapters' gradients, concatenated. */
static float *step_grads(int ckpt, int nf4, double *ls, int *n) {
  fx f;
  setup(&f, ckpt, nf4);
  set_b(&f);
  int64_t cnt;
  fsdpc_err err;
  ok(fsdpc__engine_micro_step(f.eng, f.m, 0.05f, 1, ls, &cnt, &err), &err);
  int np = fsdpc__engine_n_params(f.eng), k = 0;
  float *out = calloc(1 << 16, sizeof(float));
  for (int p = f.plan->n_base_params; p < np; p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, NULL, NULL);
    float *g;
    adapter(&f, p, &g);
    ck_assert_uint_le(k + pi->numel, 1 << 16);
    memcpy(out + k, g, pi->numel * sizeof(float));
    k += (int)pi->numel;
  }
  *n = k;
  teardown(&f);
  return out;
}

START_TEST(checkpointing_exact_and_quantized) {
  double l0, l1, lq;
  int n0, n1, nq;
  float *g0 = step_grads(0, 1, &l0, &n0), *g1 = step_grads(1, 1, &l1, &n1);
  float *gq = step_grads(0, 0, &lq, &nq);
  ck_assert_int_eq(n0, n1);
  ck_assert_msg(l0 == l1, "checkpointing: loss %.17g, %.17g without", l1, l0);
  ck_assert_msg(memcmp(g0, g1, (size_t)n0 * 4) == 0, "checkpointing changed a gradient");
  ck_assert_msg(l0 != lq, "nf4 gives the unquantized loss %.17g", lq);
  ck_assert_msg(memcmp(g0, gq, (size_t)n0 * 4) != 0, "nf4 gives the unquantized gradients");
  free(g0);
  free(g1);
  free(gq);
}
END_TEST

int main(void) {
  Suite *s = suite_create("qlora");
  TCase *tc = tcase_create("engine");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, base_is_nf4);
  tcase_add_test(tc, fd_adapters);
  tcase_add_test(tc, fd_adapters_checkpointing);
  tcase_add_test(tc, checkpointing_exact_and_quantized);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
