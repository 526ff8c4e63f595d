/* One rank's membership of a job: its environment, the store client and,
 * on global rank 0, the store server. Also the job-wide abort flag. */
#ifndef FSDPC_DIST_JOB_H
#define FSDPC_DIST_JOB_H

#include "dist/env.h"
#include "dist/store.h"

/* Key a supervisor sets (value: one line saying who died) when it sees a
 * rank die; ranks poll it between steps. */
#define FSDPC_DEAD_KEY "fsdpc/dead"

typedef struct fsdpc_dist_job {
  fsdpc_dist_env env;
  fsdpc_store_server *server; /* rank 0 only */
  fsdpc_store *store;         /* every rank */
  int64_t timeout_ms;
  struct fsdpc_heartbeat *heartbeat; /* this rank's, dist/heartbeat.h */
  fsdpc_store *hb_store; /* the heartbeat's own connection: a long GET on the
                            main one must not stall it */
} fsdpc_dist_job;

/* Rank 0 starts the store server on env->master_port (bound to master_addr
 * when it is a numeric address, else to every interface); every rank then
 * connects, waiting up to timeout_ms for rank 0. */
fsdpc_status fsdpc__dist_job_start(const fsdpc_dist_env *env, int64_t timeout_ms,
                                   fsdpc_dist_job **out, fsdpc_err *err);
/* Leaves the job. Rank 0 first waits (up to the job timeout) until every
 * rank has said it is leaving, so that it does not take the store away
 * from ranks still using it. */
void fsdpc__dist_job_stop(fsdpc_dist_job *job);

/* Between steps: an error holding the dead key's message if a supervisor
 * reported a death, or the store's error if the store is gone. */
fsdpc_status fsdpc__dist_check_abort(fsdpc_store *store, fsdpc_err *err);
/* After a failure (a collective timed out or lost a peer): appends "; ranks
 * 2, 3 (node 1 of 2) stopped answering (heartbeat standing still: stopped,
 * hung or gone)" to err when heartbeats say so (the node part only across
 * nodes). Takes about two seconds; world > 1 only. */
void fsdpc__dist_blame_silent(fsdpc_dist_job *job, fsdpc_err *err);
/* Sets the dead key to msg unless it is already set (first death wins). */
fsdpc_status fsdpc__dist_post_abort(fsdpc_store *store, const char *msg, fsdpc_err *err);

#endif
