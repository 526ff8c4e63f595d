/* RoPE cos/sin tables, with optional Llama 3 frequency scaling.
 * maxT = positions, HD = head dim; tables are (maxT, HD/2).
 *
 * Hugging Face computes inv_freq and the angles in fp32; we compute them in
 * double and round only the final cos/sin, so the tables are the exact
 * values. At large positions HF's fp32 angle rounding differs from these by
 * up to ~1e-4 (pos 4096, ulp of the angle); at small positions they agree to
 * fp32 rounding. */
#include <math.h>

#include "ops/cpu/ops_cpu.h"

/* HF _compute_llama3_parameters, element-wise. */
static double llama3_scale(double inv_freq, double factor, double low_freq_factor,
                           double high_freq_factor, int original_max_pos) {
  double old_ctx = (double)original_max_pos;
  double low_freq_wavelen = old_ctx / low_freq_factor;
  double high_freq_wavelen = old_ctx / high_freq_factor;
  double wavelen = 2.0 * M_PI / inv_freq;
  if (wavelen > low_freq_wavelen)
    return inv_freq / factor;
  if (wavelen < high_freq_wavelen)
    return inv_freq;
  double smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
  return (1.0 - smooth) * inv_freq / factor + smooth * inv_freq;
}

void fsdpc__rope_tables(float *cos_out, // (maxT, HD/2)
                        float *sin_out, // (maxT, HD/2)
                        int maxT, int HD, double theta, int scaling_llama3, double factor,
                        double low_freq_factor, double high_freq_factor, int original_max_pos) {
  int half = HD / 2;
  if (half <= 0 || maxT <= 0)
    return;
  double inv_freq[half];
  for (int i = 0; i < half; i++) {
    inv_freq[i] = pow(theta, -(2.0 * i) / HD);
    if (scaling_llama3) {
      inv_freq[i] =
          llama3_scale(inv_freq[i], factor, low_freq_factor, high_freq_factor, original_max_pos);
    }
  }
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int t = 0; t < maxT; t++) {
    for (int i = 0; i < half; i++) {
      double angle = (double)t * inv_freq[i];
      cos_out[(size_t)t * half + i] = (float)cos(angle);
      sin_out[(size_t)t * half + i] = (float)sin(angle);
    }
  }
}
