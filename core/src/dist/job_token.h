/* The job token: a string that every store request carries, so that a
 * store only acts on requests from its own job (a second job that lands on
 * the same address and port, or anyone else who can connect, is refused).
 * A token must be something no other user of the cluster can derive: job
 * ids are public (squeue, ps), so a token is never made of a job id alone.
 *
 * Where it comes from, first match:
 *   FSDPC_JOB_TOKEN        the token itself (our launcher sets it for its
 *                          ranks; the environment of a job is the user's
 *                          own: srun, torchrun and mpirun -x pass it on)
 *   FSDPC_JOB_TOKEN_FILE   a file whose first line is the token; it must be
 *                          the user's own and private (mode 600)
 *   a scheduler's job id   HMAC-SHA256 of the id ("slurm:<job>.<step>",
 *                          "torchrun:<run id>") keyed by the user's secret
 *                          (below): every rank of the job derives the same
 *                          token, no other user can
 *   nothing of the above   random when the job is one process (or our
 *                          launcher on one node), else the HMAC of the store
 *                          address, with a warning (two jobs of one user
 *                          must then not share an address and port)
 *
 * The user's secret: FSDPC_SECRET_FILE, else $HOME/.config/fsdpc/job-secret,
 * 32 random bytes (hex) made on first use, mode 600. Nodes of one job find
 * the same secret through the shared home folder of a cluster; without one,
 * set FSDPC_JOB_TOKEN. A token is 1..64 printable ASCII characters without
 * spaces. */
#ifndef FSDPC_DIST_JOB_TOKEN_H
#define FSDPC_DIST_JOB_TOKEN_H

#include <stddef.h>

#include "util/err.h"

#define FSDPC_JOB_TOKEN_CAP 65

/* 32 random hex characters. */
fsdpc_status fsdpc__job_token_random(char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err);

/* The token from the environment (above). *found is 1 when a source was set,
 * 0 when none was (out is then untouched). A malformed value, a file others
 * can read or a missing secret is an error naming the variable. */
fsdpc_status fsdpc__job_token_from_env(char out[FSDPC_JOB_TOKEN_CAP], int *found, fsdpc_err *err);

/* The whole rule: the environment, else random when single (1), else
 * derived from addr:port and the user's secret, with a warning. */
fsdpc_status fsdpc__job_token_resolve(int single, const char *addr, int port,
                                      char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err);

/* The token of `what` (e.g. "slurm:42.0") under the user's secret: 32 hex
 * characters of HMAC-SHA256(secret, what). The secret is made on first use. */
fsdpc_status fsdpc__job_token_derive(const char *what, char out[FSDPC_JOB_TOKEN_CAP],
                                     fsdpc_err *err);

#endif
