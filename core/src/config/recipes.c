/* The shipped recipes: finding, listing and copying them (recipes.h). */
#define _GNU_SOURCE
#include "config/recipes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fileio.h"

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The folder of the running executable, canonical. */
static int exe_dir(char *out, size_t cap) {
  char exe[PATH_MAX];
  if (!realpath("/proc/self/exe", exe))
    return 0;
  char *slash = strrchr(exe, '/');
  if (!slash)
    return 0;
  *slash = '\0';
  snprintf(out, cap, "%s", exe);
  return 1;
}

fsdpc_status fsdpc__recipes_dir(char *out, size_t cap, fsdpc_err *err) {
  char bin[PATH_MAX], build[PATH_MAX], moved[PATH_MAX + 256];
  int have_bin = exe_dir(bin, sizeof bin);
  /* a program inside the build tree reads the source tree's recipes */
  if (have_bin && realpath(FSDPC_BUILD_DIR, build)) {
    size_t n = strlen(build);
    if (strncmp(bin, build, n) == 0 && (bin[n] == '/' || bin[n] == '\0') &&
        is_dir(FSDPC_RECIPES_SOURCE_DIR)) {
      snprintf(out, cap, "%s", FSDPC_RECIPES_SOURCE_DIR);
      return FSDPC_OK;
    }
  }
  if (have_bin) {
    snprintf(moved, sizeof moved, "%s/%s", bin, FSDPC_RECIPES_DIR_FROM_BIN);
    char real[PATH_MAX];
    if (realpath(moved, real) && is_dir(real)) {
      snprintf(out, cap, "%s", real);
      return FSDPC_OK;
    }
  }
  if (is_dir(FSDPC_RECIPES_INSTALL_DIR)) {
    snprintf(out, cap, "%s", FSDPC_RECIPES_INSTALL_DIR);
    return FSDPC_OK;
  }
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "no recipes folder: not in %s nor next to this fsdpc (run `cmake --install "
                     "build`, or run fsdpc from its build tree)",
                     FSDPC_RECIPES_INSTALL_DIR);
}

/* The first line of a config's leading comment, "" when it starts
 * otherwise. */
static void about_of(const char *file, char *out, size_t cap) {
  out[0] = '\0';
  FILE *f = fopen(file, "r");
  char line[512];
  if (f && fgets(line, sizeof line, f) && line[0] == '#') {
    char *s = line + 1;
    s += strspn(s, " ");
    s[strcspn(s, "\r\n")] = '\0';
    snprintf(out, cap, "%s", s);
  }
  if (f)
    fclose(f);
}

typedef struct list {
  fsdpc_recipe *items;
  int n, cap;
} list;

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a > b && strcmp(s + a - b, suf) == 0;
}

/* Adds the recipes of dir/sub (sub "" = the top); one level of folders. */
static fsdpc_status scan(const char *dir, const char *sub, int depth, list *l, fsdpc_err *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s%s%s", dir, sub[0] ? "/" : "", sub);
  DIR *d = opendir(path);
  if (!d)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot list: %s", path, strerror(errno));
  fsdpc_status st = FSDPC_OK;
  for (struct dirent *e; st == FSDPC_OK && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    char rel[2048], full[4200];
    snprintf(rel, sizeof rel, "%s%s%s", sub, sub[0] ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", dir, rel);
    if (is_dir(full)) {
      if (depth < 1)
        st = scan(dir, rel, depth + 1, l, err);
      continue;
    }
    int yaml = ends_with(rel, ".yaml"), jinja = ends_with(rel, ".jinja");
    if (!yaml && !jinja)
      continue;
    if (l->n == l->cap) {
      int cap = l->cap ? 2 * l->cap : 32;
      fsdpc_recipe *bigger = realloc(l->items, (size_t)cap * sizeof *bigger);
      if (!bigger) {
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
        break;
      }
      l->items = bigger;
      l->cap = cap;
    }
    fsdpc_recipe *r = &l->items[l->n++];
    snprintf(r->name, sizeof r->name, "%.*s", (int)(strlen(rel) - (yaml ? 5 : 0)), rel);
    snprintf(r->file, sizeof r->file, "%s", full);
    if (yaml)
      about_of(full, r->about, sizeof r->about);
    else
      snprintf(r->about, sizeof r->about, "chat template (data.chat_template)");
  }
  closedir(d);
  return st;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const fsdpc_recipe *)a)->name, ((const fsdpc_recipe *)b)->name);
}

fsdpc_status fsdpc__recipes_list(const char *dir, fsdpc_recipe **out, int *n, fsdpc_err *err) {
  list l = {0};
  fsdpc_status st = scan(dir, "", 0, &l, err);
  if (st != FSDPC_OK) {
    free(l.items);
    return st;
  }
  if (l.n)
    qsort(l.items, (size_t)l.n, sizeof *l.items, by_name);
  *out = l.items;
  *n = l.n;
  return FSDPC_OK;
}

/* text with every "configs/templates/" made "<dir>/templates/" (malloc'd). */
static char *point_templates(const char *text, const char *dir) {
  static const char ref[] = "configs/templates/";
  size_t add = strlen(dir) + sizeof "/templates/", n = 0;
  for (const char *p = strstr(text, ref); p; p = strstr(p + 1, ref))
    n++;
  char *out = malloc(strlen(text) + n * add + 1), *o = out;
  if (!out)
    return NULL;
  for (const char *p = text;;) {
    const char *q = strstr(p, ref);
    if (!q) {
      strcpy(o, p);
      break;
    }
    memcpy(o, p, (size_t)(q - p));
    o += q - p;
    o += sprintf(o, "%s/templates/", dir);
    p = q + sizeof ref - 1;
  }
  return out;
}

fsdpc_status fsdpc__recipes_copy(const char *dir, const char *name, const char *dest, char *written,
                                 size_t cap, fsdpc_err *err) {
  fsdpc_recipe *all = NULL;
  int n = 0;
  FSDPC_TRY(fsdpc__recipes_list(dir, &all, &n, err));
  const fsdpc_recipe *r = NULL;
  for (int i = 0; i < n && !r; i++)
    if (strcmp(all[i].name, name) == 0)
      r = &all[i];
  if (!r) {
    fsdpc_status st =
        fsdpc__fail(err, FSDPC_INVALID_USAGE,
                    "no recipe '%s' in %s (`fsdpc recipes list` shows them)", name, dir);
    free(all);
    return st;
  }
  const char *base = strrchr(r->file, '/');
  base = base ? base + 1 : r->file;
  if (is_dir(dest))
    snprintf(written, cap, "%s/%s", dest, base);
  else
    snprintf(written, cap, "%s", dest);
  char *text = NULL, *out = NULL;
  size_t len = 0;
  fsdpc_status st = FSDPC_OK;
  int fd = -1;
  if (fsdpc__read_small_file(r->file, 16u << 20, &text, &len) != 0)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot read: %s", r->file, strerror(errno));
  else if (!(out = ends_with(r->file, ".yaml") ? point_templates(text, dir) : strdup(text)))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* O_EXCL: an existing file is the user's, never overwritten */
  else if ((fd = open(written, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
    st = fsdpc__fail(err, errno == EEXIST ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR, "%s: %s%s",
                     written, strerror(errno),
                     errno == EEXIST ? "; remove it or choose another name" : "");
  else {
    size_t m = strlen(out);
    if (write(fd, out, m) != (ssize_t)m || close(fd) != 0)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", written, strerror(errno));
    fd = -1;
  }
  if (fd >= 0)
    close(fd);
  free(text);
  free(out);
  free(all);
  return st;
}
