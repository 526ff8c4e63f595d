/* The nccl collectives plugin: descriptor, errors, the communicator life
 * cycle (unique id through the fsdpc store, ncclCommSplit for sub-groups)
 * and the watchdog.
 *
 * Communicators are non-blocking (ncclConfig_t.blocking = 0): no host call
 * into NCCL waits for a peer. A call that returns ncclInProgress (init,
 * split, the first collective that connects, group end, finalize) is
 * waited for by polling ncclCommGetAsyncError under the op's deadline
 * (nccl_settle), so a peer that never comes costs a timeout, not a hang,
 * and ncclCommAbort from another thread (the host's watchdog through
 * abort(), or ours) is safe: every host call into NCCL holds c->mu, and so
 * does the abort.
 *
 * Watchdog: every enqueued collective gets a CUDA event recorded after it on
 * its stream and a deadline (the op's timeout). A thread per communicator
 * wakes every WATCH_PERIOD_MS, reaps completed events and polls
 * ncclCommGetAsyncError; when an op passes its deadline, or NCCL reports an
 * asynchronous error, it calls ncclCommAbort (which also releases any host
 * thread blocked on the stream) and marks the communicator broken with one
 * line naming the op, its unit and sequence number. poll_error runs the same
 * pass synchronously and reports that line; every later call fails with it.
 * Destroy after a clean run finalizes (bounded); after an abort it frees
 * only what is local. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/host_call.h"
#include "nccl_comm.h"

#define WATCH_PERIOD_MS 50
#define DEFAULT_TIMEOUT_MS 300000
#define FINALIZE_MAX_MS 60000

int32_t nccl_fail(const fsdpc_host_api *h, int32_t st, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++) /* one line, whatever NCCL put in its text */
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  return fsdpc_pl_fail(h, st, "%s", msg);
}

int64_t nccl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void nccl_describe(char *buf, size_t cap, const char *op, const fsdpc_op_info *info) {
  if (info && FSDPC_HAS_FIELD(info, fsdpc_op_info, seq)) {
    if (info->unit)
      snprintf(buf, cap, "%s (unit %s, seq %llu)", op, info->unit, (unsigned long long)info->seq);
    else
      snprintf(buf, cap, "%s (seq %llu)", op, (unsigned long long)info->seq);
  } else {
    snprintf(buf, cap, "%s", op);
  }
}

int64_t nccl_op_timeout(const fsdpc_comm *c, const fsdpc_op_info *info) {
  if (info && FSDPC_HAS_FIELD(info, fsdpc_op_info, timeout_ms) && info->timeout_ms > 0)
    return info->timeout_ms;
  return c->timeout_ms;
}

int32_t nccl_check_usable(fsdpc_comm *c, const char *what) {
  pthread_mutex_lock(&c->mu);
  int32_t st = c->broken[0] ? c->broken_status : FSDPC_OK;
  char why[512];
  snprintf(why, sizeof why, "%s", c->broken);
  pthread_mutex_unlock(&c->mu);
  if (st == FSDPC_OK)
    return st;
  return nccl_fail(c->host, st, "nccl: %s: communicator unusable after an earlier failure: %s",
                   what, why);
}

