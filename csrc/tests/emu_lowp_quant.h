// The low-precision quantisation pass (ffpa/lowp/quant.cuh) run by the CPU emulator's
// fibers, as its launcher runs it on a GPU (the same two launches and geometry), and the
// pass's deliberate breakages. Shared by emulate_lowp_quant.cpp (the pass against its host
// reference) and emulate_lowp.cpp (the pass feeding the low-precision kernels).
#pragma once

#include "emu_cute.h"  // emu::launch
#include "ffpa/lowp/quant.cuh"

namespace emu_lowp {

// What the emulated kernels reach besides FwdParams (emu::launch bodies take only that).
inline ffpa::LowpLayout g_layout;
inline unsigned char* g_ws = nullptr;

template <typename T, typename Variant>
void stats_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_lowp_kv_stats_kernel<T, Variant>(p, g_layout, g_ws);
}
template <typename T, typename Variant>
void quant_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_lowp_quant_kernel<T, Variant>(p, g_layout, g_ws);
}

// Both launches of the pass over p's inputs into the workspace ws laid out as l.
// An empty problem launches nothing, as launch_lowp_quant does.
template <typename T, typename Variant = ffpa::LowpQuantExact>
void quantize(const ffpa::FwdParams& p, const ffpa::LowpLayout& l, unsigned char* ws) {
  using G = ffpa::LowpQuantGeometry;
  if (l.b == 0 || l.hq == 0 || l.nq == 0 || l.nkv == 0) return;
  g_layout = l;
  g_ws = ws;
  emu::launch(&stats_body<T, Variant>, p, {unsigned(l.d / G::kStatsCols), unsigned(l.hkv), unsigned(l.b)}, G::kThreads,
              G::kStatsSmemBytes);
  emu::launch(&quant_body<T, Variant>, p, {unsigned(ffpa::lowp_quant_blocks(l)), 1, 1}, G::kThreads,
              G::kQuantSmemBytes);
}

// The broken passes (quant.cuh's policy): the checkers must report each.
struct NoSmoothing : ffpa::LowpQuantExact {
  static constexpr bool kSmoothK = false;
};
struct NoVtPermutation : ffpa::LowpQuantExact {
  static constexpr bool kPermuteVt = false;
};

}  // namespace emu_lowp
