/* Per-rank heartbeats in the store (see heartbeat.h). */
#include "dist/heartbeat.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PERIOD_MS 1000

struct fsdpc_heartbeat {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  fsdpc_store *store;
  char key[64];
};

static void *beat(void *arg) {
  fsdpc_heartbeat *hb = arg;
  pthread_mutex_lock(&hb->mu);
  while (!hb->stop) {
    pthread_mutex_unlock(&hb->mu);
    fsdpc_err e;
    int64_t v;
    fsdpc__store_add(hb->store, hb->key, 1, &v, &e); /* best effort */
    pthread_mutex_lock(&hb->mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += PERIOD_MS / 1000;
    while (!hb->stop && pthread_cond_timedwait(&hb->cv, &hb->mu, &ts) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&hb->mu);
  return NULL;
}

fsdpc_heartbeat *fsdpc__heartbeat_start(fsdpc_store *store, int rank) {
  fsdpc_heartbeat *hb = calloc(1, sizeof *hb);
  if (!hb)
    return NULL;
  hb->store = store;
  snprintf(hb->key, sizeof hb->key, "fsdpc/hb/%d", rank);
  pthread_mutex_init(&hb->mu, NULL);
  pthread_cond_init(&hb->cv, NULL);
  if (pthread_create(&hb->thread, NULL, beat, hb) != 0) {
    pthread_mutex_destroy(&hb->mu);
    pthread_cond_destroy(&hb->cv);
    free(hb);
    return NULL;
  }
  return hb;
}

void fsdpc__heartbeat_stop(fsdpc_heartbeat *hb) {
  if (!hb)
    return;
  pthread_mutex_lock(&hb->mu);
  hb->stop = 1;
  pthread_cond_signal(&hb->cv);
  pthread_mutex_unlock(&hb->mu);
  pthread_join(hb->thread, NULL);
  pthread_mutex_destroy(&hb->mu);
  pthread_cond_destroy(&hb->cv);
  free(hb);
}

int fsdpc__heartbeat_silent(fsdpc_store *store, int world, int self, char *out, size_t cap) {
  out[0] = '\0';
  if (world < 2 || world > 1 << 20)
    return 0;
  int64_t *a = calloc((size_t)world, sizeof *a);
  if (!a)
    return 0;
  int rc = -1;
  fsdpc_err e;
  for (int r = 0; r < world; r++) {
    char k[64];
    snprintf(k, sizeof k, "fsdpc/hb/%d", r);
    if (r != self && fsdpc__store_add(store, k, 0, &a[r], &e) != FSDPC_OK)
      goto out;
  }
  struct timespec ts = {2 * PERIOD_MS / 1000, 200 * 1000 * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  size_t used = 0;
  int n = 0;
  for (int r = 0; r < world && used < cap; r++) {
    char k[64];
    int64_t b = 0;
    snprintf(k, sizeof k, "fsdpc/hb/%d", r);
    if (r == self)
      continue;
    if (fsdpc__store_add(store, k, 0, &b, &e) != FSDPC_OK) {
      out[0] = '\0';
      goto out;
    }
    if (b == a[r]) {
      if (n < 16)
        used += (size_t)snprintf(out + used, cap - used, "%s%d", n ? ", " : "", r);
      n++;
    }
  }
  if (n > 16 && used < cap)
    snprintf(out + used, cap - used, " and %d more", n - 16);
  rc = 0;
out:
  free(a);
  return rc;
}
