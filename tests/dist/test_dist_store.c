/* The rendezvous store: set/get/add/check, blocking get, timeouts, a dead
 * server, many threads on one client, the barrier and the plugin ABI view. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/job.h"
#include "dist/store.h"
#include "dist/store_table.h"
#include "dist/store_wire.h"

#define TOKEN "test-token"

static fsdpc_store_server *srv;
static fsdpc_store *cli;
static int port;

static void up(void) {
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__store_server_start("127.0.0.1", 0, TOKEN, NULL, &srv, &port, &err), FSDPC_OK);
  ck_assert_int_gt(port, 0);
  ck_assert_int_eq(fsdpc__store_connect("127.0.0.1", port, TOKEN, 5000, &cli, &err), FSDPC_OK);
}

static void down(void) {
  fsdpc__store_close(cli);
  fsdpc__store_server_stop(srv);
  cli = NULL;
  srv = NULL;
}

START_TEST(set_get_add_check) {
  fsdpc_err err;
  up();
  ck_assert_int_eq(fsdpc__store_ping(cli, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__store_check(cli, "a", &err), FSDPC_TIMEOUT);
  ck_assert_int_eq(fsdpc__store_set(cli, "a", "hello", 5, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__store_check(cli, "a", &err), FSDPC_OK);
  char buf[16] = {0};
  size_t len = 0;
  ck_assert_int_eq(fsdpc__store_get(cli, "a", buf, sizeof buf, &len, 1000, &err), FSDPC_OK);
  ck_assert_uint_eq(len, 5);
  ck_assert_str_eq(buf, "hello");
  /* A short buffer gets a prefix and the full length. */
  char two[2];
  ck_assert_int_eq(fsdpc__store_get(cli, "a", two, 2, &len, 1000, &err), FSDPC_OK);
  ck_assert_uint_eq(len, 5);
  ck_assert_int_eq(memcmp(two, "he", 2), 0);
  /* Binary values with NULs, and an empty value. */
  uint8_t bin[300];
  for (int i = 0; i < 300; i++)
    bin[i] = (uint8_t)i;
  ck_assert_int_eq(fsdpc__store_set(cli, "bin", bin, sizeof bin, &err), FSDPC_OK);
  uint8_t back[300];
  ck_assert_int_eq(fsdpc__store_get(cli, "bin", back, sizeof back, &len, 1000, &err), FSDPC_OK);
  ck_assert_int_eq(memcmp(bin, back, sizeof bin), 0);
  ck_assert_int_eq(fsdpc__store_set(cli, "empty", "", 0, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__store_get(cli, "empty", NULL, 0, &len, 1000, &err), FSDPC_OK);
  ck_assert_uint_eq(len, 0);
  /* Counters. */
  int64_t v = 0;
  ck_assert_int_eq(fsdpc__store_add(cli, "n", 5, &v, &err), FSDPC_OK);
  ck_assert_int_eq(v, 5);
  ck_assert_int_eq(fsdpc__store_add(cli, "n", -7, &v, &err), FSDPC_OK);
  ck_assert_int_eq(v, -2);
  ck_assert_int_eq(fsdpc__store_get(cli, "n", buf, sizeof buf, &len, 1000, &err), FSDPC_OK);
  buf[len] = '\0';
  ck_assert_str_eq(buf, "-2");
  ck_assert_int_eq(fsdpc__store_add(cli, "a", 1, &v, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "not an integer"));
  /* The connection is still usable after an error reply. */
  ck_assert_int_eq(fsdpc__store_ping(cli, &err), FSDPC_OK);
  down();
}
END_TEST

START_TEST(get_times_out) {
  fsdpc_err err;
  up();
  int64_t t0 = fsdpc__now_ms();
  ck_assert_int_eq(fsdpc__store_get(cli, "never", NULL, 0, NULL, 300, &err), FSDPC_TIMEOUT);
  int64_t dt = fsdpc__now_ms() - t0;
  ck_assert_int_ge(dt, 250);
  ck_assert_int_lt(dt, 3000);
  ck_assert_ptr_nonnull(strstr(err.msg, "'never' did not appear"));
  ck_assert_int_eq(fsdpc__store_ping(cli, &err), FSDPC_OK);
  down();
}
END_TEST

static void *late_setter(void *arg) {
  (void)arg;
  fsdpc_store *s;
  fsdpc_err err;
  usleep(200000);
  if (fsdpc__store_connect("127.0.0.1", port, TOKEN, 2000, &s, &err))
    return NULL;
  fsdpc__store_set(s, "late", "x", 1, &err);
  fsdpc__store_close(s);
  return NULL;
}

