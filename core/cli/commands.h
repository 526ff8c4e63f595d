/* Subcommands of the fsdpc executable. Each gets argv starting at its own
 * name (argv[0] = "data") and returns the process exit code: 0 success,
 * 1 failure (one line on stderr), 2 usage error. */
#ifndef FSDPC_CLI_COMMANDS_H
#define FSDPC_CLI_COMMANDS_H

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

#endif
