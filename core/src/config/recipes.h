/* The shipped recipes: the ready-made configs (configs/<name>.yaml,
 * configs/bench/<name>.yaml) and chat templates (configs/templates/),
 * installed under <datadir>/fsdpc/configs by `cmake --install`, listed and
 * copied by `fsdpc recipes list|copy` (torchtune's `tune ls` / `tune cp`).
 * A recipe's name is its path under that folder without ".yaml"
 * ("tiny-cpu", "bench/llama3-1b-base"); a template keeps its extension
 * ("templates/chatml.jinja"). */
#ifndef FSDPC_CONFIG_RECIPES_H
#define FSDPC_CONFIG_RECIPES_H

#include <stddef.h>

#include "util/err.h"

typedef struct fsdpc_recipe {
  char name[256];  /* "tiny-cpu" */
  char file[4200]; /* its path */
  char about[256]; /* the first line of its leading comment, "" when none */
} fsdpc_recipe;

/* The folder of the recipes this fsdpc ships: the source tree's configs/
 * for a program run from its build tree, else the installation's (found
 * from the executable, so a moved installation works, then the configured
 * prefix). */
fsdpc_status fsdpc__recipes_dir(char *out, size_t cap, fsdpc_err *err);
/* Every recipe under dir, sorted by name (*out malloc'd). */
fsdpc_status fsdpc__recipes_list(const char *dir, fsdpc_recipe **out, int *n, fsdpc_err *err);
/* Copies recipe `name` of dir to dest (a file, or a folder to put it in
 * under its base name); refuses to overwrite. A config's chat template
 * reference into the recipes (configs/templates/X) becomes the installed
 * template's absolute path, so that the copy runs from any folder.
 * written (cap) gets the path written. */
fsdpc_status fsdpc__recipes_copy(const char *dir, const char *name, const char *dest, char *written,
                                 size_t cap, fsdpc_err *err);

#endif
