// The launch seam: every kernel launch of the library goes through launch_kernel. Here,
// for nvcc, a cudaLaunchKernel (its own launch's status; `<<<>>>` followed by
// cudaGetLastError() would also report, and clear, an earlier unrelated error) after the
// shared-memory opt-in. The emulated-device build finds its own ffpa/launch.cuh first
// (csrc/emulated/include), which runs the grid on the CPU emulator.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "ffpa/api.h"

namespace ffpa {

// The status of a CUDA runtime call, with the fix where it is a missing arch
// (src/runtime_cuda.cu).
Status launch_status(cudaError_t err, const char* what);

// One launch of `kernel` over `grid` with `threads` threads per block and `smem_bytes` of
// dynamic shared memory on `stream` (a cudaStream_t); args: one per kernel parameter, of
// its type. Above 48 KiB of dynamic shared memory a kernel must opt in, per device.
template <typename... KernelArgs, typename... Args>
Status launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, int threads, int smem_bytes, void* stream,
                     const char* what, const Args&... args) {
  static_assert(sizeof...(KernelArgs) == sizeof...(Args), "one argument per kernel parameter");
  static_assert((std::is_same_v<std::remove_cv_t<std::remove_reference_t<KernelArgs>>, Args> && ...),
                "each argument of its kernel parameter's type");
  if (smem_bytes > 48 * 1024) {
    Status st = launch_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
                              "cudaFuncSetAttribute (shared memory opt-in)");
    if (!st.ok()) return st;
  }
  void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&args))...};
  return launch_status(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, dim3(threads), ptrs,
                                        static_cast<size_t>(smem_bytes), static_cast<cudaStream_t>(stream)),
                       what);
}

}  // namespace ffpa
