/* See cli.h. */
#define _GNU_SOURCE /* getopt_long's permutation and optional behaviours */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A positional argument that looks like a negative number ("-5", an id for
 * data decode) would be read as a short option: it is marked with this
 * byte, which no option starts with, and unmarked when handed out. */
#define NEG_MARK '\x01'

/* One parse: getopt_long over copies of argv. */
typedef struct cli {
  const cli_cmd *cmd;
  int argc;
  char **argv; /* copies with option names normalised */
  char **orig; /* the caller's: every string handed out points into these */
  void *longopts;
  char shortopts[64];
  int rest; /* after "--": the next positional's index, else 0 */
  int rc;   /* exit code once cli_next returned CLI_STOP */
} cli;

enum {
  CLI_END = -1,  /* every argument was read */
  CLI_STOP = -3, /* --help was printed (rc 0) or a usage error (rc 2) */
};

static int n_opts(const cli_opt *o) {
  int n = 0;
  while (o && o[n].name)
    n++;
  return n;
}

static char *normalise(const char *a) {
  size_t len = strlen(a);
  char *c = malloc(len + 2);
  if (!c)
    return NULL;
  if (a[0] == '-' && isdigit((unsigned char)a[1])) { /* "-5": a number, not an option */
    c[0] = NEG_MARK;
    memcpy(c + 1, a, len + 1);
    return c;
  }
  memcpy(c, a, len + 1);
  /* "--nproc_per_node=8" -> "--nproc-per-node=8": the name only, not the value */
  if (c[0] == '-' && c[1] == '-')
    for (char *p = c + 2; *p && *p != '='; p++)
      if (*p == '_')
        *p = '-';
  return c;
}

static int cli_init(cli *c, const cli_cmd *cmd, int argc, char **argv) {
  memset(c, 0, sizeof *c);
  c->cmd = cmd;
  int n = n_opts(cmd->opts);
  struct option *lo = calloc((size_t)n + 2, sizeof *lo);
  c->argv = calloc((size_t)argc + 1, sizeof *c->argv);
  if (!lo || !c->argv) {
    free(lo);
    free(c->argv);
    return 0;
  }
  for (int i = 0; i < n; i++)
    lo[i] = (struct option){cmd->opts[i].name, cmd->opts[i].arg ? required_argument : no_argument,
                            NULL, cmd->opts[i].id};
  lo[n] = (struct option){"help", no_argument, NULL, 'h'};
  c->longopts = lo;
  /* "-": positionals come back in order; ":": a missing value is reported */
  size_t k = 0;
  c->shortopts[k++] = '-';
  c->shortopts[k++] = ':';
  c->shortopts[k++] = 'h';
  for (int i = 0; i < n && k + 3 < sizeof c->shortopts; i++)
    if (cmd->opts[i].id < 128 && isalpha(cmd->opts[i].id)) {
      c->shortopts[k++] = (char)cmd->opts[i].id;
      if (cmd->opts[i].arg)
        c->shortopts[k++] = ':';
    }
  c->shortopts[k] = '\0';
  c->argc = argc;
  c->orig = argv;
  for (int i = 0; i < argc; i++)
    if (!(c->argv[i] = i ? normalise(argv[i]) : strdup(argv[i])))
      return 0;
  optind = 0; /* 0: GNU getopt starts over (a second parse in one process) */
  opterr = 0;
  return 1;
}

static void cli_done(cli *c) {
  for (int i = 0; c->argv && i < c->argc; i++)
    free(c->argv[i]);
  free(c->argv);
  free(c->longopts);
  memset(c, 0, sizeof *c);
}

/* p points into one of the copies: the same place in the caller's argv,
 * which lives as long as the process (a copy differs only in '_' of option
 * names and the mark of a negative number). */
static const char *orig(const cli *c, const char *p) {
  for (int j = 0; p && j < c->argc; j++) {
    const char *a = c->argv[j];
    if (p >= a && p <= a + strlen(a)) {
      size_t off = (size_t)(p - a);
      if (a[0] == NEG_MARK)
        off = off ? off - 1 : 0;
      return c->orig[j] + off;
    }
  }
  return p;
}

