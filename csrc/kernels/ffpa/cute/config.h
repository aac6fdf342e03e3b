// Tile configurations of the CuTe forward kernel, and the one table that picks the
// default for each head dim. Host-compiler friendly (no CUDA or CuTe types): the
// resource report and the docs read the same numbers.
//
// A configuration is one template parameter set (CuteTile<...>); traits.cuh turns it
// into CuTe layouts, tiled copies and a tiled MMA. A tuning sweep instantiates other
// CuteTile<...> sets through the same traits; the release instances take the table's.
#pragma once

#include "ffpa/tile_config.h"

namespace ffpa {

// kBlockM  query rows per block (a multiple of 16 * kNWarpsM: each warp row owns
//          kBlockM / kNWarpsM rows, one or more 16-row mma tiles)
// kBlockN  keys per KV block (Bc)
// kBlockD  head-dim width of one K / V pipeline step: the head dim itself for
//          persist-D (one K tile and one V tile per KV block), 64 for split-D (the
//          KV block streamed in 64-column chunks, the S tile summed over them)
// kNWarpsM x kNWarpsD  the warp layout: kNWarpsD warps share a row group, each with
//          kBlockN / kNWarpsD keys of S and kBlockD / kNWarpsD columns of each O chunk
// kStages  K / V pipeline buffers (2: persist-D's K and V tiles; 3 for split-D)
// Q stays resident in shared memory for the whole KV loop in both schemes
// (FlashAttention-2's resident-Q), O stays in registers.
template <int kBlockM_, int kBlockN_, int kBlockD_, int kNWarpsM_, int kNWarpsD_, int kStages_>
struct CuteTile {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kBlockD = kBlockD_;
  static constexpr int kNWarpsM = kNWarpsM_;
  static constexpr int kNWarpsD = kNWarpsD_;
  static constexpr int kStages = kStages_;
  static constexpr int kNWarps = kNWarpsM * kNWarpsD;
  static constexpr int kNThreads = 32 * kNWarps;
  static_assert(kBlockM % (16 * kNWarpsM) == 0, "each warp row owns whole 16-row mma tiles");
  static_assert(kBlockN % (16 * kNWarpsD) == 0 && kBlockD % (16 * kNWarpsD) == 0,
                "each warp owns whole pairs of 8-wide mma n-tiles (ldmatrix.x4 loads two)");
  static_assert(kBlockD % 64 == 0, "shared tiles are built from 64-column (128-byte) swizzle atoms: the TMA box width");
  static_assert(kBlockM <= 256 && kBlockN <= 256, "a TMA box has at most 256 rows");
  static_assert(kStages >= 2, "at least one K / V step in flight while another is consumed");
};

// The default configuration of a head dim and accumulator (tile_config.h's table):
// persist-D up to 256, split-D above. Register counts and spills are ptxas's (nvcc 13.0); the sm_120f
// compiles are the tightest (they take up to 255 registers where sm_89 / sm_90 take
// 200-240), so the choices below are the largest tiles with no spill there.
//   D = 64        128 x 64 tiles, 4 warps (two 16-row mma tiles per warp)
//   D = 128..256  64 x 64 tiles, 4 warps; Q, K and V tiles of 8..32 KiB each
//                 (D = 256: 96 KiB with the K and V buffers, under the 99 KiB a block
//                 may use on sm_89 and the sm_120 family). D = 256 takes 32-key blocks
//                 (64 keys: 76 bytes of spills on sm_120f, the 128 fp32 O registers
//                 next to S and P). With fp16 accumulation D = 192 and 256 take the
//                 4x2 layout with 32-key blocks (S in fp16 and fp32 next to the O
//                 registers: 20 bytes of spills at D = 192 with 4x1, even with 32 keys)
//   D = 320..512  split-D with the 4x2 warp layout (8 warps; each holds D / 2 columns
//                 of O: 128 fp32 registers at D = 512), three 64-column stages; with
//                 fp16 accumulation 32-key blocks at D = 320 and the 2x4 layout at
//                 D = 512 (4x2 with 64 keys spilled 52 bytes on sm_120f when the K
//                 steps were unrolled)
//   D > 512       split-D with the 2x4 layout (32 query rows), O <= 128 registers
// Registers and spills per instance: ffpa.kernels.no_spills, docs/perf.md.
struct CuteTileParams {
  int block_m, block_n, block_d, warps_m, warps_d, stages;
};
// The numbers live in the one table, tile_config.h (with the measurement of each row).
constexpr CuteTileParams cute_default_tile(int head_dim, bool f16_acc) {
  const TileRow& r = tile_row(head_dim, f16_acc);
  return CuteTileParams{r.cute_block_m, r.cute_block_n, r.cute_block_d == 0 ? head_dim : r.cute_block_d,
                        r.cute_warps_m, r.cute_warps_d, r.cute_stages};
}

template <int kHeadDim, bool kF16Acc>
struct DefaultCuteTileOf {
  static constexpr CuteTileParams kP = cute_default_tile(kHeadDim, kF16Acc);
  using type = CuteTile<kP.block_m, kP.block_n, kP.block_d, kP.warps_m, kP.warps_d, kP.stages>;
};
template <int kHeadDim, bool kF16Acc>
using DefaultCuteTile = typename DefaultCuteTileOf<kHeadDim, kF16Acc>::type;

// The low-precision kernel's tile of a head dim (tile_config.h's lowp columns; 64-key
// blocks).
constexpr CuteTileParams lowp_default_tile(int head_dim) {
  const TileRow& r = tile_row(head_dim, false);
  return CuteTileParams{r.lowp_block_m, 64, r.lowp_block_d == 0 ? head_dim : r.lowp_block_d,
                        r.lowp_warps_m, r.lowp_warps_d, r.lowp_stages};
}
template <int kHeadDim>
struct DefaultLowpTileOf {
  static constexpr CuteTileParams kP = lowp_default_tile(kHeadDim);
  using type = CuteTile<kP.block_m, kP.block_n, kP.block_d, kP.warps_m, kP.warps_d, kP.stages>;
};
template <int kHeadDim>
using DefaultLowpTile = typename DefaultLowpTileOf<kHeadDim>::type;

}  // namespace ffpa
