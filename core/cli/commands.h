/* Subcommands of the fsdpc executable. Each takes argv starting at its own
 * name (argv[0] = "config") and returns the process exit status: 0 success,
 * 1 the command failed (a one-line reason on stderr), 2 bad usage. To add a
 * command: declare it here and add a row to the table in main.c. */
#ifndef FSDPC_CLI_COMMANDS_H
#define FSDPC_CLI_COMMANDS_H

int fsdpc__cmd_config(int argc, char **argv);

#endif
