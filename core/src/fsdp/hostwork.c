/* The host worker (see hostwork.h): a growable ring of tasks under one
 * mutex, one condition variable for "work arrived or stop" and one for
 * "a task finished". */
#include "fsdp/hostwork.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct task {
  int kind, unit;
} task;

struct fsdpc_hostwork {
  fsdpc_hostwork_fn fn;
  void *arg;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  task *q; /* (cap) ring */
  size_t cap, head, count;
  uint64_t pushed, finished; /* sequence numbers */
  int stop;
  fsdpc_status failed; /* first failure, FSDPC_OK while none */
  fsdpc_err err;
};

static void *worker_main(void *p) {
  fsdpc_hostwork *w = p;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->count && !w->stop)
      pthread_cond_wait(&w->work, &w->mu);
    if (!w->count)
      break;
    task t = w->q[w->head];
    w->head = (w->head + 1) % w->cap;
    w->count--;
    int skip = w->failed != FSDPC_OK;
    pthread_mutex_unlock(&w->mu);
    fsdpc_err err = {0};
    fsdpc_status st = skip ? FSDPC_OK : w->fn(w->arg, t.kind, t.unit, &err);
    pthread_mutex_lock(&w->mu);
    if (st != FSDPC_OK && w->failed == FSDPC_OK) {
      w->failed = st;
      w->err = err;
    }
    w->finished++;
    pthread_cond_broadcast(&w->done);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

fsdpc_status fsdpc__hostwork_create(fsdpc_hostwork_fn fn, void *arg, fsdpc_hostwork **out,
                                    fsdpc_err *err) {
  fsdpc_hostwork *w = calloc(1, sizeof *w);
  if (!w || !(w->q = malloc(64 * sizeof *w->q))) {
    free(w);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the host worker");
  }
  w->cap = 64;
  w->fn = fn;
  w->arg = arg;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->work, NULL);
  pthread_cond_init(&w->done, NULL);
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->done);
    free(w->q);
    free(w);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "cannot start the host worker thread of the offloaded optimizer");
  }
  *out = w;
  return FSDPC_OK;
}

void fsdpc__hostwork_destroy(fsdpc_hostwork *w) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->work);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->work);
  pthread_cond_destroy(&w->done);
  free(w->q);
  free(w);
}

fsdpc_status fsdpc__hostwork_push(fsdpc_hostwork *w, int kind, int unit, uint64_t *seq,
                                  fsdpc_err *err) {
  pthread_mutex_lock(&w->mu);
  if (w->count == w->cap) {
    task *q = malloc(2 * w->cap * sizeof *q);
    if (!q) {
      pthread_mutex_unlock(&w->mu);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory queueing host work");
    }
    for (size_t i = 0; i < w->count; i++)
      q[i] = w->q[(w->head + i) % w->cap];
    free(w->q);
    w->q = q;
    w->head = 0;
    w->cap *= 2;
  }
  w->q[(w->head + w->count) % w->cap] = (task){kind, unit};
  w->count++;
  uint64_t s = ++w->pushed;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
  if (seq)
    *seq = s;
  return FSDPC_OK;
}

fsdpc_status fsdpc__hostwork_wait(fsdpc_hostwork *w, uint64_t seq, fsdpc_err *err) {
  pthread_mutex_lock(&w->mu);
  while (w->finished < seq && w->failed == FSDPC_OK)
    pthread_cond_wait(&w->done, &w->mu);
  fsdpc_status st = w->failed;
  if (st != FSDPC_OK && err)
    *err = w->err;
  pthread_mutex_unlock(&w->mu);
  return st;
}

int fsdpc__hostwork_done(fsdpc_hostwork *w, uint64_t seq) {
  pthread_mutex_lock(&w->mu);
  int done = w->finished >= seq || w->failed != FSDPC_OK;
  pthread_mutex_unlock(&w->mu);
  return done;
}

fsdpc_status fsdpc__hostwork_drain(fsdpc_hostwork *w, fsdpc_err *err) {
  pthread_mutex_lock(&w->mu);
  uint64_t s = w->pushed;
  pthread_mutex_unlock(&w->mu);
  return fsdpc__hostwork_wait(w, s, err);
}
