/* fsdpc config: check a config file (printing it resolved) and print the
 * schema, e.g. to regenerate docs/config.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char top_help[] =
    "usage: fsdpc config check CFG [section.key=value ...] [--nproc-per-node N]\n"
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
    "          prints the config reference page (docs/config.md).\n";

enum { O_NPROC = 256, O_MARKDOWN };

static const cli_opt check_opts[] = {{"nproc-per-node", O_NPROC, "N"}, {0}};
const cli_cmd fsdpc__config_check_cmd = {"config check", top_help, check_opts};
static const cli_opt schema_opts[] = {{"markdown", O_MARKDOWN, NULL}, {0}};
const cli_cmd fsdpc__config_schema_cmd = {"config schema", top_help, schema_opts};

typedef struct check_args {
  const char *path;
  const char **ovr;
  int n;
  int32_t world;
} check_args;

static int check_arg(void *ctx, int id, const char *v) {
  check_args *a = ctx;
  if (id == O_NPROC)
    return cli_i32(&fsdpc__config_check_cmd, "nproc-per-node", v, 1, 1 << 20, &a->world);
  if (!a->path)
    a->path = v;
  else
    a->ovr[a->n++] = v;
  return 1;
}

static int check(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__config_check_cmd;
  check_args a = {.world = 1};
  if (!(a.ovr = calloc((size_t)argc + 1, sizeof *a.ovr)))
    return 1;
  int rc = cli_parse(cmd, argc, argv, check_arg, &a);
  const char *path = a.path;
  if (rc < 0 && !path)
    rc = cli_usage_error(cmd, "missing the config file (usage: fsdpc config check CFG [k=v ...])");
  fsdpc_config *cfg = NULL;
  fsdpc_run_plan *rp = NULL;
  fsdpc_err err = {0};
  char *yaml = NULL;
  if (rc < 0 && (fsdpc_config_load(path, a.ovr, a.n, &cfg, &err) != FSDPC_OK ||
                 fsdpc_plan_create(cfg, a.world, a.world, &rp, &err) != FSDPC_OK ||
                 fsdpc_plan_check_files(rp, &err) != FSDPC_OK ||
                 fsdpc_config_dump(cfg, &yaml, &err) != FSDPC_OK)) {
    fprintf(stderr, "%s\n", err.msg); /* the message names the file, line and key */
    rc = 1;
  }
  if (rc < 0) {
    fputs(yaml, stdout);
    rc = fflush(stdout) == 0 ? 0 : cli_fail(cmd, "cannot write the resolved config to stdout");
  }
  fsdpc_free(yaml);
  fsdpc_plan_destroy(rp);
  fsdpc_config_destroy(cfg);
  free(a.ovr);
  return rc;
}

static int schema_arg(void *ctx, int id, const char *v) {
  if (id == O_MARKDOWN)
    return *(int *)ctx = 1;
  return cli_usage_error(&fsdpc__config_schema_cmd, "unexpected argument '%s'", v) == 0;
}

static int schema(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__config_schema_cmd;
  int md = 0, rc = cli_parse(cmd, argc, argv, schema_arg, &md);
  if (rc >= 0)
    return rc;
  char *text = NULL;
  fsdpc_err err = {0};
  if (fsdpc_config_schema(md ? FSDPC_SCHEMA_MARKDOWN : FSDPC_SCHEMA_TEXT, &text, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  fputs(text, stdout);
  fsdpc_free(text);
  return 0;
}

const cli_sub fsdpc__config_subs[] = {
    {"check", "check a config and print it resolved", check, &fsdpc__config_check_cmd},
    {"schema", "every key with its type, default and meaning", schema, &fsdpc__config_schema_cmd},
};
const int fsdpc__config_n_subs = 2;

int fsdpc__cmd_config(int argc, char **argv) {
  return cli_dispatch("config", top_help, fsdpc__config_subs, fsdpc__config_n_subs, argc, argv);
}
