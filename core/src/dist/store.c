/* The store client: one blocking TCP connection, every read and write under
 * a poll(2) deadline, one request in flight under a mutex. */
#include "dist/store.h"

#include <errno.h>
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

#include "dist/store_wire.h"
#include "util/escape.h"
#include "util/log.h"

/* Extra time a client waits beyond a GET's server-side timeout before it
 * calls the server unresponsive; at most the client's own timeout, so that
 * a client with a short one (the watchdog's, the launcher's) notices a
 * frozen server in about that time. */
#define IO_SLACK_MS 5000

struct fsdpc_store {
  int fd;
  pthread_mutex_t mu;
  int broken; /* an I/O error left the stream out of step */
  int64_t timeout_ms;
  char addr[300]; /* "host:port" */
  uint8_t token[FSDPC_STORE_MAX_TOKEN];
  size_t token_len;
};

const char *fsdpc__store_addr(const fsdpc_store *s) { return s->addr; }

static fsdpc_status try_connect(const char *host, int port, int *fd_out, int *why) {
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host, portstr, &hints, &ai);
  if (gai) {
    *why = gai;
    return FSDPC_INVALID_USAGE;
  }
  *why = ECONNREFUSED;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      freeaddrinfo(ai);
      *fd_out = fd;
      return FSDPC_OK;
    }
    *why = errno;
    close(fd);
  }
  freeaddrinfo(ai);
  return FSDPC_SYSTEM_ERROR;
}

fsdpc_status fsdpc__store_connect(const char *host, int port, const char *token,
                                  int64_t timeout_ms, fsdpc_store **out, fsdpc_err *err) {
  *out = NULL;
  size_t tl = token ? strlen(token) : 0;
  if (tl == 0 || tl > FSDPC_STORE_MAX_TOKEN)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store: the job token must be 1..%u bytes",
                       FSDPC_STORE_MAX_TOKEN);
  if (!host || !*host)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store: no server address (set MASTER_ADDR)");
  if (port <= 0 || port > 65535)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "store: port %d is out of range 1..65535 (set MASTER_PORT)", port);
  if (timeout_ms <= 0)
    timeout_ms = 30000;
  int64_t deadline = fsdpc__now_ms() + timeout_ms;
  int fd = -1, why = 0, delay_ms = 10;
  for (;;) {
    fsdpc_status st = try_connect(host, port, &fd, &why);
    if (st == FSDPC_OK)
      break;
    if (st == FSDPC_INVALID_USAGE)
      return fsdpc__fail(err, st, "store: cannot resolve '%s': %s", host, gai_strerror(why));
    int64_t left = deadline - fsdpc__now_ms();
    if (left <= 0)
      return fsdpc__fail(err, FSDPC_TIMEOUT,
                         "store: cannot connect to %s:%d within %.1f s: %s (is rank 0 running "
                         "and MASTER_ADDR/MASTER_PORT the same on every rank?)",
                         host, port, (double)timeout_ms / 1000.0, strerror(why));
    usleep((useconds_t)(delay_ms < left ? delay_ms : left) * 1000);
    if (delay_ms < 200)
      delay_ms *= 2;
  }
  fsdpc_store *s = calloc(1, sizeof *s);
  if (!s) {
    close(fd);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "store: out of memory");
  }
  s->fd = fd;
  s->timeout_ms = timeout_ms;
  memcpy(s->token, token, tl);
  s->token_len = tl;
  pthread_mutex_init(&s->mu, NULL);
  snprintf(s->addr, sizeof s->addr, "%s:%d", host, port);
  *out = s;
  return FSDPC_OK;
}

void fsdpc__store_close(fsdpc_store *s) {
  if (!s)
    return;
  close(s->fd);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Waits for fd to be ready for events before deadline. */
static fsdpc_status wait_fd(fsdpc_store *s, short events, int64_t deadline, fsdpc_err *err) {
  for (;;) {
    int64_t left = deadline - fsdpc__now_ms();
    if (left <= 0)
      return fsdpc__fail(err, FSDPC_TIMEOUT,
                         "store %s: no reply from the server in time (server hung or network "
                         "down?)",
                         s->addr);
    struct pollfd p = {.fd = s->fd, .events = events};
    int r = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
    if (r > 0)
      return FSDPC_OK;
    if (r < 0 && errno != EINTR)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "store %s: poll: %s", s->addr, strerror(errno));
  }
}

static int64_t io_slack(const fsdpc_store *s) {
  return s->timeout_ms < IO_SLACK_MS ? s->timeout_ms : IO_SLACK_MS;
}

/* The server-side wait of a request that does not wait (SET, ADD, CHECK,
 * PING): its deadline is then the client's timeout. */
static int64_t no_wait(const fsdpc_store *s) {
  return s->timeout_ms - io_slack(s);
}

static fsdpc_status gone(fsdpc_store *s, const char *what, int e, fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "store %s: connection lost while %s (%s): the store server (rank 0) exited "
                     "or died",
                     s->addr, what, e ? strerror(e) : "closed by peer");
}

