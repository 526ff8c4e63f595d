/* Internal to the chat layer: the template object (chat_template.c), the
 * render context and render variants (chat_render.c), and the assistant
 * mask (chat_mask.c). */
#ifndef FSDPC_DATA_CHAT_INTERNAL_H
#define FSDPC_DATA_CHAT_INTERNAL_H

#include "data/chat.h"
#include "template/jinja.h"

struct fsdpc_chat_template {
  fsdpc_jinja *jinja;
  char *origin;
  char *bos, *eos, *unk, *pad;
  time_t now;
  uint64_t max_steps;
  size_t max_output, max_memory;
  /* tokenizer_config.json's "tool_use" entry when no name was asked for:
   * rendered instead when tools are given, as transformers picks it */
  struct fsdpc_chat_template *tool_use;
};

/* A text field of an assistant message the mask places in the render:
 * its content (or one text part of a list content), its reasoning, or a
 * tool call's name or string arguments. */
enum {
  CF_CONTENT,   /* content: a string */
  CF_PART,      /* content[k].text */
  CF_REASONING, /* reasoning_content, reasoning or thinking (k: which key) */
  CF_CALL_NAME, /* tool_calls[k].function.name (or tool_calls[k].name) */
  CF_CALL_ARGS, /* tool_calls[k].function.arguments when a string */
};

typedef struct chat_field {
  size_t msg;
  int kind, k;
  const char *text;  /* in the caller's messages */
  size_t begin, end; /* where it renders in the text (located) */
  int located;
} chat_field;

/* The string node of field f inside message m (a copy or the original). */
cJSON *fsdpc__chat_field_node(cJSON *m, const chat_field *f);

/* One render of messages[0, k) (references, borrowed) with the fields in
 * repl replaced by the strings in with (either may be empty), `extra`
 * appended when non-NULL, and add_generation_prompt agp. */
typedef struct chat_variant {
  const chat_field *const *repl;
  const char *const *with;
  size_t n_repl;
  const cJSON *extra;
} chat_variant;

/* A render and, where asked (non-NULL), its generation blocks and the ends
 * of the template's writes (fsdpc_jinja_opts). */
typedef struct chat_out {
  char *text;
  size_t len;
  fsdpc_jinja_span *gen;
  size_t n_gen;
  size_t *ends;
  size_t n_ends;
} chat_out;
enum { CHAT_WANT_GEN = 1, CHAT_WANT_ENDS = 2 };
void fsdpc__chat_out_free(chat_out *o);

fsdpc_status fsdpc__chat_render_variant(const fsdpc_chat_template *t, const cJSON *msgs, size_t k,
                                        const fsdpc_chat_ctx *ctx, const chat_variant *v, int agp,
                                        int want, chat_out *out, fsdpc_err *err);

const cJSON *fsdpc__chat_msg_at(const cJSON *msgs, size_t i);
int fsdpc__chat_is_assistant(const cJSON *m);
/* Not "train": false / "weight": 0 */
int fsdpc__chat_trainable(const cJSON *m);

/* chat_mask.c: the target spans of R (the render of all messages with
 * opts->add_generation_prompt, with the ends of its writes). *spans malloc'd. */
fsdpc_status fsdpc__chat_mask(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                              const fsdpc_chat_ctx *ctx, const fsdpc_chat_opts *o,
                              const chat_out *R, fsdpc_chat_span **spans, size_t *n_spans,
                              fsdpc_err *err);
/* chat_fields.c: where the fields of the assistant messages idx[0..m) render in R. */
fsdpc_status fsdpc__chat_locate(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                                const fsdpc_chat_ctx *ctx, int agp, const char *R, size_t nR,
                                chat_field *f, size_t nf, fsdpc_err *err);
/* The fields of message i (appended to *f, growing it); returns the count added or -1. */
int fsdpc__chat_fields_of(const cJSON *msgs, size_t i, chat_field **f, size_t *nf, size_t *cap);

/* Python's whitespace at both ends of s[0, n). */
void fsdpc__chat_py_strip(const char *s, size_t n, size_t *b, size_t *e);

#endif
