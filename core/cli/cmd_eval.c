/* fsdpc eval MODEL --data FILE [options] [key=value ...] [--nproc-per-node N]
 *
 * Loss, perplexity and token accuracy of MODEL (an HF folder or any fsdpc
 * checkpoint) on target tokens of a token file or a JSONL dataset (prepared
 * as train prepares one: the model's tokenizer and chat template), over N
 * ranks like training, as one JSON object on stdout. The run is a training
 * session with no steps: the model's config (config.yaml of an fsdpc
 * checkpoint, else defaults and the HF config.json), data.eval = FILE. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/peft.h"
#include "cli_launch.h"
#include "commands.h"
#include "config/config.h"
#include "dist/env.h"
#include "dist/launch.h"
#include "infer/infer.h"
#include "model/hf_rules.h"
#include "train/session.h"
#include "util/log.h"
#include "util/mem.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc eval MODEL --data FILE [options] [section.key=value ...]\n"
             "\n"
             "Loss, perplexity and token accuracy (argmax = label) of MODEL (a Hugging Face\n"
             "folder or any fsdpc checkpoint) on the target tokens of FILE, computed as\n"
             "train's evaluation: the model's config (an fsdpc checkpoint's config.yaml:\n"
             "its seq_len, batch and eval_batches), data.eval = FILE.\n"
             "  --data FILE           a token file (fsdpc data tokenize / synth / prepare) or\n"
             "                        a JSONL dataset (.jsonl[.gz], .json[.gz]: text,\n"
             "                        instruction, prompt/completion or chat), prepared as\n"
             "                        fsdpc train does with the model folder's tokenizer and\n"
             "                        chat template when it ships them (else data.tokenizer)\n"
             "  --seq-len N           data.seq_len (HF folders; default the config's)\n"
             "  --batches N|all       train.eval_batches (default the config's; all = every\n"
             "                        batch of FILE)\n"
             "  --device cpu|cuda     train.device (default the config's)\n"
             "  --nproc-per-node N    ranks on this machine (as fsdpc train)\n"
             "Prints one JSON object: loss, perplexity, token_accuracy, tokens, batches.\n");
}

static int has_file(const char *dir, const char *name) {
  char p[4200];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The config: MODEL/config.yaml, else defaults + MODEL's config.json. */
static fsdpc_status make_config(const char *model, const char *const *ov, int n_ov,
                                fsdpc_config **cfg, fsdpc_err *err) {
  char path[4200];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", model, FSDPC_CKPT_CONFIG_FILE);
  if (stat(path, &sb) == 0)
    return fsdpc__config_load_checkpoint(path, ov, n_ov, cfg, err);
  return fsdpc__config_from_string("train: {}\n", model, ov, n_ov, cfg, err);
}

