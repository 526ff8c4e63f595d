/* Rows of a bench: pooling runs, baseline rows read from other JSON, and
 * the terminal table, CSV and JSON outputs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "util/fs.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n == 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void fsdpc__bench_row_from_runs(fsdpc_bench_row *row, const fsdpc_bench_run *runs, int n_runs,
                                double peak_tflops) {
  int total = 0;
  for (int i = 0; i < n_runs; i++)
    total += runs[i].n_steps;
  double *st = malloc((size_t)(total ? total : 1) * sizeof(double));
  double *cs = malloc((size_t)(total ? total : 1) * sizeof(double));
  int k = 0;
  row->reserved = -1;
  for (int i = 0; i < n_runs && st && cs; i++) {
    const fsdpc_bench_run *r = &runs[i];
    for (int j = 0; j < r->n_steps; j++, k++) {
      st[k] = r->step_s[j];
      cs[k] = r->comm_s[j];
    }
    for (int c = 0; c < FSDPC_MEM_NCAT; c++)
      if (r->peak[c] > row->peak[c])
        row->peak[c] = r->peak[c];
    if (r->total_peak > row->total_peak)
      row->total_peak = r->total_peak;
    if (r->rss_peak > row->rss_peak)
      row->rss_peak = r->rss_peak;
    if (r->reserved > row->reserved)
      row->reserved = r->reserved;
    row->world = r->world;
    row->comm = r->comm;
    row->final_loss = r->final_loss;
    row->shard_params = r->shard_params;
    row->shard_grads = r->shard_grads;
    row->shard_optim = r->shard_optim;
  }
  row->repeats = n_runs;
  row->n_samples = k;
  row->step_min = row->step_max = NAN;
  for (int i = 0; i < k; i++) {
    if (!(st[i] >= row->step_min))
      row->step_min = st[i];
    if (!(st[i] <= row->step_max))
      row->step_max = st[i];
  }
  row->step_med = st ? median(st, k) : NAN;
  row->comm_s_med = cs ? median(cs, k) : NAN;
  free(st);
  free(cs);
  double tokens = n_runs ? runs[0].tokens_per_step : 0;
  row->tok_s = row->step_med > 0 ? tokens / row->step_med : NAN;
  row->tok_s_rank = row->world > 0 ? row->tok_s / row->world : NAN;
  row->tflops_rank = row->tok_s_rank * row->flops_per_token / 1e12;
  row->mfu = peak_tflops > 0 ? row->tflops_rank / peak_tflops : NAN;
}

/* ---- baseline ---- */

static double num(const cJSON *o, const char *k, double def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : def;
}
static const char *str(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void baseline_row(fsdpc_bench_row *r) {
  memset(r, 0, sizeof *r);
  r->ok = r->baseline = 1;
  r->reserved = r->rss_peak = -1;
  r->mfu = r->tflops_rank = r->comm_s_med = r->final_loss = NAN;
  r->step_min = r->step_max = NAN;
}

/* A row of bench/torch_fsdp2_baseline.py. */
static void torch_row(const cJSON *o, double peak_tflops, fsdpc_bench_row *r) {
  baseline_row(r);
  const char *strat = str(o, "strategy");
  snprintf(r->name, sizeof r->name, "torch %s%s bs%d", strat ? strat : "?",
           num(o, "ac", 0) ? " ac" : "", (int)num(o, "bs", 0));
  r->world = (int)num(o, "world", 1);
  r->step_med = num(o, "step_s", NAN);
  r->tok_s_rank = num(o, "tok_s_gpu", NAN);
  r->tok_s = r->tok_s_rank * r->world;
  r->tflops_rank = num(o, "tflops_gpu", NAN);
  r->mfu = peak_tflops > 0 ? r->tflops_rank / peak_tflops : NAN;
  r->total_peak = (int64_t)(num(o, "peak_alloc_gib", 0) * 1073741824.0);
  r->reserved = (int64_t)(num(o, "peak_reserved_gib", -1) * 1073741824.0);
  r->final_loss = num(o, "loss", NAN);
  snprintf(r->axes, sizeof r->axes, "torch FSDP2 (bench/torch_fsdp2_baseline.py)");
}

/* A row of another `fsdpc bench` JSON. */
static void fsdpc_row(const cJSON *o, fsdpc_bench_row *r) {
  baseline_row(r);
  snprintf(r->name, sizeof r->name, "%s", str(o, "name") ? str(o, "name") : "?");
  r->world = (int)num(o, "world", 1);
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step_s");
  r->step_med = num(st, "median", NAN);
  r->step_min = num(st, "min", NAN);
  r->step_max = num(st, "max", NAN);
  r->tok_s = num(o, "tok_s", NAN);
  r->tok_s_rank = num(o, "tok_s_per_rank", NAN);
  r->tflops_rank = num(o, "tflops_per_rank", NAN);
  r->mfu = num(o, "mfu", NAN);
  const cJSON *pk = cJSON_GetObjectItemCaseSensitive(o, "peak_bytes");
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    r->peak[c] = (int64_t)num(pk, fsdpc__mem_cat_name((fsdpc_mem_cat)c), 0);
  r->total_peak = (int64_t)num(pk, "total", 0);
  r->reserved = (int64_t)num(o, "reserved_bytes", -1);
  r->rss_peak = (int64_t)num(o, "host_rss_peak_bytes", -1);
  r->final_loss = num(o, "final_loss", NAN);
  snprintf(r->axes, sizeof r->axes, "fsdpc bench row");
}

static fsdpc_status add_row(fsdpc_bench_row **rows, int *n, int *cap, fsdpc_err *err) {
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 8;
    fsdpc_bench_row *r = realloc(*rows, (size_t)*cap * sizeof *r);
    if (!r)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    *rows = r;
  }
  (*n)++;
  return FSDPC_OK;
}

