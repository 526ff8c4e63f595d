/* fsdpc: the command-line entry point. Subcommands live in cli/cmd_*.c,
 * each parsed by cli.c over its own table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

static const cli_command commands[] = {
    {"train", fsdpc__cmd_train, "train a model from a YAML config (one or many ranks)",
     &fsdpc__train_cmd, NULL, NULL},
    {"config", fsdpc__cmd_config, "check a config and print it resolved; the schema", NULL,
     fsdpc__config_subs, &fsdpc__config_n_subs},
    {"plugins", fsdpc__cmd_plugins, "list plugins and show what each offers", NULL,
     fsdpc__plugins_subs, &fsdpc__plugins_n_subs},
    {"data", fsdpc__cmd_data,
     "prepare datasets (JSONL, chat templates) and make and inspect token files", NULL,
     fsdpc__data_subs, &fsdpc__data_n_subs},
    {"plan", fsdpc__cmd_plan, "predict per-rank memory for each sharding strategy",
     &fsdpc__plan_cmd, NULL, NULL},
    {"bench", fsdpc__cmd_bench, "A/B benchmark a matrix of config variants", &fsdpc__bench_cmd,
     NULL, NULL},
    {"convert", fsdpc__cmd_convert, "convert checkpoints: sharded <-> Hugging Face, any world size",
     &fsdpc__convert_cmd, NULL, NULL},
    {"metrics", fsdpc__cmd_metrics, "summarise runs' metrics.jsonl (resumes folded in)",
     &fsdpc__metrics_cmd, NULL, NULL},
    {"plot", fsdpc__cmd_plot, "plot loss, eval loss, LR and grad norm of runs (PNG/SVG)",
     &fsdpc__plot_cmd, NULL, NULL},
    {"generate", fsdpc__cmd_generate, "generate text from a model (KV cache; greedy or sampled)",
     &fsdpc__generate_cmd, NULL, NULL},
    {"eval", fsdpc__cmd_eval, "loss, perplexity and token accuracy of a model on a dataset",
     &fsdpc__eval_cmd, NULL, NULL},
    {"recipes", fsdpc__cmd_recipes, "list the shipped configs and templates, copy one to edit",
     NULL, fsdpc__recipes_subs, &fsdpc__recipes_n_subs},
    {"help", fsdpc__cmd_help, "a command's help; --man: the manual page", &fsdpc__help_cmd, NULL,
     NULL},
    {"completion", fsdpc__cmd_completion, "shell completion for bash or zsh",
     &fsdpc__completion_cmd, NULL, NULL},
};

int fsdpc__commands(const cli_command **out) {
  *out = commands;
  return (int)(sizeof commands / sizeof commands[0]);
}

void fsdpc__usage(FILE *f) {
  fprintf(f, "usage: fsdpc <command> [args]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].about);
  fprintf(f, "\n`fsdpc <command> --help` for details; `fsdpc --version`. Options take\n"
             "`--opt value` or `--opt=value`. Exit status: 0 success, 1 failure (one line on\n"
             "stderr), 2 usage error.\n");
}

int fsdpc__unknown_command(const char *who, const char *word) {
  enum { N = sizeof commands / sizeof commands[0] };
  static const char *const top_opts[] = {"--help", "--version"};
  const char *names[N];
  for (int i = 0; i < N; i++)
    names[i] = commands[i].name;
  /* "--verison": the top level's own options are the candidates */
  const char *near =
      word[0] == '-' ? fsdpc_suggest(word, top_opts, 2) : fsdpc_suggest(word, names, N);
  const char *what = word[0] == '-' ? "option" : "command";
  if (near)
    fprintf(stderr, "%s: unknown %s '%s' (did you mean '%s'?; `fsdpc --help` lists them)\n", who,
            what, word, near);
  else
    fprintf(stderr, "%s: unknown %s '%s' (`fsdpc --help` lists them)\n", who, what, word);
  return 2;
}

/* OpenMP threads that spin while OpenBLAS's own threads run a GEMM starve
 * them: on a 2-core machine training ran 2.7x slower (bench/results/
 * 2026-11-21-cpu-omp-wait.md). libgomp reads OMP_WAIT_POLICY before main,
 * so when the user has not chosen one, set PASSIVE and re-run ourselves. */
static void prefer_passive_openmp(char **argv) {
  if (getenv("OMP_WAIT_POLICY"))
    return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv); /* on failure, carry on as we are */
}

int main(int argc, char **argv) {
  prefer_passive_openmp(argv);
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    printf("fsdpc %s\n", fsdpc_version());
    return 0;
  }
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fsdpc__usage(stdout);
    return 0;
  }
  if (argc < 2) {
    fsdpc__usage(stderr);
    return 2;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  return fsdpc__unknown_command("fsdpc", argv[1]);
}
