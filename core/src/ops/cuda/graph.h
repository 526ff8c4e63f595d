/* CUDA graphs of work on a context's compute stream (plain C; graph.cu):
 * capture a fixed sequence of ops once, then replay it with one launch.
 * Used by the KV-cache decoder for its per-token step, whose kernels,
 * shapes and buffers are the same every step (the positions and tokens it
 * reads live in device memory). */
#ifndef FSDPC_OPS_CUDA_GRAPH_H
#define FSDPC_OPS_CUDA_GRAPH_H

#include "ops/cuda/cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts capturing the compute stream: the ops enqueued next are recorded,
 * not run. */
fsdpc_status fsdpc__cuda_graph_begin(fsdpc_cuda_ctx *ctx, fsdpc_err *err);
/* Ends the capture. ok = 1: *exec gets the instantiated graph; ok = 0 (an op
 * failed while capturing): the capture is dropped and *exec = NULL. Either
 * way the stream is usable again afterwards. */
fsdpc_status fsdpc__cuda_graph_end(fsdpc_cuda_ctx *ctx, int ok, void **exec, fsdpc_err *err);
/* Replays exec on the compute stream. */
fsdpc_status fsdpc__cuda_graph_launch(fsdpc_cuda_ctx *ctx, void *exec, fsdpc_err *err);
void fsdpc__cuda_graph_free(void *exec); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
