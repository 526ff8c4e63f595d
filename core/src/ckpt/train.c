/* Checkpoints in a training run: resume at setup, a save every
 * checkpoint.save_steps, a save and a clean stop on SIGTERM / SIGUSR1, and
 * the final checkpoint at the end.
 *
 * Stopping on a signal: the handler only sets a flag. Between steps every
 * rank contributes its flag to one all-reduce, so all ranks see the same
 * answer after the same step, save the same checkpoint and exit 0, even
 * when the signal reached only some of them. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/peft.h"
#include "ckpt/diverge.h"
#include "ckpt/state.h"
#include "ckpt/test_hooks.h"
#include "ckpt/train_hooks.h"
#include "ckpt/verify.h"
#include "dist/save_notify.h"
#include "model/hf_rules.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* Process-wide by nature: a signal handler can reach nothing else. */
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig) {
  g_stop_signal = sig;
}

/* Restarts the peak (VmHWM) so that it measures what follows alone. */
static void reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f) {
    fputs("5", f);
    fclose(f);
  }
}

struct fsdpc_ckpt_run {
  fsdpc_ckpt_formats fmt;
  fsdpc_ckpt_host *host;
  void *keep;
  char *config_text, *config_yaml;
  uint64_t config_hash;
  int64_t last_saved; /* step of the last checkpoint written (or loaded) */
  int signal_at;      /* test hook: raise SIGTERM on rank 0 after this step */
  int64_t kill_step;  /* test hook: die during the save of this step ... */
  int kill_files;     /* ... after writing this many files */
  int warned_grace;   /* a save took longer than dist.term_grace_s */
  int have_base_id;   /* LoRA: base_id was computed (once per run) */
  fsdpc_base_id base_id;
  fsdpc_diverge div;  /* the divergence rule of rotation (ckpt/diverge.h) */
};

static const char *intermediate_name(const fsdpc_config *c, fsdpc_err *err, fsdpc_status *st) {
  /* checkpoint.intermediate_format is the one source of truth;
   * fsdp.state_dict_type (the PyTorch spelling) only picks the format when
   * intermediate_format was left at its default, and a contradiction is an
   * error rather than a silent choice. */
  char where[512];
  fsdpc__config_where(c, "checkpoint.intermediate_format", where, sizeof where);
  int fmt_given = strcmp(where, c->source) != 0;
  fsdpc__config_where(c, "fsdp.state_dict_type", where, sizeof where);
  int sdt_given = strcmp(where, c->source) != 0;
  const char *sdt = c->fsdp.state_dict_type == FSDPC_STATE_DICT_FULL ? "full" : "sharded";
  *st = FSDPC_OK;
  if (!sdt_given)
    return c->checkpoint.intermediate_format;
  if (!fmt_given)
    return sdt;
  if (strcmp(sdt, c->checkpoint.intermediate_format) != 0)
    *st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                      "%s: fsdp.state_dict_type=%s contradicts checkpoint.intermediate_format=%s; "
                      "set only checkpoint.intermediate_format",
                      where, c->fsdp.state_dict_type == FSDPC_STATE_DICT_FULL ? "FULL" : "SHARDED",
                      c->checkpoint.intermediate_format);
  return c->checkpoint.intermediate_format;
}

