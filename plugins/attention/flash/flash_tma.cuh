/* Host side of the sm_90a kernels: TMA tensor maps of the (B, T, H, HD)
 * bf16 activations, encoded through the driver's cuTensorMapEncodeTiled,
 * which is reached with cudaGetDriverEntryPointByVersion so that nothing
 * links libcuda directly. */
#ifndef FSDPC_FLASH_TMA_CUH
#define FSDPC_FLASH_TMA_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

static PFN_cuTensorMapEncodeTiled_v12000 flash_encode_fn(void) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn; /* a benign race: every caller stores the same */
  if (fn == NULL) {
    void *f = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = (PFN_cuTensorMapEncodeTiled_v12000)f;
  }
  return fn;
}

/* A map of the (B, T, H, HD) bf16 tensor at ptr as 4-d (HD, H, T, B) with
 * boxes of 64 columns x 1 head x box_rows rows x 1 batch, 128-byte swizzle;
 * rows past T read as zeros. Returns 0 or a cudaError_t. */
static int flash_make_map(CUtensorMap *map, const void *ptr, int B, int T, int H, int HD,
                          int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = flash_encode_fn();
  if (fn == NULL)
    return (int)cudaErrorNotSupported;
  cuuint64_t dims[4] = {(cuuint64_t)HD, (cuuint64_t)H, (cuuint64_t)T, (cuuint64_t)B};
  cuuint64_t strides[3] = {(cuuint64_t)HD * 2, (cuuint64_t)H * HD * 2, (cuuint64_t)T * H * HD * 2};
  cuuint32_t box[4] = {64, 1, (cuuint32_t)box_rows, 1};
  cuuint32_t elem[4] = {1, 1, 1, 1};
  CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, (void *)ptr, dims, strides, box, elem,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : (int)cudaErrorInvalidValue;
}

/* A map of the (B, T, H, HD) fp32 tensor at ptr (the dq accumulator) as
 * 4-d (HD, H, T, B) with boxes of 32 columns (128 bytes) x 1 head x
 * box_rows rows x 1 batch, 128-byte swizzle: the target of the backward's
 * TMA reduce-adds. Returns 0 or a cudaError_t. */
static int flash_make_map_f32(CUtensorMap *map, float *ptr, int B, int T, int H, int HD,
                              int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = flash_encode_fn();
  if (fn == NULL)
    return (int)cudaErrorNotSupported;
  cuuint64_t dims[4] = {(cuuint64_t)HD, (cuuint64_t)H, (cuuint64_t)T, (cuuint64_t)B};
  cuuint64_t strides[3] = {(cuuint64_t)HD * 4, (cuuint64_t)H * HD * 4, (cuuint64_t)T * H * HD * 4};
  cuuint32_t box[4] = {32, 1, (cuuint32_t)box_rows, 1};
  cuuint32_t elem[4] = {1, 1, 1, 1};
  CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (void *)ptr, dims, strides, box, elem,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : (int)cudaErrorInvalidValue;
}

#endif
