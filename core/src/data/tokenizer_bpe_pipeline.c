/* The parts of a tokenizer.json around the BPE model: normalizer,
 * pre_tokenizer, decoder and post_processor, checked against what the
 * encoder implements. Anything else is refused with one line naming the
 * file and the component. Supported (docs/data.md, "Tokenizers"):
 *   byte-level     normalizer null or NFC; pre_tokenizer ByteLevel or
 *                  Sequence[Split, ByteLevel]; decoder ByteLevel
 *                  (GPT-2, Llama 3, Qwen2)
 *   sentencepiece  normalizer Sequence[Prepend "▁", Replace " " -> "▁"] with
 *                  pre_tokenizer null (Llama 2), or normalizer null with
 *                  pre_tokenizer Metaspace (Mistral v0.3, many Llama-2-family
 *                  files); decoder Metaspace or a Sequence of Replace
 *                  "▁" -> " ", ByteFallback, Fuse, Strip */
#include <cjson/cJSON.h>
#include <string.h>

#include "data/tokenizer_bpe_internal.h"

/* GPT-2's split pattern, used by ByteLevel when use_regex is true. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char metaspace[] = "\xe2\x96\x81"; /* U+2581 LOWER ONE EIGHTH BLOCK */

#define FAIL(...) fsdpc__fail(err, FSDPC_INVALID_USAGE, __VA_ARGS__)

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

static int is_type(const cJSON *v, const char *t) {
  const char *s = get_str(v, "type");
  return s && strcmp(s, t) == 0;
}

/* The type name of a component, escaped for messages (static buffer per
 * slot, so two may appear in one message). */
static const char *type_of(const cJSON *v, int slot) {
  static _Thread_local char buf[2][80];
  const char *t = get_str(v, "type");
  if (!t)
    return cJSON_IsObject(v) ? "(no type)" : "(not an object)";
  return fsdpc__tok_esc(buf[slot & 1], sizeof buf[0], t);
}

static int str_is(const char *s, const char *want) {
  return s && strcmp(s, want) == 0;
}

/* Llama 2 as converted from SentencePiece: Prepend "▁" then Replace " " -> "▁". */
static int is_llama2_normalizer(const cJSON *norm) {
  const cJSON *ns = get(norm, "normalizers");
  if (!is_type(norm, "Sequence") || cJSON_GetArraySize(ns) != 2)
    return 0;
  const cJSON *a = cJSON_GetArrayItem(ns, 0), *r = cJSON_GetArrayItem(ns, 1);
  return is_type(a, "Prepend") && str_is(get_str(a, "prepend"), metaspace) &&
         is_type(r, "Replace") && str_is(get_str(get(r, "pattern"), "String"), " ") &&
         str_is(get_str(r, "content"), metaspace);
}

/* Metaspace as a decoder (alone or inside a Sequence). */
static int metaspace_ok(const cJSON *d) {
  const char *rep = get_str(d, "replacement");
  return !rep || strcmp(rep, metaspace) == 0;
}

static int sp_decoder_ok(const cJSON *dec) {
  if (is_type(dec, "Metaspace"))
    return metaspace_ok(dec);
  const cJSON *ds = get(dec, "decoders"), *d;
  int ok = is_type(dec, "Sequence") && cJSON_IsArray(ds);
  cJSON_ArrayForEach(d, ds) {
    if (is_type(d, "Replace"))
      ok &= str_is(get_str(get(d, "pattern"), "String"), metaspace) &&
            str_is(get_str(d, "content"), " ");
    else if (is_type(d, "Strip"))
      ok &= cJSON_IsNumber(get(d, "start")) && get(d, "start")->valueint == 1 &&
            cJSON_IsNumber(get(d, "stop")) && get(d, "stop")->valueint == 0;
    else if (is_type(d, "Metaspace"))
      ok &= metaspace_ok(d);
    else
      ok &= is_type(d, "ByteFallback") || is_type(d, "Fuse");
  }
  return ok;
}

/* pre_tokenizer Metaspace: replacement "▁", prepend_scheme (or the older
 * add_prefix_space), split (default true). */
