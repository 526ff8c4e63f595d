/* The job watchdog (see watchdog.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "dist/watchdog.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/heartbeat.h"
#include "dist/job.h"
#include "dist/save_notify.h"
#include "dist/store.h"
#include "dist/store_wire.h"
#include "util/log.h"

#define TICK_MS 200
#define DEAD_POLL_MS 500
#define MAX_COMMS 8

typedef struct registered {
  const fsdpc_collectives_v1 *cv;
  fsdpc_comm *c;
} registered;

struct fsdpc_watchdog {
  fsdpc_watchdog_opts o;
  char addr[256], token[FSDPC_STORE_MAX_TOKEN + 1];
  fsdpc_store *store;
  pthread_t thread;
  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv;
  int stop;
  /* the collective the main thread is inside */
  int op_on;
  char op_what[256];
  uint64_t op_seq;
  int64_t op_deadline_ms, op_timeout_ms;
  int64_t entered; /* seq + 1 of the last collective handed to the plugin */
  int op_failed;   /* the last collective call failed ... */
  uint64_t op_failed_seq;
  /* communicators to abort */
  registered comms[MAX_COMMS];
  int n_comms, aborting, aborted;
  /* the job's first failure */
  int failed, culprit, own;
  char first[1000];
  int64_t fail_ms;
  /* heartbeats: this rank's, and on rank 0 everyone's */
  int64_t beat, next_beat_ms, next_dead_ms, next_watch_ms;
  int64_t *seen_beat, *changed_ms;
  int left; /* this rank left the job normally: no more beats */
};

int fsdpc__watchdog_failed(fsdpc_watchdog *w, char *first, size_t cap, int *culprit) {
  if (!w)
    return 0;
  pthread_mutex_lock(&w->mu);
  int f = w->failed;
  if (f && first)
    snprintf(first, cap, "%s", w->first);
  if (culprit)
    *culprit = f ? w->culprit : -1;
  pthread_mutex_unlock(&w->mu);
  return f;
}

