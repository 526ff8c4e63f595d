/* fsdpc bench BENCH.yaml [key=value ...] [options]
 *
 * Runs every variant of the bench file's matrix in fresh `fsdpc train`
 * processes, repeats interleaved across variants, and writes a table,
 * bench.csv, bench.json and bench.svg (+ bench.png with cairo) with the
 * planner's prediction beside each measurement. See docs/bench.md. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "commands.h"
#include "config/config.h"
#include "util/fs.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: fsdpc bench BENCH.yaml [section.key=value ...] [options]\n"
          "\n"
          "Runs each variant of the bench file's matrix (fresh processes, warm-up excluded,\n"
          "repeats interleaved A B C A B C ...) and writes a table, bench.csv, bench.json and\n"
          "bench.svg (bench.png too when built with cairo). Overrides apply to every variant.\n"
          "\n"
          "  --out DIR            output folder (default: the file's `out`, or out/bench/NAME)\n"
          "  --baseline FILE      rows to draw alongside: a bench.json, or JSON lines of\n"
          "                       bench/torch_fsdp2_baseline.py\n"
          "  --repeats R  --steps N  --warmup W  --nproc-per-node P  --timeout S\n"
          "                       override the bench file's values\n"
          "  --dry-run            list the variants and the planner's prediction; run nothing\n");
}

typedef struct variant_state {
  fsdpc_bench_row row;
  fsdpc_bench_run *runs;
  int n_runs;
  int failed;
} variant_state;

static int int_flag(const char *flag, const char *v, int lo, int *out) {
  char *end;
  errno = 0;
  long n = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || *end || n < lo || n > 1000000) {
    fprintf(stderr, "fsdpc bench: %s needs an integer >= %d, got '%s'\n", flag, lo, v ? v : "");
    return 0;
  }
  *out = (int)n;
  return 1;
}

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
                                  char forced[4][4200], const char *log_dir, int *n) {
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
static void plan_variant(const fsdpc_bench_spec *s, const fsdpc_bench_variant *v,
                         variant_state *vs) {
  char forced[4][4200];
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
    fprintf(stderr, "bench: %s: no memory plan: %s\n", v->name, err.msg);
  } else {
    vs->row.have_plan = 1;
    vs->row.flops_per_token =
        fsdpc__plan_flops_per_token(fsdpc__plan_shape(pc), (int)cfg->data.seq_len);
  }
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
  free(ovr);
}

static int run_all(const fsdpc_bench_spec *s, const char *out_dir, const char *exe,
                   variant_state *vs) {
  int total = s->repeats * s->n_variants, k = 0;
  for (int rep = 0; rep < s->repeats; rep++)
    for (int v = 0; v < s->n_variants; v++) {
      k++;
      const fsdpc_bench_variant *var = &s->variants[v];
      if (vs[v].failed)
        continue;
      char sl[64], dir[4096], forced[4][4200];
      slug(var->name, sl, sizeof sl);
      snprintf(dir, sizeof dir, "%.3000s/runs/%02d-%s-r%d", out_dir, v, sl, rep);
      int n = 0;
      const char **ovr = run_overrides(s, var, forced, dir, &n);
      if (!ovr)
        return 0;
      fsdpc_bench_run_opts ro = {.exe = exe,
                                 .config = s->base,
                                 .overrides = ovr,
                                 .n_overrides = n,
                                 .nproc_per_node = s->nproc_per_node,
                                 .warmup_steps = s->warmup_steps,
                                 .timeout_s = s->timeout_s,
                                 .log_dir = dir};
      fsdpc_bench_run *r = &vs[v].runs[vs[v].n_runs];
      fsdpc_err err = {0};
      fprintf(stderr, "bench: [%d/%d] %s (repeat %d/%d) ... ", k, total, var->name, rep + 1,
              s->repeats);
      fflush(stderr);
      fsdpc_status st = fsdpc__bench_run(&ro, r, &err);
      free(ovr);
      if (st != FSDPC_OK) {
        fprintf(stderr, "\nfsdpc bench: %s\n", err.msg);
        return 0;
      }
      if (r->ok) {
        fprintf(stderr, "%.1f s\n", r->wall_s);
        vs[v].n_runs++;
      } else {
        /* A failing variant fails again: no more repeats of it. */
        fprintf(stderr, "failed: %s\n", r->reason);
        vs[v].failed = 1;
        snprintf(vs[v].row.reason, sizeof vs[v].row.reason, "%s", r->reason);
        fsdpc__bench_run_free(r);
      }
    }
  return 1;
}