static fsdpc_status write_all(fsdpc_store *s, const uint8_t *p, size_t n, int64_t deadline,
                              fsdpc_err *err) {
  while (n > 0) {
    FSDPC_TRY(wait_fd(s, POLLOUT, deadline, err));
    ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
      continue;
    if (w <= 0)
      return gone(s, "sending", w < 0 ? errno : 0, err);
    p += w;
    n -= (size_t)w;
  }
  return FSDPC_OK;
}

/* Reads n bytes into p; p NULL discards them. */
static fsdpc_status read_all(fsdpc_store *s, uint8_t *p, size_t n, int64_t deadline,
                             fsdpc_err *err) {
  uint8_t sink[4096];
  while (n > 0) {
    FSDPC_TRY(wait_fd(s, POLLIN, deadline, err));
    size_t want = p ? n : (n < sizeof sink ? n : sizeof sink);
    ssize_t r = recv(s->fd, p ? p : sink, want, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
      continue;
    if (r <= 0)
      return gone(s, "waiting for a reply", r < 0 ? errno : 0, err);
    if (p)
      p += r;
    n -= (size_t)r;
  }
  return FSDPC_OK;
}

/* One request/response. The reply payload goes to buf (up to cap bytes; the
 * rest is discarded) and its full length to *plen. Returns the reply status
 * byte in *reply. An ERROR reply becomes an fsdpc error here. */
static fsdpc_status request(fsdpc_store *s, uint8_t op, const char *key, const void *pay,
                            size_t paylen, int64_t wait_ms, uint8_t *reply, void *buf, size_t cap,
                            size_t *plen, fsdpc_err *err) {
  size_t klen = key ? strlen(key) : 0;
  if (klen > FSDPC_STORE_MAX_KEY)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store: key longer than %u bytes",
                       FSDPC_STORE_MAX_KEY);
  if (paylen > FSDPC_STORE_MAX_VALUE)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "store: a value of %zu bytes is over the store's limit of %u bytes", paylen,
                       FSDPC_STORE_MAX_VALUE);
  size_t body = 6 + s->token_len + klen + paylen;
  uint8_t hdr[10 + FSDPC_STORE_MAX_TOKEN];
  fsdpc__put_u32(hdr, (uint32_t)body);
  hdr[4] = op;
  hdr[5] = (uint8_t)s->token_len;
  memcpy(hdr + 6, s->token, s->token_len);
  fsdpc__put_u32(hdr + 6 + s->token_len, (uint32_t)klen);
  size_t hlen = 10 + s->token_len;

  pthread_mutex_lock(&s->mu);
  fsdpc_status st = FSDPC_OK;
  if (s->broken) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "store %s: connection unusable after an earlier error", s->addr);
    goto out;
  }
  int64_t deadline = fsdpc__now_ms() + wait_ms + io_slack(s);
  uint8_t rh[5];
  if ((st = write_all(s, hdr, hlen, deadline, err)) ||
      (st = write_all(s, (const uint8_t *)key, klen, deadline, err)) ||
      (st = write_all(s, pay, paylen, deadline, err)) || (st = read_all(s, rh, 5, deadline, err))) {
    s->broken = 1;
    goto out;
  }
  uint32_t n = fsdpc__get_u32(rh);
  if (n < 1 || n > FSDPC_STORE_MAX_FRAME) {
    s->broken = 1;
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                     "store %s: malformed reply (is something else listening on that port?)",
                     s->addr);
    goto out;
  }
  size_t len = n - 1, take = len < cap ? len : cap;
  *reply = rh[4];
  if (*reply == FSDPC_STORE_REPLY_ERROR) {
    char msg[512];
    take = len < sizeof msg - 1 ? len : sizeof msg - 1;
    if ((st = read_all(s, (uint8_t *)msg, take, deadline, err)) ||
        (st = read_all(s, NULL, len - take, deadline, err))) {
      s->broken = 1;
      goto out;
    }
    char safe[600];
    fsdpc__escape(safe, sizeof safe, msg, take);
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "store %s: %s", s->addr, safe);
    goto out;
  }
  if ((st = read_all(s, buf, take, deadline, err)) ||
      (st = read_all(s, NULL, len - take, deadline, err))) {
    s->broken = 1;
    goto out;
  }
  if (plen)
    *plen = len;
out:
  pthread_mutex_unlock(&s->mu);
  return st;
}

fsdpc_status fsdpc__store_set(fsdpc_store *s, const char *key, const void *value, size_t len,
                              fsdpc_err *err) {
  uint8_t rep;
  return request(s, FSDPC_STORE_OP_SET, key, value, len, no_wait(s), &rep, NULL, 0, NULL, err);
}

