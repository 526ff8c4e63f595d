/* Packing loader: EOS placement, window overlap and label shift, loss mask,
 * doc ids, shuffle determinism, world-size independence of the global batch,
 * eval split disjointness, state/restore and argument errors.
 *
 * The test builds a file whose documents have distinct, known tokens and
 * recomputes the packed stream independently as the oracle. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"
#include "data/rng.h"
#include "data_testutil.h"

#define VOCAB 5000
#define EOS 4999
#define N_DOCS 60

/* Document d has length len_of(d) (some are empty) and token i = 1 + (d*31 +
 * i) % 4000. With mask, the first half of each document is context. */
static int64_t len_of(int64_t d) { return d % 7 == 3 ? 0 : 1 + (d * 13) % 29; }
static int32_t tok_of(int64_t d, int64_t i) { return (int32_t)(1 + (d * 31 + i) % 4000); }
static int target_of(int64_t d, int64_t i, int with_mask) {
  return !with_mask || i >= len_of(d) / 2;
}

typedef struct oracle {
  int32_t *tok; /* (L) packed stream */
  uint8_t *tgt; /* (L) 1 if a training target */
  int32_t *doc; /* (L) global document index (EOS belongs to its document) */
  int64_t L;
} oracle;

static char g_path[512], g_mask_path[512];
static oracle g_stream, g_mask_stream;

static void build(const char *path, int with_mask, oracle *o) {
  fsdpc_err err = {0};
  fsdpc_tokfile_writer *w;
  ck_assert_int_eq(fsdpc__tokfile_writer_create(path, VOCAB, EOS, with_mask, &w, &err), FSDPC_OK);
  int64_t L = 0;
  for (int64_t d = 0; d < N_DOCS; d++)
    L += len_of(d) + 1;
  o->tok = malloc((size_t)L * sizeof *o->tok);
  o->tgt = malloc((size_t)L);
  o->doc = malloc((size_t)L * sizeof *o->doc);
  o->L = L;
  int64_t p = 0;
  for (int64_t d = 0; d < N_DOCS; d++) {
    int32_t t[64];
    uint8_t m[64];
    for (int64_t i = 0; i < len_of(d); i++) {
      t[i] = tok_of(d, i);
      m[i] = (uint8_t)target_of(d, i, with_mask);
      o->tok[p] = t[i], o->tgt[p] = m[i], o->doc[p] = (int32_t)d, p++;
    }
    o->tok[p] = EOS, o->tgt[p] = 1, o->doc[p] = (int32_t)d, p++;
    ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, t, with_mask ? m : NULL, len_of(d), &err),
                     FSDPC_OK);
  }
  ck_assert_int_eq(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  fsdpc__tokfile_writer_destroy(w);
}

static void setup(void) {
  tmp_path(g_path, sizeof g_path, "loader.tok");
  tmp_path(g_mask_path, sizeof g_mask_path, "loader_mask.tok");
  build(g_path, 0, &g_stream);
  build(g_mask_path, 1, &g_mask_stream);
}

static void teardown(void) {
  unlink(g_path);
  unlink(g_mask_path);
  oracle *os[] = {&g_stream, &g_mask_stream};
  for (int i = 0; i < 2; i++)
    free(os[i]->tok), free(os[i]->tgt), free(os[i]->doc);
}

static fsdpc_tokfile *open_tf(const char *path) {
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_msg(fsdpc__tokfile_open(path, &tf, &err) == FSDPC_OK, "%s", err.msg);
  return tf;
}

static fsdpc_loader *make(const fsdpc_tokfile *tf, int32_t T, int64_t G, uint64_t seed,
                          int32_t shuffle, int32_t split, double frac) {
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  o.seq_len = T, o.global_batch = G, o.seed = seed, o.shuffle = shuffle, o.split = split;
  o.eval_fraction = frac;
  fsdpc_err err = {0};
  fsdpc_loader *l;
  ck_assert_msg(fsdpc__loader_create(tf, &o, &l, &err) == FSDPC_OK, "%s", err.msg);
  return l;
}

