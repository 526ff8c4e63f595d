/* Hugging Face BPE tokenizer (tokenizer.json): encode and decode through the
 * common tokenizer interface. Loading is in tokenizer_bpe_load.c.
 *
 * Encode, per text:
 *   1. Added tokens are cut out first, leftmost then longest (special ones
 *      only when parse_special is on); the pieces between them go on.
 *   2. Byte-level (Llama 3): the Split regex (PCRE2, UTF + UCP, JIT) cuts a
 *      piece into pre-tokens, Isolated: matches and the gaps between them.
 *      Invalid UTF-8 never matches, so such bytes end up in gap pre-tokens
 *      and still encode (as byte tokens). SentencePiece (Llama 2): the piece
 *      becomes "▁" + piece with " " -> "▁", one word, unknown characters
 *      fall back to <0xXX> tokens.
 *   3. With ignore_merges a pre-token found whole in the vocab is one id.
 *      Otherwise BPE: symbols start as single bytes (characters), and the
 *      adjacent pair of lowest merge rank (leftmost on ties) is merged until
 *      no pair has a rank. A binary heap of candidate pairs with lazy
 *      invalidation makes this O(n log n) in the pre-token length n, the
 *      same order Hugging Face's Word::merge_all uses. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/tokenizer_bpe_internal.h"

typedef struct sym {
  int32_t id;         /* -1 once merged into its left neighbour */
  int32_t prev, next; /* linked list over the word, -1 at the ends */
} sym;

typedef struct cand {
  int32_t rank, pos, new_id; /* merge (pos, next(pos)) -> new_id */
} cand;

/* Per-call state: encode is const on the tokenizer and may run on several
 * threads at once, so every scratch buffer lives here. */
typedef struct enc {
  const bpe *b;
  int32_t *ids; /* (cap) */
  int64_t cap, n;
  sym *syms;
  cand *heap;
  int64_t syms_cap, heap_len;
  char *norm; /* SentencePiece: the normalized piece */
  size_t norm_cap;
  pcre2_match_data *md;
  fsdpc_err *err;
  fsdpc_status st;
} enc;

