/* The local launcher and supervisor (`fsdpc train CFG --nproc-per-node N`).
 *
 * It runs argv once per local rank with RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (plus FSDPC_LAUNCHER=1,
 * FSDPC_NODE_RANK, FSDPC_NNODES) set, torchrun-style, so each child finds
 * its place through fsdpc__dist_env_detect. Global rank = node_rank *
 * nproc_per_node + local rank. The child of global rank 0 hosts the store.
 *
 * Supervision: if a rank exits non-zero or is killed by a signal, the
 * launcher writes the key "fsdpc/dead" to the store (so that ranks on other
 * nodes can stop promptly, see fsdpc__dist_check_abort), sends SIGTERM to
 * the other ranks' process groups, SIGKILL after grace_ms, and fails with
 * one line such as "rank 2 (pid 4242) died: killed by signal 9 (SIGKILL)".
 * Each rank runs in its own process group (so the whole group, grandchildren
 * included, is signalled) with PR_SET_PDEATHSIG = SIGKILL (so it dies if the
 * launcher dies). SIGINT, SIGTERM, SIGHUP and SIGUSR1 sent to the launcher
 * are forwarded to every rank; SIGINT/SIGTERM/SIGHUP also start the grace
 * period. The calling process must be single-threaded while this runs: it
 * blocks those signals and waits for them with sigtimedwait. */
#ifndef FSDPC_DIST_LAUNCH_H
#define FSDPC_DIST_LAUNCH_H

#include "util/err.h"

typedef struct fsdpc_launch_opts {
  int nproc_per_node; /* ranks on this node, >= 1 */
  int nnodes;         /* >= 1 */
  int node_rank;      /* 0..nnodes-1 */
  char master_addr[256];
  int master_port;   /* 0 = pick a free port (single node only) */
  int port_given;    /* --master-port was given; else one node picks a free port */
  char *const *argv; /* NULL-terminated command each rank runs; borrowed */
  int grace_ms;      /* SIGTERM -> SIGKILL delay (dist.term_grace_s), default 25000; a rank
                        that says it is saving (save_notify.h) gets up to ten times more */
} fsdpc_launch_opts;

/* 1 process, 1 node, node rank 0, 127.0.0.1, port 29500 (a free port on
 * one node unless --master-port is given), grace 25 s. */
void fsdpc__launch_opts_default(fsdpc_launch_opts *o);

/* Consumes --nproc-per-node, --nnodes, --node-rank, --master-addr and
 * --master-port (as "--flag V" or "--flag=V") from argv[1..], keeping the
 * other arguments in order; *argc shrinks and argv[*argc] becomes NULL.
 * Values are checked (ranges, node_rank < nnodes). o->argv is untouched. */
fsdpc_status fsdpc__launch_parse_args(int *argc, char **argv, fsdpc_launch_opts *o, fsdpc_err *err);

/* Runs and supervises the local ranks until all have exited. OK with
 * *exit_code 0 when every rank exited 0. Otherwise an error naming the
 * first rank that failed (or the signal that stopped the job), with
 * *exit_code the rank's exit code or 128 + signal number. */
fsdpc_status fsdpc__launch(const fsdpc_launch_opts *o, int *exit_code, fsdpc_err *err);

#endif