/* Checks window k of file against the oracle stream. */
static void check_window(const oracle *o, int64_t k, int32_t T, const int32_t *tokens,
                         const int32_t *labels, const int32_t *doc_ids) {
  int64_t p = k * T;
  for (int32_t j = 0; j < T; j++) {
    ck_assert_int_eq(tokens[j], o->tok[p + j]);
    int32_t want = o->tgt[p + j + 1] ? o->tok[p + j + 1] : FSDPC_IGNORE_INDEX;
    ck_assert_int_eq(labels[j], want);
    ck_assert_int_eq(doc_ids[j], o->doc[p + j] - o->doc[p]);
  }
}

START_TEST(rng_reference_values) {
  uint64_t x = 1234567; /* splitmix64's published test vector */
  ck_assert_uint_eq(fsdpc__splitmix64(&x), UINT64_C(6457827717110365317));
  ck_assert_uint_eq(fsdpc__splitmix64(&x), UINT64_C(3203168211198807973));
  ck_assert_uint_eq(fsdpc__splitmix64(&x), UINT64_C(9817491932198370423));
  fsdpc_rng r;
  fsdpc__rng_seed(&r, 0);
  ck_assert_uint_eq(fsdpc__rng_next(&r), UINT64_C(11091344671253066420));
  ck_assert_uint_eq(fsdpc__rng_next(&r), UINT64_C(13793997310169335082));
  ck_assert_uint_eq(fsdpc__rng_next(&r), UINT64_C(1900383378846508768));
  int hist[3] = {0};
  for (int i = 0; i < 3000; i++)
    hist[fsdpc__rng_below(&r, 3)]++;
  for (int i = 0; i < 3; i++)
    ck_assert(hist[i] > 850 && hist[i] < 1150);
}
END_TEST

START_TEST(packing_matches_stream) {
  fsdpc_tokfile *tf = open_tf(g_path);
  int32_t Ts[] = {1, 5, 16, 33};
  for (int t = 0; t < 4; t++) {
    int32_t T = Ts[t];
    fsdpc_loader *l = make(tf, T, 1, 0, 0, FSDPC_SPLIT_ALL, 0);
    int64_t W = fsdpc__loader_num_windows(l);
    ck_assert_int_eq(W, (g_stream.L - 1) / T);
    ck_assert_int_eq(fsdpc__loader_total_windows(l), W);
    int32_t *tok = malloc(2 * T * sizeof *tok), *lab = malloc(2 * T * sizeof *lab);
    int32_t *doc = malloc(2 * T * sizeof *doc);
    fsdpc_err err = {0};
    for (int64_t k = 0; k < W; k++) {
      ck_assert_int_eq(fsdpc__loader_window(l, k, tok, lab, doc, &err), FSDPC_OK);
      check_window(&g_stream, k, T, tok, lab, doc);
      if (k + 1 < W) { /* consecutive windows share exactly one token */
        ck_assert_int_eq(fsdpc__loader_window(l, k + 1, tok + T, lab + T, doc + T, &err), FSDPC_OK);
        ck_assert_int_eq(lab[T - 1], tok[T]);
      }
    }
    ck_assert_int_ne(fsdpc__loader_window(l, W, tok, lab, NULL, &err), FSDPC_OK);
    ASSERT_ONE_LINE_ERROR(err, "outside the split");
    free(tok), free(lab), free(doc);
    fsdpc__loader_destroy(l);
  }
  fsdpc__tokfile_close(tf);
}
END_TEST

/* The oracle agrees with the format's rule by construction; this pins the
 * rule itself on a tiny hand-written example. */
