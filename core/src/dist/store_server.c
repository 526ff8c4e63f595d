/* The store server: one thread, non-blocking sockets and poll(2).
 *
 * A GET for a missing key parks its connection (no reply yet) until a SET
 * or ADD creates the key or the request's deadline passes; the poll timeout
 * is the nearest deadline. A connection with a parked GET is not read
 * further, which is fine because a client has one request in flight.
 * A pipe wakes the thread for stop. */
#define _GNU_SOURCE /* pipe2, execvpe, sigabbrev_np */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/store.h"
#include "dist/store_wire.h"
#include "util/log.h"

#define NBUCKETS 1024

typedef struct entry {
  char *key;
  uint8_t *val;
  size_t len;
  struct entry *next;
} entry;

typedef struct conn {
  int fd;
  uint8_t *in; /* bytes received, not yet parsed */
  size_t in_len, in_cap;
  uint8_t *out; /* bytes to send; out_off already sent */
  size_t out_len, out_off, out_cap;
  char *wait_key; /* parked GET, or NULL */
  int64_t wait_deadline;
} conn;

struct fsdpc_store_server {
  pthread_t thread;
  int listen_fd;
  int wake[2];
  entry *buckets[NBUCKETS];
  conn *conns;
  int n_conns, cap_conns;
};

static uint32_t hash_key(const char *k) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *k; k++)
    h = (h ^ (uint8_t)*k) * 16777619u;
  return h;
}

static entry *find(fsdpc_store_server *s, const char *key) {
  for (entry *e = s->buckets[hash_key(key) % NBUCKETS]; e; e = e->next)
    if (strcmp(e->key, key) == 0)
      return e;
  return NULL;
}

/* Sets key to a copy of val; returns the entry or NULL when out of memory. */
static entry *put(fsdpc_store_server *s, const char *key, const uint8_t *val, size_t len) {
  entry *e = find(s, key);
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy)
    return NULL;
  memcpy(copy, val, len);
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) {
      free(e);
      free(copy);
      return NULL;
    }
    uint32_t b = hash_key(key) % NBUCKETS;
    e->next = s->buckets[b];
    s->buckets[b] = e;
  } else {
    free(e->val);
  }
  e->val = copy;
  e->len = len;
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

/* Queues one response frame: status byte then a, b (either may be empty). */
static int reply(conn *c, uint8_t status, const void *a, size_t alen, const void *b, size_t blen) {
  size_t body = 1 + alen + blen;
  if (reserve(&c->out, &c->out_cap, c->out_len + 4 + body))
    return -1;
  uint8_t *p = c->out + c->out_len;
  fsdpc__put_u32(p, (uint32_t)body);
  p[4] = status;
  if (alen)
    memcpy(p + 5, a, alen);
  if (blen)
    memcpy(p + 5 + alen, b, blen);
  c->out_len += 4 + body;
  return 0;
}

static int reply_error(conn *c, const char *msg) {
  return reply(c, FSDPC_STORE_REPLY_ERROR, msg, strlen(msg), NULL, 0);
}

/* Wakes parked GETs waiting for e->key. */
static void serve_waiters(fsdpc_store_server *s, const entry *e) {
  for (int i = 0; i < s->n_conns; i++) {
    conn *c = &s->conns[i];
    if (c->wait_key && strcmp(c->wait_key, e->key) == 0) {
      free(c->wait_key);
      c->wait_key = NULL;
      reply(c, FSDPC_STORE_REPLY_OK, e->val, e->len, NULL, 0);
    }
  }
}

