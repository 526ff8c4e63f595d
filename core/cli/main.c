/* fsdpc: the command-line entry point. Subcommands live in cli/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "fsdpc/fsdpc.h"

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help; /* one line for `fsdpc --help` */
} command;

/* One row per subcommand. */
static const command commands[] = {
    {"config", fsdpc__cmd_config, "check a config and print it resolved; print the schema"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc <command> [args]   (fsdpc <command> --help for details)\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\n  --version  print the version\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("fsdpc %s\n", fsdpc_version());
    return 0;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "fsdpc: unknown command '%s' (run 'fsdpc --help' for the list)\n", argv[1]);
  return 2;
}
