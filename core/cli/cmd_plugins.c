/* `fsdpc plugins list` and `fsdpc plugins info NAME`: what the search path
 * holds, what each component offers, and one line for every file that was
 * refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

#define MAX_PATHS 64

static const char list_help[] =
    "usage: fsdpc plugins list [--path DIR]...\n"
    "\n"
    "Lists every plugin component found on the search path (--path folders, then\n"
    "FSDPC_PLUGIN_PATH, then the build and install plugin folders): kind, name,\n"
    "version, ABI, auto-selection score, file and capabilities; then one line per\n"
    "refused file saying why.\n"
    "\n"
    "  --path DIR   also search DIR (a folder, or a plugin file used as given);\n"
    "               may be repeated; searched first\n";

static const char info_help[] =
    "usage: fsdpc plugins info NAME|KIND/NAME [--path DIR]...\n"
    "\n"
    "Shows one component: description, capabilities, and the options it accepts\n"
    "under its config section's `options:` map (type, default, range, help).\n"
    "KIND is one of collectives, attention, optim, wrap, statedict; it is needed\n"
    "only when two kinds have a component of the same name.\n"
    "\n"
    "  --path DIR   also search DIR; may be repeated\n";

static const char top_help[] =
    "usage: fsdpc plugins <list|info> [args]\n"
    "\n"
    "  list          list loaded plugin components and refused files\n"
    "  info NAME     show one component's description and options\n"
    "\n"
    "`fsdpc plugins list --help` and `fsdpc plugins info --help` say more.\n";

enum { O_PATH = 256 };
static const cli_opt path_opts[] = {{"path", O_PATH, "DIR"}, {0}};
const cli_cmd fsdpc__plugins_list_cmd = {"plugins list", list_help, path_opts};
const cli_cmd fsdpc__plugins_info_cmd = {"plugins info", info_help, path_opts};

typedef struct plugin_args {
  const cli_cmd *cmd;
  const char *paths[MAX_PATHS];
  int n_paths, want_pos;
  const char *pos;
} plugin_args;

/* [--path DIR]... and at most one positional argument (want_pos). */
static int plugin_arg(void *ctx, int id, const char *v) {
  plugin_args *a = ctx;
  if (id == O_PATH && !*v)
    return cli_usage_error(a->cmd, "--path needs a folder") == 0;
  if (id == O_PATH && a->n_paths == MAX_PATHS)
    return cli_usage_error(a->cmd, "at most %d --path options", MAX_PATHS) == 0;
  if (id == O_PATH)
    a->paths[a->n_paths++] = v;
  else if (a->want_pos && !a->pos)
    a->pos = v;
  else
    return cli_usage_error(a->cmd, "unexpected argument '%s'", v) == 0;
  return 1;
}

/* Plugin strings are untrusted: escaped for the terminal. Eight rotating
 * buffers, so that one printf may hold several. */
static const char *esc(const char *s) {
  static char bufs[8][512];
  static int next;
  if (!s || !*s)
    return "-";
  char *b = bufs[next++ % 8];
  return fsdpc_escape(b, sizeof bufs[0], s);
}

static int max_int(int a, int b) {
  return a > b ? a : b;
}

static void print_list(const fsdpc_plugins *p) {
  int n = fsdpc_plugins_count(p), wk = 4, wn = 4, wv = 7, wp = 4;
  fsdpc_plugin_info in = {.struct_size = sizeof in};
  for (int i = 0; i < n; i++) {
    fsdpc_plugins_get(p, i, &in, NULL);
    wk = max_int(wk, (int)strlen(in.kind_name));
    wn = max_int(wn, (int)strlen(esc(in.name)));
    wv = max_int(wv, (int)strlen(esc(in.version)));
    wp = max_int(wp, (int)strlen(in.path));
  }
  if (n == 0) {
    printf("no plugins found\n");
    return;
  }
  printf("%-*s  %-*s  %-*s  %-5s  %5s  %-*s  %s\n", wk, "KIND", wn, "NAME", wv, "VERSION", "ABI",
         "SCORE", wp, "PATH", "CAPABILITIES");
  /* Grouped by kind, in search order within a kind. */
  for (int32_t k = 0; fsdpc_plugin_kind_name(k); k++)
    for (int i = 0; i < n; i++) {
      fsdpc_plugins_get(p, i, &in, NULL);
      if (in.kind != k)
        continue;
      char abi[24];
      snprintf(abi, sizeof abi, "%u.%u", in.abi_major, in.abi_minor);
      printf("%-*s  %-*s  %-*s  %-5s  %5d  %-*s  %s\n", wk, in.kind_name, wn, esc(in.name), wv,
             esc(in.version), abi, (int)in.score, wp, in.path, esc(in.capabilities));
    }
}