int fsdpc__cmd_bench(int argc, char **argv) {
  const char *path = NULL, *out_opt = NULL, *baseline_opt = NULL;
  int repeats = -1, steps = -1, warmup = -1, nproc = -1, timeout = -1, dry = 0;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
  fsdpc_err err = {0};
  fsdpc_bench_spec *s = NULL;
  const char **sets = calloc((size_t)argc + 1, sizeof(char *));
  int n_sets = 0;
  if (!sets)
    return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (strcmp(a, "--out") == 0 || strcmp(a, "--baseline") == 0) {
      if (!val) {
        fprintf(stderr, "fsdpc bench: %s needs a value\n", a);
        ok = 0;
      } else {
        *(a[2] == 'o' ? &out_opt : &baseline_opt) = val;
        i++;
      }
    } else if (strcmp(a, "--repeats") == 0)
      ok = int_flag(a, val, 1, &repeats), i++;
    else if (strcmp(a, "--steps") == 0)
      ok = int_flag(a, val, 1, &steps), i++;
    else if (strcmp(a, "--warmup") == 0)
      ok = int_flag(a, val, 0, &warmup), i++;
    else if (strcmp(a, "--nproc-per-node") == 0)
      ok = int_flag(a, val, 1, &nproc), i++;
    else if (strcmp(a, "--timeout") == 0)
      ok = int_flag(a, val, 1, &timeout), i++;
    else if (strcmp(a, "--dry-run") == 0)
      dry = 1;
    else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "fsdpc bench: unknown option '%s' (`fsdpc bench --help`)\n", a);
      ok = 0;
    } else if (!path)
      path = a;
    else
      sets[n_sets++] = a;
    if (!ok) {
      free(sets);
      return 2;
    }
  }
  if (!path) {
    usage(stderr);
    free(sets);
    return 2;
  }
  if (fsdpc__bench_spec_load(path, &s, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc bench: %s\n", err.msg);
    free(sets);
    return 1;
  }
  for (int i = 0; i < n_sets; i++)
    if (fsdpc__bench_spec_add_set(s, sets[i], &err) != FSDPC_OK) {
      fprintf(stderr, "fsdpc bench: %s\n", err.msg);
      free(sets);
      fsdpc__bench_spec_destroy(s);
      return 2;
    }
  free(sets);
  if (repeats > 0)
    s->repeats = repeats;
  if (steps > 0)
    s->steps = steps;
  if (warmup >= 0)
    s->warmup_steps = warmup;
  if (nproc > 0)
    s->nproc_per_node = nproc;
  if (timeout > 0)
    s->timeout_s = timeout;

  int code = 1, n_base = 0, n_rows = 0;
  fsdpc_bench_row *base_rows = NULL, *rows = NULL;
  variant_state *vs = calloc((size_t)s->n_variants, sizeof *vs);
  char out_dir[4096], exe[4096], p1[4200], p2[4200], p3[4200], p4[4200];
  if (!vs)
    goto done;
  if (out_opt)
    snprintf(out_dir, sizeof out_dir, "%s", out_opt);
  else if (s->out_dir[0])
    snprintf(out_dir, sizeof out_dir, "%s", s->out_dir);
  else {
    char stem[256];
    const char *b = strrchr(path, '/');
    snprintf(stem, sizeof stem, "%s", b ? b + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot)
      *dot = '\0';
    snprintf(out_dir, sizeof out_dir, "out/bench/%s", stem);
  }
  const char *baseline = baseline_opt ? baseline_opt : s->baseline[0] ? s->baseline : NULL;
  if (baseline &&
      fsdpc__bench_read_baseline(baseline, s->peak_tflops, &base_rows, &n_base, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc bench: %s\n", err.msg);
    goto done;
  }
  ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (el <= 0) {
    fprintf(stderr, "fsdpc bench: cannot find the fsdpc executable (/proc/self/exe)\n");
    goto done;
  }
  exe[el] = '\0';

  for (int v = 0; v < s->n_variants; v++) {
    variant_state *x = &vs[v];
    snprintf(x->row.name, sizeof x->row.name, "%s", s->variants[v].name);
    size_t len = 0;
    for (int i = 0; i < s->variants[v].n_overrides && len < sizeof x->row.axes; i++)
      len += (size_t)snprintf(x->row.axes + len, sizeof x->row.axes - len, "%s%s", i ? " " : "",
                              s->variants[v].overrides[i]);
    plan_variant(s, &s->variants[v], x);
    if (!(x->runs = calloc((size_t)s->repeats, sizeof *x->runs)))
      goto done;
    if (dry)
      printf("%-28s %s%s%s\n", x->row.name, x->row.axes, x->failed ? "  FAILS: " : "",
             x->failed ? x->row.reason : "");
  }
  if (dry) {
    for (int v = 0; v < s->n_variants; v++)
      if (vs[v].row.have_plan)
        printf("  %-26s planned peak %.2f MiB (params %.2f, grads %.2f, optim %.2f MiB shards)\n",
               vs[v].row.name, vs[v].row.plan.total_peak / 1048576.0,
               vs[v].row.plan.params / 1048576.0, vs[v].row.plan.grads / 1048576.0,
               vs[v].row.plan.optim / 1048576.0);
    code = 0;
    goto done;
  }
  if (fsdpc__mkdir_p(out_dir, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc bench: %s\n", err.msg);
    goto done;
  }
  if (!run_all(s, out_dir, exe, vs))
    goto done;

  n_rows = s->n_variants + n_base;
  if (!(rows = calloc((size_t)n_rows, sizeof *rows)))
    goto done;
  for (int v = 0; v < s->n_variants; v++) {
    fsdpc_bench_row *r = &rows[v];
    *r = vs[v].row;
    r->ok = !vs[v].failed && vs[v].n_runs > 0;
    r->world = s->nproc_per_node;
    if (r->ok)
      fsdpc__bench_row_from_runs(r, vs[v].runs, vs[v].n_runs, s->peak_tflops);
  }
  for (int i = 0; i < n_base; i++)
    rows[s->n_variants + i] = base_rows[i];
  fsdpc__bench_print_table(stdout, s, rows, n_rows);
  snprintf(p1, sizeof p1, "%s/bench.csv", out_dir);
  snprintf(p2, sizeof p2, "%s/bench.json", out_dir);
  snprintf(p3, sizeof p3, "%s/bench.svg", out_dir);
  snprintf(p4, sizeof p4, "%s/bench.png", out_dir);
  int png = 0;
  if (fsdpc__bench_write_csv(p1, rows, n_rows, &err) != FSDPC_OK ||
      fsdpc__bench_write_json(p2, s, rows, n_rows, &err) != FSDPC_OK ||
      fsdpc__bench_chart(p3, p4, s->title[0] ? s->title : s->path, rows, n_rows, &png, &err) !=
          FSDPC_OK) {
    fprintf(stderr, "fsdpc bench: %s\n", err.msg);
    goto done;
  }
  printf("\nwrote %s, %s%s%s%s%s\n", p1, p2, png ? ", " : " (no chart: built without cairo)",
         png ? p3 : "", png ? ", " : "", png ? p4 : "");
  code = 0;
  /* A bench with a failed variant is a failed bench (exit 1), after its
   * table and chart are written. */
  for (int v = 0; v < s->n_variants; v++)
    if (!rows[v].ok) {
      fprintf(stderr, "fsdpc bench: variant %s failed: %s\n", rows[v].name, rows[v].reason);
      code = 1;
    }
done:
  for (int v = 0; vs && v < s->n_variants; v++) {
    for (int i = 0; i < vs[v].n_runs; i++)
      fsdpc__bench_run_free(&vs[v].runs[i]);
    free(vs[v].runs);
  }
  free(vs);
  free(rows);
  free(base_rows);
  fsdpc__bench_spec_destroy(s);
  return code;
}
