/* fsdpc config: check a config file (printing it resolved) and print the
 * schema, e.g. to regenerate docs/config.md. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "config/config.h"

static void usage(FILE *f) {
  fputs("usage: fsdpc config check CFG [section.key=value ...]\n"
        "       fsdpc config schema [--markdown]\n"
        "\n"
        "  check   load CFG, apply the overrides, validate, and print the resolved\n"
        "          config (every key with its effective value) as YAML on stdout.\n"
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
  fsdpc_config *cfg = NULL;
  fsdpc_err err = {0};
  if (fsdpc__config_load(argv[1], (const char *const *)argv + 2, argc - 2, &cfg, &err) !=
      FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
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
