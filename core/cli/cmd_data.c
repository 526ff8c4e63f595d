/* `fsdpc data ...`: make and inspect token files. This file holds the
 * dispatch and the helpers the subcommands share (data_cli.h); the
 * subcommands live by concept:
 *   data_make.c     synth     write a synthetic learnable dataset (arith, qa, copy, reverse, chat)
 *                   tokenize  tokenize text files into a token file (byte or tokenizer.json BPE)
 *   data_inspect.c  info      print a token file's header, counts and a decoded preview
 *                   batch     print the windows of one global batch as the loader serves them
 *   data_prepare.c  prepare   JSONL datasets -> a token file of whole examples with a mask
 *   data_codec.c    encode    print the ids of a text (checking a tokenizer)
 *                   decode    print the text of ids */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "data_cli.h"

/* ---- helpers ------------------------------------------------------------ */

/* Prints bytes C-escaped inside quotes; stops after max bytes. */
void fsdpc__data_print_escaped(FILE *f, const unsigned char *s, size_t n, size_t max) {
  for (size_t i = 0; i < n && i < max; i++) {
    unsigned char c = s[i];
    if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c == '\\')
      fputs("\\\\", f);
    else if (c == '"')
      fputs("\\\"", f);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(f, "\\x%02x", c);
    else
      fputc(c, f);
  }
  if (n > max)
    fputs("...", f);
}

fsdpc_status fsdpc__data_read_whole(const char *path, char **data, size_t *len, fsdpc_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return cli_error(err, FSDPC_INVALID_USAGE, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    char *b = realloc(buf, cap * 2);
    if (!b)
      free(buf);
    buf = b;
    cap *= 2;
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return cli_error(err, FSDPC_SYSTEM_ERROR, "%s: read failed", path);
  }
  *data = buf;
  *len = n;
  return FSDPC_OK;
}

/* Length of the printable UTF-8 character at s (n bytes left), 0 if none. */
static size_t utf8_char(const unsigned char *s, size_t n) {
  size_t l = s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (s[0] >= 0xf5 || l == 0 || l > n)
    return 0;
  uint32_t cp = s[0] & (0x7f >> l);
  for (size_t i = 1; i < l; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  return cp < min_cp[l] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0 ? 0 : l;
}

/* Like fsdpc__data_print_escaped, but printable UTF-8 passes through. */
static void print_text(FILE *f, const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t u = s[i] >= 0x80 ? utf8_char(s + i, n - i) : 0;
    if (u) {
      fwrite(s + i, 1, u, f);
      i += u;
    } else {
      fsdpc__data_print_escaped(f, s + i, 1, 1);
      i++;
    }
  }
}

/* Decoded text of ids (n) into *buf (malloc'd, replaced), or 0 bytes when
 * the tokenizer writes nothing for them (BOS/EOS/PAD) or cannot decode
 * them. */
static size_t decode_run(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n, char **buf) {
  size_t len = 0;
  fsdpc_free(*buf);
  *buf = NULL;
  return fsdpc_tokenizer_decode(tok, ids, n, buf, &len, NULL) == FSDPC_OK ? len : 0;
}

void fsdpc__data_print_tokens(FILE *f, const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n,
                              const uint8_t *target, const int32_t *doc_ids) {
  int ctx = 0;
  char *buf = NULL;
  fsdpc_tokenizer_info ti = {.struct_size = sizeof ti};
  if (tok)
    fsdpc_tokenizer_describe(tok, &ti);
  int32_t V = tok ? ti.vocab_size : 0;
  for (int64_t i = 0; i < n;) {
    if (doc_ids && i > 0 && doc_ids[i] != doc_ids[i - 1]) {
      if (ctx)
        fputs("}}", f);
      fputs(" || ", f);
      ctx = 0;
    }
    int t = target ? target[i] : 1;
    if (!t && !ctx)
      fputs("{{", f);
    if (t && ctx)
      fputs("}}", f);
    ctx = !t;
    int known = tok && ids[i] >= 0 && ids[i] < V;
    if (!tok && ids[i] >= 0 && ids[i] < 256) {
      unsigned char c = (unsigned char)ids[i];
      fsdpc__data_print_escaped(f, &c, 1, 1);
      i++;
      continue;
    }
    if (!known || decode_run(tok, ids + i, 1, &buf) == 0) {
      const char *name = known ? fsdpc_tokenizer_token(tok, ids[i]) : NULL;
      if (name)
        print_text(f, (const unsigned char *)name, strlen(name));
      else
        fprintf(f, "<%" PRId32 ">", ids[i]);
      i++;
      continue;
    }
    /* a run of decodable tokens with the same mask and document, decoded
     * together so that characters split across tokens print whole */
    int64_t j = i + 1;
    while (j < n && (target ? target[j] : 1) == t && !(doc_ids && doc_ids[j] != doc_ids[j - 1]) &&
           ids[j] >= 0 && ids[j] < V && decode_run(tok, ids + j, 1, &buf) > 0)
      j++;
    size_t len = decode_run(tok, ids + i, j - i, &buf);
    print_text(f, (const unsigned char *)buf, len);
    i = j;
  }
  if (ctx)
    fputs("}}", f);
  fsdpc_free(buf);
}

/* ---- dispatch ---------------------------------------------------------- */

static const char data_help[] =
    "usage: fsdpc data <prepare|synth|tokenize|info|batch|encode|decode|cache> [args]\n"
    "  prepare   JSONL datasets (text, instruction, prompt/completion, chat) to a token file\n"
    "  synth     write a synthetic learnable dataset (arith, qa, copy, reverse, chat)\n"
    "  tokenize  tokenize text files into a token file (byte or tokenizer.json)\n"
    "  info      validate a token file and print its header and a preview\n"
    "  batch     print one global batch as the loader serves it\n"
    "  encode    print the ids of a text (check a tokenizer)\n"
    "  decode    print the text of ids\n"
    "  cache     list or clean the prepared-data cache (data.cache_dir)\n"
    "`fsdpc data <command> --help` for details. Format: docs/data.md.\n";

const cli_sub fsdpc__data_subs[] = {
    {"prepare", "JSONL datasets to a token file of whole examples with a loss mask",
     fsdpc__data_prepare, &fsdpc__data_prepare_cmd},
    {"synth", "write a synthetic learnable dataset", fsdpc__data_synth, &fsdpc__data_synth_cmd},
    {"tokenize", "tokenize text files into a token file", fsdpc__data_tokenize,
     &fsdpc__data_tokenize_cmd},
    {"info", "validate a token file and print its header and a preview", fsdpc__data_info,
     &fsdpc__data_info_cmd},
    {"batch", "print one global batch as the loader serves it", fsdpc__data_batch,
     &fsdpc__data_batch_cmd},
    {"encode", "print the ids of a text", fsdpc__data_encode, &fsdpc__data_encode_cmd},
    {"decode", "print the text of ids", fsdpc__data_decode, &fsdpc__data_decode_cmd},
    {"cache", "list or clean the prepared-data cache", fsdpc__data_cache, &fsdpc__data_cache_cmd},
};
const int fsdpc__data_n_subs = sizeof fsdpc__data_subs / sizeof fsdpc__data_subs[0];

int fsdpc__cmd_data(int argc, char **argv) {
  return cli_dispatch("data", data_help, fsdpc__data_subs, fsdpc__data_n_subs, argc, argv);
}
