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

// A swizzled shared-memory atom of 8 rows x one slab of kSlabBytes bytes of elements E:
// 16-byte vector v of row r lands in v ^ (r % (kSlabBytes / 16)) of its 1024 / 512 / 256
// bytes (the 128-, 64- and 32-byte swizzles TMA writes into such boxes: address bits
// [4, 4 + B) XOR bits [7, 7 + B), B = log2(kSlabBytes / 16)); conflict-free for ldmatrix
// and the cp.async writes either way.
template <typename E, int kSlabBytes, int kSwizzleBits = (kSlabBytes == 128 ? 3 : kSlabBytes == 64 ? 2 : 1)>
using SwizzledSlabAtom =
    cute::ComposedLayout<cute::Swizzle<kSwizzleBits, 4, 3>, cute::smem_ptr_flag_bits<int(8 * sizeof(E))>,
                         cute::Layout<cute::Shape<cute::_8, cute::Int<kSlabBytes / int(sizeof(E))>>,
                                      cute::Stride<cute::Int<kSlabBytes / int(sizeof(E))>, cute::_1>>>;

// The CuTe layouts, copies and MMA of a spec (spec.h). Device code (and the CPU
// emulator) only: nvcc's host pass never sees CuTe's layout algebra.
template <typename Spec>
struct CuteFwdTraits : Spec {
  using typename Spec::Atoms;
  using typename Spec::T;
  // Shared-memory elements: the 16-bit type, or bytes (e4m3, or NVFP4 pairs) for the
  // low-precision kernel; Element is the Q / K operand's, ElementV V's and P's.
  using Element = std::conditional_t<Spec::kLowp, cute::float_e4m3_t, typename CuteElement<T>::type>;
  using ElementV = Element;
  using Spec::kBlockD;
  using Spec::kBlockM;
  using Spec::kBlockN;
  using Spec::kHeadDim;
  using Spec::kNThreads;
  using Spec::kNWarpsD;
  using Spec::kNWarpsM;
  static constexpr bool kF16Acc = Atoms::kF16Accum;
  // Columns of the Q / K byte tiles per head-dim column (NVFP4: two values per byte).
  static constexpr int kQKCols = Spec::kLowp ? kHeadDim * Spec::kQKBits / 8 : kHeadDim;
  static constexpr int kKStepCols = Spec::kLowp ? kBlockD * Spec::kQKBits / 8 : kBlockD;
  static constexpr int kKSteps = Spec::kKBytes / kBlockN / 32;                   // mma k-steps of S per K step
  static constexpr int kPvKSteps = kBlockN * Spec::kVBits / 8 / 32;               // mma k-steps of P V
  static_assert(Spec::kSwizzleBits == 3 || Spec::kSwizzleBits == 2,
                "128-byte (3) or, to check the emulator, 64-byte (2)");

  // ---- shared memory. The swizzle acts on the address (cute::smem_ptr_flag: a
  // swizzled pointer over plain layouts), as TMA's does. Partitioning plain layouts also
  // keeps CuTe's compile-time layout algebra (most of a CuTe instance's compile time)
  // cheap. The 16-bit tiles take kSwizzleBits (3 but for the emulator's breakage).
  using SmemAtom = std::conditional_t<Spec::kLowp, SwizzledSlabAtom<Element, Spec::kQKSlabBytes>,
                                      SwizzledSlabAtom<Element, 128, Spec::kSwizzleBits>>;
  using SmemAtomV = std::conditional_t<Spec::kLowp, SwizzledSlabAtom<ElementV, Spec::kVSlabBytes>, SmemAtom>;
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kQKCols>>{}));
  using SmemLayoutKV =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kKStepCols>>{}));
  // V as the B operand of P V: (columns of the step, keys). 16-bit: a view of the K / V
  // step's bytes (V arrives [tokens][d]); low precision: V^T's own tile (it arrives
  // [d][tokens]).
  static auto smem_layout_vt() {  // only its type is used; a function so only one branch is instantiated
    if constexpr (Spec::kLowp) {
      return cute::tile_to_shape(SmemAtomV{}, cute::Shape<cute::Int<kBlockD>, cute::Int<kBlockN>>{});
    } else {
      return cute::composition(SmemLayoutKV{}, cute::make_layout(cute::Shape<cute::Int<kBlockD>, cute::Int<kBlockN>>{},
                                                                 cute::GenRowMajor{}));
    }
  }
  using SmemLayoutVt = decltype(smem_layout_vt());
  // P (4x2, 2x4 only): 64-column atoms, or for 32-key blocks 8 x 32 atoms with the
  // 64-byte swizzle. Written and read (ldmatrix) by this kernel alone, so any swizzle
  // is correct; these keep the reads cheap.
  using SmemAtomP = std::conditional_t<
      Spec::kLowp || kBlockN % 64 == 0, SmemAtomV,
      cute::ComposedLayout<cute::Swizzle<2, 4, 2>, cute::smem_ptr_flag_bits<16>,
                           cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>>>;
  using SmemLayoutP = decltype(cute::tile_to_shape(SmemAtomP{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>{}));
  static_assert(cute::cosize(SmemLayoutQ{}) * sizeof(Element) == Spec::kQBytes &&
                    cute::cosize(SmemLayoutKV{}) * sizeof(Element) == Spec::kKBytes &&
                    cute::cosize(SmemLayoutVt{}) * sizeof(ElementV) == Spec::kVBytes,
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
  using SmemCopyAtomBTrans = cute::Copy_Atom<typename Atoms::SmemCopyBTrans, ElementV>;
  using SmemCopyAtomP = cute::Copy_Atom<typename Atoms::SmemCopyA, ElementV>;
  // Global -> shared (cp.async feed): 16-byte vectors, one slab's worth of threads per row.
  template <int kSlabBytes, typename E>
  using GmemCopyOf = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<typename Atoms::GmemCopy, E>{},
      cute::Layout<cute::Shape<cute::Int<kNThreads * 16 / kSlabBytes>, cute::Int<kSlabBytes / 16>>,
                   cute::Stride<cute::Int<kSlabBytes / 16>, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::Int<16 / int(sizeof(E))>>>{}));
  using GmemTiledCopy = GmemCopyOf<Spec::kLowp ? Spec::kQKSlabBytes : 128, Element>;
  using GmemTiledCopyV = GmemCopyOf<Spec::kLowp ? Spec::kVSlabBytes : 128, ElementV>;
  static constexpr int kCopyRows = kNThreads * 16 / (Spec::kLowp ? Spec::kQKSlabBytes : 128);
  // (NVFP4 is TMA-fed only: the sm_120 family.)
  static_assert(Spec::kNvfp4 || (kBlockM % kCopyRows == 0 && kBlockN % kCopyRows == 0),
                "the cp.async tiles divide evenly over the threads");
};

}  // namespace ffpa
