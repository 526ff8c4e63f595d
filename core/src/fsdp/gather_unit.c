/* A checkpoint's view of whole units: the full fp32 values of one unit's
 * parameters or optimizer slot gathered to one rank of the shard group,
 * between steps, through the transient region of the engine's arena (no
 * step's buffer is live then; memplan.h plans the bytes). */
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "fsdp/nf4_unit.h"
#include "io/dtype.h"

/* The checkpoint gathers' buffers: the unit's full buffer at the start of
 * the transient region, a shard uploaded from host memory after it. */
static void *ckpt_buf(fsdpc_engine *e, int which, const fsdpc_unit *un) {
  uint64_t off = e->mp.trans_offset;
  if (which)
    off += fsdpc__mp_round(un->flat_numel * 4, e->mp.align);
  return e->arena + off;
}

static fsdpc_status gather_full(fsdpc_engine *e, fsdpc_unit *un, const float *src, int root,
                                float *full, fsdpc_err *err);

/* A frozen unit in bf16 (LoRA's base on a device): the bf16 shards are
 * gathered on the device and widened to fp32 on root's host. At S == 1 the
 * shard is the whole unit: it is read where it lives. */
static fsdpc_status gather_frozen16(fsdpc_engine *e, fsdpc_unit *un, int root, float *full,
                                    fsdpc_err *err) {
  size_t hb = un->flat_numel * 2;
  int is_root = e->dist->shard_rank == root && full;
  if (e->S == 1) {
    if (!is_root)
      return FSDPC_OK;
    if (e->offload) { /* the shard is pinned host memory */
      fsdpc__bf16_to_f32_n((const uint16_t *)un->master, full, un->flat_numel);
      return FSDPC_OK;
    }
  }
  uint16_t *h16 = is_root ? malloc(hb ? hb : 1) : NULL;
  void *d16 = e->S > 1 ? ckpt_buf(e, 0, un) : NULL;
  fsdpc_status st = FSDPC_OK;
  if (d16)
    fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)hb);
  if (is_root && !h16) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory gathering unit %s", un->name);
    goto done;
  }
  if (d16) {
    void *own = (char *)d16 + un->shard_offset * 2;
    if (e->offload)
      st = e->ops->upload(e->ops->ctx, own, un->master, un->shard_numel * 2, err);
    if (st == FSDPC_OK)
      st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, e->offload ? own : un->master, d16,
                                  un->shard_numel, e->ops->act_dtype, un->name, err);
  }
  if (st == FSDPC_OK && is_root)
    st = e->ops->download(e->ops->ctx, h16, d16 ? d16 : un->master, hb, err);
  if (st == FSDPC_OK && is_root)
    fsdpc__bf16_to_f32_n(h16, full, un->flat_numel);
done:
  if (d16)
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)hb);
  free(h16);
  return st;
}

/* An NF4 unit (fsdp/nf4_unit.h): its image gathered into the engine's
 * image buffer (S > 1) and dequantized into root's fp32 full on the host
 * (on a device: the image downloaded, dequantized to the compute dtype as
 * the device's kernel does, then widened). */
