/* The run plan's file checks. What `fsdpc config check` adds to a loaded
 * config so that it reports what `fsdpc train` would refuse before any
 * weight is read: the engine's refusal of a bf16 reduction on the CPU, and
 * the files the config names (token files, tokenizer, the HF folder to
 * start from, a checkpoint to resume), read only as far as their headers; a
 * JSONL dataset is checked as train prepares it (every example, nothing
 * written). And the HF rules of model.config, which every run plan checks. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "data/tokenizer.h"
#include "data/tokfile.h"
#include "io/hf_ckpt.h"
#include "model/hf_rules.h"
#include "runplan/runplan.h"

static fsdpc_status check_tokfile(const fsdpc_run_plan *p, const char *path, fsdpc_err *err) {
  fsdpc_tokfile *tf = NULL;
  FSDPC_TRY(fsdpc__tokfile_open(path, &tf, err));
  fsdpc_status st =
      fsdpc__run_check_vocab(p, "the token file's vocabulary", path, tf->hdr.vocab_size, err);
  fsdpc__tokfile_close(tf);
  return st;
}

/* A token file, or a JSONL dataset checked as train prepares it: every
 * example read, rendered (chat template) and tokenized, nothing written. */
static fsdpc_status check_data(const fsdpc_run_plan *p, const char *path, fsdpc_err *err) {
  if (!fsdpc__is_jsonl_path(path))
    return check_tokfile(p, path, err);
  fsdpc_prepare_opts o;
  fsdpc__prepare_opts_from_config(p->cfg, &o);
  const char *in[1] = {path};
  o.inputs = in;
  o.n_inputs = 1;
  o.dry_run = 1;
  fsdpc_prepare_stats st;
  return fsdpc__prepare(&o, &st, err);
}

fsdpc_status fsdpc__run_plan_check_files(const fsdpc_run_plan *p, fsdpc_err *err) {
  const fsdpc_config *c = p->cfg;
  /* The engine's refusal (fsdp/units.c); the planner still plans such a
   * config (it reduces in fp32 on the CPU). */
  if (p->modes.device == FSDPC_DEVICE_CPU && p->modes.reduce_dtype == FSDPC_DTYPE_BF16)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "fsdp.mixed_precision.reduce_dtype=bf16 needs train.device: cuda; the CPU "
                       "path reduces gradients in fp32 (set it to fp32)");
  /* A config without data.train is not yet a whole run (the data comes as
   * an override at train time): the data checks, the tokenizer's included
   * when it is the default byte tokenizer, are then left to the run. */
  int data = c->data.train[0] != '\0';
  if (data)
    FSDPC_TRY(check_data(p, c->data.train, err));
  if (c->data.eval[0])
    FSDPC_TRY(check_data(p, c->data.eval, err));
  if (data && !c->data.eval[0] && !(c->data.eval_fraction > 0.0) && c->train.eval_every > 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: train.eval_every is %lld but there is no evaluation data; set "
                       "data.eval or data.eval_fraction",
                       c->source, (long long)c->train.eval_every);
  if (data || strcmp(c->data.tokenizer, "byte") != 0) {
    fsdpc_tokenizer *tok = NULL;
    FSDPC_TRY(fsdpc__tokenizer_open(c->data.tokenizer, &tok, err));
    fsdpc_status st = fsdpc__run_check_vocab(p, "the data.tokenizer vocabulary", c->data.tokenizer,
                                             fsdpc__tokenizer_vocab_size(tok), err);
    fsdpc__tokenizer_destroy(tok);
    FSDPC_TRY(st);
  }
  if (c->model.init.from[0]) {
    fsdpc_hf_ckpt *ck = NULL;
    FSDPC_TRY(fsdpc__hf_ckpt_open(c->model.init.from, &ck, err));
    fsdpc__hf_ckpt_close(ck);
  }
  const char *res = c->checkpoint.resume;
  struct stat sb;
  if (res[0] && strcmp(res, "none") != 0 && strcmp(res, "auto") != 0 &&
      (stat(res, &sb) != 0 || !S_ISDIR(sb.st_mode)))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: checkpoint.resume: %s is not a checkpoint folder; point it at one, "
                       "or use auto or none",
                       c->source, res);
  if (strcmp(res, "auto") == 0 && !c->checkpoint.dir[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "checkpoint.resume=auto needs checkpoint.dir (where to look)");
  return FSDPC_OK;
}

fsdpc_status fsdpc__run_check_hf_config(const fsdpc_config *c, fsdpc_err *err) {
  if (!c->model.config[0])
    return FSDPC_OK;
  return fsdpc__hf_rules_config_file(c->model.config, c->data.seq_len, err);
}