int32_t nccl_result_fail(fsdpc_comm *c, ncclResult_t r, const char *what) {
  if (c != NULL) { /* aborted by the watchdog while inside NCCL: report why */
    pthread_mutex_lock(&c->mu);
    const int broken = c->broken[0] != 0;
    pthread_mutex_unlock(&c->mu);
    if (broken)
      return nccl_check_usable(c, what);
  }
  const char *last = c && c->nc ? ncclGetLastError(c->nc) : NULL;
  int32_t st =
      r == ncclInvalidArgument || r == ncclInvalidUsage ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR;
  return nccl_fail(nccl_host(c), st, "nccl: %s failed on rank %d: %s%s%s", what, c ? c->rank : -1,
                   ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

/* ---- watchdog ---------------------------------------------------------- */

/* Marks the comm broken (first reason wins) and aborts it. Called without
 * the lock held; it takes it for the abort, so that no host call into NCCL
 * runs beside ncclCommAbort (which may take a while). */
static void break_and_abort(fsdpc_comm *c, int32_t status, const char *why) {
  pthread_mutex_lock(&c->mu);
  const int first = c->broken[0] == 0;
  if (first) {
    snprintf(c->broken, sizeof c->broken, "%s", why);
    c->broken_status = status;
  }
  if (!c->aborted && c->nc)
    (void)ncclCommAbort(c->nc);
  c->aborted = 1;
  pthread_mutex_unlock(&c->mu);
  if (first)
    if (FSDPC_HAS_FIELD(c->host, fsdpc_host_api, log) && c->host->log)
      c->host->log(c->host->host_ctx, FSDPC_LOG_ERROR, why);
}

int nccl_lock_usable(fsdpc_comm *c) {
  pthread_mutex_lock(&c->mu);
  if (!c->aborted)
    return 1;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

void nccl_unlock(fsdpc_comm *c) {
  pthread_mutex_unlock(&c->mu);
}

int32_t nccl_settle(fsdpc_comm *c, ncclComm_t nc, ncclResult_t r, const char *what,
                    int64_t timeout_ms) {
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_result_fail(c, r, what);
  const int64_t deadline = nccl_now_ms() + timeout_ms;
  while (r == ncclInProgress) {
    if (!nccl_lock_usable(c))
      return nccl_check_usable(c, what);
    ncclResult_t q = ncclCommGetAsyncError(nc, &r);
    nccl_unlock(c);
    if (q != ncclSuccess)
      r = q;
    if (r != ncclSuccess && r != ncclInProgress) {
      char why[512];
      snprintf(why, sizeof why, "nccl: %s failed on rank %d: %s; the communicator was aborted",
               what, c->rank, ncclGetErrorString(r));
      break_and_abort(c, FSDPC_SYSTEM_ERROR, why);
      return nccl_check_usable(c, what);
    }
    if (r == ncclInProgress && nccl_now_ms() > deadline) {
      char why[512];
      snprintf(why, sizeof why,
               "nccl: %s on rank %d did not complete within %.1f s (a peer never joined it or "
               "died); the communicator was aborted",
               what, c->rank, (double)timeout_ms / 1000.0);
      break_and_abort(c, FSDPC_TIMEOUT, why);
      return nccl_check_usable(c, what);
    }
    if (r == ncclInProgress) {
      struct timespec ts = {0, 200 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return FSDPC_OK;
}

int32_t nccl_watch_once(fsdpc_comm *c) {
  char why[512] = "";
  int32_t status = FSDPC_OK;
  const int64_t now = nccl_now_ms();
  pthread_mutex_lock(&c->mu);
  if (!c->aborted) {
    /* Reap from the oldest; report the oldest op past its deadline. */
    for (int k = 0; k < c->count; k++) {
      nccl_pending *p = &c->ring[(c->head + k) % NCCL_RING];
      if (!p->active)
        continue;
      cudaError_t e = cudaEventQuery(p->ev);
      if (e == cudaSuccess) {
        p->active = 0;
      } else if (e != cudaErrorNotReady) {
        snprintf(why, sizeof why, "nccl: %s on rank %d failed on the device: %s", p->what, c->rank,
                 cudaGetErrorString(e));
        status = FSDPC_SYSTEM_ERROR;
        break;
      } else if (now > p->deadline_ms) {
        snprintf(why, sizeof why,
                 "nccl: %s on rank %d did not complete within %.1f s: a rank never reached it "
                 "or died; the communicator was aborted",
                 p->what, c->rank, (double)p->timeout_ms / 1000.0);
        status = FSDPC_TIMEOUT;
        break;
      }
    }
    while (c->count > 0 && !c->ring[c->head].active) {
      c->head = (c->head + 1) % NCCL_RING;
      c->count--;
    }
    if (status == FSDPC_OK) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(c->nc, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        const char *last = ncclGetLastError(c->nc);
        snprintf(why, sizeof why,
                 "nccl: asynchronous error on rank %d: %s%s%s; the communicator was aborted",
                 c->rank, ncclGetErrorString(async), last && *last ? ": " : "", last ? last : "");
        status = FSDPC_SYSTEM_ERROR;
      }
    }
  }
  pthread_mutex_unlock(&c->mu);
  if (status != FSDPC_OK)
    break_and_abort(c, status, why);
  return nccl_check_usable(c, "poll_error");
}

static void *watchdog_main(void *arg) {
  fsdpc_comm *c = arg;
  (void)cudaSetDevice(c->device); /* cudaEventQuery needs the device's context */
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += WATCH_PERIOD_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    if (c->stop || c->aborted)
      continue;
    pthread_mutex_unlock(&c->mu);
    /* Failures are recorded in the comm; the caller sees them next call. */
    (void)nccl_watch_once(c);
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int32_t nccl_track(fsdpc_comm *c, cudaStream_t stream, const char *what, int64_t timeout_ms) {
  pthread_mutex_lock(&c->mu);
  if (c->group_depth > 0) {
    if (c->group_n++ == 0)
      snprintf(c->group_what, sizeof c->group_what, "%s", what);
    if (timeout_ms > c->group_timeout_ms)
      c->group_timeout_ms = timeout_ms;
    int seen = 0;
    for (int i = 0; i < c->group_n_streams; i++)
      seen |= c->group_streams[i] == stream;
    if (!seen && c->group_n_streams < NCCL_GROUP_STREAMS)
      c->group_streams[c->group_n_streams++] = stream;
    pthread_mutex_unlock(&c->mu);
    return FSDPC_OK;
  }
  /* Reap what is done; when the ring is full of pending ops, the oldest is
   * dropped from tracking (later ops on its stream complete after it). */
  while (c->count > 0 &&
         (!c->ring[c->head].active || cudaEventQuery(c->ring[c->head].ev) == cudaSuccess)) {
    c->ring[c->head].active = 0;
    c->head = (c->head + 1) % NCCL_RING;
    c->count--;
  }
  if (c->count == NCCL_RING) {
    c->ring[c->head].active = 0;
    c->head = (c->head + 1) % NCCL_RING;
    c->count--;
  }
  nccl_pending *p = &c->ring[(c->head + c->count) % NCCL_RING];
  cudaError_t e = cudaEventRecord(p->ev, stream);
  if (e == cudaSuccess) {
    snprintf(p->what, sizeof p->what, "%s", what);
    p->timeout_ms = timeout_ms;
    p->deadline_ms = nccl_now_ms() + timeout_ms;
    p->active = 1;
    c->count++;
  }
  pthread_mutex_unlock(&c->mu);
  if (e != cudaSuccess)
    return nccl_fail(c->host, FSDPC_SYSTEM_ERROR,
                     "nccl: %s: recording its completion event failed: %s", what,
                     cudaGetErrorString(e));
  return FSDPC_OK;
}

/* ---- life cycle --------------------------------------------------------- */

static void comm_free(fsdpc_comm *c) {
  if (c == NULL)
    return;
  if (c->thread_on) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
  }
  (void)cudaSetDevice(c->device);
  if (c->nc && !c->aborted) {
    /* A clean run: every rank finalizes together. A peer that is gone makes
     * the finalize time out, and the comm is aborted instead. */
    int64_t t = c->timeout_ms < FINALIZE_MAX_MS ? c->timeout_ms : FINALIZE_MAX_MS;
    if (nccl_settle(c, c->nc, ncclCommFinalize(c->nc), "finalize", t) == FSDPC_OK)
      (void)ncclCommDestroy(c->nc);
  }
  for (int i = 0; i < NCCL_RING; i++)
    if (c->ring[i].ev)
      (void)cudaEventDestroy(c->ring[i].ev);
  if (c->scratch)
    (void)cudaFree(c->scratch);
  if (c->internal)
    (void)cudaStreamDestroy(c->internal);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Allocates a comm for device dev with everything but the NCCL handle. */
static int32_t comm_alloc(const fsdpc_host_api *h, int device, int64_t timeout_ms,
                          fsdpc_comm **out) {
  *out = NULL;
  fsdpc_comm *c = calloc(1, sizeof *c);
  if (c == NULL)
    return nccl_fail(h, FSDPC_SYSTEM_ERROR, "nccl: out of host memory");
  c->host = h;
  c->device = device;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithFlags(&c->internal, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&c->scratch, sizeof(float));
  for (int i = 0; e == cudaSuccess && i < NCCL_RING; i++)
    e = cudaEventCreateWithFlags(&c->ring[i].ev, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    comm_free(c);
    return nccl_fail(h, FSDPC_SYSTEM_ERROR, "nccl: setting up device %d failed: %s", device,
                     cudaGetErrorString(e));
  }
  *out = c;
  return FSDPC_OK;
}

static int32_t start_watchdog(fsdpc_comm *c) {
  int r = pthread_create(&c->thread, NULL, watchdog_main, c);
  if (r != 0)
    return nccl_fail(c->host, FSDPC_SYSTEM_ERROR, "nccl: starting the watchdog thread failed: %s",
                     strerror(r));
  c->thread_on = 1;
  return FSDPC_OK;
}

static int32_t comm_init(const fsdpc_comm_init *in, fsdpc_comm **out) {
  const fsdpc_host_api *h = fsdpc_pl_comm_host(in);
  if (out == NULL)
    return nccl_fail(h, FSDPC_INVALID_USAGE, "nccl: init: out is NULL");
  *out = NULL;
  if (!in || !FSDPC_HAS_FIELD(in, fsdpc_comm_init, timeout_ms) || !in->store || !in->store->set ||
      !in->store->get)
    return nccl_fail(h, FSDPC_INVALID_USAGE,
                     "nccl: init needs a store (fsdpc_comm_init too short?)");
  if (in->world_size < 1 || in->rank < 0 || in->rank >= in->world_size)
    return nccl_fail(h, FSDPC_INVALID_USAGE, "nccl: init: rank %d is outside world size %d",
                     (int)in->rank, (int)in->world_size);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    (void)cudaGetLastError();
    return nccl_fail(h, FSDPC_SYSTEM_ERROR,
                     "nccl: rank %d sees no CUDA device; NCCL needs one GPU per rank (use the "
                     "gloo collectives on CPU)",
                     (int)in->rank);
  }
  if (in->device_index < 0 || in->device_index >= ndev)
    return nccl_fail(h, FSDPC_INVALID_USAGE,
                     "nccl: rank %d: device index %d is outside the %d visible GPUs; check "
                     "CUDA_VISIBLE_DEVICES and the local rank",
                     (int)in->rank, (int)in->device_index, ndev);
  fsdpc_comm *c = NULL;
  int32_t st = comm_alloc(h, in->device_index, in->timeout_ms, &c);
  if (st != FSDPC_OK)
    return st;
  c->rank = in->rank;
  c->size = in->world_size;

  /* Rank 0 makes the unique id; the others read it from the store. */
  char key[512];
  snprintf(key, sizeof key, "%snccl/unique_id", in->store_prefix ? in->store_prefix : "fsdpc/");
  ncclUniqueId id;
  if (in->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      st = nccl_result_fail(c, r, "init (ncclGetUniqueId)");
      goto fail;
    }
    st = in->store->set(in->store->ctx, key, &id, sizeof id);
    if (st != FSDPC_OK) {
      st = nccl_fail(h, st, "nccl: init: publishing the unique id under '%s' failed (store gone?)",
                     key);
      goto fail;
    }
  } else {
    uint64_t len = 0;
    st = in->store->get(in->store->ctx, key, &id, sizeof id, &len, c->timeout_ms);
    if (st == FSDPC_TIMEOUT) {
      st = nccl_fail(h, st,
                     "nccl: init: rank %d waited %.0f s for rank 0's unique id ('%s'): rank 0 "
                     "did not start or died",
                     (int)in->rank, (double)c->timeout_ms / 1000.0, key);
      goto fail;
    }
    if (st != FSDPC_OK || len != sizeof id) {
      st = nccl_fail(h, st != FSDPC_OK ? st : FSDPC_INTERNAL_ERROR,
                     "nccl: init: reading the unique id '%s' failed (%llu bytes)", key,
                     (unsigned long long)len);
      goto fail;
    }
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0; /* see the top of this file */
  ncclResult_t r = ncclCommInitRankConfig(&c->nc, c->size, id, c->rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress)
    c->nc = NULL;
  if ((st = nccl_settle(c, c->nc, r, "init (ncclCommInitRankConfig)", c->timeout_ms)) != FSDPC_OK)
    goto fail;
  if ((st = start_watchdog(c)) != FSDPC_OK)
    goto fail;
  *out = c;
  return FSDPC_OK;
fail:
  comm_free(c);
  return st;
}

static int32_t comm_split(fsdpc_comm *parent, int32_t color, int32_t key, fsdpc_comm **out) {
  const fsdpc_host_api *h = parent ? parent->host : NULL; /* children keep it */
  if (out == NULL)
    return nccl_fail(h, FSDPC_INVALID_USAGE, "nccl: split: out is NULL");
  *out = NULL;
  if (parent == NULL)
    return nccl_fail(h, FSDPC_INVALID_USAGE, "nccl: split of a NULL communicator");
  int32_t st = nccl_check_usable(parent, "split");
  if (st != FSDPC_OK)
    return st;
  fsdpc_comm *c = NULL;
  if ((st = comm_alloc(h, parent->device, parent->timeout_ms, &c)) != FSDPC_OK)
    return st;
  ncclComm_t child = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  if (!nccl_lock_usable(parent)) {
    comm_free(c);
    return nccl_check_usable(parent, "split");
  }
  ncclResult_t r =
      ncclCommSplit(parent->nc, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &cfg);
  nccl_unlock(parent);
  /* The split runs in the background: on the parent (no color) or the child.
   * The parent is polled even when the call returned ncclSuccess: in
   * non-blocking mode its state stays ncclInProgress until asked, and the
   * next call on it (HYBRID_SHARD's second split) would be refused with
   * "Attempt to use communicator before the previous operation returned
   * ncclSuccess" (seen on 4 x H200, NCCL 2.28). */
  st = nccl_settle(parent, parent->nc, r == ncclSuccess ? ncclInProgress : r,
                   "split (ncclCommSplit)", parent->timeout_ms);
  if (st == FSDPC_OK && child)
    st = nccl_settle(parent, child, ncclInProgress, "split (ncclCommSplit)", parent->timeout_ms);
  if (st != FSDPC_OK) {
    if (child)
      (void)ncclCommAbort(child);
    comm_free(c);
    return st;
  }
  if (child == NULL) { /* no color: this rank joins no sub-communicator */
    comm_free(c);
    return FSDPC_OK;
  }
  c->nc = child;
  int rank = -1, size = -1;
  (void)ncclCommUserRank(child, &rank);
  (void)ncclCommCount(child, &size);
  c->rank = rank;
  c->size = size;
  if ((st = start_watchdog(c)) != FSDPC_OK) {
    comm_free(c);
    return st;
  }
  *out = c;
  return FSDPC_OK;
}

static void comm_destroy(fsdpc_comm *c) {
  comm_free(c);
}
static int32_t comm_rank(const fsdpc_comm *c) {
  return c ? c->rank : -1;
}
static int32_t comm_size(const fsdpc_comm *c) {
  return c ? c->size : -1;
}

static int32_t comm_abort(fsdpc_comm *c, const char *reason) {
  if (c == NULL)
    return nccl_fail(NULL, FSDPC_INVALID_USAGE, "nccl: abort of a NULL communicator");
  char why[512];
  snprintf(why, sizeof why, "nccl: aborted on rank %d: %s", c->rank,
           reason ? reason : "(no reason given)");
  break_and_abort(c, FSDPC_SYSTEM_ERROR, why);
  return FSDPC_OK;
}

static int32_t comm_poll_error(fsdpc_comm *c) {
  if (c == NULL)
    return nccl_fail(NULL, FSDPC_INVALID_USAGE, "nccl: poll_error on a NULL communicator");
  return nccl_watch_once(c);
}

static int32_t supports(const fsdpc_situation *s) {
  if (s && FSDPC_HAS_FIELD(s, fsdpc_situation, device) && s->device != FSDPC_DEVICE_CUDA)
    return nccl_fail(fsdpc_pl_sit_host(s), FSDPC_UNSUPPORTED,
                     "nccl: works on device memory only (device is not CUDA); use gloo on CPU");
  return FSDPC_OK;
}

/* ---- descriptor --------------------------------------------------------- */

static const fsdpc_collectives_v1 g_vtable = {
    /* .struct_size    = */ sizeof(fsdpc_collectives_v1),
    /* .memory         = */ FSDPC_COMM_MEM_DEVICE,
    /* .supports       = */ supports,
    /* .init           = */ comm_init,
    /* .split          = */ comm_split,
    /* .destroy        = */ comm_destroy,
    /* .rank           = */ comm_rank,
    /* .size           = */ comm_size,
    /* .all_gather     = */ nccl_all_gather,
    /* .reduce_scatter = */ nccl_reduce_scatter,
    /* .all_reduce     = */ nccl_all_reduce,
    /* .broadcast      = */ nccl_broadcast,
    /* .barrier        = */ nccl_barrier,
    /* .group_start    = */ nccl_group_start,
    /* .group_end      = */ nccl_group_end,
    /* .abort          = */ comm_abort,
    /* .poll_error     = */ comm_poll_error,
};

static const fsdpc_component_desc g_component = {
    /* .struct_size    = */ sizeof(fsdpc_component_desc),
    /* .kind           = */ FSDPC_KIND_COLLECTIVES,
    /* .name           = */ "nccl",
    /* .version        = */ "1.0.0",
    /* .iface_version  = */ 1,
    /* .default_score  = */ 20,
    /* .description    = */ "GPU collectives over NCCL (one GPU per rank)",
    /* .capabilities   = */
    "device memory, stream-ordered; fp32, bf16, fp16, f64 reductions; any dtype gather and "
    "broadcast; ncclCommSplit sub-groups; group calls; watchdog with abort on timeout",
    /* .options        = */ NULL,
    /* .n_options      = */ 0,
    /* .vtable         = */ &g_vtable,
};

static const fsdpc_component_desc *const g_components[] = {&g_component};

static const fsdpc_plugin_desc g_plugin = {
    /* .struct_size   = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major     = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor     = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name          = */ "collectives-nccl",
    /* .components    = */ g_components,
    /* .n_components  = */ 1,
};

FSDPC_PLUGIN_DEFINE(g_plugin, 1)
