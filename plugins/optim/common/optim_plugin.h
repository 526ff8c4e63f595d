/* Shared by the in-tree optimizer plugins (header-only; plugins link nothing
 * from the core): the argument checks every fsdpc_optim_v1 plugin makes
 * alike, and the plugin descriptor with its entry point. Each check takes
 * the plugin's name, which starts every message ("adamw: step count 0 must
 * be >= 1 ..."), records one line through host h (host_call.h) and returns
 * the status; FSDPC_OK when the argument is good. */
#ifndef FSDPC_PLUGINS_OPTIM_PLUGIN_H
#define FSDPC_PLUGINS_OPTIM_PLUGIN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"

/* fn in a plugin built with its CUDA path, else NULL (fn is then never
 * named, so it need not be declared). */
#ifdef FSDPC_WITH_CUDA
#define FSDPC_OPTIM_CUDA(fn) (fn)
#else
#define FSDPC_OPTIM_CUDA(fn) NULL
#endif

/* CPU always; CUDA when the plugin was built with its CUDA path. */
static inline int fsdpc_optim_device_ok(int32_t device) {
#ifdef FSDPC_WITH_CUDA
  if (device == FSDPC_DEVICE_CUDA)
    return 1;
#endif
  return device == FSDPC_DEVICE_CPU;
}

/* The vtable's supports(): every situation whose device the build has. */
static inline int32_t fsdpc_optim_supports(const char *name, const fsdpc_situation *s) {
  if (s == NULL || !FSDPC_HAS_FIELD(s, fsdpc_situation, device) || fsdpc_optim_device_ok(s->device))
    return FSDPC_OK;
  return fsdpc_pl_fail(fsdpc_pl_sit_host(s), FSDPC_UNSUPPORTED,
                       "%s: device %d is not supported: this build of the plugin has only the CPU "
                       "path (nvcc was not found at build time); use CPU offload or rebuild with "
                       "CUDA",
                       name, (int)s->device);
}

/* The start of every create(): out is given (and set to NULL), init is a
 * whole v1 struct and names a device the build has. */
static inline int32_t fsdpc_optim_check_create(const char *name, const fsdpc_host_api *h,
                                               const fsdpc_optim_init *init,
                                               fsdpc_optimizer **out) {
  if (out == NULL)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "%s: create got a NULL out pointer", name);
  *out = NULL;
  if (!FSDPC_HAS_FIELD(init, fsdpc_optim_init, device))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: create got a NULL or too small fsdpc_optim_init", name);
  if (!fsdpc_optim_device_ok(init->device))
    return fsdpc_pl_fail(h, FSDPC_UNSUPPORTED,
                         "%s: device %d is not supported: this build of the plugin has only the "
                         "CPU path (nvcc was not found at build time)",
                         name, (int)init->device);
  return FSDPC_OK;
}

/* optim.<key> = x in [0, 1); example is the value the message suggests. */
static inline int32_t fsdpc_optim_check_beta(const char *name, const fsdpc_host_api *h,
                                             const char *key, double x, const char *example) {
  if (!(x >= 0.0 && x < 1.0))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: %s = %g is out of range [0, 1); set optim.%s to e.g. %s", name, key,
                         x, key, example);
  return FSDPC_OK;
}

/* AdamW's hyper-parameters: beta1 and beta2 in [0, 1), eps finite and > 0,
 * weight_decay finite and >= 0, checked in that order. */
static inline int32_t fsdpc_optim_check_adam(const char *name, const fsdpc_host_api *h,
                                             const fsdpc_optim_init *init) {
  int32_t st = fsdpc_optim_check_beta(name, h, "beta1", init->beta1, "0.9");
  if (st == FSDPC_OK)
    st = fsdpc_optim_check_beta(name, h, "beta2", init->beta2, "0.999");
  if (st != FSDPC_OK)
    return st;
  if (!(init->eps > 0.0) || !isfinite(init->eps))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: eps = %g must be a finite number > 0; set optim.eps to e.g. 1e-8",
                         name, init->eps);
  if (!(init->weight_decay >= 0.0) || !isfinite(init->weight_decay))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: weight_decay = %g must be a finite number >= 0; set "
                         "optim.weight_decay to e.g. 0.01",
                         name, init->weight_decay);
  return FSDPC_OK;
}

/* The step-argument checks of every step(): info is a whole v1 struct, the
 * step count is 1-based, lr finite and >= 0, grad_scale finite. */
