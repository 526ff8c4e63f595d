/* `fsdpc data prepare` as a library call: read JSONL files in batches of
 * lines, convert the lines of a batch on all threads (prepare_example.c),
 * then write them in file order, so the output does not depend on the
 * thread count. The writer's PATH.tmp + rename means a failure leaves no
 * output behind. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/jsonl.h"
#include "data/prepare_internal.h"
#include "data/tokfile.h"
#include "util/escape.h"
#include "util/log.h"

#define BATCH_LINES 4096

void fsdpc__prepare_opts_default(fsdpc_prepare_opts *o) {
  memset(o, 0, sizeof *o);
  o->format = FSDPC_FORMAT_AUTO;
  o->tokenizer = "byte";
  o->chat_template = "";
  o->template_name = "";
  o->text_field = "text";
  o->prompt_field = "prompt";
  o->completion_field = "completion";
  o->instruction_field = "instruction";
  o->input_field = "input";
  o->output_field = "output";
  o->system_field = "system";
  o->messages_field = "messages";
  o->train_on = FSDPC_TRAIN_ON_ASSISTANT;
  o->train_on_reasoning = 1;
  o->template_kwargs_json = "";
}

static const char *const format_names[] = {"auto", "text",      "instruction", "prompt_completion",
                                           "chat", "preference"};
enum { N_FORMATS = sizeof format_names / sizeof format_names[0] };

int fsdpc__prepare_format_parse(const char *s) {
  for (int i = 0; i < N_FORMATS; i++)
    if (strcmp(s, format_names[i]) == 0)
      return i;
  return -1;
}
const char *fsdpc__prepare_format_name(int f) {
  return f >= 0 && f < N_FORMATS ? format_names[f] : "?";
}
int fsdpc__prepare_train_on_parse(const char *s) {
  if (strcmp(s, "assistant") == 0)
    return FSDPC_TRAIN_ON_ASSISTANT;
  if (strcmp(s, "all") == 0)
    return FSDPC_TRAIN_ON_ALL;
  if (strcmp(s, "last_assistant") == 0)
    return FSDPC_TRAIN_ON_LAST_ASSISTANT;
  return -1;
}

static void jsonl_opts(const fsdpc_prepare_opts *o, fsdpc_jsonl_opts *jo) {
  jo->max_line_bytes = o->max_line_bytes;
  jo->max_input_bytes = o->max_input_bytes;
}

/* The format of the first example of the first file. */
static fsdpc_status detect(const fsdpc_prepare_opts *o, int *format, fsdpc_err *err) {
  fsdpc_jsonl *r;
  fsdpc_jsonl_opts jo;
  jsonl_opts(o, &jo);
  FSDPC_TRY(fsdpc__jsonl_open(o->inputs[0], &jo, &r, err));
  fsdpc_jsonl_line line;
  int n = 0;
  cJSON *obj = NULL;
  fsdpc_status st = fsdpc__jsonl_next(r, &line, 1, &n, err);
  if (st == FSDPC_OK && n == 0)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: empty dataset (no JSON values)", o->inputs[0]);
  if (st == FSDPC_OK && (st = fsdpc__jsonl_parse(o->inputs[0], &line, &obj, err)) != FSDPC_OK &&
      err) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    fsdpc__fail(err, st,
                "%.900s (set data.format to skip detection and data.skip_bad_examples "
                "to skip such lines)",
                msg);
  }
  if (st == FSDPC_OK && (*format = fsdpc__prep_detect(o, obj)) == FSDPC_FORMAT_AUTO) {
    char keys[256] = "";
    size_t k = 0;
    for (const cJSON *c = cJSON_IsObject(obj) ? obj->child : NULL; c && k < 200; c = c->next) {
      char esc[64]; /* key names come from the file: escaped before printing */
      fsdpc__escape_str(esc, 44, c->string);
      k += (size_t)snprintf(keys + k, sizeof keys - k, "%s'%s'", k ? ", " : "", esc);
    }
    char field[80];
    fsdpc__escape_str(field, sizeof field, o->text_field);
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s:%lld: cannot tell the dataset format from the keys (%s): expected "
                     "'chosen'+'rejected' (preference), 'messages'/'conversations' (chat), "
                     "'prompt'+'completion', "
                     "'instruction'+'output' or '%s' (text); set data.format and the "
                     "data.*_field names",
                     o->inputs[0], (long long)line.line_no,
                     !cJSON_IsObject(obj) ? "not a JSON object"
                     : k                  ? keys
                                          : "none",
                     field);
  }
  cJSON_Delete(obj);
  fsdpc__jsonl_close(r);
  return st;
}

