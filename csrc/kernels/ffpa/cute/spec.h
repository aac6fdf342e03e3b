// The CuTe forward kernel's specification: head dim, element type, tile (config.h),
// atom set and the two policies the CPU emulator swaps to check its breakages. No CuTe
// types, only what the launcher needs (block and grid shape, shared memory). The
// kernel template is parameterised by this spec; its CuTe traits (traits.cuh) are
// derived from it inside the kernel body, which only device code instantiates.
#pragma once

#include <cuda_fp16.h>  // __half: the low-precision specs' placeholder T

#include <type_traits>

#include "ffpa/cute/config.h"
#include "ffpa/lowp/layout.h"

namespace ffpa {

// The sm_80+ atom set (defined in atoms.cuh, device code): mma m16n8k16 with fp32 or
// (kF16Acc) fp16 accumulation, ldmatrix, cp.async, TMA. LowpAtoms<kQK>: the FP8 / NVFP4
// set (Q K^T on e4m3 or NVFP4, P V on e4m3; ffpa/lowp/layout.h).
template <typename T, bool kF16Acc>
struct Sm80Atoms;
// The low-precision atoms' breakage policy: the release's is none; the CPU emulator swaps
// in broken ones (csrc/tests/emulate_cute.h) and requires its runs to fail.
struct LowpNoBreak {
  static constexpr bool kTruncateP = false;      // P to e4m3 rounding toward zero, not to nearest
  static constexpr bool kSwapSfLanes = false;    // NVFP4: row g's scales in lane 4g + 1, row g + 8's in 4g
  static constexpr bool kReverseSfBytes = false;  // NVFP4: a row's four scales in reverse byte order
};
template <LowpQK kQK, typename Break = LowpNoBreak>
struct LowpAtoms;

template <typename Atoms>
struct AtomsIsLowp : std::false_type {};
template <LowpQK kQK, typename Break>
struct AtomsIsLowp<LowpAtoms<kQK, Break>> : std::true_type {
  static constexpr LowpQK kQKv = kQK;
};

// kSwizzleBits: the 16-bit tiles' swizzle, 3 = the 128-byte swizzle TMA writes; 2
// (64-byte) exists for the CPU emulator's wrong-swizzle breakage. kWarpOrderDMajor: the
// tiled MMA's warp order; the kernel assumes CuTe's column-major one, the other exists for
// the emulator's wrong-partition breakage.
//
// T: the element of the 16-bit paths (__half, __nv_bfloat16). The low-precision kernels
// (Atoms = LowpAtoms) read byte tiles that the quantisation pass wrote and write fp16 or
// bf16 as FwdParams::out_dtype says; their T is __half and unused.
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

  // Element widths in bits: Q and K (16, e4m3 8, NVFP4 4), V and P (16 or e4m3 8).
  static constexpr bool kLowp = AtomsIsLowp<Atoms>::value;
  static constexpr bool kNvfp4 = [] {
    if constexpr (AtomsIsLowp<Atoms>::value) {
      return AtomsIsLowp<Atoms>::kQKv == LowpQK::kNvfp4;
    } else {
      return false;
    }
  }();
  static constexpr int kQKBits = !kLowp ? 16 : kNvfp4 ? 4 : 8;
  static constexpr int kVBits = kLowp ? 8 : 16;
  // The width in bytes of one shared-memory swizzle slab (and TMA box) of each operand:
  // 128 bytes (64 16-bit columns, the 128-byte swizzle); the low-precision tiles keep 64
  // columns per slab, so 64 bytes for e4m3 (the 64-byte swizzle) and 32 for NVFP4 (the
  // 32-byte swizzle).
  static constexpr int kQKSlabBytes = 64 * kQKBits / 8;
  static constexpr int kVSlabBytes = 64 * kVBits / 8;

  // Shared memory, in bytes: 1024 bytes of alignment slack (the swizzle acts on address
  // bits up to bit 9, as TMA's does, so every tile starts on a 1024-byte boundary; the
  // dynamic shared memory base is only guaranteed 16-byte aligned), then Q, the K / V
  // stages, P (4x2, 2x4 only), the row exchange, and for TMA one mbarrier per stage and
  // one for Q. A stage holds a K step (kBlockN x kBlockD) or a V step (the same element
  // count; the low-precision V step is V^T, kBlockD x kBlockN).
  static constexpr int kAlign = 1024;
  static constexpr int kQBytes = kBlockM * kHeadDim * kQKBits / 8;
  static constexpr int kKBytes = kBlockN * kBlockD * kQKBits / 8;
  static constexpr int kVBytes = kBlockN * kBlockD * kVBits / 8;
  static constexpr int kStageBytes = kKBytes > kVBytes ? kKBytes : kVBytes;
  static constexpr int kPBytes = kNWarpsD > 1 ? kBlockM * kBlockN * kVBits / 8 : 0;
  static constexpr int kRedFloats = kNWarpsD > 1 ? kNWarpsD * kBlockM : 0;
  static constexpr int kTileBytes = kQBytes + kStages * kStageBytes + kPBytes + kRedFloats * 4;
  static constexpr int kSmemBytes = kAlign + kTileBytes;
  static constexpr int kBarOffset = (kTileBytes + 7) / 8 * 8;  // from the aligned base
  static constexpr int kNBarriers = kStages + 1;
  static constexpr int kSmemBytesTma = kAlign + kBarOffset + kNBarriers * 8;
  // 99 KiB: what one block may use on sm_89 and the sm_120 family.
  static_assert(kSmemBytesTma <= 99 * 1024, "the tile does not fit the 99 KiB of shared memory a block may use");
  static_assert(kQBytes % kAlign == 0 && kStageBytes % kAlign == 0 && kKBytes % (8 * kQKSlabBytes) == 0,
                "every tile (and so every TMA box) starts on a 1024-byte swizzle period");
  static_assert(!kLowp || kBlockN == 64, "a low-precision V^T row is one 64-byte slab of 64 tokens");
};

// The instance a (head dim, element type, accumulator) compiles: the table's tile
// (config.h) and the sm_80+ atoms.
template <int kHeadDim, typename T, bool kF16Acc>
using DefaultCuteFwdSpec = CuteFwdSpec<kHeadDim, T, DefaultCuteTile<kHeadDim, kF16Acc>, Sm80Atoms<T, kF16Acc>>;

// The low-precision instance of a head dim (config.h's low-precision tile).
template <int kHeadDim, LowpQK kQK>
using DefaultLowpFwdSpec = CuteFwdSpec<kHeadDim, __half, DefaultLowpTile<kHeadDim>, LowpAtoms<kQK>>;

}  // namespace ffpa
