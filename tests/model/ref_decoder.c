/* The double-precision reference decoder (see ref_decoder.h). Each block
 * says which transformers code it follows. Slow and simple: plain loops. */
#include "ref_decoder.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ref_model {
  char type[16]; /* model_type */
  int gemma3;    /* gemma3_text */
  int V, C, F, L, NH, KVH, HD, RD;
  double eps;
  int tied;
  int bias_qkv, bias_o, bias_mlp; /* which nn.Linear have bias=True */
  int qk_norm;                    /* 1 per head (qwen3), 2 whole projection (olmo2) */
  int post_norm;                  /* olmo2 */
  int fused;                      /* phi3 */
  int gemma;                      /* gemma2, gemma3_text: four norms, GeGLU */
  double norm_off;                /* Gemma2RMSNorm: (1 + weight) */
  double attn_cap, final_cap;     /* gemma2 soft-capping; 0 = none */
  double emb_mult, res_mult, scale, logits_div;
  int window[512]; /* per layer; 0 = full attention */
  int sliding[512];   /* per layer: a sliding_attention layer (gemma3_text: its own RoPE) */
  double local_theta; /* gemma3_text: the sliding_attention layers' plain RoPE base; 0 = none */
  /* RoPE */
  char rope_type[16];
  double theta, factor, low, high, attn_factor_cfg, beta_fast, beta_slow, mscale, mscale_all;
  int has_factor, orig, max_pos, truncate;
  double short_f[256], long_f[256];
};

