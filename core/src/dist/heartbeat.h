/* Per-rank heartbeats in the store, so that a collective timeout can name
 * the rank(s) that stopped answering (a SIGSTOPped or hung process) instead
 * of the rank that noticed.
 *
 * Each rank's thread adds 1 to "fsdpc/hb/<rank>" every second. On a failure
 * fsdpc__heartbeat_silent reads every counter twice, two seconds apart, and
 * lists the ranks whose counter did not move. */
#ifndef FSDPC_DIST_HEARTBEAT_H
#define FSDPC_DIST_HEARTBEAT_H

#include <stddef.h>

#include "dist/store.h"

typedef struct fsdpc_heartbeat fsdpc_heartbeat;

/* Starts the thread (NULL on failure: heartbeats are best effort). */
fsdpc_heartbeat *fsdpc__heartbeat_start(fsdpc_store *store, int rank);
void fsdpc__heartbeat_stop(fsdpc_heartbeat *hb);

/* Writes "ranks 1, 3" (the silent ones, this rank excluded) into out, or
 * an empty string when every rank is alive or the store does not answer.
 * Takes about two seconds. Returns -1 when the store did not answer, else 0. */
int fsdpc__heartbeat_silent(fsdpc_store *store, int world, int self, char *out, size_t cap);

#endif
