/* Loader internals shared by the files of core/src/config: where each key
 * got its value, and the setters that turn a YAML node into a typed field. */
#ifndef FSDPC_CONFIG_META_H
#define FSDPC_CONFIG_META_H

#include <stdbool.h>
#include <yaml.h>

#include "config/config.h"
#include "config/schema.h"

typedef struct fsdpc_key_src {
  bool set;    /* given by the file, an override or model.config */
  char *where; /* "cfg.yaml:3:7", "override 'a.b=1'", "x/config.json field 'f'" */
} fsdpc_key_src;

typedef struct fsdpc_section_src {
  char *path, *where; /* a section key seen in the file, e.g. "model" at "cfg.yaml:1:1" */
} fsdpc_section_src;

struct fsdpc_config_meta {
  /* a checkpoint's config.yaml (fsdpc__config_load_checkpoint): every shape
   * key is in it, so a model.config folder that is gone is not read */
  bool from_checkpoint;
  fsdpc_key_src *keys; /* one per schema row */
  int n_keys;
  fsdpc_section_src *sections;
  int n_sections, cap_sections;
};

/* Where values being set come from. */
typedef struct fsdpc_cfg_ctx {
  fsdpc_config *cfg;
  const char *file;  /* for marks of file nodes */
  const char *fixed; /* when non-NULL, every value comes from here (override text, JSON field) */
  fsdpc_err *err;
} fsdpc_cfg_ctx;

/* "cfg.yaml:3:7" from a node's start mark, or ctx->fixed. */
void fsdpc__cfg_node_where(const fsdpc_cfg_ctx *ctx, const yaml_node_t *node, char *buf,
                           size_t cap);
/* Sets row k (index ki) from node and records where it came from. */
fsdpc_status fsdpc__cfg_set_node(fsdpc_cfg_ctx *ctx, int ki, yaml_document_t *doc,
                                 yaml_node_t *node);
/* Sets row ki from text: "[..]" and "{..}" and quoted text are read as YAML
 * flow, anything else is one plain scalar. */
fsdpc_status fsdpc__cfg_set_text(fsdpc_cfg_ctx *ctx, int ki, const char *text);
/* Builds a one-node document for text as described above; the caller
 * deletes doc. On a YAML error returns false with the problem in why. */
bool fsdpc__cfg_text_doc(const char *text, yaml_document_t *doc, char *why, size_t cap);

/* A plain scalar that YAML reads as null: "", ~, null. */
bool fsdpc__cfg_is_null(const yaml_node_t *node);

/* Frees whatever row k owns inside c. */
void fsdpc__cfg_free_field(fsdpc_config *c, const fsdpc_cfg_key *k);
/* Value of a scalar-typed row as text ("true", "3e-4", "FULL_SHARD");
 * lists as "[a, b]", options as "{k: v}". */
void fsdpc__cfg_value_text(const fsdpc_config *c, const fsdpc_cfg_key *k, char *buf, size_t cap);
bool fsdpc__cfg_row_equal(const fsdpc_config *a, const fsdpc_config *b, const fsdpc_cfg_key *k);

/* Allocates c (with meta and empty options) and applies every default. */
fsdpc_status fsdpc__cfg_new_defaults(const char *source, fsdpc_config **out, fsdpc_err *err);
fsdpc_status fsdpc__cfg_mark(fsdpc_config *c, int ki, const char *where, fsdpc_err *err);
fsdpc_status fsdpc__cfg_add_section(fsdpc_config *c, const char *path, const char *where,
                                    fsdpc_err *err);

/* Reads model.config into rows that are still unset (hf.c). */
fsdpc_status fsdpc__cfg_read_hf(fsdpc_config *c, fsdpc_err *err);
/* The shape keys against the weights' config.json (model.init.from): a
 * key that contradicts it is refused, naming where it was given (hf.c). */
fsdpc_status fsdpc__cfg_check_weights_shape(const fsdpc_config *c, fsdpc_err *err);
/* model.from, or model.init.from alone: fills model.config,
 * model.init.from and data.tokenizer from the folder (folder.c). */
fsdpc_status fsdpc__cfg_resolve_model_folder(fsdpc_config *c, fsdpc_err *err);
/* After file and overrides: model.config, derived defaults, required keys,
 * cross-checks and the not-implemented rule (check.c). */
fsdpc_status fsdpc__cfg_finish(fsdpc_config *c, fsdpc_err *err);

#endif
