/* The bench as a whole (fsdpc_bench, `fsdpc bench`): the file and the
 * caller's settings, the planner's prediction per variant, the runs
 * interleaved across variants, then the table, CSV, JSON and chart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "config/config.h"
#include "util/fs.h"

typedef struct variant_state {
  fsdpc_bench_row row;
  fsdpc_bench_run *runs;
  int n_runs;
  int failed;
} variant_state;

typedef struct drive {
  const fsdpc_bench_args *a;
  fsdpc_bench_spec *s;
  variant_state *vs;
  FILE *report, *progress;
  char out_dir[4096], exe[4096];
  fsdpc_bench_row *base_rows; /* read from the baseline file before any run */
  int n_base;
} drive;

static void slug(const char *name, char *out, size_t cap) {
  size_t o = 0;
  for (; *name && o + 1 < cap && o < 48; name++)
    out[o++] = ((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') ||
                (*name >= '0' && *name <= '9') || *name == '-')
                   ? *name
                   : '_';
  out[o] = '\0';
}

/* Overrides of one run: the bench's set, the variant's axes, then what the
 * bench itself needs (step count, per-step metrics, its own log.dir). */
static const char **run_overrides(const fsdpc_bench_spec *s, const fsdpc_bench_variant *v,
                                  char forced[2][4200], const char *log_dir, int *n) {
  const char **o = calloc((size_t)(s->n_set + v->n_overrides + 8), sizeof(char *));
  if (!o)
    return NULL;
  *n = 0;
  for (int i = 0; i < s->n_set; i++)
    o[(*n)++] = s->set[i];
  for (int i = 0; i < v->n_overrides; i++)
    o[(*n)++] = v->overrides[i];
  snprintf(forced[0], 4200, "train.max_steps=%d", s->warmup_steps + s->steps);
  snprintf(forced[1], 4200, "log.dir=%s", log_dir);
  o[(*n)++] = forced[0];
  o[(*n)++] = forced[1];
  o[(*n)++] = "train.log_every=1";
  o[(*n)++] = "log.progress=off";
  o[(*n)++] = "train.generate_prompts=[]"; /* generation is not part of a step */
  return o;
}

/* Loads the variant's config to check it and plan its memory. A config
 * that does not load is the row's failure reason. */
static void plan_variant(drive *d, const fsdpc_bench_variant *v, variant_state *vs) {
  const fsdpc_bench_spec *s = d->s;
  char forced[2][4200];
  int n = 0;
  const char **ovr = run_overrides(s, v, forced, "/tmp", &n);
  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  fsdpc_plan_ctx *pc = NULL;
  if (!ovr)
    return;
  if (fsdpc__config_load(s->base, ovr, n, &cfg, &err) != FSDPC_OK) {
    vs->failed = 1;
    snprintf(vs->row.reason, sizeof vs->row.reason, "%s", err.msg);
  } else if (fsdpc__plan_ctx_create(cfg, &pc, &err) != FSDPC_OK ||
             fsdpc__plan_config(pc, NULL, s->nproc_per_node, s->nproc_per_node, &vs->row.plan,
                                &err) != FSDPC_OK) {
    fprintf(d->progress, "bench: %s: no memory plan: %s\n", v->name, err.msg);
  } else {
    vs->row.have_plan = 1;
    vs->row.flops_per_token =
        fsdpc__plan_flops_per_token(fsdpc__plan_shape(pc), (int)cfg->data.seq_len);
  }
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
  free(ovr);
}

/* One run of variant v, repeat rep (k of total). */
static fsdpc_status run_one(drive *d, int v, int rep, int k, int total, fsdpc_err *err) {
  const fsdpc_bench_spec *s = d->s;
  const fsdpc_bench_variant *var = &s->variants[v];
  variant_state *vs = &d->vs[v];
  char sl[64], dir[4096], forced[2][4200];
  slug(var->name, sl, sizeof sl);
  snprintf(dir, sizeof dir, "%.3000s/runs/%02d-%s-r%d", d->out_dir, v, sl, rep);
  int n = 0;
  const char **ovr = run_overrides(s, var, forced, dir, &n);
  if (!ovr)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_bench_run_opts ro = {.exe = d->exe,
                             .config = s->base,
                             .overrides = ovr,
                             .n_overrides = n,
                             .nproc_per_node = s->nproc_per_node,
                             .warmup_steps = s->warmup_steps,
                             .timeout_s = s->timeout_s,
                             .log_dir = dir};
  fsdpc_bench_run *r = &vs->runs[vs->n_runs];
  fprintf(d->progress, "bench: [%d/%d] %s (repeat %d/%d) ... ", k, total, var->name, rep + 1,
          s->repeats);
  fflush(d->progress);
  fsdpc_status st = fsdpc__bench_run(&ro, r, err);
  free(ovr);
  if (st != FSDPC_OK) {
    fprintf(d->progress, "\n");
    return st;
  }
  if (r->ok) {
    fprintf(d->progress, "%.1f s\n", r->wall_s);
    vs->n_runs++;
  } else {
    /* A failing variant fails again: no more repeats of it. */
    fprintf(d->progress, "failed: %s\n", r->reason);
    vs->failed = 1;
    snprintf(vs->row.reason, sizeof vs->row.reason, "%s", r->reason);
    fsdpc__bench_run_free(r);
  }
  return FSDPC_OK;
}

static fsdpc_status run_all(drive *d, fsdpc_err *err) {
  const fsdpc_bench_spec *s = d->s;
  int total = s->repeats * s->n_variants, k = 0;
  for (int rep = 0; rep < s->repeats; rep++)
    for (int v = 0; v < s->n_variants; v++) {
      k++;
      if (!d->vs[v].failed)
        FSDPC_TRY(run_one(d, v, rep, k, total, err));
    }
  return FSDPC_OK;
}

/* The file, the caller's settings over it, and where results go. */
static fsdpc_status setup(drive *d, fsdpc_err *err) {
  const fsdpc_bench_args *a = d->a;
  FSDPC_TRY(fsdpc__bench_spec_load(a->path, &d->s, err));
  fsdpc_bench_spec *s = d->s;
  for (int i = 0; i < a->n_sets; i++)
    FSDPC_TRY(fsdpc__bench_spec_add_set(s, a->sets[i], err));
  if (a->repeats > 0)
    s->repeats = a->repeats;
  if (a->steps > 0)
    s->steps = a->steps;
  if (a->warmup >= 0)
    s->warmup_steps = a->warmup;
  if (a->nproc_per_node > 0)
    s->nproc_per_node = a->nproc_per_node;
  if (a->timeout_s > 0)
    s->timeout_s = a->timeout_s;
  if (a->out_dir) {
    snprintf(d->out_dir, sizeof d->out_dir, "%s", a->out_dir);
  } else if (s->out_dir[0]) {
    snprintf(d->out_dir, sizeof d->out_dir, "%s", s->out_dir);
  } else {
    char stem[256];
    const char *b = strrchr(a->path, '/');
    snprintf(stem, sizeof stem, "%s", b ? b + 1 : a->path);
    char *dot = strrchr(stem, '.');
    if (dot)
      *dot = '\0';
    snprintf(d->out_dir, sizeof d->out_dir, "out/bench/%s", stem);
  }
  if (a->exe) {
    snprintf(d->exe, sizeof d->exe, "%s", a->exe);
  } else {
    ssize_t el = readlink("/proc/self/exe", d->exe, sizeof d->exe - 1);
    if (el <= 0)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                         "cannot find the fsdpc executable (/proc/self/exe); give it as exe");
    d->exe[el] = '\0';
  }
  const char *baseline = a->baseline ? a->baseline : s->baseline[0] ? s->baseline : NULL;
  if (baseline)
    FSDPC_TRY(fsdpc__bench_read_baseline(baseline, s->peak_tflops, &d->base_rows, &d->n_base, err));
  if (!(d->vs = calloc((size_t)s->n_variants, sizeof *d->vs)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int v = 0; v < s->n_variants; v++) {
    variant_state *x = &d->vs[v];
    snprintf(x->row.name, sizeof x->row.name, "%s", s->variants[v].name);
    size_t len = 0;
    for (int i = 0; i < s->variants[v].n_overrides && len < sizeof x->row.axes; i++)
      len += (size_t)snprintf(x->row.axes + len, sizeof x->row.axes - len, "%s%s", i ? " " : "",
                              s->variants[v].overrides[i]);
    plan_variant(d, &s->variants[v], x);
    if (!(x->runs = calloc((size_t)s->repeats, sizeof *x->runs)))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  return FSDPC_OK;
}

static void dry_run(drive *d) {
  const fsdpc_bench_spec *s = d->s;
  for (int v = 0; v < s->n_variants; v++) {
    const variant_state *x = &d->vs[v];
    fprintf(d->report, "%-28s %s%s%s\n", x->row.name, x->row.axes, x->failed ? "  FAILS: " : "",
            x->failed ? x->row.reason : "");
  }
  for (int v = 0; v < s->n_variants; v++) {
    const fsdpc_bench_row *r = &d->vs[v].row;
    if (r->have_plan)
      fprintf(d->report,
              "  %-26s planned peak %.2f MiB (params %.2f, grads %.2f, optim %.2f MiB shards)\n",
              r->name, r->plan.total_peak / 1048576.0, r->plan.params / 1048576.0,
              r->plan.grads / 1048576.0, r->plan.optim / 1048576.0);
  }
}

/* The rows (variants, then baseline rows) and every output file. */
static fsdpc_status write_results(drive *d, int32_t *failed, fsdpc_err *err) {
  const fsdpc_bench_spec *s = d->s;
  int n_rows = s->n_variants + d->n_base;
  fsdpc_bench_row *rows = calloc((size_t)n_rows, sizeof *rows);
  if (!rows)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int v = 0; v < s->n_variants; v++) {
    fsdpc_bench_row *r = &rows[v];
    *r = d->vs[v].row;
    r->ok = !d->vs[v].failed && d->vs[v].n_runs > 0;
    r->world = s->nproc_per_node;
    if (r->ok)
      fsdpc__bench_row_from_runs(r, d->vs[v].runs, d->vs[v].n_runs, s->peak_tflops);
    *failed += !r->ok;
  }
  for (int i = 0; i < d->n_base; i++)
    rows[s->n_variants + i] = d->base_rows[i];
  fsdpc__bench_print_table(d->report, s, rows, n_rows);
  char p1[4200], p2[4200], p3[4200], p4[4200];
  snprintf(p1, sizeof p1, "%s/bench.csv", d->out_dir);
  snprintf(p2, sizeof p2, "%s/bench.json", d->out_dir);
  snprintf(p3, sizeof p3, "%s/bench.svg", d->out_dir);
  snprintf(p4, sizeof p4, "%s/bench.png", d->out_dir);
  int png = 0;
  fsdpc_status st = fsdpc__bench_write_csv(p1, rows, n_rows, err);
  if (st == FSDPC_OK)
    st = fsdpc__bench_write_json(p2, s, rows, n_rows, err);
  if (st == FSDPC_OK)
    st = fsdpc__bench_chart(p3, p4, s->title[0] ? s->title : s->path, rows, n_rows, &png, err);
  if (st == FSDPC_OK)
    fprintf(d->report, "\nwrote %s, %s%s%s%s%s\n", p1, p2,
            png ? ", " : " (no chart: built without cairo)", png ? p3 : "", png ? ", " : "",
            png ? p4 : "");
  /* A bench with a failed variant is a failed bench, after its table and
   * chart are written. */
  for (int v = 0; st == FSDPC_OK && v < s->n_variants; v++)
    if (!rows[v].ok)
      fprintf(d->progress, "bench: variant %s failed: %s\n", rows[v].name, rows[v].reason);
  free(rows);
  return st;
}

fsdpc_status fsdpc__bench_drive(const fsdpc_bench_args *a, int32_t *failed, fsdpc_err *err) {
  drive d = {.a = a,
             .report = a->report ? a->report : stdout,
             .progress = a->progress ? a->progress : stderr};
  int32_t nf = 0;
  fsdpc_status st = setup(&d, err);
  if (st == FSDPC_OK && a->dry_run)
    dry_run(&d);
  else if (st == FSDPC_OK && (st = fsdpc__mkdir_p(d.out_dir, err)) == FSDPC_OK &&
           (st = run_all(&d, err)) == FSDPC_OK)
    st = write_results(&d, &nf, err);
  for (int v = 0; d.vs && v < d.s->n_variants; v++) {
    for (int i = 0; i < d.vs[v].n_runs; i++)
      fsdpc__bench_run_free(&d.vs[v].runs[i]);
    free(d.vs[v].runs);
  }
  free(d.vs);
  free(d.base_rows);
  fsdpc__bench_spec_destroy(d.s);
  if (failed)
    *failed = nf;
  return st;
}