static void emit(enc *e, int32_t id) {
  if (e->n < e->cap)
    e->ids[e->n] = id;
  e->n++;
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
    e->st = fsdpc__fail(e->err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
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

/* BPE over e->syms[0..n) (ids filled in), then emits the result. */
static void merge_word(enc *e, int32_t n) {
  sym *s = e->syms;
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
    s[right].id = -1;
    s[c.pos].next = s[right].next;
    if (s[right].next >= 0)
      s[s[right].next].prev = c.pos;
    if (s[c.pos].prev >= 0)
      push_pair(e, s[c.pos].prev);
    push_pair(e, c.pos);
  }
  for (int32_t i = 0; i >= 0; i = s[i].next)
    emit(e, s[i].id);
}

/* One byte-level pre-token: bytes p (n > 0). */
static void encode_pretoken(enc *e, const unsigned char *p, size_t n) {
  const bpe *b = e->b;
  if (n == 1) {
    emit(e, b->byte_id[p[0]]);
    return;
  }
  if (b->ignore_merges) {
    int32_t id = fsdpc__bpe_str_map_get(b, (const char *)p, n);
    if (id >= 0) {
      emit(e, id);
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
    e->syms[i].id = b->byte_id[p[i]];
  merge_word(e, (int32_t)n);
}

/* Byte-level piece (no added tokens inside): regex split, Isolated. */
static void encode_piece_byte_level(enc *e, const unsigned char *s, size_t n) {
  const bpe *b = e->b;
  if (!b->re) {
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
    if (ms > prev)
      encode_pretoken(e, s + prev, ms - prev);
    encode_pretoken(e, s + ms, me - ms);
    prev = off = me;
  }
  if (prev < n && e->st == FSDPC_OK)
    encode_pretoken(e, s + prev, n - prev);
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

/* SentencePiece piece: "▁" + piece with " " -> "▁", then BPE over characters. */
static void encode_piece_sentencepiece(enc *e, const unsigned char *s, size_t n) {
  const bpe *b = e->b;
  size_t need = 3 * n + 3;
  if (need > e->norm_cap) {
    char *nb = realloc(e->norm, need);
    if (!nb) {
      e->st = fsdpc__fail(e->err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
      return;
    }
    e->norm = nb;
    e->norm_cap = need;
  }
  size_t k = 0;
  memcpy(e->norm, "\xe2\x96\x81", 3);
  k = 3;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == ' ') {
      memcpy(e->norm + k, "\xe2\x96\x81", 3);
      k += 3;
    } else {
      e->norm[k++] = (char)s[i];
    }
  }
  if (k > INT32_MAX / 4 || !reserve_syms(e, (int64_t)k)) {
    if (e->st == FSDPC_OK)
      e->st = fsdpc__fail(e->err, FSDPC_INVALID_USAGE,
                          "bpe tokenizer: a text of %zu bytes is too long", n);
    return;
  }
  const unsigned char *p = (const unsigned char *)e->norm;
  int32_t m = 0;
  for (size_t i = 0; i < k;) {
    size_t l = utf8_len(p + i, k - i);
    int32_t id = fsdpc__bpe_str_map_get(b, (const char *)p + i, l);
    if (id >= 0) {
      e->syms[m++].id = id;
    } else if (b->byte_fallback) {
      for (size_t j = 0; j < l; j++)
        e->syms[m++].id = b->byte_id[p[i + j]];
    } else if (b->unk >= 0) {
      e->syms[m++].id = b->unk;
    } else {
      e->st = fsdpc__fail(e->err, FSDPC_INVALID_USAGE,
                          "%s: character at byte %zu is not in the vocab and the tokenizer has "
                          "neither byte_fallback nor unk_token",
                          b->path, i);
      return;
    }
    i += l;
  }
  merge_word(e, m);
}

static void encode_piece(enc *e, const char *s, size_t n) {
  if (n == 0 || e->st != FSDPC_OK)
    return;
  if (e->b->mode == BPE_BYTE_LEVEL)
    encode_piece_byte_level(e, (const unsigned char *)s, n);
  else
    encode_piece_sentencepiece(e, (const unsigned char *)s, n);
}

static fsdpc_status bpe_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                               int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err) {
  const bpe *b = tok->impl;
  enc e = {.b = b, .ids = ids, .cap = cap, .err = err, .st = FSDPC_OK};
  if (b->re && !(e.md = pcre2_match_data_create_from_pattern(b->re, NULL))) {
    *n_out = 0;
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
  }
  const unsigned char *t = (const unsigned char *)text;
  size_t piece = 0;
  for (size_t pos = 0; pos < len && e.st == FSDPC_OK;) {
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
    encode_piece(&e, text + piece, pos - piece);
    emit(&e, hit->id);
    pos += (size_t)hit->len;
    piece = pos;
  }
  encode_piece(&e, text + piece, len - piece);
  free(e.syms);
  free(e.heap);
  free(e.norm);
  pcre2_match_data_free(e.md);
  *n_out = e.n;
  if (e.st != FSDPC_OK)
    return e.st;
  if (e.n > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "bpe tokenizer: %zu bytes need %" PRId64 " ids, buffer holds %" PRId64, len,
                       e.n, cap);
  return FSDPC_OK;
}

static fsdpc_status bpe_decode(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n, char *out,
                               size_t cap, size_t *len_out, fsdpc_err *err) {
  const bpe *b = tok->impl;
  size_t k = 0;
  int sp = b->mode == BPE_SENTENCEPIECE, first = 1;
  /* Writes byte c, counting past cap; SentencePiece's Strip decoder drops
   * one leading space of the whole text. */
#define PUT(c)                                                                                     \
  do {                                                                                             \
    char c_ = (char)(c);                                                                           \
    if (!(sp && first && c_ == ' ')) {                                                             \
      if (k < cap)                                                                                 \
        out[k] = c_;                                                                               \
      k++;                                                                                         \
    }                                                                                              \
    first = 0;                                                                                     \
  } while (0)
  for (int64_t i = 0; i < n; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= b->vocab_size || b->len[id] < 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "bpe tokenizer: id %" PRId32 " at position %" PRId64
                         " is not in its vocabulary [0, %d)",
                         id, i, b->vocab_size);
    if (id == b->bos || id == b->eos || id == b->pad)
      continue;
    const char *s = b->arena + b->off[id];
    int32_t l = b->len[id];
    if (sp && b->fallback_byte[id] >= 0) {
      PUT(b->fallback_byte[id]);
    } else if (sp && !b->is_added[id]) {
      for (int32_t j = 0; j < l; j++) {
        if (j + 3 <= l && memcmp(s + j, "\xe2\x96\x81", 3) == 0) {
          PUT(' ');
          j += 2;
        } else {
          PUT(s[j]);
        }
      }
    } else {
      for (int32_t j = 0; j < l; j++)
        PUT(s[j]);
    }
  }
#undef PUT
  *len_out = k;
  if (k > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "bpe tokenizer: decoding needs %zu bytes, buffer holds %zu", k, cap);
  return FSDPC_OK;
}

static int32_t bpe_bos(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->bos;
}
static int32_t bpe_eos(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->eos;
}
static int32_t bpe_pad(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->pad;
}
static int32_t bpe_vocab(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->vocab_size;
}
/* Byte-level: each id covers at least one input byte. SentencePiece adds one
 * "▁" per piece, so at most len + pieces <= 2 * len ids. */
static int32_t bpe_max_ids_per_byte(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->mode == BPE_SENTENCEPIECE ? 2 : 1;
}
static void bpe_destroy(fsdpc_tokenizer *tok) {
  fsdpc__bpe_free(tok->impl);
  free(tok);
}

static const fsdpc_tokenizer_vtable bpe_vtable = {
    /* .name             = */ "bpe",
    /* .encode           = */ bpe_encode,
    /* .decode           = */ bpe_decode,
    /* .bos              = */ bpe_bos,
    /* .eos              = */ bpe_eos,
    /* .pad              = */ bpe_pad,
    /* .vocab_size       = */ bpe_vocab,
    /* .max_ids_per_byte = */ bpe_max_ids_per_byte,
    /* .destroy          = */ bpe_destroy,
};

void fsdpc__bpe_opts_default(fsdpc_bpe_opts *o) {
  memset(o, 0, sizeof *o);
  o->parse_special = 1;
  o->bos_id = o->eos_id = o->pad_id = FSDPC_BPE_AUTO;
}

/* Resolves one special id: an explicit id, else an explicit name, else the
 * name tokenizer_config.json gives, else the first well-known name found. */
static fsdpc_status pick_special(bpe *b, const char *what, int32_t id, const char *name,
                                 const char *cfg_name, const char *const *known, int32_t *out,
                                 fsdpc_err *err) {
  *out = -1;
  if (id != FSDPC_BPE_AUTO) {
    if (id < -1 || id >= b->vocab_size || (id >= 0 && b->len[id] < 0))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s id %" PRId32 " is not in the vocabulary [0, %" PRId32 ")", b->path,
                         what, id, b->vocab_size);
    *out = id;
    return FSDPC_OK;
  }
  const char *want = name ? name : cfg_name;
  if (want) {
    *out = fsdpc__bpe_added_find(b, want);
    if (*out < 0)
      *out = fsdpc__bpe_str_map_get(b, want, strlen(want));
    if (*out < 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s token '%s'%s is not in the vocabulary",
                         b->path, what, want, name ? "" : " (from tokenizer_config.json)");
    return FSDPC_OK;
  }
  for (int i = 0; known[i] && *out < 0; i++)
    *out = fsdpc__bpe_added_find(b, known[i]);
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokenizer_bpe_create(const char *path, const fsdpc_bpe_opts *opts,
                                         fsdpc_tokenizer **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_bpe_opts def;
  if (!opts) {
    fsdpc__bpe_opts_default(&def);
    opts = &def;
  }
  /* A folder means its tokenizer.json; tokenizer_config.json beside the file
   * names BOS/EOS/PAD when present (as transformers reads it). */
  size_t plen = strlen(path);
  char *file = malloc(plen + 16), *dir = malloc(plen + 2);
  if (!file || !dir) {
    free(file);
    free(dir);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
  }
  struct stat stt;
  if (stat(path, &stt) == 0 && S_ISDIR(stt.st_mode)) {
    memcpy(dir, path, plen + 1);
    memcpy(file, path, plen);
    memcpy(file + plen, "/tokenizer.json", 16);
  } else {
    memcpy(file, path, plen + 1);
    const char *slash = strrchr(path, '/');
    size_t dlen = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, slash ? path : ".", slash ? dlen : 1);
    dir[slash ? dlen : 1] = '\0';
  }
  bpe *b;
  fsdpc_status st = fsdpc__bpe_load(file, &b, err);
  free(file);
  if (st) {
    free(dir);
    return st;
  }
  b->parse_special = opts->parse_special;
  fsdpc__bpe_config_names names;
  st = fsdpc__bpe_read_config(dir, &names, err);
  free(dir);
  static const char *const bos_known[] = {"<|begin_of_text|>", "<s>", "<|startoftext|>", NULL};
  static const char *const eos_known[] = {"<|end_of_text|>", "</s>", "<|endoftext|>", NULL};
  static const char *const pad_known[] = {"<pad>", NULL};
  if (!st)
    st = pick_special(b, "BOS", opts->bos_id, opts->bos_token, names.bos, bos_known, &b->bos, err);
  if (!st)
    st = pick_special(b, "EOS", opts->eos_id, opts->eos_token, names.eos, eos_known, &b->eos, err);
  if (!st)
    st = pick_special(b, "PAD", opts->pad_id, opts->pad_token, names.pad, pad_known, &b->pad, err);
  fsdpc__bpe_config_names_free(&names);
  fsdpc_tokenizer *tok = st ? NULL : calloc(1, sizeof *tok);
  if (!st && !tok)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
  if (st) {
    fsdpc__bpe_free(b);
    return st;
  }
  tok->vt = &bpe_vtable;
  tok->impl = b;
  *out = tok;
  return FSDPC_OK;
}