/* Records the job's first failure as this rank knows it (first wins). */
static void set_failed(fsdpc_watchdog *w, int culprit, int own, const char *msg) {
  pthread_mutex_lock(&w->mu);
  int first = !w->failed;
  if (first) {
    w->failed = 1;
    w->culprit = culprit;
    w->own = own;
    w->fail_ms = fsdpc__now_ms();
    snprintf(w->first, sizeof w->first, "%s", msg);
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  if (first) /* our launcher names it even when the store is gone */
    fsdpc__fail_notify(culprit, msg);
}

void fsdpc__watchdog_fail(fsdpc_watchdog *w, int culprit, const char *msg) {
  if (!w || fsdpc__watchdog_failed(w, NULL, 0, NULL))
    return;
  fsdpc_err e;
  int won = 0;
  char first[sizeof w->first];
  int who = culprit;
  if (fsdpc__dist_post_failure(w->store, culprit, msg, &won, &e) == FSDPC_OK && !won) {
    int found = 0; /* another rank was first: its failure is the job's */
    if (fsdpc__dist_read_failure(w->store, first, sizeof first, &who, &found, 2000, &e) ==
            FSDPC_OK &&
        found) {
      set_failed(w, who, 0, first);
      return;
    }
  }
  set_failed(w, culprit, 1, msg); /* first, or the store is gone: ours is all we know */
}

/* ---- the thread ---- */

static void put_beat(fsdpc_watchdog *w, int left) {
  pthread_mutex_lock(&w->mu);
  if (w->left && !left) {
    pthread_mutex_unlock(&w->mu);
    return;
  }
  w->left |= left;
  fsdpc_hb_record r = {.beat = ++w->beat, .entered = w->entered, .left = left, .present = 1};
  pthread_mutex_unlock(&w->mu);
  fsdpc_err e;
  if (fsdpc__heartbeat_put(w->store, w->o.rank, &r, &e) != FSDPC_OK && w->o.rank != 0 && !left) {
    char msg[sizeof w->first];
    fsdpc__store_lost_text(w->addr, w->o.port, w->o.nnodes, e.msg, msg, sizeof msg);
    set_failed(w, 0, 0, msg);
  }
}

static void poll_dead(fsdpc_watchdog *w) {
  char msg[sizeof w->first];
  int found = 0, culprit = -1;
  fsdpc_err e;
  if (fsdpc__dist_read_failure(w->store, msg, sizeof msg, &culprit, &found, 0, &e) == FSDPC_OK &&
      found)
    set_failed(w, culprit, 0, msg);
}

/* Between the two reads of a blame: keeps beating, and stops early when
 * the job's failure appears. */
static int blame_tick(void *arg) {
  fsdpc_watchdog *w = arg;
  int64_t now = fsdpc__now_ms();
  if (now >= w->next_beat_ms) {
    put_beat(w, 0);
    w->next_beat_ms = now + FSDPC_HB_PERIOD_MS;
  }
  if (now >= w->next_dead_ms) {
    poll_dead(w);
    w->next_dead_ms = now + DEAD_POLL_MS;
  }
  return fsdpc__watchdog_failed(w, NULL, 0, NULL);
}

/* The main thread's collective passed its timeout. */
static void op_timed_out(fsdpc_watchdog *w, const char *what, uint64_t seq, int64_t timeout_ms) {
  char blame[600] = "", msg[sizeof w->first];
  int culprit = -1;
  if (fsdpc__heartbeat_blame(w->store, w->o.world, w->o.rank, (int64_t)seq, w->o.local_world,
                             w->o.nnodes, blame_tick, w, blame, sizeof blame, &culprit) == 1)
    return; /* another failure came first */
  if (blame[0])
    snprintf(msg, sizeof msg, "%s (seen by rank %d: %s did not complete within %.1f s)", blame,
             w->o.rank, what, (double)timeout_ms / 1000.0);
  else
    snprintf(msg, sizeof msg,
             "rank %d: %s did not complete within %.1f s: a rank never reached it or is stuck "
             "in it",
             w->o.rank, what, (double)timeout_ms / 1000.0);
  fsdpc__watchdog_fail(w, culprit, msg);
}

/* Rank 0: every rank whose heartbeat stood still too long. */
static void watch_beats(fsdpc_watchdog *w, int64_t now) {
  int world = w->o.world, n = 0, *silent = calloc((size_t)world, sizeof *silent);
  if (!silent)
    return;
  int64_t worst = 0;
  for (int q = 0; q < world; q++) {
    fsdpc_hb_record r;
    fsdpc_err e;
    if (q == w->o.rank || fsdpc__heartbeat_get(w->store, q, &r, &e) != FSDPC_OK || !r.present ||
        r.left)
      continue;
    if (!w->changed_ms[q] || r.beat != w->seen_beat[q]) {
      w->seen_beat[q] = r.beat;
      w->changed_ms[q] = now;
    } else if (now - w->changed_ms[q] > 2 * FSDPC_HB_PERIOD_MS + TICK_MS) {
      silent[n++] = q; /* missed two beats at least */
      if (now - w->changed_ms[q] > worst)
        worst = now - w->changed_ms[q];
    }
  }
  /* One rank past the timeout fails the job; the others that missed two
   * beats by then are named with it (the rest of a lost node). */
  if (n && worst > w->o.heartbeat_timeout_ms) {
    char who[400], msg[sizeof w->first];
    fsdpc__ranks_text(silent, n, w->o.local_world, w->o.nnodes, who, sizeof who);
    snprintf(msg, sizeof msg,
             "%s stopped answering: no heartbeat for %.1f s (dist.heartbeat_timeout_s=%.1f; the "
             "process is stopped, hung or frozen, or its node is lost or cut off)",
             who, (double)worst / 1000.0, (double)w->o.heartbeat_timeout_ms / 1000.0);
    fsdpc__watchdog_fail(w, silent[0], msg);
  }
  free(silent);
}

static void *abort_comms(void *arg) {
  fsdpc_watchdog *w = arg;
  pthread_mutex_lock(&w->mu);
  registered cs[MAX_COMMS];
  int n = w->n_comms;
  memcpy(cs, w->comms, sizeof cs);
  char why[sizeof w->first + 16];
  snprintf(why, sizeof why, "job failed: %s", w->first);
  pthread_mutex_unlock(&w->mu);
  for (int i = 0; i < n; i++)
    if (FSDPC_HAS_FIELD(cs[i].cv, fsdpc_collectives_v1, abort) && cs[i].cv->abort)
      cs[i].cv->abort(cs[i].c, why);
  pthread_mutex_lock(&w->mu);
  w->aborting = 0;
  w->aborted = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* 1 when this rank is the one the failure blames (or it found the failure
 * and nobody is blamed), else 3. Under w->mu. */
static int code_of(const fsdpc_watchdog *w) {
  int mine = w->culprit == w->o.rank || (w->culprit < 0 && w->own);
  return mine ? FSDPC_EXIT_FAILED : FSDPC_EXIT_PEER;
}

/* The process did not end in time after the failure: say so, and end it. */
static void last_resort(fsdpc_watchdog *w) {
  pthread_mutex_lock(&w->mu);
  char where[400];
  if (w->op_on)
    snprintf(where, sizeof where,
             "still inside %.250s, which its collectives plugin could not abort", w->op_what);
  else
    snprintf(where, sizeof where, "its shutdown did not finish");
  char line[1600];
  snprintf(line, sizeof line,
           "job failed: %s (rank %d ended by its watchdog %.1f s after the "
           "failure: %s)",
           w->first, w->o.rank, (double)(fsdpc__now_ms() - w->fail_ms) / 1000.0, where);
  int code = code_of(w);
  pthread_mutex_unlock(&w->mu);
  FSDPC_LOGE("%s", line);
  _exit(code);
}

static void tick(fsdpc_watchdog *w) {
  int64_t now = fsdpc__now_ms();
  pthread_mutex_lock(&w->mu);
  int failed = w->failed, start_abort = 0, expired = 0;
  int timed_out = !failed && w->op_on && now > w->op_deadline_ms;
  char what[sizeof w->op_what];
  uint64_t seq = w->op_seq;
  int64_t timeout = w->op_timeout_ms;
  snprintf(what, sizeof what, "%s", w->op_what);
  if (failed) {
    start_abort = !w->aborting && !w->aborted && w->n_comms > 0;
    w->aborting |= start_abort;
    expired = now >= w->fail_ms + w->o.exit_grace_ms;
  }
  pthread_mutex_unlock(&w->mu);
  if (failed) {
    pthread_t t;
    if (start_abort && pthread_create(&t, NULL, abort_comms, w) == 0)
      pthread_detach(t);
    else if (start_abort)
      abort_comms(w);
    if (expired)
      last_resort(w);
    return;
  }
  blame_tick(w);
  if (timed_out)
    op_timed_out(w, what, seq, timeout);
  if (w->o.rank == 0 && now >= w->next_watch_ms) {
    watch_beats(w, now);
    w->next_watch_ms = now + FSDPC_HB_PERIOD_MS;
  }
}

/* Waits on w->cv (w->mu held) for at most ms milliseconds. */
static void wait_ms(fsdpc_watchdog *w, long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

static void *run(void *arg) {
  fsdpc_watchdog *w = arg;
  pthread_setname_np(pthread_self(), "fsdpc-watchdog");
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    wait_ms(w, TICK_MS);
    if (w->stop)
      break;
    pthread_mutex_unlock(&w->mu);
    tick(w);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* ---- life cycle ---- */

/* Frees w (its thread is not running). */
static void destroy(fsdpc_watchdog *w) {
  fsdpc__store_close(w->store);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w->seen_beat);
  free(w->changed_ms);
  free(w);
}

fsdpc_status fsdpc__watchdog_start(const fsdpc_watchdog_opts *o, fsdpc_watchdog **out,
                                   fsdpc_err *err) {
  *out = NULL;
  fsdpc_watchdog *w = calloc(1, sizeof *w);
  if (!w || !(w->seen_beat = calloc((size_t)o->world, sizeof *w->seen_beat)) ||
      !(w->changed_ms = calloc((size_t)o->world, sizeof *w->changed_ms))) {
    if (w) {
      free(w->seen_beat);
      free(w);
    }
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  w->o = *o;
  snprintf(w->addr, sizeof w->addr, "%s", o->addr);
  snprintf(w->token, sizeof w->token, "%s", o->token);
  w->o.addr = w->addr;
  w->o.token = w->token;
  w->culprit = -1;
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  /* Its own connection: a long GET on the main one must not stall it, and
   * its deadline is the heartbeat timeout, not the collectives timeout. */
  fsdpc_status st =
      fsdpc__store_connect(o->addr, o->port, o->token, o->heartbeat_timeout_ms, &w->store, err);
  if (st == FSDPC_OK) {
    put_beat(w, 0); /* present from the start */
    w->next_beat_ms = fsdpc__now_ms() + FSDPC_HB_PERIOD_MS;
    int rc = pthread_create(&w->thread, NULL, run, w);
    if (rc)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot start the watchdog thread: %s",
                       strerror(rc));
  }
  if (st != FSDPC_OK) {
    destroy(w);
    return st;
  }
  *out = w;
  return FSDPC_OK;
}

void fsdpc__watchdog_leave(fsdpc_watchdog *w) {
  if (w)
    put_beat(w, 1);
}

void fsdpc__watchdog_stop(fsdpc_watchdog *w) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  /* An abort still under way uses w: give it the grace, then leave it. */
  int64_t until = fsdpc__now_ms() + w->o.exit_grace_ms;
  pthread_mutex_lock(&w->mu);
  while (w->aborting && fsdpc__now_ms() < until)
    wait_ms(w, 50);
  int busy = w->aborting;
  pthread_mutex_unlock(&w->mu);
  if (busy)
    return; /* the process is ending; the aborter may still touch w */
  destroy(w);
}

/* ---- collectives ---- */

void fsdpc__watchdog_add_comm(fsdpc_watchdog *w, const fsdpc_collectives_v1 *cv, fsdpc_comm *c) {
  if (!w || !c)
    return;
  pthread_mutex_lock(&w->mu);
  if (w->n_comms < MAX_COMMS)
    w->comms[w->n_comms++] = (registered){cv, c};
  pthread_mutex_unlock(&w->mu);
}

int fsdpc__watchdog_remove_comms(fsdpc_watchdog *w) {
  if (!w)
    return 0;
  pthread_mutex_lock(&w->mu);
  while (w->aborting)
    pthread_cond_wait(&w->cv, &w->mu);
  int failed = w->failed, todo = failed && !w->aborted && w->n_comms > 0;
  w->aborting = todo;
  pthread_mutex_unlock(&w->mu);
  if (todo)
    abort_comms(w); /* no blocking destroy after a failure */
  pthread_mutex_lock(&w->mu);
  w->n_comms = 0;
  pthread_mutex_unlock(&w->mu);
  return failed;
}

fsdpc_status fsdpc__watchdog_op_begin(fsdpc_watchdog *w, const char *what, uint64_t seq,
                                      int64_t timeout_ms, fsdpc_err *err) {
  if (!w)
    return FSDPC_OK;
  pthread_mutex_lock(&w->mu);
  if (w->failed) {
    fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "job failed: %s", w->first);
    pthread_mutex_unlock(&w->mu);
    return FSDPC_SYSTEM_ERROR;
  }
  w->op_on = 1;
  snprintf(w->op_what, sizeof w->op_what, "%s", what);
  w->op_seq = seq;
  w->op_timeout_ms = timeout_ms;
  w->op_deadline_ms = fsdpc__now_ms() + timeout_ms;
  w->entered = (int64_t)seq + 1;
  pthread_mutex_unlock(&w->mu);
  return FSDPC_OK;
}

void fsdpc__watchdog_op_end(fsdpc_watchdog *w, fsdpc_status st) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->op_on = 0;
  if (st != FSDPC_OK) {
    w->op_failed = 1;
    w->op_failed_seq = w->op_seq;
  }
  pthread_mutex_unlock(&w->mu);
}

int fsdpc__watchdog_op_failed(fsdpc_watchdog *w, uint64_t *seq) {
  if (!w)
    return 0;
  pthread_mutex_lock(&w->mu);
  int f = w->op_failed;
  *seq = w->op_failed_seq;
  pthread_mutex_unlock(&w->mu);
  return f;
}

fsdpc_store *fsdpc__watchdog_store(fsdpc_watchdog *w) {
  return w ? w->store : NULL;
}

int fsdpc__watchdog_exit_code(fsdpc_watchdog *w) {
  if (!w)
    return 0;
  pthread_mutex_lock(&w->mu);
  int code = w->failed ? code_of(w) : 0;
  pthread_mutex_unlock(&w->mu);
  return code;
}
