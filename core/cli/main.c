/* fsdpc: the command-line entry point. Subcommands live in cli/cmd_*.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "fsdpc/fsdpc.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} commands[] = {
    {"train", fsdpc__cmd_train, "train a model from a YAML config (one or many ranks)"},
    {"config", fsdpc__cmd_config, "check a config and print it resolved; the schema"},
    {"plugins", fsdpc__cmd_plugins, "list plugins and show what each offers"},
    {"data", fsdpc__cmd_data,
     "prepare datasets (JSONL, chat templates) and make and inspect token files"},
    {"plan", fsdpc__cmd_plan, "predict per-rank memory for each sharding strategy"},
    {"bench", fsdpc__cmd_bench, "A/B benchmark a matrix of config variants"},
    {"convert", fsdpc__cmd_convert,
     "convert checkpoints: sharded <-> Hugging Face, any world size"},
    {"metrics", fsdpc__cmd_metrics, "summarise runs' metrics.jsonl (resumes folded in)"},
    {"plot", fsdpc__cmd_plot, "plot loss, eval loss, LR and grad norm of runs (PNG/SVG)"},
    {"generate", fsdpc__cmd_generate, "generate text from a model (KV cache; greedy or sampled)"},
    {"eval", fsdpc__cmd_eval, "loss, perplexity and token accuracy of a model on a dataset"},
    {"recipes", fsdpc__cmd_recipes, "list the shipped configs and templates, copy one to edit"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc <command> [args]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\n`fsdpc <command> --help` for details; `fsdpc --version`.\n");
}

/* OpenMP threads that spin while OpenBLAS's own threads run a GEMM starve
 * them: on a 2-core machine training ran 2.7x slower (bench/results/
 * 2026-11-21-cpu-omp-wait.md). libgomp reads OMP_WAIT_POLICY before main,
 * so when the user has not chosen one, set PASSIVE and re-run ourselves. */
static void prefer_passive_openmp(char **argv) {
  if (getenv("OMP_WAIT_POLICY")) return;
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
    usage(stdout);
    return 0;
  }
  if (argc >= 2)
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
      if (strcmp(argv[1], commands[i].name) == 0)
        return commands[i].run(argc - 1, argv + 1);
  if (argc >= 2) {
    fprintf(stderr, "fsdpc: unknown command '%s' (`fsdpc --help` lists them)\n", argv[1]);
    return 2;
  }
  usage(stderr);
  return 2;
}
