/* The store server's state without its sockets: the key-value table, the
 * connections' buffers, the job token and the limits, and the request
 * handler. store_server.c moves bytes between sockets and these buffers;
 * the fuzz target (tests/fuzz/fuzz_store.c) feeds bytes to them directly.
 *
 * Trust: every request carries the job token (store_wire.h). A request with
 * another token, or a malformed one, gets one ERROR reply and the
 * connection is then dropped; nothing in it is acted on. Keys, values, the
 * table's total size and the number of connections are bounded. */
#ifndef FSDPC_DIST_STORE_TABLE_H
#define FSDPC_DIST_STORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "dist/store_wire.h"

#define FSDPC_STORE_NBUCKETS 1024

/* Defaults; fsdpc__store_limits_default fills them. */
typedef struct fsdpc_store_limits {
  size_t max_value;   /* bytes of one value */
  size_t max_total;   /* bytes of all keys and values together */
  int max_conns;      /* open connections (also at most half of RLIMIT_NOFILE); more evict
                         the oldest unauthenticated one */
  int64_t anon_ms;    /* a connection that sent no valid request is closed after this */
  size_t max_pending; /* bytes of replies queued for one connection */
} fsdpc_store_limits;

void fsdpc__store_limits_default(fsdpc_store_limits *l);

typedef struct fsdpc__store_entry {
  char *key;
  uint8_t *val;
  size_t len;
  struct fsdpc__store_entry *next;
} fsdpc__store_entry;

typedef struct fsdpc__store_conn {
  int fd;
  uint8_t *in; /* bytes received, not yet parsed */
  size_t in_len, in_cap;
  uint8_t *out; /* bytes to send; out_off already sent */
  size_t out_len, out_off, out_cap;
  char *wait_key; /* parked GET, or NULL */
  int64_t wait_deadline;
  int64_t opened_ms; /* when accepted */
  int authed;        /* sent at least one request with the right token */
  int closing;       /* send what is queued, then drop (after a refusal) */
} fsdpc__store_conn;

typedef struct fsdpc__store_table {
  fsdpc__store_entry *buckets[FSDPC_STORE_NBUCKETS];
  size_t bytes; /* keys + values held */
  fsdpc__store_conn *conns;
  int n_conns, cap_conns;
  char token[FSDPC_STORE_MAX_TOKEN + 1];
  size_t token_len;
  fsdpc_store_limits lim;
  uint64_t refused; /* requests refused for a wrong or missing token */
} fsdpc__store_table;

/* token: 1..FSDPC_STORE_MAX_TOKEN bytes. Returns -1 if it is not. */
int fsdpc__store_table_init(fsdpc__store_table *t, const char *token,
                            const fsdpc_store_limits *lim);
/* Frees every entry and connection buffer (closes no descriptor). */
void fsdpc__store_table_free(fsdpc__store_table *t);

/* The most a connection that has not shown the job token may buffer: its
 * first frame's length, operation, token length and token. */
#define FSDPC_STORE_HEAD_MAX (6u + FSDPC_STORE_MAX_TOKEN)

/* How many more bytes c may buffer now: FSDPC_STORE_HEAD_MAX in all until
 * its token was checked (no frame body is buffered before that), then no
 * limit here (the frame limit still applies). */
size_t fsdpc__store_conn_room(const fsdpc__store_conn *c);

/* Checks the token of an unauthenticated connection's first frame as soon
 * as it is in (refusing it before its body arrives), then parses whole
 * frames from c->in while no GET is parked; replies go to c->out. Returns
 * -1 when the connection must be dropped now. */
int fsdpc__store_process_input(fsdpc__store_table *t, fsdpc__store_conn *c, int64_t now_ms);
/* Frees one connection's buffers. */
void fsdpc__store_conn_free(fsdpc__store_conn *c);

#endif