static const char *unmark(const char *s) {
  return s && s[0] == NEG_MARK ? s + 1 : s;
}

static void vreport(const cli_cmd *cmd, const char *fmt, va_list ap) {
  char msg[1200];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "fsdpc %s: %s (`fsdpc %s --help`)\n", cmd->path, msg, cmd->path);
}

int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(cmd, fmt, ap);
  va_end(ap);
  return 2;
}

fsdpc_status cli_error(fsdpc_err *err, fsdpc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err) {
    err->status = st;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  }
  va_end(ap);
  return st;
}

int cli_fail(const cli_cmd *cmd, const char *msg) {
  fprintf(stderr, "fsdpc %s: %s\n", cmd->path, msg);
  return 1;
}

/* "--nam" or "--name=x" -> "nam" / "name" in buf. */
static const char *opt_word(const char *arg, char *buf, size_t cap) {
  const char *s = arg;
  while (*s == '-')
    s++;
  size_t n = strcspn(s, "=");
  snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
  return buf;
}

/* An unknown (or ambiguous) option: name the closest ones. */
static int unknown_option(cli *c, const char *arg) {
  const cli_opt *o = c->cmd->opts;
  int n = n_opts(o);
  const char **names = calloc((size_t)n + 1, sizeof *names);
  char word[128];
  opt_word(arg, word, sizeof word);
  for (int i = 0; names && i < n; i++)
    names[i] = o[i].name;
  if (names)
    names[n] = "help";
  const char *near = names ? fsdpc_suggest(word, names, n + 1) : NULL;
  for (int i = 0; strchr(arg, '=') && i < n; i++)
    if (strcmp(o[i].name, word) == 0 && !o[i].arg) {
      free(names);
      return cli_usage_error(c->cmd, "--%s takes no value", word);
    }
  /* A prefix that several options share is ambiguous, not unknown. */
  int prefix_of = 0;
  size_t wl = strlen(word);
  for (int i = 0; arg[0] == '-' && arg[1] == '-' && i < n; i++)
    prefix_of += strncmp(o[i].name, word, wl) == 0;
  if (prefix_of > 1)
    cli_usage_error(c->cmd, "option '--%s' is ambiguous (%d options start so)", word, prefix_of);
  else if (near) /* the option as written, without its "=value" */
    cli_usage_error(c->cmd, "unknown option '%.*s' (did you mean '--%s'?)",
                    (int)strcspn(unmark(arg), "="), unmark(arg), near);
  else
    cli_usage_error(c->cmd, "unknown option '%.*s'", (int)strcspn(unmark(arg), "="), unmark(arg));
  free(names);
  return 2;
}

static const char *name_of(const cli *c, int id) {
  for (const cli_opt *o = c->cmd->opts; o && o->name; o++)
    if (o->id == id)
      return o->name;
  return "?";
}

/* The next option's id (its value in *val, NULL for a flag), CLI_POS, CLI_END
 * or CLI_STOP. Values point into the caller's argv. */
static int cli_next(cli *c, const char **val) {
  *val = NULL;
  if (c->rest) { /* after "--": everything is positional */
    if (c->rest >= c->argc)
      return CLI_END;
    *val = orig(c, c->argv[c->rest++]);
    return CLI_POS;
  }
  int idx = -1;
  int r = getopt_long(c->argc, c->argv, c->shortopts, c->longopts, &idx);
  if (r == -1) {
    if (optind < c->argc) { /* "--" ended the options */
      c->rest = optind;
      return cli_next(c, val);
    }
    return CLI_END;
  }
  if (r == 1) {
    *val = orig(c, optarg);
    return CLI_POS;
  }
  if (r == 'h') {
    fputs(c->cmd->help, stdout);
    c->rc = 0;
    return CLI_STOP;
  }
  if (r == ':') {
    c->rc = cli_usage_error(c->cmd, "--%s needs a value", name_of(c, optopt));
    return CLI_STOP;
  }
  if (r == '?') {
    c->rc = unknown_option(c, c->argv[optind - 1]);
    return CLI_STOP;
  }
  *val = orig(c, optarg);
  return r;
}