START_TEST(eos_between_documents_by_hand) {
  char path[512];
  tmp_path(path, sizeof path, "hand.tok");
  fsdpc_err err = {0};
  fsdpc_tokfile_writer *w;
  ck_assert_int_eq(fsdpc__tokfile_writer_create(path, 10, 9, 0, &w, &err), FSDPC_OK);
  int32_t a[] = {1, 2, 3}, b[] = {4, 5};
  ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, a, NULL, 3, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, b, NULL, 2, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, a, NULL, 1, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  fsdpc__tokfile_writer_destroy(w);
  /* stream: 1 2 3 E 4 5 E 1 E (L = 9); T = 4 -> W = 2 windows */
  fsdpc_tokfile *tf = open_tf(path);
  fsdpc_loader *l = make(tf, 4, 1, 0, 0, FSDPC_SPLIT_ALL, 0);
  ck_assert_int_eq(fsdpc__loader_num_windows(l), 2);
  int32_t tok[4], lab[4], doc[4];
  ck_assert_int_eq(fsdpc__loader_window(l, 0, tok, lab, doc, &err), FSDPC_OK);
  int32_t t0[] = {1, 2, 3, 9}, l0[] = {2, 3, 9, 4}, d0[] = {0, 0, 0, 0};
  ck_assert_int_eq(memcmp(tok, t0, sizeof t0), 0);
  ck_assert_int_eq(memcmp(lab, l0, sizeof l0), 0);
  ck_assert_int_eq(memcmp(doc, d0, sizeof d0), 0);
  ck_assert_int_eq(fsdpc__loader_window(l, 1, tok, lab, doc, &err), FSDPC_OK);
  int32_t t1[] = {4, 5, 9, 1}, l1[] = {5, 9, 1, 9}, d1[] = {0, 0, 0, 1};
  ck_assert_int_eq(memcmp(tok, t1, sizeof t1), 0);
  ck_assert_int_eq(memcmp(lab, l1, sizeof l1), 0);
  ck_assert_int_eq(memcmp(doc, d1, sizeof d1), 0);
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
  unlink(path);
}
END_TEST

