// Launchers (flash-attention's *_launch_template.h): grid/block shapes, shared-memory
// opt-in, tensor maps for the TMA path, the impl and accumulator switches. Each generated instance file includes this header and
// explicitly instantiates run_fwd<head dim, dtype> once.
#pragma once

// FFPA_WITH_CUTE=0: the plain kernel set (csrc/CMakeLists.txt, FFPA_KERNEL_SET), whose
// library has no CuTe instance to call.
#ifndef FFPA_WITH_CUTE
#define FFPA_WITH_CUTE 1
#endif
#include <string>

#include "ffpa/fwd_kernel_mma.cuh"
#include "ffpa/launch_common.cuh"
#include "ffpa/fwd_kernel_simt.cuh"
#include "ffpa/kernel_traits.h"
#include "ffpa/params.h"
#include "ffpa/static_switch.h"

namespace ffpa {

// The mma / TMA grid: row blocks of a sequence x query heads x sequences (batch entries,
// or the packed sequences of varlen, whose longest has max_seqlen_q rows).
template <typename Traits>
dim3 fwd_grid(const FwdParams& params) {
  const bool varlen = params.mask.cu_seqlens_q != nullptr;
  const int rows = varlen ? params.mask.max_seqlen_q : params.nq;
  return dim3((rows + Traits::kBlockM - 1) / Traits::kBlockM, params.hq, varlen ? params.mask.num_seqs : params.b);
}

template <typename Traits, bool kF16Acc, bool kMasked = false>
Status run_fwd_mma(const FwdParams& params) {
  const dim3 grid = fwd_grid<Traits>(params);
  const auto kernel = &ffpa_fwd_kernel<Traits, Load::kCpAsync, kF16Acc, 0, MaskBreak::kNone, kMasked>;
  TmaMaps unused{};  // the cp.async feed has no tensor maps
  return launch_kernel(kernel, grid, Traits::kNThreads, Traits::kSmemBytes, params.stream, "mma forward kernel launch",
                       params, unused);
}

template <typename Traits, bool kF16Acc, DType kDType>
Status run_fwd_tma(const FwdParams& params) {
  TmaMaps maps;
  Status st = encode_tma_maps(params, kDType, Traits::kBlockM, Traits::kBlockN, &maps);
  if (!st.ok()) return st;
  const dim3 grid = fwd_grid<Traits>(params);
  const auto kernel = mask_active(params.mask) ? &ffpa_fwd_kernel<Traits, Load::kTma, kF16Acc, 0, MaskBreak::kNone, true>
                                               : &ffpa_fwd_kernel<Traits, Load::kTma, kF16Acc>;
  return launch_kernel(kernel, grid, Traits::kNThreads, Traits::kSmemBytesTma, params.stream,
                       "tma forward kernel launch", params, maps);
}

template <int kHeadDim, typename T>
Status run_fwd_simt(const FwdParams& params) {
  const dim3 grid((params.nq + FwdSimtTraits::kRowsPerBlock - 1) / FwdSimtTraits::kRowsPerBlock, params.hq,
                  params.b);
  return launch_kernel(&ffpa_fwd_simt_kernel<kHeadDim, T>, grid, FwdSimtTraits::kNThreads, 0, params.stream,
                       "simt forward kernel launch", params);
}

// fp16 accumulation is compiled for fp16 instances only (src/validate.cpp refuses it for bf16
// before any launch).
template <int kHeadDim, DType kDType>
Status run_fwd(const FwdParams& params, Impl impl) {
  using T = typename DTypeElement<kDType>::type;
  using Traits = DefaultFwdMmaTraits<kHeadDim, T>;
  // The masks (ffpa/mask.h) live in the mma and CuTe kernels' feeds only (src/validate.cpp refuses the
  // other impls before any launch; this keeps a direct caller from a silent unmasked run).
  if (mask_active(params.mask) && impl != Impl::kMma && impl != Impl::kTma && impl != Impl::kCute &&
      impl != Impl::kCuteTma)
    return Status{ErrorKind::kImpl,
                  "the sliding window, seqused_k and varlen run on impl 'mma', 'tma', 'cute' or 'cute_tma' only"};
  return FFPA_IMPL_SWITCH(impl, kImpl, [&] {
    if constexpr (kImpl == Impl::kSimt) {
      return run_fwd_simt<kHeadDim, T>(params);
    } else if constexpr (kImpl == Impl::kCute || kImpl == Impl::kCuteTma) {
#if FFPA_WITH_CUTE
      return run_fwd_cute<kHeadDim, kDType, kImpl == Impl::kCute ? Load::kCpAsync : Load::kTma>(
          params);  // its own instance file
#else
      // The plain kernel set (FFPA_KERNEL_SET=plain) has no CuTe instance files; src/validate.cpp
      // refuses impl cute / cute_tma first (has_cute()), so this is never reached.
      return Status{ErrorKind::kImpl, "the CuTe kernels are not compiled in this build (FFPA_KERNEL_SET=plain)"};
#endif
    } else {
      return FFPA_ACCUM_SWITCH(params.accum, kF16Acc, [&] {
        if constexpr (kF16Acc && kDType != DType::kFp16) {
          return Status{ErrorKind::kDType, "fp16 accumulation needs fp16 inputs"};
        } else if constexpr (kImpl == Impl::kTma) {
          return run_fwd_tma<Traits, kF16Acc, kDType>(params);
        } else if (mask_active(params.mask)) {
          // Calls with a window, seqused_k or varlen: the masked instance (ffpa/mask.h).
          return run_fwd_mma<MaskedFwdMmaTraits<kHeadDim, T, Load::kCpAsync>, kF16Acc, true>(params);
        } else {
          return run_fwd_mma<Traits, kF16Acc>(params);
        }
      });
    }
  });
}

}  // namespace ffpa
