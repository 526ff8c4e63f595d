/* fsdpc plot RUN_DIR... -o FIGURE.png|svg [--title T]: the runs' loss, eval
 * loss, learning rate and grad norm in one figure, one colour per run
 * (fsdpc_plot). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc plot RUN_DIR... -o FIGURE.png|FIGURE.svg [--title TEXT]\n"
    "\n"
    "Draws each run's metrics.jsonl (its log.dir; resumes folded in) as four panels:\n"
    "loss and eval loss against step, loss against tokens, learning rate and\n"
    "gradient norm. Several runs are overlaid, one colour each, named in a legend.\n"
    "  -o, --out FILE   the figure (PNG or SVG by its extension)\n"
    "  --title TEXT     the figure's title (default: the first run's folder)\n";

enum { O_TITLE = 256 };
static const cli_opt opts[] = {{"out", 'o', "FILE"}, {"title", O_TITLE, "TEXT"}, {0}};
const cli_cmd fsdpc__plot_cmd = {"plot", help, opts};

typedef struct plot_cli {
  const char *out, *title, **dirs;
  int nd;
} plot_cli;

static int plot_arg(void *ctx, int id, const char *v) {
  plot_cli *a = ctx;
  if (id == 'o')
    a->out = v;
  else if (id == O_TITLE)
    a->title = v;
  else
    a->dirs[a->nd++] = v;
  return 1;
}

int fsdpc__cmd_plot(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__plot_cmd;
  plot_cli a = {.dirs = calloc((size_t)argc + 1, sizeof(char *))};
  int rc = a.dirs ? cli_parse(cmd, argc, argv, plot_arg, &a) : 1;
  const char *out = a.out, **dirs = a.dirs;
  int nd = a.nd;
  if (rc < 0 && (!out || nd == 0))
    rc = cli_usage_error(cmd, "give one or more RUN_DIR and -o FIGURE");
  if (rc < 0) {
    fsdpc_err err = {0};
    if (fsdpc_plot(dirs, nd, a.title, out, &err) != FSDPC_OK) {
      rc = cli_fail(cmd, err.msg);
    } else {
      printf("wrote %s (%d run%s)\n", out, nd, nd == 1 ? "" : "s");
      rc = 0;
    }
  }
  free(dirs);
  return rc;
}
