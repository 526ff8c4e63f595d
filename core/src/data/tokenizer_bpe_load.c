/* Reads a Hugging Face tokenizer.json (cJSON) into the BPE tables, checking
 * every component against what the encoder implements (the pipeline around
 * the model is checked in tokenizer_bpe_pipeline.c). Anything else is
 * refused with one line that names the file and the component, e.g.
 *   tok/tokenizer.json: model type 'Unigram' is not supported (only BPE)
 * Strings from the file are escaped before they reach a message. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tokenizer_bpe_internal.h"

#define MAX_VOCAB (1 << 26) /* ids beyond this are surely a corrupt file */

/* ---- small helpers ----------------------------------------------------- */

/* Reads a regular file whole (a FIFO or device is refused before any
 * blocking read: EINVAL). */
static char *read_file(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static void line_col(const char *text, size_t off, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else if (((unsigned char)text[i] & 0xc0) != 0x80) { /* count characters, not bytes */
      (*col)++;
    }
  }
}

static const cJSON *get(const cJSON *obj, const char *key) {
  return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static const char *get_str(const cJSON *obj, const char *key) {
  const cJSON *v = get(obj, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_null(const cJSON *v) {
  return !v || cJSON_IsNull(v);
}

/* Byte <-> code point of GPT-2's bytes_to_unicode(): printable Latin-1
 * bytes stand for themselves, the other 68 bytes for U+0100.. in order. */
static void byte_level_tables(uint32_t byte_cp[256], int16_t cp_byte[324]) {
  for (int i = 0; i < 324; i++)
    cp_byte[i] = -1;
  int extra = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byte_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + extra++);
    cp_byte[byte_cp[b]] = (int16_t)b;
  }
}

/* Decodes one UTF-8 character at s; returns its length (0 if invalid). */
static int utf8_next(const unsigned char *s, uint32_t *cp) {
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  if ((s[0] & 0xe0) == 0xc0 && (s[1] & 0xc0) == 0x80) {
    *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    return 2;
  }
  if ((s[0] & 0xf0) == 0xe0 && (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80) {
    *cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    return 3;
  }
  if ((s[0] & 0xf8) == 0xf0 && (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80 &&
      (s[3] & 0xc0) == 0x80) {
    *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
          (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    return 4;
  }
  return 0;
}

/* Token string as written in the file -> the raw bytes it stands for (into
 * out, which holds at least strlen(s) bytes). Byte-level strings map each
 * character back to one byte; returns -1 for a character outside the
 * byte-level alphabet. */
static int64_t token_bytes(const bpe *b, const int16_t cp_byte[324], const char *s, char *out) {
  size_t n = strlen(s);
  if (b->mode != BPE_BYTE_LEVEL) {
    memcpy(out, s, n);
    return (int64_t)n;
  }
  int64_t k = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int l = utf8_next((const unsigned char *)s + i, &cp);
    if (!l || cp >= 324 || cp_byte[cp] < 0)
      return -1;
    out[k++] = (char)cp_byte[cp];
    i += (size_t)l;
  }
  return k;
}

int fsdpc__bpe_arena_set(bpe *b, int32_t id, const char *s, size_t n) {
  /* The arena always exists once a token is set, so that an empty token's
   * pointer (arena + off) is never arithmetic on NULL. */
  if (b->arena_len + (int64_t)n > b->arena_cap || !b->arena) {
    int64_t cap = b->arena_cap ? b->arena_cap : 1 << 16;
    while (cap < b->arena_len + (int64_t)n)
      cap *= 2;
    char *a = realloc(b->arena, (size_t)cap);
    if (!a)
      return 0;
    b->arena = a;
    b->arena_cap = cap;
  }
  memcpy(b->arena + b->arena_len, s, n);
  b->off[id] = b->arena_len;
  b->len[id] = (int32_t)n;
  b->arena_len += (int64_t)n;
  return 1;
}

int32_t fsdpc__bpe_added_find(const bpe *b, const char *s) {
  for (int32_t i = 0; i < b->n_added; i++)
    if (strcmp(b->added[i].content, s) == 0)
      return b->added[i].id;
  return -1;
}

void fsdpc__bpe_free(bpe *b) {
  if (!b)
    return;
  for (int32_t i = 0; i < b->n_added; i++)
    free(b->added[i].content);
  free(b->added);
  free(b->first_idx);
  free(b->arena);
  free(b->off);
  free(b->len);
  free(b->is_added);
  for (int32_t i = 0; b->str && i < b->vocab_size; i++)
    free(b->str[i]);
  free(b->str);
  free(b->fallback_byte);
  fsdpc__bpe_str_map_free(&b->vocab);
  fsdpc__bpe_merge_map_free(&b->merges);
  pcre2_code_free(b->re);
  free(b->path);
  free(b);
}

/* ---- components -------------------------------------------------------- */

#define FAIL(...) fsdpc__fail(err, FSDPC_INVALID_USAGE, __VA_ARGS__)

/* Escaped copies of file strings for messages, ESC(0..1) in one message. */
static _Thread_local char esc_buf[2][96];
#define ESC(slot, s) fsdpc__tok_esc(esc_buf[slot], sizeof esc_buf[slot], (s))

static fsdpc_status check_model(const bpe *b, const cJSON *model, fsdpc_err *err) {
  const char *p = b->path;
  if (!cJSON_IsObject(model))
    return FAIL("%s: model: expected an object", p);
  const char *type = get_str(model, "type");
  if (type && strcmp(type, "BPE") != 0)
    return FAIL("%s: model type '%s' is not supported (only BPE)", p, ESC(0, type));
  if (!cJSON_IsObject(get(model, "vocab")))
    return FAIL("%s: model.vocab: expected an object of token -> id", p);
  if (!cJSON_IsArray(get(model, "merges")))
    return FAIL("%s: model.merges: expected an array", p);
  const cJSON *drop = get(model, "dropout");
  if (!is_null(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0.0))
    return FAIL("%s: model.dropout is not supported (BPE dropout is for training tokenizers)", p);
  const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const cJSON *v = get(model, keys[i]);
    if (!is_null(v) && !(cJSON_IsString(v) && v->valuestring[0] == '\0'))
      return FAIL("%s: model.%s is not supported yet", p, keys[i]);
  }
  return FSDPC_OK;
}

static fsdpc_status check_id(const bpe *b, const char *where, const char *tok, const cJSON *v,
                             int32_t *id, fsdpc_err *err) {
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= MAX_VOCAB ||
      v->valuedouble != (double)(int32_t)v->valuedouble)
    return FAIL("%s: %s: token '%s' has id %s; expected an integer in [0, %d)", b->path, where,
                ESC(0, tok), cJSON_IsNumber(v) ? "out of range" : "that is not a number",
                MAX_VOCAB);
  *id = (int32_t)v->valuedouble;
  return FSDPC_OK;
}

/* Sizes the id tables, fills vocab and added tokens. */
static fsdpc_status load_vocab(bpe *b, const cJSON *model, const cJSON *added,
                               const int16_t cp_byte[324], fsdpc_err *err) {
  const char *p = b->path;
  const cJSON *vocab = get(model, "vocab"), *it;
  int32_t max_id = -1, id;
  int64_t n_vocab = 0;
  size_t longest = 0;
  cJSON_ArrayForEach(it, vocab) {
    FSDPC_TRY(check_id(b, "model.vocab", it->string, it, &id, err));
    max_id = id > max_id ? id : max_id;
    n_vocab++;
    size_t l = strlen(it->string);
    longest = l > longest ? l : longest;
  }
  if (!is_null(added) && !cJSON_IsArray(added))
    return FAIL("%s: added_tokens: expected an array", p);
  /* Counted apart from b->n_added, which must only ever count entries of
   * b->added that exist (fsdpc__bpe_free walks them on every error path). */
  int32_t n_added = 0;
  cJSON_ArrayForEach(it, added) {
    const char *content = get_str(it, "content");
    if (!content || !*content)
      return FAIL("%s: added_tokens[%d]: no content string", p, (int)n_added);
    FSDPC_TRY(check_id(b, "added_tokens", content, get(it, "id"), &id, err));
    max_id = id > max_id ? id : max_id;
    n_added++;
  }
  if (n_vocab == 0)
    return FAIL("%s: model.vocab is empty", p);
  b->vocab_size = max_id + 1;
  b->off = calloc((size_t)b->vocab_size, sizeof *b->off);
  b->len = malloc((size_t)b->vocab_size * sizeof *b->len);
  b->is_added = calloc((size_t)b->vocab_size, 1);
  b->str = calloc((size_t)b->vocab_size, sizeof *b->str);
  b->added = calloc((size_t)(n_added ? n_added : 1), sizeof *b->added);
  char *buf = malloc(longest + 1);
  if (!b->off || !b->len || !b->is_added || !b->str || !b->added || !buf ||
      !fsdpc__bpe_str_map_init(&b->vocab, n_vocab)) {
    free(buf);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", p);
  }
  memset(b->len, 0xff, (size_t)b->vocab_size * sizeof *b->len); /* -1: unused id */
  fsdpc_status st = FSDPC_OK;
  cJSON_ArrayForEach(it, vocab) {
    id = (int32_t)it->valuedouble;
    int64_t n = token_bytes(b, cp_byte, it->string, buf);
    if (n < 0) {
      st = FAIL("%s: model.vocab: token '%s' (id %d) has a character outside the byte-level "
                "alphabet",
                p, ESC(0, it->string), id);
      break;
    }
    if (b->len[id] >= 0) {
      st = FAIL("%s: model.vocab: id %d is used by two tokens", p, id);
      break;
    }
    if (!fsdpc__bpe_arena_set(b, id, buf, (size_t)n) || !(b->str[id] = strdup(it->string))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", p);
      break;
    }
    int32_t dup = fsdpc__bpe_str_map_put(b, id);
    if (dup >= 0) {
      st = FAIL("%s: model.vocab: tokens %d and %d are the same string", p, dup, id);
      break;
    }
  }
  free(buf);
  FSDPC_TRY(st);
  cJSON_ArrayForEach(it, added) {
    bpe_added *a = &b->added[b->n_added++];
    const char *content = get_str(it, "content");
    a->id = (int32_t)get(it, "id")->valuedouble;
    a->special = cJSON_IsTrue(get(it, "special"));
    const char *flags[] = {"single_word", "lstrip", "rstrip"};
    for (int f = 0; f < 3; f++)
      if (cJSON_IsTrue(get(it, flags[f])))
        return FAIL("%s: added_tokens: '%s' (id %d) has %s true, which is not supported yet", p,
                    ESC(0, content), a->id, flags[f]);
    a->content = strdup(content);
    if (!a->content || (!b->str[a->id] && !(b->str[a->id] = strdup(content))))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", p);
    a->len = (int32_t)strlen(content);
    b->is_added[a->id] = 1;
    /* GPT-2 lists <|endoftext|> in both the vocab and added_tokens: keep the
     * vocab's bytes for it. */
    if (b->len[a->id] < 0 && !fsdpc__bpe_arena_set(b, a->id, content, (size_t)a->len))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", p);
  }
  return FSDPC_OK;
}

static fsdpc_status load_merges(bpe *b, const cJSON *model, const int16_t cp_byte[324],
                                fsdpc_err *err) {
  const char *p = b->path;
  const cJSON *merges = get(model, "merges"), *it;
  if (!fsdpc__bpe_merge_map_init(&b->merges, cJSON_GetArraySize(merges)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", p);
  int32_t rank = 0;
  char *buf = NULL;
  size_t cap = 0;
  fsdpc_status st = FSDPC_OK;
  cJSON_ArrayForEach(it, merges) {
    const char *part[2] = {NULL, NULL};
    char *copy = NULL;
    if (cJSON_IsString(it)) { /* "a b": exactly one space */
      copy = strdup(it->valuestring);
      char *sp = copy ? strchr(copy, ' ') : NULL;
      if (sp && !strchr(sp + 1, ' ')) {
        *sp = '\0';
        part[0] = copy;
        part[1] = sp + 1;
      }
    } else if (cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
      part[0] = cJSON_GetArrayItem(it, 0)->valuestring;
      part[1] = cJSON_GetArrayItem(it, 1)->valuestring;
    }
    if (!part[0] || !*part[0] || !*part[1]) {
      free(copy);
      st = FAIL("%s: model.merges[%d]: expected \"left right\" or [\"left\", \"right\"]", p, rank);
      break;
    }
    size_t need = strlen(part[0]) + strlen(part[1]) + 1;
    if (need > cap) {
      char *nb = realloc(buf, need * 2);
      if (!nb) {
        free(copy);
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", p);
        break;
      }
      buf = nb;
      cap = need * 2;
    }
    int32_t ids[3];
    int64_t n0 = token_bytes(b, cp_byte, part[0], buf);
    int64_t n1 = n0 < 0 ? -1 : token_bytes(b, cp_byte, part[1], buf + n0);
    ids[0] = n0 < 0 ? -1 : fsdpc__bpe_str_map_get(b, buf, (size_t)n0);
    ids[1] = n1 < 0 ? -1 : fsdpc__bpe_str_map_get(b, buf + n0, (size_t)n1);
    ids[2] = n1 < 0 ? -1 : fsdpc__bpe_str_map_get(b, buf, (size_t)(n0 + n1));
    if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0) {
      const char *what = ids[0] < 0 ? part[0] : ids[1] < 0 ? part[1] : "their concatenation";
      st =
          FAIL("%s: model.merges[%d] ('%s' '%s'): %s%s%s is not in model.vocab", p, rank,
               ESC(0, part[0]), ESC(1, part[1]), ids[2] >= 0 || ids[0] < 0 || ids[1] < 0 ? "'" : "",
               ids[0] < 0 || ids[1] < 0 ? esc_buf[ids[0] < 0 ? 0 : 1] : what,
               ids[2] >= 0 || ids[0] < 0 || ids[1] < 0 ? "'" : "");
      free(copy);
      break;
    }
    free(copy);
    fsdpc__bpe_merge_map_put(&b->merges, ids[0], ids[1], rank, ids[2]);
    rank++;
  }
  free(buf);
  return st;
}

/* Byte-level: every byte must have its one-character token. SentencePiece:
 * <0xXX> tokens for byte fallback. */
static fsdpc_status load_bytes(bpe *b, const cJSON *model, const uint32_t byte_cp[256],
                               fsdpc_err *err) {
  for (int c = 0; c < 256; c++) {
    char s[8];
    if (b->mode == BPE_BYTE_LEVEL) {
      s[0] = (char)c;
      b->byte_id[c] = fsdpc__bpe_str_map_get(b, s, 1);
      if (b->byte_id[c] < 0)
        return FAIL("%s: model.vocab lacks the byte-level token U+%04X for byte 0x%02X", b->path,
                    byte_cp[c], c);
    } else {
      snprintf(s, sizeof s, "<0x%02X>", c);
      b->byte_id[c] = fsdpc__bpe_str_map_get(b, s, 6);
    }
  }
  if (b->mode == BPE_SENTENCEPIECE) {
    b->byte_fallback = cJSON_IsTrue(get(model, "byte_fallback"));
    const char *unk = get_str(model, "unk_token");
    b->unk = unk ? fsdpc__bpe_str_map_get(b, unk, strlen(unk)) : -1;
    if (b->byte_fallback)
      for (int c = 0; c < 256; c++)
        if (b->byte_id[c] < 0)
          return FAIL("%s: model.byte_fallback is true but model.vocab lacks <0x%02X>", b->path, c);
    b->fallback_byte = malloc((size_t)b->vocab_size * sizeof *b->fallback_byte);
    if (!b->fallback_byte)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", b->path);
    for (int32_t i = 0; i < b->vocab_size; i++)
      b->fallback_byte[i] = -1;
    for (int c = 0; c < 256 && b->byte_fallback; c++)
      b->fallback_byte[b->byte_id[c]] = (int16_t)c;
  }
  return FSDPC_OK;
}

/* Groups added tokens by first byte, longest first, so that encode tries
 * only the candidates for the byte at hand and takes the longest match. */
static fsdpc_status index_added(bpe *b, fsdpc_err *err) {
  b->first_idx = malloc((size_t)(b->n_added ? b->n_added : 1) * sizeof *b->first_idx);
  if (!b->first_idx)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", b->path);
  int32_t k = 0;
  for (int c = 0; c < 256; c++) {
    b->first_start[c] = k;
    int32_t start = k;
    for (int32_t i = 0; i < b->n_added; i++) {
      if ((unsigned char)b->added[i].content[0] != c)
        continue;
      int32_t j = k++; /* insertion sort by length, descending; stable otherwise */
      while (j > start && b->added[b->first_idx[j - 1]].len < b->added[i].len) {
        b->first_idx[j] = b->first_idx[j - 1];
        j--;
      }
      b->first_idx[j] = i;
    }
  }
  b->first_start[256] = k;
  return FSDPC_OK;
}

static fsdpc_status compile_regex(bpe *b, const char *pattern, int literal, fsdpc_err *err) {
  int code;
  PCRE2_SIZE at;
  uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0);
  b->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &code, &at, NULL);
  if (!b->re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    return FAIL("%s: pre_tokenizer Split regex does not compile at offset %zu: %s", b->path,
                (size_t)at, (const char *)msg);
  }
  /* JIT is an optimisation: without it (e.g. an unsupported CPU) pcre2_match
   * interprets the same pattern. */
  b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0;
  return FSDPC_OK;
}

