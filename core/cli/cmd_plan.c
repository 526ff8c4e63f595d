/* fsdpc plan CFG [key=value ...] [--world N] [--nproc-per-node N] [--gpu-mem GiB]
 *                [--host-mem GiB] [--json]
 *
 * Predicts per-rank memory by category for each sharding strategy, with and
 * without activation checkpointing (and, on the GPU path, with optimizer-
 * state offload and full CPU offload), the per-rank host memory (pinned and
 * pageable) beside it, and says which variants fit a given device memory
 * and the machine's host memory. Loads the plugins the config names but
 * allocates no model memory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config/config.h"
#include "plan/plan.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc plan CFG.yaml [section.key=value ...] [--world N] [--nproc-per-node N]\n"
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
             "  --json               print JSON instead of the table\n");
}

static double mib(int64_t b) {
  return (double)b / 1048576.0;
}

static int parse_pos_int(const char *flag, const char *v, int *out) {
  char *end;
  errno = 0;
  long n = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || *end || n < 1 || n > 1 << 20) {
    fprintf(stderr, "fsdpc plan: %s needs a positive integer, got '%s'\n", flag, v ? v : "");
    return 0;
  }
  *out = (int)n;
  return 1;
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

static int parse_gib(const char *flag, const char *v, double *out) {
  char *end;
  *out = v ? strtod(v, &end) : 0.0;
  if (!v || !v[0] || *end || !(*out > 0) || *out > 1e9) {
    fprintf(stderr, "fsdpc plan: %s needs a positive number of GiB, got '%s'\n", flag,
            v ? v : "");
    return 0;
  }
  return 1;
}

static const char *offload_name(int off) {
  return off == 1 ? "full" : off == 2 ? "optim" : "off";
}

int fsdpc__cmd_plan(int argc, char **argv) {
  int world = 1, nproc = 0, json = 0;
  double gpu_gib = 0.0, host_gib = 0.0;
  const char *cfg_path = NULL;
  const char **ovr = calloc((size_t)argc + 1, sizeof(char *));
  int n_ovr = 0;
  if (!ovr)
    return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      free(ovr);
      return 0;
    } else if (strcmp(a, "--world") == 0) {
      if (!parse_pos_int(a, i + 1 < argc ? argv[++i] : NULL, &world))
        goto usage_err;
    } else if (strcmp(a, "--nproc-per-node") == 0) {
      if (!parse_pos_int(a, i + 1 < argc ? argv[++i] : NULL, &nproc))
        goto usage_err;
    } else if (strcmp(a, "--gpu-mem") == 0) {
      if (!parse_gib(a, i + 1 < argc ? argv[++i] : NULL, &gpu_gib))
        goto usage_err;
    } else if (strcmp(a, "--host-mem") == 0) {
      if (!parse_gib(a, i + 1 < argc ? argv[++i] : NULL, &host_gib))
        goto usage_err;
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "fsdpc plan: unknown option '%s' (`fsdpc plan --help`)\n", a);
      goto usage_err;
    } else if (!cfg_path) {
      cfg_path = a;
    } else {
      ovr[n_ovr++] = a;
    }
  }
  if (!cfg_path) {
    usage(stderr);
    goto usage_err;
  }
  if (nproc == 0)
    nproc = world;
  if (world % nproc != 0) {
    fprintf(stderr, "fsdpc plan: --world %d is not a multiple of --nproc-per-node %d\n", world,
            nproc);
    goto usage_err;
  }

  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  fsdpc_plan_ctx *pc = NULL;
  int code = 1;
  if (fsdpc__config_load(cfg_path, ovr, n_ovr, &cfg, &err) != FSDPC_OK ||
      fsdpc__plan_ctx_create(cfg, &pc, &err) != FSDPC_OK) {
    fprintf(stderr, "fsdpc plan: %s\n", err.msg);
    goto done;
  }
  int cuda = cfg->train.device == FSDPC_DEVICE_CUDA;
  int64_t limit = (int64_t)(gpu_gib * 1073741824.0);
  /* Host memory is judged only against what the user states: the machine
   * that plans is often not the one that trains (issue 42). */
  int64_t host_limit = host_gib > 0 ? (int64_t)(host_gib * 1073741824.0) : 0;
  int own_fits = 1;
  double own_host = 0.0;
  cJSON *rows = cJSON_CreateArray();
  if (!json) {
    printf("fsdpc plan: %s, world %d (%d per node), %s, micro-batch %lld x %lld, %.2f M params\n",
           cfg_path, world, nproc, cuda ? "cuda" : "cpu", (long long)cfg->train.micro_batch_size,
           (long long)cfg->data.seq_len, (double)fsdpc__plan_numel(pc) / 1e6);
    printf("per-rank MiB: shards (params), peak per category over a step (grads, comm include "
           "the\ntransient full buffers), total = peak of the sum%s\n",
           cuda ? ";\nreserved = the planned arena + the CUDA runtime outside it (docs/fsdp.md)"
                : "");
    if (host_gib > 0)
      printf("host MiB per rank: pinned + pageable + runtime; host memory %.1f GiB per machine "
             "(--host-mem), %d rank(s) per machine\n",
             (double)host_limit / 1073741824.0, nproc);
    else
      printf("host MiB per rank: pinned + pageable + runtime, %d rank(s) per machine; host memory "
             "per machine not given, so the host column is not judged (this machine has %.1f "
             "GiB; --host-mem GiB states the training machines')\n",
             nproc, (double)mem_total() / 1073741824.0);
    printf("  %-14s %-4s %-7s %-6s %9s %9s %9s %9s %9s %10s%s %10s %10s  fits\n", "strategy",
           "ckpt", "offload", "S x R", "params", "grads", "optim", "activ.", "comm", "total",
           cuda ? "   reserved" : "", "pinned", "host");
  }
  /* ckpt "on" rows use the config's fsdp.activation_checkpointing_policy:
   * shown as "mlp" for save_mlp */
  int save_mlp = cfg->fsdp.activation_checkpointing_policy == FSDPC_AC_SAVE_MLP;
  /* offload: 0 off, 1 full (fsdp.cpu_offload), 2 optimizer state only */
  for (int s = 0; s < FSDPC_STRATEGY_COUNT; s++)
    for (int ck = 0; ck < 2; ck++)
      for (int off = 0; off < (cuda ? 3 : 1); off++) {
        /* on the CPU the offload keys stay the config's (one row) */
        fsdpc_plan_variant v = {s, ck, cuda ? off == 1 : -1, cuda ? off == 2 : -1};
        fsdpc_plan_mem m;
        if (fsdpc__plan_config(pc, &v, world, nproc, &m, &err) != FSDPC_OK) {
          fprintf(stderr, "fsdpc plan: %s: %s\n", fsdpc__strategy_name((fsdpc_strategy)s), err.msg);
          cJSON_Delete(rows);
          goto done;
        }
        int own_off = cfg->fsdp.cpu_offload ? 1 : cfg->fsdp.offload.optimizer ? 2 : 0;
        int mine = s == cfg->fsdp.sharding_strategy &&
                   ck == (int)cfg->fsdp.activation_checkpointing && (!cuda || off == own_off);
        int64_t need = cuda ? m.reserved : m.total_peak;
        int dev_ok = !limit || need <= limit;
        /* host memory is per machine: every local rank holds its own */
        int host_ok = !host_limit || m.host_total * (int64_t)nproc <= host_limit;
        const char *fits = dev_ok && host_ok ? "  yes"
                           : !dev_ok && !host_ok ? "  no (device, host)"
                           : !dev_ok             ? "  no (device)"
                                                 : "  no (host)";
        if (mine) {
          own_fits = dev_ok && host_ok;
          own_host = (double)m.host_total * nproc;
        }
        if (!json) {
          char sr[16], res[24] = "";
          snprintf(sr, sizeof sr, "%d x %d", m.S, m.R);
          if (cuda)
            snprintf(res, sizeof res, " %10.1f", mib(m.reserved));
          printf("%c %-14s %-4s %-7s %-6s %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f%s %10.1f %10.1f%s\n",
                 mine ? '*' : ' ', fsdpc__strategy_name((fsdpc_strategy)s),
                 !ck ? "off" : save_mlp ? "mlp" : "on",
                 offload_name(off), sr, mib((int64_t)m.params), mib(m.peak[FSDPC_MEM_GRADS]),
                 mib(m.peak[FSDPC_MEM_OPTIM]), mib(m.peak[FSDPC_MEM_ACTIVATIONS]),
                 mib(m.peak[FSDPC_MEM_COMM]), mib(m.total_peak), res, mib(m.host_bytes),
                 mib(m.host_total), fits);
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "strategy", fsdpc__strategy_name((fsdpc_strategy)s));
        cJSON_AddBoolToObject(o, "activation_checkpointing", ck);
        if (ck)
          cJSON_AddStringToObject(o, "activation_checkpointing_policy",
                                  save_mlp ? "save_mlp" : "full");
        cJSON_AddBoolToObject(o, "cpu_offload", off == 1);
        cJSON_AddBoolToObject(o, "offload_optimizer", off == 2);
        cJSON_AddStringToObject(o, "offload", offload_name(off));
        cJSON_AddBoolToObject(o, "config", mine);
        cJSON_AddNumberToObject(o, "shard_size", m.S);
        cJSON_AddNumberToObject(o, "replica_size", m.R);
        cJSON_AddNumberToObject(o, "params_shard_bytes", (double)m.params);
        cJSON_AddNumberToObject(o, "grads_shard_bytes", (double)m.grads);
        cJSON_AddNumberToObject(o, "optim_bytes", (double)m.optim);
        cJSON_AddNumberToObject(o, "activations_bytes", (double)m.activations);
        cJSON *pk = cJSON_AddObjectToObject(o, "peak_bytes");
        for (int c = 0; c < FSDPC_MEM_NCAT; c++)
          cJSON_AddNumberToObject(pk, fsdpc__mem_cat_name((fsdpc_mem_cat)c), (double)m.peak[c]);
        cJSON_AddNumberToObject(pk, "total", (double)m.total_peak);
        cJSON_AddNumberToObject(o, "host_bytes", (double)m.host_bytes);
        cJSON_AddNumberToObject(o, "host_pinned_bytes", (double)m.host_bytes);
        cJSON_AddNumberToObject(o, "host_pageable_bytes", (double)m.host_pageable);
        cJSON_AddNumberToObject(o, "host_runtime_bytes", (double)m.host_runtime);
        cJSON_AddNumberToObject(o, "host_total_bytes", (double)m.host_total);
        cJSON_AddNumberToObject(o, "reserved_bytes", (double)m.reserved);
        cJSON_AddNumberToObject(o, "arena_bytes", (double)m.arena);
        cJSON_AddNumberToObject(o, "arena_shards_bytes", (double)m.arena_shards);
        cJSON_AddNumberToObject(o, "arena_activations_bytes", (double)m.arena_activations);
        cJSON_AddNumberToObject(o, "arena_transients_bytes", (double)m.arena_transients);
        cJSON_AddNumberToObject(o, "late_bytes", (double)m.late);
        if (limit)
          cJSON_AddBoolToObject(o, "fits", dev_ok && host_ok);
        cJSON_AddBoolToObject(o, "fits_device", dev_ok);
        cJSON_AddBoolToObject(o, "fits_host", host_ok);
        /* 0 and "none": no --host-mem, the host figure was not judged */
        cJSON_AddNumberToObject(o, "host_limit_bytes", (double)host_limit);
        cJSON_AddStringToObject(o, "host_limit_source", host_gib > 0 ? "--host-mem" : "none");
        cJSON_AddItemToArray(rows, o);
      }
  if (json) {
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
  cJSON_Delete(rows);
  code = 0;
done:
  fsdpc__plan_ctx_destroy(pc);
  fsdpc__config_destroy(cfg);
  free(ovr);
  return code;
usage_err:
  free(ovr);
  return 2;
}
