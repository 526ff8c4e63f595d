/* Internal to the adamw8bit plugin: the CPU kernels of one work item (a
 * quantized block, or a 256-element piece of an fp32-state tensor), in
 * three forms picked at run time (q8_cpu_pick): scalar, AVX2 (8 lanes) and
 * AVX-512 (16 lanes). All of them compute the per-element arithmetic of
 * adamw8bit_math.h (Q8_MOMENTS, Q8_PARAM) and find the same codes, so
 * their results are equal bit for bit; tests/optim runs each form on the
 * same data and compares (test_optim_adamw8bit_simd.c).
 *
 * The vector forms dequantize with a gather of map[code] and keep the
 * moments and the parameter in registers. Their search for the nearest
 * entry counts midpoints instead of entries (q8_vecmap): the code of x is
 * the number of midpoints (map[j] + map[j + 1]) * 0.5f below x, plus one
 * at a tie on an odd j, which is q8_nearest's answer (the midpoints
 * interleave the sorted entries). A table indexed like q8_fastmap's but by
 * 8 mantissa bits, fine enough that a bucket holds at most one midpoint
 * (checked when it is built), gives the count below the bucket; one
 * comparison with the next midpoint finishes: two gathers, no loop. The
 * sign rule needs no gather: map[c] is negative exactly for c below the
 * first non-negative entry (the map is sorted). |x| < 2^-24 (0 included)
 * and x = +-1, which the table does not cover, have one code each (checked
 * when built); other lanes (|x| > 1, non-finite: never in a step, where
 * |x| <= 1) go through the scalar search afterwards; a block's last (numel mod lanes) elements run
 * the scalar code. Block absmax: per-lane max, then across lanes (max is exact and order-free for
 * the finite, non-negative values it sees; NaN is skipped as fmaxf skips it). Built for x86-64 with
 * GCC or Clang (target attributes); elsewhere only the scalar form exists. */
#ifndef FSDPC_PLUGIN_ADAMW8BIT_CPU_H
#define FSDPC_PLUGIN_ADAMW8BIT_CPU_H

#include <time.h>

#include "adamw8bit_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define Q8_X86 1
#include <immintrin.h>
#endif

#define Q8_VEC_KEYS (2 * Q8_FAST_EXPS * 256)

/* The vector forms' search table of one map (see the top of this file). */
typedef struct q8_vecmap {
  uint8_t below[Q8_VEC_KEYS + 4]; /* midpoints below the bucket's least value (+4: a 32-bit
                                   * gather of the last entry reads 3 bytes past it) */
  float mid[Q8_CODES];            /* (map[j] + map[j + 1]) * 0.5f; mid[255] = map[255] */
  float level[8][128];            /* the gather-free search's pivots: level l (step
                                   * s = 128 >> l) holds mid[k * 2s + s - 1], k < 2^l */
  int32_t nonneg;                 /* the first code whose entry has no sign bit */
  int32_t tiny_code;              /* the code of every |x| < 2^-24 (0 included) */
  int32_t one_code[2];            /* the codes of 1 and -1 */
  int32_t ok;                     /* at most one midpoint a bucket, signs sorted, one code
                                   * for the tiny values */
} q8_vecmap;

/* Everything the CPU kernels read: the two maps (0: signed, exp_avg; 1:
 * unsigned, exp_avg_sq) and their search tables. */
typedef struct q8_tables {
  float maps[2][Q8_CODES];
  q8_fastmap fast[2];
  q8_vecmap vec[2];
} q8_tables;

static inline int q8_vec_key(uint32_t b) {
  const uint32_t e = (b >> 23) & 0xFFu;
  if (e < Q8_FAST_EXP_MIN || e >= Q8_FAST_EXP_MIN + Q8_FAST_EXPS)
    return -1;
  return (int)((((b >> 31) * Q8_FAST_EXPS + (e - Q8_FAST_EXP_MIN)) << 8) | ((b >> 15) & 255u));
}

/* Whether the vector search answers x itself (else the caller's scalar
 * search does): |x| < 1 (the table, or the tiny values' code) or x = +-1. */
static inline int q8_vec_covers(uint32_t b) {
  return ((b >> 23) & 0xFFu) < 127 || (b & 0x7FFFFFFFu) == 0x3F800000u;
}