/* The folder that may hold tokenizer_config.json / chat_template.jinja. */
static void model_dir_of(const char *tok, char *out, size_t cap) {
  struct stat sb;
  snprintf(out, cap, "%s", tok);
  if (stat(tok, &sb) == 0 && S_ISDIR(sb.st_mode))
    return;
  char *slash = strrchr(out, '/');
  if (slash)
    *slash = '\0';
  else
    snprintf(out, cap, ".");
}

/* Prints one example with the tokens that are not trained on in {{ }}:
 * text by byte offsets; added tokens without text (BOS/EOS) by name. An
 * example's first token is never trained on (nothing before it predicts
 * it), the rule `data info` and `data batch` mark by. */
static void show_example(FILE *f, const fsdpc_prep_ctx *c, const char *file, int64_t line,
                         const fsdpc_prep_example *ex) {
  int64_t targets = 0;
  for (int64_t i = 1; i < ex->n; i++)
    targets += ex->mask[i];
  fprintf(f, "--- %s:%lld: %lld tokens, %lld targets%s\n", file, (long long)line, (long long)ex->n,
          (long long)targets,
          ex->copies != 1 ? (ex->copies ? " (weight > 1: repeated)" : " (weight 0: left out)")
                          : "");
  int ctx = 0;
  size_t at = 0;
  for (int64_t i = 0; i < ex->n; i++) {
    int target = i > 0 && ex->mask[i];
    if (!target && !ctx)
      fputs("{{", f);
    if (target && ctx)
      fputs("}}", f);
    ctx = !target;
    size_t a = ex->offsets[i][0], b = ex->offsets[i][1];
    if (a == b) {
      const char *s = fsdpc__tokenizer_token_str(c->tok, ex->ids[i]);
      if (s)
        fputs(s, f);
      else
        fprintf(f, "<%" PRId32 ">", ex->ids[i]);
      continue;
    }
    if (a < at)
      a = at; /* tokens may share bytes (byte fallback); print each byte once */
    if (b > a)
      fwrite(ex->text + a, 1, b - a, f);
    at = b > at ? b : at;
  }
  if (ctx)
    fputs("}}", f);
  fputc('\n', f);
}

static fsdpc_status add_doc(fsdpc_tokfile_writer *w, const fsdpc_prep_example *ex,
                            fsdpc_prepare_stats *st, fsdpc_err *err) {
  int64_t t = 0; /* trained on: the first token is predicted by nothing */
  for (int64_t k = 1; k < ex->n; k++)
    t += ex->mask[k];
  st->examples++;
  st->tokens += ex->n;
  st->target_tokens += t;
  return w ? fsdpc__tokfile_writer_add_doc(w, ex->ids, ex->mask, ex->n, err) : FSDPC_OK;
}

static fsdpc_status load_tools(const fsdpc_prepare_opts *o, int format, fsdpc_prep_ctx *c,
                               fsdpc_tokenizer **tok, fsdpc_chat_template **tmpl, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__tokenizer_load(o->tokenizer, tok, err));
  c->tok = *tok;
  c->bos = fsdpc__tokenizer_bos(*tok);
  c->eos = fsdpc__tokenizer_eos(*tok);
  c->add_bos = fsdpc__tokenizer_adds_bos(*tok);
  if (c->eos < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: the tokenizer has no EOS token (name one in tokenizer_config.json)",
                       o->tokenizer);
  int want = format == FSDPC_FORMAT_CHAT ||
             (o->chat_template[0] &&
              (format == FSDPC_FORMAT_INSTRUCTION || format == FSDPC_FORMAT_PROMPT_COMPLETION));
  /* preference: conversational rows need the template, plain ones do not;
   * when it does not load, a conversational row says why */
  int optional = format == FSDPC_FORMAT_PREFERENCE && !o->chat_template[0];
  if (format == FSDPC_FORMAT_PREFERENCE)
    want = o->chat_template[0] || strcmp(o->tokenizer, "byte") != 0;
  if (!want)
    return FSDPC_OK;
  char dir[4096];
  model_dir_of(o->tokenizer, dir, sizeof dir);
  fsdpc_err terr = {0};
  fsdpc_status ts = fsdpc__chat_template_load(dir, o->chat_template[0] ? o->chat_template : NULL,
                                              o->template_name[0] ? o->template_name : NULL, tmpl,
                                              optional ? &terr : err);
  if (ts != FSDPC_OK && !optional)
    return ts;
  if (ts != FSDPC_OK)
    snprintf(c->tmpl_why, sizeof c->tmpl_why, "%.500s", terr.msg);
  c->tmpl = *tmpl;
  return fsdpc__prep_kwargs(o, &c->kwargs, err);
}

