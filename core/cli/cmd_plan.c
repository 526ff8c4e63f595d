/* fsdpc plan CFG [key=value ...] [--world N] [--nproc-per-node N] [--gpu-mem GiB]
 *                [--host-mem GiB] [--json]
 *
 * Predicts per-rank memory by category for each sharding strategy, with and
 * without activation checkpointing (and, on the GPU path, with optimizer-
 * state offload and full CPU offload), the per-rank host memory (pinned and
 * pageable) beside it, and says which variants fit a given device memory
 * and the machine's host memory (fsdpc_memplan_*). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc plan CFG.yaml [section.key=value ...] [--world N] [--nproc-per-node N]\n"
    "                  [--gpu-mem GiB] [--host-mem GiB] [--json]\n"
    "\n"
    "Predicts per-rank memory (params, grads, optimizer, activations, comm buffers,\n"
    "total peak) for FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and HYBRID_SHARD, with and\n"
    "without fsdp.activation_checkpointing (and, when train.device is cuda, with\n"
    "fsdp.offload.optimizer ('optim') and fsdp.cpu_offload ('full')), and the\n"
    "per-rank host memory (pinned + pageable + runtime). '*' marks the config's\n"
    "own variant.\n"
    "\n"
    "  --world N            total ranks (default 1)\n"
    "  --nproc-per-node N   ranks per machine (HYBRID_SHARD's default group; default N)\n"
    "  --gpu-mem GiB        device memory per rank: adds a 'fits' column\n"
    "  --host-mem GiB       host memory per machine (default: not judged; the plan\n"
    "                       says so); a variant whose host memory per rank x ranks\n"
    "                       per node exceeds it does not fit\n"
    "  --json               print JSON instead of the table\n";

enum { O_WORLD = 256, O_NPROC, O_GPU_MEM, O_HOST_MEM, O_JSON };
static const cli_opt opts[] = {{"world", O_WORLD, "N"},       {"nproc-per-node", O_NPROC, "N"},
                               {"gpu-mem", O_GPU_MEM, "GiB"}, {"host-mem", O_HOST_MEM, "GiB"},
                               {"json", O_JSON, NULL},        {0}};
const cli_cmd fsdpc__plan_cmd = {"plan", help, opts};

typedef struct plan_args {
  const char *cfg;
  const char **ovr;
  int n_ovr, json;
  int32_t world, nproc;
  double gpu_gib, host_gib;
} plan_args;

static double mib(int64_t b) {
  return (double)b / 1048576.0;
}

/* This machine's MemTotal in bytes, 0 when unknown. */
static int64_t mem_total(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  long long kib = 0;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemTotal: %lld kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return (int64_t)kib * 1024;
}

static int plan_arg(void *ctx, int id, const char *v) {
  const cli_cmd *cmd = &fsdpc__plan_cmd;
  plan_args *a = ctx;
  switch (id) {
  case O_WORLD:
    return cli_i32(cmd, "world", v, 1, 1 << 20, &a->world);
  case O_NPROC:
    return cli_i32(cmd, "nproc-per-node", v, 1, 1 << 20, &a->nproc);
  case O_GPU_MEM:
    return cli_double(cmd, "gpu-mem", v, 0, 1e9, 1, &a->gpu_gib);
  case O_HOST_MEM:
    return cli_double(cmd, "host-mem", v, 0, 1e9, 1, &a->host_gib);
  case O_JSON:
    return (a->json = 1);
  default:
    if (!a->cfg)
      a->cfg = v;
    else
      a->ovr[a->n_ovr++] = v;
    return 1;
  }
}

/* -1 to go on, else the exit code. */
static int parse(int argc, char **argv, plan_args *a) {
  const cli_cmd *cmd = &fsdpc__plan_cmd;
  int rc = cli_parse(cmd, argc, argv, plan_arg, a);
  if (rc < 0 && !a->cfg)
    rc = cli_usage_error(cmd, "missing the config file");
  if (rc < 0 && a->nproc == 0)
    a->nproc = a->world;
  if (rc < 0 && a->world % a->nproc != 0)
    rc = cli_usage_error(cmd, "--world %d is not a multiple of --nproc-per-node %d", a->world,
                         a->nproc);
  return rc;
}

