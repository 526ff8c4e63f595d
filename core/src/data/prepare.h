/* Dataset preparation: JSONL examples (text, instruction, prompt/completion,
 * chat) rendered, tokenized and written as a token file of whole examples
 * with a per-token loss mask (docs/data.md, "Datasets from JSONL").
 *
 * One example = one JSON object on one line. Its text is rendered (a chat
 * template for chat, a fixed layout otherwise), tokenized once as a whole,
 * and each token's mask bit is 1 when its byte range overlaps a target span
 * of the rendered text (a token that straddles a span boundary counts as a
 * target: the rule of Hugging Face's return_assistant_tokens_mask). The
 * file is marked FSDPC_TOKFILE_EXAMPLES: documents carry their own BOS and
 * end tokens. */
#ifndef FSDPC_DATA_PREPARE_H
#define FSDPC_DATA_PREPARE_H

#include <stdint.h>
#include <stdio.h>

#include "fsdpc/plugin.h"
#include "util/err.h"

enum {
  FSDPC_FORMAT_AUTO = 0,
  FSDPC_FORMAT_TEXT = 1,
  FSDPC_FORMAT_INSTRUCTION = 2,
  FSDPC_FORMAT_PROMPT_COMPLETION = 3,
  FSDPC_FORMAT_CHAT = 4,
  /* TRL's preference rows (prompt, chosen, rejected): two examples each,
   * written as a pair (FSDPC_TOKFILE_PAIRS); prepare_pref.c */
  FSDPC_FORMAT_PREFERENCE = 5
};

typedef struct fsdpc_prepare_opts {
  const char *const *inputs; /* (n_inputs) JSONL or JSON-array files, plain or .gz */
  int n_inputs;
  const char *out;           /* token file to write; unused with dry_run */
  int format;                /* FSDPC_FORMAT_*; AUTO detects from the first example */
  const char *tokenizer;     /* "byte", tokenizer.json, or a model folder */
  const char *chat_template; /* template file; "" = the model folder's own */
  const char *template_name; /* named template of a list; "" = "default" */
  /* Field names (defaults in brackets). */
  const char *text_field;        /* [text] */
  const char *prompt_field;      /* [prompt] */
  const char *completion_field;  /* [completion] */
  const char *instruction_field; /* [instruction] */
  const char *input_field;       /* [input] */
  const char *output_field;      /* [output] */
  const char *system_field;      /* [system] */
  const char *messages_field;    /* [messages]; "conversations" is also tried */
  int train_on;                  /* FSDPC_TRAIN_ON_* (assistant, all, last_assistant) */
  int train_on_reasoning;        /* chat: 1 (default, as TRL) trains assistant reasoning */
  /* chat: extra template variables for every example (enable_thinking, ...):
   * data.template_kwargs (YAML scalars; borrowed, may be NULL) and a JSON
   * object text (--template-kwargs; "" = none) whose keys win. An example's
   * own "chat_template_kwargs" object wins over both. */
  const fsdpc_opts *template_kwargs;
  const char *template_kwargs_json;
  int skip_bad;             /* 1: skip and count bad examples instead of failing */
  int threads;              /* 0 = all cores */
  int dry_run;              /* 1: write nothing */
  uint64_t max_line_bytes;  /* longest line / array element; 0 = jsonl.h's default */
  uint64_t max_input_bytes; /* per file, after decompression; 0 = jsonl.h's default */
  const uint8_t *tag;       /* 12 bytes recorded in the output's header (a cache key), or NULL */
  int64_t show;             /* print the first `show` examples with their masks */
  FILE *show_to;            /* where (stdout when NULL) */
} fsdpc_prepare_opts;

typedef struct fsdpc_prepare_stats {
  int format;          /* the format used (detected or given) */
  int64_t lines;       /* non-blank lines read */
  int64_t examples;    /* examples written (with weight copies) */
  int64_t skipped;     /* bad examples skipped (skip_bad) */
  int64_t weight_zero; /* examples with weight 0, left out */
  int64_t tokens, target_tokens; /* targets: mask bits after each example's first token */
  uint64_t bytes_in; /* uncompressed input bytes */
  double seconds;
  char first_skip[512]; /* the first skipped example's message */
} fsdpc_prepare_stats;

void fsdpc__prepare_opts_default(fsdpc_prepare_opts *o);
/* Parses "text", "instruction", "prompt_completion", "chat", "preference"
 * ("auto" = AUTO). */
int fsdpc__prepare_format_parse(const char *s);
const char *fsdpc__prepare_format_name(int format);
/* Parses "assistant", "all", "last_assistant"; -1 if none. */
int fsdpc__prepare_train_on_parse(const char *s);

/* Renders, tokenizes and writes (or with dry_run only checks) every example.
 * Fails on the first bad example (one line: file:line: field: what) unless
 * skip_bad; fails when no example is left. Never leaves a partial out. */
fsdpc_status fsdpc__prepare(const fsdpc_prepare_opts *o, fsdpc_prepare_stats *st, fsdpc_err *err);

/* ---- the prepared-data cache (prepare_cache.c) ----------------------------
 * A JSONL dataset given to `fsdpc train` is prepared once into a cache file
 * and reused while nothing that shapes it changed. The key is a SHA-256 of
 * the content of everything that does: each input file's bytes, the
 * tokenizer files (tokenizer.json, tokenizer_config.json, tokenizer.model,
 * chat_template.jinja, also beside a tokenizer.json given as a file), the
 * template file, the format, field and train_on options and fsdpc's
 * version. A cache file is trusted only when it is a regular file (not a
 * link) owned by this user and not writable by others, and its header
 * records the key (12 bytes); anything else is prepared anew over it. */
enum { FSDPC_CACHE_TAG_BYTES = 12 };

typedef struct fsdpc_cache_key {
  uint8_t sha[32];
  char hex[17]; /* the first 8 bytes, for the file name */
} fsdpc_cache_key;

fsdpc_status fsdpc__prepare_cache_key(const fsdpc_prepare_opts *o, fsdpc_cache_key *key,
                                      fsdpc_err *err);
/* "DIR/<first input's file name>.<key hex>.tok" into out (cap). */
fsdpc_status fsdpc__prepare_cache_path(const fsdpc_prepare_opts *o, const char *dir,
                                       const fsdpc_cache_key *key, char *out, size_t cap,
                                       fsdpc_err *err);
/* 1 when path is a cache file to trust for key (see above); 0 with the
 * reason in why (cap) otherwise, "absent" when there is no file. */
int fsdpc__prepare_cache_trusted(const char *path, const fsdpc_cache_key *key, char *why,
                                 size_t cap);
/* 1 when name looks like a cache file ("X.<16 hex>.tok") or one of its
 * leftover temporary files (".X.<16 hex>.tok.<16 hex>.tmp"). */
int fsdpc__prepare_cache_name(const char *name);

#endif