fsdpc_status fsdpc__bench_read_baseline(const char *path, double peak_tflops,
                                        fsdpc_bench_row **rows, int *n, fsdpc_err *err) {
  *rows = NULL;
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cannot open baseline %s: %s", path,
                       strerror(errno));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
  size_t got = text ? fread(text, 1, (size_t)len, f) : 0;
  fclose(f);
  if (!text)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reading %s", path);
  text[got] = '\0';
  int cap = 0;
  fsdpc_status st = FSDPC_OK;
  cJSON *doc = cJSON_Parse(text);
  const cJSON *list = doc ? cJSON_GetObjectItemCaseSensitive(doc, "rows") : NULL;
  if (cJSON_IsArray(list)) { /* fsdpc bench JSON */
    const cJSON *o;
    cJSON_ArrayForEach(o, list) {
      const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "ok");
      if (!cJSON_IsTrue(ok) || (st = add_row(rows, n, &cap, err)) != FSDPC_OK)
        continue;
      fsdpc_row(o, &(*rows)[*n - 1]);
    }
  } else { /* JSON lines from the PyTorch script ("RESULT {...}" is accepted) */
    int line_no = 0;
    for (char *line = strtok(text, "\n"); line && st == FSDPC_OK; line = strtok(NULL, "\n")) {
      line_no++;
      if (strncmp(line, "RESULT ", 7) == 0)
        line += 7;
      while (*line == ' ' || *line == '\t')
        line++;
      if (!*line)
        continue;
      cJSON *o = cJSON_Parse(line);
      if (!o || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "tok_s_gpu"))) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s:%d: not a bench JSON (with \"rows\") nor a JSON line of "
                         "torch_fsdp2_baseline.py (with \"tok_s_gpu\")",
                         path, line_no);
      } else if ((st = add_row(rows, n, &cap, err)) == FSDPC_OK) {
        torch_row(o, peak_tflops, &(*rows)[*n - 1]);
      }
      cJSON_Delete(o);
    }
  }
  cJSON_Delete(doc);
  free(text);
  if (st == FSDPC_OK && *n == 0)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "baseline %s has no rows", path);
  if (st != FSDPC_OK) {
    free(*rows);
    *rows = NULL;
    *n = 0;
  }
  return st;
}

/* ---- table ---- */

static double mib(int64_t b) {
  return (double)b / 1048576.0;
}

