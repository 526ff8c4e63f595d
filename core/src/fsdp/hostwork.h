/* A host worker thread fed by the engine: tasks (kind, unit) run in the
 * order they were pushed, one at a time, on one thread of their own. The
 * offloaded optimizer step uses it so that a unit's host work (adding its
 * landed gradients, its sum of squares, its optimizer update) runs while
 * the engine's thread goes on driving the device.
 *
 * Every push gets a sequence number (1, 2, ...); wait(seq) returns once
 * that task and all before it are done. After a task fails the worker
 * skips the rest, and every wait returns the first failure's status and
 * message. The engine owns the worker; destroy drains it first. */
#ifndef FSDPC_FSDP_HOSTWORK_H
#define FSDPC_FSDP_HOSTWORK_H

#include <stdint.h>

#include "util/err.h"

typedef fsdpc_status (*fsdpc_hostwork_fn)(void *arg, int kind, int unit, fsdpc_err *err);
typedef struct fsdpc_hostwork fsdpc_hostwork;

fsdpc_status fsdpc__hostwork_create(fsdpc_hostwork_fn fn, void *arg, fsdpc_hostwork **out,
                                    fsdpc_err *err);
/* Drains the queue, stops the thread, frees. NULL is a no-op. */
void fsdpc__hostwork_destroy(fsdpc_hostwork *w);
/* Queues a task; *seq (may be NULL) receives its sequence number. */
fsdpc_status fsdpc__hostwork_push(fsdpc_hostwork *w, int kind, int unit, uint64_t *seq,
                                  fsdpc_err *err);
/* Waits until task seq (0: none) and every task before it are done. */
fsdpc_status fsdpc__hostwork_wait(fsdpc_hostwork *w, uint64_t seq, fsdpc_err *err);
/* Without blocking: whether task seq and every task before it are done, or
 * a task has failed (wait then returns its status). */
int fsdpc__hostwork_done(fsdpc_hostwork *w, uint64_t seq);
/* Waits until every task pushed so far is done. */
fsdpc_status fsdpc__hostwork_drain(fsdpc_hostwork *w, fsdpc_err *err);

#endif