static cJSON *row_json(const fsdpc_memplan_row *m, int fits_given, int dev_ok, int host_ok,
                       int64_t host_limit) {
  cJSON *o = cJSON_CreateObject();
  int ck = strcmp(m->checkpointing, "off") != 0;
  cJSON_AddStringToObject(o, "strategy", m->strategy_name);
  cJSON_AddBoolToObject(o, "activation_checkpointing", ck);
  if (ck)
    cJSON_AddStringToObject(o, "activation_checkpointing_policy", m->checkpointing);
  cJSON_AddBoolToObject(o, "cpu_offload", strcmp(m->offload, "full") == 0);
  cJSON_AddBoolToObject(o, "offload_optimizer", strcmp(m->offload, "optim") == 0);
  cJSON_AddStringToObject(o, "offload", m->offload);
  cJSON_AddBoolToObject(o, "config", m->is_config);
  cJSON_AddNumberToObject(o, "shard_size", m->shard_size);
  cJSON_AddNumberToObject(o, "replica_size", m->replica_size);
  cJSON_AddNumberToObject(o, "params_shard_bytes", (double)m->params);
  cJSON_AddNumberToObject(o, "grads_shard_bytes", (double)m->grads);
  cJSON_AddNumberToObject(o, "optim_bytes", (double)m->optim);
  cJSON_AddNumberToObject(o, "activations_bytes", (double)m->activations);
  cJSON *pk = cJSON_AddObjectToObject(o, "peak_bytes");
  for (int c = 0; c < FSDPC_MEM_CATEGORY_COUNT; c++)
    cJSON_AddNumberToObject(pk, fsdpc_mem_category_name(c), (double)m->peak[c]);
  cJSON_AddNumberToObject(pk, "total", (double)m->total_peak);
  /* where the total peaks: each category then, and the step's action */
  cJSON *at = cJSON_AddObjectToObject(o, "at_peak");
  for (int c = 0; c < FSDPC_MEM_CATEGORY_COUNT; c++)
    cJSON_AddNumberToObject(at, fsdpc_mem_category_name(c), (double)m->at_peak[c]);
  cJSON_AddStringToObject(at, "pass", m->peak_pass ? m->peak_pass : "");
  cJSON_AddStringToObject(at, "action", m->peak_action ? m->peak_action : "");
  cJSON_AddNumberToObject(at, "arg", m->peak_arg);
  cJSON_AddNumberToObject(o, "host_bytes", (double)m->host_pinned);
  cJSON_AddNumberToObject(o, "host_pinned_bytes", (double)m->host_pinned);
  cJSON_AddNumberToObject(o, "host_pageable_bytes", (double)m->host_pageable);
  cJSON_AddNumberToObject(o, "host_runtime_bytes", (double)m->host_runtime);
  cJSON_AddNumberToObject(o, "host_total_bytes", (double)m->host_total);
  cJSON_AddNumberToObject(o, "reserved_bytes", (double)m->reserved);
  cJSON_AddNumberToObject(o, "arena_bytes", (double)m->arena);
  cJSON_AddNumberToObject(o, "arena_shards_bytes", (double)m->arena_shards);
  cJSON_AddNumberToObject(o, "arena_activations_bytes", (double)m->arena_activations);
  cJSON_AddNumberToObject(o, "arena_transients_bytes", (double)m->arena_transients);
  cJSON_AddNumberToObject(o, "late_bytes", (double)m->late);
  if (fits_given)
    cJSON_AddBoolToObject(o, "fits", dev_ok && host_ok);
  cJSON_AddBoolToObject(o, "fits_device", dev_ok);
  cJSON_AddBoolToObject(o, "fits_host", host_ok);
  /* 0 and "none": no --host-mem, the host figure was not judged */
  cJSON_AddNumberToObject(o, "host_limit_bytes", (double)host_limit);
  cJSON_AddStringToObject(o, "host_limit_source", host_limit ? "--host-mem" : "none");
  return o;
}

static void print_head(const plan_args *a, const fsdpc_memplan_info *in, int64_t host_limit) {
  int cuda = in->device == FSDPC_DEVICE_CUDA;
  printf("fsdpc plan: %s, world %d (%d per node), %s, micro-batch %lld x %lld, %.2f M params\n",
         a->cfg, a->world, a->nproc, cuda ? "cuda" : "cpu", (long long)in->micro_batch,
         (long long)in->seq_len, (double)in->n_params / 1e6);
  printf("per-rank MiB: shards (params), peak per category over a step (grads, comm include "
         "the\ntransient full buffers), total = peak of the sum%s\n",
         cuda ? ";\nreserved = the planned arena + the CUDA runtime outside it (docs/fsdp.md)"
              : "");
  if (host_limit)
    printf("host MiB per rank: pinned + pageable + runtime; host memory %.1f GiB per machine "
           "(--host-mem), %d rank(s) per machine\n",
           (double)host_limit / 1073741824.0, a->nproc);
  else
    printf("host MiB per rank: pinned + pageable + runtime, %d rank(s) per machine; host memory "
           "per machine not given, so the host column is not judged (this machine has %.1f "
           "GiB; --host-mem GiB states the training machines')\n",
           a->nproc, (double)mem_total() / 1073741824.0);
  printf("  %-14s %-4s %-7s %-6s %9s %9s %9s %9s %9s %10s%s %10s %10s  fits\n", "strategy", "ckpt",
         "offload", "S x R", "params", "grads", "optim", "activ.", "comm", "total",
         cuda ? "   reserved" : "", "pinned", "host");
}

