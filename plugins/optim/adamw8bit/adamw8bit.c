/* 8-bit AdamW optimizer plugin (fsdpc_optim_v1 with quantized state): CPU
 * path here, CUDA path in adamw8bit.cu, the per-element definition in
 * adamw8bit_math.h (read its header for the scheme).
 *
 * State: slots "exp_avg" (m, signed dynamic map) and "exp_avg_sq" (v,
 * unsigned dynamic map), one byte per element each plus one fp32 absmax per
 * block of 256 elements each; master weights stay fp32. A parameter with
 * fewer than `min_8bit_size` elements keeps fp32 m and v (the host gives it
 * v1 fp32 slots) and is updated with the same formulas, unquantized.
 *
 * Per element, with t = info->step (1-based), c1 = 1 - b1^t, c2 = sqrt(1 - b2^t):
 *
 *   g  = grad * grad_scale
 *   v  = v*b2 + ((1 - b2)*g)*g
 *   m  = m*b1 + (1 - b1)*g
 *   p  = p + (-lr*c2/c1) * (m / (sqrt(v) + eps*c2))
 *   p  = p * (1 - lr*wd)                        (only when tensor.decay)
 *
 * and, for a quantized tensor, m and v are dequantized before and quantized
 * (with the block's new absmax) after. Mathematically this is AdamW; the
 * operation order is bitsandbytes'.
 *
 * Threads: one OpenMP region per step over the blocks of all tensors (fp32
 * tensors are cut into 256-element pieces too), split into contiguous
 * ranges; a block is updated by one thread, so the result does not depend on
 * the thread count.
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../common/optim_parallel.h"
#include "../common/optim_plugin.h"
#include "adamw8bit_cpu.h"
#include "fsdpc/plugin.h"

#define Q8_N_SLOTS 2u
/* Below this many elements per step one thread is faster than a team. */
#define Q8_MIN_PARALLEL 32768u

struct fsdpc_optimizer {
  const fsdpc_host_api *host; /* of the host that created it (ABI 1.1; NULL from a 1.0 host) */
  double weight_decay, beta1, beta2, eps;
  uint64_t min_8bit_size;
  int32_t device;
  q8_tables tab;     /* the maps (signed: exp_avg, unsigned: exp_avg_sq) and the CPU's
                      * search tables for them */
  q8_block_fn block; /* the CPU kernels this CPU runs best (adamw8bit_cpu.h) */
  q8_piece_fn piece;
  float *dmaps; /* the same on the GPU (CUDA path), else NULL */
};

static int is_quantized(const fsdpc_optim_tensor *t) {
  return FSDPC_HAS_FIELD(t, fsdpc_optim_tensor, block_phase) && t->qstate != NULL;
}

/* Work items of a tensor: its blocks (quantized) or 256-element pieces. */
static uint64_t n_items(const fsdpc_optim_tensor *t) {
  return is_quantized(t) ? q8_n_blocks(t->numel, t->block_phase) : q8_n_blocks(t->numel, 0);
}

/* ---------------------------------------------------------------------- */
/* The kernels: adamw8bit_cpu.h (scalar, AVX2, AVX-512, picked at create). */

/* Runs items [lo, hi) of the concatenation of the tensors' items. */
static void run_items(const fsdpc_optim_tensor *t, uint32_t n_tensors, uint64_t lo, uint64_t hi,
                      const q8_scalars *sc, const fsdpc_optimizer *opt) {
  uint64_t base = 0;
  for (uint32_t k = 0; k < n_tensors && base < hi; k++) {
    const uint64_t end = base + n_items(&t[k]);
    const uint64_t a = lo > base ? lo : base, b = hi < end ? hi : end;
    for (uint64_t it = a; it < b; it++) {
      if (is_quantized(&t[k]))
        opt->block(&t[k], it - base, sc, &opt->tab);
      else
        opt->piece(&t[k], it - base, sc);
    }
    base = end;
  }
}

/* ---------------------------------------------------------------------- */
/* Validation.                                                              */

