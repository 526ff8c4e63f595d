/* Checked collective calls: each names its op, unit and sequence number so
 * that a timeout or failure says where the job stood. */
#include "fsdp/dist.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/watchdog.h"
#include "plugin/call.h"
#include "util/fault.h"

void fsdpc__dist_single(fsdpc_dist *d) {
  memset(d, 0, sizeof *d);
  d->world_size = d->shard_size = d->replica_size = 1;
  d->device_index = -1;
}

void fsdpc__dist_set_device(fsdpc_dist *d, const fsdpc_ops *ops, int device_index) {
  d->ops = ops;
  d->device_index = device_index;
}

void fsdpc__dist_set_watch(fsdpc_dist *d, struct fsdpc_watchdog *w) {
  d->watch = w;
}

void fsdpc__dist_reset_counters(fsdpc_dist *d) {
  d->bytes_all_gather = d->bytes_reduce_scatter = d->bytes_all_reduce = 0;
  d->comm_s = 0.0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fsdpc_comm *group_comm(fsdpc_dist *d, fsdpc_group g, int *size) {
  switch (g) {
  case FSDPC_GROUP_WORLD:
    *size = d->world_size;
    return d->world;
  case FSDPC_GROUP_SHARD:
    *size = d->shard_size;
    return d->shard;
  case FSDPC_GROUP_REPLICA:
    *size = d->replica_size;
    return d->replica;
  }
  *size = 1;
  return NULL;
}

static fsdpc_op_info op_info(fsdpc_dist *d, const char *op, const char *unit) {
  return (fsdpc_op_info){.struct_size = sizeof(fsdpc_op_info), .op = op, .unit = unit,
                         .seq = d->seq++, .timeout_ms = 0};
}

/* FSDPC_FAULT=hang=N: this rank never reaches the plugin for collective N,
 * as a rank stuck elsewhere would; it waits there until the job fails. */
static fsdpc_status stall(fsdpc_dist *d, const fsdpc_op_info *oi, fsdpc_err *err) {
  while (d->watch && !fsdpc__watchdog_failed(d->watch, NULL, 0, NULL))
    usleep(20000);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "rank %d: %s (unit %s, seq %llu) was stalled by fault injection (%s)", d->rank,
                     oi->op, oi->unit ? oi->unit : "-", (unsigned long long)oi->seq,
                     FSDPC_FAULT_ENV);
}

/* Before every collective call: the watchdog learns which collective this
 * rank is in (it ends one that outlives collectives.timeout_s, naming who
 * never reached it), and a job that failed already is not entered. The
 * watchdog's deadline is a second later than the plugin's own timeout, so
 * that a plugin that has one reports first. */
static fsdpc_status enter(fsdpc_dist *d, const fsdpc_op_info *oi, fsdpc_err *err) {
  if (fsdpc__fault_hang(oi->seq))
    return stall(d, oi, err);
  if (!d->watch)
    return FSDPC_OK;
  char what[256];
  snprintf(what, sizeof what, "%s (unit %s, seq %llu)", oi->op, oi->unit ? oi->unit : "-",
           (unsigned long long)oi->seq);
  return fsdpc__watchdog_op_begin(d->watch, what, oi->seq,
                                  (d->timeout_ms > 0 ? d->timeout_ms : 300000) + 1000, err);
}

static fsdpc_status check(fsdpc_dist *d, int32_t st, const char *op, const char *unit,
                          uint64_t seq, fsdpc_err *err) {
  fsdpc__watchdog_op_end(d->watch, st);
  if (st == FSDPC_OK) return FSDPC_OK;
  fsdpc__plugin_fail(d->coll, st, err);
  return fsdpc__err_prefix(err, "rank %d: %s (unit %s, seq %llu)", d->rank, op,
                           unit ? unit : "-", (unsigned long long)seq);
}

