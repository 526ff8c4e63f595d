/* Internal to the CLI: the `fsdpc data` subcommands and the helpers they
 * share. Each subcommand gets argv starting at its own name (argv[0] =
 * "synth") and returns the process exit code: 0 success, 1 failure (one line
 * on stderr), 2 usage error. Messages name the subcommand as
 * "fsdpc data <cmd>: ...". */
#ifndef FSDPC_CLI_DATA_CLI_H
#define FSDPC_CLI_DATA_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/tokenizer.h"

/* ---- subcommands (data_make.c, data_inspect.c, data_codec.c,
 * data_prepare.c) ----------- */

int fsdpc__data_synth(int argc, char **argv);
int fsdpc__data_prepare(int argc, char **argv);
int fsdpc__data_tokenize(int argc, char **argv);
int fsdpc__data_info(int argc, char **argv);
int fsdpc__data_batch(int argc, char **argv);
int fsdpc__data_encode(int argc, char **argv);
int fsdpc__data_decode(int argc, char **argv);
int fsdpc__data_cache(int argc, char **argv); /* data_cache.c */

/* ---- shared helpers (cmd_data.c) --------------------------------------- */

/* If argv[*i] is --name or --name=VALUE, sets *val (the next argument in the
 * first form) and returns 1; returns -1 if the value is missing. */
int fsdpc__data_opt_value(int argc, char **argv, int *i, const char *name, const char **val);

/* Returns 1 for --help or -h. */
int fsdpc__data_is_help(const char *a);

/* Parse --name's value s into *out and return 1; print a usage message naming
 * `fsdpc data cmd` and return 0 when it is not a (bounded) integer. */
int fsdpc__data_parse_i64(const char *cmd, const char *name, const char *s, int64_t lo, int64_t hi,
                          int64_t *out);
int fsdpc__data_parse_u64(const char *cmd, const char *name, const char *s, uint64_t *out);

/* Prints that arg is unknown (or needs a value when missing) and returns 2. */
int fsdpc__data_bad_arg(const char *cmd, const char *arg, int missing);

/* Prints err's message and returns 1. */
int fsdpc__data_fail(const char *cmd, const fsdpc_err *err);

/* Prints bytes C-escaped inside quotes; stops after max bytes. */
void fsdpc__data_print_escaped(FILE *f, const unsigned char *s, size_t n, size_t max);

/* Prints ids (n) as text, C-escaped: decoded one by one with tok (special
 * tokens that decode to nothing by name, e.g. <|eot_id|>, <eos>), or as
 * bytes (< 256) and <id> without one. Runs with target[i] == 0 are wrapped
 * in {{ }} (target NULL: all targets); where doc_ids changes, " || ". */
void fsdpc__data_print_tokens(FILE *f, const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n,
                              const uint8_t *target, const int32_t *doc_ids);

/* Reads a whole file into *data (malloc'd, owned by the caller; not
 * NUL-terminated) of *len bytes. */
fsdpc_status fsdpc__data_read_whole(const char *path, char **data, size_t *len, fsdpc_err *err);

/* Opens "byte" or a tokenizer.json/folder; parse_special applies to BPE. The
 * caller destroys *tok. */
fsdpc_status fsdpc__data_open_tokenizer(const char *spec, int parse_special, fsdpc_tokenizer **tok,
                                        fsdpc_err *err);

#endif
