/* libFuzzer harness for the rendezvous store protocol (dist/store_table.c).
 *
 * The input is the byte stream of up to three clients: it is cut at each
 * 0xFF 0xFE pair into the streams of connections 0, 1, 2, which are fed in
 * turn in chunks (so that frames split across reads are exercised). The
 * token of the table is "tok". Whatever arrives, the table stays within its
 * limits, replies are whole frames, and a refused connection is marked
 * closing without anything after its refusal being acted on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/store_table.h"

#include "fuzz_check.h"

static void check_replies(const fsdpc__store_conn *c) {
  size_t off = c->out_off;
  while (off < c->out_len) {
    CHECK(c->out_len - off >= 5);
    uint32_t n = fsdpc__get_u32(c->out + off);
    CHECK(n >= 1 && c->out_len - off - 4 >= n);
    CHECK(c->out[off + 4] <= FSDPC_STORE_REPLY_ERROR);
    off += 4 + (size_t)n;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fsdpc__store_table t;
  fsdpc_store_limits lim;
  fsdpc__store_limits_default(&lim);
  lim.max_total = 1 << 16; /* small, so the fuzzer reaches the limit */
  lim.max_value = 1 << 12;
  lim.max_pending = 1 << 16;
  CHECK(fsdpc__store_table_init(&t, "tok", &lim) == 0);
  t.conns = calloc(3, sizeof *t.conns);
  if (!t.conns)
    return 0;
  t.cap_conns = 3;
  t.n_conns = 3;
  const uint8_t *start[3] = {data, NULL, NULL};
  size_t len[3] = {size, 0, 0};
  int k = 0;
  for (size_t i = 0; i + 1 < size && k < 2; i++) {
    if (data[i] == 0xFF && data[i + 1] == 0xFE) {
      len[k] = (size_t)(data + i - start[k]);
      k++;
      start[k] = data + i + 2;
      len[k] = size - i - 2;
      i++;
    }
  }
  size_t pos[3] = {0, 0, 0};
  int64_t now = 1000;
  for (int round = 0; round < 64; round++) {
    int any = 0;
    for (int c = 0; c < 3; c++) {
      fsdpc__store_conn *cn = &t.conns[c];
      if (pos[c] >= len[c] || cn->closing)
        continue;
      size_t chunk = len[c] - pos[c];
      if (chunk > 97)
        chunk = 97 + (size_t)(start[c][pos[c]] % 64);
      if (chunk > len[c] - pos[c])
        chunk = len[c] - pos[c];
      uint8_t *p = realloc(cn->in, cn->in_len + chunk);
      if (!p)
        break;
      cn->in = p;
      memcpy(cn->in + cn->in_len, start[c] + pos[c], chunk);
      cn->in_len += chunk;
      pos[c] += chunk;
      any = 1;
      size_t before = cn->out_len;
      int rc = fsdpc__store_process_input(&t, cn, now);
      CHECK(cn->out_len >= before);
      check_replies(cn);
      if (rc)
        cn->closing = 1;
      if (cn->closing)
        CHECK(cn->in_len == 0 || rc);
      CHECK(t.bytes <= lim.max_total);
      /* The client reads its replies. */
      cn->out_off = cn->out_len = 0;
      now += 7;
    }
    if (!any)
      break;
  }
  fsdpc__store_table_free(&t);
  return 0;
}
