/* Rotary position embedding, Hugging Face rotate_half convention: element i
 * is paired with element i + RD/2 (halves), not with i + 1 (pairs).
 * N = rows (tokens), H = heads in the tensor, HD = head dim, RD = the
 * rotary dims (even, <= HD): partial rotary turns the first RD dims of each
 * head and passes the rest through, as transformers' Phi-3 does.
 * Both directions work in place on activations; there are no parameters. */
#include "ops/cpu/ops_cpu.h"

/* Rotates every head of every row by +angle (sign = 1) or -angle (sign = -1).
 * The backward of a rotation is its transpose, which is the rotation by the
 * opposite angle, so one routine serves both directions. */
static void rope_rotate(float *x,           // (N, H, HD) in place
                        const float *cos,   // (maxT, RD/2)
                        const float *sin,   // (maxT, RD/2)
                        const int32_t *pos, // (N)
                        int N, int H, int HD, int RD, float sign) {
  int half = RD / 2;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *c = cos + (size_t)pos[n] * half;
    const float *s = sin + (size_t)pos[n] * half;
    for (int h = 0; h < H; h++) {
      float *v = x + ((size_t)n * H + h) * HD;
      for (int i = 0; i < half; i++) {
        float a = v[i], b = v[i + half], si = sign * s[i];
        v[i] = a * c[i] - b * si;
        v[i + half] = b * c[i] + a * si;
      }
    }
  }
}

void fsdpc__cpu_rope_fwd(float *x,           // (N, H, HD) in place
                         const float *cos,   // (maxT, RD/2)
                         const float *sin,   // (maxT, RD/2)
                         const int32_t *pos, // (N)
                         int N, int H, int HD, int RD) {
  rope_rotate(x, cos, sin, pos, N, H, HD, RD, 1.0f);
}

/* dx[i] = dy[i] c + dy[i + RD/2] s;  dx[i + RD/2] = dy[i + RD/2] c - dy[i] s */
void fsdpc__cpu_rope_bwd(float *dx, // (N, H, HD) in place
                         const float *cos, const float *sin, const int32_t *pos, int N, int H,
                         int HD, int RD) {
  rope_rotate(dx, cos, sin, pos, N, H, HD, RD, -1.0f);
}
