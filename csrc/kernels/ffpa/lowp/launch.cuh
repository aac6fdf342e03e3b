// The low-precision paths' launcher of one head dim: the workspace (stream-ordered, on the
// caller's stream), the quantisation pass, the kernel of the resolved impl, the workspace's
// release. Host code; each generated ffpa_fwd_d<D>_lowp.cu instantiates run_fwd_lowp_d<D>
// beside the kernels it launches (cute/launch.cuh's run_fwd_lowp_kernel;
// cmake/FfpaKernelInstances.cmake).
#pragma once

#include "ffpa/cute/spec.h"
#include "ffpa/launch_common.cuh"
#include "ffpa/lowp/layout.h"
#include "ffpa/params.h"

namespace ffpa {

template <int kHeadDim>
Status run_fwd_lowp_d(const FwdParams& params, DType dtype, Impl impl) {
  const bool fp4 = impl == Impl::kCuteTmaFp4;
  if (!fp4 && impl != Impl::kCuteFp8 && impl != Impl::kCuteTmaFp8)
    return {ErrorKind::kImpl, std::string("internal: impl '") + impl_name(impl) +
                                  "' reached the low-precision launcher (expected cute_fp8, cute_tma_fp8 or cute_tma_fp4)"};
  // FP8 and NVFP4 share the tile (config.h), so one layout rule serves both.
  using Spec = DefaultLowpFwdSpec<kHeadDim, LowpQK::kFp8>;
  static_assert(Spec::kBlockM == DefaultLowpFwdSpec<kHeadDim, LowpQK::kNvfp4>::kBlockM, "one tile for FP8 and NVFP4");
  FwdParams p = params;
  p.lowp = lowp_layout(fp4 ? LowpQK::kNvfp4 : LowpQK::kFp8, p.b, p.hq, p.hkv, p.nq, p.nkv, kHeadDim, Spec::kBlockM,
                       Spec::kBlockN);
  // Stream-ordered: CUDA graph capture records it as a graph allocation, and the caching
  // pool makes repeated calls free of cudaMalloc's synchronisation.
  void* ws = nullptr;
  Status st = runtime::malloc_async(&ws, p.lowp.bytes, p.stream, "low-precision workspace (cudaMallocAsync)");
  if (!st.ok()) return st;
  p.lowp_ws = static_cast<const unsigned char*>(ws);
  st = quantize_lowp(p, dtype, static_cast<unsigned char*>(ws));
  if (st.ok()) {
    st = fp4                          ? run_fwd_lowp_kernel<kHeadDim, LowpQK::kNvfp4, Load::kTma>(p)
         : impl == Impl::kCuteTmaFp8 ? run_fwd_lowp_kernel<kHeadDim, LowpQK::kFp8, Load::kTma>(p)
                                     : run_fwd_lowp_kernel<kHeadDim, LowpQK::kFp8, Load::kCpAsync>(p);
  }
  const Status freed = runtime::free_async(ws, p.stream, "low-precision workspace release (cudaFreeAsync)");
  return st.ok() ? freed : st;
}

}  // namespace ffpa
