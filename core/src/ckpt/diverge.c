/* The divergence rule for checkpoint rotation (see diverge.h). */
#include "ckpt/diverge.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/fileio.h"

void fsdpc__diverge_init(fsdpc_diverge *d, double factor) {
  memset(d, 0, sizeof *d);
  d->factor = factor;
}

double fsdpc__diverge_mean(const fsdpc_diverge *d) {
  if (d->n == 0)
    return NAN;
  double s = 0.0;
  for (int i = 0; i < d->n; i++)
    s += d->win[i];
  return s / d->n;
}

void fsdpc__diverge_note(fsdpc_diverge *d, double loss) {
  d->win[d->next] = isfinite(loss) ? loss : INFINITY;
  d->next = (d->next + 1) % FSDPC_DIVERGE_WINDOW;
  if (d->n < FSDPC_DIVERGE_WINDOW)
    d->n++;
  /* the best is a full window's mean (the first loss until one is full):
   * a few lucky steps do not set it */
  double m = fsdpc__diverge_mean(d);
  if (isfinite(m) && (!d->have_best || (d->n == FSDPC_DIVERGE_WINDOW && m < d->best))) {
    d->best = m;
    d->have_best = 1;
  }
}

int fsdpc__diverge_now(const fsdpc_diverge *d) {
  if (d->factor <= 0.0 || d->n == 0)
    return 0;
  double m = fsdpc__diverge_mean(d);
  return !isfinite(m) || (d->have_best && m > d->factor * d->best);
}

char *fsdpc__diverge_marker(const fsdpc_diverge *d, int64_t step) {
  cJSON *o = cJSON_CreateObject();
  double m = fsdpc__diverge_mean(d);
  cJSON_AddNumberToObject(o, "step", (double)step);
  cJSON_AddNumberToObject(o, "window", d->n);
  if (isfinite(m))
    cJSON_AddNumberToObject(o, "loss_mean", m);
  else
    cJSON_AddNullToObject(o, "loss_mean");
  if (d->have_best)
    cJSON_AddNumberToObject(o, "best_loss_mean", d->best);
  cJSON_AddNumberToObject(o, "divergence_factor", d->factor);
  cJSON_AddBoolToObject(o, "diverging", fsdpc__diverge_now(d));
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  return text;
}

/* dir's marker, parsed (NULL: none). Small: read whole. */
static cJSON *read_marker(const char *dir) {
  char *p = fsdpc__path_join(dir, FSDPC_CKPT_LOSS_FILE);
  FILE *f = p ? fopen(p, "rb") : NULL;
  free(p);
  if (!f)
    return NULL;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return cJSON_Parse(buf);
}

void fsdpc__diverge_resume(fsdpc_diverge *d, const char *dir) {
  cJSON *o = read_marker(dir);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "best_loss_mean");
  if (cJSON_IsNumber(b) && isfinite(b->valuedouble) &&
      (!d->have_best || b->valuedouble < d->best)) {
    d->best = b->valuedouble;
    d->have_best = 1;
  }
  cJSON_Delete(o);
}

int fsdpc__diverge_marked(const char *dir) {
  cJSON *o = read_marker(dir);
  int bad = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "diverging"));
  cJSON_Delete(o);
  return bad;
}
