/* CUDA graphs of compute-stream work (graph.h). */
#include "ops/cuda/cuda_internal.cuh"
#include "ops/cuda/graph.h"

extern "C" fsdpc_status fsdpc__cuda_graph_begin(fsdpc_cuda_ctx *ctx, fsdpc_err *err) {
  FSDPC_CUDA_TRY(err, cudaStreamBeginCapture(ctx->compute, cudaStreamCaptureModeThreadLocal));
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_graph_end(fsdpc_cuda_ctx *ctx, int ok, void **exec,
                                              fsdpc_err *err) {
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture(ctx->compute, &g);
  *exec = NULL;
  if (e != cudaSuccess || !ok || !g) {
    if (g)
      cudaGraphDestroy(g);
    (void)cudaGetLastError(); /* a failed capture is not a sticky error */
    if (ok)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: capturing a graph failed: %s",
                         cudaGetErrorString(e));
    return FSDPC_OK;
  }
  cudaGraphExec_t x = NULL;
  e = cudaGraphInstantiate(&x, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: instantiating a graph failed: %s",
                       cudaGetErrorString(e));
  }
  *exec = x;
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_graph_launch(fsdpc_cuda_ctx *ctx, void *exec, fsdpc_err *err) {
  FSDPC_CUDA_TRY(err, cudaGraphLaunch((cudaGraphExec_t)exec, ctx->compute));
  return FSDPC_OK;
}

extern "C" void fsdpc__cuda_graph_free(void *exec) {
  if (exec)
    cudaGraphExecDestroy((cudaGraphExec_t)exec);
}
