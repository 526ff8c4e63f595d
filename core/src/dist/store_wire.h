/* Wire format of the rendezvous store, shared by client and server.
 *
 * Every message is a frame: u32 body length, then the body. Integers are
 * little-endian.
 *   request body:  u8 op | u8 token_len | token bytes | u32 key_len |
 *                  key bytes | payload
 *     the token is the job's (fsdpc__job_token); a request with another
 *     token is refused and its connection closed
 *     SET   payload = value bytes (the rest of the body)
 *     GET   payload = i64 timeout_ms (server-side wait)
 *     ADD   payload = i64 delta
 *     CHECK, PING: no payload (PING has key_len 0)
 *   response body: u8 status | payload
 *     OK + GET: value bytes; OK + ADD: i64 new value;
 *     NOT_FOUND (GET timed out / CHECK missing): empty;
 *     ERROR: one line of text. */
#ifndef FSDPC_DIST_STORE_WIRE_H
#define FSDPC_DIST_STORE_WIRE_H

#include <stdint.h>
#include <string.h>
#include <time.h>

enum {
  FSDPC_STORE_OP_SET = 1,
  FSDPC_STORE_OP_GET = 2,
  FSDPC_STORE_OP_ADD = 3,
  FSDPC_STORE_OP_CHECK = 4,
  FSDPC_STORE_OP_PING = 5
};

enum { FSDPC_STORE_REPLY_OK = 0, FSDPC_STORE_REPLY_NOT_FOUND = 1, FSDPC_STORE_REPLY_ERROR = 2 };

#define FSDPC_STORE_MAX_KEY 4096u
#define FSDPC_STORE_MAX_TOKEN 64u
/* One value; the largest real one is Gloo's address list (~64 bytes a rank). */
#define FSDPC_STORE_MAX_VALUE ((uint32_t)1 << 20)
/* Frames above this are refused before anything is allocated for them. */
#define FSDPC_STORE_MAX_FRAME                                                                      \
  (6 + FSDPC_STORE_MAX_TOKEN + FSDPC_STORE_MAX_KEY + FSDPC_STORE_MAX_VALUE)

static inline void fsdpc__put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t fsdpc__get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static inline void fsdpc__put_i64(uint8_t *p, int64_t v) {
  uint64_t u = (uint64_t)v;
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(u >> (8 * i));
}
static inline int64_t fsdpc__get_i64(const uint8_t *p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++)
    u |= (uint64_t)p[i] << (8 * i);
  return (int64_t)u;
}

/* Monotonic milliseconds, for deadlines. */
static inline int64_t fsdpc__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
