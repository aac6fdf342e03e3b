// Launchers of the CuTe kernel (fwd_kernel.cuh): grid and block from the traits, the
// shared-memory opt-in, the tensor maps of the TMA feed, the accumulator switch. The
// generated instance files ffpa_fwd_d<D>_cute.cu and ffpa_fwd_d<D>_lowp.cu include this
// header and explicitly instantiate run_fwd_cute<D, dtype, feed> for every dtype and feed,
// and run_fwd_lowp_kernel<D, kQK, feed> for each low-precision kernel
// (cmake/FfpaKernelInstances.cmake).
#pragma once

#include "ffpa/cute/fwd_kernel.cuh"
#include "ffpa/launch_common.cuh"
#include "ffpa/static_switch.h"

namespace ffpa {

// One launch of the CuTe kernel of a spec and feed with the given maps (the cp.async feed
// ignores them): the shared-memory opt-in, the grid of query blocks x heads x sequences
// (batch entries, or in varlen the packed sequences, whose longest has max_seqlen_q rows).
template <typename Spec, Load kLoad, bool kMasked = false>
Status launch_cute_kernel(const FwdParams& params, TmaMaps& maps, const char* what) {
  constexpr int kSmem = kLoad == Load::kTma ? Spec::kSmemBytesTma : Spec::kSmemBytes;
  const auto kernel = &ffpa_fwd_cute_kernel<Spec, kLoad, kMasked>;
  const bool varlen = kMasked && params.mask.cu_seqlens_q != nullptr;
  const int rows = varlen ? params.mask.max_seqlen_q : params.nq;
  const dim3 grid((rows + Spec::kBlockM - 1) / Spec::kBlockM, params.hq, varlen ? params.mask.num_seqs : params.b);
  return launch_kernel(kernel, grid, Spec::kNThreads, kSmem, params.stream, what, params, maps);
}

template <typename Spec, Load kLoad, DType kDType, bool kMasked = false>
Status launch_fwd_cute(const FwdParams& params) {
  constexpr bool kTma = kLoad == Load::kTma;
  TmaMaps maps{};  // the cp.async feed has none
  if constexpr (kTma) {
    Status st = encode_tma_maps(params, kDType, Spec::kBlockM, Spec::kBlockN, &maps);
    if (!st.ok()) return st;
  }
  return launch_cute_kernel<Spec, kLoad, kMasked>(params, maps,
                                                  kTma ? "cute_tma forward kernel launch" : "cute forward kernel launch");
}

// fp16 accumulation is compiled for fp16 instances only (src/validate.cpp refuses it for bf16
// before any launch). Calls with a window, seqused_k or varlen (mask_active) run the masked
// instance of the same spec (the head dim's CuTe file holds both: docs/perf.md, "Build cost
// of the CuTe paths").
template <int kHeadDim, DType kDType, Load kLoad>
Status run_fwd_cute(const FwdParams& params) {
  using T = typename DTypeElement<kDType>::type;
  return FFPA_ACCUM_SWITCH(params.accum, kF16Acc, [&] {
    if constexpr (kF16Acc && kDType != DType::kFp16) {
      return Status{ErrorKind::kDType, "fp16 accumulation needs fp16 inputs"};
    } else if (mask_active(params.mask)) {
      return launch_fwd_cute<DefaultCuteFwdSpec<kHeadDim, T, kF16Acc>, kLoad, kDType, /*kMasked=*/true>(params);
    } else {
      return launch_fwd_cute<DefaultCuteFwdSpec<kHeadDim, T, kF16Acc>, kLoad, kDType>(params);
    }
  });
}

// The low-precision kernel on the workspace the caller quantised (lowp/launch.cuh).
template <int kHeadDim, LowpQK kQK, Load kLoad>
Status run_fwd_lowp_kernel(const FwdParams& params) {
  using Spec = DefaultLowpFwdSpec<kHeadDim, kQK>;
  constexpr bool kTma = kLoad == Load::kTma;
  TmaMaps maps{};
  if constexpr (kTma) {
    Status st = encode_lowp_tma_maps(params, Spec::kBlockM, Spec::kBlockN, Spec::kBlockD, Spec::kQKSlabBytes, &maps);
    if (!st.ok()) return st;
  }
  return launch_cute_kernel<Spec, kLoad>(params, maps,
                                         kQK == LowpQK::kNvfp4 ? "cute_tma_fp4 forward kernel launch"
                                         : kTma               ? "cute_tma_fp8 forward kernel launch"
                                                              : "cute_fp8 forward kernel launch");
}

}  // namespace ffpa
