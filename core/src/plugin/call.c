/* See call.h. */
#include "plugin/call.h"

#include <string.h>

/* A 1.1 member of a vtable: set and covered by the plugin's struct_size. */
#define MEMBER_11(v, type, f)                                                                      \
  (FSDPC_HAS_FIELD((const type *)(v), type, f) ? ((const type *)(v))->f : NULL)

static fsdpc_call call_of(const fsdpc_component *c, const fsdpc_opts *opts) {
  return (fsdpc_call){.struct_size = sizeof(fsdpc_call), .host = c->host, .opts = opts};
}

/* dst = the input struct src of size bytes, with struct_size = size and
 * its host field (at host_off) set to c's host table. */
static void *with_host(void *dst, const void *src, size_t size, size_t host_off,
                       const fsdpc_component *c) {
  uint32_t ss = (uint32_t)size;
  memcpy(dst, src, size);
  memcpy(dst, &ss, sizeof ss);
  memcpy((char *)dst + host_off, &c->host, sizeof c->host);
  return dst;
}
#define WITH_HOST(type, src, c)                                                                    \
  (*(type *)with_host(&(type){0}, (src), sizeof(type), offsetof(type, host), (c)))

int32_t fsdpc__call_supports(const fsdpc_component *c, const fsdpc_situation *s) {
  fsdpc_situation sit = WITH_HOST(fsdpc_situation, s, c);
  int32_t (*fn)(const fsdpc_situation *) = NULL;
  if (c->desc->kind == FSDPC_KIND_COLLECTIVES)
    fn = ((const fsdpc_collectives_v1 *)c->vtable)->supports;
  else if (c->desc->kind == FSDPC_KIND_OPTIM)
    fn = ((const fsdpc_optim_v1 *)c->vtable)->supports;
  return fn ? fn(&sit) : FSDPC_OK;
}

fsdpc_attn_shape fsdpc__call_attn_shape(const fsdpc_component *c, const fsdpc_attn_shape *shape) {
  return WITH_HOST(fsdpc_attn_shape, shape, c);
}

int32_t fsdpc__call_attn_supports(const fsdpc_component *c, const fsdpc_attn_shape *shape) {
  const fsdpc_attention_v1 *v = c->vtable;
  if (!v->supports)
    return FSDPC_OK;
  fsdpc_attn_shape sh = fsdpc__call_attn_shape(c, shape);
  return v->supports(&sh);
}

int32_t fsdpc__call_attn_create(const fsdpc_component *c, const fsdpc_opts *opts, int32_t device,
                                int32_t device_index, fsdpc_attn_ctx **out) {
  const fsdpc_attention_v1 *v = c->vtable;
  *out = NULL;
  int32_t (*create_call)(const fsdpc_call *, int32_t, int32_t, fsdpc_attn_ctx **) =
      MEMBER_11(v, fsdpc_attention_v1, create_call);
  if (create_call) {
    fsdpc_call call = call_of(c, opts);
    return create_call(&call, device, device_index, out);
  }
  return v->create ? v->create(opts, device, device_index, out) : FSDPC_OK;
}

int32_t fsdpc__call_optim_create(const fsdpc_component *c, const fsdpc_optim_init *init,
                                 fsdpc_optimizer **out) {
  fsdpc_optim_init in = WITH_HOST(fsdpc_optim_init, init, c);
  return ((const fsdpc_optim_v1 *)c->vtable)->create(&in, out);
}

int32_t fsdpc__call_comm_init(const fsdpc_component *c, const fsdpc_comm_init *init,
                              fsdpc_comm **out) {
  fsdpc_comm_init in = WITH_HOST(fsdpc_comm_init, init, c);
  return ((const fsdpc_collectives_v1 *)c->vtable)->init(&in, out);
}

int32_t fsdpc__call_wrap_plan(const fsdpc_component *c, const fsdpc_opts *opts,
                              const fsdpc_wrap_param *params, uint32_t n_params,
                              uint32_t *unit_of_param, uint32_t *n_units) {
  const fsdpc_wrap_v1 *v = c->vtable;
  int32_t (*plan_call)(const fsdpc_call *, const fsdpc_wrap_param *, uint32_t, uint32_t *,
                       uint32_t *) = MEMBER_11(v, fsdpc_wrap_v1, plan_call);
  if (plan_call) {
    fsdpc_call call = call_of(c, opts);
    return plan_call(&call, params, n_params, unit_of_param, n_units);
  }
  return v->plan(opts, params, n_params, unit_of_param, n_units);
}

int32_t fsdpc__call_sd_probe(const fsdpc_component *c, const char *dir) {
  const fsdpc_statedict_v1 *v = c->vtable;
  int32_t (*probe_call)(const fsdpc_call *, const char *) =
      MEMBER_11(v, fsdpc_statedict_v1, probe_call);
  if (probe_call) {
    fsdpc_call call = call_of(c, NULL);
    return probe_call(&call, dir);
  }
  return v->probe ? v->probe(dir) : FSDPC_UNSUPPORTED;
}

int32_t fsdpc__call_sd_save(const fsdpc_component *c, const fsdpc_opts *opts,
                            const fsdpc_sd_host *sd, const char *dir,
                            const fsdpc_sd_save_opts *save_opts) {
  const fsdpc_statedict_v1 *v = c->vtable;
  int32_t (*save_call)(const fsdpc_call *, const fsdpc_sd_host *, const char *,
                       const fsdpc_sd_save_opts *) = MEMBER_11(v, fsdpc_statedict_v1, save_call);
  if (save_call) {
    fsdpc_call call = call_of(c, opts);
    return save_call(&call, sd, dir, save_opts);
  }
  return v->save(opts, sd, dir, save_opts);
}

int32_t fsdpc__call_sd_load(const fsdpc_component *c, const fsdpc_opts *opts,
                            const fsdpc_sd_host *sd, const char *dir, int32_t with_optimizer) {
  const fsdpc_statedict_v1 *v = c->vtable;
  int32_t (*load_call)(const fsdpc_call *, const fsdpc_sd_host *, const char *, int32_t) =
      MEMBER_11(v, fsdpc_statedict_v1, load_call);
  if (load_call) {
    fsdpc_call call = call_of(c, opts);
    return load_call(&call, sd, dir, with_optimizer);
  }
  return v->load(opts, sd, dir, with_optimizer);
}
