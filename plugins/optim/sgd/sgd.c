/* SGD optimizer plugin (fsdpc_optim_v1): CPU path here, CUDA path in sgd.cu.
 *
 * Semantics are torch.optim.SGD (maximize=False), as its single-tensor
 * ("for-loop") path computes them in fp32, with each Python-float scalar
 * rounded to float where it meets a tensor. Per element, with lr = info->lr,
 * mu = momentum, tau = dampening (plugin option), wd = weight_decay:
 *
 *   g = grad * grad_scale                  (clip coefficient first)
 *   g = g + wd*p                           (coupled L2, only when tensor.decay
 *                                           and wd != 0)
 *   if mu > 0:
 *     step 1:  buf = g                     (PyTorch clones the first gradient:
 *                                           no dampening on the first step)
 *     else:    buf = buf*mu + (1 - tau)*g
 *     g = nesterov ? g + mu*buf : buf
 *   p = p + (-lr)*g
 *
 * PyTorch knows the first step by a missing momentum buffer; fsdpc has no
 * such thing (state is a plain fp32 plane), so info->step == 1 marks it. A
 * run resumed from a checkpoint starts at step > 1 with the saved buffer.
 * State: one slot "momentum_buffer" when mu > 0, none otherwise (state may
 * then be NULL). Nesterov needs mu > 0 and tau == 0 (PyTorch's rule).
 *
 * Threads: one OpenMP region per step over the concatenated elements of all
 * tensors, split into contiguous ranges; every element is independent, so
 * the result does not depend on the thread count. The tensors of one call
 * must not overlap.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../common/optim_parallel.h"
#include "../common/optim_plugin.h"
#include "fsdpc/plugin.h"
#include "sgd_cuda.h"

/* Below this many elements per step one thread is faster than a team. */
#define SGD_MIN_PARALLEL 32768u
/* Thread ranges start on multiples of this (a 256-byte boundary). */
#define SGD_GRAIN 64u

struct fsdpc_optimizer {
  double weight_decay, momentum, dampening;
  int32_t nesterov;
  int32_t device;
  const fsdpc_host_api *host; /* of the host that created it (ABI 1.1) */
};

/* ---------------------------------------------------------------------- */
/* The kernel.                                                              */

/* Always inlined into sgd_kernel with constant flags, so each combination
 * becomes its own branch-free, vectorisable loop. */
static inline __attribute__((always_inline)) void
sgd_loop(float *restrict p,       // (n)
         const float *restrict g, // (n)
         float *restrict buf,     // (n) momentum_buffer, or NULL without momentum
         uint64_t n, const sgd_scalars *sc, const int decay, const int momentum_on, const int first,
         const int nesterov) {
  const float gs = sc->grad_scale, wd = sc->weight_decay, mu = sc->momentum, w = sc->w;
  const float nlr = sc->neg_lr;
  for (uint64_t i = 0; i < n; i++) {
    float d = g[i] * gs;
    if (decay)
      d = d + wd * p[i];
    if (momentum_on) {
      const float b = first ? d : buf[i] * mu + w * d;
      buf[i] = b;
      d = nesterov ? d + mu * b : b;
    }
    p[i] = p[i] + nlr * d;
  }
}

static void sgd_kernel(float *restrict p, const float *restrict g, float *restrict buf, uint64_t n,
                       const sgd_scalars *sc, int decay) {
  const int code =
      (decay ? 1 : 0) | (sc->momentum_on ? 2 : 0) | (sc->first ? 4 : 0) | (sc->nesterov ? 8 : 0);
  switch (code) {
  case 0:
    sgd_loop(p, g, NULL, n, sc, 0, 0, 0, 0);
    break;
  case 1:
    sgd_loop(p, g, NULL, n, sc, 1, 0, 0, 0);
    break;
  case 2:
    sgd_loop(p, g, buf, n, sc, 0, 1, 0, 0);
    break;
  case 3:
    sgd_loop(p, g, buf, n, sc, 1, 1, 0, 0);
    break;
  case 6:
    sgd_loop(p, g, buf, n, sc, 0, 1, 1, 0);
    break;
  case 7:
    sgd_loop(p, g, buf, n, sc, 1, 1, 1, 0);
    break;
  case 10:
    sgd_loop(p, g, buf, n, sc, 0, 1, 0, 1);
    break;
  case 11:
    sgd_loop(p, g, buf, n, sc, 1, 1, 0, 1);
    break;
  case 14:
    sgd_loop(p, g, buf, n, sc, 0, 1, 1, 1);
    break;
  case 15:
    sgd_loop(p, g, buf, n, sc, 1, 1, 1, 1);
    break;
  default:
    break; /* unreachable: nesterov/first imply momentum_on */
  }
}