void fsdpc__bench_print_table(FILE *f, const fsdpc_bench_spec *s, const fsdpc_bench_row *rows,
                              int n) {
  fprintf(f, "\n%s: %d measured steps x %d repeats after %d warm-up steps, %d rank(s) per node\n",
          s->title[0] ? s->title : s->path, s->steps, s->repeats, s->warmup_steps,
          s->nproc_per_node);
  fprintf(f, "%-24s %6s %22s %10s %10s %10s %7s %9s %10s\n", "variant", "world",
          "step s median (min-max)", "tok/s", "tok/s/rank", "TFLOP/s/r", "MFU", "comm s",
          "final loss");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    char name[40];
    snprintf(name, sizeof name, "%s%.*s", r->baseline ? "[b] " : "", r->baseline ? 20 : 24,
             r->name);
    if (!r->ok) {
      fprintf(f, "%-24s FAILED: %s\n", name, r->reason);
      continue;
    }
    char st[40], mfu[16], cs[16];
    if (isnan(r->step_min))
      snprintf(st, sizeof st, "%.4f", r->step_med);
    else
      snprintf(st, sizeof st, "%.4f (%.4f-%.4f)", r->step_med, r->step_min, r->step_max);
    snprintf(mfu, sizeof mfu, isnan(r->mfu) ? "-" : "%.1f%%", 100 * r->mfu);
    snprintf(cs, sizeof cs, isnan(r->comm_s_med) ? "-" : "%.4f", r->comm_s_med);
    fprintf(f, "%-24s %6d %22s %10.0f %10.0f %10.4f %7s %9s %10.4f\n", name, r->world, st, r->tok_s,
            r->tok_s_rank, r->tflops_rank, mfu, cs, r->final_loss);
  }
  fprintf(f, "\nmemory per rank, MiB (max over ranks; predicted by the planner in brackets)\n");
  fprintf(f, "%-24s %8s %8s %8s %9s %8s %18s %9s %9s %9s %9s %9s\n", "variant", "params", "grads",
          "optim", "activ.", "comm", "total (planned)", "err %", "reserved", "host RSS", "AG/step",
          "RS+AR/st");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    if (!r->ok)
      continue;
    char name[40], tot[40], e[16] = "-", res[16] = "-", rss[16] = "-", ag[16] = "-", rs[16] = "-";
    snprintf(name, sizeof name, "%s%.*s", r->baseline ? "[b] " : "", r->baseline ? 20 : 24,
             r->name);
    if (r->have_plan) {
      snprintf(tot, sizeof tot, "%.2f (%.2f)", mib(r->total_peak), mib(r->plan.total_peak));
      snprintf(e, sizeof e, "%+.1f",
               100.0 * (double)(r->plan.total_peak - r->total_peak) /
                   (double)(r->total_peak ? r->total_peak : 1));
    } else {
      snprintf(tot, sizeof tot, "%.2f", mib(r->total_peak));
    }
    if (r->reserved >= 0)
      snprintf(res, sizeof res, "%.1f", mib(r->reserved));
    if (r->rss_peak >= 0)
      snprintf(rss, sizeof rss, "%.1f", mib(r->rss_peak));
    if (!r->baseline) {
      snprintf(ag, sizeof ag, "%.2f", mib((int64_t)r->comm.all_gather));
      snprintf(rs, sizeof rs, "%.2f", mib((int64_t)(r->comm.reduce_scatter + r->comm.all_reduce)));
    }
    char cat[5][16];
    static const int shown[5] = {FSDPC_MEM_PARAMS, FSDPC_MEM_GRADS, FSDPC_MEM_OPTIM,
                                 FSDPC_MEM_ACTIVATIONS, FSDPC_MEM_COMM};
    for (int k = 0; k < 5; k++)
      snprintf(cat[k], sizeof cat[k], r->baseline ? "-" : "%.2f", mib(r->peak[shown[k]]));
    fprintf(f, "%-24s %8s %8s %8s %9s %8s %18s %9s %9s %9s %9s %9s\n", name, cat[0], cat[1], cat[2],
            cat[3], cat[4], tot, e, res, rss, ag, rs);
  }
}

/* ---- CSV ---- */

static void csv_num(FILE *f, double v) {
  if (isnan(v))
    fputs(",", f);
  else
    fprintf(f, ",%.9g", v);
}

