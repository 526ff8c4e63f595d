/* Integrity checks of checkpoint contents (docs/checkpoints.md):
 * NaN/Inf in weights or optimizer state, found in this rank's shards and
 * named by tensor. Private to core/src/ckpt. */
#ifndef FSDPC_CKPT_VERIFY_H
#define FSDPC_CKPT_VERIFY_H

#include "ckpt/ckpt.h"

/* Scans this rank's shards (weights, and the optimizer slots when
 * with_optimizer) held by h's backend. FSDPC_OK when all are finite (and
 * second moments and block scales, exp_avg_sq and *.absmax, non-negative); else
 * one line naming dir (may be NULL), the tensor, the slot and the element:
 * "checkpoint ckpt/step-000010: tensor model.layers.0.mlp.up_proj.weight
 *  (weights) holds NaN at element 17 ...". Not collective. */
fsdpc_status fsdpc__ckpt_check_finite(fsdpc_ckpt_host *h, int with_optimizer, const char *dir,
                                      fsdpc_err *err);

/* Whether a load refuses non-finite values (default 1). */
void fsdpc__ckpt_host_refuse_nonfinite(fsdpc_ckpt_host *h, int refuse);
int fsdpc__ckpt_host_refuses_nonfinite(const fsdpc_ckpt_host *h);

/* After a check outside a load or save: frees the host copies a backend
 * staged for it (a GPU engine's mirrors would otherwise serve stale values
 * to the next save). */
void fsdpc__ckpt_release_staging(fsdpc_ckpt_host *h);

/* The job-wide AND of ok through h's backend; a backend error counts as 0. */
int fsdpc__ckpt_all_ok(fsdpc_ckpt_host *h, int ok);

#endif
