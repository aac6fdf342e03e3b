// Launchers of the backward kernels (bwd_kernel_mma.cuh): grid shapes, shared-memory
// opt-in, the three launches in stream order. Each generated backward instance file
// (cmake/FfpaKernelInstances.cmake) includes this header and explicitly instantiates
// run_bwd<head dim, dtype> once.
#pragma once

#include <cuda_runtime.h>

#include "ffpa/bwd_kernel_mma.cuh"
#include "ffpa/bwd_kernel_traits.h"
#include "ffpa/bwd_params.h"
#include "ffpa/launch_common.cuh"

namespace ffpa {

// Grid: row blocks of a sequence x heads x sequences (batch entries, or the packed
// sequences of varlen, whose longest has `rows` rows).
template <typename Traits, bool kRowsAreKeys>
Status run_bwd_main(const BwdParams& params, int rows, int heads, const char* what) {
  const bool varlen = params.mask.cu_seqlens_q != nullptr;
  const dim3 grid((rows + Traits::kBlockM - 1) / Traits::kBlockM, heads, varlen ? params.mask.num_seqs : params.b);
  const auto kernel = &ffpa_bwd_kernel<Traits, kRowsAreKeys>;
  Status st = smem_opt_in(kernel, Traits::kSmemBytes);
  if (!st.ok()) return st;
  void* args[] = {const_cast<BwdParams*>(&params)};
  return launch_status(cudaLaunchKernel(kernel, grid, dim3(Traits::kNThreads), args, Traits::kSmemBytes,
                                        static_cast<cudaStream_t>(params.stream)),
                       what);
}

// The caller (api.cu) has checked the arguments and that the problem is not empty
// (B, Hq, Nq >= 1; Nkv may be 0: dQ is then zero and dK / dV are empty).
template <int kHeadDim, DType kDType>
Status run_bwd(const BwdParams& params) {
  using T = typename DTypeElement<kDType>::type;
  {
    const dim3 grid((params.nq + BwdPreTraits::kRowsPerBlock - 1) / BwdPreTraits::kRowsPerBlock, params.hq, params.b);
    const auto kernel = &ffpa_bwd_preprocess_kernel<kHeadDim, T>;
    void* args[] = {const_cast<BwdParams*>(&params)};
    Status st = launch_status(cudaLaunchKernel(kernel, grid, dim3(BwdPreTraits::kNThreads), args, 0,
                                               static_cast<cudaStream_t>(params.stream)),
                              "backward preprocessing kernel launch");
    if (!st.ok()) return st;
  }
  // The preprocessing pass is per query row: varlen's packed rows need no sequence there.
  const bool varlen = params.mask.cu_seqlens_q != nullptr;
  const int rows_k = varlen ? params.mask.max_seqlen_k : params.nkv;
  const int rows_q = varlen ? params.mask.max_seqlen_q : params.nq;
  if (params.nkv > 0 && rows_k > 0) {
    Status st = run_bwd_main<BwdDkvTraits<kHeadDim, T>, true>(params, rows_k, params.hkv, "dK / dV kernel launch");
    if (!st.ok()) return st;
  }
  if (rows_q == 0) return {};
  return run_bwd_main<BwdDqTraits<kHeadDim, T>, false>(params, rows_q, params.hq, "dQ kernel launch");
}

}  // namespace ffpa
