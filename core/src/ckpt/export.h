/* A deployable Hugging Face folder (export.c): what the `full` format's
 * config.json callback writes beside the safetensors.
 *
 * - config.json keeps the source's keys and values as written (the source's
 *   JSON text for every value fsdpc did not change: lists stay lists,
 *   1e-05 stays 1e-05); fsdpc writes its own value only for a key whose
 *   value it changed, adds a key the source lacks only when it matters, and
 *   sets torch_dtype (and dtype, when the source has it) to what was
 *   written. Without a source it is the LlamaConfig fsdpc makes.
 * - generation_config.json: the source's, else made from the config's
 *   bos/eos/pad ids (eos lists kept).
 * - the tokenizer files of the source folder, else of data.tokenizer:
 *   tokenizer.json, tokenizer_config.json, special_tokens_map.json,
 *   chat_template.jinja, tokenizer.model (those present).
 * - with data.chat_template (the template the run rendered its data with):
 *   that template as chat_template.jinja, and as the chat_template of
 *   tokenizer_config.json (the source's, or one holding only it), so that
 *   transformers' apply_chat_template and `fsdpc generate --chat` use it. */
#ifndef FSDPC_CKPT_EXPORT_H
#define FSDPC_CKPT_EXPORT_H

#include <stdint.h>

#include "config/config.h"
#include "model/llama.h"

/* Where an export takes its extra files from (malloc'd strings or NULL). */
typedef struct fsdpc_export_src {
  char *config_json; /* the source config.json, or NULL */
  char *tok_dir;     /* folder holding the tokenizer files, or NULL */
  char *tok_file;    /* a tokenizer.json under another name, or NULL */
  char *chat_template; /* data.chat_template: the template trained with, or NULL */
} fsdpc_export_src;

/* The sources a run's config names (model.config / model.init.from,
 * data.tokenizer); those that do not exist are left NULL. */
fsdpc_status fsdpc__export_src_from_config(const fsdpc_config *c, fsdpc_export_src *out,
                                           fsdpc_err *err);
void fsdpc__export_src_free(fsdpc_export_src *s);

/* config.json text (malloc'd, ends in a newline) for shape written in
 * dtype, merged into the source config.json when src_json is not NULL. */
fsdpc_status fsdpc__export_config_json(const fsdpc_model_shape *shape, int32_t dtype,
                                       const char *src_json, char **out, fsdpc_err *err);

/* Writes config.json, generation_config.json and the tokenizer files into
 * dir; calls record(ctx, path) for each file written (checksums). */
fsdpc_status fsdpc__export_write(const char *dir, const fsdpc_model_shape *shape, int32_t dtype,
                                 const fsdpc_export_src *src,
                                 fsdpc_status (*record)(void *ctx, const char *path), void *ctx,
                                 fsdpc_err *err);

#endif
