// The CuTe kernel launches of the CPU emulator for one head dim (the kernel source of
// csrc/kernels/ffpa/cute/ run by the emulator's fibers). Included by each generated
// emu_cute_d<D>.cpp with FFPA_EMU_CUTE_D defined; see emu/emu_cute.h.
#include <type_traits>

#include "emu_cute.h"
#include "ffpa/cute/fwd_kernel.cuh"
#include "ffpa/tma_geometry.h"

#ifndef FFPA_EMU_CUTE_D
#error "define FFPA_EMU_CUTE_D (the head dim) before including emulate_cute.h"
#endif

namespace emu {
// kKTransAtom: ldmatrix.trans under the non-transposing atom's traits (below).
struct LdsmX4RunsTrans : ffpa::cute_ops::LdsmX4 {
  static void copy(cute::uint128_t const& smem_row, uint32_t& d0, uint32_t& d1, uint32_t& d2, uint32_t& d3) {
    ffpa::cute_ops::LdsmX4Trans::copy(smem_row, d0, d1, d2, d3);
  }
};
}  // namespace emu

namespace cute {
template <>
struct Copy_Traits<emu::LdsmX4RunsTrans> : Copy_Traits<SM75_U32x4_LDSM_N> {};
}  // namespace cute

namespace emu {
namespace {

template <typename Spec, ffpa::Load kLoad>
void cute_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_cute_kernel<Spec, kLoad>(p, g_tma_maps);
}

// The launcher's geometry (ffpa/tma_geometry.h, boxes of kBlockM / kBlockN rows), its
// grid, block and shared memory (cute/launch.cuh), the kernel run by the emulator.
template <typename CT, bool kTma>
void launch_feed(const CuteLaunch& c, const ffpa::FwdParams& p) {
  const Dim3 grid{unsigned((c.nq + CT::kBlockM - 1) / CT::kBlockM), unsigned(c.hq), unsigned(c.b)};
  if constexpr (kTma) {
    g_tma_maps.q = encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, CT::kBlockM));
    g_tma_maps.k = encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, CT::kBlockN));
    g_tma_maps.v = encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, CT::kBlockN));
    launch(&cute_body<CT, ffpa::Load::kTma>, p, grid, CT::kNThreads, CT::kSmemBytesTma);
  } else {
    launch(&cute_body<CT, ffpa::Load::kCpAsync>, p, grid, CT::kNThreads, CT::kSmemBytes);
  }
}
template <typename CT>
void launch_traits(const CuteLaunch& c, const ffpa::FwdParams& p) {
  if (c.tma) return launch_feed<CT, true>(c, p);
  launch_feed<CT, false>(c, p);
}

template <typename T>
struct KTransAtoms : ffpa::Sm80Atoms<T, false> {
  using SmemCopyB = LdsmX4RunsTrans;
};
template <typename T>
struct Fp16AtomAtoms : ffpa::Sm80Atoms<T, false> {
  using MmaOp = ffpa::cute_ops::Mma16816F32<__half>;
};

// The breakage variants are compiled only for what the breakage runs use
// (emulate_kernels.cpp, run_cute_breakages), to keep the emulator's build short.
template <int D, typename T>
void launch_variant(const CuteLaunch& c, const ffpa::FwdParams& p) {
  using Tile = ffpa::DefaultCuteTile<D, false>;
  constexpr bool kFp16 = std::is_same_v<T, __half>;
  if (c.variant == CuteVariant::kDefault) {
    if (!c.f16acc) return launch_traits<ffpa::DefaultCuteFwdSpec<D, T, false>>(c, p);
    if constexpr (kFp16) return launch_traits<ffpa::DefaultCuteFwdSpec<D, T, true>>(c, p);
    fail("fp16 accumulation takes fp16 inputs");
  }
  if constexpr (D == 64 && kFp16) {
    if (c.variant == CuteVariant::kSwizzle64 && c.tma)
      return launch_feed<ffpa::CuteFwdSpec<D, T, Tile, ffpa::Sm80Atoms<T, false>, 2>, true>(c, p);
    if (c.variant == CuteVariant::kKTransAtom && !c.tma)
      return launch_feed<ffpa::CuteFwdSpec<D, T, Tile, KTransAtoms<T>>, false>(c, p);
  }
  if constexpr (D == 64 && !kFp16) {
    if (c.variant == CuteVariant::kFp16AtomForBf16 && !c.tma)
      return launch_feed<ffpa::CuteFwdSpec<D, T, Tile, Fp16AtomAtoms<T>>, false>(c, p);
  }
  if constexpr (D == 320 && kFp16) {
    if (c.variant == CuteVariant::kWarpOrderDMajor && !c.tma)
      return launch_feed<ffpa::CuteFwdSpec<D, T, Tile, ffpa::Sm80Atoms<T, false>, 3, true>, false>(c, p);
  }
  fail(
      "this CuTe breakage variant is not compiled for this head dim, dtype and feed "
      "(emulate_cute.h: the combinations the breakage runs use)");
}

