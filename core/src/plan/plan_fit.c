/* The plan as a promise (issue 32): a run whose memory plan does not fit the
 * device's free memory is refused before any work, with the planner's
 * figures and the variants that would fit. */
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

static double gib(int64_t b) {
  return (double)b / 1073741824.0;
}

/* What variant m of p needs on the device from now on, or -1 when the
 * variant cannot be planned (it is then not offered). */
static int64_t need(const fsdpc_run_plan *p, const fsdpc_run_modes *m) {
  fsdpc_plan_mem pm;
  fsdpc_err ignore;
  if (fsdpc__plan_modes(p, m, &pm, &ignore) != FSDPC_OK)
    return -1;
  return pm.arena + pm.late;
}

/* Appends "what (X GiB)" to out when variant m fits free_bytes. */
static void offer(const fsdpc_run_plan *p, const fsdpc_run_modes *m, const char *what,
                  uint64_t free_bytes, char *out, size_t cap) {
  int64_t n = need(p, m);
  size_t len = strlen(out);
  if (n >= 0 && (uint64_t)n <= free_bytes && len + 1 < cap)
    snprintf(out + len, cap - len, "%s%s (%.1f GiB)", len ? ", " : "", what, gib(n));
}

/* The variants of the run that would fit, most like the run first. */
static void fitting(const fsdpc_run_plan *p, uint64_t free_bytes, char *out, size_t cap) {
  const fsdpc_config *c = p->cfg;
  const fsdpc_run_world *w = &p->modes.world;
  fsdpc_run_modes m;
  fsdpc_err ignore;
  out[0] = '\0';
  if (!p->modes.activation_checkpointing) {
    fsdpc_run_variant v = {-1, 1, -1, -1};
    if (fsdpc__run_modes_resolve(c, &v, w, &m, &ignore) == FSDPC_OK)
      offer(p, &m, "fsdp.activation_checkpointing=true", free_bytes, out, cap);
  }
  /* smaller micro-batches, the global batch kept by accumulating more */
  for (int64_t mb = p->modes.batch.micro / 2; mb >= 1; mb /= 2) {
    m = p->modes;
    if (m.batch.global % (mb * w->world_size) != 0)
      continue;
    m.batch.micro = mb;
    m.batch.accum = m.batch.global / (mb * w->world_size);
    char what[64];
    snprintf(what, sizeof what, "train.micro_batch_size=%lld", (long long)mb);
    size_t before = strlen(out);
    offer(p, &m, what, free_bytes, out, cap);
    if (strlen(out) != before)
      break; /* the largest that fits */
  }
  if (!p->modes.offload_optim && !p->modes.cpu_offload) {
    fsdpc_run_variant v = {-1, -1, -1, 1};
    if (fsdpc__run_modes_resolve(c, &v, w, &m, &ignore) == FSDPC_OK)
      offer(p, &m, "fsdp.offload.optimizer=true", free_bytes, out, cap);
  }
  if (!p->modes.cpu_offload) {
    fsdpc_run_variant v = {-1, -1, 1, -1};
    if (fsdpc__run_modes_resolve(c, &v, w, &m, &ignore) == FSDPC_OK)
      offer(p, &m, "fsdp.cpu_offload=true", free_bytes, out, cap);
  }
}

fsdpc_status fsdpc__plan_fit_check(const fsdpc_run_plan *p, uint64_t free_bytes, int device_index,
                                   fsdpc_err *err) {
  fsdpc_plan_mem pm;
  FSDPC_TRY(fsdpc__plan_modes(p, &p->modes, &pm, err));
  if ((uint64_t)(pm.arena + pm.late) <= free_bytes)
    return FSDPC_OK;
  char fits[768];
  fitting(p, free_bytes, fits, sizeof fits);
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "the run does not fit GPU %d: it plans %.2f GiB (an arena of %.2f GiB: "
                     "shards %.2f, activations %.2f, transients %.2f; %.2f GiB more after "
                     "start-up) and %.2f GiB are free; %s%s",
                     device_index, gib(pm.arena + pm.late), gib(pm.arena), gib(pm.arena_shards),
                     gib(pm.arena_activations), gib(pm.arena_transients), gib(pm.late),
                     gib((int64_t)free_bytes), fits[0] ? "would fit: " : "",
                     fits[0] ? fits
                             : "no single change of checkpointing, micro-batch or offload fits: "
                               "use more GPUs or a sharded strategy (`fsdpc plan`)");
}
