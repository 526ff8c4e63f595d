/* What the commands able to launch ranks (train, eval) share: the launch
 * options (torchrun's, with its underscore spellings too) and the local
 * launcher (fsdpc_launch). */
#ifndef FSDPC_CLI_LAUNCH_H
#define FSDPC_CLI_LAUNCH_H

#include "cli.h"

enum {
  CLI_L_NPROC = 200,
  CLI_L_NNODES,
  CLI_L_NODE_RANK,
  CLI_L_ADDR,
  CLI_L_PORT,
  CLI_L_STANDALONE,
};
/* The entries of a command's option table. */
#define FSDPC_CLI_LAUNCH_OPTS                                                                      \
  {"nproc-per-node", CLI_L_NPROC, "N"}, {"nnodes", CLI_L_NNODES, "N"},                             \
      {"node-rank", CLI_L_NODE_RANK, "R"}, {"master-addr", CLI_L_ADDR, "ADDR"},                    \
      {"master-port", CLI_L_PORT, "PORT"}, {                                                       \
    "standalone", CLI_L_STANDALONE, NULL                                                           \
  }

/* The help lines of those options. */
#define FSDPC_CLI_LAUNCH_HELP                                                                      \
  "launch options (torchrun's; --nproc_per_node and the other underscore spellings too):\n"        \
  "  --nproc-per-node N   start N ranks on this machine and supervise them\n"                      \
  "  --nnodes N           number of machines (each runs this command)\n"                           \
  "  --node-rank R        this machine's index, 0..N-1\n"                                          \
  "  --master-addr A      address of node 0 (hosts the rendezvous store)\n"                        \
  "  --master-port P      its port (default 29500; one machine: a free port)\n"                    \
  "  --standalone         one machine (the default; accepted for torchrun's command lines)\n"      \
  "Under torchrun, srun or mpirun, run one process per rank without these.\n"

/* Defaults: one rank, one node. */
void fsdpc__cli_launch_init(fsdpc_launcher_args *la);
/* Takes option id's value into la: 1 when id is a launch option (0 and a
 * usage error printed for a bad value), -1 when it is not one. */
int fsdpc__cli_launch_opt(const cli_cmd *cmd, int id, const char *v, fsdpc_launcher_args *la);
/* 1 when this process is to start the ranks: more than one rank asked for,
 * and not itself a rank started by a launcher (FSDPC_LAUNCHER). */
int fsdpc__cli_launching(const fsdpc_launcher_args *la);
/* Re-runs `fsdpc WORD argv[1..]` once per local rank and supervises them;
 * the exit code (the first failed rank's, after one line on stderr). */
int fsdpc__cli_launch(const cli_cmd *cmd, const char *word, fsdpc_launcher_args *la, int argc,
                      char **argv);

#endif