START_TEST(get_blocks_until_set) {
  fsdpc_err err;
  up();
  pthread_t t;
  pthread_create(&t, NULL, late_setter, NULL);
  char c = 0;
  int64_t t0 = fsdpc__now_ms();
  ck_assert_int_eq(fsdpc__store_get(cli, "late", &c, 1, NULL, 5000, &err), FSDPC_OK);
  ck_assert_int_eq(c, 'x');
  ck_assert_int_ge(fsdpc__now_ms() - t0, 150);
  pthread_join(t, NULL);
  down();
}
END_TEST

START_TEST(dead_server_is_an_error_not_a_hang) {
  fsdpc_err err;
  up();
  fsdpc__store_server_stop(srv);
  srv = NULL;
  int64_t t0 = fsdpc__now_ms();
  fsdpc_status st = fsdpc__store_get(cli, "k", NULL, 0, NULL, 20000, &err);
  ck_assert_int_eq(st, FSDPC_SYSTEM_ERROR);
  ck_assert_int_lt(fsdpc__now_ms() - t0, 2000);
  ck_assert_ptr_nonnull(strstr(err.msg, "connection lost"));
  ck_assert_ptr_nonnull(strstr(err.msg, "rank 0"));
  /* And every later call fails at once. */
  ck_assert_int_eq(fsdpc__store_set(cli, "k", "v", 1, &err), FSDPC_SYSTEM_ERROR);
  fsdpc__store_close(cli);
  cli = NULL;
  /* Connecting to nothing retries, then names host:port. */
  fsdpc_store *s = NULL;
  t0 = fsdpc__now_ms();
  ck_assert_int_eq(fsdpc__store_connect("127.0.0.1", port, TOKEN, 400, &s, &err), FSDPC_TIMEOUT);
  ck_assert_int_lt(fsdpc__now_ms() - t0, 2000);
  ck_assert_ptr_nonnull(strstr(err.msg, "cannot connect to 127.0.0.1:"));
  ck_assert_int_eq(fsdpc__store_connect("127.0.0.1", 0, TOKEN, 400, &s, &err), FSDPC_INVALID_USAGE);
}
END_TEST

static void *stop_later(void *arg) {
  usleep(200000); /* let the GET park server-side first */
  fsdpc__store_server_stop(arg);
  return NULL;
}

START_TEST(server_stops_while_client_waits) {
  fsdpc_err err;
  up();
  pthread_t t;
  pthread_create(&t, NULL, stop_later, srv);
  srv = NULL;
  int64_t t0 = fsdpc__now_ms();
  fsdpc_status st = fsdpc__store_get(cli, "k", NULL, 0, NULL, 20000, &err);
  ck_assert_int_eq(st, FSDPC_SYSTEM_ERROR);
  ck_assert_int_lt(fsdpc__now_ms() - t0, 3000);
  ck_assert_ptr_nonnull(strstr(err.msg, "connection lost"));
  pthread_join(t, NULL);
  down();
}
END_TEST

#define NTHREADS 8
#define NADDS 200
static void *adder(void *arg) {
  fsdpc_err err;
  for (int i = 0; i < NADDS; i++)
    if (fsdpc__store_add((fsdpc_store *)arg, "ctr", 1, NULL, &err))
      return (void *)1;
  return NULL;
}

START_TEST(one_client_many_threads) {
  fsdpc_err err;
  up();
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    pthread_create(&t[i], NULL, adder, cli);
  for (int i = 0; i < NTHREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
  }
  int64_t v = 0;
  ck_assert_int_eq(fsdpc__store_add(cli, "ctr", 0, &v, &err), FSDPC_OK);
  ck_assert_int_eq(v, NTHREADS * NADDS);
  down();
}
END_TEST

static void *barrier_member(void *arg) {
  fsdpc_store *s;
  fsdpc_err err;
  (void)arg;
  if (fsdpc__store_connect("127.0.0.1", port, TOKEN, 2000, &s, &err))
    return (void *)1;
  for (int round = 0; round < 3; round++)
    if (fsdpc__store_barrier(s, "b", 4, 5000, &err))
      return (void *)2;
  fsdpc__store_close(s);
  return NULL;
}

START_TEST(barrier_is_reusable_and_times_out) {
  fsdpc_err err;
  up();
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, barrier_member, NULL);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
  }
  /* One of three arrives: timeout naming the count. */
  ck_assert_int_eq(fsdpc__store_barrier(cli, "lonely", 3, 300, &err), FSDPC_TIMEOUT);
  ck_assert_ptr_nonnull(strstr(err.msg, "1 of 3 ranks arrived"));
  down();
}
END_TEST

