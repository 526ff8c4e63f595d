/* See host_stub.h. */
#include "host_stub.h"

#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char last_error[1024];
static int32_t last_status;

static void stub_log(void *ctx, int32_t level, const char *msg) {
  fprintf(stderr, "[plugin log %d] %s\n", (int)level, msg);
}

static void stub_set_error(void *ctx, int32_t status, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg ? msg : "");
  last_status = status;
}

static void *stub_alloc(void *ctx, uint64_t bytes, uint64_t align) {
  void *p = NULL;
  return posix_memalign(&p, (size_t)align, (size_t)(bytes ? bytes : 1)) == 0 ? p : NULL;
}

static void stub_free(void *ctx, void *ptr) { free(ptr); }

static int32_t stub_opt_get(void *ctx, const fsdpc_opts *opts, const char *key, int32_t type,
                            void *out, uint64_t out_cap) {
  const stub_opts *o = (const stub_opts *)opts;
  for (int i = 0; o != NULL && i < o->n; i++) {
    if (strcmp(o->keys[i], key) != 0)
      continue;
    if (type == FSDPC_OPT_FLOAT && out_cap >= sizeof(double)) {
      *(double *)out = o->values[i];
    } else if (type == FSDPC_OPT_INT && out_cap >= sizeof(int64_t)) {
      *(int64_t *)out = (int64_t)o->values[i];
    } else if (type == FSDPC_OPT_BOOL && out_cap >= sizeof(int32_t)) {
      *(int32_t *)out = o->values[i] != 0.0;
    } else {
      stub_set_error(ctx, FSDPC_INVALID_USAGE, "stub host: unsupported option type");
      return FSDPC_INVALID_USAGE;
    }
    return FSDPC_OK;
  }
  char msg[256];
  snprintf(msg, sizeof msg, "stub host: no option '%s'", key);
  stub_set_error(ctx, FSDPC_INVALID_USAGE, msg);
  return FSDPC_INVALID_USAGE;
}

static int32_t stub_device_info(void *ctx, fsdpc_device_info *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->device = FSDPC_DEVICE_CPU;
  out->device_index = -1;
  out->num_threads = 2;
  return FSDPC_OK;
}

static const fsdpc_host_api host_api = {
    /* .struct_size = */ sizeof(fsdpc_host_api),
    /* .abi_major = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .host_version = */ "test",
    /* .host_ctx = */ NULL,
    /* .log = */ stub_log,
    /* .set_error = */ stub_set_error,
    /* .alloc = */ stub_alloc,
    /* .free = */ stub_free,
    /* .opt_get = */ stub_opt_get,
    /* .device_info = */ stub_device_info,
};

const fsdpc_host_api *stub_host(void) { return &host_api; }
const char *stub_last_error(void) { return last_error; }
int32_t stub_last_error_status(void) { return last_status; }
void stub_clear_error(void) {
  last_error[0] = '\0';
  last_status = FSDPC_OK;
}

const fsdpc_component_desc *stub_load_optim(const char *name, const fsdpc_optim_v1 **vtable) {
  char path[1024];
  snprintf(path, sizeof path, "%s/plugins/libfsdpc-optim-%s.so", FSDPC_BINARY_DIR, name);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(lib != NULL, "dlopen %s: %s", path, dlerror());
  fsdpc_plugin_entry_v1_fn entry = (fsdpc_plugin_entry_v1_fn)dlsym(lib, FSDPC_PLUGIN_ENTRY_V1);
  ck_assert_msg(entry != NULL, "%s has no %s", path, FSDPC_PLUGIN_ENTRY_V1);
  const fsdpc_plugin_desc *pd = NULL;
  ck_assert_int_eq(entry(&host_api, &pd), FSDPC_OK);
  ck_assert_ptr_nonnull(pd);
  ck_assert_uint_eq(pd->abi_major, FSDPC_PLUGIN_ABI_MAJOR);
  ck_assert_uint_eq(pd->n_components, 1);
  const fsdpc_component_desc *c = pd->components[0];
  ck_assert_int_eq(c->kind, FSDPC_KIND_OPTIM);
  ck_assert_str_eq(c->name, name);
  ck_assert_uint_eq(c->iface_version, 1);
  const fsdpc_optim_v1 *vt = c->vtable;
  ck_assert_ptr_nonnull(vt);
  ck_assert_uint_ge(vt->struct_size, sizeof(fsdpc_optim_v1));
  *vtable = vt;
  return c;
}

double stub_uniform(stub_rng *r, double lo, double hi) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  const uint64_t x = r->s * 0x2545F4914F6CDD1DULL;
  return lo + (hi - lo) * ((double)(x >> 11) * (1.0 / 9007199254740992.0));
}
