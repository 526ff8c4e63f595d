/* `fsdpc data cache list|clean`: the prepared-data cache folder (data.cache_dir,
 * docs/data.md "The prepared-data cache"). Only names the cache writes are
 * touched ("X.<16 hex>.tok" and their leftover temporary files); links are
 * removed as links, never followed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "data_cli.h"
#include "train/dataset.h"
#include "util/escape.h"

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

/* The cache files the config's data maps to now (JSONL inputs, and the mix
 * when its sources are there); *paths (n) is malloc'd. */
static void current_files(const fsdpc_config *c, char ***paths, int *n) {
  *paths = calloc(66, sizeof **paths);
  *n = 0;
  if (!*paths)
    return;
  char p[4096];
  fsdpc_err err = {0};
  const char *single[2] = {c->data.train, c->data.eval};
  for (int i = 0; i < 2; i++)
    if (single[i][0] && fsdpc__is_jsonl_path(single[i]) &&
        fsdpc__dataset_cache_file(c, NULL, single[i], p, sizeof p, &err) == FSDPC_OK)
      (*paths)[(*n)++] = strdup(p);
  fsdpc_dataset_spec *s = NULL;
  int k = 0;
  if (c->data.datasets.n > 0 && fsdpc__dataset_specs(c, &s, &k, &err) == FSDPC_OK) {
    for (int i = 0; i < k && *n < 64; i++)
      if (fsdpc__is_jsonl_path(s[i].path) &&
          fsdpc__dataset_cache_file(c, &s[i].prep, s[i].path, p, sizeof p, &err) == FSDPC_OK)
        (*paths)[(*n)++] = strdup(p);
    fsdpc__dataset_specs_free(s, k);
    if (fsdpc__dataset_mix_path(c, p, sizeof p, &err) == FSDPC_OK)
      (*paths)[(*n)++] = strdup(p);
  }
}

static int is_current(char *const *paths, int n, const char *dir, const char *name) {
  char p[4400];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  for (int i = 0; i < n; i++)
    if (paths[i] && strcmp(paths[i], p) == 0)
      return 1;
  return 0;
}

static int walk(const char *dir, int clean, int keep, int dry, char *const *cur, int n_cur,
                int with_cfg) {
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
  time_t now = time(NULL);
  while ((e = readdir(d))) {
    if (!fsdpc__prepare_cache_name(e->d_name))
      continue;
    char p[4400], esc[600];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    fsdpc__escape_str(esc, sizeof esc, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)))
      continue;
    int tmp = e->d_name[0] == '.', current = !tmp && is_current(cur, n_cur, dir, e->d_name);
    const char *what = tmp       ? " (temporary: of a killed run, or of one preparing now)"
                       : current ? " (in use by the config)"
                                 : "";
    files++;
    bytes += sb.st_size;
    if (!clean) {
      printf("%12lld  %5.1f days  %s%s%s\n", (long long)sb.st_size,
             difftime(now, sb.st_mtime) / 86400.0, esc, what,
             S_ISLNK(sb.st_mode) ? " (a link: not trusted)" : "");
      continue;
    }
    if (current && keep)
      continue;
    if (!dry && unlink(p) != 0) {
      fprintf(stderr, "fsdpc data cache: cannot remove %s: %s\n", p, strerror(errno));
      rc = 1;
      continue;
    }
    freed += sb.st_size;
    printf("%s %s%s\n", dry ? "would remove" : "removed", esc, what);
  }
  closedir(d);
  if (!clean)
    printf("%d file(s), %.1f MB in %s%s\n", files, (double)bytes / 1e6, dir,
           with_cfg ? "" : " (--config CFG marks the ones a config uses)");
  else
    printf("%s %.1f MB in %s\n", dry ? "would free" : "freed", (double)freed / 1e6, dir);
  return rc;
}

int fsdpc__data_cache(int argc, char **argv) {
  const char *cmd = "cache", *dir = NULL, *cfg_path = NULL, *v;
  int clean = -1, keep = 0, dry = 0, n_ovr = 0;
  const char **ovr = calloc((size_t)argc + 1, sizeof *ovr);
  if (!ovr)
    return 1;
  int rc = 2;
  for (int i = 1; i < argc; i++) {
    int r;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(cache_help, stdout);
      rc = 0;
      goto out;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "config", &v))) {
      if (r < 0) {
        rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
        goto out;
      }
      cfg_path = v;
    } else if (strcmp(argv[i], "--keep-current") == 0) {
      keep = 1;
    } else if (strcmp(argv[i], "--dry-run") == 0) {
      dry = 1;
    } else if (clean < 0 && (!strcmp(argv[i], "list") || !strcmp(argv[i], "clean"))) {
      clean = strcmp(argv[i], "clean") == 0;
    } else if (argv[i][0] == '-') {
      rc = fsdpc__data_bad_arg(cmd, argv[i], 0);
      goto out;
    } else if (cfg_path && strchr(argv[i], '=')) {
      ovr[n_ovr++] = argv[i];
    } else if (!dir && !cfg_path) {
      dir = argv[i];
    } else {
      rc = fsdpc__data_bad_arg(cmd, argv[i], 0);
      goto out;
    }
  }
  if (clean < 0 || (!dir == !cfg_path) || (keep && !cfg_path)) {
    fprintf(stderr,
            "fsdpc data cache: give list or clean, and DIR or --config CFG%s (see "
            "--help)\n",
            keep && !cfg_path ? " (--keep-current needs --config)" : "");
    goto out;
  }
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  char cdir[4096], **cur = NULL;
  int n_cur = 0;
  if (cfg_path) {
    if (fsdpc__config_load(cfg_path, ovr, n_ovr, &c, &err) != FSDPC_OK) {
      rc = fsdpc__data_fail(cmd, &err);
      goto out;
    }
    fsdpc__dataset_cache_dir(c, cdir, sizeof cdir);
    dir = cdir;
    current_files(c, &cur, &n_cur);
  }
  rc = walk(dir, clean, keep, dry, cur, n_cur, cfg_path != NULL);
  for (int i = 0; i < n_cur; i++)
    free(cur[i]);
  free(cur);
  fsdpc__config_destroy(c);
out:
  free(ovr);
  return rc;
}