fsdpc_status fsdpc__bpe_load(const char *path, bpe **out, fsdpc_err *err) {
  *out = NULL;
  size_t len = 0;
  char *text = read_file(path, &len);
  if (!text)
    return FAIL("%s: cannot read tokenizer: %s", path,
                errno == EINVAL ? "not a regular file" : strerror(errno));
  fsdpc_status st = fsdpc__bpe_load_mem(path, text, len, out, err);
  free(text);
  return st;
}

fsdpc_status fsdpc__bpe_load_mem(const char *path, const char *text, size_t len, bpe **out,
                                 fsdpc_err *err) {
  *out = NULL;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!root) {
    int line, col;
    line_col(text, end && end >= text && end <= text + len ? (size_t)(end - text) : 0, &line, &col);
    return FAIL("%s:%d:%d: invalid JSON", path, line, col);
  }
  bpe *b = calloc(1, sizeof *b);
  fsdpc_status st = FSDPC_OK;
  if (!b || !(b->path = strdup(path))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
    goto out;
  }
  b->bos = b->eos = b->pad = b->unk = -1;
  if (!cJSON_IsObject(root)) {
    st = FAIL("%s: expected a JSON object (a Hugging Face tokenizer.json)", path);
    goto out;
  }
  const cJSON *model = get(root, "model");
  if (!model) {
    st = FAIL("%s: no \"model\": not a Hugging Face tokenizer.json", path);
    goto out;
  }
  const char *pattern;
  int literal;
  uint32_t byte_cp[256];
  int16_t cp_byte[324];
  byte_level_tables(byte_cp, cp_byte);
  if ((st = check_model(b, model, err)) ||
      (st = fsdpc__bpe_check_pipeline(b, root, model, &pattern, &literal, err)) ||
      (st = load_vocab(b, model, get(root, "added_tokens"), cp_byte, err)) ||
      (st = load_merges(b, model, cp_byte, err)) || (st = load_bytes(b, model, byte_cp, err)) ||
      (st = index_added(b, err)))
    goto out;
  b->ignore_merges = cJSON_IsTrue(get(model, "ignore_merges"));
  fsdpc__bpe_read_post_processor(b, root);
  if (pattern)
    st = compile_regex(b, pattern, literal, err);