static inline void q8_vecmap_build(const float *map, float bottom, q8_vecmap *vm) {
  memset(vm, 0, sizeof *vm);
  for (int j = 0; j < Q8_CODES; j++)
    vm->mid[j] = j + 1 < Q8_CODES ? (map[j] + map[j + 1]) * 0.5f : map[j];
  vm->ok = 1;
  while (vm->nonneg < Q8_CODES && signbit(map[vm->nonneg]))
    vm->nonneg++;
  for (int j = vm->nonneg; j < Q8_CODES; j++)
    vm->ok &= !signbit(map[j]);
  for (int j = 0; j + 1 < Q8_CODES; j++) /* midpoints strictly between sorted entries */
    vm->ok &= map[j] < vm->mid[j] && vm->mid[j] < map[j + 1];
  for (uint32_t sign = 0; sign < 2; sign++)
    for (uint32_t e = Q8_FAST_EXP_MIN; e < Q8_FAST_EXP_MIN + Q8_FAST_EXPS; e++)
      for (uint32_t m = 0; m < 256; m++) {
        /* the bucket's least and greatest values */
        const uint32_t b0 = (sign << 31) | (e << 23) | (m << 15);
        const uint32_t lo_b = b0 | (sign ? 0x7FFFu : 0u), hi_b = b0 | (sign ? 0u : 0x7FFFu);
        float lo, hi;
        memcpy(&lo, &lo_b, sizeof lo);
        memcpy(&hi, &hi_b, sizeof hi);
        int below = 0, upto = 0;
        for (int j = 0; j + 1 < Q8_CODES; j++) {
          below += vm->mid[j] < lo;
          upto += vm->mid[j] <= hi;
        }
        vm->ok &= upto - below <= 1;
        vm->below[q8_vec_key(b0)] = (uint8_t)below;
      }
  /* the search is monotone in x: the ends of (-2^-24, 2^-24) bound it */
  const float tiny = 0x1.fffffep-25f;
  vm->tiny_code = q8_nearest(map, 0.0f, bottom);
  vm->ok &= q8_nearest(map, tiny, bottom) == vm->tiny_code &&
            q8_nearest(map, -tiny, bottom) == vm->tiny_code;
  for (int l = 0; l < 8; l++)
    for (int k = 0, s = 128 >> l; k < (1 << l); k++)
      vm->level[l][k] = vm->mid[k * 2 * s + s - 1];
  vm->one_code[0] = q8_nearest(map, 1.0f, bottom);
  vm->one_code[1] = q8_nearest(map, -1.0f, bottom);
}

static inline void q8_tables_build(q8_tables *t) {
  q8_dynamic_map(1, t->maps[0]);
  q8_dynamic_map(0, t->maps[1]);
  for (int k = 0; k < 2; k++) {
    q8_fastmap_build(t->maps[k], &t->fast[k]);
    q8_vecmap_build(t->maps[k], k == 0 ? -1.0f : 0.0f, &t->vec[k]);
  }
}

typedef void (*q8_block_fn)(const fsdpc_optim_tensor *t, uint64_t b, const q8_scalars *sc,
                            const q8_tables *tb);
typedef void (*q8_piece_fn)(const fsdpc_optim_tensor *t, uint64_t b, const q8_scalars *sc);

/* The forms; Q8_ISA_AVX512P is AVX-512 without gathers. */
enum { Q8_ISA_SCALAR = 0, Q8_ISA_AVX2 = 1, Q8_ISA_AVX512 = 2, Q8_ISA_AVX512P = 3 };

/* ---- scalar ---- */

/* Pass 1 of a block for elements [i0, n) of it: new fp32 moments into m, v;
 * the running absmax of each into *am, *av. */
static inline void q8_moments_tail(const float *g, const uint8_t *c1, const uint8_t *c2, float s1,
                                   float s2, uint64_t i0, uint64_t n, const q8_scalars *sc,
                                   const float (*maps)[Q8_CODES], float *m, float *v, float *am,
                                   float *av) {
  for (uint64_t i = i0; i < n; i++) {
    q8_moments(g[i], q8_dequant(maps[0], c1[i], s1), q8_dequant(maps[1], c2[i], s2), sc, &m[i],
               &v[i]);
    *am = fmaxf(*am, fabsf(m[i]));
    *av = fmaxf(*av, v[i]);
  }
}

/* Pass 2 for elements [i0, n): parameters, then the codes with the new
 * absmax (q8_quant_signed / q8_quant_unsigned, with the table search). */
