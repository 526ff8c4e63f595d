/* The pieces of a quantized optimizer state under fsdp.offload.optimizer
 * (fsdp/qstream.c), on random unit layouts: parameters of random sizes
 * (some below min_numel: fp32 state), packed with no block alignment, cut
 * into shards of random ranks and sizes, random buffer sizes. Checks:
 * - the pieces cover each trainable unit's shard [0, shard_numel) in order,
 *   frozen units have none;
 * - every cut lies outside the parameters, inside a parameter with fp32
 *   state, or on a block bound of its quantized parameter (counted from the
 *   parameter's first element);
 * - each piece's buffer bytes (fsdpc__qspan_bytes) fit the buffer, and
 *   *max_bytes is the largest;
 * - the spans tile the unit's planes: each piece's fp32 / code / block
 *   offsets are the sums of the pieces before it, and the totals are
 *   fsdpc__qstate_count's;
 * - a piece is cut only when the next item did not fit (pieces are full). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/qstate.h"

#define NP 40
#define NU 5
#define BLOCK 256

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

START_TEST(pieces_random_layouts) {
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int trial = 0; trial < 300; trial++) {
    fsdpc_param_info params[NP];
    uint64_t offset[NP];
    memset(params, 0, sizeof params);
    fsdpc_unit units[NU];
    int idx[NU][NP];
    memset(units, 0, sizeof units);
    fsdpc_optim_qformat qf = {.struct_size = sizeof qf, .block = BLOCK};
    qf.min_numel = rnd(&seed) % 3 == 0 ? 0 : 1 + rnd(&seed) % 3000;
    uint32_t ns = 1 + (uint32_t)(rnd(&seed) % 2);
    int p = 0;
    for (int u = 0; u < NU; u++) {
      int n = 1 + (int)(rnd(&seed) % 8);
      uint64_t flat = 0;
      units[u].params = idx[u];
      for (int i = 0; i < n; i++, p++) {
        /* small norms, odd sizes, multi-block matrices */
        uint64_t numel = rnd(&seed) % 4 == 0 ? 1 + rnd(&seed) % 100 : 1 + rnd(&seed) % 6000;
        params[p].numel = numel;
        offset[p] = flat;
        flat += numel;
        idx[u][units[u].n_params++] = p;
      }
      int S = 1 + (int)(rnd(&seed) % 4);
      uint64_t quantum = (uint64_t)S * BLOCK;
      units[u].flat_numel = (flat + quantum - 1) / quantum * quantum;
      units[u].shard_numel = units[u].flat_numel / (uint64_t)S;
      units[u].shard_offset = (rnd(&seed) % (uint64_t)S) * units[u].shard_numel;
      units[u].frozen = rnd(&seed) % 7 == 0;
    }
    uint64_t buffer = 2048 + rnd(&seed) % 40000;
    fsdpc_state_pieces ps;
    uint64_t max_bytes = 0;
    fsdpc_err err = {0};
    ck_assert_msg(fsdpc__qstate_pieces_build(units, NU, params, offset, &qf, ns, buffer, &ps,
                                             &max_bytes, &err) == FSDPC_OK,
                  "%s", err.msg);
    int k = 0;
    uint64_t seen_max = 256;
    for (int u = 0; u < NU; u++) {
      const fsdpc_unit *un = &units[u];
      if (un->frozen) {
        ck_assert(k >= ps.n || ps.unit[k] != u);
        continue;
      }
      uint64_t nf, nq, nb;
      fsdpc__qstate_count(un, params, offset, &qf, &nf, &nq, &nb);
      uint64_t at = 0, f = 0, q = 0, b = 0;
      for (; k < ps.n && ps.unit[k] == u; k++) {
        ck_assert_uint_eq(ps.lo[k], at);
        ck_assert_uint_gt(ps.hi[k], ps.lo[k]);
        at = ps.hi[k];
        /* the cut at lo (0 is the shard's own boundary) */
        uint64_t x = un->shard_offset + ps.lo[k];
        for (int i = 0; ps.lo[k] > 0 && i < un->n_params; i++) {
          int pp = un->params[i];
          uint64_t p0 = offset[pp], p1 = p0 + params[pp].numel;
          if (x > p0 && x < p1 && params[pp].numel >= qf.min_numel)
            ck_assert_msg((x - p0) % BLOCK == 0,
                          "trial %d: cut %llu inside a block of [%llu, %llu) (shard at %llu, "
                          "min_numel %llu)",
                          trial, (unsigned long long)x, (unsigned long long)p0,
                          (unsigned long long)p1, (unsigned long long)un->shard_offset,
                          (unsigned long long)qf.min_numel);
        }
        fsdpc_qspan sp;
        fsdpc__qstate_span(un, params, offset, &qf, ps.lo[k], ps.hi[k], &sp);
        ck_assert_uint_eq(sp.f_lo, f);
        ck_assert_uint_eq(sp.q_lo, q);
        ck_assert_uint_eq(sp.b_lo, b);
        f += sp.f_len;
        q += sp.q_len;
        b += sp.b_len;
        uint64_t bytes = fsdpc__qspan_bytes(ns, &sp);
        ck_assert_uint_le(bytes, buffer);
        seen_max = bytes > seen_max ? bytes : seen_max;
        /* full: the piece and the next one's first bytes exceed the budget */
        if (k + 1 < ps.n && ps.unit[k + 1] == u) {
          fsdpc_qspan both;
          uint64_t lo = ps.lo[k], hi = ps.hi[k + 1];
          fsdpc__qstate_span(un, params, offset, &qf, lo, hi, &both);
          ck_assert_uint_gt(fsdpc__qspan_bytes(ns, &both), buffer - 512);
        }
      }
      ck_assert_uint_eq(at, un->shard_numel);
      ck_assert_uint_eq(f, nf);
      ck_assert_uint_eq(q, nq);
      ck_assert_uint_eq(b, nb);
    }
    ck_assert_int_eq(k, ps.n);
    ck_assert_uint_eq(seen_max, max_bytes);
    fsdpc__state_pieces_free(&ps);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("qstream");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, pieces_random_layouts);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