/* One process of the evaluation: the launcher (ranks > 1) or a rank. */
static int run(int argc, char **argv, const char *model, fsdpc_launch_opts *lo,
               const char *const *ov, int n_ov) {
  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  if (make_config(model, ov, n_ov, &cfg, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc eval: %s\n", err.msg);
    return 1;
  }
  int launcher = (lo->nproc_per_node > 1 || lo->nnodes > 1) && !getenv("FSDPC_LAUNCHER");
  if (launcher) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char **child = calloc((size_t)argc + 2, sizeof(char *));
    int code = 1;
    fsdpc_status st = FSDPC_SYSTEM_ERROR;
    if (n > 0 && child) {
      exe[n] = '\0';
      child[0] = exe;
      child[1] = "eval";
      for (int i = 1; i < argc; i++)
        child[i + 1] = argv[i];
      lo->argv = child;
      fsdpc__log_setup(FSDPC_LOG_WARN, -1);
      st = fsdpc__launch(lo, &code, &err);
      if (st != FSDPC_OK)
        fprintf(stderr, "fsdpc eval: %s\n", err.msg);
    }
    free(child);
    fsdpc__config_destroy(cfg);
    return st == FSDPC_OK ? 0 : (code ? code : 1);
  }
  fsdpc_dist_env env;
  fsdpc_session *s = NULL;
  double r[5];
  fsdpc_status st = fsdpc__dist_env_detect(&env, &err);
  if (st == FSDPC_OK) {
    fsdpc__log_setup(FSDPC_LOG_WARN, env.world_size > 1 ? env.rank : -1);
    st = fsdpc__session_create_eval(cfg, &env, &s, &err);
  }
  if (st == FSDPC_OK)
    st = fsdpc__eval_run(s, r, &err);
  if (st == FSDPC_OK && env.rank == 0) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddNumberToObject(o, "loss", r[0]);
    cJSON_AddNumberToObject(o, "perplexity", exp(r[0]));
    cJSON_AddNumberToObject(o, "token_accuracy", r[2]);
    cJSON_AddNumberToObject(o, "tokens", r[1]);
    cJSON_AddNumberToObject(o, "batches", r[3]);
    cJSON_AddNumberToObject(o, "sequences", r[4]);
    cJSON_AddNumberToObject(o, "world_size", env.world_size);
    fsdpc_mem_stats ms; /* this rank's device (host for the CPU), setup included */
    fsdpc__session_mem(s, &ms, NULL);
    cJSON_AddNumberToObject(o, "peak_device_bytes", (double)ms.total_peak);
    int64_t rss, hwm;
    fsdpc__mem_rss(&rss, &hwm);
    cJSON_AddNumberToObject(o, "peak_host_rss_bytes", (double)hwm);
    cJSON *cats = cJSON_AddObjectToObject(o, "peak_device_bytes_by_category");
    for (int c = 0; cats && c < FSDPC_MEM_NCAT; c++)
      cJSON_AddNumberToObject(cats, fsdpc__mem_cat_name((fsdpc_mem_cat)c), (double)ms.peak[c]);
    char *t = cJSON_PrintUnformatted(o);
    if (t)
      printf("%s\n", t);
    fflush(stdout);
    cJSON_free(t);
    cJSON_Delete(o);
  }
  if (st != FSDPC_OK) {
    if (s && s->job)
      fsdpc__dist_post_abort(s->job->store, err.msg, NULL);
    fprintf(stderr, "fsdpc eval: %s\n", err.msg);
  }
  fsdpc__session_destroy(s);
  fsdpc__config_destroy(cfg);
  return st == FSDPC_OK ? 0 : 1;
}