static const cJSON *get(const cJSON *o, const char *k) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}
static double num(const cJSON *o, const char *k, double def) {
  const cJSON *v = get(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : def;
}
static int flag(const cJSON *o, const char *k, int def) {
  const cJSON *v = get(o, k);
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}
static int is(const ref_model *r, const char *t) {
  return strcmp(r->type, t) == 0;
}

/* The rope parameters: rope_parameters (transformers 5) or rope_scaling,
 * with rope_theta and partial_rotary_factor either at the top or inside. */
static void read_rope(ref_model *r, const cJSON *c) {
  const cJSON *rp = get(c, "rope_parameters");
  const cJSON *rs = rp && !cJSON_IsNull(rp) ? rp : get(c, "rope_scaling");
  if (cJSON_IsNull(rs))
    rs = NULL;
  if (r->gemma3) { /* Gemma3TextConfig: per layer type, or the legacy keys */
    const cJSON *full = get(rp, "full_attention"), *slide = get(rp, "sliding_attention");
    r->local_theta = num(slide, "rope_theta", num(c, "rope_local_base_freq", 10000.0));
    rs = full ? full : (cJSON_IsNull(get(c, "rope_scaling")) ? NULL : get(c, "rope_scaling"));
  }
  const cJSON *t = get(rs, "rope_type");
  if (!t)
    t = get(rs, "type");
  snprintf(r->rope_type, sizeof r->rope_type, "%s", cJSON_IsString(t) ? t->valuestring : "default");
  r->theta = num(rs, "rope_theta", num(c, "rope_theta", r->gemma3 ? 1e6 : 10000.0));
  double prf = num(rs, "partial_rotary_factor", num(c, "partial_rotary_factor", 1.0));
  if (!is(r, "phi3"))
    prf = 1.0; /* only Phi-3 turns part of a head */
  r->RD = (int)(r->HD * prf);
  r->has_factor = cJSON_IsNumber(get(rs, "factor"));
  r->factor = num(rs, "factor", 0.0);
  r->low = num(rs, "low_freq_factor", 1.0);
  r->high = num(rs, "high_freq_factor", 4.0);
  r->max_pos = (int)num(c, "max_position_embeddings", 2048);
  r->orig = (int)num(rs, "original_max_position_embeddings",
                     num(c, "original_max_position_embeddings", r->max_pos));
  r->attn_factor_cfg = num(rs, "attention_factor", 0.0);
  r->beta_fast = num(rs, "beta_fast", 32.0);
  r->beta_slow = num(rs, "beta_slow", 1.0);
  r->mscale = num(rs, "mscale", 0.0);
  r->mscale_all = num(rs, "mscale_all_dim", 0.0);
  r->truncate = flag(rs, "truncate", 1);
  const cJSON *sf = get(rs, "short_factor"), *lf = get(rs, "long_factor");
  for (int i = 0; i < r->RD / 2 && i < 256; i++) {
    const cJSON *a = cJSON_GetArrayItem(sf, i), *b = cJSON_GetArrayItem(lf, i);
    r->short_f[i] = cJSON_IsNumber(a) ? a->valuedouble : 1.0;
    r->long_f[i] = cJSON_IsNumber(b) ? b->valuedouble : 1.0;
  }
}

/* Which layers slide: Mistral and Phi-3 every layer with a sliding_window
 * (MistralConfig's default 4096); Qwen2/Qwen3 layer_types, derived from
 * use_sliding_window and max_window_layers when absent. */
static void read_windows(ref_model *r, const cJSON *c) {
  const cJSON *sw = get(c, "sliding_window");
  int has = sw && !cJSON_IsNull(sw);
  int w = has ? (int)sw->valuedouble : 0;
  memset(r->window, 0, sizeof r->window);
  if (is(r, "mistral") || is(r, "phi3")) {
    if (is(r, "mistral") && !sw)
      w = 4096, has = 1;
    for (int l = 0; l < r->L && has; l++)
      r->window[l] = w;
  } else if (is(r, "gemma2")) { /* Gemma2Config: layer_types, else even layers slide */
    if (!sw)
      w = 4096, has = 1;
    const cJSON *lt = get(c, "layer_types");
    for (int l = 0; l < r->L && has; l++) {
      const cJSON *e = cJSON_GetArrayItem(lt, l);
      int slide =
          lt ? cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0 : l % 2 == 0;
      r->window[l] = slide ? w : 0;
    }
  } else if (r->gemma3) { /* Gemma3TextConfig: layer_types, else 5 local : 1 global */
    if (!sw)
      w = 4096, has = 1;
    const cJSON *lt = get(c, "layer_types");
    int every = (int)num(c, "sliding_window_pattern", 6);
    for (int l = 0; l < r->L; l++) {
      const cJSON *e = cJSON_GetArrayItem(lt, l);
      r->sliding[l] = lt ? cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0
                         : (l + 1) % every != 0;
      r->window[l] = r->sliding[l] && has ? w : 0;
    }
  } else if (is(r, "qwen2") || is(r, "qwen3")) {
    if (!sw)
      w = 4096, has = 1;
    if (!flag(c, "use_sliding_window", 0))
      return;
    const cJSON *lt = get(c, "layer_types");
    int from = (int)num(c, "max_window_layers", 28);
    for (int l = 0; l < r->L && has; l++) {
      const cJSON *e = cJSON_GetArrayItem(lt, l);
      int slide =
          lt ? cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0 : l >= from;
      r->window[l] = slide ? w : 0;
    }
  }
}

ref_model *ref_create(const cJSON *c, const char **why) {
  ref_model *r = calloc(1, sizeof *r);
  const cJSON *mt = get(c, "model_type");
  snprintf(r->type, sizeof r->type, "%s", cJSON_IsString(mt) ? mt->valuestring : "llama");
  static const char *const known[] = {"llama", "mistral", "qwen2",  "qwen3",      "phi3",
                                      "olmo2", "granite", "gemma2", "gemma3_text"};
  int ok = 0;
  for (int i = 0; i < 9; i++)
    ok |= is(r, known[i]);
  if (!ok) {
    *why = "model_type";
    free(r);
    return NULL;
  }
  r->V = (int)num(c, "vocab_size", 0);
  r->C = (int)num(c, "hidden_size", 0);
  r->F = (int)num(c, "intermediate_size", 0);
  r->L = (int)num(c, "num_hidden_layers", 0);
  r->NH = (int)num(c, "num_attention_heads", 0);
  r->KVH = (int)num(c, "num_key_value_heads", r->NH);
  r->HD = (int)num(c, "head_dim", r->C / r->NH);
  r->eps = num(c, "rms_norm_eps", 1e-6);
  /* Gemma2Config and Gemma3TextConfig tie by default, LlamaConfig not */
  r->tied = flag(c, "tie_word_embeddings", is(r, "gemma2") || is(r, "gemma3_text"));
  int ab = flag(c, "attention_bias", 0);
  if (is(r, "qwen2"))
    r->bias_qkv = 1;
  else if (is(r, "llama") || is(r, "qwen3") || is(r, "olmo2") || is(r, "granite"))
    r->bias_qkv = r->bias_o = ab;
  r->bias_mlp = (is(r, "llama") || is(r, "granite")) && flag(c, "mlp_bias", 0);
  r->gemma3 = is(r, "gemma3_text");
  r->qk_norm = is(r, "qwen3") || r->gemma3 ? 1 : is(r, "olmo2") ? 2 : 0;
  r->post_norm = is(r, "olmo2") || is(r, "gemma2") || r->gemma3;
  r->fused = is(r, "phi3");
  int granite = is(r, "granite");
  r->emb_mult = granite ? num(c, "embedding_multiplier", 1.0) : 1.0;
  r->res_mult = granite ? num(c, "residual_multiplier", 1.0) : 1.0;
  r->logits_div = granite ? num(c, "logits_scaling", 1.0) : 1.0;
  r->scale = granite ? num(c, "attention_multiplier", 1.0) : 1.0 / sqrt((double)r->HD);
  if (is(r, "gemma2") || r->gemma3) { /* Gemma2/Gemma3 Model, Attention, ForCausalLM */
    const cJSON *ac = get(c, "attn_logit_softcapping"), *fc = get(c, "final_logit_softcapping");
    r->gemma = 1;
    r->norm_off = 1.0;
    r->bias_qkv = r->bias_o = ab;
    r->emb_mult = sqrt((double)r->C);
    r->scale = 1.0 / sqrt(num(c, "query_pre_attn_scalar", 256.0));
    /* Gemma3TextConfig's caps default to None; Gemma3Attention never hands
     * attn_logit_softcapping to the attention function (transformers 5.x) */
    r->attn_cap = r->gemma3 || cJSON_IsNull(ac) ? 0.0 : num(c, "attn_logit_softcapping", 50.0);
    r->final_cap = cJSON_IsNull(fc) ? 0.0 : num(c, "final_logit_softcapping", r->gemma3 ? 0 : 30.0);
  }
  read_rope(r, c);
  read_windows(r, c);
  return r;
}

void ref_destroy(ref_model *r) {
  free(r);
}
int ref_layer_window(const ref_model *r, int l) {
  return r->window[l];
}
int ref_vocab(const ref_model *r) {
  return r->V;
}

/* ---- RoPE: modeling_rope_utils.py's _compute_*_parameters ---- */

static double mscale_of(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

/* inv_freq (RD/2) and the attention factor for a forward whose largest
 * position + 1 is seq_len. */
static double rope_inv_freq(const ref_model *r, int seq_len, double *inv) {
  int dim = r->RD, half = dim / 2;
  double base = r->theta, att = 1.0;
  for (int i = 0; i < half; i++)
    inv[i] = 1.0 / pow(base, (double)(2 * i) / dim);
  if (strcmp(r->rope_type, "linear") == 0) {
    for (int i = 0; i < half; i++)
      inv[i] /= r->factor;
  } else if (strcmp(r->rope_type, "dynamic") == 0) {
    /* base grows only past max_position_embeddings */
    double len = seq_len > r->max_pos ? seq_len : r->max_pos;
    double b = base * pow(r->factor * len / r->max_pos - (r->factor - 1), dim / (dim - 2.0));
    for (int i = 0; i < half; i++)
      inv[i] = 1.0 / pow(b, (double)(2 * i) / dim);
  } else if (strcmp(r->rope_type, "llama3") == 0) {
    double lw = r->orig / r->low, hw = r->orig / r->high;
    for (int i = 0; i < half; i++) {
      double wl = 2 * M_PI / inv[i];
      double f = wl > lw ? inv[i] / r->factor : inv[i];
      double sm = (r->orig / wl - r->low) / (r->high - r->low);
      if (!(wl < hw) && !(wl > lw))
        f = (1 - sm) * f / r->factor + sm * f;
      inv[i] = f;
    }
  } else if (strcmp(r->rope_type, "yarn") == 0) {
    double factor = r->has_factor ? r->factor : (double)r->max_pos / r->orig;
    att = r->attn_factor_cfg > 0 ? r->attn_factor_cfg
          : (r->mscale > 0 && r->mscale_all > 0)
              ? mscale_of(factor, r->mscale) / mscale_of(factor, r->mscale_all)
              : mscale_of(factor, 1.0);
    double lo = dim * log(r->orig / (r->beta_fast * 2 * M_PI)) / (2 * log(base));
    double hi = dim * log(r->orig / (r->beta_slow * 2 * M_PI)) / (2 * log(base));
    if (r->truncate)
      lo = floor(lo), hi = ceil(hi);
    lo = lo < 0 ? 0 : lo;
    hi = hi > dim - 1 ? dim - 1 : hi;
    if (lo == hi)
      hi += 0.001;
    for (int i = 0; i < half; i++) {
      double pf = pow(base, (double)(2 * i) / dim);
      double ramp = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
      double ef = 1.0 - ramp;
      inv[i] = (1.0 / (factor * pf)) * (1 - ef) + (1.0 / pf) * ef;
    }
  } else if (strcmp(r->rope_type, "longrope") == 0) {
    double factor = r->has_factor ? r->factor : (double)r->max_pos / r->orig;
    att = r->attn_factor_cfg > 0 ? r->attn_factor_cfg
          : factor <= 1.0        ? 1.0
                                 : sqrt(1 + log(factor) / log((double)r->orig));
    const double *ext = seq_len > r->orig ? r->long_f : r->short_f;
    for (int i = 0; i < half; i++)
      inv[i] = 1.0 / (ext[i] * pow(base, (double)(2 * i) / dim));
  }
  return att;
}

/* q * cos + rotate_half(q) * sin on the first RD dims (Phi-3's
 * apply_rotary_pos_emb; the others have RD = HD). */
static void rope(double *x, int RD, int pos, const double *inv, double att) {
  int half = RD / 2;
  for (int i = 0; i < half; i++) {
    double c = cos(pos * inv[i]) * att, s = sin(pos * inv[i]) * att;
    double a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

/* ---- layers ---- */

typedef struct wget {
  ref_weight_fn fn;
  void *ctx;
} wget;

static const double *W(const wget *g, const char *name, uint64_t n) {
  return g->fn(g->ctx, name, n);
}

/* y (N, out) = x (N, in) @ w^T (+ b) */
static void linear(double *y, const double *x, const double *w, const double *b, int N, int in,
                   int out) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < out; o++) {
      double s = b ? b[o] : 0.0;
      for (int i = 0; i < in; i++)
        s += x[(size_t)n * in + i] * w[(size_t)o * in + i];
      y[(size_t)n * out + o] = s;
    }
}

/* RMSNorm of each of N rows of C, in place into y; Gemma2RMSNorm scales by
 * (1 + w). */
static void rmsnorm(double *y, const double *x, const double *w, int N, int C,
                    const ref_model *rm) {
  double eps = rm->eps;
  for (int n = 0; n < N; n++) {
    double ms = 0.0;
    for (int i = 0; i < C; i++)
      ms += x[(size_t)n * C + i] * x[(size_t)n * C + i];
    double r = 1.0 / sqrt(ms / C + eps);
    for (int i = 0; i < C; i++)
      y[(size_t)n * C + i] = (rm->norm_off + w[i]) * (x[(size_t)n * C + i] * r);
  }
}

static double *zalloc(size_t n) {
  return calloc(n ? n : 1, sizeof(double));
}

/* Eager attention (eager_attention_forward with masking_utils' masks:
 * causal, kv_idx > q_idx - sliding_window, and packed documents). */
static void attention(const ref_model *r, double *out, const double *q, const double *k,
                      const double *v, const int32_t *doc, int B, int T, int window) {
  int NH = r->NH, KVH = r->KVH, HD = r->HD, rep = NH / KVH;
  double *p = zalloc((size_t)T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < T; i++) {
        size_t qi = ((size_t)(b * T + i) * NH + h) * HD;
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < T; j++) {
          int ok = j <= i && (window == 0 || j > i - window) &&
                   (!doc || doc[b * T + i] == doc[b * T + j]);
          p[j] = -INFINITY;
          if (!ok)
            continue;
          size_t kj = ((size_t)(b * T + j) * KVH + h / rep) * HD;
          double s = 0.0;
          for (int d = 0; d < HD; d++)
            s += q[qi + d] * k[kj + d];
          p[j] = s * r->scale;
          if (r->attn_cap > 0) /* Gemma2's eager attention: soft-capped scores */
            p[j] = tanh(p[j] / r->attn_cap) * r->attn_cap;
          mx = fmax(mx, p[j]);
        }
        for (int j = 0; j < T; j++)
          sum += p[j] == -INFINITY ? 0.0 : exp(p[j] - mx);
        for (int d = 0; d < HD; d++)
          out[qi + d] = 0.0;
        for (int j = 0; j < T; j++) {
          if (p[j] == -INFINITY)
            continue;
          double a = exp(p[j] - mx) / sum;
          size_t vj = ((size_t)(b * T + j) * KVH + h / rep) * HD;
          for (int d = 0; d < HD; d++)
            out[qi + d] += a * v[vj + d];
        }
      }
  free(p);
}

static void name_of(char *buf, size_t cap, int l, const char *leaf) {
  snprintf(buf, cap, "model.layers.%d.%s", l, leaf);
}

/* q, k, v of one layer from its input a (N, C). */
static void qkv(const ref_model *r, const wget *g, int l, const double *a, int N, double *q,
                double *k, double *v) {
  int C = r->C, QD = r->NH * r->HD, KD = r->KVH * r->HD;
  char n1[128], n2[128];
  if (r->fused) { /* Phi3Attention: one qkv_proj, split q | k | v */
    double *t = zalloc((size_t)N * (QD + 2 * KD));
    name_of(n1, sizeof n1, l, "self_attn.qkv_proj.weight");
    linear(t, a, W(g, n1, (uint64_t)(QD + 2 * KD) * C), NULL, N, C, QD + 2 * KD);
    for (int n = 0; n < N; n++) {
      memcpy(q + (size_t)n * QD, t + (size_t)n * (QD + 2 * KD), QD * sizeof(double));
      memcpy(k + (size_t)n * KD, t + (size_t)n * (QD + 2 * KD) + QD, KD * sizeof(double));
      memcpy(v + (size_t)n * KD, t + (size_t)n * (QD + 2 * KD) + QD + KD, KD * sizeof(double));
    }
    free(t);
    return;
  }
  const char *p[3] = {"q_proj", "k_proj", "v_proj"};
  double *out[3] = {q, k, v};
  int od[3] = {QD, KD, KD};
  for (int i = 0; i < 3; i++) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "self_attn.%s.weight", p[i]);
    name_of(n1, sizeof n1, l, leaf);
    snprintf(leaf, sizeof leaf, "self_attn.%s.bias", p[i]);
    name_of(n2, sizeof n2, l, leaf);
    linear(out[i], a, W(g, n1, (uint64_t)od[i] * C), r->bias_qkv ? W(g, n2, (uint64_t)od[i]) : NULL,
           N, C, od[i]);
  }
}

