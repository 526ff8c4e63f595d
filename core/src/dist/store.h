/* The rendezvous key-value store: a small TCP server hosted by rank 0 and a
 * client in every rank (rank 0 included).
 *
 * It carries what ranks must agree on before collectives exist (Gloo's
 * addresses, the NCCL unique id, split colors) and the job-wide abort flag.
 * Keys are NUL-terminated strings; values are bytes. Counters made by ADD
 * are stored as decimal text, so GET of a counter returns e.g. "3".
 *
 * Every call has a deadline: a dead or unreachable server gives an error
 * naming host:port, never a hang. After an I/O error the client is broken
 * (the byte stream may be out of step) and every later call fails at once.
 * The wire protocol is described in docs/dist.md and store_wire.h. */
#ifndef FSDPC_DIST_STORE_H
#define FSDPC_DIST_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "fsdpc/plugin.h"
#include "util/err.h"

typedef struct fsdpc_store_server fsdpc_store_server;
struct fsdpc_store_limits;
typedef struct fsdpc_store fsdpc_store;

/* Starts the server on its own thread. bind_addr is a numeric address or
 * host name ("0.0.0.0" or NULL = every interface); port 0 picks a free
 * port. *bound_port (may be NULL) receives the port actually bound. token
 * (1..64 bytes) is the job token every request must carry; lim NULL means
 * the defaults (store_table.h). */
fsdpc_status fsdpc__store_server_start(const char *bind_addr, int port, const char *token,
                                       const struct fsdpc_store_limits *lim,
                                       fsdpc_store_server **out, int *bound_port, fsdpc_err *err);
/* Stops the thread and closes every connection (clients then see the server
 * as gone). NULL is a no-op. */
void fsdpc__store_server_stop(fsdpc_store_server *srv);
/* Open client connections (as of the server's last poll round). */
int fsdpc__store_server_clients(fsdpc_store_server *srv);

/* Connects to host:port, retrying until timeout_ms passes, because rank 0's
 * server may start after the other ranks. timeout_ms is also the default
 * deadline of every later request. Every request carries token (the job
 * token, 1..64 bytes). The client is thread-safe: one request is in flight
 * at a time under a mutex. */
fsdpc_status fsdpc__store_connect(const char *host, int port, const char *token,
                                  int64_t timeout_ms, fsdpc_store **out, fsdpc_err *err);
void fsdpc__store_close(fsdpc_store *s);

fsdpc_status fsdpc__store_set(fsdpc_store *s, const char *key, const void *value, size_t len,
                              fsdpc_err *err);
/* Waits until key exists or timeout_ms passes (FSDPC_TIMEOUT); timeout_ms <= 0
 * means the store's default. On OK *len (may be NULL) is the value's full
 * size and min(len, cap) bytes are copied into buf. */
fsdpc_status fsdpc__store_get(fsdpc_store *s, const char *key, void *buf, size_t cap, size_t *len,
                              int64_t timeout_ms, fsdpc_err *err);
/* Atomically adds delta to the counter key (created as 0); *result (may be
 * NULL) receives the new value. */
fsdpc_status fsdpc__store_add(fsdpc_store *s, const char *key, int64_t delta, int64_t *result,
                              fsdpc_err *err);
/* FSDPC_OK if key exists now, FSDPC_TIMEOUT if not (err is then untouched);
 * other statuses are real errors. */
fsdpc_status fsdpc__store_check(fsdpc_store *s, const char *key, fsdpc_err *err);
/* Round trip to the server: OK while it is alive. */
fsdpc_status fsdpc__store_ping(fsdpc_store *s, fsdpc_err *err);

/* Reusable barrier over `world` processes named `name`: the k-th arrival
 * belongs to generation (k-1)/world, whose last arrival releases it. On
 * timeout the message says how many ranks arrived. */
fsdpc_status fsdpc__store_barrier(fsdpc_store *s, const char *name, int world, int64_t timeout_ms,
                                  fsdpc_err *err);

/* Fills the plugin ABI view of s (valid while s is open). The callbacks
 * return status codes only; the detail of the last failure is logged. */
void fsdpc__store_as_v1(fsdpc_store *s, fsdpc_store_v1 *out);

/* "host:port" of the server, for messages. */
const char *fsdpc__store_addr(const fsdpc_store *s);

#endif