static int32_t check_tensor(const fsdpc_host_api *h, const fsdpc_optim_tensor *t, uint32_t k) {
  int32_t st = fsdpc_optim_check_tensor_v1("adamw8bit", h, t, k);
  if (st != FSDPC_OK || t->numel == 0)
    return st;
  if (!t->param || !t->grad)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw8bit: tensor %u (numel %llu) has a NULL param or grad pointer", k,
                         (unsigned long long)t->numel);
  if ((st = fsdpc_optim_check_stride("adamw8bit", h, t, k)) != FSDPC_OK)
    return st;
  if (!is_quantized(t))
    return t->state
               ? FSDPC_OK
               : fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                               "adamw8bit: tensor %u (numel %llu) has neither fp32 state nor codes",
                               k, (unsigned long long)t->numel);
  if (t->block_phase >= Q8_BLOCK)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw8bit: tensor %u has block_phase %llu >= block %d", k,
                         (unsigned long long)t->block_phase, Q8_BLOCK);
  const uint64_t nb = q8_n_blocks(t->numel, t->block_phase);
  if (!t->qscale || t->scale_stride < nb)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw8bit: tensor %u has %s (scale_stride %llu, %llu blocks)", k,
                         t->qscale ? "too small a scale stride" : "codes but no scales",
                         (unsigned long long)t->scale_stride, (unsigned long long)nb);
  return FSDPC_OK;
}

static int32_t check_tensors(const fsdpc_host_api *h, const fsdpc_optim_tensor *t, uint32_t n,
                             uint64_t *total, uint64_t *items) {
  int32_t st = fsdpc_optim_check_list("adamw8bit", h, t, n);
  if (st != FSDPC_OK)
    return st;
  *total = *items = 0;
  for (uint32_t k = 0; k < n; k++) {
    if ((st = check_tensor(h, &t[k], k)) != FSDPC_OK)
      return st;
    *total += t[k].numel;
    *items += n_items(&t[k]);
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* Options.                                                                 */

static const fsdpc_option_desc q8_opt_min_size = {
    /* .struct_size = */ sizeof(fsdpc_option_desc),
    /* .key = */ "min_8bit_size",
    /* .type = */ FSDPC_OPT_INT,
    /* .default_value = */ "4096",
    /* .min = */ 0.0,
    /* .max = */ 1e15,
    /* .help = */
    "parameters with fewer elements keep fp32 exp_avg and exp_avg_sq "
    "(bitsandbytes' min_8bit_size); 0 quantizes every parameter",
};

static const fsdpc_option_desc *const q8_options[] = {&q8_opt_min_size};

/* ---------------------------------------------------------------------- */
/* The vtable.                                                              */

static int32_t q8_supports(const fsdpc_situation *s) {
  return fsdpc_optim_supports("adamw8bit", s);
}

static void q8_destroy(fsdpc_optimizer *opt) {
  if (opt == NULL)
    return;
#ifdef FSDPC_WITH_CUDA
  adamw8bit_cuda_free(opt->dmaps);
#endif
  free(opt);
}

static int32_t q8_create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  const fsdpc_host_api *h = fsdpc_pl_optim_host(init);
  int32_t st = fsdpc_optim_check_create("adamw8bit", h, init, out);
  if (st != FSDPC_OK)
    return st;
  int64_t min_size = Q8_MIN_8BIT_DEFAULT; /* the declared default, when the host gives none */
  if (init->opts != NULL && (st = fsdpc_pl_opt(h, init->opts, "min_8bit_size", FSDPC_OPT_INT,
                                               &min_size, sizeof min_size)) != FSDPC_OK)
    return st; /* the host has said why */
  if (min_size < 0)
    return fsdpc_pl_fail(
        h, FSDPC_INVALID_USAGE,
        "adamw8bit: min_8bit_size = %lld must be >= 0; set optim.options.min_8bit_size "
        "to e.g. 4096 (0 quantizes every parameter)",
        (long long)min_size);
  if ((st = fsdpc_optim_check_adam("adamw8bit", h, init)) != FSDPC_OK)
    return st;
  fsdpc_optimizer *opt = calloc(1, sizeof *opt);
  if (opt == NULL)
    return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR,
                         "adamw8bit: out of host memory creating the optimizer");
  opt->host = h;
  opt->weight_decay = init->weight_decay;
  opt->beta1 = init->beta1;
  opt->beta2 = init->beta2;
  opt->eps = init->eps;
  opt->min_8bit_size = (uint64_t)min_size;
  opt->device = init->device;
  q8_tables_build(&opt->tab);
  int isa = q8_cpu_isa();
  /* with gathers or without: whichever this CPU runs faster (only the CPU
   * path steps with these kernels) */
  if (isa == Q8_ISA_AVX512 && init->device == FSDPC_DEVICE_CPU)
    isa = q8_avx512_fastest(&opt->tab);
  q8_cpu_pick(isa, &opt->tab, &opt->block, &opt->piece);
  *out = opt; /* the GPU copy of the maps is made at the first CUDA step */
  return FSDPC_OK;
}