static inline void q8_update_tail(float *p, uint8_t *c1, uint8_t *c2, const float *m,
                                  const float *v, float am, float av, uint64_t i0, uint64_t n,
                                  const q8_scalars *sc, int decay, const float (*maps)[Q8_CODES],
                                  const q8_fastmap *fast) {
  for (uint64_t i = i0; i < n; i++) {
    p[i] = q8_param(p[i], m[i], v[i], sc, decay);
    const float xm = am > 0.0f ? m[i] / am : 0.0f, xv = av > 0.0f ? v[i] / av : 0.0f;
    c1[i] = q8_sign_fix(maps[0], q8_nearest_fast(maps[0], &fast[0], xm, -1.0f), m[i]);
    c2[i] = (uint8_t)q8_nearest_fast(maps[1], &fast[1], xv, 0.0f);
  }
}

/* The block's elements [j0, j1) and pointers into its tensor. */
#define Q8_BLOCK_SETUP                                                                             \
  const uint64_t ph = t->block_phase, j0 = q8_block_lo(b, ph), j1 = q8_block_hi(b, ph, t->numel);  \
  const uint64_t n = j1 - j0;                                                                      \
  float *restrict p = t->param + j0;                                                               \
  const float *restrict g = t->grad + j0;                                                          \
  uint8_t *restrict c1 = t->qstate + j0, *restrict c2 = t->qstate + t->stride + j0;                \
  float *a1 = t->qscale + b, *a2 = t->qscale + t->scale_stride + b;                                \
  const float s1 = *a1, s2 = *a2

static inline void q8_block_scalar(const fsdpc_optim_tensor *t, uint64_t b, const q8_scalars *sc,
                                   const q8_tables *tb) {
  const float(*maps)[Q8_CODES] = tb->maps;
  Q8_BLOCK_SETUP;
  float m[Q8_BLOCK], v[Q8_BLOCK], am = 0.0f, av = 0.0f;
  q8_moments_tail(g, c1, c2, s1, s2, 0, n, sc, maps, m, v, &am, &av);
  *a1 = am;
  *a2 = av;
  q8_update_tail(p, c1, c2, m, v, am, av, 0, n, sc, t->decay, maps, tb->fast);
}

/* An fp32-state piece (a tensor below min_8bit_size), elementwise. The
 * vector forms are this loop compiled for the wider ISA. */
#define Q8_PIECE_BODY                                                                              \
  const uint64_t j0 = b * Q8_BLOCK, j1 = q8_block_hi(b, 0, t->numel);                              \
  float *restrict p = t->param, *restrict m = t->state, *restrict v = t->state + t->stride;        \
  const float *restrict g = t->grad;                                                               \
  for (uint64_t j = j0; j < j1; j++) {                                                             \
    float mi, vi;                                                                                  \
    q8_moments(g[j], m[j], v[j], sc, &mi, &vi);                                                    \
    m[j] = mi;                                                                                     \
    v[j] = vi;                                                                                     \
    p[j] = q8_param(p[j], mi, vi, sc, t->decay);                                                   \
  }

#if defined(__GNUC__) && !defined(__clang__)
#define Q8_NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define Q8_NO_VECTORIZE
#endif
Q8_NO_VECTORIZE static void q8_piece_scalar(const fsdpc_optim_tensor *t, uint64_t b,
                                            const q8_scalars *sc) {
  Q8_PIECE_BODY
}

#ifdef Q8_X86
/* ---- AVX2 ---- */

#define Q8_AVX2 __attribute__((target("avx2")))

Q8_AVX2 static void q8_piece_avx2(const fsdpc_optim_tensor *t, uint64_t b,
                                  const q8_scalars *sc){Q8_PIECE_BODY}

/* The nearest entry's code on 8 lanes (see the top of this file); *bad
 * gets the lanes it does not answer (q8_vec_covers: their result is
 * garbage, the caller redoes them). */
