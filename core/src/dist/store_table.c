/* The store's table and request handler (see store_table.h). */
#include "dist/store_table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fsdpc__store_limits_default(fsdpc_store_limits *l) {
  l->max_value = FSDPC_STORE_MAX_VALUE;
  l->max_total = (size_t)64 << 20;
  l->max_conns = 1 << 16; /* and at most half the descriptors (store_server.c) */
  l->anon_ms = 10000;
  l->max_pending = (size_t)16 << 20;
}

int fsdpc__store_table_init(fsdpc__store_table *t, const char *token,
                            const fsdpc_store_limits *lim) {
  memset(t, 0, sizeof *t);
  size_t n = token ? strlen(token) : 0;
  if (n == 0 || n > FSDPC_STORE_MAX_TOKEN)
    return -1;
  memcpy(t->token, token, n);
  t->token_len = n;
  if (lim)
    t->lim = *lim;
  else
    fsdpc__store_limits_default(&t->lim);
  if (t->lim.max_value > FSDPC_STORE_MAX_VALUE)
    t->lim.max_value = FSDPC_STORE_MAX_VALUE;
  return 0;
}

void fsdpc__store_conn_free(fsdpc__store_conn *c) {
  free(c->in);
  free(c->out);
  free(c->wait_key);
  c->in = c->out = NULL;
  c->wait_key = NULL;
}

void fsdpc__store_table_free(fsdpc__store_table *t) {
  for (int i = 0; i < t->n_conns; i++)
    fsdpc__store_conn_free(&t->conns[i]);
  free(t->conns);
  for (int b = 0; b < FSDPC_STORE_NBUCKETS; b++) {
    for (fsdpc__store_entry *e = t->buckets[b], *next; e; e = next) {
      next = e->next;
      free(e->key);
      free(e->val);
      free(e);
    }
  }
  memset(t, 0, sizeof *t);
}

static uint32_t hash_key(const char *k) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *k; k++)
    h = (h ^ (uint8_t)*k) * 16777619u;
  return h;
}

static fsdpc__store_entry *find(fsdpc__store_table *t, const char *key) {
  for (fsdpc__store_entry *e = t->buckets[hash_key(key) % FSDPC_STORE_NBUCKETS]; e; e = e->next)
    if (strcmp(e->key, key) == 0)
      return e;
  return NULL;
}

/* Sets key to a copy of val. NULL with *full set when the table would pass
 * its size limit, NULL alone when out of memory. */
static fsdpc__store_entry *put(fsdpc__store_table *t, const char *key, const uint8_t *val,
                               size_t len, int *full) {
  fsdpc__store_entry *e = find(t, key);
  size_t klen = strlen(key) + 1;
  size_t after = t->bytes + len - (e ? e->len : 0) + (e ? 0 : klen);
  *full = 0;
  if (after > t->lim.max_total) {
    *full = 1;
    return NULL;
  }
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy)
    return NULL;
  if (len)
    memcpy(copy, val, len);
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) {
      free(e);
      free(copy);
      return NULL;
    }
    uint32_t b = hash_key(key) % FSDPC_STORE_NBUCKETS;
    e->next = t->buckets[b];
    t->buckets[b] = e;
  } else {
    free(e->val);
  }
  e->val = copy;
  e->len = len;
  t->bytes = after;
  return e;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need) {
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 256;
  while (n < need)
    n *= 2;
  uint8_t *p = realloc(*buf, n);
  if (!p)
    return -1;
  *buf = p;
  *cap = n;
  return 0;
}

/* Queues one response frame: status byte then a (may be empty). A client
 * that does not read its replies is dropped once max_pending is queued. */
static int reply(fsdpc__store_table *t, fsdpc__store_conn *c, uint8_t status, const void *a,
                 size_t alen) {
  size_t body = 1 + alen;
  if (c->out_len - c->out_off + 4 + body > t->lim.max_pending)
    return -1;
  if (reserve(&c->out, &c->out_cap, c->out_len + 4 + body))
    return -1;
  uint8_t *p = c->out + c->out_len;
  fsdpc__put_u32(p, (uint32_t)body);
  p[4] = status;
  if (alen)
    memcpy(p + 5, a, alen);
  c->out_len += 4 + body;
  return 0;
}

static int reply_error(fsdpc__store_table *t, fsdpc__store_conn *c, const char *msg) {
  return reply(t, c, FSDPC_STORE_REPLY_ERROR, msg, strlen(msg));
}

