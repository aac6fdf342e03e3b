// Test fixture for check_kernel_names.cmake (ffpa.kernels.kernel_names.catches_mismatch):
// a kernel whose default template argument depends on __CUDA_ARCH__, the bug that made
// every launch fail on the H200 once. The host pass instantiates <3, false>, the device
// pass <3, true>: the check must report the host name the device code lacks.
#include <cuda_runtime.h>

#if defined(__CUDA_ARCH__)
constexpr bool kPassDependent = true;
#else
constexpr bool kPassDependent = false;
#endif

namespace ffpa {

template <int N, bool B = kPassDependent>
__global__ void ffpa_fwd_kernel(int* p) {
  p[0] = N + B;
}

// Launched as the library launches (the kernel's address and cudaLaunchKernel).
cudaError_t launch_mismatch_fixture(int* p) {
  void* args[] = {&p};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&ffpa_fwd_kernel<3>), dim3(1), dim3(1), args, 0, nullptr);
}

}  // namespace ffpa