static int cmd_list(int argc, char **argv) {
  plugin_args a = {.cmd = &fsdpc__plugins_list_cmd};
  int rc = cli_parse(a.cmd, argc, argv, plugin_arg, &a);
  if (rc >= 0)
    return rc;
  fsdpc_plugins *p;
  fsdpc_err err = {0};
  if (fsdpc_plugins_open(a.paths, a.n_paths, &p, &err) != FSDPC_OK)
    return cli_fail(&fsdpc__plugins_list_cmd, err.msg);
  print_list(p);
  int nr = fsdpc_plugins_refused_count(p);
  if (nr > 0) {
    printf("\nrefused:\n");
    for (int i = 0; i < nr; i++) {
      const char *path, *reason;
      fsdpc_plugins_refused(p, i, &path, &reason);
      printf("  %s  [%s]\n", esc(reason), esc(path));
    }
  }
  printf("\nsearched:");
  int ns = fsdpc_plugins_searched_count(p);
  for (int i = 0; i < ns; i++)
    printf(" %s", fsdpc_plugins_searched(p, i));
  printf("%s\n", ns ? "" : " (no plugin folder exists)");
  fsdpc_plugins_destroy(p);
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
         o->default_value ? o->default_value : "(required)", range[0] ? range : "-", esc(o->help));
}

static void print_info(const fsdpc_plugin_info *in) {
  printf("%s/%s %s\n", in->kind_name, esc(in->name), esc(in->version));
  printf("  description:  %s\n", esc(in->description));
  printf("  capabilities: %s\n", esc(in->capabilities));
  printf("  ABI:          %u.%u (interface v%u)\n", in->abi_major, in->abi_minor,
         in->iface_version);
  printf("  score:        %d (for `auto` selection)\n", (int)in->score);
  printf("  path:         %s\n", in->path);
  if (in->n_options == 0) {
    printf("  options:      none\n");
    return;
  }
  printf("  options (under %s.options):\n", in->kind_name);
  printf("    %-22s %-6s %-20s %-24s %s\n", "KEY", "TYPE", "DEFAULT", "RANGE", "HELP");
  for (uint32_t i = 0; i < in->n_options; i++)
    print_option(in->options[i]);
}

static int cmd_info(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__plugins_info_cmd;
  plugin_args a = {.cmd = cmd, .want_pos = 1};
  int rc = cli_parse(cmd, argc, argv, plugin_arg, &a);
  if (rc >= 0)
    return rc;
  const char *spec = a.pos;
  if (!spec)
    return cli_usage_error(cmd, "which plugin? give NAME or KIND/NAME");
  fsdpc_plugins *p;
  fsdpc_err err = {0};
  if (fsdpc_plugins_open(a.paths, a.n_paths, &p, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  fsdpc_plugin_info in = {.struct_size = sizeof in};
  fsdpc_status st = fsdpc_plugins_find(p, spec, &in, &err);
  if (st == FSDPC_OK)
    print_info(&in);
  fsdpc_plugins_destroy(p);
  if (st == FSDPC_INVALID_USAGE) /* an unknown kind, an ambiguous name */
    return cli_usage_error(cmd, "%s", err.msg);
  return st == FSDPC_OK ? 0 : cli_fail(cmd, err.msg);
}

const cli_sub fsdpc__plugins_subs[] = {
    {"list", "list loaded plugin components and refused files", cmd_list, &fsdpc__plugins_list_cmd},
    {"info", "show one component's description and options", cmd_info, &fsdpc__plugins_info_cmd},
};
const int fsdpc__plugins_n_subs = 2;

int fsdpc__cmd_plugins(int argc, char **argv) {
  return cli_dispatch("plugins", top_help, fsdpc__plugins_subs, fsdpc__plugins_n_subs, argc, argv);
}
