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

#include "cli.h"

/* ---- subcommands (data_make.c, data_inspect.c, data_codec.c,
 * data_prepare.c) and their parser tables ----------- */

int fsdpc__data_synth(int argc, char **argv);
int fsdpc__data_prepare(int argc, char **argv);
int fsdpc__data_tokenize(int argc, char **argv);
int fsdpc__data_info(int argc, char **argv);
int fsdpc__data_batch(int argc, char **argv);
int fsdpc__data_encode(int argc, char **argv);
int fsdpc__data_decode(int argc, char **argv);
int fsdpc__data_cache(int argc, char **argv); /* data_cache.c */
extern const cli_cmd fsdpc__data_synth_cmd, fsdpc__data_prepare_cmd, fsdpc__data_tokenize_cmd,
    fsdpc__data_info_cmd, fsdpc__data_batch_cmd, fsdpc__data_encode_cmd, fsdpc__data_decode_cmd,
    fsdpc__data_cache_cmd;

/* ---- shared helpers (cmd_data.c) --------------------------------------- */

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

#endif
