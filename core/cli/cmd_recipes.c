/* fsdpc recipes list | copy NAME DEST: the shipped configs and chat
 * templates (torchtune's `tune ls` / `tune cp`); the work is in
 * core/src/config/recipes.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config/recipes.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc recipes list\n"
             "       fsdpc recipes copy NAME DEST\n"
             "\n"
             "The ready-made configs and chat templates this fsdpc ships (installed under\n"
             "<prefix>/share/fsdpc/configs). `copy` writes recipe NAME to DEST (a file, or a\n"
             "folder to put it in) and never overwrites; a config's chat template reference\n"
             "points at the installed template, so the copy runs from any folder.\n");
}

int fsdpc__cmd_recipes(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  int list = argc == 2 && strcmp(argv[1], "list") == 0;
  int copy = argc == 4 && strcmp(argv[1], "copy") == 0;
  if (!list && !copy) {
    usage(stderr);
    return 2;
  }
  fsdpc_err err = {0};
  char dir[4096], written[8192];
  if (fsdpc__recipes_dir(dir, sizeof dir, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc recipes: %s\n", err.msg);
    return 1;
  }
  if (copy) {
    if (fsdpc__recipes_copy(dir, argv[2], argv[3], written, sizeof written, &err) != FSDPC_OK) {
      fprintf(stderr, "fsdpc recipes: %s\n", err.msg);
      return 1;
    }
    printf("wrote %s\n", written);
    return 0;
  }
  fsdpc_recipe *r = NULL;
  int n = 0;
  if (fsdpc__recipes_list(dir, &r, &n, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc recipes: %s\n", err.msg);
    return 1;
  }
  printf("recipes in %s (`fsdpc recipes copy NAME DEST`):\n", dir);
  for (int i = 0; i < n; i++)
    printf("  %-28s %s\n", r[i].name, r[i].about);
  free(r);
  return 0;
}