out:
  cJSON_Delete(root);
  if (st) {
    fsdpc__bpe_free(b);
    return st;
  }
  *out = b;
  return FSDPC_OK;
}

/* ---- tokenizer_config.json --------------------------------------------- */

static char *config_name(const cJSON *root, const char *key) {
  const cJSON *v = get(root, key);
  const char *s = cJSON_IsString(v) ? v->valuestring : get_str(v, "content");
  return s ? strdup(s) : NULL;
}

fsdpc_status fsdpc__bpe_read_config(const char *dir, fsdpc__bpe_config_names *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  out->add_bos = out->add_eos = -1;
  out->legacy = out->add_prefix_space = -1;
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  size_t len = 0;
  char *text = read_file(path, &len);
  if (!text)
    return errno == ENOENT ? FSDPC_OK : FAIL("%s: cannot read: %s", path, strerror(errno));
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!root) {
    int line, col;
    line_col(text, end && end >= text && end <= text + len ? (size_t)(end - text) : 0, &line, &col);
    free(text);
    return FAIL("%s:%d:%d: invalid JSON", path, line, col);
  }
  free(text);
  out->bos = config_name(root, "bos_token");
  out->eos = config_name(root, "eos_token");
  out->pad = config_name(root, "pad_token");
  out->unk = config_name(root, "unk_token");
  const cJSON *ab = get(root, "add_bos_token"), *ae = get(root, "add_eos_token");
  out->add_bos = cJSON_IsBool(ab) ? cJSON_IsTrue(ab) : -1;
  out->add_eos = cJSON_IsBool(ae) ? cJSON_IsTrue(ae) : -1;
  const cJSON *cls = get(root, "tokenizer_class");
  out->llama_class = cJSON_IsString(cls) && (strcmp(cls->valuestring, "LlamaTokenizer") == 0 ||
                                             strcmp(cls->valuestring, "LlamaTokenizerFast") == 0);
  const cJSON *lg = get(root, "legacy"), *aps = get(root, "add_prefix_space");
  out->legacy = cJSON_IsBool(lg) ? cJSON_IsTrue(lg) : -1;
  out->add_prefix_space = cJSON_IsBool(aps) ? cJSON_IsTrue(aps) : -1;
  cJSON_Delete(root);
  return FSDPC_OK;
}

void fsdpc__bpe_apply_llama_class(bpe *b, const fsdpc__bpe_config_names *n) {
  if (!n->llama_class || b->mode != BPE_SENTENCEPIECE)
    return;
  if (n->add_prefix_space == 0)
    b->prepend = BPE_PREPEND_NEVER;
  else
    b->prepend = n->legacy == 1 ? BPE_PREPEND_ALWAYS : BPE_PREPEND_FIRST;
  b->prepend_if_absent = 1;
  b->split = 0;
}

void fsdpc__bpe_config_names_free(fsdpc__bpe_config_names *n) {
  free(n->bos);
  free(n->eos);
  free(n->pad);
  free(n->unk);
}