Q8_AVX2 static inline __m256i q8_nearest8(const q8_vecmap *vm, __m256 x, int *bad) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i e = _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF));
  const __m256i ok =
      _mm256_and_si256(_mm256_cmpgt_epi32(e, _mm256_set1_epi32(Q8_FAST_EXP_MIN - 1)),
                       _mm256_cmpgt_epi32(_mm256_set1_epi32(Q8_FAST_EXP_MIN + Q8_FAST_EXPS), e));
  const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(Q8_FAST_EXP_MIN), e);
  const __m256i one = _mm256_cmpeq_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x3F800000));
  *bad = ~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(ok, tiny), one))) &
         0xFF;
  __m256i key = _mm256_add_epi32(/* sign * Q8_FAST_EXPS + exponent - Q8_FAST_EXP_MIN */
                                 _mm256_and_si256(_mm256_srai_epi32(bits, 31),
                                                  _mm256_set1_epi32(Q8_FAST_EXPS)),
                                 _mm256_sub_epi32(e, _mm256_set1_epi32(Q8_FAST_EXP_MIN)));
  key = _mm256_or_si256(_mm256_slli_epi32(key, 8),
                        _mm256_and_si256(_mm256_srli_epi32(bits, 15), _mm256_set1_epi32(255)));
  key = _mm256_and_si256(key, ok); /* uncovered lanes read entry 0 */
  const __m256i c = _mm256_and_si256(_mm256_i32gather_epi32((const int *)vm->below, key, 1),
                                     _mm256_set1_epi32(0xFF));
  const __m256 mid = _mm256_i32gather_ps(vm->mid, c, 4);
  const __m256i gt = _mm256_castps_si256(_mm256_cmp_ps(x, mid, _CMP_GT_OQ));
  const __m256i eq = _mm256_castps_si256(_mm256_cmp_ps(x, mid, _CMP_EQ_OQ));
  const __m256i odd = _mm256_and_si256(c, _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(
      c, _mm256_or_si256(_mm256_and_si256(gt, _mm256_set1_epi32(1)), _mm256_and_si256(eq, odd)));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(vm->tiny_code), tiny);
  const __m256i ones =
      _mm256_blendv_epi8(_mm256_set1_epi32(vm->one_code[0]), _mm256_set1_epi32(vm->one_code[1]),
                         _mm256_srai_epi32(bits, 31));
  return _mm256_blendv_epi8(r, ones, one);
}

/* q8_sign_fix on 8 lanes: where the signs of map[c] (c below nonneg) and s
 * differ, c moves by +1 (s > 0) or -1. */
Q8_AVX2 static inline __m256i q8_sign_fix8(const q8_vecmap *vm, __m256i c, __m256 s) {
  const __m256i neg_code = _mm256_cmpgt_epi32(_mm256_set1_epi32(vm->nonneg), c);
  const __m256i differ = _mm256_xor_si256(neg_code, _mm256_srai_epi32(_mm256_castps_si256(s), 31));
  const __m256i pos = _mm256_castps_si256(_mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_GT_OQ));
  const __m256i delta =
      _mm256_sub_epi32(_mm256_and_si256(pos, _mm256_set1_epi32(2)), _mm256_set1_epi32(1));
  return _mm256_add_epi32(c, _mm256_and_si256(differ, delta));
}

Q8_AVX2 static inline float q8_hmax8(__m256 x) {
  float l[8], r = 0.0f;
  _mm256_storeu_ps(l, x);
  for (int i = 0; i < 8; i++)
    r = fmaxf(r, l[i]);
  return r;
}

