/* `fsdpc plot`: runs' metrics as one figure of four panels -- loss and eval
 * loss against step, loss against tokens, learning rate, gradient norm --
 * each run a colour, a legend naming them. PNG or SVG by the output's
 * extension, drawn with cairo. */
#ifndef FSDPC_OBS_PLOT_H
#define FSDPC_OBS_PLOT_H

#include "obs/metrics.h"
#include "util/err.h"

/* labels[i] names runs[i] in the legend. */
fsdpc_status fsdpc__plot_runs(const fsdpc_metrics_run *runs, const char *const *labels, int n,
                              const char *title, const char *out_path, fsdpc_err *err);

#endif
