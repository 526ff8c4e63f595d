/* What ranks tell their launcher through a pipe: that a checkpoint save is
 * under way (so that a SIGTERM's grace period, dist.term_grace_s, does not
 * end in a SIGKILL in the middle of the save that the SIGTERM itself asked
 * for), and the job's first failure as soon as a rank knows it (so that the
 * launcher names it even when the store, which lives in rank 0, is gone).
 *
 * The launcher makes a pipe and passes its write end to every rank
 * (FSDPC_LAUNCHER_FD). A record is {int32 rank, int32 kind, int32 len} and
 * len bytes, written at once (writes under PIPE_BUF are atomic): kind 0/1 =
 * a save ends/begins (rank: the saving rank), kind 2 = the first failure
 * (rank: the rank it blames or -1; len <= 1000 bytes of text), kind 3 = the
 * error a rank ends with before the failure protocol runs (a refusal at
 * start-up; rank: its own). Without the variable (another launcher) the rank
 * side does nothing. */
#ifndef FSDPC_DIST_SAVE_NOTIFY_H
#define FSDPC_DIST_SAVE_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#define FSDPC_LAUNCHER_FD_ENV "FSDPC_LAUNCHER_FD"

/* Rank side: begin = 1 before a save, 0 after it (best effort). */
void fsdpc__save_notify(int rank, int begin);
/* Rank side: the job's first failure, one line, and the rank it blames
 * (-1: none known; best effort). */
void fsdpc__fail_notify(int culprit, const char *first);
/* Rank side: the error this rank ends with (best effort). */
void fsdpc__error_notify(int rank, const char *msg);

/* Launcher side: what the ranks said so far. */
typedef struct fsdpc_launcher_inbox {
  uint8_t buf[4096]; /* bytes of a record not read whole yet */
  size_t len;
  char first[1024]; /* the first failure a rank reported, "" none yet */
  int first_rank;   /* the rank it blames, or -1 */
  char own[1024];   /* the first error a rank reported of itself (kind 3) */
  int own_rank;     /* that rank, or -1 */
} fsdpc_launcher_inbox;

/* Opens the pipe (read end non-blocking and close-on-exec, write end
 * inherited by the ranks). 0 on success. */
int fsdpc__save_channel_open(int fds[2]);
/* Reads every pending record: saving[i] (i = global rank - first_rank,
 * 0 <= i < n) becomes 1 or 0; the first failure reported is kept in in. */
void fsdpc__save_channel_read(int rfd, fsdpc_launcher_inbox *in, int first_rank, int n,
                              int *saving);

#endif