Q8_AVX2 static void q8_block_avx2(const fsdpc_optim_tensor *t, uint64_t b, const q8_scalars *sc,
                                  const q8_tables *tb) {
  const float(*maps)[Q8_CODES] = tb->maps;
  Q8_BLOCK_SETUP;
  float m[Q8_BLOCK], v[Q8_BLOCK];
  const uint64_t nv = n / 8 * 8;
  const __m256 vs1 = _mm256_set1_ps(s1), vs2 = _mm256_set1_ps(s2);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 vam = _mm256_setzero_ps(), vav = _mm256_setzero_ps();
  for (uint64_t i = 0; i < nv; i += 8) {
    const __m256i k1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c1 + i)));
    const __m256i k2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c2 + i)));
    const __m256 mo = _mm256_i32gather_ps(maps[0], k1, 4) * vs1; /* q8_dequant */
    const __m256 vo = _mm256_i32gather_ps(maps[1], k2, 4) * vs2;
    const __m256 gv = _mm256_loadu_ps(g + i);
    __m256 gi, mn, vn;
    Q8_MOMENTS(gi, gv, mo, vo, sc, mn, vn);
    _mm256_storeu_ps(m + i, mn);
    _mm256_storeu_ps(v + i, vn);
    vam = _mm256_max_ps(_mm256_and_ps(mn, absmask), vam); /* a NaN lane keeps vam */
    vav = _mm256_max_ps(vn, vav);
  }
  float am = q8_hmax8(vam), av = q8_hmax8(vav);
  q8_moments_tail(g, c1, c2, s1, s2, nv, n, sc, maps, m, v, &am, &av);
  *a1 = am;
  *a2 = av;
  const __m256 vam_b = _mm256_set1_ps(am), vav_b = _mm256_set1_ps(av);
  for (uint64_t i = 0; i < nv; i += 8) {
    const __m256 mn = _mm256_loadu_ps(m + i), vn = _mm256_loadu_ps(v + i);
    __m256 pv = _mm256_loadu_ps(p + i);
    Q8_PARAM(pv, mn, vn, sc, t->decay, _mm256_sqrt_ps);
    _mm256_storeu_ps(p + i, pv);
    const __m256 xm = am > 0.0f ? _mm256_div_ps(mn, vam_b) : _mm256_setzero_ps();
    const __m256 xv = av > 0.0f ? _mm256_div_ps(vn, vav_b) : _mm256_setzero_ps();
    int bad1, bad2;
    const __m256i q1 = q8_sign_fix8(&tb->vec[0], q8_nearest8(&tb->vec[0], xm, &bad1), mn);
    const __m256i q2 = q8_nearest8(&tb->vec[1], xv, &bad2);
    /* the low byte of each lane: packs keep 0..255 as it is */
    const __m256i w = _mm256_packus_epi32(
        _mm256_and_si256(q1, _mm256_set1_epi32(0xFF)),
        _mm256_and_si256(q2, _mm256_set1_epi32(0xFF))); /* q1 0-3, q2 0-3 | q1 4-7, q2 4-7 */
    const __m256i bytes = _mm256_packus_epi16(w, w);
    const __m128i lo = _mm256_castsi256_si128(bytes), hi = _mm256_extracti128_si256(bytes, 1);
    const uint32_t m_lo = (uint32_t)_mm_cvtsi128_si32(lo),
                   v_lo = (uint32_t)_mm_extract_epi32(lo, 1);
    const uint32_t m_hi = (uint32_t)_mm_cvtsi128_si32(hi),
                   v_hi = (uint32_t)_mm_extract_epi32(hi, 1);
    const uint64_t mm = (uint64_t)m_lo | (uint64_t)m_hi << 32,
                   vv = (uint64_t)v_lo | (uint64_t)v_hi << 32;
    memcpy(c1 + i, &mm, 8);
    memcpy(c2 + i, &vv, 8);
    for (int l = 0; (bad1 | bad2) && l < 8; l++) {
      if (bad1 >> l & 1)
        c1[i + l] = q8_sign_fix(maps[0], q8_nearest(maps[0], xm[l], -1.0f), m[i + l]);
      if (bad2 >> l & 1)
        c2[i + l] = (uint8_t)q8_nearest(maps[1], xv[l], 0.0f);
    }
  }
  q8_update_tail(p, c1, c2, m, v, am, av, nv, n, sc, t->decay, maps, tb->fast);
}

/* ---- AVX-512 ---- */

#define Q8_AVX512 __attribute__((target("avx512f")))

Q8_AVX512 static void q8_piece_avx512(const fsdpc_optim_tensor *t, uint64_t b,
                                      const q8_scalars *sc){Q8_PIECE_BODY}

