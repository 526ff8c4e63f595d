/* Joining a job: store server on rank 0, a store client everywhere. */
#include "dist/job.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dist/heartbeat.h"
#include "dist/store_wire.h"
#include "dist/watchdog.h"
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

fsdpc_status fsdpc__dist_job_start(const fsdpc_dist_env *env, const fsdpc_dist_job_opts *o,
                                   fsdpc_dist_job **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_dist_job *job = calloc(1, sizeof *job);
  if (!job)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  job->env = *env;
  job->timeout_ms = o->timeout_ms;
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
  st = fsdpc__store_connect(env->master_addr, env->master_port, env->job_token, o->timeout_ms,
                            &job->store, err);
  if (st)
    goto fail_connect;
  if (env->world_size > 1) {
    fsdpc_watchdog_opts wo = {.addr = env->master_addr,
                              .port = env->master_port,
                              .token = env->job_token,
                              .rank = env->rank,
                              .world = env->world_size,
                              .local_world = env->local_world_size,
                              .nnodes = env->nnodes,
                              .heartbeat_timeout_ms =
                                  o->heartbeat_timeout_ms > 0 ? o->heartbeat_timeout_ms : 10000,
                              .exit_grace_ms = o->exit_grace_ms > 0 ? o->exit_grace_ms : 5000};
    st = fsdpc__watchdog_start(&wo, &job->watch, err);
    if (st)
      goto fail_watch;
  }
  *out = job;
  return FSDPC_OK;

fail_watch:
  fsdpc__store_close(job->store);
fail_connect:
  fsdpc__store_server_stop(job->server);
fail_server:
  free(job);
  return fsdpc__err_prefix(err, "rank %d", env->rank);
}

/* After a normal run: every rank says it is done with the store; the last
 * one raises a flag that rank 0 waits for before it takes the server away.
 * The watchdog runs on meanwhile, so that a rank that dies instead of
 * leaving ends the wait. */
static void leave(fsdpc_dist_job *job) {
  fsdpc_err e;
  int64_t n = 0;
  fsdpc__watchdog_leave(job->watch);
  fsdpc_status st = fsdpc__store_add(job->store, "fsdpc/exit/left", 1, &n, &e);
  if (st == FSDPC_OK && n == job->env.world_size)
    st = fsdpc__store_set(job->store, "fsdpc/exit/all_left", "1", 1, &e);
  if (st == FSDPC_OK && job->env.rank == 0) {
    int64_t until = fsdpc__now_ms() + job->timeout_ms;
    do {
      st = fsdpc__store_get(job->store, "fsdpc/exit/all_left", NULL, 0, NULL, 500, &e);
    } while (st == FSDPC_TIMEOUT && fsdpc__now_ms() < until &&
             !fsdpc__watchdog_failed(job->watch, NULL, 0, NULL));
  }
  if (st != FSDPC_OK && !fsdpc__watchdog_failed(job->watch, NULL, 0, NULL))
    FSDPC_LOGW("leaving without the other ranks: %s", e.msg);
}

void fsdpc__dist_job_stop(fsdpc_dist_job *job) {
  if (!job)
    return;
  if (job->env.world_size > 1 && !fsdpc__watchdog_failed(job->watch, NULL, 0, NULL))
    leave(job);
  if (job->server && fsdpc__watchdog_failed(job->watch, NULL, 0, NULL)) {
    /* The others read the first failure from this store: keep it a moment,
     * until they are gone (our own two connections stay). */
    int64_t until = fsdpc__now_ms() + 2000;
    while (fsdpc__store_server_clients(job->server) > 2 && fsdpc__now_ms() < until)
      usleep(20000);
  }
  fsdpc__watchdog_stop(job->watch);
  fsdpc__store_close(job->store);
  fsdpc__store_server_stop(job->server);
  free(job);
}

fsdpc_status fsdpc__dist_job_check(fsdpc_dist_job *job, fsdpc_err *err) {
  char first[1000];
  if (!job || !fsdpc__watchdog_failed(job->watch, first, sizeof first, NULL))
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "job failed: %s", first);
}

static int failure_known(void *w) {
  return fsdpc__watchdog_failed(w, NULL, 0, NULL);
}

