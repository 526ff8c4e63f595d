/* fsdpc convert SRC DST --to hf|sharded [--dtype fp32|bf16] [--world N]
 * [--strategy S] [--hybrid-shard-size N] [--config CFG] [key=value ...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/convert.h"
#include "commands.h"
#include "util/log.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: fsdpc convert SRC DST --to hf|sharded [options] [section.key=value ...]\n"
          "\n"
          "Converts a checkpoint folder (sharded, or a Hugging Face / full one) into DST.\n"
          "  --to hf|full|sharded   target format (hf = full)\n"
          "  --dtype fp32|bf16      weights of a full (HF) output (default bf16)\n"
          "  --world N              ranks of a sharded output (default 1)\n"
          "  --strategy S           FULL_SHARD (default), SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD\n"
          "  --hybrid-shard-size N  shard group size for HYBRID_SHARD\n"
          "  --config CFG           the run's YAML (default: SRC/config.yaml, else SRC's HF\n"
          "                         config.json with default settings)\n"
          "Every rank of a sharded output reads only its own ranges; a full output holds\n"
          "the model in fp32 once. Optimizer state is not carried over.\n");
}

static int parse_int(const char *s, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 1 || v > 1 << 20)
    return 0;
  *out = (int)v;
  return 1;
}

int fsdpc__cmd_convert(int argc, char **argv) {
  fsdpc_convert_opts o = {
      .to = NULL, .dtype = FSDPC_DTYPE_BF16, .world = 1, .strategy = "FULL_SHARD"};
  const char *pos[2] = {NULL, NULL};
  int npos = 0;
  const char **ov = calloc((size_t)argc + 1, sizeof *ov);
  if (!ov)
    return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      free(ov);
      return 0;
    }
    int takes = strcmp(a, "--to") == 0 || strcmp(a, "--dtype") == 0 || strcmp(a, "--world") == 0 ||
                strcmp(a, "--strategy") == 0 || strcmp(a, "--hybrid-shard-size") == 0 ||
                strcmp(a, "--config") == 0;
    if (takes && !val) {
      fprintf(stderr, "fsdpc convert: %s needs a value\n", a);
      free(ov);
      return 2;
    }
    int ok = 1;
    if (strcmp(a, "--to") == 0)
      o.to = strcmp(val, "hf") == 0 ? "full" : val;
    else if (strcmp(a, "--dtype") == 0)
      ok = strcmp(val, "fp32") == 0   ? (o.dtype = FSDPC_DTYPE_F32, 1)
           : strcmp(val, "bf16") == 0 ? (o.dtype = FSDPC_DTYPE_BF16, 1)
                                      : 0;
    else if (strcmp(a, "--world") == 0)
      ok = parse_int(val, &o.world);
    else if (strcmp(a, "--strategy") == 0)
      o.strategy = val;
    else if (strcmp(a, "--hybrid-shard-size") == 0)
      ok = parse_int(val, &o.hybrid_shard_size);
    else if (strcmp(a, "--config") == 0)
      o.config = val;
    else if (a[0] == '-') {
      fprintf(stderr, "fsdpc convert: unknown option '%s' (`fsdpc convert --help`)\n", a);
      free(ov);
      return 2;
    } else if (strchr(a, '=')) {
      ov[o.n_overrides++] = a;
      continue;
    } else if (npos < 2) {
      pos[npos++] = a;
      continue;
    } else {
      fprintf(stderr, "fsdpc convert: unexpected argument '%s'\n", a);
      free(ov);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "fsdpc convert: bad value '%s' for %s\n", val, a);
      free(ov);
      return 2;
    }
    i++;
  }
  if (npos != 2 || !o.to) {
    usage(stderr);
    free(ov);
    return 2;
  }
  o.src = pos[0];
  o.dst = pos[1];
  o.overrides = ov;
  fsdpc__log_setup(FSDPC_LOG_INFO, -1);
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__convert(&o, &err);
  free(ov);
  if (st != FSDPC_OK) {
    fprintf(stderr, "fsdpc convert: %s\n", err.msg);
    return 1;
  }
  return 0;
}
