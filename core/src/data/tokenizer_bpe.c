/* Hugging Face BPE tokenizer (tokenizer.json): encoding, with the byte
 * offsets HF's offset_mapping gives. Loading is in tokenizer_bpe_load.c,
 * decode and the interface table in tokenizer_bpe_api.c.
 *
 * Encode, per text:
 *   1. Added tokens are cut out first, leftmost then longest (special ones
 *      only when parse_special is on); the pieces between them go on.
 *   2. Byte-level (Llama 3, Qwen2): NFC when the normalizer asks (libunistring), then
 *      the Split regex (PCRE2, UTF + UCP, JIT) cuts a piece into pre-tokens,
 *      Isolated: matches and the gaps between them. Invalid UTF-8 never
 *      matches, so such bytes end up in gap pre-tokens and still encode (as
 *      byte tokens). SentencePiece style (Llama 2, Mistral): " " -> "▁", a
 *      "▁" prepended as the normalizer or Metaspace says, optionally split
 *      into words before each "▁"; unknown characters fall back to <0xXX>
 *      tokens.
 *   3. With ignore_merges a pre-token found whole in the vocab is one id.
 *      Otherwise BPE: symbols start as single bytes (characters), and the
 *      adjacent pair of lowest merge rank (leftmost on ties) is merged until
 *      no pair has a rank. A binary heap of candidate pairs with lazy
 *      invalidation makes this O(n log n) in the pre-token length n, the
 *      same order Hugging Face's Word::merge_all uses.
 *
 * Offsets: every symbol carries the byte range [b0, b1) of its word; a word
 * maps its bytes to the text either by a base (byte-level without NFC) or
 * through a per-byte map (normalized text). A final pass widens each range
 * to whole UTF-8 characters, as HF's char offsets do. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

#include "data/tokenizer_bpe_internal.h"

typedef struct sym {
  int32_t id;         /* -1 once merged into its left neighbour */
  int32_t prev, next; /* linked list over the word, -1 at the ends */
  int32_t b0, b1;     /* bytes of the word it covers */
} sym;

typedef struct cand {
  int32_t rank, pos, new_id; /* merge (pos, next(pos)) -> new_id */
} cand;

typedef size_t span[2];

/* Per-call state: encode is const on the tokenizer and may run on several
 * threads at once, so every scratch buffer lives here. */
typedef struct enc {
  const bpe *b;
  int32_t *ids; /* (cap) */
  span *offs;   /* (cap) or NULL */
  int grow;     /* 1: ids/offs are malloc'd and grow; 0: the caller's, fixed cap */
  int64_t cap, n;
  sym *syms;
  cand *heap;
  int64_t syms_cap, heap_len;
  char *norm; /* normalized piece */
  size_t norm_cap;
  span *nmap; /* (norm_cap) text range of each normalized byte */
  /* The word being encoded: its byte i is text byte wbase + i, or wmap[i]. */
  size_t wbase;
  const span *wmap;
  pcre2_match_data *md;
  fsdpc_err *err;
  fsdpc_status st;
} enc;