static inline int32_t fsdpc_optim_check_step(const char *name, const fsdpc_host_api *h,
                                             const fsdpc_optim_step_info *info) {
  if (!FSDPC_HAS_FIELD(info, fsdpc_optim_step_info, grad_scale))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: step got a NULL or too small fsdpc_optim_step_info", name);
  if (info->step < 1)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "%s: step count %lld must be >= 1 (it is 1-based)",
                         name, (long long)info->step);
  if (!(info->lr >= 0.0) || !isfinite(info->lr))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: learning rate %g must be a finite number >= 0", name, info->lr);
  if (!isfinite(info->grad_scale))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "%s: grad_scale %g is not finite", name,
                         info->grad_scale);
  return FSDPC_OK;
}

/* step()'s tensor list: t may be NULL only when n is 0. */
static inline int32_t fsdpc_optim_check_list(const char *name, const fsdpc_host_api *h,
                                             const fsdpc_optim_tensor *t, uint32_t n) {
  if (n > 0 && t == NULL)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "%s: step got n_tensors=%u but tensors is NULL",
                         name, n);
  return FSDPC_OK;
}

/* Tensor k is a whole v1 struct (fields up to decay). */
static inline int32_t fsdpc_optim_check_tensor_v1(const char *name, const fsdpc_host_api *h,
                                                  const fsdpc_optim_tensor *t, uint32_t k) {
  if (!FSDPC_HAS_FIELD(t, fsdpc_optim_tensor, decay))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: tensor %u has struct_size %u, too small for fsdpc_optim_tensor v1",
                         name, k, t->struct_size);
  return FSDPC_OK;
}

/* Tensor k's two state slots, `stride` apart, do not overlap. */
static inline int32_t fsdpc_optim_check_stride(const char *name, const fsdpc_host_api *h,
                                               const fsdpc_optim_tensor *t, uint32_t k) {
  if (t->stride < t->numel)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "%s: tensor %u has state stride %llu < numel %llu; slots would overlap",
                         name, k, (unsigned long long)t->stride, (unsigned long long)t->numel);
  return FSDPC_OK;
}

/* A plugin's CUDA call: fills msg (one line) and returns a status. */
typedef int32_t (*fsdpc_optim_cuda_zero_fn)(float *state, uint64_t n_floats, void *stream,
                                            char *msg, size_t cap);

/* Passes a CUDA call's status on, with its message recorded through h. */
static inline int32_t fsdpc_optim_relay(const fsdpc_host_api *h, int32_t st, const char *msg) {
  return st == FSDPC_OK ? st : fsdpc_pl_fail(h, st, "%s", msg);
}

/* The stream a step is to run on (NULL: the legacy default stream, or a
 * host that predates the field). */
static inline void *fsdpc_optim_stream(const fsdpc_optim_step_info *info) {
  return FSDPC_HAS_FIELD(info, fsdpc_optim_step_info, stream) ? info->stream : NULL;
}

/* The rest of init_state() once the plugin has accepted device: zeroes
 * n_floats of state, on the GPU through cuda_zero when device is CUDA
 * (FSDPC_OPTIM_CUDA(the plugin's function)), else on the CPU. */
static inline int32_t fsdpc_optim_zero_state(const char *name, const fsdpc_host_api *h,
                                             float *state, uint64_t n_floats, int32_t device,
                                             void *stream, fsdpc_optim_cuda_zero_fn cuda_zero) {
  if (n_floats > 0 && state == NULL)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "%s: init_state got a NULL state for %llu floats",
                         name, (unsigned long long)n_floats);
  if (device == FSDPC_DEVICE_CUDA && cuda_zero != NULL) {
    char msg[256];
    return fsdpc_optim_relay(h, cuda_zero(state, n_floats, stream, msg, sizeof msg), msg);
  }
  for (uint64_t i = 0; i < n_floats; i++)
    state[i] = 0.0f;
  return FSDPC_OK;
}

/* Defines the plugin descriptor of a plugin named name_str whose one
 * component is `component` (an fsdpc_component_desc), and the entry point,
 * the plugin's only exported symbol. Use once, at the end of the file. */
#define FSDPC_OPTIM_PLUGIN(name_str, component)                                                    \
  static const fsdpc_component_desc *const fsdpc_optim_components[] = {&(component)};              \
  static const fsdpc_plugin_desc fsdpc_optim_plugin = {                                            \
      /* .struct_size = */ sizeof(fsdpc_plugin_desc),                                              \
      /* .abi_major = */ FSDPC_PLUGIN_ABI_MAJOR,                                                   \
      /* .abi_minor = */ FSDPC_PLUGIN_ABI_MINOR,                                                   \
      /* .name = */ name_str,                                                                      \
      /* .components = */ fsdpc_optim_components,                                                  \
      /* .n_components = */ 1,                                                                     \
  };                                                                                               \
  FSDPC_PLUGIN_DEFINE(fsdpc_optim_plugin, 1)

#endif