/* Refuses a request: one ERROR line, then the connection is closed once it
 * is sent. Nothing of the request is acted on. */
static int refuse(fsdpc__store_table *t, fsdpc__store_conn *c, const char *msg) {
  c->closing = 1;
  return reply_error(t, c, msg);
}

/* Wakes parked GETs waiting for e->key. */
static void serve_waiters(fsdpc__store_table *t, const fsdpc__store_entry *e) {
  for (int i = 0; i < t->n_conns; i++) {
    fsdpc__store_conn *c = &t->conns[i];
    if (c->wait_key && strcmp(c->wait_key, e->key) == 0) {
      free(c->wait_key);
      c->wait_key = NULL;
      if (reply(t, c, FSDPC_STORE_REPLY_OK, e->val, e->len))
        c->closing = 1;
    }
  }
}

#define TOKEN_REFUSED                                                                              \
  "request refused: its job token is not this job's (another job, or a client that is not part "   \
  "of this job, is using this address and port; the nodes of one job need the same "               \
  "FSDPC_JOB_TOKEN)"

/* Constant-time comparison: the reply time says nothing about the token. */
static int token_ok(const fsdpc__store_table *t, const uint8_t *tok, size_t n) {
  if (n != t->token_len)
    return 0;
  uint8_t d = 0;
  for (size_t i = 0; i < n; i++)
    d |= (uint8_t)(tok[i] ^ (uint8_t)t->token[i]);
  return d == 0;
}

/* Handles one complete request body. Returns -1 to drop the connection. */
static int handle(fsdpc__store_table *t, fsdpc__store_conn *c, const uint8_t *body, uint32_t n,
                  int64_t now) {
  if (n < 2)
    return refuse(t, c, "malformed request (too short)");
  uint8_t op = body[0];
  size_t tlen = body[1];
  if (2 + tlen + 4 > n)
    return refuse(t, c, "malformed request (too short)");
  if (!token_ok(t, body + 2, tlen)) {
    t->refused++;
    return refuse(t, c, TOKEN_REFUSED);
  }
  c->authed = 1;
  const uint8_t *p = body + 2 + tlen;
  size_t rest = n - 2 - tlen;
  uint32_t klen = fsdpc__get_u32(p);
  if (klen > FSDPC_STORE_MAX_KEY || 4 + (size_t)klen > rest)
    return refuse(t, c, "malformed request (bad key length)");
  char key[FSDPC_STORE_MAX_KEY + 1];
  memcpy(key, p + 4, klen);
  key[klen] = '\0';
  if (strlen(key) != klen)
    return refuse(t, c, "malformed request (NUL byte in the key)");
  const uint8_t *pay = p + 4 + klen;
  size_t plen = rest - 4 - klen;
  int full = 0;
  switch (op) {
  case FSDPC_STORE_OP_PING:
    return reply(t, c, FSDPC_STORE_REPLY_OK, NULL, 0);
  case FSDPC_STORE_OP_SET: {
    if (plen > t->lim.max_value) {
      char msg[160];
      snprintf(msg, sizeof msg, "SET refused: a value of %zu bytes is over the limit of %zu bytes",
               plen, t->lim.max_value);
      return reply_error(t, c, msg);
    }
    fsdpc__store_entry *e = put(t, key, pay, plen, &full);
    if (!e)
      return reply_error(t, c,
                         full ? "SET refused: the store holds its maximum total size"
                              : "store server out of memory");
    serve_waiters(t, e);
    return reply(t, c, FSDPC_STORE_REPLY_OK, NULL, 0);
  }
  case FSDPC_STORE_OP_CHECK:
    return reply(t, c, find(t, key) ? FSDPC_STORE_REPLY_OK : FSDPC_STORE_REPLY_NOT_FOUND, NULL, 0);
  case FSDPC_STORE_OP_GET: {
    if (plen != 8)
      return refuse(t, c, "malformed GET (no timeout)");
    fsdpc__store_entry *e = find(t, key);
    if (e)
      return reply(t, c, FSDPC_STORE_REPLY_OK, e->val, e->len);
    int64_t w = fsdpc__get_i64(pay);
    if (w <= 0)
      return reply(t, c, FSDPC_STORE_REPLY_NOT_FOUND, NULL, 0);
    if (w > (int64_t)24 * 3600 * 1000)
      w = (int64_t)24 * 3600 * 1000; /* no overflow of the deadline */
    if (!(c->wait_key = strdup(key)))
      return reply_error(t, c, "store server out of memory");
    c->wait_deadline = now + w;
    return 0;
  }
  case FSDPC_STORE_OP_ADD: {
    if (plen != 8)
      return refuse(t, c, "malformed ADD (no delta)");
    int64_t v = 0;
    fsdpc__store_entry *e = find(t, key);
    if (e) {
      char text[32];
      char *end;
      if (e->len == 0 || e->len >= sizeof text)
        goto not_int;
      memcpy(text, e->val, e->len);
      text[e->len] = '\0';
      errno = 0;
      v = strtoll(text, &end, 10);
      if (errno || *end)
        goto not_int;
    }
    int64_t d = fsdpc__get_i64(pay);
    if ((d > 0 && v > INT64_MAX - d) || (d < 0 && v < INT64_MIN - d))
      return reply_error(t, c, "ADD refused: the counter would overflow");
    v += d;
    char text[32];
    int tl = snprintf(text, sizeof text, "%" PRId64, v);
    if (!(e = put(t, key, (const uint8_t *)text, (size_t)tl, &full)))
      return reply_error(t, c,
                         full ? "ADD refused: the store holds its maximum total size"
                              : "store server out of memory");
    serve_waiters(t, e);
    uint8_t r[8];
    fsdpc__put_i64(r, v);
    return reply(t, c, FSDPC_STORE_REPLY_OK, r, 8);
  not_int:
    return reply_error(t, c, "ADD on a key whose value is not an integer");
  }
  default:
    return refuse(t, c, "unknown store operation (client and server versions differ?)");
  }
}

