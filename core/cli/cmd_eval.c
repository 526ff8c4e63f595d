/* fsdpc eval: placeholder until eval lands in this branch. */
#include <stdio.h>

#include "commands.h"

int fsdpc__cmd_eval(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "fsdpc eval: not built yet\n");
  return 2;
}