/* Handles one complete request body. Returns -1 to drop the connection. */
static int handle(fsdpc_store_server *s, conn *c, const uint8_t *body, uint32_t n) {
  if (n < 5)
    return reply_error(c, "malformed request (too short)");
  uint8_t op = body[0];
  uint32_t klen = fsdpc__get_u32(body + 1);
  if (klen > FSDPC_STORE_MAX_KEY || 5 + (size_t)klen > n)
    return reply_error(c, "malformed request (bad key length)");
  char key[FSDPC_STORE_MAX_KEY + 1];
  memcpy(key, body + 5, klen);
  key[klen] = '\0';
  const uint8_t *pay = body + 5 + klen;
  size_t plen = n - 5 - klen;
  switch (op) {
  case FSDPC_STORE_OP_PING:
    return reply(c, FSDPC_STORE_REPLY_OK, NULL, 0, NULL, 0);
  case FSDPC_STORE_OP_SET: {
    entry *e = put(s, key, pay, plen);
    if (!e)
      return reply_error(c, "store server out of memory");
    serve_waiters(s, e);
    return reply(c, FSDPC_STORE_REPLY_OK, NULL, 0, NULL, 0);
  }
  case FSDPC_STORE_OP_CHECK:
    return reply(c, find(s, key) ? FSDPC_STORE_REPLY_OK : FSDPC_STORE_REPLY_NOT_FOUND, NULL, 0,
                 NULL, 0);
  case FSDPC_STORE_OP_GET: {
    if (plen != 8)
      return reply_error(c, "malformed GET (no timeout)");
    entry *e = find(s, key);
    if (e)
      return reply(c, FSDPC_STORE_REPLY_OK, e->val, e->len, NULL, 0);
    int64_t t = fsdpc__get_i64(pay);
    if (t <= 0)
      return reply(c, FSDPC_STORE_REPLY_NOT_FOUND, NULL, 0, NULL, 0);
    if (!(c->wait_key = strdup(key)))
      return reply_error(c, "store server out of memory");
    c->wait_deadline = fsdpc__now_ms() + t;
    return 0;
  }
  case FSDPC_STORE_OP_ADD: {
    if (plen != 8)
      return reply_error(c, "malformed ADD (no delta)");
    int64_t v = 0;
    entry *e = find(s, key);
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
    v += fsdpc__get_i64(pay);
    char text[32];
    int tl = snprintf(text, sizeof text, "%" PRId64, v);
    if (!(e = put(s, key, (const uint8_t *)text, (size_t)tl)))
      return reply_error(c, "store server out of memory");
    serve_waiters(s, e);
    uint8_t r[8];
    fsdpc__put_i64(r, v);
    return reply(c, FSDPC_STORE_REPLY_OK, r, 8, NULL, 0);
  not_int:;
    char msg[FSDPC_STORE_MAX_KEY + 64];
    snprintf(msg, sizeof msg, "ADD on key '%s' whose value is not an integer", key);
    return reply_error(c, msg);
  }
  default:
    return reply_error(c, "unknown store operation (client and server versions differ?)");
  }
}

/* Parses whole frames from c->in while no GET is parked. */
static int process_input(fsdpc_store_server *s, conn *c) {
  size_t off = 0;
  while (!c->wait_key && c->in_len - off >= 4) {
    uint32_t n = fsdpc__get_u32(c->in + off);
    if (n > FSDPC_STORE_MAX_FRAME)
      return -1;
    if (c->in_len - off - 4 < n)
      break;
    if (handle(s, c, c->in + off + 4, n))
      return -1;
    off += 4 + (size_t)n;
  }
  memmove(c->in, c->in + off, c->in_len - off);
  c->in_len -= off;
  return 0;
}

static void drop(fsdpc_store_server *s, int i) {
  conn *c = &s->conns[i];
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c->wait_key);
  s->conns[i] = s->conns[--s->n_conns];
}

static void accept_all(fsdpc_store_server *s) {
  for (;;) {
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0)
      return; /* EAGAIN, or a transient error: poll tells us again */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (s->n_conns == s->cap_conns) {
      int nc = s->cap_conns ? 2 * s->cap_conns : 16;
      conn *p = realloc(s->conns, (size_t)nc * sizeof *p);
      if (!p) {
        close(fd);
        continue;
      }
      s->conns = p;
      s->cap_conns = nc;
    }
    s->conns[s->n_conns++] = (conn){.fd = fd};
  }
}

/* Reads what is available; -1 when the peer closed or failed. */
static int read_conn(conn *c) {
  for (;;) {
    if (reserve(&c->in, &c->in_cap, c->in_len + 65536))
      return -1;
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r > 0) {
      c->in_len += (size_t)r;
      continue;
    }
    if (r == 0)
      return -1;
    if (errno == EINTR)
      continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
  }
}

static int write_conn(conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (w > 0) {
      c->out_off += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    return (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) ? 0 : -1;
  }
  c->out_off = c->out_len = 0;
  return 0;
}