Q8_AVX512 static inline __m512i q8_nearest16(const q8_vecmap *vm, __m512 x, __mmask16 *bad) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i e = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
  const __mmask16 ok =
      _mm512_cmpge_epi32_mask(e, _mm512_set1_epi32(Q8_FAST_EXP_MIN)) &
      _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(Q8_FAST_EXP_MIN + Q8_FAST_EXPS));
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(Q8_FAST_EXP_MIN));
  const __mmask16 one = _mm512_cmpeq_epi32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x3F800000));
  const __mmask16 neg = _mm512_cmplt_epi32_mask(bits, _mm512_setzero_si512());
  *bad = (__mmask16) ~(ok | tiny | one);
  __m512i key = _mm512_add_epi32(/* sign * Q8_FAST_EXPS + exponent - Q8_FAST_EXP_MIN */
                                 _mm512_and_si512(_mm512_srai_epi32(bits, 31),
                                                  _mm512_set1_epi32(Q8_FAST_EXPS)),
                                 _mm512_sub_epi32(e, _mm512_set1_epi32(Q8_FAST_EXP_MIN)));
  key = _mm512_or_si512(_mm512_slli_epi32(key, 8),
                        _mm512_and_si512(_mm512_srli_epi32(bits, 15), _mm512_set1_epi32(255)));
  key = _mm512_maskz_mov_epi32(ok, key); /* uncovered lanes read entry 0 */
  const __m512i c =
      _mm512_and_si512(_mm512_i32gather_epi32(key, vm->below, 1), _mm512_set1_epi32(0xFF));
  const __m512 mid = _mm512_i32gather_ps(c, vm->mid, 4);
  const __mmask16 odd = _mm512_test_epi32_mask(c, _mm512_set1_epi32(1));
  const __mmask16 up =
      _mm512_cmp_ps_mask(x, mid, _CMP_GT_OQ) | (_mm512_cmp_ps_mask(x, mid, _CMP_EQ_OQ) & odd);
  __m512i r = _mm512_mask_add_epi32(c, up, c, _mm512_set1_epi32(1));
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_set1_epi32(vm->tiny_code));
  r = _mm512_mask_mov_epi32(r, one & (__mmask16)~neg, _mm512_set1_epi32(vm->one_code[0]));
  return _mm512_mask_mov_epi32(r, one & neg, _mm512_set1_epi32(vm->one_code[1]));
}

Q8_AVX512 static inline __m512i q8_sign_fix16(const q8_vecmap *vm, __m512i c, __m512 s) {
  const __mmask16 neg_code = _mm512_cmplt_epi32_mask(c, _mm512_set1_epi32(vm->nonneg));
  const __mmask16 neg_s = _mm512_cmplt_epi32_mask(_mm512_castps_si512(s), _mm512_setzero_si512());
  const __mmask16 differ = neg_code ^ neg_s;
  const __mmask16 pos = _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_GT_OQ);
  c = _mm512_mask_add_epi32(c, differ & pos, c, _mm512_set1_epi32(1));
  return _mm512_mask_sub_epi32(c, differ & (__mmask16)~pos, c, _mm512_set1_epi32(1));
}

/* The AVX-512 form without gathers, for CPUs whose gathers are slow (the
 * microcode of some Intel parts makes them so): map[code] by register
 * permutes of the 256-entry map (8 two-register permutes, then a select on
 * the index's top 3 bits), and the count of midpoints below x by an 8-level
 * branch-free binary search whose pivots come from q8_vecmap.level by
 * permutes too. The search passes mid[c] on its way (the in-order
 * neighbours of where it ends are on its path), so a tie is seen there.
 * Every finite |x| <= 1 is answered; the caller redoes NaN and |x| > 1. */
Q8_AVX512 static inline __m512 q8_lookup256(const float *tab, __m512i idx) {
  __m512 r[8];
  for (int k = 0; k < 8; k++)
    r[k] = _mm512_permutex2var_ps(_mm512_loadu_ps(tab + 32 * k), idx,
                                  _mm512_loadu_ps(tab + 32 * k + 16));
  for (int bit = 32, n = 8; n > 1; bit *= 2, n /= 2) {
    const __mmask16 hi = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(bit));
    for (int k = 0; k < n / 2; k++)
      r[k] = _mm512_mask_blend_ps(hi, r[2 * k], r[2 * k + 1]);
  }
  return r[0];
}

/* Entry k (< 2^l) of a level table, for every lane. */
Q8_AVX512 static inline __m512 q8_level_lookup(const float *tab, int l, __m512i k) {
  if (l == 0)
    return _mm512_set1_ps(tab[0]);
  if (l <= 4)
    return _mm512_permutexvar_ps(k, _mm512_loadu_ps(tab));
  __m512 r[4];
  const int n = 1 << (l - 5);
  for (int j = 0; j < n; j++)
    r[j] = _mm512_permutex2var_ps(_mm512_loadu_ps(tab + 32 * j), k,
                                  _mm512_loadu_ps(tab + 32 * j + 16));
  for (int bit = 32, m = n; m > 1; bit *= 2, m /= 2) {
    const __mmask16 hi = _mm512_test_epi32_mask(k, _mm512_set1_epi32(bit));
    for (int j = 0; j < m / 2; j++)
      r[j] = _mm512_mask_blend_ps(hi, r[2 * j], r[2 * j + 1]);
  }
  return r[0];
}

