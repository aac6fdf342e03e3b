// The CuTe forward kernel's traits: one tile configuration (config.h) and one atom set
// (atoms.cuh) turned into CuTe layouts, tiled copies and a tiled MMA.
//
// Shared memory tiles are built from one swizzle atom: 8 rows x 64 columns of 16-bit
// elements (8 rows x 128 bytes = 1024 bytes) composed with Swizzle<3,3,3>, i.e. the
// 16-byte vector v of row r lands in vector v ^ (r % 8). That is exactly what the TMA
// unit writes with CU_TENSOR_MAP_SWIZZLE_128B into a 1024-byte aligned box of 64
// columns, and it keeps ldmatrix and cp.async free of bank conflicts. Tiles wider
// than 64 columns are 64-column slabs one after another (tile_to_shape stacks atoms
// down the rows first), so every slab is one TMA box.
#pragma once

#include "ffpa/cute/atoms.cuh"
#include "ffpa/cute/config.h"
#include "ffpa/kernel_traits.h"

namespace ffpa {

template <typename T>
struct CuteElement;
template <>
struct CuteElement<__half> {
  using type = cute::half_t;
};
template <>
struct CuteElement<__nv_bfloat16> {
  using type = cute::bfloat16_t;
};

// kWarpOrderDMajor: how the warps map onto the tiled MMA's (M, N) warp grid. The
// kernel derives each warp's (row group, column group) as (warp % kNWarpsM, warp /
// kNWarpsM), i.e. CuTe's default column-major warp layout; the alternative exists only
// so that the CPU emulator can check that a mismatch is caught.
template <int kHeadDim_, typename T_, typename Tile_, typename Atoms_, int kSwizzleBits_ = 3,
          bool kWarpOrderDMajor_ = false>
struct CuteFwdTraits {
  using T = T_;  // the PTX wrappers' element type (__half, __nv_bfloat16)
  using Element = typename CuteElement<T>::type;
  using Tile = Tile_;
  using Atoms = Atoms_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = Tile::kBlockM;
  static constexpr int kBlockN = Tile::kBlockN;
  static constexpr int kBlockD = Tile::kBlockD;
  static constexpr int kNWarpsM = Tile::kNWarpsM;
  static constexpr int kNWarpsD = Tile::kNWarpsD;
  static constexpr int kStages = Tile::kStages;
  static constexpr int kNThreads = Tile::kNThreads;
  static constexpr bool kF16Acc = Atoms::kF16Accum;
  static constexpr bool kPersistD = kBlockD == kHeadDim;
  static constexpr int kNChunks = kHeadDim / kBlockD;  // K (then V) steps per KV block
  static constexpr int kStepsPerBlock = 2 * kNChunks;
  static constexpr int kKSteps = kBlockD / Atoms::kMmaK;  // mma k-steps of S per K step
  static constexpr int kPvKSteps = kBlockN / Atoms::kMmaK;  // mma k-steps of P V
  static_assert(kHeadDim % kBlockD == 0, "the head dim is a whole number of K / V steps");
  static_assert(kSwizzleBits_ == 3 || kSwizzleBits_ == 2, "128-byte (3) or, to check the emulator, 64-byte (2)");

