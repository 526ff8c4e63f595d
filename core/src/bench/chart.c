/* The bench chart: tokens/s per rank (top) and peak memory per rank by
 * category with the planner's prediction marked (bottom), one bar per
 * variant, baseline rows alongside. Drawn once through cairo, onto an SVG
 * surface (cairo-svg) and an image surface for the PNG: one back end, the
 * same as `fsdpc plot` (obs/plot.c). A build without cairo writes no chart. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "util/fs.h"

#ifdef FSDPC_HAVE_CAIRO
#include <cairo-svg.h>
#include <cairo.h>

static void color(cairo_t *cr, uint32_t rgb) {
  cairo_set_source_rgb(cr, ((rgb >> 16) & 255) / 255.0, ((rgb >> 8) & 255) / 255.0,
                       (rgb & 255) / 255.0);
}
static void rect(cairo_t *cr, double x, double y, double w, double h, uint32_t rgb) {
  color(cr, rgb);
  cairo_rectangle(cr, x, y, w, h);
  cairo_fill(cr);
}
static void line(cairo_t *cr, double x0, double y0, double x1, double y1, uint32_t rgb,
                 double width) {
  color(cr, rgb);
  cairo_set_line_width(cr, width);
  cairo_move_to(cr, x0, y0);
  cairo_line_to(cr, x1, y1);
  cairo_stroke(cr);
}
/* anchor: 0 start, 1 middle, 2 end; y is the text baseline */
static void text(cairo_t *cr, double x, double y, const char *s, double size, int anchor,
                 uint32_t rgb) {
  cairo_text_extents_t ext;
  color(cr, rgb);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents(cr, s, &ext);
  cairo_move_to(cr, x - (anchor == 1 ? ext.x_advance / 2 : anchor == 2 ? ext.x_advance : 0), y);
  cairo_show_text(cr, s);
}

/* ---- the drawing ---- */

static const uint32_t cat_color[FSDPC_MEM_NCAT] = {0x4e79a7, 0xf28e2b, 0xe15759,
                                                   0x76b7b2, 0x59a14f, 0xbab0ac};
enum { W = 980, LABEL_W = 230, PLOT_W = 640, ROW_H = 22, TOP = 40, PANEL_GAP = 70 };

static double nice_max(double v) {
  if (!(v > 0))
    return 1;
  double p = pow(10, floor(log10(v)));
  for (int m = 1; m <= 10; m++)
    if (m * p >= v)
      return m * p;
  return 10 * p;
}

static void axis_ticks(cairo_t *c, double x0, double y, double h, double vmax, const char *unit) {
  for (int t = 0; t <= 5; t++) {
    double x = x0 + PLOT_W * t / 5.0;
    char s[32];
    line(c, x, y, x, y + h, 0xdddddd, 1);
    double v = vmax * t / 5.0;
    snprintf(s, sizeof s, v >= 10 ? "%.0f%s" : "%.3g%s", v, t == 5 ? unit : "");
    text(c, x, y + h + 14, s, 11, 1, 0x444444);
  }
}

static int chart_height(const fsdpc_bench_row *rows, int n) {
  int nf = 0;
  for (int i = 0; i < n; i++)
    nf += !rows[i].ok;
  return TOP + 2 * (n * ROW_H + PANEL_GAP) + 40 + (nf ? 16 * nf + 20 : 0);
}