fsdpc_status fsdpc__store_get(fsdpc_store *s, const char *key, void *buf, size_t cap, size_t *len,
                              int64_t timeout_ms, fsdpc_err *err) {
  if (timeout_ms <= 0)
    timeout_ms = s->timeout_ms;
  uint8_t pay[8], rep;
  fsdpc__put_i64(pay, timeout_ms);
  FSDPC_TRY(request(s, FSDPC_STORE_OP_GET, key, pay, 8, timeout_ms, &rep, buf, cap, len, err));
  if (rep != FSDPC_STORE_REPLY_OK)
    return fsdpc__fail(err, FSDPC_TIMEOUT, "store %s: key '%s' did not appear within %.1f s",
                       s->addr, key, (double)timeout_ms / 1000.0);
  return FSDPC_OK;
}

fsdpc_status fsdpc__store_add(fsdpc_store *s, const char *key, int64_t delta, int64_t *result,
                              fsdpc_err *err) {
  uint8_t pay[8], r[8], rep;
  size_t n = 0;
  fsdpc__put_i64(pay, delta);
  FSDPC_TRY(request(s, FSDPC_STORE_OP_ADD, key, pay, 8, no_wait(s), &rep, r, 8, &n, err));
  if (rep != FSDPC_STORE_REPLY_OK || n != 8)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "store %s: malformed ADD reply", s->addr);
  if (result)
    *result = fsdpc__get_i64(r);
  return FSDPC_OK;
}

fsdpc_status fsdpc__store_check(fsdpc_store *s, const char *key, fsdpc_err *err) {
  uint8_t rep;
  FSDPC_TRY(request(s, FSDPC_STORE_OP_CHECK, key, NULL, 0, no_wait(s), &rep, NULL, 0, NULL, err));
  return rep == FSDPC_STORE_REPLY_OK ? FSDPC_OK : FSDPC_TIMEOUT;
}

fsdpc_status fsdpc__store_ping(fsdpc_store *s, fsdpc_err *err) {
  uint8_t rep;
  return request(s, FSDPC_STORE_OP_PING, "", NULL, 0, no_wait(s), &rep, NULL, 0, NULL, err);
}

fsdpc_status fsdpc__store_barrier(fsdpc_store *s, const char *name, int world, int64_t timeout_ms,
                                  fsdpc_err *err) {
  if (world <= 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store barrier '%s': world %d must be > 0", name,
                       world);
  char key[512];
  int64_t k = 0;
  snprintf(key, sizeof key, "%s/arrived", name);
  FSDPC_TRY(fsdpc__store_add(s, key, 1, &k, err));
  int64_t gen = (k - 1) / world;
  char done[512];
  snprintf(done, sizeof done, "%s/done/%" PRId64, name, gen);
  if (k % world == 0)
    FSDPC_TRY(fsdpc__store_set(s, done, "1", 1, err));
  fsdpc_status st = fsdpc__store_get(s, done, NULL, 0, NULL, timeout_ms, err);
  if (st == FSDPC_TIMEOUT) {
    int64_t now = 0;
    fsdpc_err e2;
    if (fsdpc__store_add(s, key, 0, &now, &e2) == FSDPC_OK) {
      int64_t here = now - gen * world;
      if (here > world)
        here = world;
      return fsdpc__fail(err, FSDPC_TIMEOUT,
                         "store barrier '%s' timed out after %.1f s: %" PRId64
                         " of %d ranks arrived (a rank is stuck or died)",
                         name, (double)(timeout_ms > 0 ? timeout_ms : s->timeout_ms) / 1000.0, here,
                         world);
    }
  }
  return st;
}

/* ---- plugin ABI view ---------------------------------------------------- */

static void log_fail(fsdpc_status st, const fsdpc_err *e) {
  if (st != FSDPC_OK && st != FSDPC_TIMEOUT)
    FSDPC_LOGE("%s", e->msg);
}

static int32_t v1_set(void *ctx, const char *key, const void *value, uint64_t len) {
  fsdpc_err e;
  fsdpc_status st = fsdpc__store_set(ctx, key, value, (size_t)len, &e);
  log_fail(st, &e);
  return st;
}

static int32_t v1_get(void *ctx, const char *key, void *buf, uint64_t cap, uint64_t *len,
                      int64_t timeout_ms) {
  fsdpc_err e;
  size_t n = 0;
  fsdpc_status st = fsdpc__store_get(ctx, key, buf, (size_t)cap, &n, timeout_ms, &e);
  log_fail(st, &e);
  if (st == FSDPC_OK && len)
    *len = n;
  return st;
}

static int32_t v1_add(void *ctx, const char *key, int64_t delta, int64_t *result) {
  fsdpc_err e;
  fsdpc_status st = fsdpc__store_add(ctx, key, delta, result, &e);
  log_fail(st, &e);
  return st;
}

static int32_t v1_check(void *ctx, const char *key) {
  fsdpc_err e;
  fsdpc_status st = fsdpc__store_check(ctx, key, &e);
  log_fail(st, &e);
  return st;
}

void fsdpc__store_as_v1(fsdpc_store *s, fsdpc_store_v1 *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->ctx = s;
  out->set = v1_set;
  out->get = v1_get;
  out->add = v1_add;
  out->check = v1_check;
}
