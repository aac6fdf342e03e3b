// The masked CuTe forward kernel's launches in the CPU emulator for one head dim
// (ffpa/cute/fwd_kernel.cuh with kMasked: the sliding window, seqused_k and varlen of
// ffpa/mask.h), both feeds, fp16 and bf16, fp32 accumulation and (fp16) fp16 accumulation. Included by each generated emu_cute_masks_d<D>.cpp with
// FFPA_EMU_CUTE_D defined (csrc/tests/bwd_tests.cmake: the release head dims, CuTe's
// templates making each file take tens of seconds); emulate_masks.cpp runs them on its case
// list next to the mma kernel's masked instance (emu/emu_cute.h, launch_cute_masked).
#include <type_traits>

#include "emu_cute.h"
#include "ffpa/cute/fwd_kernel.cuh"
#include "ffpa/mask.h"
#include "ffpa/tma_geometry.h"

#ifndef FFPA_EMU_CUTE_D
#error "define FFPA_EMU_CUTE_D (the head dim) before including emulate_masks_cute.h"
#endif

namespace emu {
namespace {

template <typename Spec, ffpa::Load kLoad, ffpa::MaskBreak kBreak>
void cute_masked_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_cute_kernel<Spec, kLoad, /*kMasked=*/true, kBreak>(p, g_tma_maps);
}

// As the launcher does (cute/launch.cuh: launch_cute_kernel with kMasked, launch_fwd_cute's
// maps): the grid covers the longest sequence in varlen; TMA boxes of kBlockM / kBlockN rows.
template <typename Spec, bool kTma, ffpa::MaskBreak kBreak>
CuteBlock launch_masked_feed(const ffpa::FwdParams& p) {
  const bool varlen = p.mask.cu_seqlens_q != nullptr;
  const int rows = varlen ? p.mask.max_seqlen_q : p.nq;
  const Dim3 grid{unsigned((rows + Spec::kBlockM - 1) / Spec::kBlockM), unsigned(p.hq),
                  unsigned(varlen ? p.mask.num_seqs : p.b)};
  if constexpr (kTma) {
    g_tma_maps.q = encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, Spec::kBlockM));
    g_tma_maps.k = encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, Spec::kBlockN));
    g_tma_maps.v = encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, Spec::kBlockN));
    launch(&cute_masked_body<Spec, ffpa::Load::kTma, kBreak>, p, grid, Spec::kNThreads, Spec::kSmemBytesTma);
  } else {
    launch(&cute_masked_body<Spec, ffpa::Load::kCpAsync, kBreak>, p, grid, Spec::kNThreads, Spec::kSmemBytes);
  }
  return {Spec::kBlockM, Spec::kBlockN};
}

// The breakage instances are compiled for D = 64 fp16 only, each for the feed its run uses
// (emulate_masks.cpp, run_cute_mask_breakages).
template <int D, typename T>
CuteBlock launch_masked(const CuteMaskedLaunch& c, const ffpa::FwdParams& p) {
  using Spec = ffpa::DefaultCuteFwdSpec<D, T, false>;
  using ffpa::MaskBreak;
  if (c.f16acc) {
    if constexpr (std::is_same_v<T, __half>) {
      using F16Spec = ffpa::DefaultCuteFwdSpec<D, T, true>;
      if (c.brk == MaskBreak::kNone)
        return c.tma ? launch_masked_feed<F16Spec, true, MaskBreak::kNone>(p)
                     : launch_masked_feed<F16Spec, false, MaskBreak::kNone>(p);
    }
    fail("the masked CuTe kernel's fp16 accumulation: fp16 inputs, no breakage variant (emulate_masks_cute.h)");
  }
  if (c.brk == MaskBreak::kNone)
    return c.tma ? launch_masked_feed<Spec, true, MaskBreak::kNone>(p) : launch_masked_feed<Spec, false, MaskBreak::kNone>(p);
  if constexpr (D == 64 && std::is_same_v<T, __half>) {
    if (c.tma) {
      if (c.brk == MaskBreak::kTmaTailNotZeroed) return launch_masked_feed<Spec, true, MaskBreak::kTmaTailNotZeroed>(p);
    } else {
      switch (c.brk) {
        case MaskBreak::kLowerEdge:
          return launch_masked_feed<Spec, false, MaskBreak::kLowerEdge>(p);
        case MaskBreak::kSeqOffset:
          return launch_masked_feed<Spec, false, MaskBreak::kSeqOffset>(p);
        case MaskBreak::kPaddedKeyCounted:
          return launch_masked_feed<Spec, false, MaskBreak::kPaddedKeyCounted>(p);
        case MaskBreak::kFlagsIgnored:
          return launch_masked_feed<Spec, false, MaskBreak::kFlagsIgnored>(p);
        case MaskBreak::kNoSkip:
          return launch_masked_feed<Spec, false, MaskBreak::kNoSkip>(p);
        default:
          break;
      }
    }
  }
  fail("this masked CuTe breakage is not compiled for this head dim, dtype and feed (emulate_masks_cute.h)");
}

}  // namespace

#define FFPA_EMU_CAT2(a, b) a##b
#define FFPA_EMU_CAT(a, b) FFPA_EMU_CAT2(a, b)
CuteBlock FFPA_EMU_CAT(launch_cute_masked_d, FFPA_EMU_CUTE_D)(const CuteMaskedLaunch& c, const ffpa::FwdParams& p) {
  return c.bf16 ? launch_masked<FFPA_EMU_CUTE_D, __nv_bfloat16>(c, p) : launch_masked<FFPA_EMU_CUTE_D, __half>(c, p);
}

}  // namespace emu