Q8_AVX512 static inline __m512i q8_nearest16p(const q8_vecmap *vm, __m512 x, __mmask16 *bad) {
  *bad = (__mmask16)~_mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(1.0f), _CMP_LE_OQ);
  __m512i c = _mm512_setzero_si512();
  __mmask16 eq = 0;
  for (int l = 0; l < 8; l++) {
    const __m512 piv = q8_level_lookup(vm->level[l], l, _mm512_srli_epi32(c, 8 - l));
    eq |= _mm512_cmp_ps_mask(piv, x, _CMP_EQ_OQ);
    c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(piv, x, _CMP_LT_OQ), c,
                              _mm512_set1_epi32(128 >> l));
  }
  const __mmask16 odd = _mm512_test_epi32_mask(c, _mm512_set1_epi32(1));
  return _mm512_mask_add_epi32(c, eq & odd, c, _mm512_set1_epi32(1));
}

/* Both AVX-512 forms: perm selects the gather-free one (constant-folded). */
__attribute__((always_inline)) Q8_AVX512 static inline void
q8_block_avx512_impl(const fsdpc_optim_tensor *t, uint64_t b, const q8_scalars *sc,
                     const q8_tables *tb, const int perm) {
  const float(*maps)[Q8_CODES] = tb->maps;
  Q8_BLOCK_SETUP;
  float m[Q8_BLOCK], v[Q8_BLOCK];
  const uint64_t nv = n / 16 * 16;
  const __m512 vs1 = _mm512_set1_ps(s1), vs2 = _mm512_set1_ps(s2);
  __m512 vam = _mm512_setzero_ps(), vav = _mm512_setzero_ps();
  for (uint64_t i = 0; i < nv; i += 16) {
    const __m512i k1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c1 + i)));
    const __m512i k2 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c2 + i)));
    const __m512 mo = /* q8_dequant */
        (perm ? q8_lookup256(maps[0], k1) : _mm512_i32gather_ps(k1, maps[0], 4)) * vs1;
    const __m512 vo =
        (perm ? q8_lookup256(maps[1], k2) : _mm512_i32gather_ps(k2, maps[1], 4)) * vs2;
    const __m512 gv = _mm512_loadu_ps(g + i);
    __m512 gi, mn, vn;
    Q8_MOMENTS(gi, gv, mo, vo, sc, mn, vn);
    _mm512_storeu_ps(m + i, mn);
    _mm512_storeu_ps(v + i, vn);
    vam = _mm512_max_ps(_mm512_abs_ps(mn), vam); /* a NaN lane keeps vam */
    vav = _mm512_max_ps(vn, vav);
  }
  float l[16], am = 0.0f, av = 0.0f;
  _mm512_storeu_ps(l, vam);
  for (int k = 0; k < 16; k++)
    am = fmaxf(am, l[k]);
  _mm512_storeu_ps(l, vav);
  for (int k = 0; k < 16; k++)
    av = fmaxf(av, l[k]);
  q8_moments_tail(g, c1, c2, s1, s2, nv, n, sc, maps, m, v, &am, &av);
  *a1 = am;
  *a2 = av;
  const __m512 vam_b = _mm512_set1_ps(am), vav_b = _mm512_set1_ps(av);
  for (uint64_t i = 0; i < nv; i += 16) {
    const __m512 mn = _mm512_loadu_ps(m + i), vn = _mm512_loadu_ps(v + i);
    __m512 pv = _mm512_loadu_ps(p + i);
    Q8_PARAM(pv, mn, vn, sc, t->decay, _mm512_sqrt_ps);
    _mm512_storeu_ps(p + i, pv);
    const __m512 xm = am > 0.0f ? _mm512_div_ps(mn, vam_b) : _mm512_setzero_ps();
    const __m512 xv = av > 0.0f ? _mm512_div_ps(vn, vav_b) : _mm512_setzero_ps();
    __mmask16 bad1, bad2;
    const __m512i q1 = q8_sign_fix16(
        &tb->vec[0],
        perm ? q8_nearest16p(&tb->vec[0], xm, &bad1) : q8_nearest16(&tb->vec[0], xm, &bad1), mn);
    const __m512i q2 =
        perm ? q8_nearest16p(&tb->vec[1], xv, &bad2) : q8_nearest16(&tb->vec[1], xv, &bad2);
    _mm_storeu_si128((__m128i *)(c1 + i), _mm512_cvtepi32_epi8(q1));
    _mm_storeu_si128((__m128i *)(c2 + i), _mm512_cvtepi32_epi8(q2));
    for (int k = 0; (bad1 | bad2) && k < 16; k++) {
      if (bad1 >> k & 1)
        c1[i + k] = q8_sign_fix(maps[0], q8_nearest(maps[0], xm[k], -1.0f), m[i + k]);
      if (bad2 >> k & 1)
        c2[i + k] = (uint8_t)q8_nearest(maps[1], xv[k], 0.0f);
    }
  }
  q8_update_tail(p, c1, c2, m, v, am, av, nv, n, sc, t->decay, maps, tb->fast);
}