static void draw(cairo_t *c, const char *title, const fsdpc_bench_row *rows, int n) {
  int H = chart_height(rows, n);
  rect(c, 0, 0, W, H, 0xffffff);
  text(c, W / 2.0, 22, title, 15, 1, 0x000000);
  double tmax = 0, mmax = 0;
  for (int i = 0; i < n; i++) {
    if (!rows[i].ok)
      continue;
    double t = rows[i].tok_s_rank;
    if (rows[i].step_min > 0 && rows[i].step_med > rows[i].step_min)
      t = t * rows[i].step_med / rows[i].step_min; /* the whisker's end fits too */
    if (t > tmax)
      tmax = t;
    double m = (double)rows[i].total_peak;
    if (rows[i].have_plan && rows[i].plan.total_peak > m)
      m = (double)rows[i].plan.total_peak;
    if (rows[i].reserved > m)
      m = (double)rows[i].reserved;
    if (m > mmax)
      mmax = m;
  }
  tmax = nice_max(tmax);
  mmax = nice_max(mmax / 1048576.0);
  double x0 = LABEL_W;

  /* Panel 1: throughput. */
  double y = TOP + 20;
  text(c, x0, y - 8, "tokens/s per rank (median step; whiskers: slowest-fastest step)", 13, 0,
       0x000000);
  axis_ticks(c, x0, y, n * ROW_H, tmax, "");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    double yy = y + i * ROW_H;
    char label[160];
    snprintf(label, sizeof label, "%s%s", r->baseline ? "[baseline] " : "", r->name);
    text(c, x0 - 6, yy + 15, label, 11, 2, 0x000000);
    if (!r->ok) {
      snprintf(label, sizeof label, "failed: %.90s", r->reason);
      text(c, x0 + 4, yy + 15, label, 10, 0, 0xc00000);
      continue;
    }
    double w = PLOT_W * r->tok_s_rank / tmax, tx = x0 + w;
    rect(c, x0, yy + 3, w, ROW_H - 6, r->baseline ? 0xf28e2b : 0x4e79a7);
    /* Whisker: the throughput of the slowest and the fastest measured step. */
    if (r->step_min > 0 && r->step_max > r->step_min && r->step_med > 0) {
      double lo = PLOT_W * r->tok_s_rank * r->step_med / r->step_max / tmax;
      double hi = PLOT_W * r->tok_s_rank * r->step_med / r->step_min / tmax;
      double ym = yy + ROW_H / 2.0;
      line(c, x0 + lo, ym, x0 + hi, ym, 0x000000, 1.2);
      line(c, x0 + lo, ym - 5, x0 + lo, ym + 5, 0x000000, 1.2);
      line(c, x0 + hi, ym - 5, x0 + hi, ym + 5, 0x000000, 1.2);
      if (hi > w)
        tx = x0 + hi;
    }
    snprintf(label, sizeof label, "%.0f", r->tok_s_rank);
    text(c, tx + 4, yy + 15, label, 10, 0, 0x333333);
  }

  /* Panel 2: peak memory by category, predicted total marked. */
  y += n * ROW_H + PANEL_GAP;
  text(c, x0, y - 8, "peak memory per rank, MiB (| = planner, o = reserved)", 13, 0, 0x000000);
  axis_ticks(c, x0, y, n * ROW_H, mmax, " MiB");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    double yy = y + i * ROW_H, xx = x0;
    char label[160];
    snprintf(label, sizeof label, "%s%s", r->baseline ? "[baseline] " : "", r->name);
    text(c, x0 - 6, yy + 15, label, 11, 2, 0x000000);
    if (!r->ok)
      continue;
    if (r->baseline) {
      double w = PLOT_W * r->total_peak / 1048576.0 / mmax;
      rect(c, xx, yy + 3, w, ROW_H - 6, 0x9c755f);
      xx += w;
    } else {
      /* Categories peak at different moments; scale them to the measured
       * peak of the sum so the bar's length is the true peak. */
      double sum = 0;
      for (int k = 0; k < FSDPC_MEM_NCAT; k++)
        sum += (double)r->peak[k];
      double scale = sum > 0 ? (double)r->total_peak / sum : 0;
      for (int k = 0; k < FSDPC_MEM_NCAT; k++) {
        double w = PLOT_W * r->peak[k] * scale / 1048576.0 / mmax;
        rect(c, xx, yy + 3, w, ROW_H - 6, cat_color[k]);
        xx += w;
      }
    }
    if (r->have_plan) {
      double px = x0 + PLOT_W * r->plan.total_peak / 1048576.0 / mmax;
      line(c, px, yy + 1, px, yy + ROW_H - 1, 0x000000, 2);
    }
    if (r->reserved > 0) {
      double rx = x0 + PLOT_W * r->reserved / 1048576.0 / mmax;
      text(c, rx, yy + 15, "o", 12, 1, 0x000000);
    }
    snprintf(label, sizeof label, "%.1f", r->total_peak / 1048576.0);
    text(c, xx + 6, yy + 15, label, 10, 0, 0x333333);
  }
  /* Legend. */
  double ly = y + n * ROW_H + 36, lx = x0;
  for (int k = 0; k < FSDPC_MEM_NCAT; k++) {
    rect(c, lx, ly - 10, 12, 12, cat_color[k]);
    text(c, lx + 16, ly, fsdpc__mem_cat_name((fsdpc_mem_cat)k), 11, 0, 0x000000);
    lx += 100;
  }
  rect(c, lx, ly - 10, 12, 12, 0x9c755f);
  text(c, lx + 16, ly, "baseline total", 11, 0, 0x000000);
  /* The variants that failed, listed under the chart with their reason. */
  int nf = 0;
  for (int i = 0; i < n; i++) {
    if (rows[i].ok)
      continue;
    char label[300];
    snprintf(label, sizeof label, "%s %s: %.200s", nf ? "" : "FAILED", rows[i].name,
             rows[i].reason);
    text(c, 20, ly + 26 + 16 * nf++, label, 11, 0, 0xc00000);
  }
}

