/* Internal to the nccl collectives plugin: the communicator, its watchdog
 * and the helpers shared by nccl_plugin.c (life cycle, watchdog) and
 * nccl_ops.c (collectives). */
#ifndef FSDPC_PLUGIN_NCCL_COMM_H
#define FSDPC_PLUGIN_NCCL_COMM_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>

#include "fsdpc/plugin.h"

/* Device work the watchdog tracks: one event per enqueued collective (or
 * per stream at the end of a group), recorded on the op's stream. */
#define NCCL_RING 512
#define NCCL_GROUP_STREAMS 16

typedef struct nccl_pending {
  cudaEvent_t ev;
  char what[160];      /* "all_gather (unit layers.3, seq 57)" */
  int64_t deadline_ms; /* steady clock */
  int64_t timeout_ms;
  int active;
} nccl_pending;

struct fsdpc_comm {
  const fsdpc_host_api *host; /* of the host that created it (ABI 1.1) */
  ncclComm_t nc;
  int rank, size, device;
  int64_t timeout_ms;    /* default per-op timeout */
  cudaStream_t internal; /* for barrier */
  float *scratch;        /* (1) device float for barrier */

  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv;
  pthread_t thread;
  int thread_on, stop;
  nccl_pending ring[NCCL_RING];
  int head, count;
  /* Why the comm is unusable ("" while healthy), and the status to report. */
  char broken[512];
  int32_t broken_status;
  int aborted; /* ncclCommAbort was called: never ncclCommDestroy */

  /* Between group_start and group_end: streams to record on at the end and
   * a name for the group. */
  int group_depth, group_n;
  cudaStream_t group_streams[NCCL_GROUP_STREAMS];
  int group_n_streams;
  char group_what[160];
  int64_t group_timeout_ms;
};

/* nccl_plugin.c */
/* The host that created c, or NULL for no comm. */
static inline const fsdpc_host_api *nccl_host(const fsdpc_comm *c) {
  return c ? c->host : NULL;
}
/* Tells host h (NULL: nobody) one line, whatever NCCL put in the text. */
int32_t nccl_fail(const fsdpc_host_api *h, int32_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int64_t nccl_now_ms(void);
/* "all_gather (unit layers.3, seq 57)" */
void nccl_describe(char *buf, size_t cap, const char *op, const fsdpc_op_info *info);
int64_t nccl_op_timeout(const fsdpc_comm *c, const fsdpc_op_info *info);
/* OK, or the broken status with the reason as the error message. */
int32_t nccl_check_usable(fsdpc_comm *c, const char *what);
/* Maps a failed NCCL call to a status and one line naming the op. */
int32_t nccl_result_fail(fsdpc_comm *c, ncclResult_t r, const char *what);
/* After an op was enqueued on stream: tracks it for the watchdog. Inside a
 * group, remembers the stream until group_end. */
int32_t nccl_track(fsdpc_comm *c, cudaStream_t stream, const char *what, int64_t timeout_ms);
/* Every host call into NCCL runs between these, under c->mu, so that an
 * abort (another thread) never runs beside it: lock returns 0, unlocked,
 * when the comm was aborted (nccl_check_usable says why). The comm is
 * non-blocking, so no call holds the lock for long. */
int nccl_lock_usable(fsdpc_comm *c);
void nccl_unlock(fsdpc_comm *c);
/* A non-blocking call returned r: ncclInProgress waits for nc's state
 * (ncclCommGetAsyncError) to settle, up to timeout_ms (then the comm is
 * aborted); an error becomes a status naming what. */
int32_t nccl_settle(fsdpc_comm *c, ncclComm_t nc, ncclResult_t r, const char *what,
                    int64_t timeout_ms);
/* One watchdog pass: reaps completed ops, aborts on a timeout or an async
 * NCCL error. Returns the comm's state like nccl_check_usable. */
int32_t nccl_watch_once(fsdpc_comm *c);

/* nccl_ops.c */
int32_t nccl_all_gather(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                        void *stream, const fsdpc_op_info *info);
int32_t nccl_reduce_scatter(fsdpc_comm *c, const void *send, void *recv, uint64_t count,
                            int32_t dtype, int32_t op, void *stream, const fsdpc_op_info *info);
int32_t nccl_all_reduce(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                        int32_t op, void *stream, const fsdpc_op_info *info);
int32_t nccl_broadcast(fsdpc_comm *c, void *buf, uint64_t count, int32_t dtype, int32_t root,
                       void *stream, const fsdpc_op_info *info);
int32_t nccl_barrier(fsdpc_comm *c, const fsdpc_op_info *info);
int32_t nccl_group_start(fsdpc_comm *c);
int32_t nccl_group_end(fsdpc_comm *c);

#endif
