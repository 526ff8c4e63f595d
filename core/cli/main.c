/* fsdpc: the command-line entry point. Subcommands live in cli/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "fsdpc/fsdpc.h"

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    printf("fsdpc %s\n", fsdpc_version());
    return 0;
  }
  fprintf(stderr, "usage: fsdpc <command> [args]\n");
  return 2;
}
