/* The run plot: four panels of line series through cairo (image surface
 * for PNG, SVG surface for SVG). Written to a temporary file beside the
 * output and renamed, so a failed plot leaves no half-written figure. */
#include "obs/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef FSDPC_HAVE_CAIRO
#include <cairo-svg.h>
#include <cairo.h>

#include "util/fs.h"

enum {
  FIG_W = 1200,
  FIG_H = 860,
  MARGIN_L = 80,
  MARGIN_R = 30,
  TOP = 96,
  GAP_X = 90,
  GAP_Y = 84,
  BOTTOM = 60
};

static const uint32_t palette[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd,
                                   0x8c564b, 0xe377c2, 0x17becf, 0x7f7f7f, 0xbcbd22};

typedef enum { Y_LOSS, Y_LOSS_TOKENS, Y_LR, Y_GNORM } panel_kind;

typedef struct panel {
  const char *title, *xlabel, *ylabel;
  panel_kind kind;
  double x, y, w, h;     /* plot area in pixels */
  double x0, x1, y0, y1; /* data range */
} panel;

static void color(cairo_t *cr, uint32_t rgb) {
  cairo_set_source_rgb(cr, ((rgb >> 16) & 255) / 255.0, ((rgb >> 8) & 255) / 255.0,
                       (rgb & 255) / 255.0);
}

static void text(cairo_t *cr, double x, double y, const char *s, double size, int anchor,
                 int bold) {
  cairo_text_extents_t ext;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents(cr, s, &ext);
  cairo_move_to(cr, x - (anchor == 1 ? ext.x_advance / 2 : anchor == 2 ? ext.x_advance : 0), y);
  cairo_show_text(cr, s);
}

/* The x value of point p in a panel (step, or tokens seen so far). */
static double px_of(const panel *pn, const fsdpc_metrics_point *p) {
  if (pn->kind == Y_LOSS_TOKENS)
    return isnan(p->tokens) ? NAN : (double)p->step * p->tokens;
  return (double)p->step;
}
/* The y values: loss (and eval loss, second), lr, grad norm. */
static double py_of(const panel *pn, const fsdpc_metrics_point *p, int second) {
  switch (pn->kind) {
  case Y_LOSS:
  case Y_LOSS_TOKENS:
    return second ? p->eval_loss : p->loss;
  case Y_LR:
    return second ? NAN : p->lr;
  default:
    return second ? NAN : p->grad_norm;
  }
}

/* 1, 2 or 5 times a power of ten, about (hi - lo) / 5. */
static double tick_step(double lo, double hi) {
  double span = hi - lo, raw = span / 5, p = pow(10, floor(log10(raw)));
  double m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_tick(char *s, size_t cap, double v, double step) {
  double a = fabs(v);
  if (a == 0)
    snprintf(s, cap, "0");
  else if (a >= 1e4 && step >= 1e3) /* tokens: 250k, 1.5M, 2G */
    snprintf(s, cap, "%g%s",
             a >= 1e9   ? v / 1e9
             : a >= 1e6 ? v / 1e6
                        : v / 1e3,
             a >= 1e9   ? "G"
             : a >= 1e6 ? "M"
                        : "k");
  else if (a >= 1e6 || a < 1e-3)
    snprintf(s, cap, "%.3g", v);
  else if (step >= 1)
    snprintf(s, cap, "%.0f", v);
  else
    snprintf(s, cap, "%.*f", (int)ceil(-log10(step)), v);
}

static void range(panel *pn, const fsdpc_metrics_run *runs, int n) {
  pn->x0 = pn->y0 = INFINITY;
  pn->x1 = pn->y1 = -INFINITY;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < runs[r].n; i++) {
      double x = px_of(pn, &runs[r].pts[i]);
      for (int k = 0; k < 2; k++) {
        double y = py_of(pn, &runs[r].pts[i], k);
        if (isnan(x) || isnan(y) || isinf(y))
          continue;
        pn->x0 = fmin(pn->x0, x), pn->x1 = fmax(pn->x1, x);
        pn->y0 = fmin(pn->y0, y), pn->y1 = fmax(pn->y1, y);
      }
    }
  if (!(pn->x1 >= pn->x0))
    pn->x0 = 0, pn->x1 = 1, pn->y0 = 0, pn->y1 = 1;
  if (pn->kind == Y_LR || pn->kind == Y_GNORM)
    pn->y0 = fmin(0, pn->y0); /* rates and norms read from zero */
  if (pn->x1 - pn->x0 <= 0)
    pn->x1 = pn->x0 + 1;
  if (pn->y1 - pn->y0 <= 0)
    pn->y1 = pn->y0 + (fabs(pn->y0) > 0 ? fabs(pn->y0) * 0.1 : 1);
  double pad = 0.04 * (pn->y1 - pn->y0);
  pn->y1 += pad;
  if (pn->y0 != 0)
    pn->y0 -= pad;
  if (pn->kind != Y_LOSS_TOKENS)
    pn->x0 = fmin(pn->x0, 0);
}

