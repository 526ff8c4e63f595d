/* The LoRA adapters a config asks for (peft.*), resolved into the run
 * plan: the model folder knows adapters (model/lora.h), not configs. */
#include <math.h>
#include <string.h>

#include "model/family.h"
#include "model/lora.h"
#include "runplan/runplan.h"

fsdpc_status fsdpc__lora_from_config(const fsdpc_config *c, fsdpc_lora *out, int *on,
                                     fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  *on = c->peft.method == FSDPC_PEFT_LORA;
  if (!*on)
    return FSDPC_OK;
  const fsdpc_family_info *fi = fsdpc__family(c->model.model_type);
  int fused = fi && fi->fused;
  const fsdpc_strlist *t = &c->peft.target_modules;
  for (int i = 0; i < t->n; i++) {
    if (strcmp(t->items[i], "all-linear") == 0) {
      out->targets =
          fused ? (1u << 0) | (1u << 3) | (1u << 4) | (1u << 6) : (1u << FSDPC_LORA_NPROJ) - 1;
      continue;
    }
    int j = fsdpc__lora_target_proj(fused, t->items[i]);
    if (j < 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "peft.target_modules: model_type %s has no module '%s'; use %s or "
                         "all-linear",
                         fi ? fi->model_type : "?", t->items[i],
                         fused ? "qkv_proj, o_proj, gate_up_proj, down_proj"
                               : "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
    out->targets |= 1u << j;
  }
  if (!out->targets)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "peft.target_modules is empty; name at least one projection (q_proj, ...)");
  out->r = (int)c->peft.r;
  out->alpha = (float)c->peft.alpha;
  out->rslora = c->peft.rslora;
  out->scale = (float)(c->peft.rslora ? c->peft.alpha / sqrt((double)c->peft.r)
                                      : c->peft.alpha / (double)c->peft.r);
  out->dropout = (float)c->peft.dropout;
  out->seed = (uint64_t)c->train.seed;
  return FSDPC_OK;
}