static fsdpc_status read_metaspace(bpe *b, const cJSON *pre, fsdpc_err *err) {
  const char *p = b->path;
  if (!metaspace_ok(pre))
    return FAIL("%s: pre_tokenizer Metaspace with a replacement other than \"\xe2\x96\x81\" is not "
                "supported yet",
                p);
  const char *scheme = get_str(pre, "prepend_scheme");
  if (!scheme)
    b->prepend =
        cJSON_IsFalse(get(pre, "add_prefix_space")) ? BPE_PREPEND_NEVER : BPE_PREPEND_ALWAYS;
  else if (strcmp(scheme, "always") == 0)
    b->prepend = BPE_PREPEND_ALWAYS;
  else if (strcmp(scheme, "first") == 0)
    b->prepend = BPE_PREPEND_FIRST;
  else if (strcmp(scheme, "never") == 0)
    b->prepend = BPE_PREPEND_NEVER;
  else {
    char e[80];
    return FAIL("%s: pre_tokenizer Metaspace prepend_scheme '%s' is not one of always, first, "
                "never",
                p, fsdpc__tok_esc(e, sizeof e, scheme));
  }
  b->prepend_if_absent = 1;
  b->split = !cJSON_IsFalse(get(pre, "split"));
  return FSDPC_OK;
}

static fsdpc_status check_sentencepiece(bpe *b, const cJSON *norm, const cJSON *pre,
                                        const cJSON *dec, fsdpc_err *err) {
  const char *p = b->path;
  b->mode = BPE_SENTENCEPIECE;
  if (!is_null(norm)) { /* Llama 2's normalizer: the pre-tokenizer must be null */
    if (!is_null(pre))
      return FAIL("%s: pre_tokenizer '%s' is not supported yet with a SentencePiece normalizer "
                  "(expected null)",
                  p, type_of(pre, 0));
    b->prepend = BPE_PREPEND_ALWAYS;
  } else {
    FSDPC_TRY(read_metaspace(b, pre, err));
  }
  if (!sp_decoder_ok(dec))
    return FAIL("%s: decoder '%s' is not supported yet with a SentencePiece-style tokenizer "
                "(expected Metaspace, or a Sequence of Replace \"\xe2\x96\x81\" -> \" \", "
                "ByteFallback, Fuse, Strip)",
                p, is_null(dec) ? "null" : type_of(dec, 0));
  return FSDPC_OK;
}