int fsdpc__cmd_eval(int argc, char **argv) {
  fsdpc_launch_opts lo;
  int early = fsdpc__cli_launch_args("eval", usage, &argc, argv, &lo);
  if (early >= 0)
    return early;
  const char *model = NULL, *data = NULL;
  /* room for the user's overrides and the ones made here */
  char **ov = calloc((size_t)argc + 16, sizeof *ov);
  char buf[10][4200];
  int n_ov = 0, nb = 0, rc = 2;
  if (!ov)
    return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    const char *key = strcmp(a, "--seq-len") == 0   ? "data.seq_len"
                      : strcmp(a, "--batches") == 0 ? "train.eval_batches"
                      : strcmp(a, "--device") == 0  ? "train.device"
                      : strcmp(a, "--data") == 0    ? "data.eval"
                                                    : NULL;
    if (key) {
      if (!v) {
        fprintf(stderr, "fsdpc eval: %s needs a value\n", a);
        goto out;
      }
      if (strcmp(a, "--data") == 0)
        data = v;
      if (nb >= 6) { /* buf keeps 4 for the overrides made below */
        fprintf(stderr, "fsdpc eval: too many options; give each once\n");
        goto out;
      }
      if (strcmp(a, "--batches") == 0 && strcmp(v, "all") == 0)
        v = "0"; /* train.eval_batches 0: every example */
      snprintf(buf[nb], sizeof buf[nb], "%s=%s", key, v);
      ov[n_ov++] = buf[nb++];
      i++;
    } else if (a[0] == '-') {
      fprintf(stderr, "fsdpc eval: unknown option '%s' (`fsdpc eval --help`)\n", a);
      goto out;
    } else if (strchr(a, '=')) {
      ov[n_ov++] = (char *)a;
    } else if (!model) {
      model = a;
    } else {
      fprintf(stderr, "fsdpc eval: unexpected argument '%s'\n", a);
      goto out;
    }
  }
  if (!model || !data) {
    usage(stderr);
    goto out;
  }
  struct stat sb;
  char cfgfile[4200];
  if (stat(model, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "fsdpc eval: %s: no such model folder\n", model);
    rc = 1;
    goto out;
  }
  /* The weights: an HF-format folder is an initial model; a sharded
   * checkpoint is resumed (its optimizer state is read and unused). */
  snprintf(cfgfile, sizeof cfgfile, "%s/%s", model, FSDPC_CKPT_CONFIG_FILE);
  int hf = fsdpc__hf_is_folder(model), own = stat(cfgfile, &sb) == 0;
  /* A PEFT adapter folder is merged into its base (model.adapter). */
  snprintf(buf[nb], sizeof buf[nb],
           fsdpc__peft_is_folder(model) ? "model.adapter=%s"
           : hf                         ? "model.init.from=%s"
                                        : "checkpoint.resume=%s",
           model);
  ov[n_ov++] = buf[nb++];
  snprintf(buf[nb], sizeof buf[nb], "data.train=%s", data);
  ov[n_ov++] = buf[nb++];
  ov[n_ov++] = "data.eval_fraction=0"; /* --data is the eval data, whatever the run held out */
  ov[n_ov++] = "checkpoint.dir=''";
  ov[n_ov++] = "log.progress=off";
  if (hf && !own) {
    snprintf(buf[nb], sizeof buf[nb], "model.config=%s", model);
    ov[n_ov++] = buf[nb++];
  }
  /* A JSONL dataset is prepared with the model's own tokenizer and chat
   * template when the folder ships them (an HF folder, fsdpc's final/), as
   * fsdpc generate does, unless data.tokenizer is given. */
  int user_tok = 0;
  for (int i = 0; i < n_ov; i++)
    user_tok |= strncmp(ov[i], "data.tokenizer=", 15) == 0;
  if (!user_tok && (has_file(model, "tokenizer.json") || has_file(model, "tokenizer.model"))) {
    snprintf(buf[nb], sizeof buf[nb], "data.tokenizer=%s", model);
    ov[n_ov++] = buf[nb++];
  }
  /* Logs (metrics.jsonl, rank summaries) go to a folder of our own, made
   * by the first process and handed to the ranks it starts. */
  char tmp[4096] = "";
  const char *log_dir = getenv("FSDPC_EVAL_LOG_DIR");
  if (!log_dir) {
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir)
      tmpdir = "/tmp";
    snprintf(tmp, sizeof tmp, "%s/fsdpc-eval.XXXXXX", tmpdir);
    if (!mkdtemp(tmp)) {
      fprintf(stderr, "fsdpc eval: cannot make a folder under %s for the logs: %s\n", tmpdir,
              strerror(errno));
      rc = 1;
      goto out;
    }
    log_dir = tmp;
    setenv("FSDPC_EVAL_LOG_DIR", tmp, 1);
  }
  snprintf(buf[nb], sizeof buf[nb], "log.dir=%s", log_dir);
  ov[n_ov++] = buf[nb++];
  rc = run(argc, argv, model, &lo, (const char *const *)ov, n_ov);
  if (tmp[0]) {
    fsdpc_err e2;
    fsdpc__ckpt_rm_rf(tmp, &e2);
  }
out:
  free(ov);
  return rc;
}
