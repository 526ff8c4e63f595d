/* The divergence rule for checkpoint rotation (issue 43 item 7).
 *
 * A finite loss can still have diverged (a learning rate too high: the
 * loss climbs from 3 to 30 and stays there), and the checkpoints it makes
 * are no place to resume from. So each intermediate checkpoint carries a
 * marker, train_loss.json: the mean loss of the last FSDPC_DIVERGE_WINDOW
 * steps at the save, the run's best such mean, and whether the checkpoint
 * is diverging: its mean is not finite or above checkpoint.divergence_factor
 * x the best. Rotation (checkpoint.keep) never deletes the newest checkpoint
 * that is not diverging. The best is carried across a resume through the
 * marker of the checkpoint resumed from. */
#ifndef FSDPC_CKPT_DIVERGE_H
#define FSDPC_CKPT_DIVERGE_H

#include <stdint.h>

#include "util/err.h"

#define FSDPC_DIVERGE_WINDOW 10
#define FSDPC_CKPT_LOSS_FILE "train_loss.json"

typedef struct fsdpc_diverge {
  double factor; /* checkpoint.divergence_factor; 0 = off */
  double win[FSDPC_DIVERGE_WINDOW];
  int n, next;
  double best; /* the lowest window mean so far; valid when have_best */
  int have_best;
} fsdpc_diverge;

void fsdpc__diverge_init(fsdpc_diverge *d, double factor);
/* The loss of a step that trained (a skipped step, no target token, is not
 * noted). A non-finite loss counts as infinite. */
void fsdpc__diverge_note(fsdpc_diverge *d, double loss);
/* The mean of the window (NaN when nothing was noted) and whether a save
 * now is diverging. */
double fsdpc__diverge_mean(const fsdpc_diverge *d);
int fsdpc__diverge_now(const fsdpc_diverge *d);
/* The marker of a checkpoint of `step` (malloc'd JSON; NULL: out of memory). */
char *fsdpc__diverge_marker(const fsdpc_diverge *d, int64_t step);
/* After a resume from dir: the run's best as its marker says (none: kept). */
void fsdpc__diverge_resume(fsdpc_diverge *d, const char *dir);
/* 1 when the checkpoint folder dir is marked diverging; 0 when it is not or
 * has no (readable) marker. */
int fsdpc__diverge_marked(const char *dir);

#endif
