/* fsdpc recipes list | copy NAME DEST: the shipped configs and chat
 * templates (torchtune's `tune ls` / `tune cp`), through the public API
 * (fsdpc_recipes_*). */
#include <stdio.h>

#include "commands.h"

static const char recipes_help[] =
    "usage: fsdpc recipes list\n"
    "       fsdpc recipes copy NAME DEST\n"
    "\n"
    "The ready-made configs and chat templates this fsdpc ships (installed under\n"
    "<prefix>/share/fsdpc/configs). `copy` writes recipe NAME to DEST (a file, or a\n"
    "folder to put it in) and never overwrites; a config's chat template reference\n"
    "points at the installed template, so the copy runs from any folder.\n";

static const cli_opt no_opts[] = {{0}};
const cli_cmd fsdpc__recipes_list_cmd = {"recipes list", recipes_help, no_opts};
const cli_cmd fsdpc__recipes_copy_cmd = {"recipes copy", recipes_help, no_opts};

/* The positional words of a subcommand without options: up to max. */
typedef struct words {
  const cli_cmd *cmd;
  const char *w[2];
  int n, max;
} words;

static int word_arg(void *ctx, int id, const char *v) {
  words *a = ctx;
  (void)id; /* no options: only positionals reach here */
  if (a->n == a->max)
    return cli_usage_error(a->cmd, "unexpected argument '%s'", v) == 0;
  a->w[a->n++] = v;
  return 1;
}

static void print_recipe(void *user, const char *name, const char *file, const char *about) {
  (void)user, (void)file;
  printf("  %-28s %s\n", name, about);
}

static int list(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__recipes_list_cmd;
  words a = {.cmd = cmd, .max = 0};
  int rc = cli_parse(cmd, argc, argv, word_arg, &a);
  if (rc >= 0)
    return rc;
  char dir[4096];
  fsdpc_err err = {0};
  if (fsdpc_recipes_dir(dir, sizeof dir, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  printf("recipes in %s (`fsdpc recipes copy NAME DEST`):\n", dir);
  if (fsdpc_recipes_list(dir, print_recipe, NULL, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  return 0;
}

static int copy(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__recipes_copy_cmd;
  words a = {.cmd = cmd, .max = 2};
  int rc = cli_parse(cmd, argc, argv, word_arg, &a);
  if (rc >= 0)
    return rc;
  if (a.n < 2)
    return cli_usage_error(cmd, "give NAME and DEST (`fsdpc recipes list` names them)");
  char dir[4096], written[8192];
  fsdpc_err err = {0};
  if (fsdpc_recipes_dir(dir, sizeof dir, &err) != FSDPC_OK ||
      fsdpc_recipes_copy(dir, a.w[0], a.w[1], written, sizeof written, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  printf("wrote %s\n", written);
  return 0;
}

const cli_sub fsdpc__recipes_subs[] = {
    {"list", "the shipped configs and chat templates", list, &fsdpc__recipes_list_cmd},
    {"copy", "copy one to a file or folder (never overwrites)", copy, &fsdpc__recipes_copy_cmd},
};
const int fsdpc__recipes_n_subs = 2;

int fsdpc__cmd_recipes(int argc, char **argv) {
  return cli_dispatch("recipes", recipes_help, fsdpc__recipes_subs, fsdpc__recipes_n_subs, argc,
                      argv);
}
