/* The LoRA adapters a config asks for (peft.*), resolved into the run
 * plan: the model folder knows adapters (model/lora.h), not configs. */
#include <math.h>
#include <string.h>

#include "model/lora.h"
#include "runplan/runplan.h"

fsdpc_status fsdpc__lora_from_config(const fsdpc_config *c, fsdpc_lora *out, int *on,
                                     fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  *on = c->peft.method == FSDPC_PEFT_LORA;
  if (!*on)
    return FSDPC_OK;
  const fsdpc_strlist *t = &c->peft.target_modules;
  for (int i = 0; i < t->n; i++) {
    if (strcmp(t->items[i], "all-linear") == 0) {
      out->targets = (1u << FSDPC_LORA_NPROJ) - 1;
      continue;
    }
    int j = 0;
    while (j < FSDPC_LORA_NPROJ && strcmp(fsdpc__lora_proj_name(j), t->items[i]) != 0)
      j++;
    if (j == FSDPC_LORA_NPROJ)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "peft.target_modules: unknown module '%s'; use q_proj, k_proj, v_proj, "
                         "o_proj, gate_proj, up_proj, down_proj or all-linear",
                         t->items[i]);
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
