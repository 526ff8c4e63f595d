/* fsdpc eval MODEL --data FILE [options] [key=value ...] [--nproc-per-node N]
 *
 * Loss, perplexity and token accuracy of MODEL (an HF folder or any fsdpc
 * checkpoint) on target tokens of a token file or a JSONL dataset (prepared
 * as train prepares one: the model's tokenizer and chat template), over N
 * ranks like training, as one JSON object on stdout (fsdpc_eval_config,
 * fsdpc_evaluate). */
#define _GNU_SOURCE /* nftw's FTW_DEPTH | FTW_PHYS */
#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_launch.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc eval MODEL --data FILE [options] [section.key=value ...]\n"
    "\n"
    "Loss, perplexity and token accuracy (argmax = label) of MODEL (a Hugging Face\n"
    "folder, a PEFT adapter folder over its base, or any fsdpc checkpoint) on the\n"
    "target tokens of FILE, computed as\n"
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
    "Prints one JSON object: loss, perplexity, token_accuracy, tokens, batches,\n"
    "sequences.\n"
    "\n" FSDPC_CLI_LAUNCH_HELP;

enum { O_DATA = 256, O_SEQ_LEN, O_BATCHES, O_DEVICE };
static const cli_opt opts[] = {{"data", O_DATA, "FILE"},        {"seq-len", O_SEQ_LEN, "N"},
                               {"batches", O_BATCHES, "N|all"}, {"device", O_DEVICE, "cpu|cuda"},
                               FSDPC_CLI_LAUNCH_OPTS,           {0}};
const cli_cmd fsdpc__eval_cmd = {"eval", help, opts};

typedef struct eval_cli {
  const char *model, *data;
  const char **ov; /* the user's overrides, then those of the options */
  int n_ov;
  char made[8][64 + 4096];
  int n_made;
  fsdpc_launcher_args la;
} eval_cli;

/* An option as the override it stands for. */
static int as_override(eval_cli *e, const char *key, const char *v) {
  if (e->n_made == 8)
    return cli_usage_error(&fsdpc__eval_cmd, "too many options; give each once") == 0;
  snprintf(e->made[e->n_made], sizeof e->made[0], "%s=%s", key, v);
  e->ov[e->n_ov++] = e->made[e->n_made++];
  return 1;
}

static int eval_arg(void *ctx, int id, const char *v) {
  static const char *const devices[] = {"cpu", "cuda"};
  const cli_cmd *cmd = &fsdpc__eval_cmd;
  eval_cli *e = ctx;
  int64_t x;
  switch (id) {
  case O_DATA:
    return (e->data = v) != NULL;
  case O_SEQ_LEN:
    return cli_int(cmd, "seq-len", v, 1, 1 << 24, &x) && as_override(e, "data.seq_len", v);
  case O_BATCHES: /* all: train.eval_batches 0, every example */
    return strcmp(v, "all") == 0 ? as_override(e, "train.eval_batches", "0")
                                 : cli_int(cmd, "batches", v, 1, INT32_MAX, &x) &&
                                       as_override(e, "train.eval_batches", v);
  case O_DEVICE:
    return cli_choice(cmd, "device", v, devices, 2) >= 0 && as_override(e, "train.device", v);
  case CLI_POS:
    if (strchr(v, '='))
      e->ov[e->n_ov++] = v;
    else if (!e->model)
      e->model = v;
    else
      return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
    return 1;
  default:
    return fsdpc__cli_launch_opt(cmd, id, v, &e->la) != 0;
  }
}

static int parse(int argc, char **argv, eval_cli *e) {
  int rc = cli_parse(&fsdpc__eval_cmd, argc, argv, eval_arg, e);
  if (rc < 0 && (!e->model || !e->data))
    rc = cli_usage_error(&fsdpc__eval_cmd, "MODEL and --data FILE are needed");
  return rc;
}

static void print_result(const char *model, const fsdpc_eval_result *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", model);
  cJSON_AddNumberToObject(o, "loss", r->loss);
  cJSON_AddNumberToObject(o, "perplexity", r->perplexity);
  cJSON_AddNumberToObject(o, "token_accuracy", r->token_accuracy);
  cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
  cJSON_AddNumberToObject(o, "batches", (double)r->batches);
  cJSON_AddNumberToObject(o, "sequences", (double)r->sequences);
  cJSON_AddNumberToObject(o, "world_size", r->world_size);
  cJSON_AddNumberToObject(o, "peak_device_bytes", (double)r->peak_device_bytes);
  cJSON_AddNumberToObject(o, "peak_host_rss_bytes", (double)r->peak_host_rss_bytes);
  cJSON *cats = cJSON_AddObjectToObject(o, "peak_device_bytes_by_category");
  for (int c = 0; cats && c < FSDPC_MEM_CATEGORY_COUNT; c++)
    cJSON_AddNumberToObject(cats, fsdpc_mem_category_name(c),
                            (double)r->peak_device_by_category[c]);
  char *t = cJSON_PrintUnformatted(o);
  if (t)
    printf("%s\n", t);
  fflush(stdout);
  cJSON_free(t);
  cJSON_Delete(o);
}

/* One process of the evaluation: the launcher (ranks > 1) or a rank. */
static int run(int argc, char **argv, eval_cli *e, const char *log_dir) {
  const cli_cmd *cmd = &fsdpc__eval_cmd;
  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  fsdpc_eval_args ea = {.struct_size = sizeof ea,
                        .model = e->model,
                        .data = e->data,
                        .log_dir = log_dir,
                        .overrides = e->ov,
                        .n_overrides = e->n_ov};
  fsdpc_set_log_level(FSDPC_LOG_WARN);
  if (fsdpc_eval_config(&ea, &cfg, &err) != FSDPC_OK)
    return cli_fail(cmd, err.msg);
  int rc;
  if (fsdpc__cli_launching(&e->la)) {
    rc = fsdpc__cli_launch(cmd, "eval", &e->la, argc, argv);
  } else {
    fsdpc_eval_result res = {.struct_size = sizeof res};
    fsdpc_job_place place = {.struct_size = sizeof place};
    if (fsdpc_job_place_detect(&place, &err) != FSDPC_OK ||
        fsdpc_evaluate(cfg, &res, &err) != FSDPC_OK) {
      rc = cli_fail(cmd, err.msg);
    } else {
      if (place.rank == 0)
        print_result(e->model, &res);
      rc = 0;
    }
  }
  fsdpc_config_destroy(cfg);
  return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

int fsdpc__cmd_eval(int argc, char **argv) {
  eval_cli e = {0};
  fsdpc__cli_launch_init(&e.la);
  if (!(e.ov = calloc((size_t)argc + 4, sizeof *e.ov)))
    return 1;
  int rc = parse(argc, argv, &e);
  /* Logs (metrics.jsonl, rank summaries) go to a folder of our own, made
   * by the first process and handed to the ranks it starts. */
  char tmp[4096] = "";
  const char *log_dir = getenv("FSDPC_EVAL_LOG_DIR");
  if (rc < 0 && !log_dir) {
    const char *tmpdir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/fsdpc-eval.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(tmp)) {
      fprintf(stderr, "fsdpc eval: cannot make a folder for the logs (%s): %s\n", tmp,
              strerror(errno));
      rc = 1;
      tmp[0] = '\0';
    } else {
      log_dir = tmp;
      setenv("FSDPC_EVAL_LOG_DIR", tmp, 1);
    }
  }
  if (rc < 0)
    rc = run(argc, argv, &e, log_dir);
  if (tmp[0])
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(e.ov);
  return rc;
}
