/* `fsdpc plugins list` and `fsdpc plugins info NAME`: what the registry
 * found on the search path, what each component offers, and one line for
 * every file that was refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plugin/registry.h"
#include "util/escape.h"

#define MAX_PATHS 64

static const char *list_help =
    "usage: fsdpc plugins list [--path DIR]...\n"
    "\n"
    "Lists every plugin component found on the search path (--path folders, then\n"
    "FSDPC_PLUGIN_PATH, then the build and install plugin folders): kind, name,\n"
    "version, ABI, auto-selection score, file and capabilities; then one line per\n"
    "refused file saying why.\n"
    "\n"
    "  --path DIR   also search DIR (a folder, or a plugin file used as given);\n"
    "               may be repeated; searched first\n";

static const char *info_help =
    "usage: fsdpc plugins info NAME|KIND/NAME [--path DIR]...\n"
    "\n"
    "Shows one component: description, capabilities, and the options it accepts\n"
    "under its config section's `options:` map (type, default, range, help).\n"
    "KIND is one of collectives, attention, optim, wrap, statedict; it is needed\n"
    "only when two kinds have a component of the same name.\n"
    "\n"
    "  --path DIR   also search DIR; may be repeated\n";

static const char *top_help =
    "usage: fsdpc plugins <list|info> [args]\n"
    "\n"
    "  list          list loaded plugin components and refused files\n"
    "  info NAME     show one component's description and options\n"
    "\n"
    "`fsdpc plugins list --help` and `fsdpc plugins info --help` say more.\n";

/* Parses [--path DIR]... and at most one positional argument. Returns 0 on
 * success, 2 on a usage error, -1 when --help was shown. */
static int parse_args(int argc, char **argv, const char *help, const char **paths, int *n_paths,
                      const char **positional) {
  *n_paths = 0;
  if (positional)
    *positional = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(help, stdout);
      return -1;
    }
    if (strcmp(argv[i], "--path") == 0 || strncmp(argv[i], "--path=", 7) == 0) {
      const char *v = argv[i][6] == '=' ? argv[i] + 7 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || !*v) {
        fprintf(stderr, "fsdpc plugins: --path needs a folder\n");
        return 2;
      }
      if (*n_paths == MAX_PATHS) {
        fprintf(stderr, "fsdpc plugins: at most %d --path options\n", MAX_PATHS);
        return 2;
      }
      paths[(*n_paths)++] = v;
      continue;
    }
    if (argv[i][0] == '-' || !positional || *positional) {
      fprintf(stderr, "fsdpc plugins %s: unexpected argument '%s'\n%s", argv[0], argv[i], help);
      return 2;
    }
    *positional = argv[i];
  }
  return 0;
}

/* Plugin strings are untrusted: escaped for the terminal. Eight rotating
 * buffers, so that one printf may hold several. */
static const char *or_dash(const char *s) {
  static char bufs[8][512];
  static int next;
  if (!s || !*s)
    return "-";
  char *b = bufs[next++ % 8];
  return fsdpc__escape_str(b, sizeof bufs[0], s);
}

static int max_int(int a, int b) { return a > b ? a : b; }