fsdpc_status fsdpc__dist_init(fsdpc_dist *d, const fsdpc_component *coll, const fsdpc_opts *opts,
                              const fsdpc_store_v1 *store, const char *prefix, int rank,
                              int world_size, int shard_size, int64_t timeout_ms,
                              fsdpc_err *err) {
  const fsdpc_ops *ops = d->ops;
  int device_index = d->device_index;
  struct fsdpc_watchdog *watch = d->watch;
  fsdpc__dist_single(d);
  d->ops = ops;
  d->device_index = device_index;
  d->watch = watch;
  d->rank = rank;
  d->world_size = world_size;
  d->timeout_ms = timeout_ms;
  if (shard_size < 1 || world_size % shard_size != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "the shard group size (%d) must divide the world size (%d); set "
                       "fsdp.hybrid_shard_size to a divisor",
                       shard_size, world_size);
  d->shard_size = shard_size;
  d->replica_size = world_size / shard_size;
  d->shard_rank = rank % shard_size;
  d->replica_rank = rank / shard_size;
  if (world_size == 1) return FSDPC_OK;
  d->coll = coll;
  d->cv = coll->vtable;
  if (d->cv->memory & FSDPC_COMM_MEM_DEVICE) {
    if (!d->ops || d->ops->device == FSDPC_DEVICE_CPU)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "collectives '%s' moves device memory but this run computes on the "
                         "CPU; use collectives.impl: gloo (or auto)",
                         coll->desc->name);
    d->stream = d->ops->stream(d->ops->ctx);
    if (!(d->dscratch = d->ops->alloc(d->ops->ctx, FSDPC_MEM_COMM,
                                      FSDPC_DIST_SCALARS * sizeof(double))))
      return fsdpc__ops_oom(d->ops, err, "for collectives (device scratch)");
  }
  fsdpc_comm_init ci = {.struct_size = sizeof ci, .opts = opts, .store = store,
                        .store_prefix = prefix, .rank = rank, .world_size = world_size,
                        .device_index = d->device_index, .timeout_ms = timeout_ms};
  int32_t st = fsdpc__call_comm_init(coll, &ci, &d->world);
  if (st != FSDPC_OK) {
    fsdpc__plugin_fail(coll, st, err);
    return fsdpc__err_prefix(err, "rank %d: creating the world communicator", rank);
  }
  fsdpc__watchdog_add_comm(d->watch, d->cv, d->world);
  if (shard_size == world_size) {
    d->shard = d->world;
  } else if (shard_size > 1) {
    /* ranks [k*S, (k+1)*S) form shard group k */
    st = d->cv->split(d->world, rank / shard_size, rank, &d->shard);
    if (st != FSDPC_OK) return check(d, st, "split (shard group)", NULL, 0, err);
  }
  if (d->replica_size == world_size) {
    d->replica = d->world;
  } else if (d->replica_size > 1) {
    st = d->cv->split(d->world, rank % shard_size, rank, &d->replica);
    if (st != FSDPC_OK) return check(d, st, "split (replica group)", NULL, 0, err);
  }
  if (d->replica != d->world)
    fsdpc__watchdog_add_comm(d->watch, d->cv, d->replica);
  if (d->shard != d->world)
    fsdpc__watchdog_add_comm(d->watch, d->cv, d->shard);
  return FSDPC_OK;
}

void fsdpc__dist_destroy(fsdpc_dist *d) {
  if (!d || !d->cv) return;
  /* after a failure the watchdog aborts them first (where the plugin can) */
  fsdpc__watchdog_remove_comms(d->watch);
  if (d->replica && d->replica != d->world) d->cv->destroy(d->replica);
  if (d->shard && d->shard != d->world) d->cv->destroy(d->shard);
  if (d->world) d->cv->destroy(d->world);
  d->world = d->shard = d->replica = NULL;
  if (d->dscratch) d->ops->free(d->ops->ctx, FSDPC_MEM_COMM, d->dscratch,
                                FSDPC_DIST_SCALARS * sizeof(double));
  d->dscratch = NULL;
}

