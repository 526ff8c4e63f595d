/* The trainer state a checkpoint carries (state.c), and the training hooks
 * (train.c) that save, resume and stop on a signal. */
#ifndef FSDPC_CKPT_STATE_H
#define FSDPC_CKPT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "model/llama.h"

typedef struct fsdpc_ckpt_state {
  int64_t step;                      /* optimizer steps done */
  int has_optimizer;                 /* optimizer state saved with the weights */
  int64_t loader_epoch, loader_step; /* fsdpc_loader_state */
  int64_t global_batch, seq_len, data_seed;
  char sched_name[16];
  double base_lr, min_lr_rate;
  int64_t warmup_steps, max_steps;
  int64_t init_seed;
  int world_size;
  char strategy[32];
  uint64_t config_hash;
  char *config_text; /* owned: fsdpc__ckpt_config_text at save time */
  fsdpc_model_shape model;
} fsdpc_ckpt_state;

/* JSON text (free with free()); NULL when out of memory. */
char *fsdpc__ckpt_state_build(const fsdpc_ckpt_state *s);
/* Parses what build wrote; *model_json gets the saved model object (free()). */
fsdpc_status fsdpc__ckpt_state_parse(const char *json, const char *where, fsdpc_ckpt_state *s,
                                     char **model_json, fsdpc_err *err);
void fsdpc__ckpt_state_free(fsdpc_ckpt_state *s);

/* "key=value" lines of every config key that must not change on resume
 * (malloc'd); its FNV-1a hash is the config hash. */
char *fsdpc__ckpt_config_text(const fsdpc_config *c);
uint64_t fsdpc__ckpt_hash(const char *text);
/* Every key whose value differs between the two texts (up to 8, then
 * "..."): "optim.lr (saved 0.001, now 0.002); train.seed (saved 42, now 7)". */
void fsdpc__ckpt_first_diff(const char *now, const char *saved, char *out, size_t cap);
/* One line naming the first model field that differs from the saved one. */
fsdpc_status fsdpc__ckpt_check_model(const fsdpc_model_shape *shape, const char *saved_json,
                                     const char *where, fsdpc_err *err);

#endif
