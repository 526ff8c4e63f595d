/* The store server: one thread, non-blocking sockets and poll(2). The
 * table, the token check and the limits are in store_table.c.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/store.h"
#include "dist/store_table.h"
#include "dist/store_wire.h"
#include "util/log.h"

struct fsdpc_store_server {
  pthread_t thread;
  int listen_fd;
  int wake[2];
  fsdpc__store_table t;
  int64_t accept_paused_until; /* after EMFILE: do not poll the listener */
  int n_clients;               /* atomic copy of t.n_conns, for other threads */
};

int fsdpc__store_server_clients(fsdpc_store_server *s) {
  return s ? __atomic_load_n(&s->n_clients, __ATOMIC_RELAXED) : 0;
}

static void drop(fsdpc_store_server *s, int i) {
  fsdpc__store_conn *c = &s->t.conns[i];
  close(c->fd);
  fsdpc__store_conn_free(c);
  s->t.conns[i] = s->t.conns[--s->t.n_conns];
}

/* At the connection limit: closes the oldest connection that never sent a
 * valid request. 0 if there was none (the newcomer is then refused). */
static int evict_anonymous(fsdpc_store_server *s) {
  int best = -1;
  for (int i = 0; i < s->t.n_conns; i++)
    if (!s->t.conns[i].authed &&
        (best < 0 || s->t.conns[i].opened_ms < s->t.conns[best].opened_ms))
      best = i;
  if (best < 0)
    return 0;
  drop(s, best);
  return 1;
}

static void accept_all(fsdpc_store_server *s) {
  for (;;) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      /* Out of descriptors: the listener stays readable, so polling it again
       * at once would spin. Pause it for a moment. */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        s->accept_paused_until = fsdpc__now_ms() + 100;
      return; /* EAGAIN, or a transient error: poll tells us again */
    }
    if (s->t.n_conns >= s->t.lim.max_conns && !evict_anonymous(s)) {
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (s->t.n_conns == s->t.cap_conns) {
      int nc = s->t.cap_conns ? 2 * s->t.cap_conns : 16;
      fsdpc__store_conn *p = realloc(s->t.conns, (size_t)nc * sizeof *p);
      if (!p) {
        close(fd);
        continue;
      }
      s->t.conns = p;
      s->t.cap_conns = nc;
    }
    s->t.conns[s->t.n_conns++] = (fsdpc__store_conn){.fd = fd, .opened_ms = fsdpc__now_ms()};
  }
}