static void axes(cairo_t *cr, const panel *pn) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_rectangle(cr, pn->x, pn->y, pn->w, pn->h);
  cairo_fill(cr);
  double xs = tick_step(pn->x0, pn->x1), ys = tick_step(pn->y0, pn->y1);
  char s[48];
  cairo_set_line_width(cr, 1);
  for (double v = ceil(pn->y0 / ys) * ys; v <= pn->y1 + 1e-9 * ys; v += ys) {
    double y = pn->y + pn->h - (v - pn->y0) / (pn->y1 - pn->y0) * pn->h;
    color(cr, 0xe4e4e4);
    cairo_move_to(cr, pn->x, y), cairo_line_to(cr, pn->x + pn->w, y), cairo_stroke(cr);
    color(cr, 0x333333);
    fmt_tick(s, sizeof s, fabs(v) < 1e-12 * ys ? 0 : v, ys);
    text(cr, pn->x - 6, y + 4, s, 11, 2, 0);
  }
  for (double v = ceil(pn->x0 / xs) * xs; v <= pn->x1 + 1e-9 * xs; v += xs) {
    double x = pn->x + (v - pn->x0) / (pn->x1 - pn->x0) * pn->w;
    color(cr, 0xe4e4e4);
    cairo_move_to(cr, x, pn->y), cairo_line_to(cr, x, pn->y + pn->h), cairo_stroke(cr);
    color(cr, 0x333333);
    fmt_tick(s, sizeof s, v, xs);
    text(cr, x, pn->y + pn->h + 16, s, 11, 1, 0);
  }
  color(cr, 0x000000);
  cairo_rectangle(cr, pn->x, pn->y, pn->w, pn->h);
  cairo_stroke(cr);
  text(cr, pn->x + pn->w / 2, pn->y - 10, pn->title, 14, 1, 1);
  text(cr, pn->x + pn->w / 2, pn->y + pn->h + 38, pn->xlabel, 12, 1, 0);
  cairo_save(cr);
  cairo_translate(cr, pn->x - 58, pn->y + pn->h / 2);
  cairo_rotate(cr, -M_PI / 2);
  text(cr, 0, 0, pn->ylabel, 12, 1, 0);
  cairo_restore(cr);
}

static void series(cairo_t *cr, const panel *pn, const fsdpc_metrics_run *run, int second,
                   uint32_t rgb) {
  cairo_save(cr);
  cairo_rectangle(cr, pn->x, pn->y, pn->w, pn->h);
  cairo_clip(cr);
  color(cr, rgb);
  cairo_set_line_width(cr, second ? 2.2 : 1.6);
  if (second) {
    double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
  }
  int started = 0, pts = 0;
  for (int i = 0; i < run->n; i++) {
    double x = px_of(pn, &run->pts[i]), y = py_of(pn, &run->pts[i], second);
    if (isnan(x) || isnan(y) || isinf(y))
      continue;
    double X = pn->x + (x - pn->x0) / (pn->x1 - pn->x0) * pn->w;
    double Y = pn->y + pn->h - (y - pn->y0) / (pn->y1 - pn->y0) * pn->h;
    if (started)
      cairo_line_to(cr, X, Y);
    else
      cairo_move_to(cr, X, Y);
    started = 1;
    pts++;
    if (second) { /* evaluations are few: mark each */
      cairo_stroke(cr);
      cairo_arc(cr, X, Y, 3.5, 0, 2 * M_PI);
      cairo_fill(cr);
      cairo_move_to(cr, X, Y);
    }
  }
  if (pts == 1 && !second) { /* one logged step: a dot, not an invisible line */
    cairo_stroke(cr);
    double x = px_of(pn, &run->pts[run->n - 1]), y = py_of(pn, &run->pts[run->n - 1], 0);
    cairo_arc(cr, pn->x + (x - pn->x0) / (pn->x1 - pn->x0) * pn->w,
              pn->y + pn->h - (y - pn->y0) / (pn->y1 - pn->y0) * pn->h, 3, 0, 2 * M_PI);
    cairo_fill(cr);
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

static int has_eval(const fsdpc_metrics_run *runs, int n) {
  for (int r = 0; r < n; r++)
    for (int i = 0; i < runs[r].n; i++)
      if (!isnan(runs[r].pts[i].eval_loss))
        return 1;
  return 0;
}

static void draw(cairo_t *cr, const fsdpc_metrics_run *runs, const char *const *labels, int n,
                 const char *title) {
  cairo_set_source_rgb(cr, 0.97, 0.97, 0.97);
  cairo_paint(cr);
  color(cr, 0x000000);
  text(cr, FIG_W / 2.0, 30, title, 18, 1, 1);
  /* Legend: one entry per run, wrapped left of the line-style note. */
  const char *note = has_eval(runs, n) ? "solid: training loss   dashed + dots: eval loss" : NULL;
  double note_w = 0;
  if (note) {
    cairo_text_extents_t ext;
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 11);
    cairo_text_extents(cr, note, &ext);
    note_w = ext.x_advance + 30;
    color(cr, 0x555555);
    text(cr, FIG_W - MARGIN_R, 58, note, 11, 2, 0);
  }
  double lx = MARGIN_L, ly = 58;
  for (int r = 0; r < n; r++) {
    char s[300];
    snprintf(s, sizeof s, "%s", labels[r]);
    cairo_text_extents_t ext;
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 12);
    cairo_text_extents(cr, s, &ext);
    if (lx > MARGIN_L && lx + 30 + ext.x_advance > FIG_W - MARGIN_R - (ly == 58 ? note_w : 0))
      lx = MARGIN_L, ly += 16;
    color(cr, palette[r % 10]);
    cairo_set_line_width(cr, 3);
    cairo_move_to(cr, lx, ly - 4), cairo_line_to(cr, lx + 24, ly - 4), cairo_stroke(cr);
    color(cr, 0x000000);
    text(cr, lx + 30, ly, s, 12, 0, 0);
    lx += 30 + ext.x_advance + 24;
  }
  double pw = (FIG_W - MARGIN_L - MARGIN_R - GAP_X) / 2.0;
  double extra = ly - 58; /* legend rows beyond the first push the panels down */
  double ph = (FIG_H - TOP - extra - BOTTOM - GAP_Y) / 2.0;
  panel ps[4] = {
      {"loss", "step", "loss (nats/token)", Y_LOSS, 0, 0, 0, 0, 0, 0, 0, 0},
      {"loss against tokens", "tokens trained", "loss (nats/token)", Y_LOSS_TOKENS, 0, 0, 0, 0, 0,
       0, 0, 0},
      {"learning rate", "step", "learning rate", Y_LR, 0, 0, 0, 0, 0, 0, 0, 0},
      {"gradient norm (before clipping)", "step", "global grad norm", Y_GNORM, 0, 0, 0, 0, 0, 0, 0,
       0},
  };
  for (int k = 0; k < 4; k++) {
    panel *pn = &ps[k];
    pn->x = MARGIN_L + (k % 2) * (pw + GAP_X);
    pn->y = TOP + extra + (k / 2) * (ph + GAP_Y);
    pn->w = pw;
    pn->h = ph;
    range(pn, runs, n);
    axes(cr, pn);
    for (int r = 0; r < n; r++) {
      series(cr, pn, &runs[r], 0, palette[r % 10]);
      if (pn->kind == Y_LOSS || pn->kind == Y_LOSS_TOKENS)
        series(cr, pn, &runs[r], 1, palette[r % 10]);
    }
  }
}

