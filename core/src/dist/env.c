/* Launcher environment detection: see env.h for the variables read. */
#include "dist/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads an integer variable. Returns 0 if unset, 1 if set (value in *v),
 * and -1 (with err set) if set but not an integer. */
static int env_int(const char *name, int *v, fsdpc_err *err) {
  const char *s = getenv(name);
  if (!s || !*s)
    return 0;
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  /* SLURM_NTASKS_PER_NODE may read "4(x2)"; the leading number is the
   * count on this kind of node, which is what we want. */
  if (errno || end == s || (*end && *end != '(') || x < -1 || x > 1000000) {
    fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment: %s='%s' is not a valid integer", name, s);
    return -1;
  }
  *v = (int)x;
  return 1;
}

fsdpc_status fsdpc__slurm_first_host(const char *list, char *out, size_t cap, fsdpc_err *err) {
  /* The first host ends at the first ',' outside brackets. */
  size_t i = 0;
  int depth = 0;
  for (; list[i]; i++) {
    if (list[i] == '[')
      depth++;
    if (list[i] == ']')
      depth--;
    if (list[i] == ',' && depth == 0)
      break;
  }
  char first[256];
  if (i == 0 || i >= sizeof first)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "environment: cannot read a host from SLURM_JOB_NODELIST='%s' (set "
                       "MASTER_ADDR)",
                       list);
  memcpy(first, list, i);
  first[i] = '\0';
  char *lb = strchr(first, '[');
  size_t n;
  if (!lb) {
    n = (size_t)snprintf(out, cap, "%s", first);
  } else {
    char *rb = strchr(lb, ']');
    if (!rb)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "environment: unbalanced '[' in SLURM_JOB_NODELIST='%s' (set "
                         "MASTER_ADDR)",
                         list);
    /* The first range item: digits up to '-' or ',' keep their zero padding. */
    size_t k = 1;
    while (lb + k < rb && lb[k] != '-' && lb[k] != ',')
      k++;
    n = (size_t)snprintf(out, cap, "%.*s%.*s%s", (int)(lb - first), first, (int)(k - 1), lb + 1,
                         rb + 1);
    if (k == 1)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "environment: empty range in SLURM_JOB_NODELIST='%s' (set MASTER_ADDR)",
                         list);
  }
  if (n >= cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment: host name too long in '%s'", list);
  return FSDPC_OK;
}

/* Fills master_addr / master_port from MASTER_ADDR / MASTER_PORT if set. */
static fsdpc_status read_master(fsdpc_dist_env *e, fsdpc_err *err) {
  const char *addr = getenv("MASTER_ADDR");
  if (addr && *addr) {
    if (strlen(addr) >= sizeof e->master_addr)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment: MASTER_ADDR is too long");
    snprintf(e->master_addr, sizeof e->master_addr, "%s", addr);
  }
  int port = 0;
  int r = env_int("MASTER_PORT", &port, err);
  if (r < 0)
    return FSDPC_INVALID_USAGE;
  if (r > 0) {
    if (port < 1 || port > 65535)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "environment: MASTER_PORT=%d is out of range 1..65535", port);
    e->master_port = port;
  }
  return FSDPC_OK;
}

/* FSDPC_STORE_PORT, when set, is the store port whatever the launcher. */
static fsdpc_status read_store_port(fsdpc_dist_env *e, fsdpc_err *err) {
  int port = 0;
  int r = env_int("FSDPC_STORE_PORT", &port, err);
  if (r < 0)
    return FSDPC_INVALID_USAGE;
  if (r > 0 && (port < 1 || port > 65535))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "environment: FSDPC_STORE_PORT=%d is out of range 1..65535", port);
  if (r > 0)
    e->master_port = port;
  return FSDPC_OK;
}

/* A pod of a Kubernetes job that set RANK but no LOCAL_RANK: Kubeflow's
 * PyTorchJob (torchrun, inside a pod, sets LOCAL_RANK). */
static int kubeflow_pod(void) {
  const char *k = getenv("KUBERNETES_SERVICE_HOST"), *l = getenv("LOCAL_RANK");
  return k && *k && !(l && *l);
}

#define READ(name, dst, required)                                                                  \
  do {                                                                                             \
    int r_ = env_int(name, dst, err);                                                              \
    if (r_ < 0)                                                                                    \
      return FSDPC_INVALID_USAGE;                                                                  \
    if (r_ == 0 && (required))                                                                     \
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,                                                 \
                         "environment: %s is set but %s is not (source %s)", trigger, name,        \
                         e->source);                                                               \
  } while (0)

static fsdpc_status check(fsdpc_dist_env *e, const char *rank_var, const char *world_var,
                          const char *local_var, const char *lworld_var, fsdpc_err *err) {
  if (e->world_size < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment (%s): %s=%d must be >= 1", e->source,
                       world_var, e->world_size);
  if (e->rank < 0 || e->rank >= e->world_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment (%s): %s=%d is outside 0..%d (%s=%d)",
                       e->source, rank_var, e->rank, e->world_size - 1, world_var, e->world_size);
  if (e->local_world_size < 1 || e->local_world_size > e->world_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment (%s): %s=%d must be in 1..%s (%d)",
                       e->source, lworld_var, e->local_world_size, world_var, e->world_size);
  if (e->local_rank < 0 || e->local_rank >= e->local_world_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "environment (%s): %s=%d is outside 0..%d (%s=%d)",
                       e->source, local_var, e->local_rank, e->local_world_size - 1, lworld_var,
                       e->local_world_size);
  if (e->nnodes < 1 || e->node_rank < 0 || e->node_rank >= e->nnodes)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "environment (%s): node rank %d is outside 0..%d nodes", e->source,
                       e->node_rank, e->nnodes - 1);
  return FSDPC_OK;
}

