/* Optimizer state of one unit shard, fp32 (ABI v1) or quantized (an
 * optimizer whose qformat has block > 0, e.g. adamw8bit).
 *
 * Quantized, per unit per rank: parameters with fewer than qf.min_numel
 * elements keep fp32 slots in `state` (n_slots planes of n_f32 floats); the
 * others get one byte per element per slot in `qstate` (n_slots planes of
 * n_q bytes) and one fp32 scale per block per slot in `qscale` (n_slots
 * planes of n_qblocks floats). Blocks are counted from each parameter's
 * first element, so a block never straddles two parameters; a parameter cut
 * by a shard boundary has a partial block on each side. The engine pads
 * shards to a multiple of the block (fsdpc__optim_align), so with parameter
 * sizes that are multiples of the block (every Llama shape) no block is ever
 * cut and the blocks do not depend on the world size.
 *
 * Checkpoints see 2 * n_slots fp32 planes per unit, element-aligned with the
 * shard as v1 slots are: slot s holds the dequantized values and slot
 * n_slots + s ("<name>.absmax") each element's block scale (0 for fp32
 * state). The statedict plugins reshard them element-wise; loading turns
 * them back into codes and scales (the plugin's q_import), bit-exactly when
 * the blocks are the same. */
#ifndef FSDPC_FSDP_QSTATE_H
#define FSDPC_FSDP_QSTATE_H

#include "fsdp/engine.h"

/* The optimizer's qformat (block 0 when it has none); refuses a quantized
 * optimizer that lacks q_export / q_import or has more than 4 slots. */
fsdpc_status fsdpc__qformat_get(const fsdpc_component *c, const fsdpc_optimizer *opt,
                                fsdpc_optim_qformat *out, fsdpc_err *err);
/* The flat-buffer alignment that keeps shard boundaries on block bounds. */
int fsdpc__optim_align(int align, const fsdpc_optim_qformat *qf);
/* Sizes of the quantized state of unit un's shard (see above). */
void fsdpc__qstate_count(const fsdpc_unit *un, const fsdpc_param_info *params,
                         const uint64_t *param_offset, const fsdpc_optim_qformat *qf,
                         uint64_t *n_f32, uint64_t *n_q, uint64_t *n_blocks);
/* Bytes of optimizer state of one slot per element-row: see fsdpc__state_bytes. */
uint64_t fsdpc__qstate_bytes(uint32_t n_slots, uint64_t shard_numel, uint64_t n_f32, uint64_t n_q,
                             uint64_t n_blocks, int quantized);
/* The optimizer's tensors for unit u's shard over the given buffers (device
 * or host copies of master, grad, state, qstate, qscale); returns the count. */
uint32_t fsdpc__optim_tensors(const fsdpc_engine *e, int u, float *master, const float *grad,
                              float *state, uint8_t *qstate, float *qscale,
                              fsdpc_optim_tensor *out);

/* Allocates and initialises unit un's optimizer state; frees it. */
fsdpc_status fsdpc__state_alloc(fsdpc_engine *e, fsdpc_unit *un, fsdpc_err *err);
void fsdpc__state_free(fsdpc_engine *e, fsdpc_unit *un);
uint64_t fsdpc__state_bytes(const fsdpc_engine *e, const fsdpc_unit *un);
/* offload.optimizer with quantized state streams whole units: unit un's
 * state goes into one device buffer as its fp32 planes, then its scale
 * planes (each part rounded up to 256 bytes), then its code planes, each
 * with the strides of the host copy (n_f32, n_qblocks, n_q). Bytes of that
 * buffer for a unit of these counts, and the three parts inside buf. */
uint64_t fsdpc__qstate_stream_bytes(uint32_t n_slots, uint64_t n_f32, uint64_t n_q,
                                    uint64_t n_blocks);
/* Elements per streamed piece: fsdpc__state_piece_elems for fp32 state,
 * whole units (max_shard, the largest shard) for quantized state. */
uint64_t fsdpc__offload_piece_elems(uint64_t buffer_bytes, uint32_t n_slots,
                                    const fsdpc_optim_qformat *qf, uint64_t max_shard);
void fsdpc__qstate_split(const fsdpc_engine *e, const fsdpc_unit *un, void *buf, float **f32,
                         float **scale, uint8_t **codes);
/* Optimizer slots as checkpoints see them (2 * n_slots when quantized). */
uint32_t fsdpc__ckpt_slots(const fsdpc_engine *e);

/* Checkpoint views of quantized state: slot 0..2*n_slots-1 of unit u as an
 * fp32 host plane of shard_numel (see above); fsdpc__qstate_done with upload
 * writes the planes back into codes and scales, then frees them. */
float *fsdpc__qstate_host_shard(fsdpc_engine *e, int u, int slot, fsdpc_err *err);
fsdpc_status fsdpc__qstate_done(fsdpc_engine *e, int upload, fsdpc_err *err);

#endif
