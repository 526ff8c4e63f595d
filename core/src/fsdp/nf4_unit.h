/* QLoRA's frozen base (issue 37): a frozen unit that holds a linear
 * projection keeps its flat parameter as bytes, the unit's "NF4 image":
 * its parameters in unit order, each projection quantized whole (as
 * bitsandbytes quantizes a Linear's weight: quant/nf4.h) and laid out as
 *   codes ((n + 1) / 2 bytes), then its scales: absmax (4 * blocks) or,
 *   with double quantization, qabsmax (blocks), absmax2 (4 * blocks2) and
 *   the offset (4),
 * every other parameter (norms) in the compute dtype (act_size bytes an
 * element); fp32 values are stored little-endian at whatever byte offset
 * they fall (read with memcpy). The image, zero-padded to S equal shards,
 * is sharded like any unit's flat parameter; a gather all-gathers the
 * shards' bytes and dequantizes the image into the unit's compute-dtype
 * full buffer at each parameter's flat offset, so the model's kernels see
 * the same flat unit as without quantization. The planner (memplan.c) and
 * the engine size it with the same function. */
#ifndef FSDPC_FSDP_NF4_UNIT_H
#define FSDPC_FSDP_NF4_UNIT_H

#include <stdint.h>

#include "fsdp/engine.h"
#include "quant/nf4.h"

/* Whether parameter kind k is one of the 7 projections NF4 quantizes. */
static inline int fsdpc__nf4_kind(int k) {
  return k >= FSDPC_P_Q && k <= FSDPC_P_DOWN;
}

/* Marks (un->nf4) the frozen units of lay that hold a projection; a no-op
 * when block is 0 (quantization.method none). */
void fsdpc__nf4_mark_units(fsdpc_layout *lay, const fsdpc_param_info *params, int block);

/* The unit's image bytes (unpadded) under block/double_quant with
 * act_size-byte other parameters, and one shard's (the image cut into S). */
uint64_t fsdpc__nf4_unit_bytes(const fsdpc_unit *un, const fsdpc_param_info *params, int block,
                               int dq, int act_size);
static inline uint64_t fsdpc__nf4_unit_shard(uint64_t unit_bytes, int S) {
  return (unit_bytes + (uint64_t)S - 1) / (uint64_t)S;
}

/* The image of a unit from its full fp32 values (flat, at param_offset):
 * image has shard * S bytes (the padding is zeroed). */
fsdpc_status fsdpc__nf4_unit_pack(const fsdpc_unit *un, const fsdpc_param_info *params,
                                  const uint64_t *param_offset, int block, int dq, int act_size,
                                  const float *full, uint8_t *image, uint64_t image_bytes,
                                  fsdpc_err *err);

/* The unit's full buffer in the compute dtype (act_size 4: fp32, 2: bf16
 * rounded from the fp32 dequantization) from its image; map:
 * fsdpc__dynamic_map's. The flat padding is left as it is. */
fsdpc_status fsdpc__nf4_unit_unpack(const fsdpc_unit *un, const fsdpc_param_info *params,
                                    const uint64_t *param_offset, int block, int dq, int act_size,
                                    const float map[FSDPC_DYN_CODES], const uint8_t *image,
                                    void *full, fsdpc_err *err);

/* The same on a device (ops->nf4_dequant, ops->copy_on), ordered on stream
 * (NULL: compute); image and full are device memory (ops NULL: the host
 * unpack above). Bit for bit the host
 * unpack at act_size 2 (tests/cuda/test_cuda_nf4.c checks the kernel). */
struct fsdpc_ops;
fsdpc_status fsdpc__nf4_unit_unpack_dev(const fsdpc_unit *un, const fsdpc_param_info *params,
                                        const uint64_t *param_offset, int block, int dq,
                                        int act_size, const struct fsdpc_ops *ops,
                                        const float map[FSDPC_DYN_CODES], const uint8_t *image,
                                        void *full, void *stream, fsdpc_err *err);

/* Packing on a device (random init with ops->nf4_quant, quantized there
 * instead of on the host): make(arg, p, x, err) writes parameter p's full
 * fp32 values into x (device memory); image (device, image_bytes = the
 * padded image) gets the bytes fsdpc__nf4_unit_pack makes from the same
 * values, bit for bit (bf16 compute only: act_size 2). scratch: device
 * memory of fsdpc__nf4_pack_dev_scratch bytes, 256-byte aligned. Returns
 * with the device idle. */
typedef fsdpc_status (*fsdpc_nf4_make_fn)(void *arg, int p, float *x, fsdpc_err *err);
uint64_t fsdpc__nf4_pack_dev_scratch(const fsdpc_unit *un, const fsdpc_param_info *params,
                                     int block);
fsdpc_status fsdpc__nf4_unit_pack_dev(const fsdpc_unit *un, const fsdpc_param_info *params,
                                      int block, int dq, const struct fsdpc_ops *ops,
                                      const float map[FSDPC_DYN_CODES], fsdpc_nf4_make_fn make,
                                      void *arg, uint8_t *image, uint64_t image_bytes,
                                      void *scratch, fsdpc_err *err);

#endif