static int grow(uint8_t **buf, size_t *cap, size_t need) {
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

/* Reads what is available, at most one frame ahead of what is parsed (a
 * parked GET stops parsing, so a client that sends more than that is
 * dropped), and from a connection that has not shown the job token only
 * the head of its first frame; -1 when the peer closed or failed. */
static int read_conn(fsdpc__store_conn *c) {
  for (;;) {
    if (c->in_len >= 4 + (size_t)FSDPC_STORE_MAX_FRAME)
      return -1;
    size_t room = fsdpc__store_conn_room(c);
    if (room == 0)
      return 0; /* the token is checked before more is read */
    if (grow(&c->in, &c->in_cap, c->in_len + (room < 65536 ? room : 65536)))
      return -1;
    size_t want = c->in_cap - c->in_len;
    ssize_t r = recv(c->fd, c->in + c->in_len, want < room ? want : room, 0);
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

static int write_conn(fsdpc__store_conn *c) {
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
  pthread_setname_np(pthread_self(), "fsdpc-store"); /* for top -H and the tests */
  struct pollfd *pfds = NULL;
  int pcap = 0;
  for (;;) {
    if (s->t.n_conns + 2 > pcap) {
      pcap = 2 * (s->t.n_conns + 2);
      struct pollfd *p = realloc(pfds, (size_t)pcap * sizeof *p);
      if (!p)
        break;
      pfds = p;
    }
    int64_t now = fsdpc__now_ms(), timeout = -1;
    pfds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    pfds[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    if (now < s->accept_paused_until) {
      pfds[1].fd = -1; /* poll ignores it */
      timeout = s->accept_paused_until - now;
    }
    int n = s->t.n_conns;
    for (int i = 0; i < n; i++) {
      fsdpc__store_conn *c = &s->t.conns[i];
      pfds[2 + i] = (struct pollfd){.fd = c->fd, .events = c->closing ? 0 : POLLIN};
      if (c->out_len > c->out_off)
        pfds[2 + i].events |= POLLOUT;
      int64_t until = -1;
      if (c->wait_key)
        until = c->wait_deadline;
      if (!c->authed && (until < 0 || c->opened_ms + s->t.lim.anon_ms < until))
        until = c->opened_ms + s->t.lim.anon_ms;
      if (until >= 0) {
        int64_t left = until > now ? until - now : 0;
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
      fsdpc__store_conn *c = &s->t.conns[i];
      short ev = pfds[2 + i].revents;
      int bad = 0;
      if (ev & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
        bad = c->closing ? ((ev & (POLLHUP | POLLERR | POLLNVAL)) ? -1 : 0) : read_conn(c);
      if (!bad)
        bad = fsdpc__store_process_input(&s->t, c, now);
      if (!bad && c->wait_key && now >= c->wait_deadline) {
        free(c->wait_key);
        c->wait_key = NULL;
        static const uint8_t nf[5] = {1, 0, 0, 0, FSDPC_STORE_REPLY_NOT_FOUND};
        bad = grow(&c->out, &c->out_cap, c->out_len + 5);
        if (!bad) {
          memcpy(c->out + c->out_len, nf, 5);
          c->out_len += 5;
          bad = fsdpc__store_process_input(&s->t, c, now);
        }
      }
      if (!bad && !c->authed && now - c->opened_ms >= s->t.lim.anon_ms)
        bad = -1; /* connected but never said who it is */
      if (!bad)
        bad = write_conn(c);
      if (!bad && c->closing && c->out_len == c->out_off)
        bad = -1;
      if (bad)
        drop(s, i);
    }
    if (pfds[1].fd >= 0 && (pfds[1].revents & POLLIN))
      accept_all(s);
    __atomic_store_n(&s->n_clients, s->t.n_conns, __ATOMIC_RELAXED);
  }
  free(pfds);
  return NULL;
}

fsdpc_status fsdpc__store_server_start(const char *bind_addr, int port, const char *token,
                                       const fsdpc_store_limits *lim, fsdpc_store_server **out,
                                       int *bound_port, fsdpc_err *err) {
  *out = NULL;
  size_t tl = token ? strlen(token) : 0;
  if (tl == 0 || tl > FSDPC_STORE_MAX_TOKEN)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "store: the job token must be 1..%u bytes",
                       FSDPC_STORE_MAX_TOKEN);
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
  fsdpc__store_table_init(&s->t, token, lim);
  /* Leave at least half of the process's descriptors to the rest of it
   * (checkpoints, data, plugins). */
  struct rlimit rl;
  /* Every rank holds two connections (requests, heartbeats): take the
   * descriptors the hard limit allows, as servers do. */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
    if (want > rl.rlim_cur) {
      struct rlimit up = {.rlim_cur = want, .rlim_max = rl.rlim_max};
      setrlimit(RLIMIT_NOFILE, &up);
    }
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (rlim_t)s->t.lim.max_conns > rl.rlim_cur / 2)
    s->t.lim.max_conns = rl.rlim_cur / 2 > 16 ? (int)(rl.rlim_cur / 2) : 16;
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
  for (int i = 0; i < s->t.n_conns; i++)
    write_conn(&s->t.conns[i]); /* best effort: queued replies */
  while (s->t.n_conns > 0)
    drop(s, s->t.n_conns - 1);
  fsdpc__store_table_free(&s->t);
  close(s->listen_fd);
  close(s->wake[0]);
  close(s->wake[1]);
  free(s);
}