fsdpc_status fsdpc__dist_job_fail(fsdpc_dist_job *job, fsdpc_status st, fsdpc_err *err) {
  if (!job || !job->watch || st == FSDPC_OK)
    return st;
  fsdpc_watchdog *w = job->watch;
  int self = job->env.rank;
  char local[1024];
  snprintf(local, sizeof local, "%s", err && err->msg[0] ? err->msg : "(no message)");
  int known = strncmp(local, "job failed: ", 12) == 0, mine = 0;
  char first[1100];
  if (!known && !fsdpc__watchdog_failed(w, NULL, 0, NULL)) {
    uint64_t seq = 0;
    int coll = fsdpc__watchdog_op_failed(w, &seq);
    char blame[600] = "";
    int culprit = self;
    /* A lost peer or a timeout: the real cause may be published any moment
     * (a launcher reaping a dead rank, a rank out of memory); meanwhile
     * read who never arrived or stands still. */
    int rc = 0;
    if (coll || st == FSDPC_TIMEOUT)
      rc = fsdpc__heartbeat_blame(fsdpc__watchdog_store(w), job->env.world_size, self,
                                  coll ? (int64_t)seq : -1, job->env.local_world_size,
                                  job->env.nnodes, failure_known, w, blame, sizeof blame, &culprit);
    if (rc < 0 && self != 0) { /* the store is gone with rank 0 */
      fsdpc__store_lost_text(job->env.master_addr, job->env.master_port, job->env.nnodes,
                             "connection lost", blame, sizeof blame);
      culprit = 0;
    } else if (rc != 0) {
      culprit = -1;
    }
    if (!fsdpc__watchdog_failed(w, NULL, 0, NULL)) {
      /* the cause first: "ranks 2, 3 (node 1 of 2) stopped answering ...
       * (seen by rank 1: ...)", else this rank's own error */
      char msg[1700], pre[32];
      int n = snprintf(pre, sizeof pre, "rank %d:", self);
      int has = strncmp(local, pre, (size_t)n) == 0;
      if (blame[0])
        snprintf(msg, sizeof msg, "%s (seen by rank %d: %s)", blame, self,
                 has ? local + n + (local[n] == ' ') : local);
      else if (has)
        snprintf(msg, sizeof msg, "%s", local);
      else
        snprintf(msg, sizeof msg, "%s %s", pre, local);
      fsdpc__watchdog_fail(w, culprit, msg);
      fsdpc__watchdog_failed(w, first, sizeof first, NULL);
      mine = strncmp(first, msg, strlen(first)) == 0;
    }
  }
  fsdpc__watchdog_failed(w, first, sizeof first, NULL);
  if (err && !known) {
    if (mine) /* this rank's failure is the job's first */
      fsdpc__fail(err, st, "%s", first);
    else
      fsdpc__fail(err, st, "job failed: %.700s (rank %d stopped: %.250s)", first, self, local);
  }
  return st;
}

int fsdpc__dist_job_exit_code(fsdpc_dist_job *job, const fsdpc_err *err) {
  int code = job ? fsdpc__watchdog_exit_code(job->watch) : 0;
  if (code)
    return code;
  /* no job (world 1, or it is gone): the line says whose failure it was */
  return err && strncmp(err->msg, "job failed: ", 12) == 0 ? FSDPC_EXIT_PEER : FSDPC_EXIT_FAILED;
}

/* ---- the dead key ---- */

fsdpc_status fsdpc__dist_post_failure(fsdpc_store *store, int culprit, const char *msg, int *won,
                                      fsdpc_err *err) {
  if (won)
    *won = 0;
  /* ADD on a side key elects the first reporter without a race. */
  int64_t n = 0;
  FSDPC_TRY(fsdpc__store_add(store, FSDPC_DEAD_KEY "/count", 1, &n, err));
  if (n != 1)
    return FSDPC_OK;
  char r[24];
  int rl = snprintf(r, sizeof r, "%d", culprit);
  FSDPC_TRY(fsdpc__store_set(store, FSDPC_DEAD_RANK_KEY, r, (size_t)rl, err));
  size_t len = strlen(msg);
  FSDPC_TRY(fsdpc__store_set(store, FSDPC_DEAD_KEY, msg, len < 1000 ? len : 1000, err));
  if (won)
    *won = 1;
  return FSDPC_OK;
}

fsdpc_status fsdpc__dist_read_failure(fsdpc_store *store, char *msg, size_t cap, int *culprit,
                                      int *found, int64_t wait_ms, fsdpc_err *err) {
  *found = 0;
  *culprit = -1;
  char raw[1024];
  size_t n = 0;
  fsdpc_status st;
  if (wait_ms <= 0) {
    st = fsdpc__store_check(store, FSDPC_DEAD_KEY, err);
    if (st == FSDPC_TIMEOUT)
      return FSDPC_OK;
    FSDPC_TRY(st);
  }
  st = fsdpc__store_get(store, FSDPC_DEAD_KEY, raw, sizeof raw, &n, wait_ms > 0 ? wait_ms : 1, err);
  if (st == FSDPC_TIMEOUT)
    return FSDPC_OK;
  FSDPC_TRY(st);
  fsdpc__escape(msg, cap, raw, n < sizeof raw ? n : sizeof raw);
  *found = 1;
  char r[24];
  size_t rl = 0;
  /* set before the message: present once the message is */
  if (fsdpc__store_get(store, FSDPC_DEAD_RANK_KEY, r, sizeof r - 1, &rl, 1, err) == FSDPC_OK) {
    r[rl < sizeof r ? rl : sizeof r - 1] = '\0';
    *culprit = atoi(r);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__dist_check_abort(fsdpc_store *store, fsdpc_err *err) {
  char msg[900];
  int found = 0, culprit;
  FSDPC_TRY(fsdpc__dist_read_failure(store, msg, sizeof msg, &culprit, &found, 0, err));
  if (!found)
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "job aborted: %s", msg);
}

fsdpc_status fsdpc__dist_post_abort(fsdpc_store *store, const char *msg, fsdpc_err *err) {
  return fsdpc__dist_post_failure(store, -1, msg, NULL, err);
}
