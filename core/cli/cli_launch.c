/* See cli_launch.h. */
#include "cli_launch.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fsdpc__cli_launch_init(fsdpc_launcher_args *la) {
  *la = (fsdpc_launcher_args){.struct_size = sizeof *la, .nproc_per_node = 1, .nnodes = 1};
}

int fsdpc__cli_launch_opt(const cli_cmd *cmd, int id, const char *v, fsdpc_launcher_args *la) {
  switch (id) {
  case CLI_L_NPROC:
    return cli_i32(cmd, "nproc-per-node", v, 1, 1024, &la->nproc_per_node);
  case CLI_L_NNODES:
    return cli_i32(cmd, "nnodes", v, 1, 100000, &la->nnodes);
  case CLI_L_NODE_RANK:
    return cli_i32(cmd, "node-rank", v, 0, 99999, &la->node_rank);
  case CLI_L_ADDR:
    la->master_addr = v;
    if (!*v || strlen(v) >= 256)
      return cli_usage_error(cmd, "--master-addr: '%s' is not a host", v), 0;
    return 1;
  case CLI_L_PORT:
    return cli_i32(cmd, "master-port", v, 0, 65535, &la->master_port);
  case CLI_L_STANDALONE:
    return 1;
  default:
    return -1;
  }
}

int fsdpc__cli_launching(const fsdpc_launcher_args *la) {
  return (la->nproc_per_node > 1 || la->nnodes > 1) && !getenv("FSDPC_LAUNCHER");
}

int fsdpc__cli_launch(const cli_cmd *cmd, const char *word, fsdpc_launcher_args *la, int argc,
                      char **argv) {
  if (la->node_rank >= la->nnodes)
    return cli_usage_error(cmd, "--node-rank %d must be below --nnodes %d", la->node_rank,
                           la->nnodes);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return cli_fail(cmd, "cannot find the fsdpc executable (/proc/self/exe)");
  exe[n] = '\0';
  /* Each rank runs the same command line: the launch options in it are
   * read and left alone there (FSDPC_LAUNCHER is set). */
  const char **child = calloc((size_t)argc + 2, sizeof *child);
  if (!child)
    return 1;
  child[0] = exe;
  child[1] = word;
  for (int i = 1; i < argc; i++)
    child[i + 1] = argv[i];
  la->argv = child;
  int32_t code = 1;
  fsdpc_err err = {0};
  if (fsdpc_launch(la, &code, &err) != FSDPC_OK)
    cli_fail(cmd, err.msg);
  free(child);
  return code;
}
