/* One rank's membership of a job: its environment, the store client, on
 * global rank 0 the store server, and the watchdog (dist/watchdog.h) that
 * carries the job's failure protocol (docs/dist.md):
 *
 *   any failure on any rank is published as the job's first failure (the
 *   dead key), every rank and launcher acts on it (communicators aborted,
 *   no teardown that waits on a peer), the first failure is named in every
 *   rank's last line, and a rank exits 1 when it is the one blamed, 3 when
 *   another rank, node or the store failed first. */
#ifndef FSDPC_DIST_JOB_H
#define FSDPC_DIST_JOB_H

#include "dist/env.h"
#include "dist/store.h"

/* The job's first failure: one line, set once (first writer wins through
 * the count); the rank it blames, as decimal text (-1: none known). */
#define FSDPC_DEAD_KEY "fsdpc/dead"
#define FSDPC_DEAD_RANK_KEY "fsdpc/dead/rank"

struct fsdpc_watchdog;

typedef struct fsdpc_dist_job {
  fsdpc_dist_env env;
  fsdpc_store_server *server; /* rank 0 only */
  fsdpc_store *store;         /* every rank */
  int64_t timeout_ms;
  struct fsdpc_watchdog *watch; /* world > 1 */
} fsdpc_dist_job;

typedef struct fsdpc_dist_job_opts {
  int64_t timeout_ms;           /* rendezvous and store requests (collectives.timeout_s) */
  int64_t heartbeat_timeout_ms; /* dist.heartbeat_timeout_s; 0 = 10 s */
  int64_t exit_grace_ms;        /* after a failure the process ends within this; 0 = 5 s */
} fsdpc_dist_job_opts;

/* Rank 0 starts the store server on env->master_port (bound to master_addr
 * when it is a numeric address, else to every interface); every rank then
 * connects, waiting up to o->timeout_ms for rank 0, and starts its
 * watchdog (world > 1). */
fsdpc_status fsdpc__dist_job_start(const fsdpc_dist_env *env, const fsdpc_dist_job_opts *o,
                                   fsdpc_dist_job **out, fsdpc_err *err);
/* Leaves the job. After a normal run rank 0 first waits (up to the job
 * timeout) until every rank has said it is leaving, so that it does not
 * take the store away from ranks still using it. After a failure nobody
 * waits on a peer: rank 0 keeps the store up for at most two seconds, so
 * that the others can read the first failure. */
void fsdpc__dist_job_stop(fsdpc_dist_job *job);

/* Between steps: the job's first failure as an error ("job failed: ..."),
 * from what the watchdog knows (no store request). */
fsdpc_status fsdpc__dist_job_check(fsdpc_dist_job *job, fsdpc_err *err);
/* This rank's call failed with (st, err): the failure protocol. A failed
 * collective (a timeout, a lost peer) first waits up to 1.2 s
 * for the real cause to be published, and otherwise names the ranks that
 * never reached it or stopped answering; a local error is published at
 * once. err becomes the job's first failure (with this rank's own error
 * after it when that is another); the communicators are aborted. Returns
 * st. job NULL (world 1): nothing to do. */
fsdpc_status fsdpc__dist_job_fail(fsdpc_dist_job *job, fsdpc_status st, fsdpc_err *err);
/* The exit code of a rank whose run failed with err: FSDPC_EXIT_FAILED (1)
 * when the job's first failure blames this rank, FSDPC_EXIT_PEER (3) when it
 * was another rank's, a node's or the store's. Without a job (world 1, or
 * one whose session is gone) err says it: "job failed: ..." is another's. */
int fsdpc__dist_job_exit_code(fsdpc_dist_job *job, const fsdpc_err *err);

/* ---- the dead key (also the launcher's) ---- */
/* Publishes msg as the job's first failure blaming culprit (-1: none)
 * unless one was published already; *won (may be NULL) = 1 when this one
 * is the first. */
fsdpc_status fsdpc__dist_post_failure(fsdpc_store *store, int culprit, const char *msg, int *won,
                                      fsdpc_err *err);
/* The job's first failure (control characters escaped): *found 0 when none
 * within wait_ms (0: now). */
fsdpc_status fsdpc__dist_read_failure(fsdpc_store *store, char *msg, size_t cap, int *culprit,
                                      int *found, int64_t wait_ms, fsdpc_err *err);
/* An error "job aborted: <first failure>" when one was published, or the
 * store's error if the store is gone. */
fsdpc_status fsdpc__dist_check_abort(fsdpc_store *store, fsdpc_err *err);
/* fsdpc__dist_post_failure blaming nobody. */
fsdpc_status fsdpc__dist_post_abort(fsdpc_store *store, const char *msg, fsdpc_err *err);

#endif