fsdpc_status fsdpc__dist_all_gather(fsdpc_dist *d, fsdpc_group g, const void *send, void *recv,
                                    uint64_t count, int32_t dtype, const char *unit,
                                    fsdpc_err *err) {
  return fsdpc__dist_all_gather_on(d, g, send, recv, count, dtype, NULL, unit, err);
}

fsdpc_status fsdpc__dist_all_gather_on(fsdpc_dist *d, fsdpc_group g, const void *send, void *recv,
                                       uint64_t count, int32_t dtype, void *stream,
                                       const char *unit, fsdpc_err *err) {
  int size;
  size_t es = dtype == FSDPC_DTYPE_BF16 ? 2 : 4;
  fsdpc_comm *c = group_comm(d, g, &size);
  if (size == 1 || !c) {
    if (d->ops && d->ops->device != FSDPC_DEVICE_CPU)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "all_gather over one rank on a device");
    if (recv != send) memcpy(recv, send, count * es);
    return FSDPC_OK;
  }
  fsdpc_op_info oi = op_info(d, "all_gather", unit);
  FSDPC_TRY(enter(d, &oi, err));
  d->bytes_all_gather += count * es * (uint64_t)(size - 1);
  double t0 = now_s();
  int32_t r = d->cv->all_gather(c, send, recv, count, dtype, stream ? stream : d->stream, &oi);
  d->comm_s += now_s() - t0;
  return check(d, r, "all_gather", unit, oi.seq, err);
}

fsdpc_status fsdpc__dist_reduce_scatter_dt(fsdpc_dist *d, fsdpc_group g, const void *send,
                                           void *recv, uint64_t count, int32_t dtype,
                                           const char *unit, fsdpc_err *err) {
  return fsdpc__dist_reduce_scatter_on(d, g, send, recv, count, dtype, NULL, unit, err);
}

fsdpc_status fsdpc__dist_reduce_scatter_on(fsdpc_dist *d, fsdpc_group g, const void *send,
                                           void *recv, uint64_t count, int32_t dtype,
                                           void *stream, const char *unit, fsdpc_err *err) {
  int size;
  size_t es = dtype == FSDPC_DTYPE_BF16 ? 2 : 4;
  fsdpc_comm *c = group_comm(d, g, &size);
  if (size == 1 || !c) {
    if (recv != send) memcpy(recv, send, count * es);
    return FSDPC_OK;
  }
  fsdpc_op_info oi = op_info(d, "reduce_scatter", unit);
  FSDPC_TRY(enter(d, &oi, err));
  d->bytes_reduce_scatter += count * es * (uint64_t)(size - 1);
  double t0 = now_s();
  int32_t r = d->cv->reduce_scatter(c, send, recv, count, dtype, FSDPC_REDUCE_SUM,
                                    stream ? stream : d->stream, &oi);
  d->comm_s += now_s() - t0;
  return check(d, r, "reduce_scatter", unit, oi.seq, err);
}

fsdpc_status fsdpc__dist_reduce_scatter(fsdpc_dist *d, fsdpc_group g, const float *send,
                                        float *recv, uint64_t count, const char *unit,
                                        fsdpc_err *err) {
  return fsdpc__dist_reduce_scatter_dt(d, g, send, recv, count, FSDPC_DTYPE_F32, unit, err);
}