START_TEST(loss_mask_gives_ignore_labels) {
  fsdpc_tokfile *tf = open_tf(g_mask_path);
  int32_t T = 16;
  fsdpc_loader *l = make(tf, T, 4, 7, 1, FSDPC_SPLIT_ALL, 0);
  int32_t tok[16], lab[16], doc[16];
  fsdpc_err err = {0};
  int64_t ignored = 0, W = fsdpc__loader_num_windows(l);
  for (int64_t k = 0; k < W; k++) {
    ck_assert_int_eq(fsdpc__loader_window(l, k, tok, lab, doc, &err), FSDPC_OK);
    check_window(&g_mask_stream, k, T, tok, lab, doc);
    for (int j = 0; j < T; j++)
      ignored += lab[j] == FSDPC_IGNORE_INDEX;
  }
  ck_assert_int_gt(ignored, W); /* the mask really bites */
  /* count_labels equals a direct count over the global batch's windows. */
  for (int64_t step = 0; step < 3; step++) {
    int64_t count, want = 0;
    ck_assert_int_eq(fsdpc__loader_count_labels(l, step, 4, &count, &err), FSDPC_OK);
    for (int32_t m = 0; m < 4; m++) {
      ck_assert_int_eq(fsdpc__loader_batch(l, step, m, 0, 1, 1, tok, lab, NULL, &err), FSDPC_OK);
      for (int j = 0; j < T; j++)
        want += lab[j] != FSDPC_IGNORE_INDEX;
    }
    ck_assert_int_eq(count, want);
    ck_assert_int_lt(count, 4 * T);
  }
  ck_assert_int_ne(fsdpc__loader_count_labels(l, 0, 8, &(int64_t){0}, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "global batch of 8");
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
  /* Without a mask every label counts. */
  tf = open_tf(g_path);
  l = make(tf, T, 4, 7, 1, FSDPC_SPLIT_ALL, 0);
  int64_t count;
  ck_assert_int_eq(fsdpc__loader_count_labels(l, 1, 4, &count, &err), FSDPC_OK);
  ck_assert_int_eq(count, 4 * T);
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
}
END_TEST

/* The visiting order of one epoch: split indices at every batch position. */
static int64_t *epoch_order(fsdpc_loader *l, int64_t epoch, int64_t G) {
  int64_t spe = fsdpc__loader_steps_per_epoch(l), n = spe * G;
  int64_t *order = malloc((size_t)n * sizeof *order);
  fsdpc_err err = {0};
  for (int64_t s = 0; s < spe; s++)
    for (int64_t p = 0; p < G; p++)
      ck_assert_int_eq(fsdpc__loader_batch_window(l, epoch * spe + s, p, &order[s * G + p], &err),
                       FSDPC_OK);
  return order;
}

START_TEST(shuffle_is_deterministic_permutation) {
  fsdpc_tokfile *tf = open_tf(g_path);
  int32_t T = 8;
  int64_t G = 1;
  fsdpc_loader *a = make(tf, T, G, 42, 1, FSDPC_SPLIT_ALL, 0);
  fsdpc_loader *b = make(tf, T, G, 42, 1, FSDPC_SPLIT_ALL, 0);
  fsdpc_loader *c = make(tf, T, G, 43, 1, FSDPC_SPLIT_ALL, 0);
  fsdpc_loader *off = make(tf, T, G, 42, 0, FSDPC_SPLIT_ALL, 0);
  int64_t n = fsdpc__loader_num_windows(a);
  ck_assert_int_gt(n, 50);
  int64_t *oa = epoch_order(a, 0, G), *ob = epoch_order(b, 0, G), *oc = epoch_order(c, 0, G);
  int64_t *oa1 = epoch_order(a, 1, G), *oo = epoch_order(off, 0, G);
  ck_assert_int_eq(memcmp(oa, ob, (size_t)n * sizeof *oa), 0);
  ck_assert_int_ne(memcmp(oa, oc, (size_t)n * sizeof *oa), 0);
  ck_assert_int_ne(memcmp(oa, oa1, (size_t)n * sizeof *oa), 0); /* reshuffled per epoch */
  /* Each order is a permutation of [0, n); shuffle off is the identity. */
  int64_t *orders[] = {oa, oc, oa1};
  for (int k = 0; k < 3; k++) {
    uint8_t *seen = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) {
      ck_assert(orders[k][i] >= 0 && orders[k][i] < n);
      ck_assert_int_eq(seen[orders[k][i]]++, 0);
    }
    free(seen);
  }
  for (int64_t i = 0; i < n; i++)
    ck_assert_int_eq(oo[i], i);
  /* The order is a pure function of (seed, epoch): revisiting epoch 0 after
   * epoch 1 gives the same order again. */
  int64_t *oa0 = epoch_order(a, 0, G);
  ck_assert_int_eq(memcmp(oa, oa0, (size_t)n * sizeof *oa), 0);
  /* Pinned first elements (checked against an independent Python version
   * of splitmix64 + xoshiro256** + Fisher-Yates): the shuffle must be stable
   * across platforms and releases, or every training run silently changes. */
  ck_assert_int_eq(n, 102);
  fsdpc_loader *pin = make(tf, T, 1, 1234, 1, FSDPC_SPLIT_ALL, 0);
  int64_t *op = epoch_order(pin, 0, 1);
  ck_assert_int_eq(op[0], 99);
  ck_assert_int_eq(op[1], 58);
  ck_assert_int_eq(op[2], 17);
  ck_assert_int_eq(op[3], 26);
  free(op);
  fsdpc__loader_destroy(pin);
  free(oa), free(ob), free(oc), free(oa1), free(oo), free(oa0);
  fsdpc__loader_destroy(a), fsdpc__loader_destroy(b), fsdpc__loader_destroy(c);
  fsdpc__loader_destroy(off);
  fsdpc__tokfile_close(tf);
}
END_TEST

/* Gathers the global batch of `step` as a (G, T) array from every (micro,
 * rank) slice of the given layout, placing each slice where the loader says
 * it belongs, and checks every window is filled once. */
