/* fsdpc plan CFG [key=value ...] [--world N] [--nproc-per-node N] [--gpu-mem GiB] [--json]
 *
 * Predicts per-rank memory by category for each sharding strategy, with and
 * without activation checkpointing (and CPU offload on the GPU path), and
 * says which variants fit a given device memory. Loads the plugins the
 * config names but allocates no model memory. */
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
             "                  [--gpu-mem GiB] [--json]\n"
             "\n"
             "Predicts per-rank memory (params, grads, optimizer, activations, comm buffers,\n"
             "total peak) for FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and HYBRID_SHARD, with and\n"
             "without fsdp.activation_checkpointing (and fsdp.cpu_offload when\n"
             "train.device is cuda). '*' marks the config's own variant.\n"
             "\n"
             "  --world N            total ranks (default 1)\n"
             "  --nproc-per-node N   ranks per machine (HYBRID_SHARD's default group; default N)\n"
             "  --gpu-mem GiB        device memory per rank: adds a 'fits' column\n"
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

int fsdpc__cmd_plan(int argc, char **argv) {
  int world = 1, nproc = 0, json = 0;
  double gpu_gib = 0.0;
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
      char *end;
      const char *v = i + 1 < argc ? argv[++i] : "";
      gpu_gib = strtod(v, &end);
      if (!v[0] || *end || !(gpu_gib > 0)) {
        fprintf(stderr, "fsdpc plan: --gpu-mem needs a positive number of GiB, got '%s'\n", v);
        goto usage_err;
      }
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
  cJSON *rows = cJSON_CreateArray();
  if (!json) {
    printf("fsdpc plan: %s, world %d (%d per node), %s, micro-batch %lld x %lld, %.2f M params\n",
           cfg_path, world, nproc, cuda ? "cuda" : "cpu", (long long)cfg->train.micro_batch_size,
           (long long)cfg->data.seq_len, (double)fsdpc__plan_numel(pc) / 1e6);
    printf("per-rank MiB: shards (params), peak per category over a step (grads, comm include "
           "the\ntransient full buffers), total = peak of the sum%s\n",
           cuda ? "; reserved = allocator estimate" : "");
    printf("  %-14s %-4s %-7s %-6s %9s %9s %9s %9s %9s %10s%s%s\n", "strategy", "ckpt", "offload",
           "S x R", "params", "grads", "optim", "activ.", "comm", "total",
           cuda ? "   reserved" : "", limit ? "  fits" : "");
  }
  for (int s = 0; s < FSDPC_STRATEGY_COUNT; s++)
    for (int ck = 0; ck < 2; ck++)
      for (int off = 0; off < (cuda ? 2 : 1); off++) {
        fsdpc_plan_variant v = {s, ck, off};
        fsdpc_plan_mem m;
        if (fsdpc__plan_config(pc, &v, world, nproc, &m, &err) != FSDPC_OK) {
          fprintf(stderr, "fsdpc plan: %s: %s\n", fsdpc__strategy_name((fsdpc_strategy)s), err.msg);
          cJSON_Delete(rows);
          goto done;
        }
        int mine = s == cfg->fsdp.sharding_strategy &&
                   ck == (int)cfg->fsdp.activation_checkpointing &&
                   off == (int)cfg->fsdp.cpu_offload;
        int64_t need = cuda ? m.reserved : m.total_peak;
        const char *fits = !limit ? "" : need <= limit ? "  yes" : "  no";
        if (!json) {
          char sr[16], res[24] = "";
          snprintf(sr, sizeof sr, "%d x %d", m.S, m.R);
          if (cuda)
            snprintf(res, sizeof res, " %10.1f", mib(m.reserved));
          printf("%c %-14s %-4s %-7s %-6s %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f%s%s\n",
                 mine ? '*' : ' ', fsdpc__strategy_name((fsdpc_strategy)s), ck ? "on" : "off",
                 off ? "on" : "off", sr, mib((int64_t)m.params), mib(m.peak[FSDPC_MEM_GRADS]),
                 mib(m.peak[FSDPC_MEM_OPTIM]), mib(m.peak[FSDPC_MEM_ACTIVATIONS]),
                 mib(m.peak[FSDPC_MEM_COMM]), mib(m.total_peak), res, fits);
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "strategy", fsdpc__strategy_name((fsdpc_strategy)s));
        cJSON_AddBoolToObject(o, "activation_checkpointing", ck);
        cJSON_AddBoolToObject(o, "cpu_offload", off);
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
        cJSON_AddNumberToObject(o, "reserved_bytes", (double)m.reserved);
        if (limit)
          cJSON_AddBoolToObject(o, "fits", need <= limit);
        cJSON_AddItemToArray(rows, o);
      }
  if (json) {
    char *t = cJSON_Print(rows);
    if (t)
      printf("%s\n", t);
    cJSON_free(t);
  } else if (!cuda) {
    printf("(cpu_offload rows omitted: on CPU the shards already live in host memory)\n");
  } else {
    printf("(offload rows: the shards live in pinned host memory, not counted above; "
           "--json gives host_bytes)\n");
  }
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
