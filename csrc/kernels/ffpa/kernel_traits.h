// Tile shapes and warp layouts of the split-D forward kernel. Which layout and how many
// stages a head dim compiles: the one table, tile_config.h.
#pragma once

#include "ffpa/tile_config.h"

namespace ffpa {

// How a kernel's shared-memory tiles are fed (the mma and the CuTe kernels alike):
// kCpAsync, every thread copies 16-byte vectors (sm_80+); kTma, one thread issues
// cp.async.bulk.tensor boxes completing on mbarriers (sm_90+).
enum class Load { kCpAsync, kTma };

// Warp layout along (query rows) x (head dim):
// - Each warp owns 16 query rows (one mma M tile) and D / kNWarpsD columns of O, i.e.
//   D / kNWarpsD / 2 fp32 accumulators per thread.
// - kNWarpsD == 1 (4 warps x 16 rows) up to D = 256: 128 accumulators plus the 32 of
//   the S tile. P stays in registers (the S accumulator layout equals the A-operand
//   layout after packing). Measured with nvcc 13.0, sm_89: 252 registers, no spills
//   at D = 256, but 52 bytes of spills at D = 320 (address and fragment registers
//   push the 160 accumulators over 255), so D = 320 takes the next layout.
// - kNWarpsD == 2 (4x2, 8 warps) for 256 < D <= 512: 128 accumulators at D = 512,
//   where the 4x1 layout would need 256 (> 255 registers: certain spills). The two
//   warps of a row group split the Bc columns of S, exchange the row max through
//   shared memory, and both read the full P tile from shared memory.
// - kNWarpsD == 4 (2x4, 8 warps, 32 query rows) for 512 < D <= 1024: a 4x4 layout
//   would need 512 threads x ~200 registers, over the 64K-register file, so the row
//   block shrinks instead; O stays at <= 128 accumulators per thread.
template <int kHeadDim>
struct FwdWarpLayout {
  static_assert(kHeadDim % 64 == 0 && kHeadDim >= 64 && kHeadDim <= 1024,
                "head dims are multiples of 64 up to 1024 (FFPA_HEAD_DIMS)");
  static constexpr int kNWarpsD = tile_row(kHeadDim, false).mma_warps_d;
  static constexpr int kNWarpsM = tile_row(kHeadDim, false).mma_warps_m;
};

template <int kHeadDim_, typename Element_, int kNWarpsM_, int kNWarpsD_, int kStages_>
struct FwdMmaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kNWarpsM = kNWarpsM_;
  static constexpr int kNWarpsD = kNWarpsD_;
  static constexpr int kNWarps = kNWarpsM * kNWarpsD;
  static constexpr int kNThreads = kNWarps * 32;

  // Br = 16 rows per warp row. Bc = 64: the S tile costs 16 x 64 / 32 = 32 fp32
  // registers per thread in the 4x1 layout (headroom for 160 O accumulators at
  // D = 320), and 64 keys make a 128-byte K row chunk.
  static constexpr int kBlockM = 16 * kNWarpsM;
  static constexpr int kBlockN = 64;
  // D is streamed through shared memory in 64-wide chunks (split-D): a chunk row is
  // 128 bytes = 8 cp.async 16-byte vectors = one full swizzle period, and four mma
  // k-steps per pipeline step amortise the barrier better than 16-wide chunks.
  // Shared memory stays O(1) in D: (Br + Bc) x 64 elements per stage.
  static constexpr int kBlockD = 64;
  static constexpr int kStages = kStages_;

  static constexpr int kNChunks = kHeadDim / kBlockD;
  // Pipeline steps per KV block: kNChunks (Q, K) chunks for S, then kNChunks V chunks.
  static constexpr int kStepsPerBlock = 2 * kNChunks;

  static constexpr int kWarpN = kBlockN / kNWarpsD;  // S columns per warp
  static constexpr int kWarpNTiles = kWarpN / 8;     // mma n-tiles of S per warp
  static constexpr int kWarpD = kBlockD / kNWarpsD;  // O columns per warp per chunk
  static constexpr int kWarpDTiles = kWarpD / 8;     // mma n-tiles of O per warp per chunk
  static constexpr int kKSteps = kBlockD / 16;       // mma k-steps per QK chunk
  static constexpr int kPvKSteps = kBlockN / 16;     // mma k-steps per PV chunk

  // 16-byte vectors per chunk row and copies per thread (all compile-time counts).
  static constexpr int kVecsPerRow = kBlockD / 8;
  static constexpr int kQCopies = kBlockM * kVecsPerRow / kNThreads;
  static constexpr int kKVCopies = kBlockN * kVecsPerRow / kNThreads;