static void print_row(const fsdpc_memplan_row *m, int cuda, const char *fits) {
  char sr[32], res[24] = "";
  snprintf(sr, sizeof sr, "%d x %d", m->shard_size, m->replica_size);
  if (cuda)
    snprintf(res, sizeof res, " %10.1f", mib(m->reserved));
  const char *ck = strcmp(m->checkpointing, "off") == 0        ? "off"
                   : strcmp(m->checkpointing, "save_mlp") == 0 ? "mlp"
                                                               : "on";
  printf("%c %-14s %-4s %-7s %-6s %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f%s %10.1f %10.1f%s\n",
         m->is_config ? '*' : ' ', m->strategy_name, ck, m->offload, sr, mib(m->params),
         mib(m->peak[FSDPC_MEM_CAT_GRADS]), mib(m->peak[FSDPC_MEM_CAT_OPTIM]),
         mib(m->peak[FSDPC_MEM_CAT_ACTIVATIONS]), mib(m->peak[FSDPC_MEM_CAT_COMM]),
         mib(m->total_peak), res, mib(m->host_pinned), mib(m->host_total), fits);
}

/* The table (or JSON) of every row; 0, or 1 when the config's own variant
 * does not fit (after saying why on stderr). */
static int report(const plan_args *a, const fsdpc_memplan *mp) {
  fsdpc_memplan_info in = {.struct_size = sizeof in};
  fsdpc_memplan_describe(mp, &in);
  int cuda = in.device == FSDPC_DEVICE_CUDA, own_fits = 1;
  int64_t limit = (int64_t)(a->gpu_gib * 1073741824.0);
  /* Host memory is judged only against what the user states: the machine
   * that plans is often not the one that trains (issue 42). */
  int64_t host_limit = a->host_gib > 0 ? (int64_t)(a->host_gib * 1073741824.0) : 0;
  double own_host = 0.0;
  cJSON *rows = cJSON_CreateArray();
  if (!a->json)
    print_head(a, &in, host_limit);
  for (int i = 0; i < in.n_rows; i++) {
    fsdpc_memplan_row m = {.struct_size = sizeof m};
    fsdpc_memplan_row_get(mp, i, &m, NULL);
    int dev_ok = !limit || (cuda ? m.reserved : m.total_peak) <= limit;
    /* host memory is per machine: every local rank holds its own */
    int host_ok = !host_limit || m.host_total * (int64_t)a->nproc <= host_limit;
    if (m.is_config) {
      own_fits = dev_ok && host_ok;
      own_host = (double)m.host_total * a->nproc;
    }
    if (!a->json)
      print_row(&m, cuda,
                dev_ok && host_ok     ? "  yes"
                : !dev_ok && !host_ok ? "  no (device, host)"
                : !dev_ok             ? "  no (device)"
                                      : "  no (host)");
    cJSON_AddItemToArray(rows, row_json(&m, limit != 0, dev_ok, host_ok, host_limit));
  }
  if (a->json) {
    char *t = cJSON_Print(rows);
    if (t)
      printf("%s\n", t);
    cJSON_free(t);
  } else if (!cuda) {
    printf("(offload rows omitted: on CPU the shards already live in host memory; device = "
           "host)\n");
  } else {
    printf("(offload optim: optimizer state in pinned host memory, streamed per unit; full: "
           "every shard on the host, optimizer on the CPU; --json gives every figure)\n");
  }
  cJSON_Delete(rows);
  if (!own_fits && host_limit)
    fprintf(stderr,
            "fsdpc plan: the config's own variant (*) does not fit: %s; host memory needed "
            "%.1f GiB per machine of %.1f GiB (--host-mem)\n",
            own_host > (double)host_limit ? "not enough host memory" : "not enough device memory",
            own_host / 1073741824.0, (double)host_limit / 1073741824.0);
  else if (!own_fits)
    fprintf(stderr,
            "fsdpc plan: the config's own variant (*) does not fit: not enough device memory "
            "(--gpu-mem); host memory needed %.1f GiB per machine (not judged: no --host-mem)\n",
            own_host / 1073741824.0);
  return 0;
}

int fsdpc__cmd_plan(int argc, char **argv) {
  plan_args a = {.world = 1};
  if (!(a.ovr = calloc((size_t)argc + 1, sizeof *a.ovr)))
    return 1;
  int rc = parse(argc, argv, &a);
  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  fsdpc_memplan *mp = NULL;
  if (rc < 0 && (fsdpc_config_load(a.cfg, a.ovr, a.n_ovr, &cfg, &err) != FSDPC_OK ||
                 fsdpc_memplan_create(cfg, a.world, a.nproc, &mp, &err) != FSDPC_OK))
    rc = cli_fail(&fsdpc__plan_cmd, err.msg);
  if (rc < 0)
    rc = report(&a, mp);
  fsdpc_memplan_destroy(mp);
  fsdpc_config_destroy(cfg);
  free(a.ovr);
  return rc;
}
