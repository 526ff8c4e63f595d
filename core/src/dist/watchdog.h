/* The job watchdog: one thread per rank of a multi-rank job that makes a
 * failure anywhere end every process within seconds (docs/dist.md, "The
 * failure protocol").
 *
 * On its own store connection (deadline dist.heartbeat_timeout_s, so that
 * a frozen store cannot hold it) it, every 200 ms:
 * - writes this rank's heartbeat record (dist/heartbeat.h) twice a second;
 * - reads the job's first failure (the dead key, dist/job.h) twice a
 *   second;
 * - checks the collective this rank is inside (fsdp/dist.c tells it): past
 *   collectives.timeout_s it is the job's failure, naming the ranks that
 *   never reached it or stopped answering;
 * - on rank 0, names every rank whose heartbeat stood still longer than
 *   dist.heartbeat_timeout_s (a stopped, frozen or cut-off process or node);
 * - on other ranks, a store that does not answer within that time names
 *   node 0 (the store lives in rank 0).
 * Once the job has failed it aborts every registered communicator (on a
 * thread of its own: an abort may block), and if the process has not ended
 * exit_grace_ms later (a collective that cannot be aborted, teardown that
 * waits on a peer), it writes the rank's last line naming the first failure
 * and ends the process with the documented exit code: the one place fsdpc
 * ends a process from the library, because the alternative is a process
 * that holds its GPU forever. */
#ifndef FSDPC_DIST_WATCHDOG_H
#define FSDPC_DIST_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "fsdpc/plugin.h"
#include "util/err.h"

/* Exit codes of a rank that the failure protocol ends (docs/dist.md). */
#define FSDPC_EXIT_FAILED 1 /* this rank's own failure is the job's first */
#define FSDPC_EXIT_PEER 3   /* another rank, node or the store failed first */

typedef struct fsdpc_watchdog fsdpc_watchdog;

typedef struct fsdpc_watchdog_opts {
  const char *addr; /* the store */
  int port;
  const char *token;
  int rank, world, local_world, nnodes;
  int64_t heartbeat_timeout_ms; /* silent peer, unresponsive store */
  int64_t exit_grace_ms;        /* after a failure, the process ends within this */
} fsdpc_watchdog_opts;

fsdpc_status fsdpc__watchdog_start(const fsdpc_watchdog_opts *o, fsdpc_watchdog **out,
                                   fsdpc_err *err);
/* This rank leaves the job normally: its record says so (rank 0 stops
 * expecting its heartbeat) and it beats no more; the thread still watches
 * for a failure until stop. */
void fsdpc__watchdog_leave(fsdpc_watchdog *w);
/* Stops the thread. NULL is a no-op. */
void fsdpc__watchdog_stop(fsdpc_watchdog *w);

/* ---- collectives (fsdp/dist.c) ---- */
/* Communicators to abort when the job fails. remove_comms: before they are
 * destroyed (waits for an abort under way); returns 1 when the job failed
 * (they were aborted where the plugin can). */
void fsdpc__watchdog_add_comm(fsdpc_watchdog *w, const fsdpc_collectives_v1 *cv, fsdpc_comm *c);
int fsdpc__watchdog_remove_comms(fsdpc_watchdog *w);
/* Around each collective call: what (e.g. "all_gather (unit layers.3, seq
 * 57)"), its sequence number and timeout. begin fails (with the first
 * failure) when the job has failed already; end records a failed call. */
fsdpc_status fsdpc__watchdog_op_begin(fsdpc_watchdog *w, const char *what, uint64_t seq,
                                      int64_t timeout_ms, fsdpc_err *err);
void fsdpc__watchdog_op_end(fsdpc_watchdog *w, fsdpc_status st);

/* ---- the failure ---- */
/* 1 when the job has failed; first (may be NULL) gets its line, *culprit
 * (may be NULL) the rank it blames (-1: none known). */
int fsdpc__watchdog_failed(fsdpc_watchdog *w, char *first, size_t cap, int *culprit);
/* This rank failed with msg (one line, starting "rank R: "), blaming rank
 * culprit (-1: none known): publishes it as the job's first failure unless
 * another came first, and aborts the communicators. */
void fsdpc__watchdog_fail(fsdpc_watchdog *w, int culprit, const char *msg);
/* This rank's last collective call failed (a timeout, a lost peer), and its
 * sequence number; 0 when it did not. */
int fsdpc__watchdog_op_failed(fsdpc_watchdog *w, uint64_t *seq);
/* The watchdog's store connection (short deadline), for the protocol. */
struct fsdpc_store *fsdpc__watchdog_store(fsdpc_watchdog *w);
/* The exit code the failure gives this rank (FSDPC_EXIT_*), 0 when none. */
int fsdpc__watchdog_exit_code(fsdpc_watchdog *w);

#endif
