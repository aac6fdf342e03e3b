// CuTe operations on our own PTX wrappers (ffpa/utils.cuh, ffpa/tma.cuh).
//
// CuTe's MMA and copy atoms are a pair: an operation struct (register types plus a
// static fma()/copy() holding the instruction) and its traits (the thread/value
// layouts CuTe partitions with). The operations here call our wrappers instead of
// inline PTX, and their traits reuse CuTe's layouts for the same instructions, so the
// CuTe kernel (fwd_kernel.cuh) partitions exactly as with CuTe's SM80/SM75 atoms
// while every instruction goes through the one set of wrappers that the CPU emulator
// models (csrc/tests/emu/ffpa/*.cuh): the emulator runs this kernel source unchanged.
//
// The atom set a kernel uses is one template parameter (Sm80Atoms below; traits.cuh):
// a new instruction family (e.g. 16x8x32 fp8 mma on sm_89/sm_90, kind::f8f6f4 on the
// sm_120 family) is a new operation + traits pair and a new atom set, not a new kernel.
#pragma once

// cute/tensor.hpp first: the atom headers rely on what it declares.
#include <cute/tensor.hpp>
// clang-format off
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/copy_traits_sm75.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm89.hpp>
// clang-format on

#include <cstdint>

#include "ffpa/lowp/layout.h"
#include "ffpa/lowp/mma.cuh"
#include "ffpa/tma.cuh"
#include "ffpa/utils.cuh"

// The operations are __host__ __device__ like CuTe's own (CuTe's callers are), with
// their instruction on the device side only: nvcc's host pass compiles an empty body.
// The CPU emulator (a host compiler, no __CUDACC__) takes the device side, where the
// wrappers are its models.
#if defined(__CUDA_ARCH__) || !defined(__CUDACC__)
#define FFPA_CUTE_OP_BODY 1
#else
#define FFPA_CUTE_OP_BODY 0
#endif