static uint32_t q8_n_slots(const fsdpc_optimizer *opt) {
  return Q8_N_SLOTS;
}

static const char *q8_slot_name(const fsdpc_optimizer *opt, uint32_t i) {
  static const char *const names[Q8_N_SLOTS] = {"exp_avg", "exp_avg_sq"};
  return i < Q8_N_SLOTS ? names[i] : NULL;
}

static int32_t q8_qformat(const fsdpc_optimizer *opt, fsdpc_optim_qformat *out) {
  const fsdpc_host_api *h = opt ? opt->host : NULL;
  if (opt == NULL || !FSDPC_HAS_FIELD(out, fsdpc_optim_qformat, min_numel))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw8bit: qformat got a NULL or too small argument");
  out->block = Q8_BLOCK;
  out->min_numel = opt->min_8bit_size;
  return FSDPC_OK;
}

/* The fp32 slots of small parameters: zeros. */
static int32_t q8_init_state(fsdpc_optimizer *opt, float *state, uint64_t n_floats, int32_t device,
                             void *stream) {
  const fsdpc_host_api *h = opt ? opt->host : NULL;
  if (!fsdpc_optim_device_ok(device))
    return fsdpc_pl_fail(h, FSDPC_UNSUPPORTED,
                         "adamw8bit: init_state on device %d is not supported", (int)device);
  return fsdpc_optim_zero_state("adamw8bit", h, state, n_floats, device, stream,
                                FSDPC_OPTIM_CUDA(adamw8bit_cuda_zero));
}