/* Draws onto sf (an SVG or image surface); the surface's status after. */
static cairo_status_t draw_on(cairo_surface_t *sf, const char *title, const fsdpc_bench_row *rows,
                              int n) {
  cairo_t *cr = cairo_create(sf);
  draw(cr, title, rows, n);
  cairo_status_t cs = cairo_status(cr);
  cairo_destroy(cr);
  return cs;
}

/* cairo's stream writer over a descriptor (a util/fs.h temporary file). */
static cairo_status_t write_fd(void *closure, const unsigned char *data, unsigned int len) {
  return fsdpc__write_all(*(const int *)closure, data, len) == 0 ? CAIRO_STATUS_SUCCESS
                                                                 : CAIRO_STATUS_WRITE_ERROR;
}

/* One figure into path through a private temporary name renamed into place
 * (util/fs.h): never written through a link planted in the output folder.
 * png: an image surface written as PNG; else an SVG surface. */
static fsdpc_status write_figure(const char *path, int png, int H, const char *title,
                                 const fsdpc_bench_row *rows, int n, fsdpc_err *err) {
  fsdpc_out_file o;
  FSDPC_TRY(fsdpc__out_create(path, &o, err));
  cairo_surface_t *sf = png ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H)
                            : cairo_svg_surface_create_for_stream(write_fd, &o.fd, W, H);
  cairo_status_t cs = draw_on(sf, title, rows, n);
  if (cs == CAIRO_STATUS_SUCCESS && png)
    cs = cairo_surface_write_to_png_stream(sf, write_fd, &o.fd);
  cairo_surface_finish(sf); /* an SVG surface writes here */
  if (cs == CAIRO_STATUS_SUCCESS)
    cs = cairo_surface_status(sf);
  cairo_surface_destroy(sf);
  if (cs != CAIRO_STATUS_SUCCESS) {
    int e = errno;
    fsdpc__out_abort(&o);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s", path,
                       cs == CAIRO_STATUS_WRITE_ERROR ? strerror(e) : cairo_status_to_string(cs));
  }
  return fsdpc__out_commit(&o, err);
}

fsdpc_status fsdpc__bench_chart(const char *svg_path, const char *png_path, const char *title,
                                const fsdpc_bench_row *rows, int n, int *written, fsdpc_err *err) {
  *written = 0;
  int H = chart_height(rows, n);
  FSDPC_TRY(write_figure(svg_path, 0, H, title, rows, n, err));
  if (png_path)
    FSDPC_TRY(write_figure(png_path, 1, H, title, rows, n, err));
  *written = 1;
  return FSDPC_OK;
}

#else

fsdpc_status fsdpc__bench_chart(const char *svg_path, const char *png_path, const char *title,
                                const fsdpc_bench_row *rows, int n, int *written, fsdpc_err *err) {
  (void)svg_path, (void)png_path, (void)title, (void)rows, (void)n, (void)err;
  *written = 0; /* no cairo: the table, CSV and JSON only */
  return FSDPC_OK;
}

#endif