  static constexpr int kQTileElems = kBlockM * kBlockD;
  static constexpr int kKTileElems = kBlockN * kBlockD;
  static constexpr int kVTileElems = kBlockN * kBlockD;
  static constexpr int kStageElems =
      kQTileElems + kKTileElems > kVTileElems ? kQTileElems + kKTileElems : kVTileElems;
  static constexpr int kPElems = kNWarpsD > 1 ? kBlockM * kBlockN : 0;
  static constexpr int kRedFloats = kNWarpsD > 1 ? kNWarpsD * kBlockM : 0;
  static constexpr int kSmemBytes =
      (kStages * kStageElems + kPElems) * 2 + kRedFloats * static_cast<int>(sizeof(float));
  // The TMA-fed variant: the 128-byte swizzle pattern repeats every 1024 bytes, so the
  // stage tiles start on a 1024-byte boundary (the dynamic shared memory base is only
  // guaranteed 16-byte aligned: up to 1008 bytes of slack), and one 8-byte mbarrier
  // per stage follows the reduction scratch.
  static constexpr int kTmaAlign = 1024;
  static constexpr int kBarOffset = (kSmemBytes + 7) / 8 * 8;
  static constexpr int kSmemBytesTma = kTmaAlign + kBarOffset + kStages * 8;

  static_assert(sizeof(Element) == 2, "fp16/bf16 only");
  static_assert(kStages >= 2, "the cp.async pipeline needs at least two stages");
  static_assert(kHeadDim % (kBlockD * 1) == 0, "D must be a multiple of the 64-wide chunk");
  static_assert(kWarpNTiles % 2 == 0 && kWarpDTiles % 2 == 0,
                "ldmatrix.x4 loads two 8-wide n-tiles at a time");
  static_assert(kBlockM * kVecsPerRow % kNThreads == 0 && kBlockN * kVecsPerRow % kNThreads == 0,
                "copies must divide evenly over the threads");
  static_assert(kBlockD == 64, "the XOR swizzle assumes 128-byte chunk rows (= TMA's 128B swizzle span)");
  static_assert(kQTileElems * 2 % kTmaAlign == 0 && kStageElems * 2 % kTmaAlign == 0,
                "every TMA box must start on a 1024-byte swizzle-atom boundary");
  static_assert(kBlockM <= 256 && kBlockN <= 256, "a TMA box has at most 256 rows");
};

// The instance a (head dim, element type) compiles (cp.async- and TMA-fed). Three stages: prefetch distance
// two 16-byte-per-thread steps hides L2 latency; 48 KiB (4x1) / 57 KiB (4x2) of
// shared memory keeps two 4x1 blocks per SM on sm_89 (100 KiB per SM). A 4x2 block
// uses up to 255 registers x 256 threads: one block (8 warps) per SM either way.
template <int kHeadDim, typename Element>
using DefaultFwdMmaTraits = FwdMmaTraits<kHeadDim, Element, FwdWarpLayout<kHeadDim>::kNWarpsM,
                                         FwdWarpLayout<kHeadDim>::kNWarpsD, tile_row(kHeadDim, false).mma_stages>;

// The masked instance (kMasked, ffpa/mask.h) fed by cp.async: the sequence's mask held
// through the main loop costs a few registers, and where the default layout carries 96 or
// more O accumulators per thread (D = 192 and 256 in 4x1, D = 512 in 4x2) that spilled
// (ptxas, nvcc 13.0: 24-132 bytes on sm_89 and sm_120f), so there the D split is one step
// wider (4x2, 2x4: 48-64 accumulators). The TMA feed keeps the default layout (no spills
// measured).
template <int kHeadDim, typename Element, Load kLoad>
struct FwdMaskedLayout {
  static constexpr int kNWarpsD = FwdWarpLayout<kHeadDim>::kNWarpsD;
  static constexpr bool kWiden = kLoad == Load::kCpAsync && kHeadDim / kNWarpsD / 2 >= 96 && kNWarpsD < 4;
  using Traits = FwdMmaTraits<kHeadDim, Element, kWiden ? (kNWarpsD == 1 ? 4 : 2) : FwdWarpLayout<kHeadDim>::kNWarpsM,
                              kWiden ? kNWarpsD * 2 : kNWarpsD, tile_row(kHeadDim, false).mma_stages>;
};
template <int kHeadDim, typename Element, Load kLoad>
using MaskedFwdMmaTraits = typename FwdMaskedLayout<kHeadDim, Element, kLoad>::Traits;

// SIMT kernel: one warp per query row, 4 rows per block.
struct FwdSimtTraits {
  static constexpr int kRowsPerBlock = 4;
  static constexpr int kNThreads = kRowsPerBlock * 32;
};

}  // namespace ffpa
