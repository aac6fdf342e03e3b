// The CuTe forward kernel's specification: head dim, element type, tile (config.h),
// atom set and the two policies the CPU emulator swaps to check its breakages. No CuTe
// types, only what the launcher needs (block and grid shape, shared memory). The
// kernel template is parameterised by this spec; its CuTe traits (traits.cuh) are
// derived from it inside the kernel body, which only device code instantiates.
#pragma once

#include "ffpa/cute/config.h"

namespace ffpa {

// The sm_80+ atom set (defined in atoms.cuh, device code): mma m16n8k16 with fp32 or
// (kF16Acc) fp16 accumulation, ldmatrix, cp.async, TMA.
template <typename T, bool kF16Acc>
struct Sm80Atoms;

// kSwizzleBits: 3 = the 128-byte swizzle TMA writes; 2 (64-byte) exists for the CPU
// emulator's wrong-swizzle breakage. kWarpOrderDMajor: the tiled MMA's warp order; the
// kernel assumes CuTe's column-major one, the other exists for the emulator's
// wrong-partition breakage.
template <int kHeadDim_, typename T_, typename Tile_, typename Atoms_, int kSwizzleBits_ = 3,
          bool kWarpOrderDMajor_ = false>
struct CuteFwdSpec {
  using T = T_;  // the PTX wrappers' element type (__half, __nv_bfloat16)
  using Tile = Tile_;
  using Atoms = Atoms_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kSwizzleBits = kSwizzleBits_;
  static constexpr bool kWarpOrderDMajor = kWarpOrderDMajor_;
  static constexpr int kBlockM = Tile::kBlockM;
  static constexpr int kBlockN = Tile::kBlockN;
  static constexpr int kBlockD = Tile::kBlockD;
  static constexpr int kNWarpsM = Tile::kNWarpsM;
  static constexpr int kNWarpsD = Tile::kNWarpsD;
  static constexpr int kStages = Tile::kStages;
  static constexpr int kNThreads = Tile::kNThreads;
  static constexpr bool kPersistD = kBlockD == kHeadDim;
  static constexpr int kNChunks = kHeadDim / kBlockD;  // K (then V) steps per KV block
  static constexpr int kStepsPerBlock = 2 * kNChunks;
  static_assert(kHeadDim % kBlockD == 0, "the head dim is a whole number of K / V steps");
  static_assert(sizeof(T) == 2, "fp16 / bf16 elements");

  // Shared memory: 1024 bytes of alignment slack (the swizzle acts on address bits
  // up to bit 9, as TMA's does, so every tile starts on a 1024-byte boundary; the
  // dynamic shared memory base is only guaranteed 16-byte aligned), then Q, the K / V
  // stages, P (4x2, 2x4 only), the row exchange, and for TMA one mbarrier per stage
  // and one for Q.
  static constexpr int kAlign = 1024;
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kBlockD;
  static constexpr int kPElems = kNWarpsD > 1 ? kBlockM* kBlockN : 0;
  static constexpr int kRedFloats = kNWarpsD > 1 ? kNWarpsD* kBlockM : 0;
  static constexpr int kTileBytes = (kQElems + kStages * kKVElems + kPElems) * 2 + kRedFloats * 4;
  static constexpr int kSmemBytes = kAlign + kTileBytes;
  static constexpr int kBarOffset = (kTileBytes + 7) / 8 * 8;  // from the aligned base
  static constexpr int kNBarriers = kStages + 1;
  static constexpr int kSmemBytesTma = kAlign + kBarOffset + kNBarriers * 8;
  // 99 KiB: what one block may use on sm_89 and the sm_120 family.
  static_assert(kSmemBytesTma <= 99 * 1024, "the tile does not fit the 99 KiB of shared memory a block may use");
  static_assert(kQElems * 2 % kAlign == 0 && kKVElems * 2 % kAlign == 0,
                "every tile (and so every 64-column TMA box) starts on a 1024-byte swizzle period");
};

// The instance a (head dim, element type, accumulator) compiles: the table's tile
// (config.h) and the sm_80+ atoms.
template <int kHeadDim, typename T, bool kF16Acc>
using DefaultCuteFwdSpec = CuteFwdSpec<kHeadDim, T, DefaultCuteTile<kHeadDim, kF16Acc>, Sm80Atoms<T, kF16Acc>>;

}  // namespace ffpa
