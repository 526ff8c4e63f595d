/* Shared by the in-tree wrap plugins (header-only; plugins link nothing from
 * the core): the two options that take the token embedding and the output
 * projection out into units of their own (torchtune's memory-efficient
 * wrapping for large vocabularies), their descriptors and how they are read. */
#ifndef FSDPC_PLUGINS_WRAP_SEPARATE_H
#define FSDPC_PLUGINS_WRAP_SEPARATE_H

#include <string.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"

static inline int fsdpc_wrap_eq(const char *a, const char *b) {
  return a && b && strcmp(a, b) == 0;
}

/* separate_embedding / separate_lm_head from opts (both false without one). */
static inline int32_t fsdpc_wrap_read_separate(const fsdpc_host_api *host, const fsdpc_opts *opts,
                                               int32_t *separate_embedding,
                                               int32_t *separate_lm_head) {
  *separate_embedding = *separate_lm_head = 0;
  if (!opts)
    return FSDPC_OK;
  int32_t st = fsdpc_pl_opt(host, opts, "separate_embedding", FSDPC_OPT_BOOL, separate_embedding,
                            sizeof *separate_embedding);
  if (st != FSDPC_OK)
    return st;
  return fsdpc_pl_opt(host, opts, "separate_lm_head", FSDPC_OPT_BOOL, separate_lm_head,
                      sizeof *separate_lm_head);
}

static const fsdpc_option_desc fsdpc_wrap_opt_separate_embedding = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "separate_embedding",
    .type = FSDPC_OPT_BOOL,
    .default_value = "false",
    .min = 1,
    .max = 0,
    .help = "give the token embedding its own unit (large vocabularies)",
};
static const fsdpc_option_desc fsdpc_wrap_opt_separate_lm_head = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "separate_lm_head",
    .type = FSDPC_OPT_BOOL,
    .default_value = "false",
    .min = 1,
    .max = 0,
    .help = "give the output projection its own unit (unless tied to the embedding)",
};

#endif