static void gather_global(fsdpc_loader *l, int64_t step, int32_t T, int64_t G, int32_t mb,
                          int32_t dp, int32_t *tokens, int32_t *labels, int32_t *docs) {
  int32_t accum = (int32_t)(G / (mb * dp));
  ck_assert_int_eq((int64_t)accum * mb * dp, G);
  int32_t *t = malloc((size_t)mb * T * sizeof *t), *lb = malloc((size_t)mb * T * sizeof *lb);
  int32_t *d = malloc((size_t)mb * T * sizeof *d);
  fsdpc_err err = {0};
  for (int32_t m = 0; m < accum; m++)
    for (int32_t r = 0; r < dp; r++) {
      ck_assert_int_eq(fsdpc__loader_batch(l, step, m, r, dp, mb, t, lb, d, &err), FSDPC_OK);
      int64_t at = ((int64_t)m * dp + r) * mb; /* the documented mapping */
      memcpy(tokens + at * T, t, (size_t)mb * T * sizeof *t);
      memcpy(labels + at * T, lb, (size_t)mb * T * sizeof *lb);
      memcpy(docs + at * T, d, (size_t)mb * T * sizeof *d);
    }
  free(t), free(lb), free(d);
}

START_TEST(global_batch_is_world_size_independent) {
  fsdpc_tokfile *tf = open_tf(g_mask_path);
  int32_t T = 12;
  int64_t G = 8;
  fsdpc_loader *l = make(tf, T, G, 99, 1, FSDPC_SPLIT_ALL, 0);
  /* (micro_batch, dp): (2,1)=accum 4, (2,2)=accum 2, (2,4)=accum 1, plus
   * (1,2)=accum 4 and (8,1)=accum 1. */
  int32_t layouts[][2] = {{2, 1}, {2, 2}, {2, 4}, {1, 2}, {8, 1}};
  size_t bytes = (size_t)G * T * sizeof(int32_t);
  int32_t *ref_t = malloc(bytes), *ref_l = malloc(bytes), *ref_d = malloc(bytes);
  int32_t *t = malloc(bytes), *lb = malloc(bytes), *d = malloc(bytes);
  fsdpc_err err = {0};
  int64_t spe = fsdpc__loader_steps_per_epoch(l);
  int64_t steps[] = {0, 1, spe - 1, spe, 2 * spe + 3};
  for (int si = 0; si < 5; si++) {
    int64_t step = steps[si];
    /* Reference: window at each batch position, read directly. */
    for (int64_t p = 0; p < G; p++) {
      int64_t idx;
      ck_assert_int_eq(fsdpc__loader_batch_window(l, step, p, &idx, &err), FSDPC_OK);
      ck_assert_int_eq(
          fsdpc__loader_window(l, idx, ref_t + p * T, ref_l + p * T, ref_d + p * T, &err),
          FSDPC_OK);
    }
    for (int k = 0; k < 5; k++) {
      memset(t, 0x7f, bytes);
      gather_global(l, step, T, G, layouts[k][0], layouts[k][1], t, lb, d);
      ck_assert_msg(memcmp(t, ref_t, bytes) == 0, "tokens differ: layout %d step %lld", k,
                    (long long)step);
      ck_assert_int_eq(memcmp(lb, ref_l, bytes), 0);
      ck_assert_int_eq(memcmp(d, ref_d, bytes), 0);
    }
  }
  /* Within an epoch the global batches are disjoint sets of windows. */
  int64_t *order = epoch_order(l, 1, G);
  int64_t n = fsdpc__loader_num_windows(l);
  uint8_t *seen = calloc((size_t)n, 1);
  for (int64_t i = 0; i < spe * G; i++)
    ck_assert_int_eq(seen[order[i]]++, 0);
  free(seen), free(order);
  free(ref_t), free(ref_l), free(ref_d), free(t), free(lb), free(d);
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
}
END_TEST