size_t fsdpc__store_conn_room(const fsdpc__store_conn *c) {
  if (c->authed)
    return (size_t)-1;
  return c->in_len < FSDPC_STORE_HEAD_MAX ? FSDPC_STORE_HEAD_MAX - c->in_len : 0;
}

/* A connection that has not shown the job token yet: its first frame's
 * length, operation and token are checked as soon as they are in, before
 * anything of the frame's body is buffered (fsdpc__store_conn_room), so an
 * unauthenticated client costs at most FSDPC_STORE_HEAD_MAX bytes. Returns
 * 0 when done for now (token right, more bytes needed, or refused with the
 * reply queued), -1 when the connection must be dropped at once. */
static int check_head(fsdpc__store_table *t, fsdpc__store_conn *c) {
  if (c->in_len < 4)
    return 0;
  if (fsdpc__get_u32(c->in) > FSDPC_STORE_MAX_FRAME)
    return refuse(t, c, "request refused: frame over the size limit");
  if (c->in_len < 6)
    return 0;
  size_t tlen = c->in[5];
  if (tlen > FSDPC_STORE_MAX_TOKEN) {
    t->refused++;
    return refuse(t, c, TOKEN_REFUSED);
  }
  if (2 + tlen + 4 > fsdpc__get_u32(c->in))
    return refuse(t, c, "malformed request (too short)");
  if (c->in_len < 6 + tlen)
    return 0;
  if (!token_ok(t, c->in + 6, tlen)) {
    t->refused++;
    return refuse(t, c, TOKEN_REFUSED);
  }
  c->authed = 1;
  return 0;
}

int fsdpc__store_process_input(fsdpc__store_table *t, fsdpc__store_conn *c, int64_t now) {
  size_t off = 0;
  int rc = 0;
  if (!c->authed && !c->closing) {
    if (check_head(t, c))
      return -1;
    if (c->closing) {
      c->in_len = 0; /* refused: nothing of it is acted on */
      return 0;
    }
  }
  while (!c->wait_key && !c->closing && c->in_len - off >= 4) {
    uint32_t n = fsdpc__get_u32(c->in + off);
    if (n > FSDPC_STORE_MAX_FRAME) {
      rc = refuse(t, c, "request refused: frame over the size limit");
      break;
    }
    if (c->in_len - off - 4 < n)
      break;
    if (handle(t, c, c->in + off + 4, n, now)) {
      rc = -1;
      break;
    }
    off += 4 + (size_t)n;
  }
  if (c->closing) {
    c->in_len = 0; /* nothing more from this connection is read */
    return rc;
  }
  /* Keep the partial frame that follows the parsed ones at the front. With
   * nothing parsed there is nothing to move (and c->in may still be NULL:
   * a connection that has sent nothing has no buffer yet). */
  if (off > 0) {
    c->in_len -= off;
    if (c->in_len > 0)
      memmove(c->in, c->in + off, c->in_len);
  }
  return rc;
}