static char *dump_config(const fsdpc_config *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  fsdpc_status st = fsdpc__config_dump(c, f);
  fclose(f);
  if (st != FSDPC_OK) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* LoRA: the checkpoint holds the adapters only; the state names the base
 * they were trained on by content ("lora_base"), and a resume checks it.
 * Rank 0 reads the base once per run and the ranks share the result. */
static fsdpc_status base_identity(fsdpc_ckpt_train *s, fsdpc_err *err) {
  fsdpc_ckpt_run *r = s->run;
  if (r->have_base_id)
    return FSDPC_OK;
  const char *base = s->cfg->model.init.from;
  double v[4] = {0, 0, 0, 0}; /* crc, tensors, bytes, failed */
  fsdpc_status st = FSDPC_OK;
  if (s->rank == 0 && base[0]) {
    double t0 = fsdpc__now();
    st = fsdpc__base_id(base, &r->base_id, err);
    v[0] = r->base_id.crc, v[1] = r->base_id.tensors, v[2] = (double)r->base_id.bytes;
    v[3] = st != FSDPC_OK;
    if (st == FSDPC_OK)
      FSDPC_LOGI("LoRA base %s: %u tensors, %.1f MiB, tensors crc32 %08x (%.2f s)", base,
                 r->base_id.tensors, v[2] / 1048576.0, r->base_id.crc, fsdpc__now() - t0);
  }
  fsdpc_err e2;
  if (fsdpc__dist_all_reduce_f64(s->dist, FSDPC_GROUP_WORLD, v, 4, "lora base", &e2) != FSDPC_OK)
    return st != FSDPC_OK ? st : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s", e2.msg);
  if (st != FSDPC_OK)
    return st;
  if (v[3] != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "rank 0 could not read the LoRA base %s", base);
  r->base_id =
      (fsdpc_base_id){.crc = (uint32_t)v[0], .tensors = (uint32_t)v[1], .bytes = (uint64_t)v[2]};
  r->have_base_id = 1;
  return FSDPC_OK;
}

static fsdpc_status check_lora_base(fsdpc_ckpt_train *s, const char *json, const char *dir,
                                    fsdpc_err *err) {
  FSDPC_TRY(base_identity(s, err));
  return fsdpc__lora_check_base(json, s->cfg->model.init.from, &s->run->base_id, dir, s->rank, err);
}

static fsdpc_status build_state(fsdpc_ckpt_train *s, int64_t step, int has_optimizer, char **out,
                                fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  fsdpc_ckpt_state st = {.step = step,
                         .has_optimizer = has_optimizer,
                         .global_batch = s->plan->modes.batch.global,
                         .seq_len = s->plan->modes.batch.seq_len,
                         .data_seed = c->data.seed,
                         .base_lr = s->lr.base_lr,
                         .min_lr_rate = s->lr.min_lr_rate,
                         .warmup_steps = s->lr.warmup_steps,
                         .max_steps = s->lr.max_steps,
                         .init_seed = c->train.seed,
                         .world_size = s->plan->modes.world.world_size,
                         .config_hash = s->run->config_hash,
                         .config_text = s->run->config_text,
                         .model = s->plan->shape};
  fsdpc_loader_state ls;
  fsdpc__loader_state(s->train_ld, &ls);
  /* The position after `step` steps: batches are addressed by step, so the
   * next step to serve is `step` whatever the loader has cached. */
  ls.step = step;
  ls.epoch = step / s->plan->modes.batch.steps_per_epoch;
  st.loader_epoch = ls.epoch;
  st.loader_step = ls.step;
  snprintf(st.sched_name, sizeof st.sched_name, "%s", s->lr.name);
  snprintf(st.strategy, sizeof st.strategy, "%s",
           fsdpc__strategy_name(s->plan->modes.strategy));
  if (!(*out = fsdpc__ckpt_state_build(&st)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  if (s->plan->has_lora && base_identity(s, err) != FSDPC_OK)
    return FSDPC_SYSTEM_ERROR;
  return s->plan->has_lora
             ? fsdpc__lora_state_add_base(s->cfg->model.init.from, &s->run->base_id, out, err)
             : FSDPC_OK;
}

static fsdpc_status save(fsdpc_ckpt_train *s, const char *name, const fsdpc_component *plugin,
                         int32_t dtype, int64_t step, fsdpc_err *err) {
  fsdpc_ckpt_run *r = s->run;
  int with_opt = strcmp(plugin->desc->name, "full") != 0;
  /* A diverged step (NaN/Inf loss or grad norm poisons the weights) never
   * becomes a checkpoint: the last good one stays, and rotation never sees
   * a bad one to keep in its place. */
  fsdpc_err bad;
  int ok = fsdpc__ckpt_check_finite(r->host, with_opt, NULL, &bad) == FSDPC_OK;
  if (!fsdpc__ckpt_all_ok(r->host, ok)) {
    fsdpc__ckpt_release_staging(r->host);
    if (!ok)
      FSDPC_LOGW("step %lld: not saving %s: %s; the newest good checkpoint stays", (long long)step,
                 name, bad.msg);
    else if (s->rank == 0)
      FSDPC_LOGW("step %lld: not saving %s: another rank's weights hold NaN/Inf (see its "
                 "message); the newest good checkpoint stays",
                 (long long)step, name);
    return FSDPC_OK;
  }
  /* an intermediate checkpoint says whether its loss was diverging, so
   * that rotation keeps the last good one (ckpt/diverge.h) */
  int intermediate = strncmp(name, FSDPC_CKPT_STEP_PREFIX, strlen(FSDPC_CKPT_STEP_PREFIX)) == 0;
  fsdpc__ckpt_host_set_loss_marker(r->host,
                                   intermediate ? fsdpc__diverge_marker(&r->div, step) : NULL);
  if (intermediate && fsdpc__diverge_now(&r->div) && s->rank == 0)
    FSDPC_LOGW("step %lld: the mean loss of the last %d steps (%.4g) is above %.3g x the best "
               "so far (%.4g): %s is marked diverging, and rotation keeps the newest checkpoint "
               "that is not (checkpoint.divergence_factor)",
               (long long)step, r->div.n, fsdpc__diverge_mean(&r->div), r->div.factor, r->div.best,
               name);
  char *state = NULL;
  FSDPC_TRY(build_state(s, step, with_opt, &state, err));
  fsdpc_status st = fsdpc__ckpt_host_set_state(r->host, state, err);
  free(state);
  FSDPC_TRY(st);
  fsdpc__ckpt_host_kill_after(r->host, step == r->kill_step ? r->kill_files : 0);
  fsdpc_sd_save_opts so = {.struct_size = sizeof so, .dtype = dtype, .with_optimizer = with_opt};
  int64_t rss0, hwm0, rss1, hwm1;
  reset_peak_rss();
  fsdpc__mem_rss(&rss0, &hwm0);
  double t0 = fsdpc__now();
  fsdpc__save_notify(s->rank, 1); /* the launcher's grace waits for it */
  fsdpc_status sst = fsdpc__ckpt_save(r->host, plugin, r->fmt.opts, s->cfg->checkpoint.dir, name,
                                      &so, s->cfg->checkpoint.keep, err);
  fsdpc__save_notify(s->rank, 0);
  FSDPC_TRY(sst);
  double took = fsdpc__now() - t0;
  if (took > s->cfg->dist.term_grace_s && s->rank == 0 && !r->warned_grace++)
    FSDPC_LOGW("this save took %.1f s, more than dist.term_grace_s=%.1f s: a preemption "
               "(SIGTERM) may not leave time for its checkpoint; raise dist.term_grace_s and the "
               "scheduler's grace (SLURM KillWait, Kubernetes terminationGracePeriodSeconds)",
               took, s->cfg->dist.term_grace_s);
  fsdpc__mem_rss(&rss1, &hwm1);
  r->last_saved = step;
  fsdpc__log(s->rank == 0 ? FSDPC_LOG_INFO : FSDPC_LOG_DEBUG,
             "saved %s/%s (%s) at step %lld in %.2f s; host RSS %.1f -> %.1f MiB, peak %.1f MiB "
             "during the save",
             s->cfg->checkpoint.dir, name, plugin->desc->name, (long long)step, fsdpc__now() - t0,
             rss0 / 1048576.0, rss1 / 1048576.0, hwm1 / 1048576.0);
  return FSDPC_OK;
}

static fsdpc_status apply_state(fsdpc_ckpt_train *s, const char *dir, fsdpc_err *err) {
  fsdpc_ckpt_run *r = s->run;
  const char *json = fsdpc__ckpt_host_loaded_state(r->host);
  if (!json) {
    if (s->rank == 0)
      FSDPC_LOGW("%s holds weights only: training starts at step 0 with a fresh optimizer", dir);
    return FSDPC_OK;
  }
  if (s->plan->has_lora)
    FSDPC_TRY(check_lora_base(s, json, dir, err));
  fsdpc_ckpt_state st;
  char *model = NULL;
  FSDPC_TRY(fsdpc__ckpt_state_parse(json, dir, &st, &model, err));
  fsdpc_status rc = fsdpc__ckpt_check_model(&s->plan->shape, model, dir, err);
  free(model);
  if (rc == FSDPC_OK && !s->weights_only && st.global_batch &&
      (st.global_batch != s->plan->modes.batch.global ||
       st.seq_len != s->plan->modes.batch.seq_len))
    rc = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s was saved with a global batch of %lld x %lld tokens, this run has %lld "
                     "x %lld: set train.global_batch_size=%lld and data.seq_len=%lld to resume",
                     dir, (long long)st.global_batch, (long long)st.seq_len, (long long)s->plan->modes.batch.global,
                     (long long)s->plan->modes.batch.seq_len, (long long)st.global_batch, (long long)st.seq_len);
  if (rc == FSDPC_OK && !s->weights_only && st.loader_step >= 0) {
    fsdpc_loader_state ls = {.epoch = st.loader_epoch, .step = st.loader_step};
    rc = fsdpc__loader_restore(s->train_ld, &ls, err);
    if (rc != FSDPC_OK)
      fsdpc__err_prefix(err, "%s: data position", dir);
  }
  if (rc == FSDPC_OK && st.config_text && st.config_hash != r->config_hash && s->rank == 0) {
    char diff[1536];
    fsdpc__ckpt_first_diff(r->config_text, st.config_text, diff, sizeof diff);
    FSDPC_LOGW("%s was saved with a different config (config_hash differs): %s; continuing with "
               "this one",
               dir, diff[0] ? diff : "no key differs in the saved text (edited hash?)");
  }
  if (rc == FSDPC_OK) {
    s->start_step = st.step;
    r->last_saved = st.step;
    fsdpc__diverge_resume(&r->div, dir); /* the run's best loss goes on */
    if (s->rank == 0)
      FSDPC_LOGI("resumed from %s at step %lld (saved at world %d %s, now world %d %s)%s", dir,
                 (long long)st.step, st.world_size, st.strategy, s->plan->modes.world.world_size,
                 fsdpc__strategy_name(s->plan->modes.strategy),
                 st.has_optimizer || fsdpc__engine_n_slots(s->eng) == 0
                     ? ""
                     : "; optimizer state starts fresh");
  }
  fsdpc__ckpt_state_free(&st);
  return rc;
}

fsdpc_status fsdpc__ckpt_resume_dir(const fsdpc_config *c, char *dir, size_t cap, int *found,
                                    fsdpc_err *err) {
  const char *want = c->checkpoint.resume;
  *found = 0;
  if (!want[0] || strcmp(want, "none") == 0)
    return FSDPC_OK;
  if (strcmp(want, "auto") != 0) {
    snprintf(dir, cap, "%s", want);
    *found = 1;
    return FSDPC_OK;
  }
  if (!c->checkpoint.dir[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "checkpoint.resume=auto needs checkpoint.dir (where to look)");
  return fsdpc__ckpt_latest(c->checkpoint.dir, dir, cap, found, err);
}

static fsdpc_status resume_from(fsdpc_ckpt_train *s, const char *dir, fsdpc_err *err);

/* A save smaller than this many MiB/s x the grace fits it on any disk worth
 * checkpointing to: no probe write for it. */
#define SLOW_DISK_MIBPS 10.0

/* At start: when this rank's shards (weights and optimizer state, fp32:
 * what the sharded format writes, the planner's params + optim bytes)
 * would take longer to write than the launcher's grace after SIGTERM, say
 * so before hours are spent. The write rate is checkpoint.write_mib_s, or
 * measured in checkpoint.dir; each real save is timed too (save()). */
static void warn_save_time(fsdpc_ckpt_train *s) {
  const fsdpc_config *c = s->cfg;
  if (!c->checkpoint.dir[0] || s->rank != 0)
    return;
  fsdpc_engine_bytes eb;
  fsdpc__engine_bytes(s->eng, &eb);
  double bytes = (double)(eb.params + eb.optim), mib = bytes / 1048576.0;
  double rate = c->checkpoint.write_mib_s;
  const char *how = "checkpoint.write_mib_s";
  if (rate <= 0) {
    if (mib <= SLOW_DISK_MIBPS * c->dist.term_grace_s)
      return;
    rate = fsdpc__write_rate_mib_s(c->checkpoint.dir, (unsigned long long)bytes);
    how = "measured in checkpoint.dir";
    if (rate <= 0) {
      FSDPC_LOGW("a checkpoint save writes %.0f MiB per rank and the write rate of %s could "
                 "not be measured: set checkpoint.write_mib_s to be told whether a save fits "
                 "dist.term_grace_s=%.1f s",
                 mib, c->checkpoint.dir, c->dist.term_grace_s);
      return;
    }
  }
  double est = mib / rate;
  if (est > c->dist.term_grace_s)
    FSDPC_LOGW("a checkpoint save writes %.0f MiB per rank, about %.0f s at %.3g MiB/s (%s): "
               "more than dist.term_grace_s=%.1f s, so a SIGTERM may not leave time to save; "
               "raise dist.term_grace_s and the scheduler's grace (SLURM KillWait, Kubernetes "
               "terminationGracePeriodSeconds)",
               mib, est, rate, how, c->dist.term_grace_s);
}

static fsdpc_status resume(fsdpc_ckpt_train *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  char dir[4096];
  int found = 0;
  FSDPC_TRY(fsdpc__ckpt_resume_dir(c, dir, sizeof dir, &found, err));
  if (!found) {
    if (strcmp(c->checkpoint.resume, "auto") == 0 && s->rank == 0)
      FSDPC_LOGI("checkpoint.resume=auto: no checkpoint in %s yet; starting from scratch",
                 c->checkpoint.dir);
    return FSDPC_OK;
  }
  /* resume: auto goes back to older checkpoints while the newer ones fail
   * their checks (checksums, meta.json, NaN/Inf), and says so. */
  int fallback = strcmp(c->checkpoint.resume, "auto") == 0;
  fsdpc_err first;
  for (int k = 1;; k++) {
    fsdpc_status st = resume_from(s, dir, err);
    if (st == FSDPC_OK || !fallback)
      return st;
    if (k == 1)
      first = *err;
    char older[4096];
    int more = 0;
    FSDPC_TRY(fsdpc__ckpt_nth_latest(c->checkpoint.dir, k, older, sizeof older, &more, err));
    if (!more) {
      *err = first;
      return fsdpc__err_prefix(err, "checkpoint.resume=auto: no checkpoint in %s passes its checks",
                               c->checkpoint.dir);
    }
    if (s->rank == 0)
      FSDPC_LOGW("checkpoint.resume=auto: %s cannot be used (%s); falling back to %s", dir,
                 err->msg, older);
    snprintf(dir, sizeof dir, "%s", older);
  }
}

static fsdpc_status resume_from(fsdpc_ckpt_train *s, const char *dir, fsdpc_err *err) {
  const fsdpc_component *plugin;
  FSDPC_TRY(fsdpc__ckpt_probe(s->plan->reg, s->run->fmt.intermediate, dir, &plugin, err));
  reset_peak_rss();
  int64_t rss0, hwm0, rss1, hwm1;
  fsdpc__mem_rss(&rss0, &hwm0);
  double t0 = fsdpc__now();
  FSDPC_TRY(fsdpc__ckpt_load(s->run->host, plugin, s->run->fmt.opts, dir, 1, err));
  fsdpc__mem_rss(&rss1, &hwm1);
  fsdpc__log(s->rank == 0 ? FSDPC_LOG_INFO : FSDPC_LOG_DEBUG,
             "loaded %s (%s) in %.2f s; host RSS %.1f -> %.1f MiB, peak %.1f MiB", dir,
             plugin->desc->name, fsdpc__now() - t0, rss0 / 1048576.0, rss1 / 1048576.0,
             hwm1 / 1048576.0);
  return apply_state(s, dir, err);
}

fsdpc_status fsdpc__ckpt_session_setup(fsdpc_ckpt_train *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  fsdpc_ckpt_run *r = calloc(1, sizeof *r);
  if (!r)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  s->run = r;
  r->last_saved = -1;
  fsdpc__diverge_init(&r->div, c->checkpoint.divergence_factor);
  fsdpc_test_hooks hooks;
  fsdpc__test_hooks_get(&hooks); /* none outside the test build (test_hooks.h) */
  r->signal_at = hooks.signal_at_step;
  g_stop_signal = 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART; /* collectives' socket calls carry on */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  /* Without a checkpoint folder or a resume nothing is saved or loaded, so
   * no statedict plugin is needed (a signal still stops the run cleanly). */
  if (!c->checkpoint.dir[0] && strcmp(c->checkpoint.resume, "none") == 0)
    return FSDPC_OK;
  fsdpc_status st;
  const char *inter = intermediate_name(c, err, &st);
  FSDPC_TRY(st);
  FSDPC_TRY(fsdpc__ckpt_formats_select(s->plan->reg, inter, c->checkpoint.final_format,
                                       c->checkpoint.options, &r->fmt, err));
  fsdpc_ckpt_host_opts ho;
  /* LoRA: checkpoints hold the adapters and their optimizer state only */
  FSDPC_TRY(fsdpc__ckpt_engine_opts_view(
      s->eng, &s->plan->shape, &s->plan->lora,
      s->plan->has_lora ? FSDPC_CKPT_VIEW_TRAINABLE : FSDPC_CKPT_VIEW_ALL, &ho, &r->keep, err));
  ho.strategy = fsdpc__strategy_name(s->plan->modes.strategy);
  FSDPC_TRY(fsdpc__ckpt_host_create(&ho, &r->host, err));
  fsdpc__ckpt_host_refuse_nonfinite(r->host, !c->checkpoint.allow_nonfinite);
  if (!(r->config_text = fsdpc__ckpt_config_text(c)) || !(r->config_yaml = dump_config(c)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  r->config_hash = fsdpc__ckpt_hash(r->config_text);
  FSDPC_TRY(fsdpc__ckpt_host_set_config_yaml(r->host, r->config_yaml, err));
  FSDPC_TRY(fsdpc__ckpt_host_set_export(r->host, c, err)); /* a deployable final/ */
  if (hooks.kill_step > 0 && s->rank == 0) {
    r->kill_step = hooks.kill_step;
    r->kill_files = hooks.kill_files;
  }

  warn_save_time(s);
  return resume(s, err);
}

fsdpc_status fsdpc__ckpt_after_step(fsdpc_ckpt_train *s, int64_t done, int *stop, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  fsdpc_ckpt_run *r = s->run;
  *stop = 0;
  if (r->signal_at > 0 && done == r->signal_at && s->rank == 0)
    raise(SIGTERM);
  double flag = g_stop_signal ? 1.0 : 0.0;
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(s->dist, FSDPC_GROUP_WORLD, &flag, 1, "stop signal", err));
  const int64_t max_steps = s->plan->modes.batch.max_steps;
  int stopping = flag > 0.0 && done < max_steps;
  int periodic =
      c->checkpoint.save_steps > 0 && done % c->checkpoint.save_steps == 0 && done < max_steps;
  if ((periodic || stopping) && c->checkpoint.dir[0] && r->last_saved != done) {
    char name[64];
    fsdpc__ckpt_step_name(done, name, sizeof name);
    FSDPC_TRY(save(s, name, r->fmt.intermediate, FSDPC_DTYPE_F32, done, err));
    if (!stopping) {
      /* A signal that came during this save (seconds, for a large model)
       * finds its checkpoint written: stop now, not after another step and
       * another save that the grace period may not hold. */
      flag = g_stop_signal ? 1.0 : 0.0;
      FSDPC_TRY(
          fsdpc__dist_all_reduce_f64(s->dist, FSDPC_GROUP_WORLD, &flag, 1, "stop signal", err));
      stopping = flag > 0.0;
    }
  }
  if (stopping) {
    /* A peer's signal reaches this rank through the all-reduce only. */
    int sig = g_stop_signal ? (int)g_stop_signal : SIGTERM;
    const char *name = sig == SIGUSR1 ? "SIGUSR1" : "SIGTERM";
    s->stopped_by = sig;
    s->stop_saved = c->checkpoint.dir[0] != 0;
    if (s->rank == 0) {
      char name_step[64];
      fsdpc__ckpt_step_name(done, name_step, sizeof name_step);
      if (s->stop_saved)
        FSDPC_LOGI("stopped by %s after step %lld; saved %s/%s; resume with "
                   "checkpoint.resume=auto (exit code 0)",
                   name, (long long)done, c->checkpoint.dir, name_step);
      else
        FSDPC_LOGW("stopped by %s after step %lld without a checkpoint (checkpoint.dir is "
                   "empty): nothing to resume from (exit code %d)",
                   name, (long long)done, 128 + sig);
    }
    *stop = 1;
  }
  return FSDPC_OK;
}

void fsdpc__ckpt_note_loss(fsdpc_ckpt_train *s, double loss) {
  if (s->run)
    fsdpc__diverge_note(&s->run->div, loss);
}

fsdpc_status fsdpc__ckpt_save_now(fsdpc_ckpt_train *s, int64_t done, fsdpc_err *err) {
  fsdpc_ckpt_run *r = s->run;
  if (!s->cfg->checkpoint.dir[0] || !r || !r->host)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: saving needs checkpoint.dir (the folder checkpoints go to)",
                       s->cfg->source);
  if (r->last_saved == done)
    return FSDPC_OK;
  char name[64];
  fsdpc__ckpt_step_name(done, name, sizeof name);
  return save(s, name, r->fmt.intermediate, FSDPC_DTYPE_F32, done, err);
}

/* LoRA's final outputs: the PEFT adapter folder as final/, and with
 * peft.merge_on_save the merged model through the final format (a
 * deployable HF folder with `full`) as final-merged/. */
static fsdpc_status lora_final(fsdpc_ckpt_train *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  fsdpc_ckpt_run *r = s->run;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", c->checkpoint.dir, FSDPC_CKPT_FINAL_NAME);
  FSDPC_TRY(fsdpc__lora_write_peft(s->eng, &s->plan->lora, c->model.init.from,
                                   c->checkpoint.dir, FSDPC_CKPT_FINAL_NAME, err));
  if (s->rank == 0)
    FSDPC_LOGI("wrote the PEFT adapter folder %s", dir);
  if (!c->peft.merge_on_save)
    return FSDPC_OK;
  if (c->quantization.method == FSDPC_QUANT_NF4 && strcmp(r->fmt.final->desc->name, "full") != 0)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "peft.merge_on_save with quantization.method nf4 writes a dequantized "
                       "HF folder: set checkpoint.final_format: full (the adapters are in %s)",
                       dir);
  fsdpc_ckpt_host_opts ho;
  void *keep = NULL;
  fsdpc_ckpt_host *merged = NULL, *saved = r->host;
  FSDPC_TRY(fsdpc__ckpt_engine_opts_view(s->eng, &s->plan->shape, &s->plan->lora,
                                         FSDPC_CKPT_VIEW_MERGED, &ho, &keep, err));
  ho.strategy = fsdpc__strategy_name(s->plan->modes.strategy);
  fsdpc_status st = fsdpc__ckpt_host_create(&ho, &merged, err);
  if (st == FSDPC_OK)
    st = fsdpc__ckpt_host_set_config_yaml(merged, r->config_yaml, err);
  if (st == FSDPC_OK)
    st = fsdpc__ckpt_host_set_export(merged, c, err);
  if (st == FSDPC_OK) {
    const fsdpc_component *p = r->fmt.final;
    int32_t dtype =
        strcmp(p->desc->name, "full") == 0 ? c->checkpoint.final_dtype : FSDPC_DTYPE_F32;
    r->host = merged;
    st = save(s, FSDPC_CKPT_MERGED_NAME, p, dtype, s->plan->modes.batch.max_steps, err);
    r->host = saved;
  }
  fsdpc__ckpt_host_destroy(merged);
  fsdpc__ckpt_engine_opts_free(keep);
  return st;
}

fsdpc_status fsdpc__ckpt_final(fsdpc_ckpt_train *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  if (!c->checkpoint.dir[0])
    return FSDPC_OK;
  if (s->plan->has_lora)
    return lora_final(s, err);
  const fsdpc_component *p = s->run->fmt.final;
  int32_t dtype = strcmp(p->desc->name, "full") == 0 ? c->checkpoint.final_dtype : FSDPC_DTYPE_F32;
  return save(s, FSDPC_CKPT_FINAL_NAME, p, dtype, s->plan->modes.batch.max_steps, err);
}

void fsdpc__ckpt_session_destroy(fsdpc_ckpt_train *s) {
  fsdpc_ckpt_run *r = s ? s->run : NULL;
  if (!r)
    return;
  fsdpc__ckpt_host_destroy(r->host);
  fsdpc__ckpt_engine_opts_free(r->keep);
  fsdpc__ckpt_formats_free(&r->fmt);
  free(r->config_text);
  free(r->config_yaml);
  free(r);
  s->run = NULL;
}

/* Per-rank peak host memory while loading initial weights from an HF
 * folder, checked against this rank's own shard bytes + 10% + 256 MiB. */
fsdpc_status fsdpc__ckpt_load_hf_checked(fsdpc_engine *eng, const fsdpc_run_plan *plan,
                                         const char *dir, fsdpc_err *err) {
  fsdpc_engine_bytes eb;
  fsdpc__engine_bytes(eng, &eb);
  reset_peak_rss();
  int64_t rss0, hwm0, rss1, hwm1;
  fsdpc__mem_rss(&rss0, &hwm0);
  double t0 = fsdpc__now();
  /* what fsdpc can model, for the longest sequence this run uses */
  FSDPC_TRY(fsdpc__hf_rules_folder(dir, &plan->shape, plan->modes.batch.seq_len, err));
  FSDPC_TRY(fsdpc__engine_load_hf(eng, dir, err));
  const char *adapter = plan->cfg->model.adapter;
  int merged = 0;
  if (adapter[0])
    FSDPC_TRY(fsdpc__peft_merge_engine(eng, &plan->shape, adapter, &merged, err));
  fsdpc__mem_rss(&rss1, &hwm1);
  int64_t base = rss0 < hwm0 ? rss0 : hwm0;
  /* The load's footprint: this rank's master shards (allocated, and
   * counted whole whether or not already resident) plus whatever the load
   * itself added on top of the memory the process held before it. */
  double extra = (double)(hwm1 - base), used = (double)eb.params + extra;
  double bound = (double)eb.params * 1.1 + 256.0 * 1048576.0;
  int ok = used <= bound;
  fsdpc__log(ok ? FSDPC_LOG_INFO : FSDPC_LOG_WARN,
             "loaded %s in %.2f s: peak host memory of the load %.1f MiB = own shards %.1f MiB "
             "+ %.1f MiB extra (process RSS before %.1f MiB, peak %.1f MiB); bound %.1f MiB: %s",
             dir, fsdpc__now() - t0, used / 1048576.0, eb.params / 1048576.0, extra / 1048576.0,
             base / 1048576.0, hwm1 / 1048576.0, bound / 1048576.0,
             ok ? "within bound" : "BOUND EXCEEDED");
  if (adapter[0])
    FSDPC_LOGI("merged the LoRA adapter %s into %d weights of %s", adapter, merged, dir);
  return FSDPC_OK;
}
