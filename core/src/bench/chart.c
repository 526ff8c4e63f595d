/* The bench chart: tokens/s per rank (top) and peak memory per rank by
 * category with the planner's prediction marked (bottom), one bar per
 * variant, baseline rows alongside. Drawn once through a small canvas
 * table with two back ends: SVG text (always) and cairo PNG (when built
 * with cairo, FSDPC_HAVE_CAIRO). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

#ifdef FSDPC_HAVE_CAIRO
#include <cairo.h>
#endif

typedef struct canvas {
  void *ctx;
  void (*rect)(void *ctx, double x, double y, double w, double h, uint32_t rgb);
  void (*line)(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb, double width);
  /* anchor: 0 start, 1 middle, 2 end; y is the text baseline */
  void (*text)(void *ctx, double x, double y, const char *s, double size, int anchor, uint32_t rgb);
} canvas;

/* ---- SVG ---- */

static void svg_rect(void *ctx, double x, double y, double w, double h, uint32_t rgb) {
  fprintf(ctx, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#%06x\"/>\n", x,
          y, w, h, rgb);
}
static void svg_line(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb,
                     double width) {
  fprintf(ctx,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#%06x\" "
          "stroke-width=\"%.1f\"/>\n",
          x0, y0, x1, y1, rgb, width);
}
static void svg_text(void *ctx, double x, double y, const char *s, double size, int anchor,
                     uint32_t rgb) {
  static const char *anchors[] = {"start", "middle", "end"};
  fprintf(ctx, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\" fill=\"#%06x\">",
          x, y, size, anchors[anchor], rgb);
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", ctx);
    else if (*s == '>')
      fputs("&gt;", ctx);
    else if (*s == '&')
      fputs("&amp;", ctx);
    else
      fputc(*s, ctx);
  }
  fputs("</text>\n", ctx);
}

/* ---- cairo ---- */

