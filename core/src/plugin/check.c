/* Validation of a v1 plugin descriptor before any of it is used.
 *
 * Minimum sizes are the sizes of the ABI 1.0 structs, written as "through
 * field X" so that they do not grow when a later minor version appends
 * fields: a plugin built against 1.0 stays loadable forever. */
#include <stdio.h>
#include <string.h>

#include "plugin/plugin_lib.h"
#include "plugin/registry.h"

#define SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

#define MAX_COMPONENTS 256
#define MAX_OPTIONS 256

/* A required function pointer: its slot must be covered by struct_size and
 * non-NULL, or else its 1.1 stand-in (the *_call member, alt) must be. */
typedef struct required_fn {
  size_t offset;
  const char *name;
  size_t alt_offset; /* 0: no stand-in */
  const char *alt_name;
} required_fn;

#define REQ(type, f)                                                                               \
  { offsetof(type, f), #f, 0, NULL }
#define REQ_OR(type, f, alt)                                                                       \
  { offsetof(type, f), #f, offsetof(type, alt), #alt }

static const required_fn collectives_req[] = {
    REQ(fsdpc_collectives_v1, init),           REQ(fsdpc_collectives_v1, split),
    REQ(fsdpc_collectives_v1, destroy),        REQ(fsdpc_collectives_v1, rank),
    REQ(fsdpc_collectives_v1, size),           REQ(fsdpc_collectives_v1, all_gather),
    REQ(fsdpc_collectives_v1, reduce_scatter), REQ(fsdpc_collectives_v1, all_reduce),
    REQ(fsdpc_collectives_v1, broadcast),      REQ(fsdpc_collectives_v1, barrier),
};
static const required_fn attention_req[] = {
    REQ(fsdpc_attention_v1, sizes),
    REQ(fsdpc_attention_v1, forward),
    REQ(fsdpc_attention_v1, backward),
};
static const required_fn optim_req[] = {
    REQ(fsdpc_optim_v1, create),    REQ(fsdpc_optim_v1, destroy),    REQ(fsdpc_optim_v1, n_slots),
    REQ(fsdpc_optim_v1, slot_name), REQ(fsdpc_optim_v1, init_state), REQ(fsdpc_optim_v1, step),
};
static const required_fn wrap_req[] = {REQ_OR(fsdpc_wrap_v1, plan, plan_call)};
static const required_fn objective_req[] = {
    REQ(fsdpc_objective_v1, create),    REQ(fsdpc_objective_v1, destroy),
    REQ(fsdpc_objective_v1, n_metrics), REQ(fsdpc_objective_v1, metric_name),
    REQ(fsdpc_objective_v1, compute),
};
static const required_fn statedict_req[] = {
    REQ_OR(fsdpc_statedict_v1, save, save_call),
    REQ_OR(fsdpc_statedict_v1, load, load_call),
};

typedef struct kind_contract {
  const char *vtable_type;
  size_t min_size; /* through the last required member */
  const required_fn *req;
  size_t n_req;
} kind_contract;

#define N_(a) (sizeof(a) / sizeof((a)[0]))

static const kind_contract contracts[FSDPC_KIND_COUNT_] = {
    [FSDPC_KIND_COLLECTIVES] = {"fsdpc_collectives_v1", SIZE_THROUGH(fsdpc_collectives_v1, barrier),
                                collectives_req, N_(collectives_req)},
    [FSDPC_KIND_ATTENTION] = {"fsdpc_attention_v1", SIZE_THROUGH(fsdpc_attention_v1, backward),
                              attention_req, N_(attention_req)},
    [FSDPC_KIND_OPTIM] = {"fsdpc_optim_v1", SIZE_THROUGH(fsdpc_optim_v1, step), optim_req,
                          N_(optim_req)},
    [FSDPC_KIND_WRAP] = {"fsdpc_wrap_v1", SIZE_THROUGH(fsdpc_wrap_v1, plan), wrap_req,
                         N_(wrap_req)},
    [FSDPC_KIND_STATEDICT] = {"fsdpc_statedict_v1", SIZE_THROUGH(fsdpc_statedict_v1, load),
                              statedict_req, N_(statedict_req)},
    [FSDPC_KIND_OBJECTIVE] = {"fsdpc_objective_v1", SIZE_THROUGH(fsdpc_objective_v1, compute),
                              objective_req, N_(objective_req)},
};

/* Component names become file names and config values: keep them plain. */
static int valid_name(const char *s) {
  if (!s || !*s || strlen(s) > 64)
    return 0;
  for (const char *p = s; *p; p++) {
    char ch = *p;
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '-' || ch == '_' || ch == '.';
    if (!ok)
      return 0;
  }
  return 1;
}

static fsdpc_status check_options(const fsdpc_component_desc *c, char *reason, size_t cap) {
  if (c->n_options == 0)
    return FSDPC_OK;
  if (!c->options || c->n_options > MAX_OPTIONS) {
    snprintf(reason, cap, "n_options is %u but options is %s", c->n_options,
             c->options ? "too long" : "NULL");
    return FSDPC_INVALID_USAGE;
  }
  for (uint32_t i = 0; i < c->n_options; i++) {
    const fsdpc_option_desc *o = c->options[i];
    if (!o || o->struct_size < SIZE_THROUGH(fsdpc_option_desc, help)) {
      snprintf(reason, cap, "option %u: %s", i,
               o ? "struct_size is smaller than fsdpc_option_desc v1.0" : "NULL descriptor");
      return FSDPC_INVALID_USAGE;
    }
    if (!valid_name(o->key)) {
      snprintf(reason, cap, "option %u: key is empty or has characters other than [A-Za-z0-9_.-]",
               i);
      return FSDPC_INVALID_USAGE;
    }
    if (o->type < FSDPC_OPT_BOOL || o->type > FSDPC_OPT_STRING) {
      snprintf(reason, cap, "option '%s': type %d is not an FSDPC_OPT_* value", o->key,
               (int)o->type);
      return FSDPC_INVALID_USAGE;
    }
  }
  return FSDPC_OK;
}

static fsdpc_status check_component(const fsdpc_component_desc *c, uint32_t idx, char *reason,
                                    size_t cap) {
  char what[160];
  if (!c) {
    snprintf(reason, cap, "component %u is NULL", idx);
    return FSDPC_INVALID_USAGE;
  }
  if (c->struct_size < SIZE_THROUGH(fsdpc_component_desc, vtable)) {
    snprintf(reason, cap,
             "component %u: struct_size %u is smaller than fsdpc_component_desc v1.0 (%zu bytes)",
             idx, c->struct_size, SIZE_THROUGH(fsdpc_component_desc, vtable));
    return FSDPC_INVALID_USAGE;
  }
  if (c->kind < 0 || c->kind >= FSDPC_KIND_COUNT_) {
    snprintf(reason, cap, "component %u: kind %d is not an FSDPC_KIND_* value", idx, (int)c->kind);
    return FSDPC_INVALID_USAGE;
  }
  if (!valid_name(c->name)) {
    snprintf(reason, cap,
             "component %u (%s): name is empty, longer than 64 or has characters other than "
             "[A-Za-z0-9_.-]",
             idx, fsdpc__kind_name(c->kind));
    return FSDPC_INVALID_USAGE;
  }
  snprintf(what, sizeof what, "%s '%s'", fsdpc__kind_name(c->kind), c->name);
  if (c->iface_version != 1) {
    snprintf(reason, cap, "%s: interface version %u, this fsdpc speaks %s v1", what,
             c->iface_version, contracts[c->kind].vtable_type);
    return FSDPC_INVALID_USAGE;
  }
  const kind_contract *k = &contracts[c->kind];
  if (!c->vtable) {
    snprintf(reason, cap, "%s: vtable is NULL", what);
    return FSDPC_INVALID_USAGE;
  }
  /* Every vtable starts with uint32_t struct_size. */
  uint32_t vsize = *(const uint32_t *)c->vtable;
  if (vsize < k->min_size) {
    snprintf(reason, cap, "%s: %s struct_size %u is smaller than the %zu bytes it needs", what,
             k->vtable_type, vsize, k->min_size);
    return FSDPC_INVALID_USAGE;
  }
  for (size_t i = 0; i < k->n_req; i++) {
    const required_fn *r = &k->req[i];
    void (*fn)(void) = NULL;
    memcpy(&fn, (const char *)c->vtable + r->offset, sizeof fn);
    if (!fn && r->alt_offset && vsize >= r->alt_offset + sizeof fn)
      memcpy(&fn, (const char *)c->vtable + r->alt_offset, sizeof fn);
    if (!fn) {
      if (r->alt_name)
        snprintf(reason, cap, "%s: required %s.%s (or %s) is NULL", what, k->vtable_type, r->name,
                 r->alt_name);
      else
        snprintf(reason, cap, "%s: required %s.%s is NULL", what, k->vtable_type, r->name);
      return FSDPC_INVALID_USAGE;
    }
  }
  char sub[512];
  if (check_options(c, sub, sizeof sub) != FSDPC_OK) {
    snprintf(reason, cap, "%s: %s", what, sub);
    return FSDPC_INVALID_USAGE;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__plugin_check_desc(const fsdpc_plugin_desc *d, char *reason, size_t cap) {
  if (!d) {
    snprintf(reason, cap, "the entry point returned OK but no descriptor");
    return FSDPC_INVALID_USAGE;
  }
  if (d->struct_size < SIZE_THROUGH(fsdpc_plugin_desc, n_components)) {
    snprintf(reason, cap,
             "descriptor struct_size %u is smaller than fsdpc_plugin_desc v1.0 (%zu bytes)",
             d->struct_size, SIZE_THROUGH(fsdpc_plugin_desc, n_components));
    return FSDPC_INVALID_USAGE;
  }
  if (!d->name || !*d->name) {
    snprintf(reason, cap, "descriptor has an empty plugin name");
    return FSDPC_INVALID_USAGE;
  }
  if (d->n_components == 0 || !d->components || d->n_components > MAX_COMPONENTS) {
    snprintf(reason, cap, "descriptor lists %u components%s", d->n_components,
             d->n_components && !d->components ? " but components is NULL" : "");
    return FSDPC_INVALID_USAGE;
  }
  for (uint32_t i = 0; i < d->n_components; i++) {
    FSDPC_TRY(check_component(d->components[i], i, reason, cap));
    for (uint32_t j = 0; j < i; j++) {
      const fsdpc_component_desc *a = d->components[j], *b = d->components[i];
      if (a->kind == b->kind && strcmp(a->name, b->name) == 0) {
        snprintf(reason, cap, "%s '%s' is described twice", fsdpc__kind_name(b->kind), b->name);
        return FSDPC_INVALID_USAGE;
      }
    }
  }
  return FSDPC_OK;
}
