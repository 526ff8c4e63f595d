/* Heartbeat records in the store (see heartbeat.h). */
#include "dist/heartbeat.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void key_of(int rank, char *k, size_t cap) {
  snprintf(k, cap, "fsdpc/hb/%d", rank);
}

fsdpc_status fsdpc__heartbeat_put(fsdpc_store *s, int rank, const fsdpc_hb_record *r,
                                  fsdpc_err *err) {
  char k[64], v[96];
  key_of(rank, k, sizeof k);
  int n = snprintf(v, sizeof v, "%" PRId64 " %" PRId64 " %d", r->beat, r->entered, r->left);
  return fsdpc__store_set(s, k, v, (size_t)n, err);
}

fsdpc_status fsdpc__heartbeat_get(fsdpc_store *s, int rank, fsdpc_hb_record *r, fsdpc_err *err) {
  char k[64], v[96];
  size_t n = 0;
  key_of(rank, k, sizeof k);
  memset(r, 0, sizeof *r);
  fsdpc_status st = fsdpc__store_get(s, k, v, sizeof v - 1, &n, 1, err);
  if (st == FSDPC_TIMEOUT)
    return FSDPC_OK; /* no record yet */
  FSDPC_TRY(st);
  v[n < sizeof v ? n : sizeof v - 1] = '\0';
  r->present = sscanf(v, "%" SCNd64 " %" SCNd64 " %d", &r->beat, &r->entered, &r->left) == 3;
  return FSDPC_OK;
}

void fsdpc__ranks_text(const int *ranks, int n, int local_world, int nnodes, char *out,
                       size_t cap) {
  size_t u = (size_t)snprintf(out, cap, "rank%s ", n > 1 ? "s" : "");
  for (int i = 0; i < n && i < 16 && u < cap; i++)
    u += (size_t)snprintf(out + u, cap - u, "%s%d", i ? ", " : "", ranks[i]);
  if (n > 16 && u < cap)
    u += (size_t)snprintf(out + u, cap - u, " and %d more", n - 16);
  if (nnodes <= 1 || local_world <= 0 || u >= cap)
    return;
  /* ranks come in order, so their nodes do too */
  int last = -1, k = 0;
  char nodes[160] = "";
  size_t v = 0;
  for (int i = 0; i < n && v < sizeof nodes; i++) {
    int node = ranks[i] / local_world;
    if (node != last && node < nnodes)
      v += (size_t)snprintf(nodes + v, sizeof nodes - v, "%s%d", k++ ? ", " : "", node);
    last = node;
  }
  if (k)
    snprintf(out + u, cap - u, " (node%s %s of %d)", k > 1 ? "s" : "", nodes, nnodes);
}

static int read_all(fsdpc_store *s, int world, fsdpc_hb_record *r) {
  fsdpc_err e;
  for (int q = 0; q < world; q++)
    if (fsdpc__heartbeat_get(s, q, &r[q], &e) != FSDPC_OK)
      return -1;
  return 0;
}

int fsdpc__heartbeat_blame(fsdpc_store *s, int world, int self, int64_t seq, int local_world,
                           int nnodes, int (*stop)(void *), void *arg, char *out, size_t cap,
                           int *culprit) {
  out[0] = '\0';
  *culprit = -1;
  if (world < 2 || world > 1 << 20)
    return 0;
  fsdpc_hb_record *a = calloc((size_t)world, sizeof *a), *b = calloc((size_t)world, sizeof *b);
  int *late = calloc((size_t)world, sizeof *late), *silent = calloc((size_t)world, sizeof *silent);
  int rc = -1;
  if (!a || !b || !late || !silent || read_all(s, world, a))
    goto out;
  /* Two heartbeat periods and a bit: a live rank beats at least once. */
  for (int i = 0; i < (2 * FSDPC_HB_PERIOD_MS + 200) / 100; i++) {
    if (stop && stop(arg)) {
      rc = 1;
      goto out;
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  if (read_all(s, world, b))
    goto out;
  int nl = 0, ns = 0;
  int64_t min_entered = INT64_MAX;
  for (int q = 0; q < world; q++) {
    if (q == self || !b[q].present || b[q].left)
      continue;
    if (seq >= 0 && b[q].entered <= seq) {
      late[nl++] = q;
      if (b[q].entered < min_entered)
        min_entered = b[q].entered;
    }
    if (a[q].present && b[q].beat == a[q].beat)
      silent[ns++] = q;
  }
  size_t u = 0;
  char who[400];
  if (ns && u < cap) {
    fsdpc__ranks_text(silent, ns, local_world, nnodes, who, sizeof who);
    u += (size_t)snprintf(out + u, cap - u,
                          "%s stopped answering (heartbeat standing still: stopped, hung or gone)",
                          who);
    *culprit = silent[0];
  }
  if (nl && u < cap) {
    fsdpc__ranks_text(late, nl, local_world, nnodes, who, sizeof who);
    u += (size_t)snprintf(out + u, cap - u, "%s%s never reached collective seq %" PRId64,
                          u ? "; " : "", who, seq);
    if (min_entered > 0 && u < cap)
      snprintf(out + u, cap - u, " (last heard of at seq %" PRId64 ")", min_entered - 1);
    if (*culprit < 0)
      *culprit = late[0];
  }
  rc = 0;
out:
  free(a);
  free(b);
  free(late);
  free(silent);
  return rc;
}

void fsdpc__store_lost_text(const char *addr, int port, int nnodes, const char *why, char *out,
                            size_t cap) {
  char node[48] = "";
  if (nnodes > 1)
    snprintf(node, sizeof node, ", node 0 of %d", nnodes);
  snprintf(out, cap, "the store at %s:%d (rank 0%s) does not answer (%.300s): rank 0 died%s", addr,
           port, node, why, nnodes > 1 ? ", or node 0 is lost, frozen or cut off" : " or hangs");
}
