/* See cli_launch.h. */
#include "cli_launch.h"

#include <string.h>

int fsdpc__cli_launch_args(const char *cmd, void (*usage)(FILE *), int *argc, char **argv,
                           fsdpc_launch_opts *lo) {
  for (int i = 1; i < *argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
  fsdpc_err err = {0};
  fsdpc__launch_opts_default(lo);
  if (fsdpc__launch_parse_args(argc, argv, lo, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc %s: %s\n", cmd, err.msg);
    return 2;
  }
  return -1;
}
