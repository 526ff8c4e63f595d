/* Calls into a component with the 1.1 call context: the one place that
 * hands a plugin the host table with each call (fsdpc/plugin.h, "No
 * globals") and picks a component's *_call member when it has one, its 1.0
 * member otherwise. The rest of the core calls plugins through these (or,
 * for calls on an object a plugin created, through that object's vtable:
 * the object keeps the host it was created with).
 *
 * Each returns the plugin's status; on failure the caller reports it with
 * fsdpc__plugin_fail(c, st, err). */
#ifndef FSDPC_PLUGIN_CALL_H
#define FSDPC_PLUGIN_CALL_H

#include "plugin/registry.h"

/* supports(): collectives and optim judge s, attention judges shape (with
 * host filled in); OK when the component has no supports(). */
int32_t fsdpc__call_supports(const fsdpc_component *c, const fsdpc_situation *s);
int32_t fsdpc__call_attn_supports(const fsdpc_component *c, const fsdpc_attn_shape *shape);

/* An attention shape as the plugin should see it: shape with host set. */
fsdpc_attn_shape fsdpc__call_attn_shape(const fsdpc_component *c, const fsdpc_attn_shape *shape);

/* Creates an attention context (create_call, else create); *out stays NULL
 * when the component has neither (it needs no context). */
int32_t fsdpc__call_attn_create(const fsdpc_component *c, const fsdpc_opts *opts, int32_t device,
                                int32_t device_index, fsdpc_attn_ctx **out);

int32_t fsdpc__call_optim_create(const fsdpc_component *c, const fsdpc_optim_init *init,
                                 fsdpc_optimizer **out);
int32_t fsdpc__call_comm_init(const fsdpc_component *c, const fsdpc_comm_init *init,
                              fsdpc_comm **out);

int32_t fsdpc__call_wrap_plan(const fsdpc_component *c, const fsdpc_opts *opts,
                              const fsdpc_wrap_param *params, uint32_t n_params,
                              uint32_t *unit_of_param, uint32_t *n_units);

/* probe: FSDPC_UNSUPPORTED when the component cannot probe. */
int32_t fsdpc__call_sd_probe(const fsdpc_component *c, const char *dir);
int32_t fsdpc__call_sd_save(const fsdpc_component *c, const fsdpc_opts *opts,
                            const fsdpc_sd_host *sd, const char *dir,
                            const fsdpc_sd_save_opts *save_opts);
int32_t fsdpc__call_sd_load(const fsdpc_component *c, const fsdpc_opts *opts,
                            const fsdpc_sd_host *sd, const char *dir, int32_t with_optimizer);

#endif
