// The CuTe forward kernel's traits: one tile configuration (config.h) and one atom set
// (atoms.cuh) turned into CuTe layouts, tiled copies and a tiled MMA.
//
// Shared memory tiles are built from one swizzle atom: 8 rows x 64 columns of 16-bit
// elements (8 rows x 128 bytes = 1024 bytes) with the 128-byte swizzle, i.e. the
// 16-byte vector v of row r lands in vector v ^ (r % 8). That is exactly what the TMA
// unit writes with CU_TENSOR_MAP_SWIZZLE_128B into a 1024-byte aligned box of 64
// columns, and it keeps ldmatrix and cp.async free of bank conflicts. Tiles wider
// than 64 columns are 64-column slabs one after another (tile_to_shape stacks atoms
// down the rows first), so every slab is one TMA box.
#pragma once

#include "ffpa/cute/atoms.cuh"
#include "ffpa/cute/spec.h"
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

// The CuTe layouts, copies and MMA of a spec (spec.h). Device code (and the CPU
// emulator) only: nvcc's host pass never sees CuTe's layout algebra.
template <typename Spec>
struct CuteFwdTraits : Spec {
  using typename Spec::Atoms;
  using typename Spec::T;
  using Element = typename CuteElement<T>::type;
  using Spec::kBlockD;
  using Spec::kBlockM;
  using Spec::kBlockN;
  using Spec::kHeadDim;
  using Spec::kNThreads;
  using Spec::kNWarpsD;
  using Spec::kNWarpsM;
  static constexpr bool kF16Acc = Atoms::kF16Accum;
  static constexpr int kKSteps = kBlockD / Atoms::kMmaK;    // mma k-steps of S per K step
  static constexpr int kPvKSteps = kBlockN / Atoms::kMmaK;  // mma k-steps of P V
  static_assert(Spec::kSwizzleBits == 3 || Spec::kSwizzleBits == 2,
                "128-byte (3) or, to check the emulator, 64-byte (2)");

  // ---- shared memory. The swizzle acts on the address (cute::smem_ptr_flag: a
  // swizzled pointer over plain layouts), as TMA's does: bits [4, 7) of the byte
  // address XOR bits [7, 10), i.e. the 16-byte vector v of row r of a 128-byte-row
  // tile lands in v ^ (r % 8) of a 1024-byte aligned tile. Partitioning plain layouts
  // also keeps CuTe's compile-time layout algebra (most of a CuTe instance's compile
  // time) cheap.
  using SmemAtom =
      cute::ComposedLayout<cute::Swizzle<Spec::kSwizzleBits, 4, 3>, cute::smem_ptr_flag_bits<16>,
                           cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>>;
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockD>>{}));
  // V as the B operand of P V: (columns of the step, keys), a view of the same bytes.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutKV{}, cute::make_layout(cute::Shape<cute::Int<kBlockD>, cute::Int<kBlockN>>{}, cute::GenRowMajor{})));
  // P (4x2, 2x4 only): 64-column atoms, or for 32-key blocks 8 x 32 atoms with the
  // 64-byte swizzle. Written and read (ldmatrix) by this kernel alone, so any swizzle
  // is correct; these keep the reads cheap.
  using SmemAtomP = std::conditional_t<
      kBlockN % 64 == 0, SmemAtom,
      cute::ComposedLayout<cute::Swizzle<2, 4, 2>, cute::smem_ptr_flag_bits<16>,
                           cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>>>;
  using SmemLayoutP = decltype(cute::tile_to_shape(SmemAtomP{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>{}));
  static_assert(cute::cosize(SmemLayoutQ{}) == Spec::kQElems && cute::cosize(SmemLayoutKV{}) == Spec::kKVElems,
                "spec.h's shared memory sizes match the layouts");

  // ---- the tiled MMA: kNWarpsM x kNWarpsD warps; each warp row covers 16 rows per
  // mma tile, each warp column 16 columns (two 8-wide n-tiles, one ldmatrix.x4 of B).
  using WarpLayout = std::conditional_t<Spec::kWarpOrderDMajor,
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

}  // namespace ffpa