#ifdef FSDPC_HAVE_CAIRO
static void cr_color(cairo_t *cr, uint32_t rgb) {
  cairo_set_source_rgb(cr, ((rgb >> 16) & 255) / 255.0, ((rgb >> 8) & 255) / 255.0,
                       (rgb & 255) / 255.0);
}
static void cr_rect(void *ctx, double x, double y, double w, double h, uint32_t rgb) {
  cr_color(ctx, rgb);
  cairo_rectangle(ctx, x, y, w, h);
  cairo_fill(ctx);
}
static void cr_line(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb,
                    double width) {
  cr_color(ctx, rgb);
  cairo_set_line_width(ctx, width);
  cairo_move_to(ctx, x0, y0);
  cairo_line_to(ctx, x1, y1);
  cairo_stroke(ctx);
}
static void cr_text(void *ctx, double x, double y, const char *s, double size, int anchor,
                    uint32_t rgb) {
  cairo_text_extents_t ext;
  cr_color(ctx, rgb);
  cairo_select_font_face(ctx, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(ctx, size);
  cairo_text_extents(ctx, s, &ext);
  cairo_move_to(ctx, x - (anchor == 1 ? ext.x_advance / 2 : anchor == 2 ? ext.x_advance : 0), y);
  cairo_show_text(ctx, s);
}
#endif

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

static void axis_ticks(const canvas *c, double x0, double y, double h, double vmax,
                       const char *unit) {
  for (int t = 0; t <= 5; t++) {
    double x = x0 + PLOT_W * t / 5.0;
    char s[32];
    c->line(c->ctx, x, y, x, y + h, 0xdddddd, 1);
    double v = vmax * t / 5.0;
    snprintf(s, sizeof s, v >= 10 ? "%.0f%s" : "%.3g%s", v, t == 5 ? unit : "");
    c->text(c->ctx, x, y + h + 14, s, 11, 1, 0x444444);
  }
}

static int chart_height(const fsdpc_bench_row *rows, int n) {
  int nf = 0;
  for (int i = 0; i < n; i++)
    nf += !rows[i].ok;
  return TOP + 2 * (n * ROW_H + PANEL_GAP) + 40 + (nf ? 16 * nf + 20 : 0);
}

static void draw(const canvas *c, const char *title, const fsdpc_bench_row *rows, int n) {
  int H = chart_height(rows, n);
  c->rect(c->ctx, 0, 0, W, H, 0xffffff);
  c->text(c->ctx, W / 2.0, 22, title, 15, 1, 0x000000);
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
  c->text(c->ctx, x0, y - 8, "tokens/s per rank (median step; whiskers: slowest-fastest step)", 13,
          0, 0x000000);
  axis_ticks(c, x0, y, n * ROW_H, tmax, "");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    double yy = y + i * ROW_H;
    char label[160];
    snprintf(label, sizeof label, "%s%s", r->baseline ? "[baseline] " : "", r->name);
    c->text(c->ctx, x0 - 6, yy + 15, label, 11, 2, 0x000000);
    if (!r->ok) {
      snprintf(label, sizeof label, "failed: %.90s", r->reason);
      c->text(c->ctx, x0 + 4, yy + 15, label, 10, 0, 0xc00000);
      continue;
    }
    double w = PLOT_W * r->tok_s_rank / tmax, tx = x0 + w;
    c->rect(c->ctx, x0, yy + 3, w, ROW_H - 6, r->baseline ? 0xf28e2b : 0x4e79a7);
    /* Whisker: the throughput of the slowest and the fastest measured step. */
    if (r->step_min > 0 && r->step_max > r->step_min && r->step_med > 0) {
      double lo = PLOT_W * r->tok_s_rank * r->step_med / r->step_max / tmax;
      double hi = PLOT_W * r->tok_s_rank * r->step_med / r->step_min / tmax;
      double ym = yy + ROW_H / 2.0;
      c->line(c->ctx, x0 + lo, ym, x0 + hi, ym, 0x000000, 1.2);
      c->line(c->ctx, x0 + lo, ym - 5, x0 + lo, ym + 5, 0x000000, 1.2);
      c->line(c->ctx, x0 + hi, ym - 5, x0 + hi, ym + 5, 0x000000, 1.2);
      if (hi > w)
        tx = x0 + hi;
    }
    snprintf(label, sizeof label, "%.0f", r->tok_s_rank);
    c->text(c->ctx, tx + 4, yy + 15, label, 10, 0, 0x333333);
  }

  /* Panel 2: peak memory by category, predicted total marked. */
  y += n * ROW_H + PANEL_GAP;
  c->text(c->ctx, x0, y - 8, "peak memory per rank, MiB (| = planner, o = reserved)", 13, 0,
          0x000000);
  axis_ticks(c, x0, y, n * ROW_H, mmax, " MiB");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    double yy = y + i * ROW_H, xx = x0;
    char label[160];
    snprintf(label, sizeof label, "%s%s", r->baseline ? "[baseline] " : "", r->name);
    c->text(c->ctx, x0 - 6, yy + 15, label, 11, 2, 0x000000);
    if (!r->ok)
      continue;
    if (r->baseline) {
      double w = PLOT_W * r->total_peak / 1048576.0 / mmax;
      c->rect(c->ctx, xx, yy + 3, w, ROW_H - 6, 0x9c755f);
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
        c->rect(c->ctx, xx, yy + 3, w, ROW_H - 6, cat_color[k]);
        xx += w;
      }
    }
    if (r->have_plan) {
      double px = x0 + PLOT_W * r->plan.total_peak / 1048576.0 / mmax;
      c->line(c->ctx, px, yy + 1, px, yy + ROW_H - 1, 0x000000, 2);
    }
    if (r->reserved > 0) {
      double rx = x0 + PLOT_W * r->reserved / 1048576.0 / mmax;
      c->text(c->ctx, rx, yy + 15, "o", 12, 1, 0x000000);
    }
    snprintf(label, sizeof label, "%.1f", r->total_peak / 1048576.0);
    c->text(c->ctx, xx + 6, yy + 15, label, 10, 0, 0x333333);
  }
  /* Legend. */
  double ly = y + n * ROW_H + 36, lx = x0;
  for (int k = 0; k < FSDPC_MEM_NCAT; k++) {
    c->rect(c->ctx, lx, ly - 10, 12, 12, cat_color[k]);
    c->text(c->ctx, lx + 16, ly, fsdpc__mem_cat_name((fsdpc_mem_cat)k), 11, 0, 0x000000);
    lx += 100;
  }
  c->rect(c->ctx, lx, ly - 10, 12, 12, 0x9c755f);
  c->text(c->ctx, lx + 16, ly, "baseline total", 11, 0, 0x000000);
  /* The variants that failed, listed under the chart with their reason. */
  int nf = 0;
  for (int i = 0; i < n; i++) {
    if (rows[i].ok)
      continue;
    char label[300];
    snprintf(label, sizeof label, "%s %s: %.200s", nf ? "" : "FAILED", rows[i].name,
             rows[i].reason);
    c->text(c->ctx, 20, ly + 26 + 16 * nf++, label, 11, 0, 0xc00000);
  }
}

fsdpc_status fsdpc__bench_chart(const char *svg_path, const char *png_path, const char *title,
                                const fsdpc_bench_row *rows, int n, int *png_written,
                                fsdpc_err *err) {
  *png_written = 0;
  FILE *f = fopen(svg_path, "w");
  if (!f)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s", svg_path, strerror(errno));
  int H = chart_height(rows, n);
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
          W, H, W, H);
  canvas svg = {f, svg_rect, svg_line, svg_text};
  draw(&svg, title, rows, n);
  fputs("</svg>\n", f);
  if (fclose(f) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s", svg_path);
#ifdef FSDPC_HAVE_CAIRO
  if (png_path) {
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *cr = cairo_create(sf);
    canvas png = {cr, cr_rect, cr_line, cr_text};
    draw(&png, title, rows, n);
    cairo_status_t cs = cairo_surface_write_to_png(sf, png_path);
    cairo_destroy(cr);
    cairo_surface_destroy(sf);
    if (cs != CAIRO_STATUS_SUCCESS)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s", png_path,
                         cairo_status_to_string(cs));
    *png_written = 1;
  }
#else
  (void)png_path;
#endif
  return FSDPC_OK;
}
