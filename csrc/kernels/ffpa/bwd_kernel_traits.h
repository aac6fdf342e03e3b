// Tile shapes and warp layouts of the backward kernels (bwd_kernel_mma.cuh).
// Both main kernels share one body: a block owns kBlockM "rows" (16 per warp row) and
// streams 64-wide "column" blocks past them; the dQ kernel's rows are queries and its
// columns keys, the dK / dV kernel's rows are keys and its columns queries.
#pragma once

namespace ffpa {

// Warp layouts (rows x head dim), chosen so that a thread's fp32 gradient accumulators
// stay at <= 128 registers next to the S and dP tiles (the forward's bound: above it
// ptxas spilled, kernel_traits.h):
//   dQ:      16 x D / kNWarpsD / 2 accumulators per thread (the forward's O).
//            4x1 at D = 64 (32), 4x2 to D = 256 (64), 2x4 above (D = 512: 64;
//            D = 1024: 128). The forward keeps 4x1 to D = 256, but the backward holds a
//            second 16 x 64 tile (dP) next to S and its fully unrolled steps keep more
//            addresses live: 4x1 at D = 128 spilled 20 bytes on sm_89 (nvcc 13.0).
//   dK, dV:  two accumulators, 2 x 16 x D / kNWarpsD / 2 per thread.
//            4x1 at D = 64 (64), 4x2 at D = 128 (64), 2x4 to D = 512 (D = 512: 128,
//            the forward's 4x2 count at D = 512). Above 512 the 2x4 layout needs 256
//            (D = 1024): it compiles, with spills, for the selectable head dims only.
// kNWarpsD is at most 4: a warp's share of the 64 columns must be two 8-wide mma
// n-tiles (ldmatrix.x4 loads pairs).
//
// Persist-D (D <= 128) or split-D (above). Split-D streams, per column block, the row
// operands' and the column operands' 64-wide D chunks through a kStages ring: the
// block's own rows (K and V, or Q and dO) are loaded again for every column block and
// the first column operand (Q, or K) twice (for S and for the dS product), so per
// column block it moves (2 kBlockM + 3 x 64) x D elements: 5 x 64 x D at 64 rows.
// Persist-D keeps the rows resident for the block's whole loop (loaded once: 2 kBlockM
// x D) and takes each column operand whole-D once per column block, in three whole-D
// slots (two for the first operand, which the S and dS products both read, one for the
// second): 2 x 64 x D per column block, 2.5x less shared-memory fill traffic than
// split-D, flash-attention 2's traffic. Its shared memory is (2 kBlockM + 3 x 64) x D +
// the P and dS tiles, 16-bit: 56 KiB at D = 64 and 96 KiB at D = 128 (64 rows), under
// the 99 KiB a block may use on sm_89 and the sm_120 family; at D = 192 it would take
// 104 KiB (32 rows) to 136 KiB (64 rows), so split-D stays above 128 (its 64 / 44 KiB
// do not grow with D). Rows of the whole-D resident region are the same swizzled
// [rows][64] chunk tiles, C = D / 64 of them per operand, so both forms share every
// fragment loader.
struct BwdTileRow {
  int max_head_dim;
  int dq_warps_m, dq_warps_d;
  int dkv_warps_m, dkv_warps_d;
  int stages;      // split-D: the ring's depth; persist-D: 3 (the whole-D column slots)
  bool persist_d;  // rows resident, column operands whole-D (above)
  const char* measured;
};

inline constexpr BwdTileRow kBwdTileTable[] = {
    {64, 4, 1, 4, 1, 3, true, "estimate: no spills on sm_89 / sm_120f (ptxas); never timed"},
    {128, 4, 2, 4, 2, 3, true, "estimate: no spills on sm_89 / sm_120f (ptxas); never timed"},
    {256, 4, 2, 2, 4, 3, false, "estimate: no spills on sm_89 / sm_120f (ptxas); never timed"},
    {512, 2, 4, 2, 4, 3, false, "estimate: no spills on sm_89 / sm_120f (ptxas); never timed"},
    {1024, 2, 4, 2, 4, 3, false, "estimate: emulation only (csrc/tests/emu); dK / dV spill above D = 512"},
};

constexpr const BwdTileRow& bwd_tile_row(int head_dim) {
  for (const BwdTileRow& r : kBwdTileTable)
    if (head_dim <= r.max_head_dim) return r;
  return kBwdTileTable[sizeof(kBwdTileTable) / sizeof(kBwdTileTable[0]) - 1];
}

template <int kHeadDim_, typename Element_, int kNWarpsM_, int kNWarpsD_, int kStages_, bool kPersistD_>
struct BwdMmaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kPersistD = kPersistD_;
  static constexpr int kNWarpsM = kNWarpsM_;
  static constexpr int kNWarpsD = kNWarpsD_;
  static constexpr int kNWarps = kNWarpsM * kNWarpsD;
  static constexpr int kNThreads = kNWarps * 32;

  static constexpr int kBlockM = 16 * kNWarpsM;  // rows of the block
  static constexpr int kBlockN = 64;             // columns per streamed block
  static constexpr int kBlockD = 64;             // D chunk (128-byte rows: the swizzle period)
  static constexpr int kStages = kStages_;
  static constexpr int kNChunks = kHeadDim / kBlockD;
  // Pipeline steps per column block: kNChunks for S (row and column operand chunks),
  // kNChunks for dP (and dV), kNChunks for the dS product (column operand chunks).
  static constexpr int kStepsPerBlock = 3 * kNChunks;