namespace ffpa {
namespace cute_ops {

// An mma.sync with four A, two B and four fp32 C / D registers, through the wrapper
// Instr (ffpa/utils.cuh, ffpa/lowp/mma.cuh): the m16n8k16 T x T ones (T = __half or
// __nv_bfloat16) and the m16n8k32 e4m3 one share this operation; CuTe's traits for each
// (below) give their different value layouts.
template <typename Instr>
struct MmaF32 {
  using DRegisters = float[4];
  using ARegisters = uint32_t[4];
  using BRegisters = uint32_t[2];
  using CRegisters = float[4];
  CUTE_HOST_DEVICE static void fma(float& d0, float& d1, float& d2, float& d3, uint32_t const& a0, uint32_t const& a1,
                                   uint32_t const& a2, uint32_t const& a3, uint32_t const& b0, uint32_t const& b1,
                                   float const& c0, float const& c1, float const& c2, float const& c3) {
#if FFPA_CUTE_OP_BODY
    float d[4] = {c0, c1, c2, c3};
    const uint32_t a[4] = {a0, a1, a2, a3};
    Instr::run(d, a, b0, b1);
    d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
#endif
  }
};
// mma.sync.m16n8k16.row.col, T x T, fp32 accumulation.
template <typename T>
using Mma16816F32 = MmaF32<Mma16816<T>>;
// mma.sync.m16n8k32.row.col e4m3 x e4m3, fp32 accumulation.
using Mma16832E4m3F32 = MmaF32<Mma16832E4m3>;

// mma.sync.m16n8k16.row.col.f16.f16.f16.f16: fp16 inputs, fp16 accumulation.
struct Mma16816F16 {
  using DRegisters = uint32_t[2];
  using ARegisters = uint32_t[4];
  using BRegisters = uint32_t[2];
  using CRegisters = uint32_t[2];
  CUTE_HOST_DEVICE static void fma(uint32_t& d0, uint32_t& d1, uint32_t const& a0, uint32_t const& a1,
                                   uint32_t const& a2, uint32_t const& a3, uint32_t const& b0, uint32_t const& b1,
                                   uint32_t const& c0, uint32_t const& c1) {
#if FFPA_CUTE_OP_BODY
    uint32_t d[2] = {c0, c1};
    const uint32_t a[4] = {a0, a1, a2, a3};
    Mma16816F16Acc::run(d, a, b0, b1);
    d0 = d[0], d1 = d[1];
#endif
  }
};

// ldmatrix.x4 (four 8x8 b16 matrices; each lane gives one 16-byte row address); kTrans:
// .trans, each 8x8 matrix transposed (V as the B operand).
template <bool kTrans>
struct LdsmX4Op {
  using SRegisters = cute::uint128_t[1];
  using DRegisters = uint32_t[4];
  CUTE_HOST_DEVICE static void copy(cute::uint128_t const& smem_row, uint32_t& d0, uint32_t& d1, uint32_t& d2,
                                    uint32_t& d3) {
#if FFPA_CUTE_OP_BODY
    uint32_t r[4];
    if constexpr (kTrans) {
      ldmatrix_x4_trans(r, &smem_row);
    } else {
      ldmatrix_x4(r, &smem_row);
    }
    d0 = r[0], d1 = r[1], d2 = r[2], d3 = r[3];
#endif
  }
};
using LdsmX4 = LdsmX4Op<false>;
using LdsmX4Trans = LdsmX4Op<true>;

// cp.async.cg 16 bytes global -> shared; pred false zero-fills the 16 bytes and reads
// nothing (src-size 0), which is how rows past the sequence end become zeros.
struct CpAsync16 {
  using SRegisters = cute::uint128_t[1];
  using DRegisters = cute::uint128_t[1];
  CUTE_HOST_DEVICE static void copy(cute::uint128_t const& gmem_src, cute::uint128_t& smem_dst, bool pred) {
#if FFPA_CUTE_OP_BODY
    cp_async_16(&smem_dst, &gmem_src, pred);
#endif
  }
};

// One TMA box (cp.async.bulk.tensor.4d with the map's 128-byte swizzle) into shared
// memory, completing on an mbarrier. Issued by one thread; the CuTe kernel computes
// the destination (a 1024-byte aligned chunk of a swizzled CuTe smem tensor) and the
// box coordinates. The maps are encoded on the host by launch_common.cuh (ffpa/tma_geometry.h),
// not by CuTe's make_tma_copy, so the launcher, the mma kernel's TMA feed and the
// emulator share one encoding.
struct TmaLoad4d {
  CUTE_HOST_DEVICE static void copy(const CUtensorMap* map, uint64_t* bar, void* smem_dst, int c0, int c1, int c2,
                                    int c3) {
#if FFPA_CUTE_OP_BODY
    tma_load_4d(smem_dst, map, c0, c1, c2, c3, bar);
#endif
  }
};

}  // namespace cute_ops

// The atoms of the sm_80+ instruction set for element T: mma m16n8k16 (fp32, or fp16
// accumulation with kF16Acc), ldmatrix x4 for A and B, ldmatrix x4.trans for V, 16-byte
// cp.async for global -> shared. kMmaK: the k extent of one mma.
template <typename T, bool kF16Acc>
struct Sm80Atoms {
  static_assert(!kF16Acc || sizeof(T) == 2, "fp16 accumulation takes fp16 inputs");
  using MmaOp = std::conditional_t<kF16Acc, cute_ops::Mma16816F16, cute_ops::Mma16816F32<T>>;
  using SmemCopyA = cute_ops::LdsmX4;
  using SmemCopyB = cute_ops::LdsmX4;
  using SmemCopyBTrans = cute_ops::LdsmX4Trans;
  using GmemCopy = cute_ops::CpAsync16;
  using Tma = cute_ops::TmaLoad4d;
  static constexpr int kMmaK = 16;
  static constexpr bool kF16Accum = kF16Acc;
  static constexpr bool kLowp = false;
};

// The low-precision atom set (ffpa/lowp/layout.h): Q K^T on e4m3 (kQK = kFp8, the FP8 mma
// below) or on NVFP4 (kNvfp4: the block-scaled mma of ffpa/lowp/mma.cuh, which the kernel
// calls itself because its scale registers are no operand of CuTe's MMA atom; its A and B
// bytes partition like the FP8 mma's, 64 e2m1 values per 32-byte k step), P V on e4m3.
// Operand tiles are bytes; V arrives transposed ([d][tokens]), so every shared -> register
// copy is the non-transposing ldmatrix. kMmaK: the k extent of one mma in bytes (32).
template <LowpQK kQK_, typename Break_>
struct LowpAtoms {
  using Break = Break_;  // LowpNoBreak but in the emulator's breakage runs (spec.h)
  using MmaOp = cute_ops::Mma16832E4m3F32;
  using SmemCopyA = cute_ops::LdsmX4;
  using SmemCopyB = cute_ops::LdsmX4;
  using SmemCopyBTrans = cute_ops::LdsmX4;  // V^T is already k-contiguous
  using GmemCopy = cute_ops::CpAsync16;
  using Tma = cute_ops::TmaLoad4d;
  static constexpr int kMmaK = 32;
  static constexpr bool kF16Accum = false;
  static constexpr bool kLowp = true;
  static constexpr LowpQK kQK = kQK_;
};

}  // namespace ffpa

