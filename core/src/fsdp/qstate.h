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
#include "fsdp/program.h"

/* Sizes of the quantized state of unit un's shard (see above). */
void fsdpc__qstate_count(const fsdpc_unit *un, const fsdpc_param_info *params,
                         const uint64_t *param_offset, const fsdpc_optim_qformat *qf,
                         uint64_t *n_f32, uint64_t *n_q, uint64_t *n_blocks);
/* Bytes of optimizer state of one slot per element-row: see fsdpc__state_bytes. */
uint64_t fsdpc__qstate_bytes(uint32_t n_slots, uint64_t shard_numel, uint64_t n_f32, uint64_t n_q,
                             uint64_t n_blocks, int quantized);
/* Whether a parameter of numel elements has quantized state; the blocks of
 * n elements starting `phase` elements into a block. */
static inline int fsdpc__qparam(const fsdpc_optim_qformat *qf, uint64_t numel) {
  return qf && qf->block > 0 && numel >= qf->min_numel;
}
static inline uint64_t fsdpc__qblocks(uint64_t n, uint64_t phase, uint32_t block) {
  return n ? (phase + n + block - 1) / block : 0;
}
/* State planes of a range of a unit's shard: fp32 (f, f_stride floats
 * between slots; v1 state, or the small tensors' of quantized state), codes
 * (q, q_stride bytes) and block scales (s, s_stride floats), each pointing
 * at the range's first element or block. */
typedef struct fsdpc_qplanes {
  float *f;
  uint8_t *q;
  float *s;
  uint64_t f_stride, q_stride, s_stride;
} fsdpc_qplanes;
/* The optimizer's tensors for elements [lo, hi) of unit u's shard (master
 * and grad: the whole shard's; the state in pl); returns the count. */
uint32_t fsdpc__optim_tensors_range(const fsdpc_engine *e, int u, uint64_t lo, uint64_t hi,
                                    float *master, const float *grad, const fsdpc_qplanes *pl,
                                    fsdpc_optim_tensor *out);
/* The optimizer's tensors for unit u's shard over the given buffers (device
 * or host copies of master, grad, state, qstate, qscale); returns the count. */
uint32_t fsdpc__optim_tensors(const fsdpc_engine *e, int u, float *master, const float *grad,
                              float *state, uint8_t *qstate, float *qscale,
                              fsdpc_optim_tensor *out);

/* Allocates and initialises unit un's optimizer state; frees it. */
fsdpc_status fsdpc__state_alloc(fsdpc_engine *e, fsdpc_unit *un, fsdpc_err *err);
void fsdpc__state_free(fsdpc_engine *e, fsdpc_unit *un);
uint64_t fsdpc__state_bytes(const fsdpc_engine *e, const fsdpc_unit *un);
/* Optimizer slots as checkpoints see them (2 * n_slots when quantized). */
uint32_t fsdpc__ckpt_slots(const fsdpc_engine *e);

/* Checkpoint views of quantized state: slot 0..2*n_slots-1 of unit u as an
 * fp32 host plane of shard_numel (see above); fsdpc__qstate_done with upload
 * writes the planes back into codes and scales, then frees them. */
float *fsdpc__qstate_host_shard(fsdpc_engine *e, int u, int slot, fsdpc_err *err);
fsdpc_status fsdpc__qstate_done(fsdpc_engine *e, int upload, fsdpc_err *err);

/* qstream.c: offload.optimizer with quantized state (fsdp/offload.c).
 * A unit streams in pieces of at most one buffer; every cut lies on a block
 * bound of the quantized parameter it falls in (blocks are counted from
 * each parameter's first element: a cut elsewhere would give a block two
 * scales) or anywhere in a parameter with fp32 state. A piece's state is,
 * in its device buffer: the fp32 planes, the scale planes (each part
 * rounded up to 256 bytes), then the code planes, each slot after the
 * other (strides: the piece's own counts). */
typedef struct fsdpc_qspan {
  uint64_t f_lo, f_len; /* fp32 state elements before the piece, in it */
  uint64_t q_lo, q_len; /* quantized elements */
  uint64_t b_lo, b_len; /* blocks */
} fsdpc_qspan;
/* The span of elements [lo, hi) of unit un's shard (lo, hi on cuts). */
void fsdpc__qstate_span(const fsdpc_unit *un, const fsdpc_param_info *params,
                        const uint64_t *param_offset, const fsdpc_optim_qformat *qf, uint64_t lo,
                        uint64_t hi, fsdpc_qspan *out);
/* Device buffer bytes of a span's state. */
uint64_t fsdpc__qspan_bytes(uint32_t n_slots, const fsdpc_qspan *sp);
/* The span's planes inside its device buffer buf. */
void fsdpc__qspan_planes(uint32_t n_slots, const fsdpc_qspan *sp, void *buf, fsdpc_qplanes *out);
/* Cuts the units' shards (shard_offset: the rank's) into pieces of at most
 * buffer_bytes of state each (a single block or element larger than that
 * makes a piece of its own); *max_bytes: the largest piece's buffer bytes
 * (at least 256). */
fsdpc_status fsdpc__qstate_pieces_build(const fsdpc_unit *units, int n_units,
                                        const fsdpc_param_info *params,
                                        const uint64_t *param_offset, const fsdpc_optim_qformat *qf,
                                        uint32_t n_slots, uint64_t buffer_bytes,
                                        fsdpc_state_pieces *out, uint64_t *max_bytes,
                                        fsdpc_err *err);

#endif
