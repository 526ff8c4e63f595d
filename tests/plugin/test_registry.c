/* Plugin registry: refusal reasons, pinned and auto selection, supports()
 * veto, search order, host services and plugin error messages. The test
 * plugins live in FSDPC_TEST_PLUGIN_DIR (built by tests/plugin). */
#include <check.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/opts.h"
#include "plugin/registry.h"

static const char *const test_dir[] = {FSDPC_TEST_PLUGIN_DIR};

static fsdpc_registry *open_only(const char *const *paths, int n) {
  fsdpc_registry *reg = NULL;
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_msg(fsdpc__registry_create_ex(
                    paths, n, FSDPC_REGISTRY_ONLY_GIVEN | FSDPC_REGISTRY_MISSING_REFUSED, &reg,
                    &err) == FSDPC_OK,
                "%s", err.msg);
  return reg;
}

/* The refusal reason of the file with this base name, or NULL. */
static const char *refusal(const fsdpc_registry *reg, const char *base) {
  for (int i = 0; i < fsdpc__registry_refused_count(reg); i++) {
    const fsdpc_refused_plugin *r = fsdpc__registry_refused_at(reg, i);
    const char *slash = strrchr(r->path, '/');
    if (strcmp(slash ? slash + 1 : r->path, base) == 0)
      return r->reason;
  }
  return NULL;
}

static void assert_has(const char *hay, const char *needle) {
  ck_assert_msg(hay && strstr(hay, needle), "expected \"%s\" in \"%s\"", needle,
                hay ? hay : "(null)");
}

/* A component handed out stays valid when later loads grow the registry
 * (files are loaded lazily, per kind): select a wrap plugin, then load every
 * in-tree and test plugin, and the first pointer is still the registry's. */