/* Qwen3's q_norm/k_norm over each head's HD, OLMo 2's over the projection. */
static void qk_norms(const ref_model *r, const wget *g, int l, double *q, double *k, int N) {
  char n1[128];
  int H[2] = {r->NH, r->KVH};
  double *x[2] = {q, k};
  const char *leaf[2] = {"self_attn.q_norm.weight", "self_attn.k_norm.weight"};
  for (int i = 0; i < 2; i++) {
    name_of(n1, sizeof n1, l, leaf[i]);
    if (r->qk_norm == 1)
      rmsnorm(x[i], x[i], W(g, n1, (uint64_t)r->HD), N * H[i], r->HD, r);
    else
      rmsnorm(x[i], x[i], W(g, n1, (uint64_t)H[i] * r->HD), N, H[i] * r->HD, r);
  }
}

/* The MLP of one layer: d (N, C) from its input m (N, C). */
static void mlp(const ref_model *r, const wget *g, int l, const double *m, int N, double *d) {
  int C = r->C, F = r->F;
  char n1[128], n2[128];
  double *gate = zalloc((size_t)N * F), *up = zalloc((size_t)N * F);
  if (r->fused) { /* Phi3MLP: gate_up_proj, chunk(2): gate first */
    double *t = zalloc((size_t)N * 2 * F);
    name_of(n1, sizeof n1, l, "mlp.gate_up_proj.weight");
    linear(t, m, W(g, n1, (uint64_t)2 * F * C), NULL, N, C, 2 * F);
    for (int n = 0; n < N; n++) {
      memcpy(gate + (size_t)n * F, t + (size_t)n * 2 * F, F * sizeof(double));
      memcpy(up + (size_t)n * F, t + (size_t)n * 2 * F + F, F * sizeof(double));
    }
    free(t);
  } else {
    name_of(n1, sizeof n1, l, "mlp.gate_proj.weight");
    name_of(n2, sizeof n2, l, "mlp.gate_proj.bias");
    linear(gate, m, W(g, n1, (uint64_t)F * C), r->bias_mlp ? W(g, n2, F) : NULL, N, C, F);
    name_of(n1, sizeof n1, l, "mlp.up_proj.weight");
    name_of(n2, sizeof n2, l, "mlp.up_proj.bias");
    linear(up, m, W(g, n1, (uint64_t)F * C), r->bias_mlp ? W(g, n2, F) : NULL, N, C, F);
  }
  for (size_t i = 0; i < (size_t)N * F; i++) {
    double x = gate[i]; /* gelu_pytorch_tanh (Gemma2MLP), else silu */
    gate[i] = r->gemma ? 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)))
                       : x / (1.0 + exp(-x));
    gate[i] *= up[i];
  }
  name_of(n1, sizeof n1, l, "mlp.down_proj.weight");
  name_of(n2, sizeof n2, l, "mlp.down_proj.bias");
  linear(d, gate, W(g, n1, (uint64_t)C * F), r->bias_mlp ? W(g, n2, C) : NULL, N, F, C);
  free(gate);
  free(up);
}

