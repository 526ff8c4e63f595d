/* fsdpc plot RUN_DIR... -o FIGURE.png|svg [--title T]: the runs' loss, eval
 * loss, learning rate and grad norm in one figure, one colour per run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "obs/metrics.h"
#include "obs/plot.h"
#include "util/fs.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc plot RUN_DIR... -o FIGURE.png|FIGURE.svg [--title TEXT]\n"
             "\n"
             "Draws each run's metrics.jsonl (its log.dir; resumes folded in) as four panels:\n"
             "loss and eval loss against step, loss against tokens, learning rate and\n"
             "gradient norm. Several runs are overlaid, one colour each, named in a legend.\n");
}

int fsdpc__cmd_plot(int argc, char **argv) {
  const char *out = NULL, *title = NULL;
  const char **dirs = calloc((size_t)argc, sizeof *dirs);
  int nd = 0;
  if (!dirs)
    return 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      free(dirs);
      return 0;
    } else if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--out") == 0) && i + 1 < argc) {
      out = argv[++i];
    } else if (strcmp(argv[i], "--title") == 0 && i + 1 < argc) {
      title = argv[++i];
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "fsdpc plot: unknown option '%s'\n", argv[i]);
      usage(stderr);
      free(dirs);
      return 2;
    } else {
      dirs[nd++] = argv[i];
    }
  }
  if (!out || nd == 0) {
    usage(stderr);
    free(dirs);
    return 2;
  }
  fsdpc_metrics_run *runs = calloc((size_t)nd, sizeof *runs);
  char(*labels)[320] = calloc((size_t)nd, sizeof *labels);
  const char **lp = calloc((size_t)nd, sizeof *lp);
  int code = 1, nr = 0;
  fsdpc_err err = {0};
  if (!runs || !labels || !lp)
    goto done;
  for (; nr < nd; nr++) {
    if (fsdpc__metrics_read(dirs[nr], &runs[nr], &err) != FSDPC_OK) {
      fprintf(stderr, "fsdpc plot: %s\n", err.msg);
      goto done;
    }
    const fsdpc_metrics_run *r = &runs[nr];
    snprintf(labels[nr], sizeof labels[nr], "%s (world %d, %d steps%s)", dirs[nr], r->world,
             (int)r->pts[r->n - 1].step, r->n_starts > 1 ? ", resumed" : "");
    lp[nr] = labels[nr];
  }
  char deftitle[256];
  snprintf(deftitle, sizeof deftitle, "fsdpc: %s%s", dirs[0], nd > 1 ? " and others" : "");
  if (fsdpc__mkdir_parent(out, &err) != FSDPC_OK ||
      fsdpc__plot_runs(runs, lp, nd, title ? title : deftitle, out, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc plot: %s\n", err.msg);
    goto done;
  }
  printf("wrote %s (%d run%s)\n", out, nd, nd == 1 ? "" : "s");
  code = 0;
done:
  for (int i = 0; i < nr; i++)
    fsdpc__metrics_run_free(&runs[i]);
  free(runs);
  free(labels);
  free(lp);
  free(dirs);
  return code;
}
