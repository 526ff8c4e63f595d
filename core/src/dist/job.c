/* Joining a job: store server on rank 0, a store client everywhere. */
#include "dist/job.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dist/heartbeat.h"
#include "util/escape.h"
#include "util/log.h"

/* A host name may resolve to another interface than the one peers use
 * (Debian maps the hostname to 127.0.1.1), so only a numeric address is
 * bound as given, and "localhost" as the loopback address. */
static const char *bind_addr_for(const char *master) {
  unsigned char buf[sizeof(struct in6_addr)];
  if (strcasecmp(master, "localhost") == 0 || strcasecmp(master, "localhost.localdomain") == 0)
    return "127.0.0.1";
  if (inet_pton(AF_INET, master, buf) == 1 || inet_pton(AF_INET6, master, buf) == 1)
    return master;
  return NULL;
}

fsdpc_status fsdpc__dist_job_start(const fsdpc_dist_env *env, int64_t timeout_ms,
                                   fsdpc_dist_job **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_dist_job *job = calloc(1, sizeof *job);
  if (!job)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  job->env = *env;
  job->timeout_ms = timeout_ms;
  /* A peer that dies (a lost node) closes its sockets; a collectives
   * library's next write to one must fail with EPIPE and be reported, not
   * kill this rank with SIGPIPE (Gloo's TCP transport writes without
   * MSG_NOSIGNAL). Only the default disposition is replaced: an embedder's
   * own SIGPIPE handler stays. */
  struct sigaction old;
  if (env->world_size > 1 && sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO))
    signal(SIGPIPE, SIG_IGN);
  fsdpc_status st;
  if (env->rank == 0) {
    st = fsdpc__store_server_start(bind_addr_for(env->master_addr), env->master_port,
                                   env->job_token, NULL, &job->server, NULL, err);
    if (st)
      goto fail_server;
  }
  st = fsdpc__store_connect(env->master_addr, env->master_port, env->job_token, timeout_ms,
                            &job->store, err);
  if (st)
    goto fail_connect;
  if (env->world_size > 1) {
    fsdpc_err e;
    if (fsdpc__store_connect(env->master_addr, env->master_port, env->job_token, timeout_ms,
                             &job->hb_store, &e) == FSDPC_OK)
      job->heartbeat = fsdpc__heartbeat_start(job->hb_store, env->rank);
  }
  *out = job;
  return FSDPC_OK;

fail_connect:
  fsdpc__store_server_stop(job->server);
fail_server:
  free(job);
  return fsdpc__err_prefix(err, "rank %d", env->rank);
}

void fsdpc__dist_job_stop(fsdpc_dist_job *job) {
  if (!job)
    return;
  fsdpc__heartbeat_stop(job->heartbeat);
  fsdpc__store_close(job->hb_store);
  /* Every rank says it is done with the store; the last one raises a flag
   * that rank 0 waits for before it takes the server away. Other ranks do
   * not wait: after their ADD they send nothing more. */
  if (job->env.world_size > 1) {
    fsdpc_err e;
    int64_t n = 0;
    fsdpc_status st = fsdpc__store_add(job->store, "fsdpc/exit/left", 1, &n, &e);
    if (st == FSDPC_OK && n == job->env.world_size)
      st = fsdpc__store_set(job->store, "fsdpc/exit/all_left", "1", 1, &e);
    if (st == FSDPC_OK && job->env.rank == 0)
      st = fsdpc__store_get(job->store, "fsdpc/exit/all_left", NULL, 0, NULL, job->timeout_ms, &e);
    if (st != FSDPC_OK)
      FSDPC_LOGW("leaving without the other ranks: %s", e.msg);
  }
  fsdpc__store_close(job->store);
  fsdpc__store_server_stop(job->server);
  free(job);
}

fsdpc_status fsdpc__dist_check_abort(fsdpc_store *store, fsdpc_err *err) {
  fsdpc_status st = fsdpc__store_check(store, FSDPC_DEAD_KEY, err);
  if (st == FSDPC_TIMEOUT)
    return FSDPC_OK; /* no death reported */
  if (st != FSDPC_OK)
    return st;
  char msg[512], safe[700];
  size_t n = 0;
  FSDPC_TRY(fsdpc__store_get(store, FSDPC_DEAD_KEY, msg, sizeof msg, &n, 0, err));
  fsdpc__escape(safe, sizeof safe, msg, n < sizeof msg ? n : sizeof msg);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "job aborted: %s", safe);
}

fsdpc_status fsdpc__dist_post_abort(fsdpc_store *store, const char *msg, fsdpc_err *err) {
  /* ADD on a side key elects the first reporter without a race. */
  int64_t n = 0;
  FSDPC_TRY(fsdpc__store_add(store, FSDPC_DEAD_KEY "/count", 1, &n, err));
  if (n != 1)
    return FSDPC_OK;
  return fsdpc__store_set(store, FSDPC_DEAD_KEY, msg, strlen(msg), err);
}

void fsdpc__dist_blame_silent(fsdpc_dist_job *job, fsdpc_err *err) {
  if (!job || job->env.world_size < 2 || !err)
    return;
  char who[256];
  int rc = fsdpc__heartbeat_silent(job->store, job->env.world_size, job->env.rank, who, sizeof who);
  if (rc != 0 && job->env.nnodes > 1 && job->env.node_rank != 0) {
    /* The store lives in rank 0: when it is gone, so is (likely) node 0. */
    size_t l = strlen(err->msg);
    snprintf(
        err->msg + l, sizeof err->msg - l,
        "; the store (rank 0, node 0 of %d) does not answer: node 0 is lost or its rank 0 died",
        job->env.nnodes);
    return;
  }
  if (!who[0])
    return;
  /* Several nodes: say which node(s) the silent ranks live on, so that a lost
   * node is named by the nodes that survive it (ranks are node-major). */
  char nodes[200] = "";
  int lw = job->env.local_world_size, nn = job->env.nnodes;
  if (nn > 1 && lw > 0) {
    int last = -1, k = 0;
    size_t u = 0;
    for (const char *p = who; *p && u < sizeof nodes;) {
      char *end;
      long r = strtol(p, &end, 10);
      if (end == p)
        break;
      int node = (int)(r / lw);
      if (node != last && node < nn) /* silent ranks come in rank order */
        u += (size_t)snprintf(nodes + u, sizeof nodes - u, "%s%d", k++ ? ", " : "", node);
      last = node;
      p = end + strspn(end, ", ");
    }
    char tmp[sizeof nodes];
    snprintf(tmp, sizeof tmp, "%s", nodes);
    if (k)
      snprintf(nodes, sizeof nodes, " (node%s %.150s of %d)", k > 1 ? "s" : "", tmp, nn);
    else
      nodes[0] = '\0';
  }
  size_t l = strlen(err->msg);
  snprintf(err->msg + l, sizeof err->msg - l,
           "; rank%s %s%s stopped answering (heartbeat standing still: stopped, hung or gone)",
           strchr(who, ',') || strstr(who, "more") ? "s" : "", who, nodes);
}