  // ---- shared memory
  using SmemAtom = decltype(cute::composition(cute::Swizzle<kSwizzleBits_, 3, 3>{},
                                              cute::Layout<cute::Shape<cute::_8, cute::_64>,
                                                           cute::Stride<cute::_64, cute::_1>>{}));
  using SmemLayoutQ =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutKV =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockD>>{}));
  // V as the B operand of P V: (columns of the step, keys), a view of the same bytes.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutKV{}, cute::make_layout(cute::Shape<cute::Int<kBlockD>, cute::Int<kBlockN>>{}, cute::GenRowMajor{})));
  // P (4x2, 2x4 only): 64-column atoms, or for 32-key blocks 8 x 32 atoms with the
  // 64-byte swizzle (vector v of row r in v ^ (r % 4)). Written and read (ldmatrix) by
  // this kernel alone, so any swizzle is correct; these keep the reads cheap.
  using SmemAtomP = std::conditional_t<
      kBlockN % 64 == 0, SmemAtom,
      decltype(cute::composition(cute::Swizzle<2, 3, 2>{},
                                 cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>{}))>;
  using SmemLayoutP =
      decltype(cute::tile_to_shape(SmemAtomP{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>{}));

  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kBlockD;
  static constexpr int kPElems = kNWarpsD > 1 ? kBlockM * kBlockN : 0;  // P through shared memory (4x2, 2x4)
  static constexpr int kRedFloats = kNWarpsD > 1 ? kNWarpsD * kBlockM : 0;  // row max / sum exchange
  static constexpr int kSmemBytes =
      (kQElems + kStages * kKVElems + kPElems) * 2 + kRedFloats * static_cast<int>(sizeof(float));
  // TMA: 1024-byte aligned tiles (up to 1008 bytes of slack behind a 16-byte aligned
  // dynamic shared memory base), then one mbarrier per K / V stage and one for Q.
  static constexpr int kTmaAlign = 1024;
  static constexpr int kBarOffset = (kSmemBytes + 7) / 8 * 8;
  static constexpr int kNBarriers = kStages + 1;
  static constexpr int kSmemBytesTma = kTmaAlign + kBarOffset + kNBarriers * 8;
  // 99 KiB: what one block may use on sm_89 and the sm_120 family.
  static_assert(kSmemBytesTma <= 99 * 1024, "the tile does not fit the 99 KiB of shared memory a block may use");
  static_assert(kQElems * 2 % kTmaAlign == 0 && kKVElems * 2 % kTmaAlign == 0,
                "every tile (and so every 64-column TMA box) starts on a 1024-byte swizzle period");

  // ---- the tiled MMA: kNWarpsM x kNWarpsD warps; each warp row covers 16 rows per
  // mma tile, each warp column 16 columns (two 8-wide n-tiles, one ldmatrix.x4 of B).
  using WarpLayout = std::conditional_t<
      kWarpOrderDMajor_,
      cute::Layout<cute::Shape<cute::Int<kNWarpsM>, cute::Int<kNWarpsD>, cute::_1>,
                   cute::Stride<cute::Int<kNWarpsD>, cute::_1, cute::_0>>,
      cute::Layout<cute::Shape<cute::Int<kNWarpsM>, cute::Int<kNWarpsD>, cute::_1>>>;
  using TiledMma = decltype(cute::make_tiled_mma(
      cute::MMA_Atom<typename Atoms::MmaOp>{}, WarpLayout{},
      cute::Tile<cute::Int<16 * kNWarpsM>, cute::Int<16 * kNWarpsD>, cute::Int<Atoms::kMmaK>>{}));

  // ---- copies
  using SmemCopyAtomA = cute::Copy_Atom<typename Atoms::SmemCopyA, Element>;
  using SmemCopyAtomB = cute::Copy_Atom<typename Atoms::SmemCopyB, Element>;
  using SmemCopyAtomBTrans = cute::Copy_Atom<typename Atoms::SmemCopyBTrans, Element>;
  // Global -> shared (cp.async feed): 16-byte vectors, 8 threads per 64-column row slab.
  static constexpr int kVecElems = 8;
  static constexpr int kThreadsPerRow = 64 / kVecElems;
  using GmemTiledCopy = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<typename Atoms::GmemCopy, Element>{},
      cute::Layout<cute::Shape<cute::Int<kNThreads / kThreadsPerRow>, cute::Int<kThreadsPerRow>>,
                   cute::Stride<cute::Int<kThreadsPerRow>, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::Int<kVecElems>>>{}));
  static_assert(kBlockM % (kNThreads / kThreadsPerRow) == 0 && kBlockN % (kNThreads / kThreadsPerRow) == 0,
                "the cp.async tiles divide evenly over the threads");
};

// The instance a (head dim, element type, accumulator) compiles: the table's tile
// (config.h) and the sm_80+ atoms.
template <int kHeadDim, typename T, bool kF16Acc>
using DefaultCuteFwdTraits = CuteFwdTraits<kHeadDim, T, DefaultCuteTile<kHeadDim, kF16Acc>, Sm80Atoms<T, kF16Acc>>;

}  // namespace ffpa