static void *serve(void *arg) {
  fsdpc_store_server *s = arg;
  struct pollfd *pfds = NULL;
  int pcap = 0;
  for (;;) {
    if (s->n_conns + 2 > pcap) {
      pcap = 2 * (s->n_conns + 2);
      struct pollfd *p = realloc(pfds, (size_t)pcap * sizeof *p);
      if (!p)
        break;
      pfds = p;
    }
    int64_t now = fsdpc__now_ms(), timeout = -1;
    pfds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    pfds[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    int n = s->n_conns;
    for (int i = 0; i < n; i++) {
      conn *c = &s->conns[i];
      pfds[2 + i] = (struct pollfd){.fd = c->fd, .events = POLLIN};
      if (c->out_len > c->out_off)
        pfds[2 + i].events |= POLLOUT;
      if (c->wait_key) {
        int64_t left = c->wait_deadline - now;
        if (left < 0)
          left = 0;
        if (timeout < 0 || left < timeout)
          timeout = left;
      }
    }
    if (poll(pfds, (nfds_t)(2 + n), (int)(timeout > 600000 ? 600000 : timeout)) < 0 &&
        errno != EINTR)
      break;
    if (pfds[0].revents)
      break; /* stop requested */
    now = fsdpc__now_ms();
    /* Walk backwards so that drop() (which moves the last conn into slot i)
     * never skips a connection that has events. */
    for (int i = n - 1; i >= 0; i--) {
      conn *c = &s->conns[i];
      short ev = pfds[2 + i].revents;
      int bad = 0;
      if (ev & (POLLIN | POLLHUP | POLLERR))
        bad = read_conn(c);
      if (!bad)
        bad = process_input(s, c);
      if (!bad && c->wait_key && now >= c->wait_deadline) {
        free(c->wait_key);
        c->wait_key = NULL;
        bad = reply(c, FSDPC_STORE_REPLY_NOT_FOUND, NULL, 0, NULL, 0);
        if (!bad)
          bad = process_input(s, c);
      }
      if (!bad)
        bad = write_conn(c);
      if (bad)
        drop(s, i);
    }
    if (pfds[1].revents & POLLIN)
      accept_all(s);
  }
  free(pfds);
  return NULL;
}

fsdpc_status fsdpc__store_server_start(const char *bind_addr, int port, fsdpc_store_server **out,
                                       int *bound_port, fsdpc_err *err) {
  *out = NULL;
  if (port < 0 || port > 65535)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store: port %d is out of range 0..65535", port);
  const char *host = (bind_addr && *bind_addr) ? bind_addr : NULL;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host, portstr, &hints, &ai);
  if (gai)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store: cannot resolve bind address '%s': %s",
                       host ? host : "*", gai_strerror(gai));
  int fd = -1, saved = 0;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0)
      break;
    saved = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  if (fd < 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "store: cannot listen on %s:%d: %s (is another job using this port? pick "
                       "another --master-port)",
                       host ? host : "*", port, strerror(saved));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  fsdpc_store_server *s = calloc(1, sizeof *s);
  if (!s)
    goto fail_alloc;
  s->listen_fd = fd;
  if (pipe2(s->wake, O_CLOEXEC))
    goto fail_pipe;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  int actual = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  int rc = pthread_create(&s->thread, NULL, serve, s);
  if (rc) {
    errno = rc;
    goto fail_thread;
  }
  if (bound_port)
    *bound_port = actual;
  *out = s;
  FSDPC_LOGD("store: server listening on %s:%d", host ? host : "*", actual);
  return FSDPC_OK;

fail_thread:
  close(s->wake[0]);
  close(s->wake[1]);
fail_pipe:
  free(s);
fail_alloc:
  saved = errno;
  close(fd);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "store: cannot start the server: %s",
                     strerror(saved));
}

void fsdpc__store_server_stop(fsdpc_store_server *s) {
  if (!s)
    return;
  ssize_t w;
  do {
    w = write(s->wake[1], "x", 1);
  } while (w < 0 && errno == EINTR);
  pthread_join(s->thread, NULL);
  for (int i = 0; i < s->n_conns; i++)
    write_conn(&s->conns[i]); /* best effort: queued replies */
  while (s->n_conns > 0)
    drop(s, s->n_conns - 1);
  free(s->conns);
  for (int b = 0; b < NBUCKETS; b++) {
    for (entry *e = s->buckets[b], *next; e; e = next) {
      next = e->next;
      free(e->key);
      free(e->val);
      free(e);
    }
  }
  close(s->listen_fd);
  close(s->wake[0]);
  close(s->wake[1]);
  free(s);
}
