// Launchers (flash-attention's *_launch_template.h): grid/block shapes, shared-memory
// opt-in, the impl switch. Each generated instance file includes this header and
// explicitly instantiates run_fwd<head dim, dtype> once.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "ffpa/fwd_kernel_mma.cuh"
#include "ffpa/fwd_kernel_simt.cuh"
#include "ffpa/kernel_traits.h"
#include "ffpa/params.h"
#include "ffpa/static_switch.h"

namespace ffpa {

template <DType kDType>
struct DTypeElement;
template <>
struct DTypeElement<DType::kFp16> {
  using type = __half;
};
template <>
struct DTypeElement<DType::kBf16> {
  using type = __nv_bfloat16;
};

Status launch_status(cudaError_t err, const char* what);  // api.cu

template <typename Traits>
Status run_fwd_mma(const FwdParams& params) {
  const dim3 grid((params.nq + Traits::kBlockM - 1) / Traits::kBlockM, params.hq, params.b);
  const auto kernel = &ffpa_fwd_mma_kernel<Traits>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in, per device.
  if (Traits::kSmemBytes > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (err != cudaSuccess) return launch_status(err, "cudaFuncSetAttribute (shared memory opt-in)");
  }
  // cudaLaunchKernel returns this launch's own status; `<<<>>>` followed by
  // cudaGetLastError() would also report (and clear) an earlier, unrelated error.
  void* args[] = {const_cast<FwdParams*>(&params)};
  return launch_status(cudaLaunchKernel(kernel, grid, dim3(Traits::kNThreads), args, Traits::kSmemBytes,
                                        static_cast<cudaStream_t>(params.stream)),
                       "mma forward kernel launch");
}

template <int kHeadDim, typename T>
Status run_fwd_simt(const FwdParams& params) {
  const dim3 grid((params.nq + FwdSimtTraits::kRowsPerBlock - 1) / FwdSimtTraits::kRowsPerBlock, params.hq,
                  params.b);
  const auto kernel = &ffpa_fwd_simt_kernel<kHeadDim, T>;
  void* args[] = {const_cast<FwdParams*>(&params)};
  return launch_status(cudaLaunchKernel(kernel, grid, dim3(FwdSimtTraits::kNThreads), args, 0,
                                        static_cast<cudaStream_t>(params.stream)),
                       "simt forward kernel launch");
}

template <int kHeadDim, DType kDType>
Status run_fwd(const FwdParams& params, Impl impl) {
  using T = typename DTypeElement<kDType>::type;
  return FFPA_IMPL_SWITCH(impl, kImpl, [&] {
    if constexpr (kImpl == Impl::kMma) {
      return run_fwd_mma<DefaultFwdMmaTraits<kHeadDim, T>>(params);
    } else {
      return run_fwd_simt<kHeadDim, T>(params);
    }
  });
}

}  // namespace ffpa
