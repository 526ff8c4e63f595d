/* The prepared-data cache (prepare.h): its key, the name of its files and
 * the checks before one is reused. The key hashes contents, never paths or
 * times, so a moved dataset keeps its cache and an edited template does
 * not. */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/opts.h"
#include "data/prepare.h"
#include "data/tokfile.h"
#include "fsdpc/fsdpc.h"
#include "util/fs.h"

static int hash_bytes(EVP_MD_CTX *h, const void *p, size_t n) {
  return EVP_DigestUpdate(h, p, n) == 1;
}

/* A string with its length, so that two strings never hash like one. */
static int hash_str(EVP_MD_CTX *h, const char *s) {
  uint64_t n = s ? strlen(s) : 0;
  return hash_bytes(h, &n, sizeof n) && hash_bytes(h, s ? s : "", n);
}

/* A file's role, then its contents (or a marker when it does not exist). */
static fsdpc_status hash_file(EVP_MD_CTX *h, const char *role, const char *path, int required,
                              fsdpc_err *err) {
  if (!hash_str(h, role))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cache key: hashing failed");
  int fd = fsdpc__open_regular(path, 0);
  if (fd == -1 && errno == ENOENT && !required)
    return hash_str(h, "<absent>") ? FSDPC_OK
                                   : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "hashing failed");
  if (fd < 0) {
    char why[128];
    return fsdpc__fail(err, fd == -1 && errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s: cannot read: %s", path,
                       fsdpc__open_regular_why(fd, 0, why, sizeof why));
  }
  enum { CHUNK = 1 << 20 };
  char *buf = malloc(CHUNK);
  fsdpc_status st = buf ? FSDPC_OK : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  uint64_t total = 0;
  while (st == FSDPC_OK) {
    ssize_t n = read(fd, buf, CHUNK);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: read failed: %s", path, strerror(errno));
    else if (n == 0)
      break;
    else if (!hash_bytes(h, buf, (size_t)n))
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cache key: hashing failed");
    total += (uint64_t)(n > 0 ? n : 0);
  }
  if (st == FSDPC_OK && !hash_bytes(h, &total, sizeof total))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cache key: hashing failed");
  free(buf);
  close(fd);
  return st;
}

static fsdpc_status hash_in(EVP_MD_CTX *h, const char *role, const char *dir, const char *name,
                            fsdpc_err *err) {
  char p[4200];
  if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: path too long", dir);
  return hash_file(h, role, p, 0, err);
}

/* What the tokenizer and the template loaders read: a folder's files, or a
 * tokenizer.json given as a file plus the files beside it. */
static fsdpc_status hash_tokenizer(EVP_MD_CTX *h, const char *tok, fsdpc_err *err) {
  if (strcmp(tok, "byte") == 0)
    return hash_str(h, "byte") ? FSDPC_OK : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "hashing failed");
  struct stat sb;
  int dir = stat(tok, &sb) == 0 && S_ISDIR(sb.st_mode);
  char folder[4096];
  snprintf(folder, sizeof folder, "%s", tok);
  if (!dir) {
    FSDPC_TRY(hash_file(h, "tokenizer file", tok, 1, err));
    char *slash = strrchr(folder, '/');
    if (slash)
      *slash = '\0';
    else
      snprintf(folder, sizeof folder, ".");
  }
  static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                                      "chat_template.jinja"};
  for (size_t i = dir ? 0 : 1; i < sizeof files / sizeof files[0]; i++)
    FSDPC_TRY(hash_in(h, files[i], folder, files[i], err));
  return FSDPC_OK;
}

