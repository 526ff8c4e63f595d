/* Where this process sits in a job, read from the launcher's environment.
 *
 * Sources, in order of precedence:
 *   "fsdpc"    our own launcher (RANK, ... plus FSDPC_LAUNCHER=1)
 *   "torchrun" RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
 *              MASTER_PORT (GROUP_RANK = node rank when present)
 *   "kubeflow" RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT without LOCAL_RANK
 *              in a Kubernetes pod (KUBERNETES_SERVICE_HOST): Kubeflow's
 *              PyTorchJob, one process per pod (local rank 0 of 1, node =
 *              rank); a JobSet that sets RANK and WORLD_SIZE the same way
 *   "slurm"    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 *              SLURM_NTASKS_PER_NODE, SLURM_NODEID, SLURM_NNODES; the store
 *              host is MASTER_ADDR or else the first host of
 *              SLURM_JOB_NODELIST (simple forms: "a,b", "node[3-5,9]")
 *   "mpi"      OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   "single"   none of the above: rank 0 of 1 on 127.0.0.1
 * MASTER_ADDR / MASTER_PORT override the store address for every source;
 * the default port is 29500. FSDPC_STORE_PORT, when set, is the store port
 * for every source. Under torchrun with TORCHELASTIC_USE_AGENT_STORE=True
 * (its agent already serves MASTER_PORT) the store uses MASTER_PORT + 1.
 * The job token comes from fsdpc__job_token_resolve (job_token.h). */
#ifndef FSDPC_DIST_ENV_H
#define FSDPC_DIST_ENV_H

#include "dist/job_token.h"
#include "util/err.h"

#define FSDPC_DEFAULT_MASTER_PORT 29500

typedef struct fsdpc_dist_env {
  int rank, world_size;
  int local_rank, local_world_size;
  int node_rank, nnodes;
  char master_addr[256];
  int master_port;
  const char *source; /* static string: "fsdpc", "torchrun", "kubeflow", "slurm", "mpi", "single" */
  char job_token[FSDPC_JOB_TOKEN_CAP]; /* dist/job_token.h */
} fsdpc_dist_env;

/* Reads the process environment. Inconsistent or malformed values (rank
 * outside the world, a non-number, a local rank outside the node) give one
 * line naming the variables. */
fsdpc_status fsdpc__dist_env_detect(fsdpc_dist_env *out, fsdpc_err *err);

/* First host name of a SLURM node list: "a,b" -> "a", "gpu[03-05,9]" ->
 * "gpu03", "x[1-2]-ib" -> "x1-ib". */
fsdpc_status fsdpc__slurm_first_host(const char *nodelist, char *out, size_t cap, fsdpc_err *err);

#endif