/* One decoder layer on h (N, C) in place. */
static void layer(const ref_model *r, const wget *g, int l, double *h, const int32_t *pos,
                  const int32_t *doc, int B, int T, const double *inv, double att,
                  const double *inv_local) {
  if (r->gemma3 && r->sliding[l]) /* Gemma3's rotary_emb for sliding_attention */
    inv = inv_local, att = 1.0;
  int N = B * T, C = r->C, QD = r->NH * r->HD, KD = r->KVH * r->HD;
  char n1[128], n2[128];
  double *a = zalloc((size_t)N * C), *q = zalloc((size_t)N * QD), *k = zalloc((size_t)N * KD);
  double *v = zalloc((size_t)N * KD), *o = zalloc((size_t)N * QD), *t = zalloc((size_t)N * C);
  if (r->post_norm && !r->gemma) { /* Olmo2DecoderLayer: no input norm */
    memcpy(a, h, (size_t)N * C * sizeof(double));
  } else {
    name_of(n1, sizeof n1, l, "input_layernorm.weight");
    rmsnorm(a, h, W(g, n1, C), N, C, r);
  }
  qkv(r, g, l, a, N, q, k, v);
  if (r->qk_norm)
    qk_norms(r, g, l, q, k, N);
  for (int n = 0; n < N; n++) {
    for (int hh = 0; hh < r->NH; hh++)
      rope(q + ((size_t)n * r->NH + hh) * r->HD, r->RD, pos[n], inv, att);
    for (int hh = 0; hh < r->KVH; hh++)
      rope(k + ((size_t)n * r->KVH + hh) * r->HD, r->RD, pos[n], inv, att);
  }
  attention(r, o, q, k, v, doc, B, T, r->window[l]);
  name_of(n1, sizeof n1, l, "self_attn.o_proj.weight");
  name_of(n2, sizeof n2, l, "self_attn.o_proj.bias");
  linear(t, o, W(g, n1, (uint64_t)C * QD), r->bias_o ? W(g, n2, C) : NULL, N, QD, C);
  if (r->post_norm) {
    name_of(n1, sizeof n1, l, "post_attention_layernorm.weight");
    rmsnorm(t, t, W(g, n1, C), N, C, r);
  }
  for (size_t i = 0; i < (size_t)N * C; i++)
    h[i] += t[i] * r->res_mult; /* GraniteDecoderLayer: residual + out * multiplier */
  if (r->gemma) {               /* Gemma2DecoderLayer: pre_feedforward_layernorm */
    name_of(n1, sizeof n1, l, "pre_feedforward_layernorm.weight");
    rmsnorm(a, h, W(g, n1, C), N, C, r);
  } else if (r->post_norm) {
    memcpy(a, h, (size_t)N * C * sizeof(double));
  } else {
    name_of(n1, sizeof n1, l, "post_attention_layernorm.weight");
    rmsnorm(a, h, W(g, n1, C), N, C, r);
  }
  mlp(r, g, l, a, N, t);
  if (r->post_norm) {
    name_of(n1, sizeof n1, l, "post_feedforward_layernorm.weight");
    rmsnorm(t, t, W(g, n1, C), N, C, r);
  }
  for (size_t i = 0; i < (size_t)N * C; i++)
    h[i] += t[i] * r->res_mult;
  free(a);
  free(q);
  free(k);
  free(v);
  free(o);
  free(t);
}

