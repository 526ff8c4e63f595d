/* Subcommands of the fsdpc executable: each takes the arguments after its
 * own name (argv[0] is the subcommand) and returns the process exit code
 * (0 ok, 1 error, 2 usage). */
#ifndef FSDPC_CLI_COMMANDS_H
#define FSDPC_CLI_COMMANDS_H

int fsdpc__cmd_plugins(int argc, char **argv);

#endif
