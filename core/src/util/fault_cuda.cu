/* The CUDA part of fault injection (fault.h): a kernel that traps, for
 * FSDPC_FAULT=kernel=S. The fault is sticky: every later CUDA call of the
 * process fails, as after a real kernel bug or a device fault. */
#include <cuda_runtime.h>

#include "util/fault.h"

static __global__ void trap_kernel(void) {
  __trap();
}

extern "C" void fsdpc__fault_cuda_trap(void *stream) {
  trap_kernel<<<1, 1, 0, (cudaStream_t)stream>>>();
}