static int cmd_list(int argc, char **argv) {
  const char *paths[MAX_PATHS];
  int n_paths;
  int rc = parse_args(argc, argv, list_help, paths, &n_paths, NULL);
  if (rc)
    return rc < 0 ? 0 : rc;
  fsdpc_registry *reg;
  fsdpc_err err;
  if (fsdpc__registry_create(paths, n_paths, &reg, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc plugins list: %s\n", err.msg);
    return 1;
  }
  int n = fsdpc__registry_count(reg);
  int wk = 4, wn = 4, wv = 7, wp = 4;
  for (int i = 0; i < n; i++) {
    const fsdpc_component *c = fsdpc__registry_at(reg, i);
    wk = max_int(wk, (int)strlen(fsdpc__kind_name(c->desc->kind)));
    wn = max_int(wn, (int)strlen(c->desc->name));
    wv = max_int(wv, (int)strlen(or_dash(c->desc->version)));
    wp = max_int(wp, (int)strlen(c->path));
  }
  if (n == 0) {
    printf("no plugins found\n");
  } else {
    printf("%-*s  %-*s  %-*s  %-5s  %5s  %-*s  %s\n", wk, "KIND", wn, "NAME", wv, "VERSION", "ABI",
           "SCORE", wp, "PATH", "CAPABILITIES");
    /* Grouped by kind, in search order within a kind. */
    for (int32_t k = 0; k < FSDPC_KIND_COUNT_; k++) {
      for (int i = 0; i < n; i++) {
        const fsdpc_component *c = fsdpc__registry_at(reg, i);
        if (c->desc->kind != k)
          continue;
        char abi[24];
        snprintf(abi, sizeof abi, "%u.%u", c->abi_major, c->abi_minor);
        printf("%-*s  %-*s  %-*s  %-5s  %5d  %-*s  %s\n", wk, fsdpc__kind_name(k), wn,
               or_dash(c->desc->name), wv, or_dash(c->desc->version), abi, (int)c->desc->default_score, wp,
               c->path, or_dash(c->desc->capabilities));
      }
    }
  }
  int nr = fsdpc__registry_refused_count(reg);
  if (nr > 0) {
    printf("\nrefused:\n");
    for (int i = 0; i < nr; i++) {
      const fsdpc_refused_plugin *r = fsdpc__registry_refused_at(reg, i);
      printf("  %s  [%s]\n", or_dash(r->reason), or_dash(r->path));
    }
  }
  printf("\nsearched:");
  int ns = fsdpc__registry_search_count(reg);
  for (int i = 0; i < ns; i++)
    printf(" %s", fsdpc__registry_search_at(reg, i));
  printf("%s\n", ns ? "" : " (no plugin folder exists)");
  fsdpc__registry_destroy(reg);
  return 0;
}

static const char *type_name(int32_t t) {
  static const char *names[] = {"bool", "int", "float", "string"};
  return t >= 0 && t <= FSDPC_OPT_STRING ? names[t] : "?";
}

static void print_option(const fsdpc_option_desc *o) {
  char range[96] = "";
  if ((o->type == FSDPC_OPT_INT || o->type == FSDPC_OPT_FLOAT) && o->min <= o->max)
    snprintf(range, sizeof range, o->type == FSDPC_OPT_INT ? "[%.0f, %.0f]" : "[%g, %g]", o->min,
             o->max);
  printf("    %-22s %-6s %-20s %-24s %s\n", o->key, type_name(o->type),
         o->default_value ? o->default_value : "(required)", range[0] ? range : "-",
         or_dash(o->help));
}

static void print_info(const fsdpc_component *c) {
  const fsdpc_component_desc *d = c->desc;
  printf("%s/%s %s\n", fsdpc__kind_name(d->kind), or_dash(d->name), or_dash(d->version));
  printf("  description:  %s\n", or_dash(d->description));
  printf("  capabilities: %s\n", or_dash(d->capabilities));
  printf("  ABI:          %u.%u (interface v%u)\n", c->abi_major, c->abi_minor, d->iface_version);
  printf("  score:        %d (for `auto` selection)\n", (int)d->default_score);
  printf("  path:         %s\n", c->path);
  if (d->n_options == 0) {
    printf("  options:      none\n");
    return;
  }
  printf("  options (under %s.options):\n", fsdpc__kind_name(d->kind));
  printf("    %-22s %-6s %-20s %-24s %s\n", "KEY", "TYPE", "DEFAULT", "RANGE", "HELP");
  for (uint32_t i = 0; i < d->n_options; i++)
    print_option(d->options[i]);
}

static int cmd_info(int argc, char **argv) {
  const char *paths[MAX_PATHS], *arg;
  int n_paths;
  int rc = parse_args(argc, argv, info_help, paths, &n_paths, &arg);
  if (rc)
    return rc < 0 ? 0 : rc;
  if (!arg) {
    fprintf(stderr, "fsdpc plugins info: which plugin? give NAME or KIND/NAME\n%s", info_help);
    return 2;
  }
  int32_t kind = -1;
  const char *name = arg;
  const char *slash = strchr(arg, '/');
  char kind_buf[32];
  if (slash) {
    snprintf(kind_buf, sizeof kind_buf, "%.*s", (int)(slash - arg), arg);
    kind = fsdpc__kind_from_name(kind_buf);
    name = slash + 1;
    if (kind < 0) {
      fprintf(stderr,
              "fsdpc plugins info: unknown kind '%s' (kinds: collectives, attention, optim, "
              "wrap, statedict)\n",
              kind_buf);
      return 2;
    }
  }
  fsdpc_registry *reg;
  fsdpc_err err;
  if (fsdpc__registry_create(paths, n_paths, &reg, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc plugins info: %s\n", err.msg);
    return 1;
  }
  const fsdpc_component *match[FSDPC_KIND_COUNT_];
  int n_match = 0;
  for (int32_t k = 0; k < FSDPC_KIND_COUNT_; k++) {
    if (kind >= 0 && k != kind)
      continue;
    const fsdpc_component *c = fsdpc__registry_find(reg, k, name);
    if (c)
      match[n_match++] = c;
  }
  rc = 0;
  if (n_match == 1) {
    print_info(match[0]);
  } else if (n_match > 1) {
    fprintf(stderr, "fsdpc plugins info: '%s' is ambiguous:", name);
    for (int i = 0; i < n_match; i++)
      fprintf(stderr, " %s/%s", fsdpc__kind_name(match[i]->desc->kind), name);
    fprintf(stderr, "; give KIND/NAME\n");
    rc = 2;
  } else {
    /* Not loaded: a pinned selection gives the precise reason (refused
     * file or not found), so reuse it. */
    rc = 1;
    int found_reason = 0;
    for (int32_t k = 0; k < FSDPC_KIND_COUNT_ && !found_reason; k++) {
      if (kind >= 0 && k != kind)
        continue;
      const fsdpc_component *c;
      if (fsdpc__registry_select(reg, k, name, NULL, &c, &err) == FSDPC_UNSUPPORTED) {
        fprintf(stderr, "fsdpc plugins info: %s\n", err.msg);
        found_reason = 1;
      }
    }
    if (!found_reason) {
      if (kind >= 0) {
        fsdpc__registry_select(reg, kind, name, NULL, &(const fsdpc_component *){NULL}, &err);
        fprintf(stderr, "fsdpc plugins info: %s\n", err.msg);
      } else {
        fprintf(stderr,
                "fsdpc plugins info: no plugin named '%s' (run `fsdpc plugins list` to see "
                "what loaded and what was refused)\n",
                name);
      }
    }
  }
  fsdpc__registry_destroy(reg);
  return rc;
}

int fsdpc__cmd_plugins(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    fputs(top_help, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "list") == 0)
    return cmd_list(argc - 1, argv + 1);
  if (strcmp(argv[1], "info") == 0)
    return cmd_info(argc - 1, argv + 1);
  fprintf(stderr, "fsdpc plugins: unknown subcommand '%s'\n%s", argv[1], top_help);
  return 2;
}
