/* `fsdpc data cache list|clean`: the prepared-data cache folder (data.cache_dir,
 * docs/data.md "The prepared-data cache"), through the public API
 * (fsdpc_data_cache_*). Only names the cache writes are touched
 * ("X.<key>.tok" and their leftover temporary files); links are removed as
 * links, never followed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data_cli.h"

static const char cache_help[] =
    "usage: fsdpc data cache list|clean (DIR | --config CFG [key=value ...]) [--keep-current]\n"
    "                  [--dry-run]\n"
    "The prepared-data cache: JSONL data that `fsdpc train` prepared (X.<key>.tok) and\n"
    "datasets it mixed (mix.<key>.tok), in data.cache_dir (default log.dir/data-cache).\n"
    "  list            each file, its size and age; with --config, which the config uses now\n"
    "  clean           remove them, and the temporary files of killed runs (not while a\n"
    "                  run prepares into the folder)\n"
    "  --config CFG    the cache folder of this config (with key=value overrides)\n"
    "  --keep-current  clean: keep the files the config uses now (needs --config)\n"
    "  --dry-run       clean: print what would go, remove nothing\n";

enum { O_CONFIG = 256, O_KEEP, O_DRY };
static const cli_opt cache_opts[] = {
    {"config", O_CONFIG, "CFG"}, {"keep-current", O_KEEP, NULL}, {"dry-run", O_DRY, NULL}, {0}};
const cli_cmd fsdpc__data_cache_cmd = {"data cache", cache_help, cache_opts};

typedef struct cache_cli {
  const char *dir, *cfg_path, **ovr;
  int clean, keep, dry, n_ovr;
  char **cur; /* the files the config uses now (n_cur) */
  int n_cur, cap_cur;
} cache_cli;

static int cache_arg(void *ctx, int id, const char *v) {
  cache_cli *a = ctx;
  switch (id) {
  case O_CONFIG:
    return (a->cfg_path = v) != NULL;
  case O_KEEP:
    return (a->keep = 1);
  case O_DRY:
    return (a->dry = 1);
  }
  if (a->clean < 0 && (!strcmp(v, "list") || !strcmp(v, "clean")))
    a->clean = strcmp(v, "clean") == 0;
  else if (strchr(v, '=')) /* an override of --config's file */
    a->ovr[a->n_ovr++] = v;
  else if (!a->dir)
    a->dir = v;
  else
    return cli_usage_error(&fsdpc__data_cache_cmd, "unexpected argument '%s'", v) == 0;
  return 1;
}

static void add_current(void *user, const char *path) {
  cache_cli *a = user;
  if (a->n_cur == a->cap_cur) {
    int cap = a->cap_cur ? 2 * a->cap_cur : 8;
    char **c = realloc(a->cur, (size_t)cap * sizeof *c);
    if (!c)
      return; /* out of memory: the file is not marked in use */
    a->cur = c;
    a->cap_cur = cap;
  }
  if ((a->cur[a->n_cur] = strdup(path)))
    a->n_cur++;
}

static int is_current(const cache_cli *a, const char *dir, const char *name) {
  char p[4400];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  for (int i = 0; i < a->n_cur; i++)
    if (strcmp(a->cur[i], p) == 0)
      return 1;
  return 0;
}

/* One file of the folder: listed, or removed (or not) when cleaning. */
static int one_file(const cache_cli *a, const char *dir, const char *name, const struct stat *sb,
                    long long *freed) {
  char p[4400], esc[600];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  fsdpc_escape(esc, sizeof esc, name);
  int tmp = name[0] == '.', current = !tmp && is_current(a, dir, name);
  const char *what = tmp       ? " (temporary: of a killed run, or of one preparing now)"
                     : current ? " (in use by the config)"
                               : "";
  if (!a->clean) {
    printf("%12lld  %5.1f days  %s%s%s\n", (long long)sb->st_size,
           difftime(time(NULL), sb->st_mtime) / 86400.0, esc, what,
           S_ISLNK(sb->st_mode) ? " (a link: not trusted)" : "");
    return 0;
  }
  if (current && a->keep)
    return 0;
  if (!a->dry && unlink(p) != 0) {
    fprintf(stderr, "fsdpc data cache: cannot remove %s: %s\n", p, strerror(errno));
    return 1;
  }
  *freed += sb->st_size;
  printf("%s %s%s\n", a->dry ? "would remove" : "removed", esc, what);
  return 0;
}

static int walk(const cache_cli *a, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) {
      printf("%s: no cache folder (nothing prepared there yet)\n", dir);
      return 0;
    }
    fprintf(stderr, "fsdpc data cache: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  int rc = 0, files = 0;
  long long bytes = 0, freed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char p[4400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (!fsdpc_data_cache_name(e->d_name) || lstat(p, &sb) != 0 ||
        !(S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)))
      continue;
    files++;
    bytes += sb.st_size;
    rc |= one_file(a, dir, e->d_name, &sb, &freed);
  }
  closedir(d);
  if (!a->clean)
    printf("%d file(s), %.1f MB in %s%s\n", files, (double)bytes / 1e6, dir,
           a->cfg_path ? "" : " (--config CFG marks the ones a config uses)");
  else
    printf("%s %.1f MB in %s\n", a->dry ? "would free" : "freed", (double)freed / 1e6, dir);
  return rc;
}

int fsdpc__data_cache(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_cache_cmd;
  cache_cli a = {.clean = -1, .ovr = calloc((size_t)argc + 1, sizeof(char *))};
  int rc = a.ovr ? cli_parse(cmd, argc, argv, cache_arg, &a) : 1;
  if (rc < 0 && (a.n_ovr && !a.cfg_path))
    rc = cli_usage_error(cmd, "key=value overrides go with --config");
  if (rc < 0 && (a.clean < 0 || !a.dir == !a.cfg_path || (a.keep && !a.cfg_path)))
    rc = cli_usage_error(cmd, "give list or clean, and DIR or --config CFG%s",
                         a.keep && !a.cfg_path ? " (--keep-current needs --config)" : "");
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  char cdir[4096];
  if (rc < 0 && a.cfg_path &&
      (fsdpc_config_load(a.cfg_path, a.ovr, a.n_ovr, &c, &err) != FSDPC_OK ||
       fsdpc_data_cache_dir(c, cdir, sizeof cdir, &err) != FSDPC_OK ||
       fsdpc_data_cache_current(c, add_current, &a, &err) != FSDPC_OK))
    rc = cli_fail(cmd, err.msg);
  if (rc < 0)
    rc = walk(&a, a.cfg_path ? cdir : a.dir);
  for (int i = 0; i < a.n_cur; i++)
    free(a.cur[i]);
  free(a.cur);
  fsdpc_config_destroy(c);
  free(a.ovr);
  return rc;
}