static int32_t q8_step(fsdpc_optimizer *opt, const fsdpc_optim_tensor *tensors, uint32_t n_tensors,
                       const fsdpc_optim_step_info *info) {
  if (opt == NULL)
    return FSDPC_INVALID_USAGE; /* no optimizer, no host to tell */
  const fsdpc_host_api *h = opt->host;
  uint64_t total = 0, items = 0;
  int32_t st = fsdpc_optim_check_step("adamw8bit", h, info);
  if (st == FSDPC_OK)
    st = check_tensors(h, tensors, n_tensors, &total, &items);
  if (st != FSDPC_OK || total == 0)
    return st;

  /* Scalars formed in double, rounded to fp32 where they meet the tensors. */
  const double t = (double)info->step, lr = info->lr;
  const double c1 = 1.0 - pow(opt->beta1, t), c2 = sqrt(1.0 - pow(opt->beta2, t));
  const q8_scalars sc = {
      .grad_scale = (float)info->grad_scale,
      .beta1 = (float)opt->beta1,
      .w1 = (float)(1.0 - opt->beta1),
      .beta2 = (float)opt->beta2,
      .w2 = (float)(1.0 - opt->beta2),
      .step_size = (float)(-lr * c2 / c1),
      .eps_c2 = (float)(opt->eps * c2),
      .decay_factor = (float)(1.0 - lr * opt->weight_decay),
  };

#ifdef FSDPC_WITH_CUDA
  if (opt->device == FSDPC_DEVICE_CUDA) {
    char msg[256];
    if (opt->dmaps == NULL &&
        (st = adamw8bit_cuda_maps(&opt->tab.maps[0][0], &opt->dmaps, msg, sizeof msg)) != FSDPC_OK)
      return fsdpc_pl_fail(h, st, "%s", msg);
    st = adamw8bit_cuda_step(tensors, n_tensors, &sc, opt->dmaps, fsdpc_optim_stream(info), msg,
                             sizeof msg);
    return fsdpc_optim_relay(h, st, msg);
  }
#endif
  int nt = fsdpc_optim_threads(info, total, Q8_MIN_PARALLEL);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    uint64_t lo, hi;
    fsdpc_optim_range(items, 1, &lo, &hi);
    run_items(tensors, n_tensors, lo, hi, &sc, opt);
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* Checkpoint conversion (host memory).                                      */

static int32_t check_convert(const fsdpc_optimizer *opt, const fsdpc_optim_tensor *t, uint32_t slot,
                             const void *values, const void *scales) {
  const fsdpc_host_api *h = opt ? opt->host : NULL;
  if (opt == NULL || t == NULL || slot >= Q8_N_SLOTS || (t->numel && (!values || !scales)))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "adamw8bit: state conversion got a bad argument (slot %u)", slot);
  int32_t st = check_tensor(h, t, 0);
  if (st == FSDPC_OK && t->numel && !is_quantized(t))
    st = fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                       "adamw8bit: state conversion of a tensor without codes");
  return st;
}

static int32_t q8_export(fsdpc_optimizer *opt, const fsdpc_optim_tensor *t, uint32_t slot,
                         float *values, float *scales) {
  int32_t st = check_convert(opt, t, slot, values, scales);
  if (st != FSDPC_OK)
    return st;
  const uint8_t *c = t->qstate + (uint64_t)slot * t->stride;
  const float *a = t->qscale + (uint64_t)slot * t->scale_stride;
  for (uint64_t j = 0; j < t->numel; j++) {
    const float s = a[(t->block_phase + j) / Q8_BLOCK];
    values[j] = q8_dequant(opt->tab.maps[slot], c[j], s);
    scales[j] = s;
  }
  return FSDPC_OK;
}

/* What a saved state must be, element by element: finite; a block scale
 * (the absmax the codes were quantized with) non-negative and at least its
 * own value; the second moment non-negative; and below the size at which
 * the next step's bias correction (dividing by 1 - beta^t, at least
 * 1 - beta) would overflow fp32. Checksums that were recomputed after an
 * edit do not make such a state loadable. */
static int32_t check_element(const fsdpc_optimizer *opt, uint32_t slot, float v, float s,
                             uint64_t j) {
  const double limit = FLT_MAX * (1.0 - (slot == 0 ? opt->beta1 : opt->beta2)) / 2.0;
  const char *why = !isfinite(v) || !isfinite(s)                ? "is not finite"
                    : s < 0.0f                                  ? "has a negative block scale"
                    : s > 0.0f && fabsf(v) > s * (1.0f + 1e-6f) ? "exceeds its block scale"
                    : slot == 1 && v < 0.0f                     ? "is negative (a mean of squares)"
                    : fabs(v) > limit || (double)s > limit      ? "is too large for the next step"
                                                                : NULL;
  if (!why)
    return FSDPC_OK;
  return fsdpc_pl_fail(opt->host, FSDPC_INVALID_USAGE,
                       "adamw8bit: saved %s value %g (block scale %g) at element %llu %s: not a "
                       "valid state; the checkpoint is corrupt or from another optimizer",
                       q8_slot_name(opt, slot), v, s, (unsigned long long)j, why);
}

