/* Per-rank heartbeat records in the store, and what a failure reads from
 * them: which ranks stopped answering, which never reached a collective.
 *
 * Each rank's watchdog (dist/watchdog.h) sets "fsdpc/hb/<rank>" twice a
 * second to "<beat> <entered> <left>": a counter that moves while the
 * process is alive, the sequence number + 1 of the last collective it
 * handed to its plugin (0: none yet), and 1 once it left the job normally.
 * Rank 0's watchdog names a rank whose beat stands still longer than
 * dist.heartbeat_timeout_s; after a failed collective, any rank can name
 * the ranks that stood still for two periods or never entered it. */
#ifndef FSDPC_DIST_HEARTBEAT_H
#define FSDPC_DIST_HEARTBEAT_H

#include <stddef.h>
#include <stdint.h>

#include "dist/store.h"

#define FSDPC_HB_PERIOD_MS 500

typedef struct fsdpc_hb_record {
  int64_t beat;
  int64_t entered; /* seq + 1 of the last collective handed to the plugin, 0: none */
  int left;        /* left the job normally */
  int present;     /* the rank has written a record */
} fsdpc_hb_record;

fsdpc_status fsdpc__heartbeat_put(fsdpc_store *s, int rank, const fsdpc_hb_record *r,
                                  fsdpc_err *err);
/* present = 0 when rank has written none yet. */
fsdpc_status fsdpc__heartbeat_get(fsdpc_store *s, int rank, fsdpc_hb_record *r, fsdpc_err *err);

/* Where ranks live, for messages: ranks are node-major, local_world per
 * node. "ranks 2, 3 (node 1 of 2)"; the node part only across nodes; at
 * most 16 ranks are listed, then "and N more". */
void fsdpc__ranks_text(const int *ranks, int n, int local_world, int nnodes, char *out, size_t cap);

/* After collective `seq` (-1: none) failed on rank self: reads every
 * record, waits two heartbeat periods and a bit (1.2 s) (returning early, with 1, when stop(arg)
 * says so), reads them again, and writes "ranks 2, 3 (node 1 of 2) stopped
 * answering (heartbeat standing still: stopped, hung or gone); rank 3 never
 * reached collective seq 57 (last heard of at seq 56)" into out ("" when
 * nothing is known). *culprit: the first rank named, or -1. Returns -1
 * when the store did not answer, else 0 (or 1 after stop). */
int fsdpc__heartbeat_blame(fsdpc_store *s, int world, int self, int64_t seq, int local_world,
                           int nnodes, int (*stop)(void *), void *arg, char *out, size_t cap,
                           int *culprit);

/* "the store at A:P (rank 0, node 0 of 2) does not answer (why): rank 0
 * died, or node 0 is lost, frozen or cut off": what a rank says when the
 * store, which lives in rank 0, is gone. */
void fsdpc__store_lost_text(const char *addr, int port, int nnodes, const char *why, char *out,
                            size_t cap);

#endif
