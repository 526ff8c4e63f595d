/* fsdpc config: check a config file (printing it resolved) and print the
 * schema, e.g. to regenerate docs/config.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config/config.h"
#include "runplan/runplan.h"

static void usage(FILE *f) {
  fputs("usage: fsdpc config check CFG [section.key=value ...] [--nproc-per-node N]\n"
        "       fsdpc config schema [--markdown]\n"
        "\n"
        "  check   load CFG, apply the overrides, validate, and print the resolved\n"
        "          config (every key with its effective value) as YAML on stdout.\n"
        "          Also resolves the run as `fsdpc train` would (plugins and their\n"
        "          options, batch geometry at N ranks, default 1; the files the config\n"
        "          names, read only as far as their headers) before any weight is read.\n"
        "          Exit 0 when valid; 1 with a one-line error (file:line:col and the\n"
        "          key path) on stderr when not.\n"
        "  schema  list every key with its type, default and meaning; --markdown\n"
        "          prints the config reference page (docs/config.md).\n",
        f);
}

static bool is_help(const char *s) { return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0; }

static int check(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      usage(stdout);
      return 0;
    }
  }
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "fsdpc config check: %s\n",
            argc < 2 ? "missing the config file (usage: fsdpc config check CFG [k=v ...])"
                     : "unknown flag; usage: fsdpc config check CFG [k=v ...]");
    return 2;
  }
  /* --nproc-per-node N: the world the run will have (one node). */
  int world = 1, n = 0;
  const char **ovr = calloc((size_t)argc, sizeof *ovr);
  if (!ovr)
    return 1;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--nproc-per-node") == 0) {
      char *end = NULL;
      long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
      if (v < 1 || v > 1 << 20 || !end || *end) {
        fprintf(stderr, "fsdpc config check: --nproc-per-node needs a positive integer\n");
        free(ovr);
        return 2;
      }
      world = (int)v;
      i++;
    } else {
      ovr[n++] = argv[i];
    }
  }
  fsdpc_config *cfg = NULL;
  fsdpc_run_plan *rp = NULL;
  fsdpc_err err = {0};
  fsdpc_run_world rw = {.world_size = world, .nproc_per_node = world};
  if (fsdpc__config_load(argv[1], ovr, n, &cfg, &err) != FSDPC_OK ||
      fsdpc__run_plan_create(cfg, &rw, FSDPC_RUN_PLAN_OFFLINE, &rp, &err) != FSDPC_OK ||
      fsdpc__run_plan_check_files(rp, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    fsdpc__run_plan_destroy(rp);
    fsdpc__config_destroy(cfg);
    free(ovr);
    return 1;
  }
  fsdpc__run_plan_destroy(rp);
  free(ovr);
  fsdpc_status st = fsdpc__config_dump(cfg, stdout);
  fsdpc__config_destroy(cfg);
  if (st != FSDPC_OK) {
    fprintf(stderr, "fsdpc config check: cannot write the resolved config to stdout\n");
    return 1;
  }
  return 0;
}

static int schema(int argc, char **argv) {
  bool markdown = false;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      usage(stdout);
      return 0;
    }
    if (strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else {
      fprintf(stderr, "fsdpc config schema: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (markdown)
    fsdpc__config_schema_markdown(stdout);
  else
    fsdpc__config_schema_text(stdout);
  return 0;
}

int fsdpc__cmd_config(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (is_help(argv[1])) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "check") == 0)
    return check(argc - 1, argv + 1);
  if (strcmp(argv[1], "schema") == 0)
    return schema(argc - 1, argv + 1);
  fprintf(stderr, "fsdpc config: unknown subcommand '%s' (check, schema)\n", argv[1]);
  return 2;
}
