/* The data keys of a config as the run uses them: preparation options for
 * JSONL data (train prepares with them, config check checks with them) and
 * what counts as a JSONL path. */
#include <string.h>

#include "runplan/runplan.h"

void fsdpc__prepare_opts_from_config(const fsdpc_config *c, fsdpc_prepare_opts *o) {
  fsdpc__prepare_opts_default(o);
  const fsdpc_config_data *d = &c->data;
  o->format = d->format;
  o->tokenizer = d->tokenizer;
  o->chat_template = d->chat_template;
  o->template_name = d->chat_template_name;
  o->text_field = d->text_field;
  o->prompt_field = d->prompt_field;
  o->completion_field = d->completion_field;
  o->instruction_field = d->instruction_field;
  o->input_field = d->input_field;
  o->output_field = d->output_field;
  o->system_field = d->system_field;
  o->messages_field = d->messages_field;
  o->train_on = d->train_on;
  o->train_on_reasoning = d->train_on_reasoning;
  o->template_kwargs = d->template_kwargs;
  o->skip_bad = d->skip_bad_examples;
  o->threads = (int)c->train.threads;
  o->max_line_bytes = (uint64_t)d->max_line_bytes;
  o->max_input_bytes = (uint64_t)d->max_input_bytes;
}

int fsdpc__is_jsonl_path(const char *p) {
  size_t n = strlen(p);
  static const char *const ext[] = {".jsonl", ".jsonl.gz", ".json", ".json.gz"};
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
    size_t k = strlen(ext[i]);
    if (n > k && strcmp(p + n - k, ext[i]) == 0)
      return 1;
  }
  return 0;
}