Q8_AVX512 static void q8_block_avx512(const fsdpc_optim_tensor *t, uint64_t b, const q8_scalars *sc,
                                      const q8_tables *tb) {
  q8_block_avx512_impl(t, b, sc, tb, 0);
}

Q8_AVX512 static void q8_block_avx512p(const fsdpc_optim_tensor *t, uint64_t b,
                                       const q8_scalars *sc, const q8_tables *tb) {
  q8_block_avx512_impl(t, b, sc, tb, 1);
}
#endif /* Q8_X86 */

/* The best form this CPU runs (Q8_ISA_*). */
static inline int q8_cpu_isa(void) {
#ifdef Q8_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return Q8_ISA_AVX512;
  if (__builtin_cpu_supports("avx2"))
    return Q8_ISA_AVX2;
#endif
  return Q8_ISA_SCALAR;
}

/* The faster AVX-512 form on this CPU (Q8_ISA_AVX512 or _AVX512P), timed
 * on a few synthetic blocks (about a millisecond); their results are the
 * same bits, so the choice changes only the speed. */
static inline int q8_avx512_fastest(const q8_tables *tb) {
#ifdef Q8_X86
  enum { NB = 64, N = NB * Q8_BLOCK };
  float *p = malloc(2 * N * sizeof(float));
  uint8_t *q = calloc(2 * N, 1);
  float *sc = calloc(2 * NB, sizeof(float));
  int best = Q8_ISA_AVX512;
  if (p && q && sc && tb->vec[0].ok && tb->vec[1].ok) {
    float *g = p + N;
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
      r = r * 1664525u + 1013904223u;
      g[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 1e-3f;
      p[i] = 0.0f;
    }
    const q8_scalars s = {1.0f, 0.9f, 0.1f, 0.999f, 0.001f, -1e-4f, 1e-8f, 1.0f};
    const fsdpc_optim_tensor t = {.struct_size = sizeof t,
                                  .param = p,
                                  .grad = g,
                                  .numel = N,
                                  .stride = N,
                                  .decay = 1,
                                  .qstate = q,
                                  .qscale = sc,
                                  .scale_stride = NB};
    double ns[2] = {1e30, 1e30};
    for (int rep = 0; rep < 4; rep++)
      for (int f = 0; f < 2; f++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (uint64_t b = 0; b < NB; b++)
          (f ? q8_block_avx512p : q8_block_avx512)(&t, b, &s, tb);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double d = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        if (rep > 0 && d < ns[f]) /* the first round warms the caches */
          ns[f] = d;
      }
    best = ns[1] < ns[0] ? Q8_ISA_AVX512P : Q8_ISA_AVX512;
  }
  free(p);
  free(q);
  free(sc);
  return best;
#else
  (void)tb;
  return Q8_ISA_SCALAR;
#endif
}

/* The kernels of form isa (at most what q8_cpu_isa says). Quantized blocks
 * stay scalar if tb's maps do not allow the vector search (q8_vecmap.ok). */
static inline void q8_cpu_pick(int isa, const q8_tables *tb, q8_block_fn *block,
                               q8_piece_fn *piece) {
  *block = q8_block_scalar;
  *piece = q8_piece_scalar;
#ifdef Q8_X86
  const int vec_ok = tb->vec[0].ok && tb->vec[1].ok;
  if (isa == Q8_ISA_AVX2) {
    *block = vec_ok ? q8_block_avx2 : q8_block_scalar;
    *piece = q8_piece_avx2;
  } else if (isa == Q8_ISA_AVX512 || isa == Q8_ISA_AVX512P) {
    *block = !vec_ok ? q8_block_scalar : isa == Q8_ISA_AVX512 ? q8_block_avx512 : q8_block_avx512p;
    *piece = q8_piece_avx512;
  }
#else
  (void)isa;
  (void)tb;
#endif
}

#endif