double ref_forward(const ref_model *r, ref_weight_fn fn, void *wctx, const int32_t *ids,
                   const int32_t *labels, const int32_t *doc, int B, int T, double *logits_out) {
  wget g = {fn, wctx};
  int N = B * T, C = r->C, V = r->V;
  int32_t *pos = malloc((size_t)N * sizeof *pos);
  int longest = 0;
  for (int n = 0; n < N; n++) {
    int t = n % T;
    pos[n] = t == 0 || (doc && doc[n] != doc[n - 1]) ? 0 : pos[n - 1] + 1;
    longest = pos[n] + 1 > longest ? pos[n] + 1 : longest;
  }
  double inv[256], att = rope_inv_freq(r, longest, inv), inv_local[256];
  for (int i = 0; i < r->RD / 2; i++) /* plain RoPE of base local_theta */
    inv_local[i] = r->local_theta > 0 ? 1.0 / pow(r->local_theta, (double)(2 * i) / r->RD) : 0.0;
  double *h = zalloc((size_t)N * C);
  const double *emb = W(&g, "model.embed_tokens.weight", (uint64_t)V * C);
  for (int n = 0; n < N; n++)
    for (int i = 0; i < C; i++)
      h[(size_t)n * C + i] = emb[(size_t)ids[n] * C + i] * r->emb_mult;
  for (int l = 0; l < r->L; l++)
    layer(r, &g, l, h, pos, doc, B, T, inv, att, inv_local);
  rmsnorm(h, h, W(&g, "model.norm.weight", C), N, C, r);
  const double *head = r->tied ? emb : W(&g, "lm_head.weight", (uint64_t)V * C);
  double *lg = zalloc((size_t)V), loss = 0.0;
  int count = 0;
  for (int n = 0; n < N; n++) {
    linear(lg, h + (size_t)n * C, head, NULL, 1, C, V);
    for (int v = 0; v < V; v++)
      lg[v] /= r->logits_div; /* GraniteForCausalLM: logits / logits_scaling */
    for (int v = 0; v < V && r->final_cap > 0; v++) /* Gemma2ForCausalLM */
      lg[v] = tanh(lg[v] / r->final_cap) * r->final_cap;
    if (logits_out)
      memcpy(logits_out + (size_t)n * V, lg, (size_t)V * sizeof(double));
    if (labels && labels[n] != -100) {
      double mx = -INFINITY, s = 0.0;
      for (int v = 0; v < V; v++)
        mx = fmax(mx, lg[v]);
      for (int v = 0; v < V; v++)
        s += exp(lg[v] - mx);
      loss += log(s) + mx - lg[labels[n]];
      count++;
    }
  }
  free(lg);
  free(h);
  free(pos);
  return count ? loss / count : 0.0;
}
