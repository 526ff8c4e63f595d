/* RoPE cos/sin tables for every rope_type transformers ships
 * (modeling_rope_utils.py): default, linear, dynamic, llama3, yarn and
 * longrope, over the rotary dims of a head (partial rotary). Tables are
 * (maxT, dim/2); yarn's and longrope's attention factor is folded into them
 * (transformers multiplies cos and sin by it).
 *
 * Hugging Face computes inv_freq and the angles in fp32; we compute them in
 * double and round only the final cos/sin, so the tables are the exact
 * values. At large positions HF's fp32 angle rounding differs from these by
 * up to ~1e-4 (pos 4096, ulp of the angle); at small positions they agree to
 * fp32 rounding.
 *
 * dynamic: transformers grows the base only for a sequence longer than
 * max_position_embeddings, which fsdpc never runs (data.seq_len and
 * generation are bounded by it), so its tables are the default ones. */
#include <math.h>

#include "ops/cpu/ops_cpu.h"

/* HF _compute_llama3_parameters, element-wise. */
static double llama3_scale(const fsdpc_rope *r, double inv_freq) {
  double old_ctx = (double)r->original_max_pos;
  double low_freq_wavelen = old_ctx / r->low_freq_factor;
  double high_freq_wavelen = old_ctx / r->high_freq_factor;
  double wavelen = 2.0 * M_PI / inv_freq;
  if (wavelen > low_freq_wavelen)
    return inv_freq / r->factor;
  if (wavelen < high_freq_wavelen)
    return inv_freq;
  double smooth =
      (old_ctx / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
  return (1.0 - smooth) * inv_freq / r->factor + smooth * inv_freq;
}

static int orig_max(const fsdpc_rope *r) {
  return r->original_max_pos > 0 ? r->original_max_pos : r->max_pos;
}

/* yarn and longrope: the factor, or max_position_embeddings over the
 * pre-training length when the config gives none. */
static double ext_factor(const fsdpc_rope *r) {
  return r->factor > 0.0 ? r->factor : (double)r->max_pos / (double)orig_max(r);
}

static double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

double fsdpc__rope_attention_factor(const fsdpc_rope *r) {
  if (r->type != FSDPC_ROPE_YARN && r->type != FSDPC_ROPE_LONGROPE)
    return 1.0;
  if (r->attention_factor > 0.0)
    return r->attention_factor;
  double f = ext_factor(r);
  if (r->type == FSDPC_ROPE_LONGROPE)
    return f <= 1.0 ? 1.0 : sqrt(1.0 + log(f) / log((double)orig_max(r)));
  if (r->mscale != 0.0 && r->mscale_all_dim != 0.0)
    return yarn_mscale(f, r->mscale) / yarn_mscale(f, r->mscale_all_dim);
  return yarn_mscale(f, 1.0);
}

/* The dimension index at which rot full rotations happen over the
 * pre-training length (yarn's find_correction_dim). */
static double yarn_dim(const fsdpc_rope *r, double rot) {
  return (r->dim * log((double)orig_max(r) / (rot * 2.0 * M_PI))) / (2.0 * log(r->theta));
}

/* yarn: interpolated frequencies on the slow dims, extrapolated on the fast
 * ones, a linear ramp between (_compute_yarn_parameters). */
static void yarn_inv_freq(const fsdpc_rope *r, double *inv) {
  int half = r->dim / 2;
  double f = ext_factor(r);
  double fast = r->beta_fast > 0.0 ? r->beta_fast : 32.0;
  double slow = r->beta_slow > 0.0 ? r->beta_slow : 1.0;
  double lo = yarn_dim(r, fast), hi = yarn_dim(r, slow);
  if (r->truncate) {
    lo = floor(lo);
    hi = ceil(hi);
  }
  if (lo < 0.0)
    lo = 0.0;
  if (hi > r->dim - 1)
    hi = r->dim - 1;
  if (lo == hi)
    hi += 0.001; /* as transformers: no division by zero */
  for (int i = 0; i < half; i++) {
    double pos_freq = pow(r->theta, (2.0 * i) / r->dim);
    double ramp = ((double)i - lo) / (hi - lo);
    ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
    double extrap = 1.0 - ramp; /* weight of the extrapolated frequency */
    inv[i] = (1.0 / (f * pos_freq)) * (1.0 - extrap) + (1.0 / pos_freq) * extrap;
  }
}

void fsdpc__rope_inv_freq(const fsdpc_rope *r, int use_long, double *inv) {
  int half = r->dim / 2;
  if (r->type == FSDPC_ROPE_YARN) {
    yarn_inv_freq(r, inv);
    return;
  }
  for (int i = 0; i < half; i++) {
    inv[i] = pow(r->theta, -(2.0 * i) / r->dim);
    switch (r->type) {
    case FSDPC_ROPE_LLAMA3:
      inv[i] = llama3_scale(r, inv[i]);
      break;
    case FSDPC_ROPE_LINEAR:
      inv[i] /= r->factor;
      break;
    case FSDPC_ROPE_LONGROPE:
      inv[i] /= use_long ? r->long_factor[i] : r->short_factor[i];
      break;
    default: /* default, dynamic (see above) */
      break;
    }
  }
}

void fsdpc__rope_tables(float *cos_out, // (maxT, dim/2)
                        float *sin_out, // (maxT, dim/2)
                        const fsdpc_rope *r, int maxT, int use_long) {
  int half = r->dim / 2;
  if (half <= 0 || maxT <= 0)
    return;
  double inv_freq[half], att = fsdpc__rope_attention_factor(r);
  fsdpc__rope_inv_freq(r, use_long, inv_freq);
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int t = 0; t < maxT; t++) {
    for (int i = 0; i < half; i++) {
      double angle = (double)t * inv_freq[i];
      cos_out[(size_t)t * half + i] = (float)(cos(angle) * att);
      sin_out[(size_t)t * half + i] = (float)(sin(angle) * att);
    }
  }
}

int fsdpc__rope_uses_long(const fsdpc_rope *r, int seq_len) {
  return r->type == FSDPC_ROPE_LONGROPE && seq_len > orig_max(r);
}
