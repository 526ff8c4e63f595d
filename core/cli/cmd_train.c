/* fsdpc train CFG [key=value ...] [--nproc-per-node N] [--nnodes N
 * --node-rank R --master-addr A --master-port P]
 *
 * With --nproc-per-node > 1 (or --nnodes > 1) this process becomes the
 * launcher: it re-runs `fsdpc train` once per local rank with the rank in the
 * environment and supervises them (fsdpc_launch). A rank (or a plain single
 * process, or a process started by torchrun / srun / mpirun) reads its place
 * from the environment and trains through the public API: the CLI is its
 * first user. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_launch.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc train CFG.yaml [section.key=value ...] [launch options]\n"
    "\n"
    "Trains the model that CFG describes. Overrides use the config's key paths,\n"
    "e.g. optim.lr=1e-3 fsdp.sharding_strategy=NO_SHARD.\n"
    "\n" FSDPC_CLI_LAUNCH_HELP;

static const cli_opt opts[] = {FSDPC_CLI_LAUNCH_OPTS, {0}};
const cli_cmd fsdpc__train_cmd = {"train", help, opts};

/* log.level's value as a level (FSDPC_LOG_*). */
static int32_t log_level(const fsdpc_config *cfg) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  char *v = NULL;
  int32_t level = FSDPC_LOG_INFO;
  if (fsdpc_config_get(cfg, "log.level", &v, NULL) == FSDPC_OK)
    for (int32_t i = 0; i < 4; i++)
      if (strcmp(v, names[i]) == 0)
        level = i;
  fsdpc_free(v);
  return level;
}

/* dist.term_grace_s in milliseconds. */
static int32_t grace_ms(const fsdpc_config *cfg) {
  char *v = NULL;
  double s = 25.0;
  if (fsdpc_config_get(cfg, "dist.term_grace_s", &v, NULL) == FSDPC_OK)
    s = strtod(v, NULL);
  fsdpc_free(v);
  return (int32_t)(s * 1000.0);
}

/* One rank (or the only process): the trainer, the whole run. */
static int train(const fsdpc_config *cfg) {
  fsdpc_err err = {0};
  fsdpc_trainer *t = NULL;
  fsdpc_status st = fsdpc_trainer_create(cfg, &t, &err);
  if (st == FSDPC_OK)
    st = fsdpc_trainer_run(t, 0, NULL, NULL, &err);
  if (st != FSDPC_OK)
    fsdpc_log(FSDPC_LOG_ERROR, err.msg); /* "[rank R] error: ..." */
  /* A run stopped by a signal succeeded only if it left a checkpoint to
   * resume from; otherwise a scheduler must see the signal (128 + N). */
  int32_t saved = 0, sig = fsdpc_trainer_stop_signal(t, &saved);
  int code = st != FSDPC_OK ? fsdpc_trainer_exit_code(t, &err) : sig && !saved ? 128 + sig : 0;
  fsdpc_trainer_destroy(t);
  return code;
}

typedef struct train_cli {
  fsdpc_launcher_args la;
  const char *path, **ovr;
  int n;
} train_cli;

static int train_arg(void *ctx, int id, const char *v) {
  train_cli *a = ctx;
  if (id != CLI_POS)
    return fsdpc__cli_launch_opt(&fsdpc__train_cmd, id, v, &a->la) != 0;
  if (!a->path)
    a->path = v;
  else
    a->ovr[a->n++] = v;
  return 1;
}

int fsdpc__cmd_train(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__train_cmd;
  train_cli a = {.ovr = calloc((size_t)argc + 1, sizeof(char *))};
  fsdpc__cli_launch_init(&a.la);
  int rc = a.ovr ? cli_parse(cmd, argc, argv, train_arg, &a) : 1;
  if (rc < 0 && !a.path)
    rc = cli_usage_error(cmd, "missing the config file");
  fsdpc_config *cfg = NULL;
  fsdpc_err err = {0};
  fsdpc_launcher_args la = a.la;
  if (rc < 0 && fsdpc_config_load(a.path, a.ovr, a.n, &cfg, &err) != FSDPC_OK)
    rc = cli_fail(cmd, err.msg);
  if (rc < 0) {
    fsdpc_set_log_level(log_level(cfg));
    if (fsdpc__cli_launching(&la)) {
      la.grace_ms = grace_ms(cfg);
      rc = fsdpc__cli_launch(cmd, "train", &la, argc, argv);
    } else {
      rc = train(cfg);
    }
  }
  fsdpc_config_destroy(cfg);
  free(a.ovr);
  return rc;
}