static void oom(enc *e) {
  if (e->st == FSDPC_OK)
    e->st = fsdpc__fail(e->err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
}

/* Emits id covering text bytes [t0, t1). */
static void emit_at(enc *e, int32_t id, size_t t0, size_t t1) {
  if (e->n >= e->cap && e->grow) {
    int64_t cap = e->cap < 64 ? 64 : e->cap * 2;
    int32_t *ni = realloc(e->ids, (size_t)cap * sizeof *ni);
    if (ni)
      e->ids = ni;
    span *no = ni && e->offs ? realloc(e->offs, (size_t)cap * sizeof *no) : NULL;
    if (no)
      e->offs = no;
    if (!ni || (e->offs && !no)) {
      oom(e);
      return;
    }
    e->cap = cap;
  }
  if (e->n < e->cap) {
    e->ids[e->n] = id;
    if (e->offs) {
      e->offs[e->n][0] = t0;
      e->offs[e->n][1] = t1;
    }
  }
  e->n++;
}

/* Emits id covering word bytes [b0, b1). */
static void emit(enc *e, int32_t id, int32_t b0, int32_t b1) {
  if (e->wmap)
    emit_at(e, id, e->wmap[b0][0], e->wmap[b1 - 1][1]);
  else
    emit_at(e, id, e->wbase + (size_t)b0, e->wbase + (size_t)b1);
}

static int reserve_syms(enc *e, int64_t n) {
  if (n <= e->syms_cap)
    return 1;
  int64_t cap = n < 64 ? 64 : n * 2;
  sym *s = realloc(e->syms, (size_t)cap * sizeof *s);
  cand *h = s ? realloc(e->heap, (size_t)(3 * cap) * sizeof *h) : NULL;
  if (s)
    e->syms = s;
  if (h)
    e->heap = h;
  if (!s || !h) {
    oom(e);
    return 0;
  }
  e->syms_cap = cap;
  return 1;
}

static int cand_less(const cand *a, const cand *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(enc *e, cand c) {
  int64_t i = e->heap_len++;
  while (i > 0) {
    int64_t parent = (i - 1) / 2;
    if (!cand_less(&c, &e->heap[parent]))
      break;
    e->heap[i] = e->heap[parent];
    i = parent;
  }
  e->heap[i] = c;
}

static cand heap_pop(enc *e) {
  cand top = e->heap[0], last = e->heap[--e->heap_len];
  int64_t i = 0, n = e->heap_len;
  for (;;) {
    int64_t l = 2 * i + 1, m = i;
    const cand *best = &last;
    if (l < n && cand_less(&e->heap[l], best))
      best = &e->heap[m = l];
    if (l + 1 < n && cand_less(&e->heap[l + 1], best))
      best = &e->heap[m = l + 1];
    if (m == i)
      break;
    e->heap[i] = e->heap[m];
    i = m;
  }
  if (n > 0)
    e->heap[i] = last;
  return top;
}

/* Queues the pair starting at pos if the merges know it. */
static void push_pair(enc *e, int32_t pos) {
  const sym *s = e->syms;
  int32_t nx = s[pos].next;
  if (nx < 0)
    return;
  const bpe_merge_slot *m = fsdpc__bpe_merge_map_get(&e->b->merges, s[pos].id, s[nx].id);
  if (m)
    heap_push(e, (cand){m->rank, pos, m->new_id});
}

/* BPE over e->syms[0..n) (ids and ranges filled in), then emits the result. */
static void merge_word(enc *e, int32_t n) {
  sym *s = e->syms;
  if (n <= 0)
    return;
  for (int32_t i = 0; i < n; i++) {
    s[i].prev = i - 1;
    s[i].next = i + 1 < n ? i + 1 : -1;
  }
  e->heap_len = 0;
  for (int32_t i = 0; i + 1 < n; i++)
    push_pair(e, i);
  while (e->heap_len > 0) {
    cand c = heap_pop(e);
    int32_t right = s[c.pos].next;
    /* Stale candidates: the left symbol was merged away, or either side
     * changed since the pair was queued. */
    if (s[c.pos].id < 0 || right < 0)
      continue;
    const bpe_merge_slot *m = fsdpc__bpe_merge_map_get(&e->b->merges, s[c.pos].id, s[right].id);
    if (!m || m->new_id != c.new_id || m->rank != c.rank)
      continue;
    s[c.pos].id = c.new_id;
    s[c.pos].b1 = s[right].b1;
    s[right].id = -1;
    s[c.pos].next = s[right].next;
    if (s[right].next >= 0)
      s[s[right].next].prev = c.pos;
    if (s[c.pos].prev >= 0)
      push_pair(e, s[c.pos].prev);
    push_pair(e, c.pos);
  }
  for (int32_t i = 0; i >= 0; i = s[i].next)
    emit(e, s[i].id, s[i].b0, s[i].b1);
}

/* One byte-level pre-token: word bytes p (n > 0); e->wbase/wmap set. */
static void encode_pretoken(enc *e, const unsigned char *p, size_t n) {
  const bpe *b = e->b;
  if (n == 1) {
    emit(e, b->byte_id[p[0]], 0, 1);
    return;
  }
  if (b->ignore_merges) {
    int32_t id = fsdpc__bpe_str_map_get(b, (const char *)p, n);
    if (id >= 0) {
      emit(e, id, 0, (int32_t)n);
      return;
    }
  }
  if (n > INT32_MAX / 4) {
    e->st = fsdpc__fail(e->err, FSDPC_INVALID_USAGE,
                        "bpe tokenizer: a pre-token of %zu bytes is too long", n);
    return;
  }
  if (!reserve_syms(e, (int64_t)n))
    return;
  for (size_t i = 0; i < n; i++)
    e->syms[i] = (sym){.id = b->byte_id[p[i]], .b0 = (int32_t)i, .b1 = (int32_t)i + 1};
  merge_word(e, (int32_t)n);
}

/* Points the word context at piece offset off (piece mapped by base or map). */
static void set_word(enc *e, size_t base, const span *map, size_t off) {
  e->wmap = map ? map + off : NULL;
  e->wbase = base + off;
}

/* Byte-level piece s (n bytes) whose byte i is text byte base + i or map[i]:
 * regex split, Isolated. */
static void split_byte_level(enc *e, const unsigned char *s, size_t n, size_t base,
                             const span *map) {
  const bpe *b = e->b;
  if (!b->re) {
    set_word(e, base, map, 0);
    encode_pretoken(e, s, n);
    return;
  }
  size_t off = 0, prev = 0;
  while (off < n && e->st == FSDPC_OK) {
    int rc = pcre2_match(b->re, s, n, off, 0, e->md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* deep backtracking: the interpreter uses the heap */
      rc = pcre2_match(b->re, s, n, off, PCRE2_NO_JIT, e->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      e->st =
          fsdpc__fail(e->err, FSDPC_INVALID_USAGE, "%s: pre_tokenizer regex failed at byte %zu: %s",
                      b->path, off, (const char *)msg);
      return;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
    size_t ms = ov[0], me = ov[1];
    if (me == ms) { /* an empty match splits nothing; step over one character */
      off = ms + 1;
      while (off < n && (s[off] & 0xc0) == 0x80)
        off++;
      continue;
    }
    if (ms > prev) {
      set_word(e, base, map, prev);
      encode_pretoken(e, s + prev, ms - prev);
    }
    set_word(e, base, map, ms);
    encode_pretoken(e, s + ms, me - ms);
    prev = off = me;
  }
  if (prev < n && e->st == FSDPC_OK) {
    set_word(e, base, map, prev);
    encode_pretoken(e, s + prev, n - prev);
  }
}

static int reserve_norm(enc *e, size_t need) {
  if (need <= e->norm_cap)
    return 1;
  char *nb = realloc(e->norm, need);
  if (nb)
    e->norm = nb;
  span *nm = nb ? realloc(e->nmap, need * sizeof *nm) : NULL;
  if (nm)
    e->nmap = nm;
  if (!nb || !nm) {
    oom(e);
    return 0;
  }
  e->norm_cap = need;
  return 1;
}

/* Maps the NFC bytes u (m) of s (n) back to s, segment by segment: a
 * segment is a starter (combining class 0) and the non-starters after it.
 * A segment that NFC leaves alone maps byte for byte; a changed one maps
 * each of its output bytes to the whole segment, as HF's alignments give a
 * decomposed or composed character the range of the characters it came
 * from. Returns 0 (map then partly written) where the segments' NFCs do not add up
 * to u (a starter composing with the one before, as Hangul jamo do). */
static int nfc_align_segments(const unsigned char *s, size_t n, const unsigned char *u, size_t m,
                              size_t base, span *map) {
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    ucs4_t c;
    size_t j = i + (size_t)u8_mbtouc(&c, s + i, n - i);
    while (j < n) {
      int l = u8_mbtouc(&c, s + j, n - j);
      if (uc_combining_class(c) == 0)
        break;
      j += (size_t)l;
    }
    uint8_t buf[64];
    size_t len = sizeof buf;
    uint8_t *t = u8_normalize(UNINORM_NFC, s + i, j - i, buf, &len);
    if (!t)
      return 0;
    int ok = k + len <= m && memcmp(t, u + k, len) == 0;
    int same = len == j - i && memcmp(t, s + i, len) == 0;
    if (t != buf)
      free(t);
    if (!ok)
      return 0;
    for (size_t q = 0; q < len; q++) {
      map[k + q][0] = base + (same ? i + q : i);
      map[k + q][1] = base + (same ? i + q + 1 : j);
    }
    k += len;
    i = j;
  }
  return k == m;
}

/* NFC of a byte-level piece (Qwen2's normalizer), through libunistring.
 * Text that is ASCII, not valid UTF-8, or already NFC is encoded as it is.
 * Otherwise the normalized bytes map to the text per segment
 * (nfc_align_segments), or where that fails through their common prefix
 * and suffix, bytes in the changed middle mapping to the whole changed
 * range. */
static void encode_piece_nfc(enc *e, const unsigned char *s, size_t n, size_t base) {
  size_t i = 0;
  while (i < n && s[i] < 0x80)
    i++;
  /* Invalid UTF-8 (which HF never sees) stays as it is: u8_normalize would
   * replace it. */
  if (i == n || u8_check(s, n) != NULL) {
    split_byte_level(e, s, n, base, NULL);
    return;
  }
  size_t m = 0;
  uint8_t *t = u8_normalize(UNINORM_NFC, s, n, NULL, &m);
  if (!t && errno != EILSEQ) {
    oom(e);
    return;
  }
  if (!t || (m == n && memcmp(t, s, n) == 0) || !reserve_norm(e, m + 1)) {
    free(t); /* invalid UTF-8 or already NFC: as it is */
    if (e->st == FSDPC_OK)
      split_byte_level(e, s, n, base, NULL);
    return;
  }
  memcpy(e->norm, t, m);
  free(t);
  const unsigned char *u = (const unsigned char *)e->norm;
  size_t pre = 0, suf = 0;
  while (pre < n && pre < m && s[pre] == u[pre])
    pre++;
  while (pre > 0 && (s[pre] & 0xc0) == 0x80) /* back to a character start */
    pre--;
  while (suf < n - pre && suf < m - pre && s[n - 1 - suf] == u[m - 1 - suf])
    suf++;
  while (suf > 0 && (s[n - suf] & 0xc0) == 0x80)
    suf--;
  int fine = nfc_align_segments(s, n, u, m, base, e->nmap);
  for (size_t k = 0; k < m && !fine; k++) {
    size_t a, z;
    if (k < pre)
      a = k, z = k + 1;
    else if (k >= m - suf)
      a = n - (m - k), z = a + 1;
    else
      a = pre, z = n - suf;
    e->nmap[k][0] = base + a;
    e->nmap[k][1] = base + z;
  }
  /* split_byte_level reads e->norm and e->nmap only: nothing reallocates them
   * until it returns. */
  split_byte_level(e, u, m, 0, e->nmap);
}

/* Length of the UTF-8 character at s (n bytes left); 1 for an invalid byte,
 * which then falls back to its <0xXX> token. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  size_t l = s[0] < 0x80             ? 1
             : (s[0] & 0xe0) == 0xc0 ? 2
             : (s[0] & 0xf0) == 0xe0 ? 3
             : (s[0] & 0xf8) == 0xf0 ? 4
                                     : 1;
  if (l > n)
    return 1;
  for (size_t i = 1; i < l; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 1;
  return l;
}

/* One SentencePiece-style word: normalized bytes [w0, w1) of e->norm. */
static void encode_sp_word(enc *e, size_t w0, size_t w1) {
  const bpe *b = e->b;
  const unsigned char *p = (const unsigned char *)e->norm + w0;
  size_t k = w1 - w0;
  e->wmap = e->nmap + w0;
  int32_t id = fsdpc__bpe_str_map_get(b, (const char *)p, k);
  if (b->ignore_merges && id >= 0) {
    emit(e, id, 0, (int32_t)k);
    return;
  }
  if (!reserve_syms(e, (int64_t)k))
    return;
  int32_t m = 0;
  for (size_t i = 0; i < k;) {
    size_t l = utf8_len(p + i, k - i);
    id = fsdpc__bpe_str_map_get(b, (const char *)p + i, l);
    if (id >= 0) {
      e->syms[m++] = (sym){.id = id, .b0 = (int32_t)i, .b1 = (int32_t)(i + l)};
    } else if (b->byte_fallback) {
      for (size_t j = 0; j < l; j++)
        e->syms[m++] =
            (sym){.id = b->byte_id[p[i + j]], .b0 = (int32_t)(i + j), .b1 = (int32_t)(i + j + 1)};
    } else if (b->unk >= 0) {
      e->syms[m++] = (sym){.id = b->unk, .b0 = (int32_t)i, .b1 = (int32_t)(i + l)};
    } else {
      e->st = fsdpc__fail(e->err, FSDPC_INVALID_USAGE,
                          "%s: character at byte %zu is not in the vocab and the tokenizer has "
                          "neither byte_fallback nor unk_token",
                          b->path, e->nmap[w0 + i][0]);
      return;
    }
    i += l;
  }
  merge_word(e, m);
}

static const char ms_bytes[] = "\xe2\x96\x81"; /* U+2581 */

/* SentencePiece-style piece s (n bytes) at text byte base: " " -> "▁", a
 * "▁" prepended per b->prepend, split before each "▁" if b->split. */
static void encode_piece_sentencepiece(enc *e, const unsigned char *s, size_t n, size_t base) {
  const bpe *b = e->b;
  if (n > INT32_MAX / 16) {
    e->st = fsdpc__fail(e->err, FSDPC_INVALID_USAGE,
                        "bpe tokenizer: a text of %zu bytes is too long", n);
    return;
  }
  if (!reserve_norm(e, 3 * n + 3))
    return;
  size_t k = 0;
  int starts_ms = s[0] == ' ' || (n >= 3 && memcmp(s, ms_bytes, 3) == 0);
  int prepend = b->prepend == BPE_PREPEND_ALWAYS || (b->prepend == BPE_PREPEND_FIRST && base == 0);
  if (prepend && !(b->prepend_if_absent && starts_ms)) {
    /* The prepended "▁" stands for the piece's first character, as HF's
     * NormalizedString::prepend aligns it. */
    size_t l = utf8_len(s, n);
    for (int j = 0; j < 3; j++) {
      e->norm[k] = ms_bytes[j];
      e->nmap[k][0] = base;
      e->nmap[k++][1] = base + l;
    }
  }
  for (size_t i = 0; i < n;) {
    size_t l = utf8_len(s + i, n - i);
    if (s[i] == ' ') {
      for (int j = 0; j < 3; j++) {
        e->norm[k] = ms_bytes[j];
        e->nmap[k][0] = base + i;
        e->nmap[k++][1] = base + i + 1;
      }
    } else {
      for (size_t j = 0; j < l; j++) {
        e->norm[k] = (char)s[i + j];
        e->nmap[k][0] = base + i;
        e->nmap[k++][1] = base + i + l;
      }
    }
    i += l;
  }
  if (!b->split) {
    encode_sp_word(e, 0, k);
    return;
  }
  size_t w0 = 0; /* MergedWithNext: each "▁" starts a word */
  for (size_t i = 1; i + 3 <= k && e->st == FSDPC_OK; i++) {
    if (memcmp(e->norm + i, ms_bytes, 3) == 0) {
      encode_sp_word(e, w0, i);
      w0 = i;
      i += 2;
    }
  }
  if (e->st == FSDPC_OK)
    encode_sp_word(e, w0, k);
}

/* A piece of text between added tokens: bytes [p0, p1) of the text. */
static void encode_piece(enc *e, const char *text, size_t p0, size_t p1) {
  if (p1 == p0 || e->st != FSDPC_OK)
    return;
  const unsigned char *s = (const unsigned char *)text + p0;
  if (e->b->mode == BPE_SENTENCEPIECE)
    encode_piece_sentencepiece(e, s, p1 - p0, p0);
  else if (e->b->nfc)
    encode_piece_nfc(e, s, p1 - p0, p0);
  else
    split_byte_level(e, s, p1 - p0, p0, NULL);
}

/* Runs the whole encode into e (ids, cap, offs, grow set by the caller). */
static void run_encode(enc *e, const char *text, size_t len) {
  const bpe *b = e->b;
  if (b->re && !(e->md = pcre2_match_data_create_from_pattern(b->re, NULL))) {
    oom(e);
    return;
  }
  const unsigned char *t = (const unsigned char *)text;
  size_t piece = 0;
  for (size_t pos = 0; pos < len && e->st == FSDPC_OK;) {
    int32_t lo = b->first_start[t[pos]], hi = b->first_start[t[pos] + 1];
    const bpe_added *hit = NULL;
    for (int32_t k = lo; k < hi; k++) { /* longest first */
      const bpe_added *a = &b->added[b->first_idx[k]];
      if ((a->special && !b->parse_special) || (size_t)a->len > len - pos ||
          memcmp(t + pos, a->content, (size_t)a->len) != 0)
        continue;
      hit = a;
      break;
    }
    if (!hit) {
      pos++;
      continue;
    }
    encode_piece(e, text, piece, pos);
    emit_at(e, hit->id, pos, pos + (size_t)hit->len);
    pos += (size_t)hit->len;
    piece = pos;
  }
  encode_piece(e, text, piece, len);
  free(e->syms);
  free(e->heap);
  free(e->norm);
  free(e->nmap);
  pcre2_match_data_free(e->md);
}

fsdpc_status fsdpc__bpe_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                               int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err) {
  enc e = {.b = tok->impl, .ids = ids, .cap = cap, .err = err, .st = FSDPC_OK};
  run_encode(&e, text, len);
  *n_out = e.n;
  if (e.st != FSDPC_OK)
    return e.st;
  if (e.n > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "bpe tokenizer: %zu bytes need %" PRId64 " ids, buffer holds %" PRId64, len,
                       e.n, cap);
  return FSDPC_OK;
}

fsdpc_status fsdpc__bpe_encode_offsets(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                       int32_t **ids, size_t (**offsets)[2], int64_t *n,
                                       fsdpc_err *err) {
  enc e = {.b = tok->impl, .grow = 1, .err = err, .st = FSDPC_OK};
  e.ids = malloc(64 * sizeof *e.ids);
  e.offs = offsets ? malloc(64 * sizeof *e.offs) : NULL;
  e.cap = 64;
  if (!e.ids || (offsets && !e.offs))
    oom(&e);
  else
    run_encode(&e, text, len);
  if (e.st != FSDPC_OK) {
    free(e.ids);
    free(e.offs);
    *ids = NULL;
    if (offsets)
      *offsets = NULL;
    *n = 0;
    return e.st;
  }
  /* HF offsets are in characters: widen each range to whole characters. */
  if (e.offs)
    fsdpc__tok_widen_offsets(text, len, e.offs, e.n);
  *ids = e.ids;
  if (offsets)
    *offsets = e.offs;
  *n = e.n;
  return FSDPC_OK;
}