// The low-precision kernel: the launcher's maps (lowp_tma_geometry) and geometry.
template <typename Spec, bool kTma>
void launch_lowp_feed(const ffpa::FwdParams& p) {
  const Dim3 grid{unsigned((p.nq + Spec::kBlockM - 1) / Spec::kBlockM), unsigned(p.hq), unsigned(p.b)};
  if constexpr (kTma) {
    const ffpa::LowpLayout& l = p.lowp;
    g_tma_maps.q = encode_tiled(p.lowp_ws + l.q8,
                                ffpa::lowp_tma_geometry(l, ffpa::TmaOperand::kQ, Spec::kBlockM, Spec::kQKSlabBytes));
    if (p.nkv > 0) {
      g_tma_maps.k = encode_tiled(p.lowp_ws + l.k8, ffpa::lowp_tma_geometry(l, ffpa::TmaOperand::kK, Spec::kBlockN,
                                                                            Spec::kQKSlabBytes));
      g_tma_maps.v = encode_tiled(p.lowp_ws + l.vt8, ffpa::lowp_tma_geometry(l, ffpa::TmaOperand::kV, Spec::kBlockD,
                                                                             Spec::kQKSlabBytes));
    }
    launch(&cute_body<Spec, ffpa::Load::kTma>, p, grid, Spec::kNThreads, Spec::kSmemBytesTma);
  } else {
    launch(&cute_body<Spec, ffpa::Load::kCpAsync>, p, grid, Spec::kNThreads, Spec::kSmemBytes);
  }
}

struct TruncateP : ffpa::LowpNoBreak {
  static constexpr bool kTruncateP = true;
};
struct SwapSfLanes : ffpa::LowpNoBreak {
  static constexpr bool kSwapSfLanes = true;
};
struct ReverseSfBytes : ffpa::LowpNoBreak {
  static constexpr bool kReverseSfBytes = true;
};
template <int D, ffpa::LowpQK kQK, typename Break>
using BrokenLowpSpec = ffpa::CuteFwdSpec<D, __half, ffpa::DefaultLowpTile<D>, ffpa::LowpAtoms<kQK, Break>>;

template <int D>
void launch_lowp(const LowpLaunch& c, const ffpa::FwdParams& p) {
  using ffpa::Impl;
  using ffpa::LowpQK;
  if (c.variant != LowpVariant::kDefault) {
    if constexpr (D == 64) {
      if (c.variant == LowpVariant::kTruncateP && c.impl == Impl::kCuteFp8)
        return launch_lowp_feed<BrokenLowpSpec<D, LowpQK::kFp8, TruncateP>, false>(p);
      if (c.variant == LowpVariant::kSwapSfLanes && c.impl == Impl::kCuteTmaFp4)
        return launch_lowp_feed<BrokenLowpSpec<D, LowpQK::kNvfp4, SwapSfLanes>, true>(p);
      if (c.variant == LowpVariant::kReverseSfBytes && c.impl == Impl::kCuteTmaFp4)
        return launch_lowp_feed<BrokenLowpSpec<D, LowpQK::kNvfp4, ReverseSfBytes>, true>(p);
    }
    fail("this low-precision breakage variant is not compiled for this head dim and impl (emulate_cute.h)");
  }
  if (c.impl == Impl::kCuteFp8) return launch_lowp_feed<ffpa::DefaultLowpFwdSpec<D, LowpQK::kFp8>, false>(p);
  if (c.impl == Impl::kCuteTmaFp8) return launch_lowp_feed<ffpa::DefaultLowpFwdSpec<D, LowpQK::kFp8>, true>(p);
  if (c.impl == Impl::kCuteTmaFp4) return launch_lowp_feed<ffpa::DefaultLowpFwdSpec<D, LowpQK::kNvfp4>, true>(p);
  fail("not a low-precision kernel impl");
}

}  // namespace

#define FFPA_EMU_CAT2(a, b) a##b
#define FFPA_EMU_CAT(a, b) FFPA_EMU_CAT2(a, b)
void FFPA_EMU_CAT(launch_cute_d, FFPA_EMU_CUTE_D)(const CuteLaunch& c, const ffpa::FwdParams& p) {
  if (c.bf16) {
    launch_variant<FFPA_EMU_CUTE_D, __nv_bfloat16>(c, p);
  } else {
    launch_variant<FFPA_EMU_CUTE_D, __half>(c, p);
  }
}

void FFPA_EMU_CAT(launch_lowp_d, FFPA_EMU_CUTE_D)(const LowpLaunch& c, const ffpa::FwdParams& p) {
  launch_lowp<FFPA_EMU_CUTE_D>(c, p);
}

}  // namespace emu