/* Runs the kernel over elements [lo, hi) of the concatenation of tensors. */
static void sgd_range(const fsdpc_optim_tensor *t, uint32_t n_tensors, uint64_t lo, uint64_t hi,
                      const sgd_scalars *sc) {
  uint64_t base = 0;
  for (uint32_t k = 0; k < n_tensors && base < hi; k++) {
    const uint64_t end = base + t[k].numel;
    const uint64_t a = lo > base ? lo : base, b = hi < end ? hi : end;
    if (a < b) {
      const uint64_t off = a - base;
      float *buf = sc->momentum_on ? t[k].state + off : NULL;
      sgd_kernel(t[k].param + off, t[k].grad + off, buf, b - a, sc,
                 t[k].decay && sc->weight_decay != 0.0f);
    }
    base = end;
  }
}

/* ---------------------------------------------------------------------- */
/* Validation.                                                              */

static int32_t check_tensors(const fsdpc_host_api *h, const fsdpc_optim_tensor *t, uint32_t n,
                             int need_state, uint64_t *total) {
  int32_t st = fsdpc_optim_check_list("sgd", h, t, n);
  if (st != FSDPC_OK)
    return st;
  *total = 0;
  for (uint32_t k = 0; k < n; k++) {
    if ((st = fsdpc_optim_check_tensor_v1("sgd", h, &t[k], k)) != FSDPC_OK)
      return st;
    if (t[k].numel == 0)
      continue;
    if (!t[k].param || !t[k].grad || (need_state && !t[k].state))
      return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                           "sgd: tensor %u (numel %llu) has a NULL param, grad or state pointer", k,
                           (unsigned long long)t[k].numel);
    *total += t[k].numel;
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* Options.                                                                  */

static const fsdpc_option_desc sgd_opt_dampening = {
    /* .struct_size = */ sizeof(fsdpc_option_desc),
    /* .key = */ "dampening",
    /* .type = */ FSDPC_OPT_FLOAT,
    /* .default_value = */ "0",
    /* .min = */ 0.0,
    /* .max = */ 1.0,
    /* .help = */ "momentum dampening tau: buf = mu*buf + (1 - tau)*g after the first step",
};

static const fsdpc_option_desc *const sgd_options[] = {&sgd_opt_dampening};

/* ---------------------------------------------------------------------- */
/* The vtable.                                                              */

static int32_t sgd_supports(const fsdpc_situation *s) {
  return fsdpc_optim_supports("sgd", s);
}

static int32_t sgd_create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  const fsdpc_host_api *h = fsdpc_pl_optim_host(init);
  int32_t st = fsdpc_optim_check_create("sgd", h, init, out);
  if (st != FSDPC_OK)
    return st;
  double dampening = 0.0; /* the declared default, when the host gives no options */
  if (init->opts != NULL && (st = fsdpc_pl_opt(h, init->opts, "dampening", FSDPC_OPT_FLOAT,
                                               &dampening, sizeof dampening)) != FSDPC_OK)
    return st; /* the host has said why */
  if (!(init->momentum >= 0.0) || !isfinite(init->momentum))
    return fsdpc_pl_fail(
        h, FSDPC_INVALID_USAGE,
        "sgd: momentum = %g must be a finite number >= 0; set optim.momentum to e.g. 0.9 "
        "(or 0 for plain SGD)",
        init->momentum);
  if (!(dampening >= 0.0 && dampening <= 1.0))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "sgd: dampening = %g is out of range [0, 1]; set optim.options.dampening",
                         dampening);
  if (!(init->weight_decay >= 0.0) || !isfinite(init->weight_decay))
    return fsdpc_pl_fail(
        h, FSDPC_INVALID_USAGE,
        "sgd: weight_decay = %g must be a finite number >= 0; set optim.weight_decay",
        init->weight_decay);
  if (init->nesterov && (init->momentum <= 0.0 || dampening != 0.0))
    return fsdpc_pl_fail(
        h, FSDPC_INVALID_USAGE,
        "sgd: nesterov needs momentum > 0 and dampening 0 (momentum %g, dampening %g); "
        "set optim.momentum or turn nesterov off",
        init->momentum, dampening);
  fsdpc_optimizer *opt = calloc(1, sizeof *opt);
  if (opt == NULL)
    return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, "sgd: out of host memory creating the optimizer");
  opt->weight_decay = init->weight_decay;
  opt->momentum = init->momentum;
  opt->dampening = dampening;
  opt->nesterov = init->nesterov ? 1 : 0;
  opt->device = init->device;
  opt->host = h;
  *out = opt;
  return FSDPC_OK;
}

static void sgd_destroy(fsdpc_optimizer *opt) {
  free(opt);
}