  static constexpr int kWarpN = kBlockN / kNWarpsD;  // S / dP columns per warp
  static constexpr int kWarpNTiles = kWarpN / 8;
  static constexpr int kWarpD = kBlockD / kNWarpsD;  // gradient columns per warp per chunk
  static constexpr int kWarpDTiles = kWarpD / 8;
  static constexpr int kKSteps = kBlockD / 16;  // mma k-steps of S / dP per chunk
  static constexpr int kNKSteps = kBlockN / 16;  // mma k-steps of the P / dS products

  static constexpr int kVecsPerRow = kBlockD / 8;
  static constexpr int kRowCopies = kBlockM * kVecsPerRow / kNThreads;
  static constexpr int kColCopies = kBlockN * kVecsPerRow / kNThreads;

  static constexpr int kRowTileElems = kBlockM * kBlockD;
  static constexpr int kColTileElems = kBlockN * kBlockD;
  static constexpr int kStageElems = kRowTileElems + kColTileElems;
  static constexpr int kPElems = kBlockM * kBlockN;  // one 16-bit [rows][64] P or dS tile
  // Persist-D: the resident rows (two operands of kNChunks [rows][64] chunk tiles each)
  // and the whole-D column slots (kNChunks [64][64] chunk tiles each).
  static constexpr int kRowOperandElems = kNChunks * kRowTileElems;
  static constexpr int kColOperandElems = kNChunks * kColTileElems;
  static constexpr int kPersistElems = 2 * kRowOperandElems + kStages * kColOperandElems;
  // Split-D: the stages; persist-D: the resident rows and the column slots. Then the P
  // tile (dK / dV kernel: the A operand of dV += P^T dO) and the dS tile (both kernels),
  // 16-bit.
  static constexpr int kSmemBytes = ((kPersistD ? kPersistElems : kStages * kStageElems) + 2 * kPElems) * 2;
  // The TMA-fed variant (bwd_kernel_mma.cuh, Load::kTma): the tiles start on a 1024-byte
  // boundary (the 128-byte swizzle's period; the dynamic shared memory base is only
  // 16-byte aligned, so up to 1008 bytes of slack), and the 8-byte mbarriers follow the
  // dS tile: persist-D one for the resident rows and one per column slot, split-D one per
  // stage. Every tile is a multiple of 8 rows of 128 bytes, so each box lands on a
  // 1024-byte boundary too. D = 128 persist-D: 98,304 + 1,024 + 32 bytes, under 99 KiB.
  static constexpr int kTmaAlign = 1024;
  static constexpr int kNBars = kPersistD ? 1 + kStages : kStages;
  static constexpr int kBarOffset = kSmemBytes;  // a multiple of 8 (16-bit tiles of 64-wide rows)
  static constexpr int kSmemBytesTma = kTmaAlign + kBarOffset + kNBars * 8;

  static_assert(kHeadDim % 64 == 0 && kHeadDim >= 64 && kHeadDim <= 1024,
                "head dims are multiples of 64 up to 1024 (FFPA_HEAD_DIMS)");
  static_assert(sizeof(Element) == 2, "fp16/bf16 only");
  static_assert(kStages >= 2, "the cp.async pipeline needs at least two stages");
  static_assert(!kPersistD || kStages == 3, "persist-D has three whole-D column slots (two first-operand, one second)");
  static_assert(kSmemBytesTma <= 99 * 1024, "the tiles do not fit the 99 KiB of shared memory a block may use");
  static_assert(kRowTileElems * 2 % kTmaAlign == 0 && kColTileElems * 2 % kTmaAlign == 0,
                "every TMA box must start on a 1024-byte swizzle-atom boundary");
  static_assert(kBlockM <= 256 && kBlockN <= 256, "a TMA box has at most 256 rows");
  static_assert(kWarpNTiles % 2 == 0 && kWarpDTiles % 2 == 0, "ldmatrix.x4 loads two 8-wide n-tiles at a time");
  static_assert(kBlockM * kVecsPerRow % kNThreads == 0 && kBlockN * kVecsPerRow % kNThreads == 0,
                "copies must divide evenly over the threads");
};

template <int kHeadDim, typename Element>
using BwdDqTraits = BwdMmaTraits<kHeadDim, Element, bwd_tile_row(kHeadDim).dq_warps_m,
                                 bwd_tile_row(kHeadDim).dq_warps_d, bwd_tile_row(kHeadDim).stages,
                                 bwd_tile_row(kHeadDim).persist_d>;
template <int kHeadDim, typename Element>
using BwdDkvTraits = BwdMmaTraits<kHeadDim, Element, bwd_tile_row(kHeadDim).dkv_warps_m,
                                  bwd_tile_row(kHeadDim).dkv_warps_d, bwd_tile_row(kHeadDim).stages,
                                  bwd_tile_row(kHeadDim).persist_d>;

// The preprocessing pass: one warp per query row, 4 rows per block.
struct BwdPreTraits {
  static constexpr int kRowsPerBlock = 4;
  static constexpr int kNThreads = kRowsPerBlock * 32;
};

}  // namespace ffpa
