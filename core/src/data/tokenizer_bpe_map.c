/* Open-addressing hash maps for the BPE tokenizer: token bytes -> id and
 * (left id, right id) -> (merge rank, merged id). Both are filled once at
 * load and only read while encoding, so there is no deletion; the load
 * factor stays at or below one half, which keeps linear probes short. */
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_bpe_internal.h"

/* FNV-1a over 8-byte words, finished with a multiply-xorshift so that the
 * top bits (used for the slot) depend on every input byte. */
uint64_t fsdpc__bpe_hash_bytes(const char *s, size_t n) {
  uint64_t h = UINT64_C(0xcbf29ce484222325) ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = (h ^ w) * UINT64_C(0x100000001b3);
    h ^= h >> 29;
  }
  for (; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
  h ^= h >> 32;
  h *= UINT64_C(0x9E3779B97F4A7C15);
  h ^= h >> 29;
  return h;
}

static uint32_t capacity_for(int64_t n) {
  uint64_t cap = 16;
  while (cap < (uint64_t)n * 2)
    cap <<= 1;
  return cap > (UINT64_C(1) << 31) ? 0 : (uint32_t)cap;
}

int fsdpc__bpe_str_map_init(bpe_str_map *m, int64_t n) {
  uint32_t cap = capacity_for(n);
  m->slots = cap ? malloc((size_t)cap * sizeof *m->slots) : NULL;
  if (!m->slots)
    return 0;
  memset(m->slots, 0xff, (size_t)cap * sizeof *m->slots); /* -1 */
  m->mask = cap - 1;
  return 1;
}

int32_t fsdpc__bpe_str_map_put(struct bpe *b, int32_t id) {
  bpe_str_map *m = &b->vocab;
  const char *s = b->arena + b->off[id];
  size_t n = (size_t)b->len[id];
  for (uint32_t i = (uint32_t)fsdpc__bpe_hash_bytes(s, n) & m->mask;; i = (i + 1) & m->mask) {
    int32_t cur = m->slots[i];
    if (cur < 0) {
      m->slots[i] = id;
      return -1;
    }
    if ((size_t)b->len[cur] == n && memcmp(b->arena + b->off[cur], s, n) == 0)
      return cur;
  }
}

int32_t fsdpc__bpe_str_map_get(const struct bpe *b, const char *s, size_t n) {
  const bpe_str_map *m = &b->vocab;
  for (uint32_t i = (uint32_t)fsdpc__bpe_hash_bytes(s, n) & m->mask;; i = (i + 1) & m->mask) {
    int32_t cur = m->slots[i];
    if (cur < 0)
      return -1;
    if ((size_t)b->len[cur] == n && memcmp(b->arena + b->off[cur], s, n) == 0)
      return cur;
  }
}

void fsdpc__bpe_str_map_free(bpe_str_map *m) {
  free(m->slots);
  m->slots = NULL;
}

int fsdpc__bpe_merge_map_init(bpe_merge_map *m, int64_t n) {
  uint32_t cap = capacity_for(n);
  m->slots = cap ? malloc((size_t)cap * sizeof *m->slots) : NULL;
  if (!m->slots)
    return 0;
  for (uint32_t i = 0; i < cap; i++)
    m->slots[i].key = UINT64_MAX;
  m->mask = cap - 1;
  m->count = 0;
  return 1;
}

int fsdpc__bpe_merge_map_put(bpe_merge_map *m, int32_t left, int32_t right, int32_t rank,
                             int32_t new_id) {
  uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
  for (uint32_t i = (uint32_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask) {
    bpe_merge_slot *s = &m->slots[i];
    if (s->key == key) { /* like Hugging Face's HashMap collect: the last one wins */
      s->rank = rank;
      s->new_id = new_id;
      return 0;
    }
    if (s->key == UINT64_MAX) {
      s->key = key;
      s->rank = rank;
      s->new_id = new_id;
      m->count++;
      return 1;
    }
  }
}

void fsdpc__bpe_merge_map_free(bpe_merge_map *m) {
  free(m->slots);
  m->slots = NULL;
}