static uint32_t sgd_n_slots(const fsdpc_optimizer *opt) {
  return opt != NULL && opt->momentum > 0.0 ? 1u : 0u;
}

static const char *sgd_slot_name(const fsdpc_optimizer *opt, uint32_t i) {
  return i < sgd_n_slots(opt) ? "momentum_buffer" : NULL;
}

static int32_t sgd_init_state(fsdpc_optimizer *opt, float *state, uint64_t n_floats, int32_t device,
                              void *stream) {
  const fsdpc_host_api *h = opt ? opt->host : NULL;
  if (!fsdpc_optim_device_ok(device))
    return fsdpc_pl_fail(h, FSDPC_UNSUPPORTED,
                         "sgd: init_state on device %d: only CPU state is supported", (int)device);
  /* Zeros are never read: step 1 overwrites the buffer with the gradient. */
  return fsdpc_optim_zero_state("sgd", h, state, n_floats, device, stream,
                                FSDPC_OPTIM_CUDA(sgd_cuda_zero));
}

static int32_t sgd_step(fsdpc_optimizer *opt, const fsdpc_optim_tensor *tensors, uint32_t n_tensors,
                        const fsdpc_optim_step_info *info) {
  if (opt == NULL)
    return FSDPC_INVALID_USAGE; /* no optimizer, no host to tell */
  const fsdpc_host_api *h = opt->host;
  int32_t st = fsdpc_optim_check_step("sgd", h, info);
  if (st != FSDPC_OK)
    return st;
  const int momentum_on = opt->momentum > 0.0;
  uint64_t total = 0;
  st = check_tensors(h, tensors, n_tensors, momentum_on, &total);
  if (st != FSDPC_OK || total == 0)
    return st;

  const sgd_scalars sc = {
      .grad_scale = (float)info->grad_scale,
      .weight_decay = (float)opt->weight_decay,
      .momentum = (float)opt->momentum,
      .w = (float)(1.0 - opt->dampening),
      .neg_lr = (float)(-info->lr),
      .momentum_on = momentum_on,
      .first = momentum_on && info->step == 1,
      .nesterov = momentum_on && opt->nesterov,
  };

#ifdef FSDPC_WITH_CUDA
  if (opt->device == FSDPC_DEVICE_CUDA) {
    char msg[256];
    st = sgd_cuda_step(tensors, n_tensors, &sc, fsdpc_optim_stream(info), msg, sizeof msg);
    return fsdpc_optim_relay(h, st, msg);
  }
#endif
  int nt = fsdpc_optim_threads(info, total, SGD_MIN_PARALLEL);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    uint64_t lo, hi;
    fsdpc_optim_range(total, SGD_GRAIN, &lo, &hi);
    sgd_range(tensors, n_tensors, lo, hi, &sc);
  }
  return FSDPC_OK;
}

/* ---------------------------------------------------------------------- */
/* Descriptors and the entry point.                                          */

static const fsdpc_optim_v1 sgd_vtable = {
    /* .struct_size = */ sizeof(fsdpc_optim_v1),
    /* .supports = */ sgd_supports,
    /* .create = */ sgd_create,
    /* .destroy = */ sgd_destroy,
    /* .n_slots = */ sgd_n_slots,
    /* .slot_name = */ sgd_slot_name,
    /* .init_state = */ sgd_init_state,
    /* .step = */ sgd_step,
#ifdef FSDPC_WITH_CUDA
    /* .param_bf16 = */ 1, /* the CUDA kernel (optim_multitensor.cuh) */
#else
    /* .param_bf16 = */ 0,
#endif
    /* .qformat = */ NULL, /* fp32 state */
    /* .q_export = */ NULL,
    /* .q_import = */ NULL,
};

static const fsdpc_component_desc sgd_component = {
    /* .struct_size = */ sizeof(fsdpc_component_desc),
    /* .kind = */ FSDPC_KIND_OPTIM,
    /* .name = */ "sgd",
    /* .version = */ "1.0.0",
    /* .iface_version = */ 1,
    /* .default_score = */ 10,
    /* .description = */
    "SGD with momentum, dampening, Nesterov and coupled L2 weight decay "
    "(torch.optim.SGD semantics)",
    /* .capabilities = */
    "cpu (OpenMP, SIMD); fp32 params and state; slot momentum_buffer when "
#ifdef FSDPC_WITH_CUDA
    "momentum > 0; cuda (multi-tensor kernel, bit-identical to the CPU path)",
#else
    "momentum > 0; cuda: not in this build",
#endif
    /* .options = */ sgd_options,
    /* .n_options = */ 1,
    /* .vtable = */ &sgd_vtable,
};

FSDPC_OPTIM_PLUGIN("sgd", sgd_component)