fsdpc_status fsdpc__prepare_cache_key(const fsdpc_prepare_opts *o, fsdpc_cache_key *key,
                                      fsdpc_err *err) {
  memset(key, 0, sizeof *key);
  EVP_MD_CTX *h = EVP_MD_CTX_new();
  if (!h || EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(h);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cache key: cannot start SHA-256 (libcrypto)");
  }
  fsdpc_status st = FSDPC_OK;
  int64_t ints[] = {o->format, o->train_on, o->skip_bad, o->n_inputs, o->train_on_reasoning};
  const char *strs[] = {o->template_name,    o->text_field,        o->prompt_field,
                        o->completion_field, o->instruction_field, o->input_field,
                        o->output_field,     o->system_field,      o->messages_field};
  int ok = hash_str(h, "fsdpc prepared-data cache 1") && hash_str(h, fsdpc_version()) &&
           hash_bytes(h, ints, sizeof ints);
  for (size_t i = 0; ok && i < sizeof strs / sizeof strs[0]; i++)
    ok = hash_str(h, strs[i]);
  for (int i = 0; ok && i < fsdpc__opts_count(o->template_kwargs); i++) {
    const char *k, *v;
    int user;
    fsdpc__opts_entry(o->template_kwargs, i, &k, &v, &user);
    ok = hash_str(h, k) && hash_str(h, v);
  }
  ok = ok && hash_str(h, o->template_kwargs_json);
  if (!ok)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cache key: hashing failed");
  if (st == FSDPC_OK)
    st = hash_tokenizer(h, o->tokenizer, err);
  if (st == FSDPC_OK && o->chat_template && o->chat_template[0])
    st = hash_file(h, "template", o->chat_template, 1, err);
  for (int i = 0; st == FSDPC_OK && i < o->n_inputs; i++)
    st = hash_file(h, "input", o->inputs[i], 1, err);
  unsigned int n = 0;
  if (st == FSDPC_OK && (EVP_DigestFinal_ex(h, key->sha, &n) != 1 || n != sizeof key->sha))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cache key: hashing failed");
  EVP_MD_CTX_free(h);
  for (int i = 0; st == FSDPC_OK && i < 8; i++)
    snprintf(key->hex + 2 * i, 3, "%02x", key->sha[i]);
  return st;
}

fsdpc_status fsdpc__prepare_cache_path(const fsdpc_prepare_opts *o, const char *dir,
                                       const fsdpc_cache_key *key, char *out, size_t cap,
                                       fsdpc_err *err) {
  const char *in = o->inputs[0], *slash = strrchr(in, '/');
  if ((size_t)snprintf(out, cap, "%s/%s.%s.tok", dir, slash ? slash + 1 : in, key->hex) >= cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cache path too long (data.cache_dir)", in);
  return FSDPC_OK;
}

int fsdpc__prepare_cache_trusted(const char *path, const fsdpc_cache_key *key, char *why,
                                 size_t cap) {
  int fd = fsdpc__open_regular_nofollow(path, 0);
  if (fd == -1 && errno == ENOENT) {
    snprintf(why, cap, "absent");
    return 0;
  }
  if (fd < 0) {
    snprintf(why, cap, "%s",
             fd == -1 && errno == ELOOP ? "a symbolic link"
             : fd == -2                 ? "not a regular file"
                                        : strerror(errno));
    return 0;
  }
  struct stat sb;
  uint8_t b[FSDPC_TOKFILE_HEADER_BYTES];
  int ok = 0;
  if (fstat(fd, &sb) != 0) {
    snprintf(why, cap, "%s", strerror(errno));
  } else if (sb.st_uid != geteuid()) {
    snprintf(why, cap, "owned by user %u, not by you", (unsigned)sb.st_uid);
  } else if (sb.st_mode & S_IWOTH) {
    snprintf(why, cap, "writable by every user");
  } else if (pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b) {
    snprintf(why, cap, "shorter than a token file's header");
  } else {
    fsdpc_tokfile_header hd;
    fsdpc__tokfile_header_decode(b, &hd);
    uint8_t tag[FSDPC_CACHE_TAG_BYTES];
    for (int i = 0; i < FSDPC_CACHE_TAG_BYTES; i++)
      tag[i] = (uint8_t)(hd.reserved[i / 4] >> (8 * (i % 4)));
    if (memcmp(hd.magic, FSDPC_TOKFILE_MAGIC, 8) != 0 ||
        hd.header_crc != fsdpc__tokfile_header_crc(b))
      snprintf(why, cap, "not a valid token file");
    else if (memcmp(tag, key->sha, sizeof tag) != 0)
      snprintf(why, cap, "made from other inputs (its recorded key differs)");
    else
      ok = 1;
  }
  close(fd);
  return ok;
}

static int hex16(const char *s) {
  for (int i = 0; i < 16; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

/* s[0..n) is "X.<16 hex>.tok" */
static int cache_tok(const char *s, size_t n) {
  return n > 21 && memcmp(s + n - 4, ".tok", 4) == 0 && s[n - 21] == '.' && hex16(s + n - 20);
}

int fsdpc__prepare_cache_name(const char *name) {
  size_t n = strlen(name);
  if (cache_tok(name, n))
    return 1;
  /* .X.<16 hex>.tok.<16 hex>.tmp: util/fs.h's temporary name for it */
  return name[0] == '.' && n > 43 && strcmp(name + n - 4, ".tmp") == 0 && name[n - 21] == '.' &&
         hex16(name + n - 20) && cache_tok(name + 1, n - 22);
}
