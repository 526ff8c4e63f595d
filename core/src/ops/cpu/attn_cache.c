/* Attention over a KV cache (inference): store new keys/values at their
 * positions, and attend one query row to its sequence's cached keys
 * 0..pos (the last window of them with a sliding window). fp32, the reference of
 * ops/cuda/attn_cache.cu. Online softmax (one pass over the keys, no score buffer), so any cache
 * length works. */
#include <math.h>
#include <string.h>

#include "ops/cpu/ops_cpu.h"

void fsdpc__cpu_kv_store(float *kc, float *vc, const float *k, const float *v, const int32_t *pos,
                         int B, int n, int maxT, int KD) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int r = 0; r < B * n; r++) {
    size_t dst = ((size_t)(r / n) * maxT + (size_t)pos[r]) * KD;
    memcpy(kc + dst, k + (size_t)r * KD, (size_t)KD * sizeof(float));
    memcpy(vc + dst, v + (size_t)r * KD, (size_t)KD * sizeof(float));
  }
}

void fsdpc__cpu_attn_cached(float *out, const float *q, const float *kc, const float *vc,
                            const int32_t *pos, int B, int n, int NH, int KVH, int HD, int maxT,
                            float scale, int window, float softcap) {
  int KD = KVH * HD, group = NH / KVH;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) collapse(2) schedule(static)
  for (int r = 0; r < B * n; r++)
    for (int h = 0; h < NH; h++) {
      const float *qr = q + ((size_t)r * NH + h) * HD;
      const float *kb = kc + (size_t)(r / n) * maxT * KD + (size_t)(h / group) * HD;
      const float *vb = vc + (size_t)(r / n) * maxT * KD + (size_t)(h / group) * HD;
      float *o = out + ((size_t)r * NH + h) * HD;
      double m = -INFINITY, l = 0.0;
      for (int d = 0; d < HD; d++)
        o[d] = 0.0f;
      int lo = window > 0 && pos[r] - window + 1 > 0 ? pos[r] - window + 1 : 0;
      for (int t = lo; t <= pos[r]; t++) {
        const float *kt = kb + (size_t)t * KD, *vt = vb + (size_t)t * KD;
        float s = 0.0f;
        for (int d = 0; d < HD; d++)
          s += qr[d] * kt[d];
        double sd = (double)s * scale;
        if (softcap > 0.0f) /* as the naive attention's forward */
          sd = (double)softcap * tanh(sd / (double)softcap);
        double mn = sd > m ? sd : m, corr = exp(m - mn), p = exp(sd - mn);
        l = l * corr + p;
        for (int d = 0; d < HD; d++)
          o[d] = (float)(o[d] * corr + p * vt[d]);
        m = mn;
      }
      for (int d = 0; d < HD; d++)
        o[d] = (float)(o[d] / l);
    }
}