static void csv_text(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

fsdpc_status fsdpc__bench_write_csv(const char *path, const fsdpc_bench_row *rows, int n,
                                    fsdpc_err *err) {
  /* a private temporary file renamed into place (util/fs.h): never
   * written through a link planted in the output folder */
  fsdpc_out_file o;
  FILE *f;
  FSDPC_TRY(fsdpc__out_fopen(path, &o, &f, err));
  fprintf(f, "name,source,ok,reason,world,repeats,steps_measured,step_s_median,step_s_min,"
             "step_s_max,tok_s,tok_s_per_rank,flops_per_token,tflops_per_rank,mfu");
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    fprintf(f, ",peak_%s_bytes", fsdpc__mem_cat_name(c));
  fprintf(f, ",peak_total_bytes,reserved_bytes,host_rss_peak_bytes,all_gather_bytes_per_step,"
             "reduce_scatter_bytes_per_step,all_reduce_bytes_per_step,comm_s_per_step,"
             "final_loss,planned_params_bytes,planned_grads_bytes,planned_optim_bytes,"
             "planned_total_peak_bytes,axes\n");
  for (int i = 0; i < n; i++) {
    const fsdpc_bench_row *r = &rows[i];
    csv_text(f, r->name);
    fprintf(f, ",%s,%d,", r->baseline ? "baseline" : "fsdpc", r->ok);
    csv_text(f, r->ok ? "" : r->reason);
    fprintf(f, ",%d,%d,%d", r->world, r->repeats, r->n_samples);
    int show = r->ok;
    double nanv = NAN;
    csv_num(f, show ? r->step_med : nanv);
    csv_num(f, show ? r->step_min : nanv);
    csv_num(f, show ? r->step_max : nanv);
    csv_num(f, show ? r->tok_s : nanv);
    csv_num(f, show ? r->tok_s_rank : nanv);
    csv_num(f, show && r->flops_per_token > 0 ? r->flops_per_token : nanv);
    csv_num(f, show ? r->tflops_rank : nanv);
    csv_num(f, show ? r->mfu : nanv);
    for (int c = 0; c < FSDPC_MEM_NCAT; c++)
      csv_num(f, show && !r->baseline ? (double)r->peak[c] : nanv);
    csv_num(f, show ? (double)r->total_peak : nanv);
    csv_num(f, show && r->reserved >= 0 ? (double)r->reserved : nanv);
    csv_num(f, show && r->rss_peak >= 0 ? (double)r->rss_peak : nanv);
    csv_num(f, show && !r->baseline ? (double)r->comm.all_gather : nanv);
    csv_num(f, show && !r->baseline ? (double)r->comm.reduce_scatter : nanv);
    csv_num(f, show && !r->baseline ? (double)r->comm.all_reduce : nanv);
    csv_num(f, show ? r->comm_s_med : nanv);
    csv_num(f, show ? r->final_loss : nanv);
    csv_num(f, r->have_plan ? (double)r->plan.params : nanv);
    csv_num(f, r->have_plan ? (double)r->plan.grads : nanv);
    csv_num(f, r->have_plan ? (double)r->plan.optim : nanv);
    csv_num(f, r->have_plan ? (double)r->plan.total_peak : nanv);
    fputc(',', f);
    csv_text(f, r->axes);
    fputc('\n', f);
  }
  return fsdpc__out_fclose(f, &o, err);
}

/* ---- JSON ---- */

static void add_num(cJSON *o, const char *k, double v) {
  if (isnan(v))
    cJSON_AddNullToObject(o, k);
  else
    cJSON_AddNumberToObject(o, k, v);
}

static cJSON *row_json(const fsdpc_bench_row *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", r->name);
  cJSON_AddStringToObject(o, "source", r->baseline ? "baseline" : "fsdpc");
  cJSON_AddBoolToObject(o, "ok", r->ok);
  if (!r->ok)
    cJSON_AddStringToObject(o, "reason", r->reason);
  cJSON_AddStringToObject(o, "axes", r->axes);
  cJSON_AddNumberToObject(o, "world", r->world);
  if (r->ok) {
    cJSON_AddNumberToObject(o, "repeats", r->repeats);
    cJSON *st = cJSON_AddObjectToObject(o, "step_s");
    add_num(st, "median", r->step_med);
    add_num(st, "min", r->step_min);
    add_num(st, "max", r->step_max);
    cJSON_AddNumberToObject(st, "n", r->n_samples);
    add_num(o, "tok_s", r->tok_s);
    add_num(o, "tok_s_per_rank", r->tok_s_rank);
    add_num(o, "flops_per_token", r->flops_per_token > 0 ? r->flops_per_token : NAN);
    add_num(o, "tflops_per_rank", r->tflops_rank);
    add_num(o, "mfu", r->mfu);
    cJSON *pk = cJSON_AddObjectToObject(o, "peak_bytes");
    if (!r->baseline)
      for (int c = 0; c < FSDPC_MEM_NCAT; c++)
        cJSON_AddNumberToObject(pk, fsdpc__mem_cat_name(c), (double)r->peak[c]);
    cJSON_AddNumberToObject(pk, "total", (double)r->total_peak);
    add_num(o, "reserved_bytes", r->reserved >= 0 ? (double)r->reserved : NAN);
    add_num(o, "host_rss_peak_bytes", r->rss_peak >= 0 ? (double)r->rss_peak : NAN);
    if (!r->baseline) {
      cJSON *sh = cJSON_AddObjectToObject(o, "shard_bytes");
      cJSON_AddNumberToObject(sh, "params", (double)r->shard_params);
      cJSON_AddNumberToObject(sh, "grads", (double)r->shard_grads);
      cJSON_AddNumberToObject(sh, "optim", (double)r->shard_optim);
      cJSON *cb = cJSON_AddObjectToObject(o, "comm_bytes_per_step");
      cJSON_AddNumberToObject(cb, "all_gather", (double)r->comm.all_gather);
      cJSON_AddNumberToObject(cb, "reduce_scatter", (double)r->comm.reduce_scatter);
      cJSON_AddNumberToObject(cb, "all_reduce", (double)r->comm.all_reduce);
    }
    add_num(o, "comm_s_per_step", r->comm_s_med);
    add_num(o, "final_loss", r->final_loss);
  }
  if (r->have_plan) {
    cJSON *p = cJSON_AddObjectToObject(o, "planned");
    cJSON_AddNumberToObject(p, "params", (double)r->plan.params);
    cJSON_AddNumberToObject(p, "grads", (double)r->plan.grads);
    cJSON_AddNumberToObject(p, "optim", (double)r->plan.optim);
    cJSON_AddNumberToObject(p, "activations", (double)r->plan.activations);
    cJSON *pk = cJSON_AddObjectToObject(p, "peak_bytes");
    for (int c = 0; c < FSDPC_MEM_NCAT; c++)
      cJSON_AddNumberToObject(pk, fsdpc__mem_cat_name(c), (double)r->plan.peak[c]);
    cJSON_AddNumberToObject(pk, "total", (double)r->plan.total_peak);
    cJSON_AddNumberToObject(p, "reserved_bytes", (double)r->plan.reserved);
    cJSON_AddNumberToObject(p, "host_pinned_bytes", (double)r->plan.host_bytes);
    cJSON_AddNumberToObject(p, "host_pageable_bytes", (double)r->plan.host_pageable);
    cJSON_AddNumberToObject(p, "host_total_bytes", (double)r->plan.host_total);
    cJSON *cb = cJSON_AddObjectToObject(p, "comm_bytes_per_step");
    cJSON_AddNumberToObject(cb, "all_gather", (double)r->plan.comm.all_gather);
    cJSON_AddNumberToObject(cb, "reduce_scatter", (double)r->plan.comm.reduce_scatter);
    cJSON_AddNumberToObject(cb, "all_reduce", (double)r->plan.comm.all_reduce);
  }
  return o;
}

fsdpc_status fsdpc__bench_write_json(const char *path, const fsdpc_bench_spec *s,
                                     const fsdpc_bench_row *rows, int n, fsdpc_err *err) {
  cJSON *doc = cJSON_CreateObject();
  cJSON_AddStringToObject(doc, "bench", s->path);
  cJSON_AddStringToObject(doc, "title", s->title);
  cJSON_AddStringToObject(doc, "base", s->base);
  cJSON_AddNumberToObject(doc, "nproc_per_node", s->nproc_per_node);
  cJSON_AddNumberToObject(doc, "warmup_steps", s->warmup_steps);
  cJSON_AddNumberToObject(doc, "steps", s->steps);
  cJSON_AddNumberToObject(doc, "repeats", s->repeats);
  add_num(doc, "peak_tflops", s->peak_tflops > 0 ? s->peak_tflops : NAN);
  cJSON_AddStringToObject(doc, "flops_formula",
                          "per token: 6 x (params - vocab x hidden) + 12 x layers x hidden x seq "
                          "(torchtitan)");
  cJSON *arr = cJSON_AddArrayToObject(doc, "rows");
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(arr, row_json(&rows[i]));
  char *text = cJSON_Print(doc);
  cJSON_Delete(doc);
  fsdpc_out_file o;
  FILE *f = NULL;
  fsdpc_status st =
      text ? fsdpc__out_fopen(path, &o, &f, err)
           : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: out of memory", path);
  if (st == FSDPC_OK) {
    fprintf(f, "%s\n", text);
    st = fsdpc__out_fclose(f, &o, err);
  }
  cJSON_free(text);
  return st;
}