int cli_parse(const cli_cmd *cmd, int argc, char **argv,
              int (*on_arg)(void *ctx, int id, const char *val), void *ctx) {
  cli c;
  const char *v;
  int r, rc = -1;
  if (!cli_init(&c, cmd, argc, argv)) {
    cli_done(&c);
    return 1;
  }
  while (rc < 0 && (r = cli_next(&c, &v)) != CLI_END)
    rc = r == CLI_STOP ? c.rc : on_arg(ctx, r, v) ? -1 : 2;
  cli_done(&c);
  return rc;
}

int cli_int(const cli_cmd *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
            int64_t *out) {
  char *end;
  errno = 0;
  long long x = v ? strtoll(v, &end, 10) : 0;
  if (!v || errno || end == v || *end || x < lo || x > hi)
    return cli_usage_error(cmd, "--%s expects an integer in [%" PRId64 ", %" PRId64 "], got '%s'",
                           opt, lo, hi, v ? v : ""),
           0;
  *out = x;
  return 1;
}

int cli_i32(const cli_cmd *cmd, const char *opt, const char *v, int32_t lo, int32_t hi,
            int32_t *out) {
  int64_t x;
  if (!cli_int(cmd, opt, v, lo, hi, &x))
    return 0;
  *out = (int32_t)x;
  return 1;
}

int cli_u64(const cli_cmd *cmd, const char *opt, const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = v ? strtoull(v, &end, 0) : 0;
  if (!v || errno || end == v || *end || v[0] == '-')
    return cli_usage_error(cmd, "--%s expects a non-negative integer, got '%s'", opt, v ? v : ""),
           0;
  *out = x;
  return 1;
}

int cli_double(const cli_cmd *cmd, const char *opt, const char *v, double lo, double hi,
               int lo_open, double *out) {
  char *end;
  double x = v ? strtod(v, &end) : 0.0;
  if (!v || !v[0] || *end || !(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
    if (lo_open && lo == 0 && hi >= 1e9)
      cli_usage_error(cmd, "--%s expects a positive number, got '%s'", opt, v ? v : "");
    else
      cli_usage_error(cmd, "--%s expects a number in %c%g, %g], got '%s'", opt, lo_open ? '(' : '[',
                      lo, hi, v ? v : "");
    return 0;
  }
  *out = x;
  return 1;
}

int cli_choice(const cli_cmd *cmd, const char *opt, const char *v, const char *const *choices,
               int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(v, choices[i]) == 0)
      return i;
  char list[512] = "";
  size_t len = 0;
  for (int i = 0; i < n && len < sizeof list; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", choices[i]);
  const char *near = fsdpc_suggest(v, choices, n);
  cli_usage_error(cmd, "--%s '%s': expected one of %s%s%s%s", opt, v, list,
                  near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
  return -1;
}

int cli_dispatch(const char *path, const char *help, const cli_sub *subs, int n, int argc,
                 char **argv) {
  if (argc < 2) {
    fputs(help, stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    fputs(help, stdout);
    return 0;
  }
  for (int i = 0; i < n; i++)
    if (strcmp(argv[1], subs[i].name) == 0)
      return subs[i].run(argc - 1, argv + 1);
  const char **names = n > 0 ? calloc((size_t)n, sizeof *names) : NULL;
  char list[512] = "";
  size_t len = 0;
  for (int i = 0; names && i < n; i++) {
    names[i] = subs[i].name;
    if (len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", subs[i].name);
  }
  const char *near = names ? fsdpc_suggest(argv[1], names, n) : NULL;
  if (near)
    fprintf(stderr, "fsdpc %s: unknown command '%s' (did you mean '%s'?; commands: %s)\n", path,
            argv[1], near, list);
  else
    fprintf(stderr, "fsdpc %s: unknown command '%s' (commands: %s)\n", path, argv[1], list);
  free(names);
  return 2;
}
