/* Chat templates of Hugging Face model folders, rendered with the Jinja
 * subset engine (template/jinja.h) the way transformers' apply_chat_template
 * renders them (messages as given, tools, documents, extra template
 * variables), and the exact assistant-only loss mask at the text level.
 *
 * The mask rule (docs/data.md, "Chat templates and the assistant mask"): for
 * each assistant turn that is trained on, the target bytes run from where
 * the turn leaves the generation prompt (or its first field) through its
 * reasoning, content and tool calls as the template rendered them, plus the
 * end-of-turn text the template emits right after it ("<|eot_id|>",
 * "</s>", "<|im_end|>"), without the whitespace that separates turns.
 * Reasoning is left out when train_on_reasoning is 0. Templates with
 * {% generation %} blocks use those blocks instead. Anything the rule
 * cannot place exactly is refused with the template and the turn, never
 * guessed. Implementation: chat_template.c, chat_render.c, chat_fields.c,
 * chat_mask.c. */
#ifndef FSDPC_DATA_CHAT_H
#define FSDPC_DATA_CHAT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "util/err.h"

typedef struct fsdpc_chat_template fsdpc_chat_template;

/* model_dir: a folder with tokenizer_config.json (chat_template: a string,
 * or a list of {name, template}) and/or chat_template.jinja; template_file:
 * if non-NULL, a .jinja file used instead; name: NULL = "default" / the
 * only one. Also reads bos_token / eos_token (strings or {content: ...}
 * objects) from tokenizer_config.json for the render context. model_dir may
 * be NULL when template_file is given. */
fsdpc_status fsdpc__chat_template_load(const char *model_dir, const char *template_file,
                                       const char *name, fsdpc_chat_template **out, fsdpc_err *err);
void fsdpc__chat_template_destroy(fsdpc_chat_template *t); /* NULL ok */

/* strftime_now's clock for this template (0: the current time); tests pin it. */
void fsdpc__chat_template_set_time(fsdpc_chat_template *t, time_t now);
/* A template given as text (origin names it in messages); bos / eos may be
 * NULL. For callers that hold the template themselves (and the fuzzer). */
fsdpc_status fsdpc__chat_template_from_string(const char *src, size_t len, const char *origin,
                                              const char *bos, const char *eos,
                                              fsdpc_chat_template **out, fsdpc_err *err);
/* Bounds on each render (0 = the engine's defaults: 200 M steps, 256 MiB
 * of text, 1 GiB of memory). */
void fsdpc__chat_template_set_limits(fsdpc_chat_template *t, uint64_t max_steps, size_t max_output);
void fsdpc__chat_template_set_max_memory(fsdpc_chat_template *t, size_t max_memory);
/* Where the template came from ("DIR/tokenizer_config.json:chat_template"). */
const char *fsdpc__chat_template_origin(const fsdpc_chat_template *t);
/* The special tokens read from tokenizer_config.json (NULL if absent). */
const char *fsdpc__chat_template_bos(const fsdpc_chat_template *t);
const char *fsdpc__chat_template_eos(const fsdpc_chat_template *t);

/* byte range [begin,end) of the rendered text that is a loss target */
typedef struct fsdpc_chat_span {
  size_t begin, end;
} fsdpc_chat_span;

enum { FSDPC_TRAIN_ON_ASSISTANT = 0, FSDPC_TRAIN_ON_ALL = 1, FSDPC_TRAIN_ON_LAST_ASSISTANT = 2 };

/* What the template sees besides the messages (all borrowed; NULL fields
 * are Python's None / absent): */
typedef struct fsdpc_chat_ctx {
  const cJSON *tools;     /* a list of tool schemas ({"type": "function", "function": ...}) */
  const cJSON *documents; /* a list of {title, text} objects */
  const cJSON *kwargs;    /* an object: extra template variables (enable_thinking, ...) */
} fsdpc_chat_ctx;

typedef struct fsdpc_chat_opts {
  int add_generation_prompt;
  int train_on;           /* FSDPC_TRAIN_ON_* */
  int train_on_reasoning; /* 1: an assistant turn's reasoning is a target (TRL's default) */
} fsdpc_chat_opts;

/* messages: cJSON array of message objects, passed to the template as
 * given (role, content as a string or a list of parts, tool_calls,
 * tool_call_id, name, reasoning_content, thinking, any other key); each
 * needs a string "role". Target spans: for each assistant turn to train on,
 * the bytes of its generated text (reasoning, content, tool calls) plus its
 * end-of-turn text; headers, other roles, tool results and tool
 * declarations are not targets. train_on ALL: the whole rendered text is one
 * span. A message with "train": false (or "weight": 0) is not a target.
 * Spans sorted, non-overlapping. *text and *spans are malloc'd (spans and
 * n_spans may be NULL when the caller needs only the text). */
fsdpc_status fsdpc__chat_render_ctx(const fsdpc_chat_template *t, const cJSON *messages,
                                    const fsdpc_chat_ctx *ctx, const fsdpc_chat_opts *o,
                                    char **text, size_t *text_len, fsdpc_chat_span **spans,
                                    size_t *n_spans, fsdpc_err *err);
/* The same without tools, documents or kwargs, reasoning trained. */
fsdpc_status fsdpc__chat_render(const fsdpc_chat_template *t, const cJSON *messages,
                                int add_generation_prompt, int train_on, char **text,
                                size_t *text_len, fsdpc_chat_span **spans, size_t *n_spans,
                                fsdpc_err *err);

#endif
