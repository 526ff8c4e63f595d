/* fsdpc train CFG [key=value ...] [--nproc-per-node N] [--nnodes N
 * --node-rank R --master-addr A --master-port P]
 *
 * With --nproc-per-node > 1 (or --nnodes > 1) this process becomes the
 * launcher: it re-runs `fsdpc train` once per local rank with the rank in the
 * environment and supervises them. A rank (or a plain single process, or a
 * process started by torchrun / srun / mpirun) reads its place from the
 * environment and trains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "cli_launch.h"
#include "commands.h"
#include "config/config.h"
#include "dist/env.h"
#include "dist/launch.h"
#include "train/session.h"
#include "util/log.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: fsdpc train CFG.yaml [section.key=value ...] [launch options]\n"
          "\n"
          "Trains the model that CFG describes. Overrides use the config's key paths,\n"
          "e.g. optim.lr=1e-3 fsdp.sharding_strategy=NO_SHARD.\n"
          "\n"
          "launch options:\n"
          "  --nproc-per-node N   start N ranks on this machine and supervise them\n"
          "  --nnodes N           number of machines (each runs this command)\n"
          "  --node-rank R        this machine's index, 0..N-1\n"
          "  --master-addr A      address of node 0 (hosts the rendezvous store)\n"
          "  --master-port P      its port (default 29500)\n"
          "Under torchrun, srun or mpirun, run one `fsdpc train` per rank without these.\n");
}

int fsdpc__cmd_train(int argc, char **argv) {
  fsdpc_err err = {0};
  fsdpc_launch_opts lo;
  int early = fsdpc__cli_launch_args("train", usage, &argc, argv, &lo);
  if (early >= 0)
    return early;
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cfg_path = argv[1];
  fsdpc_config *cfg = NULL;
  if (fsdpc__config_load(cfg_path, (const char *const *)argv + 2, argc - 2, &cfg, &err) !=
      FSDPC_OK) {
    fprintf(stderr, "fsdpc train: %s\n", err.msg);
    return 1;
  }
  int launcher = (lo.nproc_per_node > 1 || lo.nnodes > 1) && !getenv("FSDPC_LAUNCHER");
  if (launcher) {
    /* Re-run this same command line (minus the launch options) per rank. */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
      fprintf(stderr, "fsdpc train: cannot find the fsdpc executable (/proc/self/exe)\n");
      fsdpc__config_destroy(cfg);
      return 1;
    }
    exe[n] = '\0';
    char **child = calloc((size_t)argc + 2, sizeof(char *));
    child[0] = exe;
    child[1] = "train";
    for (int i = 1; i < argc; i++) child[i + 1] = argv[i];
    lo.argv = child;
    lo.grace_ms = (int)(cfg->dist.term_grace_s * 1000.0);
    int code = 1;
    fsdpc__log_setup(cfg->log.level, -1);
    fsdpc_status st = fsdpc__launch(&lo, &code, &err);
    if (st != FSDPC_OK) fprintf(stderr, "fsdpc train: %s\n", err.msg);
    free(child);
    fsdpc__config_destroy(cfg);
    return st == FSDPC_OK ? 0 : (code ? code : 1);
  }

  fsdpc_dist_env env;
  if (fsdpc__dist_env_detect(&env, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc train: %s\n", err.msg);
    fsdpc__config_destroy(cfg);
    return 1;
  }
  fsdpc__log_setup(cfg->log.level, env.world_size > 1 ? env.rank : -1);
  if (env.rank == 0)
    FSDPC_LOGI("fsdpc %s: %s, world %d (%s), %s", fsdpc_version(), cfg_path, env.world_size,
               env.source, fsdpc__strategy_name((fsdpc_strategy)cfg->fsdp.sharding_strategy));
  /* The public API: this command is its first user. */
  fsdpc_trainer *t = NULL;
  fsdpc_status st = fsdpc_trainer_create(cfg, &t, &err);
  if (st == FSDPC_OK)
    st = fsdpc_trainer_run(t, 0, NULL, NULL, &err);
  /* generation only after the last step (not after a stop on a signal) */
  fsdpc_session *s = fsdpc__trainer_session(t);
  if (st == FSDPC_OK && fsdpc_trainer_step(t) == s->plan->modes.batch.max_steps) {
    st = fsdpc__session_generate_prompts(s, &err);
    if (st != FSDPC_OK)
      st = fsdpc__session_failed(s, st, &err);
  }
  if (st != FSDPC_OK)
    FSDPC_LOGE("%s", err.msg);
  /* A run stopped by a signal succeeded only if it left a checkpoint to
   * resume from; otherwise a scheduler must see the signal (128 + N). */
  int32_t saved = 0, sig = fsdpc_trainer_stop_signal(t, &saved);
  int code = st != FSDPC_OK ? fsdpc__session_exit_code(s, &err) : sig && !saved ? 128 + sig : 0;
  fsdpc_trainer_destroy(t);
  fsdpc__config_destroy(cfg);
  return code;
}
