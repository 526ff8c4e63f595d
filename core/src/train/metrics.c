/* What a run leaves behind for watching it, opened once per start on rank
 * 0: metrics.jsonl (appended, trimmed on a resume) and, with
 * log.tensorboard, a TensorBoard event file; and the mapping of a step's
 * metrics onto TensorBoard scalars. The formats live in obs/. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "ckpt/state.h"
#include "obs/metrics.h"
#include "obs/tensorboard.h"
#include "train/session.h"
#include "util/log.h"

fsdpc_status fsdpc__session_open_logs(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  char *text = fsdpc__ckpt_config_text(c);
  fsdpc_run_record rr = {.config = c->source,
                         .config_hash = text ? fsdpc__ckpt_hash(text) : 0,
                         .resumed_from = s->ckpt.start_step,
                         .world = s->env.world_size,
                         .max_steps = s->plan->modes.batch.max_steps,
                         .global_batch = s->plan->modes.batch.global,
                         .tokens_per_step =
                             s->plan->modes.batch.global * s->plan->modes.batch.seq_len};
  free(text);
  char run_id[64];
  FSDPC_TRY(fsdpc__metrics_open(c->log.dir, &rr, run_id, sizeof run_id, &s->metrics, err));
  FSDPC_LOGD("run %s: metrics in %s/metrics.jsonl", run_id, c->log.dir);
  if (c->log.tensorboard) {
    FSDPC_TRY(fsdpc__tb_open(c->log.dir, s->ckpt.start_step, &s->tb, err));
    FSDPC_LOGI("TensorBoard events: %s (tensorboard --logdir %s)", fsdpc__tb_path(s->tb),
               c->log.dir);
  }
  return FSDPC_OK;
}

void fsdpc__session_close_logs(fsdpc_session *s) {
  if (s->metrics)
    fclose(s->metrics);
  s->metrics = NULL;
  fsdpc__tb_close(s->tb);
  s->tb = NULL;
}

/* metrics.jsonl key -> TensorBoard tag, and a scale (bytes -> MiB). */
static const struct {
  const char *key, *tag;
  double scale;
} tb_map[] = {
    {"loss", "train/loss", 1},
    {"eval_loss", "eval/loss", 1},
    {"lr", "train/lr", 1},
    {"grad_norm", "train/grad_norm", 1},
    {"tok_s", "perf/tokens_per_s", 1},
    {"step_s", "perf/step_s", 1},
    {"comm_s", "perf/comm_s", 1},
    {"peak_bytes", "memory/peak_MiB", 1.0 / 1048576},
    {"peak_params_bytes", "memory/params_MiB", 1.0 / 1048576},
    {"peak_grads_bytes", "memory/grads_MiB", 1.0 / 1048576},
    {"peak_optim_bytes", "memory/optim_MiB", 1.0 / 1048576},
    {"peak_activations_bytes", "memory/activations_MiB", 1.0 / 1048576},
    {"peak_comm_bytes", "memory/comm_MiB", 1.0 / 1048576},
    {"peak_other_bytes", "memory/other_MiB", 1.0 / 1048576},
};
enum { TB_N = sizeof tb_map / sizeof tb_map[0] };

void fsdpc__session_log_record(fsdpc_session *s, int64_t step, const cJSON *rec) {
  char *line = cJSON_PrintUnformatted(rec);
  if (line && s->metrics) {
    /* A full disk must not truncate metrics.jsonl in silence: say so when
     * it happens (once), and the run goes on. */
    errno = 0;
    if ((fprintf(s->metrics, "%s\n", line) < 0 || fflush(s->metrics) != 0) && !s->metrics_failed++)
      FSDPC_LOGE("cannot write %s/metrics.jsonl at step %lld: %s; metrics from here on are "
                 "lost (free space in log.dir)",
                 s->cfg->log.dir, (long long)step, strerror(errno ? errno : EIO));
  }
  cJSON_free(line);
  if (!s->tb)
    return;
  const char *tags[TB_N];
  double vals[TB_N];
  int n = 0;
  for (int i = 0; i < TB_N; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, tb_map[i].key);
    if (cJSON_IsNumber(v)) {
      tags[n] = tb_map[i].tag;
      vals[n++] = v->valuedouble * tb_map[i].scale;
    }
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  fsdpc_err err;
  if (fsdpc__tb_scalars(s->tb, step, (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec, tags, vals, n,
                        &err) != FSDPC_OK) {
    /* Losing the event file must not lose the run: say so once, go on. */
    FSDPC_LOGW("%s; TensorBoard output stops here, metrics.jsonl goes on", err.msg);
    fsdpc__tb_close(s->tb);
    s->tb = NULL;
  }
}