static fsdpc_status gather_nf4(fsdpc_engine *e, int u, int root, float *full, fsdpc_err *err) {
  const fsdpc_unit *un = &e->units[u];
  const uint8_t *image = (const uint8_t *)un->master;
  if (e->S > 1) { /* every rank of the group takes part */
    FSDPC_TRY(fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, un->master, e->nf4buf,
                                     un->nf4_shard, FSDPC_DTYPE_U8, un->name, err));
    image = e->nf4buf;
  }
  if (!full || e->dist->shard_rank != root)
    return FSDPC_OK;
  memset(full, 0, un->flat_numel * sizeof(float)); /* the padding */
  if (e->ops->device == FSDPC_DEVICE_CPU)
    return fsdpc__nf4_unit_unpack(un, e->params, e->param_offset, e->x.nf4_block, e->x.nf4_dq, 4,
                                  e->nf4_map, image, full, err);
  uint64_t ib = un->nf4_shard * (uint64_t)e->S;
  uint8_t *h = malloc(ib + 1);
  uint16_t *h16 = calloc(un->flat_numel + 1, 2);
  fsdpc_status st = h && h16 ? e->ops->download(e->ops->ctx, h, image, ib, err)
                             : fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                                           "out of host memory gathering unit %s", un->name);
  if (st == FSDPC_OK)
    st = fsdpc__nf4_unit_unpack(un, e->params, e->param_offset, e->x.nf4_block, e->x.nf4_dq,
                                (int)e->psize, e->nf4_map, h, h16, err);
  if (st == FSDPC_OK)
    fsdpc__bf16_to_f32_n(h16, full, un->flat_numel);
  free(h);
  free(h16);
  return st;
}

fsdpc_status fsdpc__engine_gather_unit(fsdpc_engine *e, int u, int slot, int root, float *full,
                                       fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (e->micro_i != 0)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: a checkpoint gather inside a step");
  FSDPC_TRY(fsdpc__engine_quiesce(e, err));
  if (un->frozen && slot != FSDPC_SD_SLOT_PARAM)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "unit %s is frozen: no optimizer state",
                       un->name);
  if (un->nf4) /* dequantized (the merged export's base: what PEFT's merge reads) */
    return gather_nf4(e, u, root, full, err);
  if (un->frozen && e->psize != sizeof(float))
    return gather_frozen16(e, un, root, full, err);
  if (slot != FSDPC_SD_SLOT_PARAM && e->qf.block)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "gathering unit %s's optimizer state: quantized state has no flat fp32 "
                       "form; use the sharded checkpoint format for optimizer state",
                       un->name);
  const float *src =
      slot == FSDPC_SD_SLOT_PARAM ? un->master : un->state + (size_t)slot * un->shard_numel;
  size_t fb = un->flat_numel * sizeof(float), sb = un->shard_numel * sizeof(float);
  int host_src = e->offload || (e->offload_optim && slot != FSDPC_SD_SLOT_PARAM);
  if (e->S == 1) {
    if (full && host_src && e->ops->device != FSDPC_DEVICE_CPU)
      memcpy(full, src, fb);
    else if (full)
      FSDPC_TRY(e->sops->download(e->sops->ctx, full, src, fb, err));
    return FSDPC_OK;
  }
  if (host_src && e->ops->device != FSDPC_DEVICE_CPU) { /* the host shard goes up first */
    float *d = ckpt_buf(e, 1, un);
    fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)sb);
    fsdpc_status st = e->ops->upload(e->ops->ctx, d, src, sb, err);
    if (st == FSDPC_OK)
      st = gather_full(e, un, d, root, full, err);
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)sb);
    return st;
  }
  return gather_full(e, un, src, root, full, err);
}

/* The S > 1 part of fsdpc__engine_gather_unit; src is device memory. */
static fsdpc_status gather_full(fsdpc_engine *e, fsdpc_unit *un, const float *src, int root,
                                float *full, fsdpc_err *err) {
  size_t fb = un->flat_numel * sizeof(float);
  /* Root gathers straight into `full` on the CPU; on a device (and on the
   * other ranks) into a transient buffer, from which root downloads. Peak
   * extra memory is one unit, never the model. */
  int direct = e->dist->shard_rank == root && full && e->ops->device == FSDPC_DEVICE_CPU;
  float *tmp = direct ? full : ckpt_buf(e, 0, un);
  if (!direct)
    fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)fb);
  fsdpc_status st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, src, tmp, un->shard_numel,
                                           FSDPC_DTYPE_F32, un->name, err);
  if (!direct && st == FSDPC_OK && e->dist->shard_rank == root && full)
    st = e->ops->download(e->ops->ctx, full, tmp, fb, err);
  if (!direct)
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)fb);
  return st;
}