/* cairo's stream writer over a descriptor. */
static cairo_status_t write_fd(void *closure, const unsigned char *data, unsigned int len) {
  return fsdpc__write_all(*(const int *)closure, data, len) == 0 ? CAIRO_STATUS_SUCCESS
                                                                 : CAIRO_STATUS_WRITE_ERROR;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcasecmp(s + a - b, suf) == 0;
}

fsdpc_status fsdpc__plot_runs(const fsdpc_metrics_run *runs, const char *const *labels, int n,
                              const char *title, const char *out_path, fsdpc_err *err) {
  int svg = ends_with(out_path, ".svg");
  if (!svg && !ends_with(out_path, ".png"))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: the output must end in .png or .svg (that picks the format)", out_path);
  /* a private temporary file renamed into place (util/fs.h): cairo writes
   * through our descriptor, never through a link planted at a name */
  fsdpc_out_file out;
  FSDPC_TRY(fsdpc__out_create(out_path, &out, err));
  cairo_surface_t *sf = svg ? cairo_svg_surface_create_for_stream(write_fd, &out.fd, FIG_W, FIG_H)
                            : cairo_image_surface_create(CAIRO_FORMAT_RGB24, FIG_W, FIG_H);
  cairo_t *cr = cairo_create(sf);
  draw(cr, runs, labels, n, title);
  cairo_destroy(cr);
  cairo_status_t cs =
      svg ? CAIRO_STATUS_SUCCESS : cairo_surface_write_to_png_stream(sf, write_fd, &out.fd);
  cairo_surface_finish(sf);
  if (cs == CAIRO_STATUS_SUCCESS)
    cs = cairo_surface_status(sf);
  cairo_surface_destroy(sf);
  if (cs != CAIRO_STATUS_SUCCESS) {
    fsdpc__out_abort(&out);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s", out_path,
                       cairo_status_to_string(cs));
  }
  return fsdpc__out_commit(&out, err);
}

#else

fsdpc_status fsdpc__plot_runs(const fsdpc_metrics_run *runs, const char *const *labels, int n,
                              const char *title, const char *out_path, fsdpc_err *err) {
  (void)runs, (void)labels, (void)n, (void)title;
  return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "%s: this fsdpc was built without cairo; install libcairo2-dev and rebuild",
                     out_path);
}

#endif
