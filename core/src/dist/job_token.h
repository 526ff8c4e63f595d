/* The job token: a string that every store request carries, so that a
 * store only acts on requests from its own job (a second job that lands on
 * the same address and port, or anyone else who can connect, is refused).
 *
 * Where it comes from, first match:
 *   FSDPC_JOB_TOKEN        the token itself (our launcher sets it for its
 *                          ranks; set it yourself for any other launcher)
 *   FSDPC_JOB_TOKEN_FILE   a file whose first line is the token (multi-node
 *                          jobs on a shared file system)
 *   SLURM_JOB_ID           "slurm-<job id>.<step id>"
 *   TORCHELASTIC_RUN_ID    "torchrun-<run id>" (torchrun --rdzv-id; not "none")
 *   nothing of the above   a random token when the job is one process (or
 *                          our launcher on one node), else a token made of
 *                          the store address, with a warning (then two
 *                          jobs must not share an address and port).
 * A token is 1..64 printable ASCII characters without spaces. */
#ifndef FSDPC_DIST_JOB_TOKEN_H
#define FSDPC_DIST_JOB_TOKEN_H

#include <stddef.h>

#include "util/err.h"

#define FSDPC_JOB_TOKEN_CAP 65

/* 32 random hex characters. */
fsdpc_status fsdpc__job_token_random(char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err);

/* The token from the environment (above). *found is 1 when a source was set,
 * 0 when none was (out is then untouched). A malformed value is an error
 * naming the variable. */
fsdpc_status fsdpc__job_token_from_env(char out[FSDPC_JOB_TOKEN_CAP], int *found, fsdpc_err *err);

/* The whole rule: the environment, else random when single (1), else
 * derived from addr:port with a warning. */
fsdpc_status fsdpc__job_token_resolve(int single, const char *addr, int port,
                                      char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err);

#endif
