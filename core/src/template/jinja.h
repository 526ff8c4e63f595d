/* A Jinja subset engine: the template language of Hugging Face chat
 * templates, rendered over cJSON values.
 *
 * The supported subset (docs/template.md) is what the chat templates of
 * real models use (a corpus of about 200 of them is checked against
 * jinja2), with the environment that transformers' apply_chat_template
 * uses: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
 * loopcontrols, tojson without HTML escaping (ensure_ascii=False),
 * raise_exception and strftime_now, and Python's values (big ints, float
 * repr, markupsafe's Markup, generators). A construct outside the subset is
 * refused at parse time (or, where only the value types tell, at render
 * time) with "ORIGIN:LINE:COL: unsupported construct 'NAME'", never
 * rendered differently from Jinja. Every render is bounded in steps,
 * output, memory and recursion (fsdpc_jinja_opts).
 *
 * Ownership: a parsed template owns a copy of its source; render output is
 * malloc'd and owned by the caller. A template may be rendered from several
 * threads at once (rendering does not modify it). */
#ifndef FSDPC_TEMPLATE_JINJA_H
#define FSDPC_TEMPLATE_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "util/err.h"

typedef struct fsdpc_jinja fsdpc_jinja;

/* origin: name used in messages ("tokenizer_config.json:chat_template").
 * Parse errors and unsupported constructs -> INVALID_USAGE, one line
 * "ORIGIN:LINE:COL: ...". */
fsdpc_status fsdpc__jinja_parse(const char *src, size_t len, const char *origin, fsdpc_jinja **out,
                                fsdpc_err *err);
/* vars: a cJSON object of globals. *out malloc'd, NUL-terminated, *out_len
 * its length. raise_exception(msg) -> INVALID_USAGE with the template's
 * message. */
fsdpc_status fsdpc__jinja_render(const fsdpc_jinja *t, const cJSON *vars, char **out,
                                 size_t *out_len, fsdpc_err *err);
void fsdpc__jinja_destroy(fsdpc_jinja *t); /* NULL ok */

/* A byte range [begin, end) of rendered output. */
typedef struct fsdpc_jinja_span {
  size_t begin, end;
} fsdpc_jinja_span;

/* Render options; zero-initialised means the defaults. */
typedef struct fsdpc_jinja_opts {
  time_t now;             /* strftime_now's clock (local time); 0 = time(NULL) */
  size_t max_output;      /* bytes; 0 = 256 MiB */
  uint64_t max_steps;     /* evaluation steps (a bound on run time); 0 = 200 M */
  size_t max_memory;      /* bytes of all values and buffers of a render; 0 = 1 GiB */
  fsdpc_jinja_span **gen; /* if non-NULL: malloc'd ranges of {% generation %} blocks */
  size_t *n_gen;
  /* if non-NULL: malloc'd, increasing offsets of the output where one of the
   * template's writes ends (a text run, a {{ }} or a block's result): the
   * chat mask never splits what the template wrote in one go */
  size_t **ends;
  size_t *n_ends;
} fsdpc_jinja_opts;

fsdpc_status fsdpc__jinja_render_opts(const fsdpc_jinja *t, const cJSON *vars,
                                      const fsdpc_jinja_opts *opts, char **out, size_t *out_len,
                                      fsdpc_err *err);
/* Whether the template has a {% generation %} block. */
int fsdpc__jinja_has_generation(const fsdpc_jinja *t);

/* Gives the cJSON tree parsed from `text` what cJSON drops and Python's
 * json keeps: every number's literal text (ints of any size stay exact,
 * 20.0 stays a float), stored in the number nodes. A string holding a NUL
 * character (\u0000, which the C strings would cut) is refused: returns -1
 * with why = "PATH: what" (PATH like messages[1].content). */
int fsdpc__jinja_json_text(cJSON *root, const char *text, size_t len, char *why, size_t cap);

#endif
