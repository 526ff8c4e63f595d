/* Integrity checks of checkpoint contents (see verify.h). */
#include "ckpt/verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"

/* First element of p[0..n) that is not finite (or, with nonneg, negative),
 * or n. */
static uint64_t first_bad(const float *p, uint64_t n, int nonneg) {
  for (uint64_t i = 0; i < n; i++)
    if (!isfinite(p[i]) || (nonneg && p[i] < 0.0f))
      return i;
  return n;
}

/* Slots that cannot be negative whatever the optimizer: a second moment
 * (a mean of squares) and a block scale (an absmax). */
static int nonneg_slot(const char *name) {
  size_t n = strlen(name);
  return strcmp(name, "exp_avg_sq") == 0 || (n > 7 && strcmp(name + n - 7, ".absmax") == 0);
}

fsdpc_status fsdpc__ckpt_check_finite(fsdpc_ckpt_host *h, int with_optimizer, const char *dir,
                                      fsdpc_err *err) {
  int n_slots = with_optimizer ? (int)h->n_slots : 0;
  for (int slot = FSDPC_SD_SLOT_PARAM; slot < n_slots; slot++) {
    for (uint32_t u = 0; u < h->sd.n_units; u++) {
      const fsdpc_sd_unit *un = &h->units[u];
      float *shard = h->be.shard(h->be.ctx, (int)u, slot);
      if (!shard || un->shard_numel == 0)
        continue;
      int nonneg = slot != FSDPC_SD_SLOT_PARAM && nonneg_slot(h->slot_names[slot]);
      /* The padding past the last tensor holds zeros; only tensors count. */
      for (uint32_t t = 0; t < h->sd.n_tensors; t++) {
        const fsdpc_sd_tensor *tn = &h->tensors[t];
        if (tn->unit != u)
          continue;
        uint64_t lo = tn->unit_offset, hi = tn->unit_offset + tn->numel;
        uint64_t s_lo = un->shard_offset, s_hi = un->shard_offset + un->shard_numel;
        if (hi <= s_lo || lo >= s_hi)
          continue;
        uint64_t a = lo > s_lo ? lo : s_lo, b = hi < s_hi ? hi : s_hi;
        uint64_t k = first_bad(shard + (a - s_lo), b - a, nonneg);
        if (k == b - a)
          continue;
        float v = shard[a - s_lo + k];
        char what[96];
        if (slot == FSDPC_SD_SLOT_PARAM)
          snprintf(what, sizeof what, "weights");
        else
          snprintf(what, sizeof what, "optimizer state '%s'", h->slot_names[slot]);
        char held[48];
        if (isfinite(v))
          snprintf(held, sizeof held, "the negative value %g", v);
        else
          snprintf(held, sizeof held, "%s", isnan(v) ? "NaN" : "Inf");
        if (!dir)
          return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                             "tensor %s (%s) holds %s at element %llu (the run diverged)", tn->name,
                             what, held, (unsigned long long)(a - lo + k));
        return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "checkpoint %s: tensor %s (%s) holds %s at element %llu: the values are "
                           "corrupt or come from a diverged run; use an older checkpoint, or set "
                           "checkpoint.allow_nonfinite=true to load them anyway",
                           dir, tn->name, what, held, (unsigned long long)(a - lo + k));
      }
    }
  }
  return FSDPC_OK;
}

void fsdpc__ckpt_host_refuse_nonfinite(fsdpc_ckpt_host *h, int refuse) {
  h->allow_nonfinite = !refuse;
}

int fsdpc__ckpt_host_refuses_nonfinite(const fsdpc_ckpt_host *h) {
  return !h->allow_nonfinite;
}

int fsdpc__ckpt_all_ok(fsdpc_ckpt_host *h, int ok) {
  fsdpc_err e;
  if (h->be.agree(h->be.ctx, &ok, &e) != FSDPC_OK)
    return 0;
  return ok;
}

void fsdpc__ckpt_release_staging(fsdpc_ckpt_host *h) {
  fsdpc_err e;
  if (h->be.done)
    h->be.done(h->be.ctx, 0, &e);
}