fsdpc_status fsdpc__prepare(const fsdpc_prepare_opts *o, fsdpc_prepare_stats *st, fsdpc_err *err) {
  memset(st, 0, sizeof *st);
  double t0 = omp_get_wtime();
  if (o->n_inputs < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "data prepare: no input file (--in FILE.jsonl)");
  int format = o->format;
  if (format == FSDPC_FORMAT_AUTO)
    FSDPC_TRY(detect(o, &format, err));
  st->format = format;
  fsdpc_prep_ctx c = {.o = o, .format = format};
  fsdpc_tokenizer *tok = NULL;
  fsdpc_chat_template *tmpl = NULL;
  fsdpc_tokfile_writer *w = NULL;
  fsdpc_jsonl *r = NULL;
  fsdpc_jsonl_line *lines = malloc(BATCH_LINES * sizeof *lines);
  fsdpc_prep_example *exs = calloc(BATCH_LINES, sizeof *exs);
  FILE *show_to = o->show_to ? o->show_to : stdout;
  fsdpc_status s = FSDPC_OK;
  if (!lines || !exs) {
    s = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "data prepare: out of memory");
    goto done;
  }
  if ((s = load_tools(o, format, &c, &tok, &tmpl, err)) != FSDPC_OK)
    goto done;
  if (!o->dry_run && (s = fsdpc__tokfile_writer_create(
                          o->out, (uint32_t)fsdpc__tokenizer_vocab_size(tok), (uint32_t)c.eos,
                          FSDPC_TOKFILE_HAS_MASK | FSDPC_TOKFILE_EXAMPLES |
                              (format == FSDPC_FORMAT_PREFERENCE ? FSDPC_TOKFILE_PAIRS : 0),
                          &w, err)) != FSDPC_OK)
    goto done;
  if (w && o->tag)
    fsdpc__tokfile_writer_set_tag(w, o->tag);
  int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
  int64_t shown = 0;
  for (int fi = 0; fi < o->n_inputs && s == FSDPC_OK; fi++) {
    const char *file = o->inputs[fi];
    fsdpc_jsonl_opts jo;
    jsonl_opts(o, &jo);
    if ((s = fsdpc__jsonl_open(file, &jo, &r, err)) != FSDPC_OK)
      break;
    for (;;) {
      int n = 0;
      if ((s = fsdpc__jsonl_next(r, lines, BATCH_LINES, &n, err)) != FSDPC_OK || n == 0)
        break;
      int64_t base = st->lines;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
      for (int i = 0; i < n; i++)
        fsdpc__prep_example(&c, file, &lines[i], base + i < o->show, &exs[i]);
      for (int i = 0; i < n && s == FSDPC_OK; i++) {
        fsdpc_prep_example *ex = &exs[i];
        st->lines++;
        if (ex->st != FSDPC_OK) {
          if (!o->skip_bad || ex->st == FSDPC_SYSTEM_ERROR) {
            s = fsdpc__fail(err, ex->st, "%s", ex->err.msg);
            break;
          }
          if (!st->skipped++)
            snprintf(st->first_skip, sizeof st->first_skip, "%s", ex->err.msg);
          continue;
        }
        if (ex->text && shown < o->show) {
          show_example(show_to, &c, file, lines[i].line_no, ex);
          if (ex->pair && ex->pair->text)
            show_example(show_to, &c, file, lines[i].line_no, ex->pair);
          shown++;
        }
        if (ex->copies == 0) {
          st->weight_zero++;
          continue;
        }
        for (int64_t k = 0; k < ex->copies && s == FSDPC_OK; k++) {
          s = add_doc(w, ex, st, err);
          if (s == FSDPC_OK && ex->pair) /* a preference pair: the rejected right after */
            s = add_doc(w, ex->pair, st, err);
        }
      }
      for (int i = 0; i < n; i++)
        fsdpc__prep_example_free(&exs[i]);
      if (s != FSDPC_OK)
        break;
    }
    st->bytes_in += fsdpc__jsonl_bytes(r);
    fsdpc__jsonl_close(r);
    r = NULL;
  }
  if (s == FSDPC_OK && st->examples == 0)
    s = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                    "%s%s: empty dataset: no examples left (%lld lines, %lld skipped as bad, "
                    "%lld of weight 0)%s%s",
                    o->inputs[0], o->n_inputs > 1 ? " and the other inputs" : "",
                    (long long)st->lines, (long long)st->skipped, (long long)st->weight_zero,
                    st->skipped ? "; first: " : "", st->first_skip);
  if (s == FSDPC_OK && w)
    s = fsdpc__tokfile_writer_finish(w, err);
done:
  fsdpc__jsonl_close(r);
  fsdpc__tokfile_writer_destroy(w);
  cJSON_Delete(c.kwargs);
  fsdpc__chat_template_destroy(tmpl);
  fsdpc__tokenizer_destroy(tok);
  free(lines);
  free(exs);
  st->seconds = omp_get_wtime() - t0;
  return s;
}
