/* Plugin options: the `options:` map under a plugin's config section,
 * validated against the option descriptors the plugin declares
 * (fsdpc_option_desc in plugin.h). The struct fsdpc_opts is opaque to
 * plugins, which read values through fsdpc_host_api.opt_get. */
#ifndef FSDPC_CONFIG_OPTS_H
#define FSDPC_CONFIG_OPTS_H

#include "fsdpc/plugin.h"
#include "util/err.h"

/* Creates an empty option set (no user values). `where` names the config
 * section for messages, e.g. "optim.options". */
fsdpc_status fsdpc__opts_create(const char *where, fsdpc_opts **out, fsdpc_err *err);
void fsdpc__opts_destroy(fsdpc_opts *opts);
/* Adds a user value as YAML text with its source location (file may be
 * "<override>" for command-line overrides; line/col 0 then). */
fsdpc_status fsdpc__opts_add(fsdpc_opts *opts, const char *key, const char *value, const char *file,
                             int line, int col, fsdpc_err *err);
/* Checks every user value against descs (unknown key with did-you-mean,
 * type, range; file:line:col and the key path in the message), then fills in
 * defaults. component names the plugin in messages, e.g. "wrap 'size'". */
fsdpc_status fsdpc__opts_validate(fsdpc_opts *opts, const fsdpc_option_desc *const *descs,
                                  uint32_t n_descs, const char *component, fsdpc_err *err);
/* Typed read after validate: out is int32_t (BOOL), int64_t (INT), double
 * (FLOAT) or a char buffer of out_cap bytes (STRING). */
fsdpc_status fsdpc__opts_get(const fsdpc_opts *opts, const char *key, int32_t type, void *out,
                             uint64_t out_cap, fsdpc_err *err);
/* Deep copy (so that each created component owns its options). */
fsdpc_status fsdpc__opts_clone(const fsdpc_opts *src, fsdpc_opts **out, fsdpc_err *err);

/* Iteration, for the config dump and `fsdpc config check`: entries in the
 * order they were added (user values first, then defaults filled in by
 * validate). user is 1 for a value the user gave. A later add of the same
 * key replaces the earlier value (overrides win over the file). */
int fsdpc__opts_count(const fsdpc_opts *opts);
void fsdpc__opts_entry(const fsdpc_opts *opts, int i, const char **key, const char **value,
                       int *user);
/* The section name given at create, e.g. "optim.options". */
const char *fsdpc__opts_where(const fsdpc_opts *opts);

#endif
