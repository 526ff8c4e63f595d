/* Subcommands of the fsdpc executable. Each gets argv starting at its own
 * name (argv[0] = "data") and returns the process exit code: 0 success,
 * 1 failure (one line on stderr), 2 usage error. Each has its parser table
 * (cli.h), for the completions and the man page too. */
#ifndef FSDPC_CLI_COMMANDS_H
#define FSDPC_CLI_COMMANDS_H

#include "cli.h"

int fsdpc__cmd_train(int argc, char **argv);
int fsdpc__cmd_config(int argc, char **argv);
int fsdpc__cmd_plugins(int argc, char **argv);
int fsdpc__cmd_data(int argc, char **argv);
int fsdpc__cmd_plan(int argc, char **argv);
int fsdpc__cmd_bench(int argc, char **argv);
int fsdpc__cmd_convert(int argc, char **argv);
int fsdpc__cmd_metrics(int argc, char **argv);
int fsdpc__cmd_plot(int argc, char **argv);
int fsdpc__cmd_generate(int argc, char **argv);
int fsdpc__cmd_eval(int argc, char **argv);
int fsdpc__cmd_recipes(int argc, char **argv);
/* cmd_help.c: fsdpc help [CMD [SUB]] | --man, fsdpc completion bash|zsh */
int fsdpc__cmd_help(int argc, char **argv);
int fsdpc__cmd_completion(int argc, char **argv);

extern const cli_cmd fsdpc__train_cmd, fsdpc__plan_cmd, fsdpc__bench_cmd, fsdpc__convert_cmd,
    fsdpc__metrics_cmd, fsdpc__plot_cmd, fsdpc__generate_cmd, fsdpc__eval_cmd, fsdpc__help_cmd,
    fsdpc__completion_cmd;
/* Commands with subcommands: their tables. */
extern const cli_sub fsdpc__config_subs[], fsdpc__plugins_subs[], fsdpc__data_subs[],
    fsdpc__recipes_subs[];
extern const int fsdpc__config_n_subs, fsdpc__plugins_n_subs, fsdpc__data_n_subs,
    fsdpc__recipes_n_subs;

/* Every command (main.c), in the order `fsdpc --help` lists them. */
typedef struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *about;
  const cli_cmd *cmd;  /* its parser table; NULL when it has subcommands */
  const cli_sub *subs; /* (n_subs) */
  const int *n_subs;
} cli_command;
int fsdpc__commands(const cli_command **out);
/* An unknown command (or top-level option) word: one line naming the
 * closest, prefixed "who: " ("fsdpc", "fsdpc help"); returns 2 (main.c). */
int fsdpc__unknown_command(const char *who, const char *word);
/* The top-level usage (main.c). */
void fsdpc__usage(FILE *f);

#endif