namespace cute {

template <>
struct MMA_Traits<ffpa::cute_ops::Mma16816F32<__half>> : MMA_Traits<SM80_16x8x16_F32F16F16F32_TN> {};
template <>
struct MMA_Traits<ffpa::cute_ops::Mma16816F32<__nv_bfloat16>> : MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN> {};
template <>
struct MMA_Traits<ffpa::cute_ops::Mma16816F16> : MMA_Traits<SM80_16x8x16_F16F16F16F16_TN> {};

template <>
struct MMA_Traits<ffpa::cute_ops::Mma16832E4m3F32> : MMA_Traits<SM89_16x8x32_F32E4M3E4M3F32_TN> {};

template <>
struct Copy_Traits<ffpa::cute_ops::LdsmX4> : Copy_Traits<SM75_U32x4_LDSM_N> {};
template <>
struct Copy_Traits<ffpa::cute_ops::LdsmX4Trans> : Copy_Traits<SM75_U16x8_LDSM_T> {};

// One thread, 128 bits, with the zero-fill predicate carried in the traits (the way
// CuTe's SM80_CP_ASYNC_CACHEGLOBAL_ZFILL does it): tiled_copy.with(pred).
template <>
struct Copy_Traits<ffpa::cute_ops::CpAsync16> {
  using ThrID = Layout<_1>;
  using SrcLayout = Layout<Shape<_1, _128>>;
  using DstLayout = Layout<Shape<_1, _128>>;
  using RefLayout = SrcLayout;

  bool pred = true;

  CUTE_HOST_DEVICE constexpr Copy_Traits<ffpa::cute_ops::CpAsync16> with(bool p) const { return {p}; }

  template <class TS, class SLayout, class TD, class DLayout>
  CUTE_HOST_DEVICE friend constexpr void copy_unpack(Copy_Traits const& traits, Tensor<TS, SLayout> const& src,
                                                     Tensor<TD, DLayout>& dst) {
    static_assert(is_gmem<TS>::value, "cp.async reads global memory");
    static_assert(is_smem<TD>::value, "cp.async writes shared memory");
    Tensor rs = recast<uint128_t>(src);
    Tensor rd = recast<uint128_t>(dst);
    CUTE_STATIC_ASSERT_V(size(rs) == Int<1>{}, "a cp.async moves one 16-byte vector");
    CUTE_STATIC_ASSERT_V(size(rd) == Int<1>{}, "a cp.async moves one 16-byte vector");
    ffpa::cute_ops::CpAsync16::copy(rs[0], rd[0], traits.pred);
  }
};

}  // namespace cute
