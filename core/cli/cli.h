/* The one argument parser every fsdpc command uses: getopt_long over a
 * table of long options, so that every command takes `--opt value` and
 * `--opt=value`, a unique prefix of a long option, `_` for `-` in option
 * names (torchrun's --nproc_per_node), `--` to end the options, and
 * answers an unknown option or subcommand with the closest one ("did you
 * mean"). Positional arguments (and key=value overrides) come back in
 * order. Exit codes: 0 success (and --help), 1 failure, 2 usage error
 * (docs/cli.md). The tables are also what `fsdpc completion` writes the
 * shell completions and `fsdpc help --man` the man page from. */
#ifndef FSDPC_CLI_CLI_H
#define FSDPC_CLI_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "fsdpc/fsdpc.h"

/* One long option: name without "--", the id on_arg gets (a value
 * above 255 or a short option's character), and the value's name in help
 * (NULL: a flag without a value). */
typedef struct cli_opt {
  const char *name;
  int id;
  const char *arg;
} cli_opt;

/* A command (or subcommand): its words after "fsdpc" ("data prepare"),
 * its --help text, and its options (ended by a {0} entry). */
typedef struct cli_cmd {
  const char *path;
  const char *help;
  const cli_opt *opts;
} cli_cmd;

/* What an on_arg callback gets as id for a positional argument. */
enum { CLI_POS = -2 };

/* Reads every argument of argv[1..] through on_arg(ctx, id, val): id is an
 * option's id (val its value, NULL for a flag) or CLI_POS (val the
 * argument); on_arg returns 1 to go on, or 0 after printing a usage error.
 * Returns -1 when every argument was read, else the exit code (0 after
 * --help, 2 after a usage error, 1 out of memory). */
int cli_parse(const cli_cmd *cmd, int argc, char **argv,
              int (*on_arg)(void *ctx, int id, const char *val), void *ctx);

/* Prints "fsdpc PATH: <message>" (and a pointer to --help) to stderr and
 * returns 2: a usage error. */
int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "fsdpc PATH: <msg>" to stderr and returns 1: a failure (what the
 * library refused, one line). */
int cli_fail(const cli_cmd *cmd, const char *msg);

/* Fills err (status st, the formatted one-line message) and returns st:
 * for the CLI's own checks of files it reads. */
fsdpc_status cli_error(fsdpc_err *err, fsdpc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Values: each returns 1, or prints a usage error naming the option and
 * returns 0. */
int cli_int(const cli_cmd *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
            int64_t *out);
int cli_i32(const cli_cmd *cmd, const char *opt, const char *v, int32_t lo, int32_t hi,
            int32_t *out);
int cli_u64(const cli_cmd *cmd, const char *opt, const char *v, uint64_t *out);
/* lo < x <= hi when lo_open, else lo <= x <= hi. */
int cli_double(const cli_cmd *cmd, const char *opt, const char *v, double lo, double hi,
               int lo_open, double *out);
/* v's index among choices (n), or a usage error with the closest one. */
int cli_choice(const cli_cmd *cmd, const char *opt, const char *v, const char *const *choices,
               int n);

/* A command table for subcommands: name, what it does (one line), and the
 * function that runs it with argv starting at its name. */
typedef struct cli_sub {
  const char *name;
  const char *about;
  int (*run)(int argc, char **argv);
  const cli_cmd *cmd; /* its parser table (completion, man page); NULL: none */
} cli_sub;
/* Runs the subcommand argv[1] names (--help: prints help, 0; none or an
 * unknown one: a usage error with the closest name, 2). */
int cli_dispatch(const char *path, const char *help, const cli_sub *subs, int n, int argc,
                 char **argv);

#endif