static int32_t q8_import(fsdpc_optimizer *opt, const fsdpc_optim_tensor *t, uint32_t slot,
                         const float *values, const float *scales) {
  int32_t st = check_convert(opt, t, slot, values, scales);
  if (st != FSDPC_OK)
    return st;
  for (uint64_t j = 0; j < t->numel && st == FSDPC_OK; j++)
    st = check_element(opt, slot, values[j], scales[j], j);
  if (st != FSDPC_OK)
    return st;
  uint8_t *c = t->qstate + (uint64_t)slot * t->stride;
  float *a = t->qscale + (uint64_t)slot * t->scale_stride;
  const uint64_t nb = q8_n_blocks(t->numel, t->block_phase);
  for (uint64_t b = 0; b < nb; b++) {
    const uint64_t j0 = q8_block_lo(b, t->block_phase),
                   j1 = q8_block_hi(b, t->block_phase, t->numel);
    float s = 0.0f, vmax = 0.0f;
    int one_scale = 1;
    for (uint64_t j = j0; j < j1; j++) {
      s = fmaxf(s, fmaxf(fabsf(scales[j]), fabsf(values[j])));
      vmax = fmaxf(vmax, fabsf(values[j]));
      one_scale &= scales[j] == scales[j0];
    }
    /* A whole block saved whole (the same scale on all of its elements;
     * the blocks of a Llama shape do not move with the world size) was
     * quantized with its largest value as the scale, which the codes' ends
     * (+-1) give back; a scale far above every value zeroes the block. A
     * scale of 0 carries no information (the values give it). */
    if (one_scale && j1 - j0 == Q8_BLOCK && s > 0.0f && vmax < 0.5f * s)
      return fsdpc_pl_fail(opt->host, FSDPC_INVALID_USAGE,
                           "adamw8bit: saved %s block scale %g at element %llu is above every "
                           "value of its block (largest %g): not a valid state; the checkpoint "
                           "is corrupt or from another optimizer",
                           q8_slot_name(opt, slot), s, (unsigned long long)j0, vmax);
    a[b] = s;
    for (uint64_t j = j0; j < j1; j++)
      c[j] = slot == 0 ? q8_quant_signed(opt->tab.maps[0], values[j], s)
                       : q8_quant_unsigned(opt->tab.maps[1], values[j], s);
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* Descriptors and the entry point.                                          */

static const fsdpc_optim_v1 q8_vtable = {
    /* .struct_size = */ sizeof(fsdpc_optim_v1),
    /* .supports = */ q8_supports,
    /* .create = */ q8_create,
    /* .destroy = */ q8_destroy,
    /* .n_slots = */ q8_n_slots,
    /* .slot_name = */ q8_slot_name,
    /* .init_state = */ q8_init_state,
    /* .step = */ q8_step,
    /* .param_bf16 = */ 0, /* the host casts the updated params */
    /* .qformat = */ q8_qformat,
    /* .q_export = */ q8_export,
    /* .q_import = */ q8_import,
};

static const fsdpc_component_desc q8_component = {
    /* .struct_size = */ sizeof(fsdpc_component_desc),
    /* .kind = */ FSDPC_KIND_OPTIM,
    /* .name = */ "adamw8bit",
    /* .version = */ "1.0.0",
    /* .iface_version = */ 1,
    /* .default_score = */ 15,
    /* .description = */
    "AdamW with 8-bit blockwise-quantized moments (bitsandbytes' dynamic maps, 256-element "
    "blocks); fp32 master weights",
    /* .capabilities = */
    "cpu (OpenMP over blocks; AVX-512, AVX2 or scalar, picked at load time, equal bits); fp32 "
    "params; state: 2 bytes per element + 8 bytes per 256-element block; "
    "slots exp_avg, exp_avg_sq; "
#ifdef FSDPC_WITH_CUDA
    "cuda (one thread block per quantization block, same codes as the CPU path)",
#else
    "cuda: not in this build",
#endif
    /* .options = */ q8_options,
    /* .n_options = */ 1,
    /* .vtable = */ &q8_vtable,
};

FSDPC_OPTIM_PLUGIN("adamw8bit", q8_component)
