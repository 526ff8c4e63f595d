/* Ranks tell their launcher that a checkpoint save is under way, so that a
 * SIGTERM's grace period (dist.term_grace_s) does not end in a SIGKILL in
 * the middle of the save that the SIGTERM itself asked for.
 *
 * The launcher makes a pipe and passes its write end to every rank
 * (FSDPC_LAUNCHER_FD); a rank writes one 8-byte record {rank, 1} when a save
 * begins and {rank, 0} when it ends (writes under PIPE_BUF are atomic).
 * Without the variable (another launcher) the rank side does nothing. */
#ifndef FSDPC_DIST_SAVE_NOTIFY_H
#define FSDPC_DIST_SAVE_NOTIFY_H

#define FSDPC_LAUNCHER_FD_ENV "FSDPC_LAUNCHER_FD"

/* Rank side: begin = 1 before a save, 0 after it (best effort). */
void fsdpc__save_notify(int rank, int begin);

/* Launcher side: opens the pipe (read end non-blocking and close-on-exec,
 * write end inherited by the ranks). 0 on success. */
int fsdpc__save_channel_open(int fds[2]);
/* Reads every pending record; saving[i] (i = global rank - first_rank,
 * 0 <= i < n) becomes 1 or 0. */
void fsdpc__save_channel_read(int rfd, int first_rank, int n, int *saving);

#endif