START_TEST(component_pointers_survive_later_loads) {
  const char *dirs[] = {FSDPC_PLUGIN_DIR_FOR_TEST, FSDPC_TEST_PLUGIN_DIR};
  fsdpc_registry *reg = open_only(dirs, 2);
  fsdpc_err err;
  fsdpc__err_clear(&err);
  const fsdpc_component *c = NULL;
  ck_assert_msg(fsdpc__registry_select(reg, FSDPC_KIND_WRAP, "transformer", NULL, &c, &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  ck_assert_int_eq(fsdpc__registry_load_all(reg, &err), FSDPC_OK);
  ck_assert_int_gt(fsdpc__registry_count(reg), 8); /* the list grew past its first size */
  ck_assert_ptr_eq(c, fsdpc__registry_find(reg, FSDPC_KIND_WRAP, "transformer"));
  ck_assert_str_eq(c->desc->name, "transformer");
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(refused_with_one_line_reasons) {
  fsdpc_registry *reg = open_only(test_dir, 1);
  ck_assert_int_eq(fsdpc__registry_refused_count(reg), 7);
  ck_assert_str_eq(refusal(reg, "libfsdpc-optim-test-abi2.so"),
                   "libfsdpc-optim-test-abi2.so: ABI 2.0, this fsdpc speaks 1.x");
  ck_assert_str_eq(refusal(reg, "libfsdpc-optim-test-entry2.so"),
                   "libfsdpc-optim-test-entry2.so: ABI 2.x, this fsdpc speaks 1.x");
  assert_has(refusal(reg, "libfsdpc-optim-test-noentry.so"),
             "libfsdpc-optim-test-noentry.so: no fsdpc_plugin_entry_v1 symbol");
  assert_has(refusal(reg, "libfsdpc-optim-test-small-desc.so"),
             "libfsdpc-optim-test-small-desc.so: descriptor struct_size 12 is smaller than "
             "fsdpc_plugin_desc v1.0");
  assert_has(refusal(reg, "libfsdpc-optim-test-small-vtable.so"),
             "optim 'test-small-vtable': fsdpc_optim_v1 struct_size 8 is smaller than");
  assert_has(refusal(reg, "libfsdpc-optim-test-null-step.so"),
             "optim 'test-null-step': required fsdpc_optim_v1.step is NULL");
  ck_assert_str_eq(refusal(reg, "libfsdpc-optim-test-entry-fails.so"),
                   "libfsdpc-optim-test-entry-fails.so: entry point failed: cannot find "
                   "libfoo.so.3 (install foo)");
  for (int i = 0; i < fsdpc__registry_refused_count(reg); i++)
    ck_assert_ptr_null(strchr(fsdpc__registry_refused_at(reg, i)->reason, '\n'));
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(valid_plugins_still_load) {
  fsdpc_registry *reg = open_only(test_dir, 1);
  ck_assert_int_eq(fsdpc__registry_count(reg), 2);
  const fsdpc_component *good = fsdpc__registry_find(reg, FSDPC_KIND_OPTIM, "test-good");
  const fsdpc_component *picky = fsdpc__registry_find(reg, FSDPC_KIND_OPTIM, "test-picky");
  ck_assert_ptr_nonnull(good);
  ck_assert_ptr_nonnull(picky);
  ck_assert_int_eq(good->abi_major, 1);
  ck_assert_int_eq(good->desc->default_score, 10);
  ck_assert_ptr_eq(good->lib, picky->lib); /* one file, two components */
  assert_has(good->path, "libfsdpc-optim-test-good.so");
  ck_assert_ptr_null(fsdpc__registry_find(reg, FSDPC_KIND_WRAP, "test-good"));
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(pinned_selection_reports_refusal) {
  fsdpc_registry *reg = open_only(test_dir, 1);
  const fsdpc_component *c = (void *)1;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "test-abi2", NULL, &c, &err),
                   FSDPC_UNSUPPORTED);
  ck_assert_ptr_null(c);
  ck_assert_str_eq(err.msg, "optim 'test-abi2' cannot be used: libfsdpc-optim-test-abi2.so: "
                            "ABI 2.0, this fsdpc speaks 1.x");
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "test-noentry", NULL, &c, &err),
                   FSDPC_UNSUPPORTED);
  assert_has(err.msg, "no fsdpc_plugin_entry_v1 symbol");
  /* Missing entirely: says what was searched and what is available. */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "lion", NULL, &c, &err),
                   FSDPC_INVALID_USAGE);
  assert_has(err.msg,
             "optim 'lion' not found (no libfsdpc-optim-lion.so in " FSDPC_TEST_PLUGIN_DIR);
  assert_has(err.msg, "available optim plugins: test-good, test-picky");
  /* A pinned name never falls back, even when another one would do. */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "test-good", NULL, &c, &err),
                   FSDPC_OK);
  ck_assert_str_eq(c->desc->name, "test-good");
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(auto_picks_highest_supported_score) {
  fsdpc_registry *reg = open_only(test_dir, 1);
  const fsdpc_component *c;
  fsdpc_err err;
  fsdpc_situation cpu = {.struct_size = sizeof cpu, .device = FSDPC_DEVICE_CPU, .world_size = 2};
  fsdpc_situation cuda = cpu;
  cuda.device = FSDPC_DEVICE_CUDA;
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "auto", &cpu, &c, &err), 0);
  ck_assert_str_eq(c->desc->name, "test-picky"); /* score 90 beats 10 */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, NULL, NULL, &c, &err), 0);
  ck_assert_str_eq(c->desc->name, "test-picky");
  /* supports() vetoes test-picky on CUDA: auto falls to test-good. */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "auto", &cuda, &c, &err), 0);
  ck_assert_str_eq(c->desc->name, "test-good");
  /* Pinned and vetoed: an error with the plugin's own reason. */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "test-picky", &cuda, &c, &err),
                   FSDPC_UNSUPPORTED);
  assert_has(err.msg, "optim 'test-picky' does not support this run (device cuda");
  assert_has(err.msg, "test-picky runs on the CPU only");
  /* No component of a kind at all. */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_WRAP, "auto", &cpu, &c, &err),
                   FSDPC_INVALID_USAGE);
  assert_has(err.msg, "no wrap plugin found in " FSDPC_TEST_PLUGIN_DIR);
  ck_assert_int_eq(fsdpc__registry_select(reg, 42, "auto", &cpu, &c, &err), FSDPC_INVALID_USAGE);
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(plugin_errors_reach_the_caller) {
  fsdpc_registry *reg = open_only(test_dir, 1);
  const fsdpc_component *c = fsdpc__registry_find(reg, FSDPC_KIND_OPTIM, "test-good");
  const fsdpc_optim_v1 *vt = c->vtable;
  fsdpc_optim_init init = {.struct_size = sizeof init, .weight_decay = -1};
  fsdpc_optimizer *opt = NULL;
  fsdpc_err err;
  int32_t st = vt->create(&init, &opt);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  ck_assert_int_eq(fsdpc__plugin_fail(c, st, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg,
                   "optim 'test-good': weight_decay must be >= 0 (set optim.weight_decay)");
  /* The message was consumed: a second failure without one is generic. */
  fsdpc__plugin_fail(c, FSDPC_INTERNAL_ERROR, &err);
  assert_has(err.msg, "optim 'test-good' failed: internal error");

  /* A working create/step through the host's alloc, device_info and log. */
  init.weight_decay = 0;
  ck_assert_int_eq(vt->create(&init, &opt), FSDPC_OK);
  float param[3] = {1, 2, 3}, grad[3] = {1, 1, -2};
  fsdpc_optim_tensor t = {.struct_size = sizeof t, .param = param, .grad = grad, .numel = 3};
  fsdpc_optim_step_info info = {.struct_size = sizeof info, .step = 1, .lr = 0.5, .grad_scale = 1};
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  ck_assert_float_eq(param[0], 0.5f);
  ck_assert_float_eq(param[2], 4.0f);
  vt->destroy(opt);
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(host_services) {
  fsdpc_registry *reg = open_only(test_dir, 1);
  const fsdpc_component *c = fsdpc__registry_find(reg, FSDPC_KIND_OPTIM, "test-good");
  const fsdpc_host_api *h = c->host;
  ck_assert_int_eq(h->abi_major, FSDPC_PLUGIN_ABI_MAJOR);
  ck_assert_int_ge(h->struct_size, sizeof(fsdpc_host_api));
  void *p = h->alloc(h->host_ctx, 1000, 256);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq((uintptr_t)p % 256, 0);
  memset(p, 1, 1000);
  h->free(h->host_ctx, p);
  ck_assert_ptr_null(h->alloc(h->host_ctx, 10, 48)); /* not a power of two */
  h->log(h->host_ctx, FSDPC_LOG_DEBUG, "hello from the test");

  fsdpc_device_info di = {.struct_size = sizeof di};
  ck_assert_int_eq(h->device_info(h->host_ctx, &di), FSDPC_OK);
  ck_assert_int_eq(di.device, FSDPC_DEVICE_CPU);
  ck_assert_int_eq(di.device_index, -1);
  ck_assert_int_eq(di.num_threads, omp_get_max_threads());
  ck_assert_uint_gt(di.total_memory, 0);

  /* Options: declared by the component, validated by the host, read back
   * by the plugin through opt_get. */
  fsdpc_opts *opts;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__opts_create("optim.options", &opts, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_add(opts, "flag", "3", "cfg.yaml", 4, 5, &err), FSDPC_OK);
  ck_assert_int_eq(
      fsdpc__opts_validate(opts, c->desc->options, c->desc->n_options, "optim 'test-good'", &err),
      FSDPC_OK);
  int64_t v = 0;
  ck_assert_int_eq(h->opt_get(h->host_ctx, opts, "flag", FSDPC_OPT_INT, &v, sizeof v), FSDPC_OK);
  ck_assert_int_eq(v, 3);
  int32_t st = h->opt_get(h->host_ctx, opts, "nope", FSDPC_OPT_INT, &v, sizeof v);
  ck_assert_int_ne(st, FSDPC_OK);
  /* The lookup failure is recorded for the plugin that made it. */
  fsdpc__plugin_fail(c, st, &err);
  assert_has(err.msg, "optim 'test-good': ");
  assert_has(err.msg, "nope");
  fsdpc__opts_destroy(opts);

  /* set_error keeps one line even if a plugin sends several. */
  h->set_error(h->host_ctx, FSDPC_SYSTEM_ERROR, "line one\nline two");
  fsdpc__plugin_fail(c, FSDPC_SYSTEM_ERROR, &err);
  ck_assert_str_eq(err.msg, "optim 'test-good': line one line two");
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(search_paths_files_and_order) {
  char tmp[] = "/tmp/fsdpc-plugin-test-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(tmp));
  /* A file with a plugin's name that is not a shared object. */
  char junk[512], copy[512], cmd[1200];
  snprintf(junk, sizeof junk, "%s/libfsdpc-optim-junk.so", tmp);
  FILE *f = fopen(junk, "w");
  ck_assert_ptr_nonnull(f);
  fputs("not an ELF file\n", f);
  fclose(f);
  /* A second copy of test-good, searched first, must win. */
  char sub[400];
  snprintf(sub, sizeof sub, "%s/first", tmp);
  snprintf(copy, sizeof copy, "%s/libfsdpc-optim-test-good.so", sub);
  snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/libfsdpc-optim-test-good.so %s", sub,
           FSDPC_TEST_PLUGIN_DIR, copy);
  ck_assert_int_eq(system(cmd), 0);

  const char *paths[] = {sub, tmp, FSDPC_TEST_PLUGIN_DIR, FSDPC_TEST_PLUGIN_DIR,
                         "/nonexistent/fsdpc-plugins"};
  fsdpc_registry *reg = open_only(paths, 5);
  const fsdpc_component *good = fsdpc__registry_find(reg, FSDPC_KIND_OPTIM, "test-good");
  ck_assert_str_eq(good->path, copy);
  ck_assert_int_eq(fsdpc__registry_count(reg), 2); /* same folder twice: loaded once */
  ck_assert_int_eq(fsdpc__registry_refused_count(reg), 7 + 2);
  assert_has(refusal(reg, "libfsdpc-optim-junk.so"), "libfsdpc-optim-junk.so: cannot load: ");
  assert_has(
      refusal(reg, "fsdpc-plugins"),
      "/nonexistent/fsdpc-plugins: no such file or folder (named in plugins.paths or --path)");
  ck_assert_int_eq(fsdpc__registry_search_count(reg), 4);
  ck_assert_str_eq(fsdpc__registry_search_at(reg, 0), sub);
  fsdpc__registry_destroy(reg);

  /* Without MISSING_REFUSED (train, plan, generate, plugins list) a missing
   * named path fails the registry with one line. */
  fsdpc_err err;
  reg = NULL;
  ck_assert_int_eq(fsdpc__registry_create(paths + 4, 1, &reg, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(reg);
  assert_has(err.msg, "plugins.paths (or --path): '/nonexistent/fsdpc-plugins': no such file or "
                      "folder; fix the path or remove it");

  /* A path to a file is used as given. */
  const char *file_only[] = {FSDPC_TEST_PLUGIN_DIR "/libfsdpc-optim-test-abi2.so"};
  reg = open_only(file_only, 1);
  ck_assert_int_eq(fsdpc__registry_count(reg), 0);
  ck_assert_int_eq(fsdpc__registry_refused_count(reg), 1);
  fsdpc__registry_destroy(reg);

  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(env_path_is_searched) {
  char env[1024];
  snprintf(env, sizeof env, "/nonexistent/a::%s", FSDPC_TEST_PLUGIN_DIR);
  setenv("FSDPC_PLUGIN_PATH", env, 1);
  fsdpc_registry *reg;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__registry_create(NULL, 0, &reg, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(fsdpc__registry_find(reg, FSDPC_KIND_OPTIM, "test-good"));
  /* A missing folder on the environment path is not an error. */
  ck_assert_ptr_null(refusal(reg, "a"));
  fsdpc__registry_destroy(reg);
  unsetenv("FSDPC_PLUGIN_PATH");
}
END_TEST

/* Forks seen by this process (a probe child is one). */
static int n_forks;
static void count_fork(void) {
  n_forks++;
}

/* A process that makes many registries (fsdpc plan over every strategy and
 * world size; test_plan made 752 probe children under ASan) probes a file
 * once: it stays mapped after its first registry, so later ones have
 * nothing to probe. */
START_TEST(probed_once_per_process) {
  const char *dirs[] = {FSDPC_PLUGIN_DIR_FOR_TEST};
  static int registered;
  if (!registered++)
    ck_assert_int_eq(pthread_atfork(NULL, count_fork, NULL), 0);
  int before = n_forks;
  for (int i = 0; i < 5; i++) {
    fsdpc_registry *reg = open_only(dirs, 1);
    const fsdpc_component *c = NULL;
    fsdpc_err err;
    ck_assert_msg(fsdpc__registry_select(reg, FSDPC_KIND_OPTIM, "sgd", NULL, &c, &err) == FSDPC_OK,
                  "%s", err.msg);
    fsdpc__registry_destroy(reg);
  }
  ck_assert_int_le(n_forks - before, 1);
}
END_TEST

START_TEST(kind_names) {
  for (int32_t k = 0; k < FSDPC_KIND_COUNT_; k++)
    ck_assert_int_eq(fsdpc__kind_from_name(fsdpc__kind_name(k)), k);
  ck_assert_str_eq(fsdpc__kind_name(FSDPC_KIND_WRAP), "wrap");
  ck_assert_int_eq(fsdpc__kind_from_name("optimizer"), -1);
  ck_assert_int_eq(fsdpc__kind_from_name(NULL), -1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("plugin_registry");
  TCase *tc = tcase_create("registry");
  tcase_add_test(tc, refused_with_one_line_reasons);
  tcase_add_test(tc, valid_plugins_still_load);
  tcase_add_test(tc, pinned_selection_reports_refusal);
  tcase_add_test(tc, auto_picks_highest_supported_score);
  tcase_add_test(tc, plugin_errors_reach_the_caller);
  tcase_add_test(tc, host_services);
  tcase_add_test(tc, search_paths_files_and_order);
  tcase_add_test(tc, env_path_is_searched);
  tcase_add_test(tc, kind_names);
  tcase_add_test(tc, probed_once_per_process);
  tcase_add_test(tc, component_pointers_survive_later_loads);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
