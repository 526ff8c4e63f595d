/* TensorBoard event files: what `log.tensorboard: true` writes under
 * log.dir, one file per start (events.out.tfevents.<s>.<us>.<host>.<pid>),
 * that TensorBoard's own reader loads next to metrics.jsonl.
 *
 * A file is a sequence of records: uint64 length (little endian), masked
 * CRC-32C of those 8 bytes, the data, masked CRC-32C of the data. Each
 * record's data is an Event protobuf (tb_event.proto, encoded by
 * libprotobuf-c): first file_version "brain.Event:2", then a SessionLog
 * START at the first step this start trains (TensorBoard then drops the
 * steps from there on that older files in the folder hold: the steps after
 * a resume's checkpoint, or a previous run's -- as metrics.jsonl readers
 * do), then one Event per logged step with a Summary of simple_value
 * scalars. */
#ifndef FSDPC_OBS_TENSORBOARD_H
#define FSDPC_OBS_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct fsdpc_tb fsdpc_tb;

/* Opens a new event file in dir (created with its parents); start_step is
 * the number of steps done before this start (0: fresh). */
fsdpc_status fsdpc__tb_open(const char *dir, int64_t start_step, fsdpc_tb **out, fsdpc_err *err);

/* One Event at step with n scalars tags[i] = values[i]; flushed. */
fsdpc_status fsdpc__tb_scalars(fsdpc_tb *tb, int64_t step, double wall_time,
                               const char *const *tags, const double *values, int n,
                               fsdpc_err *err);

/* The path of the file being written. */
const char *fsdpc__tb_path(const fsdpc_tb *tb);

/* Closes the file; NULL is a no-op. */
void fsdpc__tb_close(fsdpc_tb *tb);

#endif