/* Node count and rank when the launcher does not say: assume equal nodes. */
static void derive_nodes(fsdpc_dist_env *e) {
  e->nnodes = (e->world_size + e->local_world_size - 1) / e->local_world_size;
  e->node_rank = e->rank / e->local_world_size;
}

static fsdpc_status detect_layout(fsdpc_dist_env *e, fsdpc_err *err) {
  memset(e, 0, sizeof *e);
  e->world_size = e->local_world_size = e->nnodes = 1;
  snprintf(e->master_addr, sizeof e->master_addr, "127.0.0.1");
  e->master_port = FSDPC_DEFAULT_MASTER_PORT;
  const char *trigger = NULL;

  if (getenv("RANK") && *getenv("RANK")) {
    trigger = "RANK";
    const char *l = getenv("FSDPC_LAUNCHER");
    e->source = (l && strcmp(l, "1") == 0) ? "fsdpc" : kubeflow_pod() ? "kubeflow" : "torchrun";
    READ("RANK", &e->rank, 1);
    READ("WORLD_SIZE", &e->world_size, 1);
    if (strcmp(e->source, "kubeflow") == 0) {
      /* Kubeflow's PyTorchJob (and a JobSet that sets RANK and WORLD_SIZE
       * from the pod's index) runs one process per pod: RANK is the pod's
       * index, and no LOCAL_RANK is set. */
      e->local_rank = 0;
      e->local_world_size = 1;
    } else {
      READ("LOCAL_RANK", &e->local_rank, 1);
      e->local_world_size = e->world_size;
      READ("LOCAL_WORLD_SIZE", &e->local_world_size, 0);
    }
    derive_nodes(e);
    READ("GROUP_RANK", &e->node_rank, 0);
    READ("FSDPC_NODE_RANK", &e->node_rank, 0);
    READ("FSDPC_NNODES", &e->nnodes, 0);
    FSDPC_TRY(read_master(e, err));
    if (!getenv("MASTER_ADDR") && e->world_size > 1)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "environment (%s): WORLD_SIZE=%d but MASTER_ADDR is not set", e->source,
                         e->world_size);
    /* torchrun's agent already serves its own TCPStore on MASTER_PORT
     * (workers are told so by TORCHELASTIC_USE_AGENT_STORE); ours takes the
     * next port unless FSDPC_STORE_PORT says otherwise. */
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent && strcmp(agent, "True") == 0 && e->master_port < 65535)
      e->master_port++;
    FSDPC_TRY(read_store_port(e, err));
    return check(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", err);
  }
  if (getenv("SLURM_PROCID") && *getenv("SLURM_PROCID")) {
    trigger = "SLURM_PROCID";
    e->source = "slurm";
    READ("SLURM_PROCID", &e->rank, 1);
    READ("SLURM_NTASKS", &e->world_size, 1);
    READ("SLURM_LOCALID", &e->local_rank, 1);
    e->local_world_size = e->world_size;
    READ("SLURM_NTASKS_PER_NODE", &e->local_world_size, 0);
    derive_nodes(e);
    READ("SLURM_NODEID", &e->node_rank, 0);
    READ("SLURM_NNODES", &e->nnodes, 0);
    const char *nl = getenv("SLURM_JOB_NODELIST");
    if (!getenv("MASTER_ADDR") && nl && *nl)
      FSDPC_TRY(fsdpc__slurm_first_host(nl, e->master_addr, sizeof e->master_addr, err));
    FSDPC_TRY(read_master(e, err));
    FSDPC_TRY(read_store_port(e, err));
    return check(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", err);
  }
  if (getenv("OMPI_COMM_WORLD_RANK") && *getenv("OMPI_COMM_WORLD_RANK")) {
    trigger = "OMPI_COMM_WORLD_RANK";
    e->source = "mpi";
    READ("OMPI_COMM_WORLD_RANK", &e->rank, 1);
    READ("OMPI_COMM_WORLD_SIZE", &e->world_size, 1);
    READ("OMPI_COMM_WORLD_LOCAL_RANK", &e->local_rank, 1);
    e->local_world_size = e->world_size;
    READ("OMPI_COMM_WORLD_LOCAL_SIZE", &e->local_world_size, 0);
    derive_nodes(e);
    FSDPC_TRY(read_master(e, err));
    FSDPC_TRY(read_store_port(e, err));
    if (!getenv("MASTER_ADDR") && e->world_size > e->local_world_size)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "environment (mpi): a multi-node mpirun job needs MASTER_ADDR (rank "
                         "0's host) exported to every rank (mpirun -x MASTER_ADDR)");
    return check(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE", err);
  }
  (void)trigger;
  e->source = "single";
  FSDPC_TRY(read_master(e, err));
  return read_store_port(e, err);
}

fsdpc_status fsdpc__dist_env_detect(fsdpc_dist_env *e, fsdpc_err *err) {
  FSDPC_TRY(detect_layout(e, err));
  return fsdpc__job_token_resolve(e->world_size == 1, e->master_addr, e->master_port,
                                  e->job_token, err);
}
