/* The communicators one rank uses, and the checked collective calls the
 * engine makes through the collectives plugin. At world size 1 there is no
 * plugin and no communicator; every call below is then a local no-op (or a
 * copy), so a single process never needs a collectives plugin. */
#ifndef FSDPC_FSDP_DIST_H
#define FSDPC_FSDP_DIST_H

#include "ops/ops.h"
#include "plugin/registry.h"
#include "util/err.h"

typedef struct fsdpc_dist {
  const fsdpc_component *coll;     /* NULL at world size 1 */
  const fsdpc_collectives_v1 *cv;
  fsdpc_comm *world, *shard, *replica; /* shard/replica may equal world or be NULL (size 1) */
  int rank, world_size;
  int shard_rank, shard_size;
  int replica_rank, replica_size;
  uint64_t seq;                    /* collective sequence number (all comms) */
  int64_t timeout_ms;
  /* bytes this rank sent into collectives since the counters were reset */
  uint64_t bytes_all_gather, bytes_reduce_scatter, bytes_all_reduce;
  /* Seconds spent inside collective calls since the counters were reset.
   * Host collectives are synchronous, so on CPU this is the time compute
   * waited on communication (exposed communication time). */
  double comm_s;
  /* Device collectives (NCCL): the stream they are ordered on, and a small
   * device buffer to stage host scalars through. NULL for host memory. */
  void *stream;
  const fsdpc_ops *ops;
  double *dscratch;
  int device_index;           /* CUDA ordinal handed to the plugin, or -1 */
  /* The job's watchdog (dist/watchdog.h), NULL at world 1: told which
   * collective this rank is in, and given the communicators to abort when
   * the job fails. */
  struct fsdpc_watchdog *watch;
} fsdpc_dist;

/* Single-process dist (world 1). */
void fsdpc__dist_single(fsdpc_dist *d);

/* Builds the world communicator and the shard/replica sub-communicators
 * (shard group = consecutive blocks of shard_size ranks, replica group =
 * ranks with the same shard rank). */
fsdpc_status fsdpc__dist_init(fsdpc_dist *d, const fsdpc_component *coll, const fsdpc_opts *opts,
                              const fsdpc_store_v1 *store, const char *prefix, int rank,
                              int world_size, int shard_size, int64_t timeout_ms,
                              fsdpc_err *err);
/* For a collectives plugin on device memory: the ops table of the device
 * (its stream orders the collectives; host scalars are staged through it)
 * and the CUDA ordinal. Call before fsdpc__dist_init. */
void fsdpc__dist_set_device(fsdpc_dist *d, const fsdpc_ops *ops, int device_index);
/* The job's watchdog; call before fsdpc__dist_init. */
void fsdpc__dist_set_watch(fsdpc_dist *d, struct fsdpc_watchdog *w);
/* Destroys the communicators; after a failure of the job they are aborted
 * first (no destroy that waits on a peer). */
void fsdpc__dist_destroy(fsdpc_dist *d);
/* Zeroes the byte counters and comm_s (the trainer does it at each step). */
void fsdpc__dist_reset_counters(fsdpc_dist *d);

enum { FSDPC_DIST_SCALARS = 16 }; /* most doubles one all_reduce_f64 takes */

typedef enum { FSDPC_GROUP_WORLD, FSDPC_GROUP_SHARD, FSDPC_GROUP_REPLICA } fsdpc_group;

/* recv (size * count elements of dtype) = concatenation of every group
 * rank's send (count). In place when send == recv + rank * count. */
fsdpc_status fsdpc__dist_all_gather(fsdpc_dist *d, fsdpc_group g, const void *send, void *recv,
                                    uint64_t count, int32_t dtype, const char *unit,
                                    fsdpc_err *err);
/* The same on stream (a device stream; NULL = the dist's own), so that a
 * caller ordering collectives on a second stream passes it per call. */
fsdpc_status fsdpc__dist_all_gather_on(fsdpc_dist *d, fsdpc_group g, const void *send, void *recv,
                                       uint64_t count, int32_t dtype, void *stream,
                                       const char *unit, fsdpc_err *err);
/* recv (count) = sum over group ranks of send[rank*count ..]. */
fsdpc_status fsdpc__dist_reduce_scatter(fsdpc_dist *d, fsdpc_group g, const float *send,
                                        float *recv, uint64_t count, const char *unit,
                                        fsdpc_err *err);
/* The same in dtype (FSDPC_DTYPE_F32 or FSDPC_DTYPE_BF16: reduce_dtype bf16);
 * send/recv as above, count elements of dtype. */
fsdpc_status fsdpc__dist_reduce_scatter_dt(fsdpc_dist *d, fsdpc_group g, const void *send,
                                           void *recv, uint64_t count, int32_t dtype,
                                           const char *unit, fsdpc_err *err);
fsdpc_status fsdpc__dist_reduce_scatter_on(fsdpc_dist *d, fsdpc_group g, const void *send,
                                           void *recv, uint64_t count, int32_t dtype,
                                           void *stream, const char *unit, fsdpc_err *err);
/* In-place sum over the group. */
fsdpc_status fsdpc__dist_all_reduce_dt(fsdpc_dist *d, fsdpc_group g, void *buf, uint64_t count,
                                       int32_t dtype, const char *what, fsdpc_err *err);
fsdpc_status fsdpc__dist_all_reduce_f32(fsdpc_dist *d, fsdpc_group g, float *buf,
                                        uint64_t count, const char *what, fsdpc_err *err);
/* In-place sum of a few doubles over the group (loss sums, token counts,
 * squared norms), sent as FSDPC_DTYPE_F64. */
fsdpc_status fsdpc__dist_all_reduce_f64(fsdpc_dist *d, fsdpc_group g, double *v, int n,
                                        const char *what, fsdpc_err *err);
fsdpc_status fsdpc__dist_barrier(fsdpc_dist *d, const char *what, fsdpc_err *err);
fsdpc_status fsdpc__dist_broadcast(fsdpc_dist *d, fsdpc_group g, float *buf, uint64_t count,
                                   int root, const char *what, fsdpc_err *err);

#endif