fsdpc_status fsdpc__bpe_check_pipeline(bpe *b, const cJSON *root, const cJSON *model,
                                       const char **pattern, int *literal, fsdpc_err *err) {
  const char *p = b->path;
  const cJSON *norm = get(root, "normalizer"), *pre = get(root, "pre_tokenizer");
  const cJSON *dec = get(root, "decoder");
  *pattern = NULL;
  *literal = 0;
  if (!is_null(norm) && !is_type(norm, "NFC")) {
    if (!is_llama2_normalizer(norm))
      return FAIL("%s: normalizer '%s' is not supported yet (supported: none, NFC, or Llama 2's "
                  "Sequence[Prepend \"\xe2\x96\x81\", Replace \" \" -> \"\xe2\x96\x81\"])",
                  p, type_of(norm, 0));
    return check_sentencepiece(b, norm, pre, dec, err);
  }
  if (is_type(pre, "Metaspace")) {
    if (!is_null(norm))
      return FAIL("%s: normalizer '%s' with a Metaspace pre_tokenizer is not supported yet", p,
                  type_of(norm, 0));
    return check_sentencepiece(b, NULL, pre, dec, err);
  }

  b->mode = BPE_BYTE_LEVEL;
  b->nfc = is_type(norm, "NFC");
  const cJSON *byte_level = NULL, *split = NULL;
  if (is_type(pre, "ByteLevel")) {
    byte_level = pre;
  } else if (is_type(pre, "Sequence")) {
    const cJSON *items = get(pre, "pretokenizers");
    int n = cJSON_GetArraySize(items);
    const cJSON *first = cJSON_GetArrayItem(items, 0), *last = cJSON_GetArrayItem(items, n - 1);
    if (n == 2 && is_type(first, "Split") && is_type(last, "ByteLevel")) {
      split = first;
      byte_level = last;
    } else {
      const cJSON *bad = NULL, *it;
      cJSON_ArrayForEach(it, items) if (!bad && !is_type(it, "Split") && !is_type(it, "ByteLevel"))
          bad = it;
      return FAIL("%s: pre_tokenizer Sequence of %d ('%s', ...) is not supported yet "
                  "(supported: ByteLevel, or Sequence[Split, ByteLevel] as in Llama 3)",
                  p, n,
                  bad     ? type_of(bad, 0)
                  : first ? type_of(first, 0)
                          : "empty");
    }
  } else if (is_null(pre)) {
    if (cJSON_IsTrue(get(model, "byte_fallback")))
      return FAIL("%s: pre_tokenizer null with byte_fallback needs Llama 2's normalizer "
                  "(Prepend + Replace) or a Metaspace pre_tokenizer; this file has neither",
                  p);
    return FAIL("%s: pre_tokenizer null is not supported yet (a byte-level BPE needs ByteLevel)",
                p);
  } else {
    return FAIL("%s: pre_tokenizer '%s' is not supported yet (supported: ByteLevel, "
                "Sequence[Split, ByteLevel] as in Llama 3, or Metaspace)",
                p, type_of(pre, 0));
  }
  if (cJSON_IsTrue(get(byte_level, "add_prefix_space")))
    return FAIL("%s: pre_tokenizer ByteLevel with add_prefix_space true is not supported yet", p);
  if (split) {
    const cJSON *pat = get(split, "pattern");
    const char *beh = get_str(split, "behavior");
    char e[80];
    if (!beh || strcmp(beh, "Isolated") != 0)
      return FAIL("%s: pre_tokenizer Split behavior '%s' is not supported yet (only Isolated)", p,
                  beh ? fsdpc__tok_esc(e, sizeof e, beh) : "(missing)");
    if (cJSON_IsTrue(get(split, "invert")))
      return FAIL("%s: pre_tokenizer Split with invert true is not supported yet", p);
    if ((*pattern = get_str(pat, "Regex"))) {
      *literal = 0;
    } else if ((*pattern = get_str(pat, "String"))) {
      *literal = 1;
    } else {
      return FAIL("%s: pre_tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}", p);
    }
    if (cJSON_IsTrue(get(byte_level, "use_regex")))
      return FAIL("%s: pre_tokenizer ByteLevel after a Split must have use_regex false", p);
  } else if (!cJSON_IsFalse(get(byte_level, "use_regex"))) {
    *pattern = gpt2_pattern; /* ByteLevel's default is use_regex true */
  }
  if (!is_type(dec, "ByteLevel"))
    return FAIL("%s: decoder '%s' is not supported yet with a ByteLevel pre_tokenizer "
                "(expected ByteLevel)",
                p, is_null(dec) ? "null" : type_of(dec, 0));
  if (cJSON_IsTrue(get(model, "byte_fallback")))
    return FAIL("%s: model.byte_fallback true with a ByteLevel pre_tokenizer is not supported", p);
  return FSDPC_OK;
}

/* TemplateProcessing's "single": [SpecialToken, Sequence A, SpecialToken]:
 * a special token before A adds BOS, one after it adds EOS. */
static void read_template(bpe *b, const cJSON *tp) {
  const cJSON *single = get(tp, "single"), *it;
  int seen_a = 0;
  cJSON_ArrayForEach(it, single) {
    if (get(it, "Sequence"))
      seen_a = 1;
    else if (get(it, "SpecialToken"))
      *(seen_a ? &b->adds_eos : &b->adds_bos) = 1;
  }
}

void fsdpc__bpe_read_post_processor(bpe *b, const cJSON *root) {
  const cJSON *pp = get(root, "post_processor"), *it;
  if (is_type(pp, "TemplateProcessing"))
    read_template(b, pp);
  else if (is_type(pp, "Sequence"))
    cJSON_ArrayForEach(it, get(pp, "processors")) if (is_type(it, "TemplateProcessing"))
        read_template(b, it);
}