fsdpc_status fsdpc__dist_all_reduce_dt(fsdpc_dist *d, fsdpc_group g, void *buf, uint64_t count,
                                       int32_t dtype, const char *what, fsdpc_err *err) {
  int size;
  size_t es = dtype == FSDPC_DTYPE_BF16 ? 2 : 4;
  fsdpc_comm *c = group_comm(d, g, &size);
  if (size == 1 || !c) return FSDPC_OK;
  fsdpc_op_info oi = op_info(d, "all_reduce", what);
  FSDPC_TRY(enter(d, &oi, err));
  d->bytes_all_reduce += count * es * 2 * (uint64_t)(size - 1) / (uint64_t)size;
  double t0 = now_s();
  int32_t r = d->cv->all_reduce(c, buf, buf, count, dtype, FSDPC_REDUCE_SUM, d->stream, &oi);
  d->comm_s += now_s() - t0;
  return check(d, r, "all_reduce", what, oi.seq, err);
}

fsdpc_status fsdpc__dist_all_reduce_f32(fsdpc_dist *d, fsdpc_group g, float *buf,
                                        uint64_t count, const char *what, fsdpc_err *err) {
  return fsdpc__dist_all_reduce_dt(d, g, buf, count, FSDPC_DTYPE_F32, what, err);
}

fsdpc_status fsdpc__dist_all_reduce_f64(fsdpc_dist *d, fsdpc_group g, double *v, int n,
                                        const char *what, fsdpc_err *err) {
  int size;
  fsdpc_comm *c = group_comm(d, g, &size);
  if (size == 1 || !c) return FSDPC_OK;
  fsdpc_op_info oi = op_info(d, "all_reduce", what);
  FSDPC_TRY(enter(d, &oi, err));
  double t0 = now_s();
  int32_t r = FSDPC_OK;
  fsdpc_status st = FSDPC_OK;
  if (d->dscratch) { /* device collectives: stage the scalars */
    /* the download waits for the collective: the watchdog still sees it */
    if (n > FSDPC_DIST_SCALARS)
      st = fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "too many scalars to all-reduce (%d)", n);
    else
      st = d->ops->upload(d->ops->ctx, d->dscratch, v, (size_t)n * sizeof(double), err);
    if (st == FSDPC_OK)
      r = d->cv->all_reduce(c, d->dscratch, d->dscratch, (uint64_t)n, FSDPC_DTYPE_F64,
                            FSDPC_REDUCE_SUM, d->stream, &oi);
    if (st == FSDPC_OK && r == FSDPC_OK)
      st = d->ops->download(d->ops->ctx, v, d->dscratch, (size_t)n * sizeof(double), err);
  } else {
    r = d->cv->all_reduce(c, v, v, (uint64_t)n, FSDPC_DTYPE_F64, FSDPC_REDUCE_SUM, NULL, &oi);
  }
  d->comm_s += now_s() - t0;
  if (st != FSDPC_OK) {
    fsdpc__watchdog_op_end(d->watch, st);
    return st;
  }
  return check(d, r, "all_reduce", what, oi.seq, err);
}

fsdpc_status fsdpc__dist_barrier(fsdpc_dist *d, const char *what, fsdpc_err *err) {
  if (d->world_size == 1 || !d->world) return FSDPC_OK;
  fsdpc_op_info oi = op_info(d, "barrier", what);
  FSDPC_TRY(enter(d, &oi, err));
  double t0 = now_s();
  int32_t r = d->cv->barrier(d->world, &oi);
  d->comm_s += now_s() - t0;
  return check(d, r, "barrier", what, oi.seq, err);
}

fsdpc_status fsdpc__dist_broadcast(fsdpc_dist *d, fsdpc_group g, float *buf, uint64_t count,
                                   int root, const char *what, fsdpc_err *err) {
  int size;
  fsdpc_comm *c = group_comm(d, g, &size);
  if (size == 1 || !c) return FSDPC_OK;
  fsdpc_op_info oi = op_info(d, "broadcast", what);
  FSDPC_TRY(enter(d, &oi, err));
  double t0 = now_s();
  int32_t r = d->cv->broadcast(c, buf, count, FSDPC_DTYPE_F32, root, d->stream, &oi);
  d->comm_s += now_s() - t0;
  return check(d, r, "broadcast", what, oi.seq, err);
}
