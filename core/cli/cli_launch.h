/* The start that the commands able to launch ranks (train, eval) share. */
#ifndef FSDPC_CLI_LAUNCH_H
#define FSDPC_CLI_LAUNCH_H

#include <stdio.h>

#include "dist/launch.h"

/* --help or -h anywhere: prints usage to stdout and returns 0. Otherwise
 * takes the launch options (--nproc-per-node, ...) out of argv into *lo and
 * returns -1 to go on, or prints "fsdpc CMD: <why>" and returns 2 for a bad
 * one. */
int fsdpc__cli_launch_args(const char *cmd, void (*usage)(FILE *), int *argc, char **argv,
                           fsdpc_launch_opts *lo);

#endif