START_TEST(abi_view_and_abort_flag) {
  fsdpc_err err;
  up();
  fsdpc_store_v1 v;
  fsdpc__store_as_v1(cli, &v);
  ck_assert_uint_eq(v.struct_size, sizeof v);
  ck_assert_int_eq(v.set(v.ctx, "p/k", "abc", 3), FSDPC_OK);
  char buf[8];
  uint64_t len = 0;
  ck_assert_int_eq(v.get(v.ctx, "p/k", buf, sizeof buf, &len, 1000), FSDPC_OK);
  ck_assert_uint_eq(len, 3);
  ck_assert_int_eq(v.check(v.ctx, "p/missing"), FSDPC_TIMEOUT);
  ck_assert_int_eq(v.get(v.ctx, "p/missing", buf, sizeof buf, &len, 100), FSDPC_TIMEOUT);
  int64_t r = 0;
  ck_assert_int_eq(v.add(v.ctx, "p/n", 3, &r), FSDPC_OK);
  ck_assert_int_eq(r, 3);

  ck_assert_int_eq(fsdpc__dist_check_abort(cli, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__dist_post_abort(cli, "rank 2 (pid 7) died: killed by signal 9", &err),
                   FSDPC_OK);
  ck_assert_int_eq(fsdpc__dist_post_abort(cli, "rank 3 died later", &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__dist_check_abort(cli, &err), FSDPC_SYSTEM_ERROR);
  ck_assert_str_eq(err.msg, "job aborted: rank 2 (pid 7) died: killed by signal 9");
  down();
}
END_TEST

START_TEST(bad_bind_is_one_line) {
  fsdpc_err err;
  fsdpc_store_server *s1, *s2;
  int p;
  ck_assert_int_eq(fsdpc__store_server_start("127.0.0.1", 0, TOKEN, NULL, &s1, &p, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__store_server_start("127.0.0.1", p, TOKEN, NULL, &s2, NULL, &err), FSDPC_SYSTEM_ERROR);
  ck_assert_ptr_nonnull(strstr(err.msg, "cannot listen on 127.0.0.1:"));
  ck_assert_ptr_null(strchr(err.msg, '\n'));
  fsdpc__store_server_stop(s1);
  ck_assert_int_eq(fsdpc__store_server_start("127.0.0.1", 70000, TOKEN, NULL, &s2, NULL, &err),
                   FSDPC_INVALID_USAGE);
}
END_TEST

/* The request parser on its own: a connection that has sent nothing (no
 * buffer yet) parses to nothing, and bytes of an unfinished frame after a
 * whole one move to the front of the buffer. Under UBSan the first case
 * once passed NULL to memmove. */
START_TEST(process_input_keeps_partial_frames) {
  fsdpc__store_table t;
  fsdpc_store_limits lim;
  fsdpc__store_limits_default(&lim);
  ck_assert_int_eq(fsdpc__store_table_init(&t, TOKEN, &lim), 0);
  fsdpc__store_conn c;
  memset(&c, 0, sizeof c);
  c.fd = -1;
  ck_assert_int_eq(fsdpc__store_process_input(&t, &c, 0), 0);
  ck_assert_ptr_null(c.in);
  ck_assert_uint_eq(c.in_len, 0);
  ck_assert_uint_eq(c.out_len, 0);

  /* PING (token, empty key), then the first 3 bytes of the next frame. */
  const size_t tl = strlen(TOKEN), body = 2 + tl + 4;
  c.in_cap = 4 + body + 3;
  c.in = malloc(c.in_cap);
  ck_assert_ptr_nonnull(c.in);
  fsdpc__put_u32(c.in, (uint32_t)body);
  c.in[4] = FSDPC_STORE_OP_PING;
  c.in[5] = (uint8_t)tl;
  memcpy(c.in + 6, TOKEN, tl);
  fsdpc__put_u32(c.in + 6 + tl, 0);
  memcpy(c.in + 4 + body, "\x07\x00\x00", 3);
  c.in_len = c.in_cap;
  ck_assert_int_eq(fsdpc__store_process_input(&t, &c, 0), 0);
  ck_assert_uint_eq(c.out_len, 5); /* one OK reply */
  ck_assert_uint_eq(c.out[4], FSDPC_STORE_REPLY_OK);
  ck_assert_uint_eq(c.in_len, 3);
  ck_assert_int_eq(memcmp(c.in, "\x07\x00\x00", 3), 0);
  /* Nothing whole to parse: the 3 bytes stay where they are. */
  ck_assert_int_eq(fsdpc__store_process_input(&t, &c, 0), 0);
  ck_assert_uint_eq(c.in_len, 3);
  ck_assert_uint_eq(c.out_len, 5);
  fsdpc__store_conn_free(&c);
  fsdpc__store_table_free(&t);
}
END_TEST

/* The head of a SET frame that claims a 1 MiB value, with `token`. */
static size_t frame_head(uint8_t *buf, const char *token) {
  size_t tl = strlen(token);
  fsdpc__put_u32(buf, (uint32_t)(6 + tl + 1 + (1u << 20)));
  buf[4] = FSDPC_STORE_OP_SET;
  buf[5] = (uint8_t)tl;
  memcpy(buf + 6, token, tl);
  return 6 + tl;
}

/* Issue 43 item 9: the token is checked before the frame's body is
 * buffered. A client that sends only the head of a 1 MiB frame with a wrong
 * token is refused at once (the server used to wait for, and buffer, the
 * whole frame first: 1,500 such clients took 1.2 GB). */
START_TEST(token_checked_before_the_body) {
  fsdpc_err err;
  up();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  uint8_t head[80];
  size_t n = frame_head(head, "not-the-token");
  ck_assert_int_eq(send(fd, head, n, 0), (ssize_t)n);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  ck_assert_int_eq(poll(&p, 1, 3000), 1); /* an answer without the body */
  uint8_t rep[600];
  ssize_t r = recv(fd, rep, sizeof rep, 0);
  ck_assert_int_gt(r, 5);
  ck_assert_uint_eq(rep[4], FSDPC_STORE_REPLY_ERROR);
  rep[r < (ssize_t)sizeof rep ? r : (ssize_t)sizeof rep - 1] = 0;
  ck_assert_ptr_nonnull(strstr((char *)rep + 5, "job token is not this job's"));
  close(fd);
  ck_assert_int_eq(fsdpc__store_ping(cli, &err), FSDPC_OK); /* the job is fine */
  down();
}
END_TEST

/* The same on the table alone: what an unauthenticated connection may
 * buffer, and that the right token makes it a trusted one. */
START_TEST(unauthenticated_room_is_the_head) {
  fsdpc__store_table t;
  ck_assert_int_eq(fsdpc__store_table_init(&t, TOKEN, NULL), 0);
  fsdpc__store_conn c;
  memset(&c, 0, sizeof c);
  c.fd = -1;
  ck_assert_uint_eq(fsdpc__store_conn_room(&c), FSDPC_STORE_HEAD_MAX);
  c.in_cap = 256;
  c.in = malloc(c.in_cap);
  c.in_len = frame_head(c.in, "wrong");
  ck_assert_uint_le(c.in_len, FSDPC_STORE_HEAD_MAX);
  ck_assert_int_eq(fsdpc__store_process_input(&t, &c, 0), 0);
  ck_assert_int_eq(c.closing, 1); /* refused before any of the body */
  ck_assert_uint_gt(c.out_len, 5);
  ck_assert_uint_eq(t.refused, 1);
  fsdpc__store_conn_free(&c);

  memset(&c, 0, sizeof c);
  c.fd = -1;
  c.in_cap = 256;
  c.in = malloc(c.in_cap);
  c.in_len = frame_head(c.in, TOKEN);
  ck_assert_int_eq(fsdpc__store_process_input(&t, &c, 0), 0);
  ck_assert_int_eq(c.closing, 0);
  ck_assert_int_eq(c.authed, 1); /* now the body may come */
  ck_assert_uint_eq(fsdpc__store_conn_room(&c), (size_t)-1);
  ck_assert_uint_eq(c.out_len, 0);
  fsdpc__store_conn_free(&c);
  fsdpc__store_table_free(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("dist_store");
  TCase *tc = tcase_create("store");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, set_get_add_check);
  tcase_add_test(tc, get_times_out);
  tcase_add_test(tc, get_blocks_until_set);
  tcase_add_test(tc, dead_server_is_an_error_not_a_hang);
  tcase_add_test(tc, server_stops_while_client_waits);
  tcase_add_test(tc, one_client_many_threads);
  tcase_add_test(tc, barrier_is_reusable_and_times_out);
  tcase_add_test(tc, abi_view_and_abort_flag);
  tcase_add_test(tc, bad_bind_is_one_line);
  tcase_add_test(tc, process_input_keeps_partial_frames);
  tcase_add_test(tc, token_checked_before_the_body);
  tcase_add_test(tc, unauthenticated_room_is_the_head);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