START_TEST(eval_split_is_disjoint_and_seed_independent) {
  fsdpc_tokfile *tf = open_tf(g_path);
  int32_t T = 4;
  double frac = 0.2;
  fsdpc_loader *tr = make(tf, T, 1, 1, 1, FSDPC_SPLIT_TRAIN, frac);
  fsdpc_loader *ev = make(tf, T, 1, 1, 1, FSDPC_SPLIT_EVAL, frac);
  fsdpc_loader *ev2 = make(tf, T, 1, 777, 0, FSDPC_SPLIT_EVAL, frac); /* other shuffle seed */
  int64_t W = fsdpc__loader_total_windows(tr), nt = fsdpc__loader_num_windows(tr);
  int64_t ne = fsdpc__loader_num_windows(ev);
  ck_assert_int_eq(ne, llround((double)W * frac));
  ck_assert_int_eq(nt + ne, W);
  /* Identify windows by content: window k's tokens are the stream at k*T. */
  uint8_t *owner = calloc((size_t)W, 1);
  int32_t tok[4], lab[4];
  fsdpc_err err = {0};
  fsdpc_loader *ls[] = {tr, ev};
  for (int s = 0; s < 2; s++)
    for (int64_t i = 0; i < fsdpc__loader_num_windows(ls[s]); i++) {
      ck_assert_int_eq(fsdpc__loader_window(ls[s], i, tok, lab, NULL, &err), FSDPC_OK);
      int64_t k = -1;
      for (int64_t c = 0; c < W && k < 0; c++)
        if (memcmp(tok, g_stream.tok + c * T, sizeof tok) == 0 && !owner[c])
          k = c;
      ck_assert_int_ge(k, 0);
      owner[k] = (uint8_t)(s + 1);
    }
  for (int64_t k = 0; k < W; k++)
    ck_assert_int_ne(owner[k], 0); /* union is everything */
  /* The shuffle seed does not move the eval set. */
  int32_t tok2[4], lab2[4];
  for (int64_t i = 0; i < ne; i++) {
    ck_assert_int_eq(fsdpc__loader_window(ev, i, tok, lab, NULL, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__loader_window(ev2, i, tok2, lab2, NULL, &err), FSDPC_OK);
    ck_assert_int_eq(memcmp(tok, tok2, sizeof tok), 0);
  }
  /* Training batches never contain a held-out window. */
  for (int64_t step = 0; step < 2 * fsdpc__loader_steps_per_epoch(tr); step++) {
    ck_assert_int_eq(fsdpc__loader_batch(tr, step, 0, 0, 1, 1, tok, lab, NULL, &err), FSDPC_OK);
    int hit = 0;
    for (int64_t k = 0; k < W; k++)
      if (owner[k] == 1 && memcmp(tok, g_stream.tok + k * T, sizeof tok) == 0)
        hit = 1;
    ck_assert(hit);
  }
  /* A different split seed picks a different eval set; a tiny fraction
   * still holds out one window. */
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  o.seq_len = T, o.global_batch = 1, o.split = FSDPC_SPLIT_EVAL, o.eval_fraction = frac;
  o.split_seed = 12345;
  fsdpc_loader *ev3;
  ck_assert_int_eq(fsdpc__loader_create(tf, &o, &ev3, &err), FSDPC_OK);
  int differs = 0;
  for (int64_t i = 0; i < ne; i++) {
    ck_assert_int_eq(fsdpc__loader_window(ev, i, tok, lab, NULL, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__loader_window(ev3, i, tok2, lab2, NULL, &err), FSDPC_OK);
    differs |= memcmp(tok, tok2, sizeof tok) != 0;
  }
  ck_assert(differs);
  fsdpc__loader_destroy(ev3);
  fsdpc_loader *tiny = make(tf, T, 1, 1, 1, FSDPC_SPLIT_EVAL, 1e-9);
  ck_assert_int_eq(fsdpc__loader_num_windows(tiny), 1);
  fsdpc__loader_destroy(tiny);
  free(owner);
  fsdpc__loader_destroy(tr), fsdpc__loader_destroy(ev), fsdpc__loader_destroy(ev2);
  fsdpc__tokfile_close(tf);
}
END_TEST

START_TEST(state_and_restore) {
  fsdpc_tokfile *tf = open_tf(g_path);
  fsdpc_loader *l = make(tf, 8, 4, 5, 1, FSDPC_SPLIT_ALL, 0);
  int64_t spe = fsdpc__loader_steps_per_epoch(l);
  ck_assert_int_eq(spe, fsdpc__loader_num_windows(l) / 4);
  fsdpc_loader_state st;
  fsdpc__loader_state(l, &st);
  ck_assert_int_eq(st.step, 0);
  ck_assert_int_eq(st.epoch, 0);
  int32_t tok[8], lab[8], tok_a[8];
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__loader_batch(l, spe, 3, 0, 1, 1, tok_a, lab, NULL, &err), FSDPC_OK);
  fsdpc__loader_state(l, &st);
  ck_assert_int_eq(st.step, spe + 1);
  ck_assert_int_eq(st.epoch, 1);
  /* A fresh loader restored to that state serves the same batches. */
  fsdpc_loader *r = make(tf, 8, 4, 5, 1, FSDPC_SPLIT_ALL, 0);
  ck_assert_int_eq(fsdpc__loader_restore(r, &st, &err), FSDPC_OK);
  fsdpc_loader_state st2;
  fsdpc__loader_state(r, &st2);
  ck_assert_int_eq(st2.step, st.step);
  ck_assert_int_eq(fsdpc__loader_batch(r, spe, 3, 0, 1, 1, tok, lab, NULL, &err), FSDPC_OK);
  ck_assert_int_eq(memcmp(tok, tok_a, sizeof tok), 0);
  /* A state from a different global batch (so a different epoch length). */
  fsdpc_loader_state wrong = {.epoch = 0, .step = spe + 1};
  ck_assert_int_ne(fsdpc__loader_restore(r, &wrong, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "does not match this data", "global batch changed");
  fsdpc_loader_state neg = {.epoch = 0, .step = -1};
  ck_assert_int_ne(fsdpc__loader_restore(r, &neg, &err), FSDPC_OK);
  fsdpc__loader_destroy(r);
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
}
END_TEST

START_TEST(bad_arguments) {
  fsdpc_tokfile *tf = open_tf(g_path);
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  fsdpc_err err = {0};
  fsdpc_loader *l;
  o.seq_len = 0, o.global_batch = 1;
  ck_assert_int_ne(fsdpc__loader_create(tf, &o, &l, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "seq_len");
  o.seq_len = 4, o.global_batch = 100000;
  ck_assert_int_ne(fsdpc__loader_create(tf, &o, &l, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, g_path, "fewer than one global batch of 100000");
  o.global_batch = 1, o.seq_len = 100000;
  ck_assert_int_ne(fsdpc__loader_create(tf, &o, &l, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "fewer than one window");
  o.seq_len = 4, o.split = FSDPC_SPLIT_EVAL;
  ck_assert_int_ne(fsdpc__loader_create(tf, &o, &l, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "eval_fraction > 0");
  o.split = FSDPC_SPLIT_TRAIN, o.eval_fraction = 1.0;
  ck_assert_int_ne(fsdpc__loader_create(tf, &o, &l, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "eval_fraction must be in [0, 1)");

  l = make(tf, 4, 8, 0, 1, FSDPC_SPLIT_ALL, 0);
  int32_t tok[64], lab[64];
  ck_assert_int_ne(fsdpc__loader_batch(l, 0, 0, 0, 3, 1, tok, lab, NULL, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "not a multiple of micro_batch 1 x dp_size 3");
  ck_assert_int_ne(fsdpc__loader_batch(l, 0, 2, 0, 2, 2, tok, lab, NULL, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "micro-batch 2 is outside [0, 2)");
  ck_assert_int_ne(fsdpc__loader_batch(l, 0, 0, 2, 2, 2, tok, lab, NULL, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "dp_rank 2 of dp_size 2");
  ck_assert_int_ne(fsdpc__loader_batch(l, -1, 0, 0, 1, 8, tok, lab, NULL, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "negative step");
  fsdpc__loader_destroy(l);
  fsdpc__tokfile_close(tf);
}
END_TEST

int main(void) {
  Suite *s = suite_create("data_loader");
  TCase *tc = tcase_create("loader");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, rng_reference_values);
  tcase_add_test(tc, packing_matches_stream);
  tcase_add_test(tc, eos_between_documents_by_hand);
  tcase_add_test(tc, loss_mask_gives_ignore_labels);
  tcase_add_test(tc, shuffle_is_deterministic_permutation);
  tcase_add_test(tc, global_batch_is_world_size_independent);
  tcase_add_test(tc, eval_split_is_disjoint_and_seed_independent);
  tcase_add_test(tc, state_and_restore);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
