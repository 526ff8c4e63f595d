/* fsdpc_dump_logits HF_DIR OUT.safetensors [T] [SEED]
 *
 * Loads a Hugging Face Llama folder (config.json + safetensors, e.g. the
 * `full` output of fsdpc) into fsdpc at world 1 and writes fsdpc's fp32
 * logits for a deterministic random input: "input_ids" (1, T) and
 * "logits" (1, T, V), both F32. tests/fixtures/check_hf_load.py then loads
 * the same folder with transformers' LlamaForCausalLM.from_pretrained and
 * compares its logits on input_ids with these. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fsdp/engine.h"
#include "io/safetensors.h"
#include "model/llama.h"
#include "runplan/runplan.h"

static int die(const char *what, const fsdpc_err *err) {
  fprintf(stderr, "fsdpc_dump_logits: %s: %s\n", what, err->msg);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fsdpc_dump_logits HF_DIR OUT.safetensors [T] [SEED]\n");
    return 2;
  }
  const char *dir = argv[1], *out = argv[2];
  int T = argc > 3 ? atoi(argv[3]) : 16;
  unsigned long long seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1234;
  fsdpc_err err = {0};
  char mc[4200], mi[4200];
  snprintf(mc, sizeof mc, "model.config=%s", dir);
  snprintf(mi, sizeof mi, "model.init.from=%s", dir);
  const char *ov[] = {mc,
                      mi,
                      "optim.name=sgd",
                      "attention.impl=naive",
                      "fsdp.sharding_strategy=NO_SHARD",
                      "train.device=cpu"};
  fsdpc_config *cfg = NULL;
  if (fsdpc__config_from_string("train: {}\n", "fsdpc_dump_logits", ov, 6, &cfg, &err) != FSDPC_OK)
    return die("config", &err);
  /* the engine from the run plan of that config, at world 1 */
  fsdpc_run_world w = {1, 1};
  fsdpc_run_plan *plan = NULL;
  if (fsdpc__run_plan_create(cfg, &w, 0, &plan, &err) != FSDPC_OK)
    return die("run plan", &err);
  const fsdpc_model_shape shape = plan->shape;
  const fsdpc_component *attn = plan->attn;
  if (T < 1 || T > shape.max_pos)
    T = shape.max_pos < 16 ? shape.max_pos : 16;
  fsdpc_dist dist;
  fsdpc__dist_single(&dist);
  fsdpc_engine_env env = {.dist = &dist, .threads = 1};
  fsdpc_engine *eng = NULL;
  if (fsdpc__engine_create(plan, &env, &eng, &err) != FSDPC_OK)
    return die("engine", &err);
  if (fsdpc__engine_load_hf(eng, dir, &err) != FSDPC_OK) return die("load", &err);
  fsdpc_model_ctx *m = NULL;
  fsdpc_model_ctx_opts mo = {.shape = &shape, .B = 1, .T = T, .attention = attn,
                             .attention_opts = cfg->attention.options};
  if (fsdpc__model_ctx_create(&mo, &m, &err) != FSDPC_OK) return die("model context", &err);
  int32_t *ids = calloc((size_t)T, sizeof *ids), *labels = calloc((size_t)T, sizeof *labels);
  float *fids = calloc((size_t)T, sizeof *fids);
  float *logits = malloc((size_t)T * shape.V * sizeof(float));
  uint64_t x = seed;
  for (int t = 0; t < T; t++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull; /* LCG: any fixed sequence */
    ids[t] = (int32_t)((x >> 33) % (uint64_t)shape.V);
    fids[t] = (float)ids[t];
    labels[t] = -100;
  }
  if (fsdpc__model_set_batch(m, ids, labels, NULL, &err) != FSDPC_OK) return die("batch", &err);
  for (int t = 0; t < T; t++)
    if (fsdpc__engine_logits_at(eng, m, t, logits + (size_t)t * shape.V, &err) != FSDPC_OK)
      return die("forward", &err);
  fsdpc_st_entry e[2] = {
      {.struct_size = sizeof e[0], .name = "input_ids", .ndim = 2, .shape = {1, T}, .data = fids},
      {.struct_size = sizeof e[1], .name = "logits", .ndim = 3, .shape = {1, T, shape.V},
       .data = logits}};
  if (fsdpc__st_write(out, e, 2, FSDPC_DTYPE_F32, NULL, &err) != FSDPC_OK)
    return die("write", &err);
  printf("wrote %s: input_ids (1, %d), logits (1, %d, %d)\n", out, T, T, shape.V);
  free(ids);
  free(labels);
  free(fids);
  free(logits);
  fsdpc__model_ctx_destroy(m);
  fsdpc__engine_destroy(eng);
  fsdpc__run_plan_destroy(plan);
  fsdpc__config_destroy(cfg);
  return 0;
}
