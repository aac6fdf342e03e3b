// The CuTe forward kernel: FlashAttention-2's resident-Q scheme written with CuTe
// layouts, tiled copies and MMA atoms (traits.cuh, atoms.cuh).
//
// Per block: kBlockM query rows of one (batch, head). Q is loaded once into shared
// memory and stays there for the whole KV loop; O stays in registers. Per KV block of
// kBlockN keys, in pipeline steps through a ring of kStages K / V buffers:
//   K steps c = 0 .. kNChunks-1:  S += Q[:, c] . K[:, c]^T   (c: kBlockD columns of D)
//   online softmax on S (fp32, base-2 exponentials, running row max and sum)
//   V steps c = 0 .. kNChunks-1:  O[:, c] += P . V[:, c]
// persist-D (kBlockD = D, two buffers): one K tile and one V tile per KV block; the
//   V tile loads while S and the softmax run, the next K tile while P V runs.
// split-D (kBlockD = 64, three buffers): the KV block streams through in 64-column
//   chunks, so shared memory for K and V stays O(1) in D; with the 4x2 (2x4) warp
//   layout two (four) warps share a row group, exchange row maxima and sums through
//   shared memory, and read P from shared memory.
// Two feeds (Load): kCpAsync, every thread copies 16-byte vectors through a CuTe tiled
// copy (cp.async, zero fill past the sequence ends); kTma, thread 0 issues one
// cp.async.bulk.tensor box per 64-column slab, completing on the stage's mbarrier
// (sm_90+; trap stubs below, never launched there: src/forward.cpp).
// fp16 accumulation (Atoms::kF16Accum, fp16 inputs): S accumulates in fp16 over all of
// D; P V accumulates in fp16 over the kBlockN keys of one block for one pair of
// 8-column n-tiles at a time, then adds into the fp32 O.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "ffpa/arch_rules.h"
#include "ffpa/cute/spec.h"
#include "ffpa/kernel_traits.h"  // Load
#include "ffpa/lowp/layout.h"
#include "ffpa/lowp/mma.cuh"
#include "ffpa/lowp/numerics.h"
#include "ffpa/mask.h"
#include "ffpa/params.h"
#include "ffpa/tma.cuh"
#include "ffpa/utils.cuh"

// The kernel body and CuTe exist in device code (nvcc's device passes, and the CPU
// emulator, which compiles everything with a host compiler); nvcc's host pass only
// needs the kernel's declaration and the spec (spec.h) to register and launch it, so
// it never parses CuTe (about a quarter of a CuTe instance's compile time otherwise).
// It does include the libcu++ headers that declare the __device__ variables CuTe's
// headers bring (libcu++'s customization-point objects, in_place, piecewise_construct;
// CuTe's _ and product): the device pass registers them, and the host stub names them.
#if defined(__CUDA_ARCH__) || !defined(__CUDACC__)
#define FFPA_CUTE_DEVICE_CODE 1
#include "ffpa/cute/traits.cuh"
#else
#define FFPA_CUTE_DEVICE_CODE 0
#include <cuda/std/iterator>
#include <cuda/std/utility>
#include <cute/int_tuple.hpp>   // cute::product
#include <cute/underscore.hpp>  // cute::_
#endif

namespace ffpa {

// Whether this compilation pass holds TMA instructions (ffpa/tma.cuh: sm_90+); below,
// the cute_tma instances are trap stubs whose body is never instantiated.
#ifdef FFPA_TMA_DEVICE
inline constexpr bool kCuteTmaCode = true;
#else
inline constexpr bool kCuteTmaCode = false;
#endif
// Whether this pass holds the cp.async-fed CuTe kernel (impl cute). Not on the sm_120
// family: there the CuTe kernel is TMA-fed (impl cute_tma, which has the same tiles),
// and the cp.async feed's per-thread copy addresses made ptxas spill at D = 128 fp16
// accumulation and D = 192 / 256 (ffpa.kernels.no_spills); it also cost about half
// of the CuTe instances' compile time (docs/perf.md, "Build cost of the CuTe paths").
// src/forward.cpp refuses impl='cute' there, naming cute_tma; sm_80-sm_90 keep it (the
// device check's cute rows on sm_90). Same pattern as fwd_kernel_mma.cuh's
// kMmaF16AccCompiled.
inline constexpr bool kCuteCpAsyncCode = kDeviceCpAsyncHeavy;  // ffpa/arch_rules.h

#if FFPA_CUTE_DEVICE_CODE
namespace cute_fwd {

// An accumulator layout ((2,2), MMA_M, MMA_N) of m16n8 tiles (value (c, r): column
// pair c, row half r) as (rows, columns) = ((2, MMA_M), (2, MMA_N)).
template <class L>
__device__ __forceinline__ constexpr auto acc_rowcol(L const& l) {
  return cute::make_layout(cute::make_layout(cute::layout<0, 1>(l), cute::layout<1>(l)),
                           cute::make_layout(cute::layout<0, 0>(l), cute::layout<2>(l)));
}

// The S accumulator layout ((2,2), MMA_M, MMA_N) read as the A operand of P V
// ((2,2,2), MMA_M, MMA_N / 2): for m16n8k16, the C fragments of n-tiles 2k and 2k + 1
// are exactly the A fragment of k-step k, so P never leaves the registers (4x1).
template <class L>
__device__ __forceinline__ constexpr auto acc_as_a(L const& l) {
  auto d = cute::logical_divide(l, cute::Shape<cute::Underscore, cute::Underscore, cute::_2>{});
  return cute::make_layout(cute::make_layout(cute::layout<0>(d), cute::layout<2, 0>(d)), cute::layout<1>(d),
                           cute::layout<2, 1>(d));
}

// Mode kMode of a rank-3 tensor split into (kGroup, n / kGroup): t(_, (_, g), _) is
// group g. Pairs of n-tiles: one ldmatrix.x4 loads the B fragments of two.
template <int kMode, int kGroup, class Tensor>
__device__ __forceinline__ auto group_mode(Tensor&& t) {
  auto l = t.layout();
  if constexpr (kMode == 1) {
    return cute::make_tensor(
        t.data(), cute::make_layout(cute::layout<0>(l), cute::logical_divide(cute::layout<1>(l), cute::Int<kGroup>{}),
                                    cute::layout<2>(l)));
  } else {
    static_assert(kMode == 2, "modes 1 (B fragments) and 2 (C fragments)");
    return cute::make_tensor(t.data(),
                             cute::make_layout(cute::layout<0>(l), cute::layout<1>(l),
                                               cute::logical_divide(cute::layout<2>(l), cute::Int<kGroup>{})));
  }
}

// Low precision, 4x1: P (fp32 accumulator fragments of S, values in [0, 1]) to e4m3 of
// P * 448, straight into the P V mma's A fragments. The lane holds columns {2t, 2t + 1} of
// each 8-column n-tile; with V^T's tokens permuted (lowp/layout.h, vt_column) the A
// fragment of k step ks is, register j = r + 2h (row half r, k half h), the pairs of
// n-tiles 4 ks + 2h and 4 ks + 2h + 1 of row half r, in that order: no shuffle.
// Two probabilities to e4m3 codes of P * 448 (the hardware's cvt.rn.satfinite; the
// emulator's truncating breakage aside).
struct LowpCvtTruncate : LowpCvtExact {
  static constexpr bool kRoundNearestEven = false;
};
template <class Break>
__device__ __forceinline__ uint32_t p_e4m3x2(float lo, float hi) {
  if constexpr (Break::kTruncateP) {
    return pack_e4m3x2(float_to_e4m3_as<LowpCvtTruncate>(lo * kE4m3Max),
                       float_to_e4m3_as<LowpCvtTruncate>(hi * kE4m3Max));
  } else {
    return cvt_e4m3x2(lo * kE4m3Max, hi * kE4m3Max);
  }
}

template <class Break, class AccS, class FragA>
__device__ __forceinline__ void pack_p_e4m3(AccS const& acc_s, FragA& frag) {
  cute::Tensor a32 = cute::recast<uint32_t>(frag);  // ((1, 2, 2), MMA_M, kPvKSteps): registers a0..a3
  constexpr int kM = decltype(cute::size<1>(acc_s))::value;
  constexpr int kK = decltype(cute::size<2>(frag))::value;
#pragma unroll
  for (int i = 0; i < kM; ++i)
#pragma unroll
    for (int ks = 0; ks < kK; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = j & 1, na = 4 * ks + 2 * (j >> 1);
        const uint32_t lo = p_e4m3x2<Break>(acc_s(2 * r, i, na), acc_s(2 * r + 1, i, na));
        const uint32_t hi = p_e4m3x2<Break>(acc_s(2 * r, i, na + 1), acc_s(2 * r + 1, i, na + 1));
        a32(j, i, ks) = lo | (hi << 16);
      }
}

// NVFP4: S += Q K^T for one ldmatrix pair of n-tiles (2p, 2p + 1) at k step `kstep` (64
// values of D: four ue4m3 scales per row), through the block-scaled mma, which takes each
// row's scales in a register (ffpa/lowp/mma.cuh: A row g from lanes 4g, row g + 8 from
// lanes 4g + 1, B column g from lane 4g). The scales come from the workspace's q_sf / k_sf
// (L1-resident: 4 bytes per row and k step); rows past nq / nkv get zero scales.
template <int kHeadDim, class Break, class RowCol, class FragA, class FragB, class FragC>
__device__ __forceinline__ void nvfp4_qk_pair(const FwdParams& params, int64_t q_bh, int64_t k_bh, int m0, int n0,
                                              int kstep, int p, RowCol const& tScS_rc, FragA const& a,
                                              FragB const& b, FragC&& c) {
  constexpr int kSfPerRow = kHeadDim / kNvfp4Block;
  const LowpLayout& lw = params.lowp;
  const int lane = threadIdx.x % 32;
  const unsigned char* q_sf = params.lowp_ws + lw.q_sf + q_bh * params.nq * kSfPerRow + kstep * 4;
  const unsigned char* k_sf = params.lowp_ws + lw.k_sf + k_bh * params.nkv * kSfPerRow + kstep * 4;
  cute::Tensor ra = cute::recast<uint32_t>(a);  // ((1, 2, 2), MMA_M)
  cute::Tensor rb = cute::recast<uint32_t>(b);  // ((1, 2), 2)
  constexpr int kM = decltype(cute::size<1>(a))::value;
  uint32_t sfb[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    // B's column g of this n-tile: the tile's first column (the lane's C column 2t, less 2t) plus g.
    const int key = n0 + cute::get<1>(tScS_rc(0, 2 * (2 * p + e))) - 2 * (lane % 4) + lane / 4;
    sfb[e] = key < params.nkv ? *reinterpret_cast<const uint32_t*>(k_sf + int64_t(key) * kSfPerRow) : 0u;
  }
  constexpr int kSfRowLane = Break::kSwapSfLanes ? 1 : 0;
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const int row = m0 + cute::get<0>(tScS_rc(2 * i + ((lane & 1) ^ kSfRowLane), 0));  // 4g: row g, 4g + 1: g + 8
    uint32_t sfa = row < params.nq ? *reinterpret_cast<const uint32_t*>(q_sf + int64_t(row) * kSfPerRow) : 0u;
    if constexpr (Break::kReverseSfBytes)
      sfa = (sfa >> 24) | ((sfa >> 8) & 0xff00u) | ((sfa << 8) & 0xff0000u) | (sfa << 24);
    const uint32_t regs_a[4] = {ra(0, i), ra(1, i), ra(2, i), ra(3, i)};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float d[4] = {c(0, i, e), c(1, i, e), c(2, i, e), c(3, i, e)};
      Mma16864Nvf4::run(d, regs_a, rb(0, e), rb(1, e), sfa, sfb[e]);
#pragma unroll
      for (int j = 0; j < 4; ++j) c(j, i, e) = d[j];
    }
  }
}

}  // namespace cute_fwd
#endif  // FFPA_CUTE_DEVICE_CODE

// The low-precision instances' own stub rule: FP8 code needs sm_89, NVFP4 the sm_120
// family's specific targets (ffpa/arch_rules.h); elsewhere they trap, never launched.
template <typename Spec>
inline constexpr bool kLowpCode = !Spec::kLowp || (Spec::kNvfp4 ? kDeviceNvfp4 : kDeviceFp8);

// The kernel, for both feeds. Same parameter passing as the mma kernel (the tensor
// maps as a __grid_constant__ by value, used in place; the cp.async feed ignores them).
// Template arguments never depend on __CUDA_ARCH__ (ffpa.kernels.kernel_names).
// Low precision (Spec::kLowp, ffpa/lowp/layout.h): Q, K and V^T are the quantisation
// pass's byte tiles in params.lowp_ws; S is rescaled by the Q and K block scales, P goes
// to e4m3 (P * 448) in the P V mma's A layout (V^T's token permutation makes that a
// register-local pack), O is rescaled by V's channel scales / 448 and written as
// params.out_dtype says, and the LSE gets the smoothing's shift back.
// kMasked: the instance for calls with a sliding window, seqused_k or the varlen layout
// (ffpa/mask.h, as the mma kernel's masked instance: the sequence's place and mask from
// seq_mask, blocks outside the band or past the sequence's read keys skipped, the math
// rule's flagged heads visiting every block of those keys with the band added as -inf,
// the TMA feed's tail rows past the sequence's keys zeroed); 16-bit, fp32 or fp16
// accumulation (the low-precision kernels refuse masks: src/validate.cpp). A separate instance, so
// that the unmasked ones do not hold the mask's registers.
// kMaskBreak: the CPU emulator's deliberate mask defects (kNone in the library).
template <typename Spec, Load kLoad, bool kMasked = false, MaskBreak kMaskBreak = MaskBreak::kNone>
__global__ void __launch_bounds__(Spec::kNThreads, 1)
    ffpa_fwd_cute_kernel(const FwdParams params, const __grid_constant__ TmaMaps maps) {
#if FFPA_CUTE_DEVICE_CODE
  if constexpr ((kLoad == Load::kTma && !kCuteTmaCode) || (kLoad == Load::kCpAsync && !kCuteCpAsyncCode) ||
                !kLowpCode<Spec>) {
    __trap();  // e.g. a cute_tma instance below sm_90, a cute one on the sm_120 family: never launched (src/forward.cpp)
  } else {
    using namespace cute;
    using Traits = CuteFwdTraits<Spec>;
    using T = typename Traits::T;
    using Element = typename Traits::Element;
    using ElementV = typename Traits::ElementV;
    using Atoms = typename Traits::Atoms;
    using ET = ElemTraits<T>;
    constexpr bool kTma = kLoad == Load::kTma;
    constexpr bool kF16Acc = Traits::kF16Acc;
    constexpr bool kLowp = Traits::kLowp;
    constexpr bool kNvfp4 = Traits::kNvfp4;
    constexpr int kHeadDim = Traits::kHeadDim;
    constexpr int kBlockM = Traits::kBlockM;
    constexpr int kBlockN = Traits::kBlockN;
    constexpr int kBlockD = Traits::kBlockD;
    constexpr int kNWarpsM = Traits::kNWarpsM;
    constexpr int kNWarpsD = Traits::kNWarpsD;
    constexpr int kStages = Traits::kStages;
    constexpr int kNChunks = Traits::kNChunks;
    constexpr int kSteps = Traits::kStepsPerBlock;
    constexpr int kKSteps = Traits::kKSteps;
    constexpr int kPvKSteps = Traits::kPvKSteps;
    constexpr int kQKCols = Traits::kQKCols;        // Q / K tile columns (elements of Element)
    constexpr int kKStepCols = Traits::kKStepCols;  // columns of one K step
    // Columns per swizzle slab (one TMA box wide): 64 16-bit or e4m3 columns, 32 NVFP4 bytes.
    constexpr int kSlabCols = (kLowp ? Traits::kQKSlabBytes : 128) / int(sizeof(Element));
    static_assert(!kNvfp4 || kTma, "the NVFP4 kernel is TMA-fed (the sm_120 family)");
    static_assert(!kLowp || !kF16Acc, "the low-precision mma accumulates in fp32");
    static_assert(!kMasked || !kLowp, "the masked instance: 16-bit inputs (the low-precision kernels refuse masks)");

    // Both feeds: tiles from a 1024-byte aligned base (the swizzle acts on address bits
    // up to 9; the launch reserved the slack).
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char* smem_base = smem_raw;
    {
      const uintptr_t addr = reinterpret_cast<uintptr_t>(smem_raw);
      smem_base += (Traits::kAlign - addr % Traits::kAlign) % Traits::kAlign;
    }
    Element* const smem_q = reinterpret_cast<Element*>(smem_base);
    unsigned char* const smem_kv = smem_base + Traits::kQBytes;
    ElementV* const smem_p = reinterpret_cast<ElementV*>(smem_kv + kStages * Traits::kStageBytes);
    float* const smem_red = reinterpret_cast<float*>(smem_kv + kStages * Traits::kStageBytes + Traits::kPBytes);
    // kTma: bars[s] for K / V stage s, bars[kStages] for Q.
    uint64_t* const bars = reinterpret_cast<uint64_t*>(smem_base + Traits::kBarOffset);

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int warp_d = warp / kNWarpsM;  // the tiled MMA's column-major warp layout
    // Causal blocks near the end of Q have the most keys: launch them first.
    const int m_block = gridDim.x - 1 - blockIdx.x;
    const int head = blockIdx.y;
    // kMasked: the sequence (blockIdx.z: a batch entry, or a packed sequence in varlen) and
    // its mask; from here on nq / nkv are its query rows and read keys, and rows and keys
    // its own (local) indices. The main loop and the epilogue read the mask again where they
    // need it (seq_now: a few L1-resident loads) rather than hold it: held through the loop,
    // it pushed D = 512's cute_tma instance to 255 registers with 20 bytes of spills on
    // sm_120f (nvcc 13.0).
    auto seq_now = [&]() {
      SeqMask m{};
      if constexpr (kMasked) {
        MaskParams mp = params.mask;
        if constexpr (kMaskBreak == MaskBreak::kPaddedKeyCounted) mp.seqused_k = nullptr;
        // The forward's causal is bottom-right aligned (api.h); varlen always is.
        m = seq_mask(mp, blockIdx.z, params.nq, params.nkv, params.causal, mp.diag_bottom_right);
        if constexpr (kMaskBreak == MaskBreak::kUpperEdge) m.hi -= 1;
        if constexpr (kMaskBreak == MaskBreak::kLowerEdge) m.lo += 1;
        if constexpr (kMaskBreak == MaskBreak::kSeqOffset) m.k_start = m.k_start > 0 ? m.k_start - 1 : 0;
      }
      return m;
    };
    const SeqMask sm = seq_now();
    const int batch = kMasked ? sm.batch : int(blockIdx.z);  // the strides' batch (0 in varlen)
    const int kv_head = head / params.h_ratio;
    const int nq = kMasked ? sm.len_q : params.nq;
    const int nkv = kMasked ? sm.len_k : params.nkv;
    const int m0 = m_block * kBlockM;
    // Varlen grids cover the longest sequence: blocks past this one's rows have no work
    // (the whole block leaves before any barrier).
    if constexpr (kMasked)
      if (m0 >= nq) return;
    // The arrays' first row of the sequence (0 but in varlen).
    const int q_row0 = kMasked ? sm.q_start : 0;  // before the main loop only
    const int k_row0 = kMasked ? sm.k_start : 0;
    const LowpLayout& lw = params.lowp;  // kLowp only
    const int64_t q_bh = int64_t(batch) * params.hq + head;     // (batch, head) index of the packed arrays
    const int64_t k_bh = int64_t(batch) * params.hkv + kv_head;  // (batch, kv head)

    // ---- global tensors of this (batch, head): (rows, D), unit stride along D. Low
    // precision: the packed byte arrays of the workspace, and V^T as (D, nkv_pad).
    auto gmem_operands = [&] {
      if constexpr (kLowp) {
        const unsigned char* ws = params.lowp_ws;
        const Element* q_ptr = reinterpret_cast<const Element*>(ws + lw.q8) + q_bh * nq * kQKCols;
        const Element* k_ptr = reinterpret_cast<const Element*>(ws + lw.k8) + k_bh * nkv * kQKCols;
        const ElementV* vt_ptr = reinterpret_cast<const ElementV*>(ws + lw.vt8) + k_bh * kHeadDim * lw.nkv_pad;
        return cute::make_tuple(
            make_tensor(make_gmem_ptr(q_ptr), make_layout(make_shape(nq, Int<kQKCols>{}), make_stride(Int<kQKCols>{}, _1{}))),
            make_tensor(make_gmem_ptr(k_ptr), make_layout(make_shape(nkv, Int<kQKCols>{}), make_stride(Int<kQKCols>{}, _1{}))),
            make_tensor(make_gmem_ptr(vt_ptr),
                        make_layout(make_shape(Int<kHeadDim>{}, lw.nkv_pad), make_stride(lw.nkv_pad, _1{}))));
      } else {
        const Element* const q_ptr = static_cast<const Element*>(params.q) + batch * params.q_batch_stride +
                                     head * params.q_head_stride + int64_t(q_row0) * params.q_row_stride;
        const Element* const k_ptr = static_cast<const Element*>(params.k) + batch * params.k_batch_stride +
                                     kv_head * params.k_head_stride + int64_t(k_row0) * params.k_row_stride;
        const Element* const v_ptr = static_cast<const Element*>(params.v) + batch * params.v_batch_stride +
                                     kv_head * params.v_head_stride + int64_t(k_row0) * params.v_row_stride;
        return cute::make_tuple(
            make_tensor(make_gmem_ptr(q_ptr),
                        make_layout(make_shape(nq, Int<kHeadDim>{}), make_stride(params.q_row_stride, _1{}))),
            make_tensor(make_gmem_ptr(k_ptr),
                        make_layout(make_shape(nkv, Int<kHeadDim>{}), make_stride(params.k_row_stride, _1{}))),
            make_tensor(make_gmem_ptr(v_ptr),
                        make_layout(make_shape(nkv, Int<kHeadDim>{}), make_stride(params.v_row_stride, _1{}))));
      }
    };
    auto g_operands = gmem_operands();
    auto mQ = cute::get<0>(g_operands);
    auto mK = cute::get<1>(g_operands);
    auto mV = cute::get<2>(g_operands);  // V (16-bit) or V^T (low precision)

    // ---- shared tensors
    Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Traits::SmemLayoutQ{});  // (kBlockM, kQKCols)
    Tensor sP = make_tensor(make_smem_ptr(smem_p), typename Traits::SmemLayoutP{});  // (kBlockM, kBlockN)
    auto stage_kv = [&](int s) {  // (kBlockN, kKStepCols): a K step
      return make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem_kv + s * Traits::kStageBytes)),
                         typename Traits::SmemLayoutKV{});
    };
    auto stage_vt = [&](int s) {  // (kBlockD, kBlockN): a V step as P V's B operand
      return make_tensor(make_smem_ptr(reinterpret_cast<ElementV*>(smem_kv + s * Traits::kStageBytes)),
                         typename Traits::SmemLayoutVt{});
    };

    // Causal: row i sees keys j <= i + causal_offset (FwdParams). Keys beyond the last
    // row's causal limit are skipped unless the head follows the math rule (ffpa/mask.h;
    // the low-precision kernels never do: their launcher reruns such heads on the 16-bit
    // SIMT kernel, lowp/launch.cuh).
    // kMasked: the blocks of masked_kv_block_range (ffpa/mask.h), visited from n_first;
    // the flags are [B, Hq], in varlen B = 1, so one flag covers every sequence of the head.
    const int causal_offset = params.causal_offset;
    const bool math_rule = !kLowp && kMaskBreak != MaskBreak::kFlagsIgnored &&
                           math_rule_for(params.nonfinite, batch, params.hq, head);
    int n_first = 0, n_end;
    if constexpr (kMasked) {
      masked_kv_block_range(sm, m0, min(m0 + kBlockM, nq), kBlockN, math_rule, &n_first, &n_end);
      if constexpr (kMaskBreak == MaskBreak::kSkipLastBlock) n_end = max(n_first, n_end - 1);
      if constexpr (kMaskBreak == MaskBreak::kNoSkip) n_first = 0, n_end = (nkv + kBlockN - 1) / kBlockN;
    } else {
      n_end = kv_blocks_for_rows(m0, kBlockM, nq, nkv, kBlockN, params.causal, causal_offset, math_rule);
    }
    const int n_blocks = n_end - n_first;  // visited blocks: n_first + [0, n_blocks)

    // ---- loads. cp.async: every thread, its slice of the tiled copy, rows outside
    // [0, nq) / [0, nkv) zero-filled. TMA: thread 0 alone, one box per slab (out-of-bounds
    // rows read as zeros), all of a tile completing on one mbarrier.
    typename Traits::GmemTiledCopy g2s;
    typename Traits::GmemTiledCopyV g2s_v;
    auto copy_rows = [&](auto const& tiled, auto const& gsrc, auto& sdst, int row0, int rows_valid) {
      auto thr = tiled.get_slice(tid);
      Tensor cid = make_identity_tensor(shape(gsrc));  // flat (rows, columns), like the global tile
      Tensor tg = thr.partition_S(gsrc);
      Tensor ts = thr.partition_D(sdst);
      Tensor tc = thr.partition_S(cid);
#pragma unroll
      for (int m = 0; m < size<1>(ts); ++m) {
        const bool valid = row0 + get<0>(tc(0, m, 0)) < rows_valid;
#pragma unroll
        for (int k = 0; k < size<2>(ts); ++k) copy(tiled.with(valid), tg(_, m, k), ts(_, m, k));
      }
    };
    auto load_q = [&]() {
      if constexpr (kTma) {
        if (tid == 0) {
          uint64_t* const bar = bars + kStages;
          mbar_arrive_expect_tx(bar, Traits::kQBytes);
#pragma unroll
          for (int c = 0; c < kQKCols / kSlabCols; ++c)
            Atoms::Tma::copy(&maps.q, bar, &sQ(0, c * kSlabCols), c * kSlabCols, q_row0 + m0, head, batch);
        }
      } else {
        Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kQKCols>>{}, make_coord(m_block, 0));
        copy_rows(g2s, gQ, sQ, m0, nq);
        cp_async_commit();
      }
    };
    // Step `step` of KV block n_block into `stage`: step < kNChunks is K chunk `step`,
    // else V chunk step - kNChunks. kTma: thread 0 only (issue() below).
    auto load_step = [&](int step, int n_block, int stage) {
      const bool is_k = step < kNChunks;
      const int chunk = is_k ? step : step - kNChunks;
      if constexpr (kTma) {
        uint64_t* const bar = bars + stage;
        if constexpr (kLowp) {
          // K: kKStepCols bytes in slabs; V^T: one box of 64 tokens x kBlockD channels.
          if (is_k) {
            mbar_arrive_expect_tx(bar, Traits::kKBytes);
            Tensor s = stage_kv(stage);
#pragma unroll
            for (int j = 0; j < kKStepCols / kSlabCols; ++j)
              Atoms::Tma::copy(&maps.k, bar, &s(0, j * kSlabCols), chunk * kKStepCols + j * kSlabCols,
                               n_block * kBlockN, kv_head, batch);
          } else {
            mbar_arrive_expect_tx(bar, Traits::kVBytes);
            Tensor s = stage_vt(stage);
            Atoms::Tma::copy(&maps.v, bar, &s(0, 0), n_block * kBlockN, chunk * kBlockD, kv_head, batch);
          }
        } else {
          Tensor s = stage_kv(stage);
          mbar_arrive_expect_tx(bar, Traits::kKBytes);
#pragma unroll
          for (int j = 0; j < kKStepCols / kSlabCols; ++j)
            Atoms::Tma::copy(is_k ? &maps.k : &maps.v, bar, &s(0, j * kSlabCols), chunk * kBlockD + j * kSlabCols,
                             (kMasked ? seq_now().k_start : 0) + n_block * kBlockN, kv_head, batch);
        }
      } else {
        if constexpr (kLowp) {
          if (is_k) {
            Tensor s = stage_kv(stage);
            copy_rows(g2s, local_tile(mK, Shape<Int<kBlockN>, Int<kKStepCols>>{}, make_coord(n_block, chunk)), s,
                      n_block * kBlockN, nkv);
          } else {
            // V^T rows are channels (all valid); its tokens are padded with zeros.
            Tensor s = stage_vt(stage);
            copy_rows(g2s_v, local_tile(mV, Shape<Int<kBlockD>, Int<kBlockN>>{}, make_coord(chunk, n_block)), s, 0,
                      kHeadDim);
          }
        } else {
          Tensor s = stage_kv(stage);
          Tensor g = local_tile(is_k ? mK : mV, Shape<Int<kBlockN>, Int<kBlockD>>{}, make_coord(n_block, chunk));
          copy_rows(g2s, g, s, n_block * kBlockN, nkv);
        }
      }
    };
    auto issue = [&](int step, int it, int stage) {  // the it-th visited block; no-op past the last
      if constexpr (kTma) {
        if (tid == 0 && it < n_blocks) load_step(step, n_first + it, stage);
      } else {
        if (it < n_blocks) load_step(step, n_first + it, stage);
        cp_async_commit();  // empty groups keep the wait_group arithmetic uniform
      }
    };

    // ---- MMA and shared -> register copies
    typename Traits::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_slice(tid);
    auto s2r_a = make_tiled_copy_A(typename Traits::SmemCopyAtomA{}, tiled_mma);
    auto s2r_b = make_tiled_copy_B(typename Traits::SmemCopyAtomB{}, tiled_mma);
    auto s2r_bt = make_tiled_copy_B(typename Traits::SmemCopyAtomBTrans{}, tiled_mma);
    auto s2r_p = make_tiled_copy_A(typename Traits::SmemCopyAtomP{}, tiled_mma);
    auto s2r_a_thr = s2r_a.get_slice(tid);
    auto s2r_b_thr = s2r_b.get_slice(tid);
    auto s2r_bt_thr = s2r_bt.get_slice(tid);
    auto s2r_p_thr = s2r_p.get_slice(tid);

    Tensor tSsQ = s2r_a_thr.partition_S(sQ);  // (CPY, CPY_M, QK k-steps over all of D)
    Tensor tSrQ =
        thr_mma.partition_fragment_A(local_tile(sQ, Shape<Int<kBlockM>, Int<kKStepCols>>{}, make_coord(0, 0)));
    Tensor tSrQ_cv = s2r_a_thr.retile_D(tSrQ);  // (CPY, CPY_M, kKSteps)

    // Accumulator coordinates: (row, column) of every S element within the block.
    Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
    Tensor tScS_rc = make_tensor(tScS.data(), cute_fwd::acc_rowcol(tScS.layout()));
    constexpr int kRows = decltype(size<0>(tScS_rc))::value;  // rows per thread: 2 per 16-row mma tile

    // O: one fp32 fragment per kBlockD-column chunk, (MMA, MMA_M, MMA_N, kNChunks).
    Tensor acc_o =
        make_tensor<float>(append(partition_shape_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockD>>{}), Int<kNChunks>{}));
    clear(acc_o);

    float row_max[kRows];
    float row_sum[kRows];  // partial: this thread's columns only, reduced at the end
#pragma unroll
    for (int r = 0; r < kRows; ++r) row_max[r] = -INFINITY, row_sum[r] = 0.f;

    // Low precision: the Q block's scale (S's rescale folds it with the softmax scale).
    float qk_scale_log2 = params.scale_log2;
    if constexpr (kLowp)
      qk_scale_log2 *= reinterpret_cast<const float*>(params.lowp_ws + lw.q_scale)[q_bh * lw.nq_blocks + m_block];

    if constexpr (kTma) {
      if (tid == 0) {
#pragma unroll
        for (int s = 0; s < Traits::kNBarriers; ++s) mbar_init(bars + s, 1);
        fence_barrier_init();
      }
      __syncthreads();
    }

    // ---- prologue: Q, then the first kStages - 1 K / V steps.
    load_q();
    int write_stage = 0;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      issue(s % kSteps, s / kSteps, write_stage);
      write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
    }
    // kTma: Q's one fill (phase 0). cp.async: Q's group is older than every step's, so
    // each step's wait_group covers it.
    if constexpr (kTma) mbar_wait(bars + kStages, 0);
    int read_stage = 0;
    uint32_t phase = 0;  // kTma: parity of the fill being waited for, per round of stages

    for (int it = 0; it < n_blocks; ++it) {
      const int n_block = n_first + it;
      const int n0 = n_block * kBlockN;
      // S as the mma accumulates it (fp32, or fp16 with kF16Acc), and S in fp32.
      auto acc_mma = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
      clear(acc_mma);
      auto acc_s = [&] {
        if constexpr (kF16Acc) {
          return make_tensor<float>(acc_mma.layout());
        } else {
          return make_tensor(acc_mma.data(), acc_mma.layout());
        }
      }();
      // 4x1: P in registers, in the A-operand layout of P V (16-bit: the accumulator
      // layout read as A; low precision: e4m3 bytes packed into the A fragment below).
      Tensor rP = make_tensor<Element>(acc_mma.layout());
      Tensor tOrP = make_tensor(rP.data(), cute_fwd::acc_as_a(rP.layout()));
      // Low precision, 4x1: (MMA, MMA_M, kPvKSteps) e4m3, packed by pack_p_e4m3.
      auto tOrP8 = [&] {
        if constexpr (kLowp && kNWarpsD == 1) {
          return thr_mma.partition_fragment_A(sP);
        } else {
          return 0;
        }
      }();

      // One pipeline step (step s of the KV block: K chunk s, then V chunk s - kNChunks):
      // cp.async: this step's group has landed once at most kStages - 2 newer ones are
      // pending. kTma: the stage's barrier completed this fill's phase. The block barrier
      // also guarantees every warp finished the step that last read the stage refilled
      // next. Returns the stage to read.
      auto advance = [&](int step) {
        if constexpr (kTma) {
          mbar_wait(bars + read_stage, phase);
        } else {
          cp_async_wait<kStages - 2>();
        }
        __syncthreads();
        const int ahead = step + kStages - 1;
        issue(ahead % kSteps, it + ahead / kSteps, write_stage);
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        const int stage = read_stage;
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
        if (read_stage == 0) phase ^= 1u;
        if constexpr (kTma && kMasked && kMaskBreak != MaskBreak::kTmaTailNotZeroed) {
          // A box reads whole kBlockN-row tiles, so rows past the sequence's keys hold the
          // next sequence's (varlen) or padding keys (seqused_k): rows [len_k - n0, kBlockN)
          // of each 64-column slab of this step's K (or V) tile are zeroed, so that no value
          // of a key outside the sequence reaches S or P V; the async proxy refills the
          // stage later: fenced before it. (Past the arrays' last row the TMA unit fills
          // zeros itself.)
          const SeqMask cur = seq_now();
          if (n0 + kBlockN > cur.len_k && cur.k_start + cur.len_k < params.nkv) {
            zero_tile_tail_rows<kKStepCols / kSlabCols>(smem_kv + stage * Traits::kStageBytes, kBlockN,
                                                        cur.len_k - n0, tid, Spec::kNThreads);
            fence_proxy_async_smem();
            __syncthreads();
          }
        }
        return stage;
      };

      // K steps. Rolled for split-D: S's registers are the same for every chunk, only
      // shared-memory addresses move (a rolled loop roughly halves the split-D
      // instances' code and compile time; docs/perf.md). The V steps below stay
      // unrolled: each chunk adds into its own O registers.
#pragma unroll 1
      for (int chunk = 0; chunk < kNChunks; ++chunk) {
        const int stage = advance(chunk);
        // ---- S += Q[:, chunk] . K[:, chunk]^T, one mma k-step at a time, the B
        // fragments one ldmatrix.x4 (two n-tiles) at a time.
        Tensor sK = stage_kv(stage);
        Tensor tSsK = s2r_b_thr.partition_S(sK);         // (CPY, CPY_N, kKSteps)
        Tensor tSrK = thr_mma.partition_fragment_B(sK);  // (MMA, MMA_N, kKSteps)
        Tensor tSrK_cv = s2r_b_thr.retile_D(tSrK);
        Tensor tSrK_g = cute_fwd::group_mode<1, 2>(tSrK);  // (MMA, (2, MMA_N / 2), kKSteps)
        Tensor acc_g = cute_fwd::group_mode<2, 2>(acc_mma);
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          copy(s2r_a, tSsQ(_, _, chunk * kKSteps + ks), tSrQ_cv(_, _, ks));
#pragma unroll
          for (int p = 0; p < size<1>(tSsK); ++p) {
            copy(s2r_b, tSsK(_, p, ks), tSrK_cv(_, p, ks));
            if constexpr (kNvfp4) {
              cute_fwd::nvfp4_qk_pair<kHeadDim, typename Atoms::Break>(params, q_bh, k_bh, m0, n0, chunk * kKSteps + ks, p, tScS_rc,
                                                tSrQ(_, _, ks),
                                                tSrK_g(_, make_coord(_, p), ks), acc_g(_, _, make_coord(_, p)));
            } else {
              gemm(tiled_mma, tSrQ(_, _, ks), tSrK_g(_, make_coord(_, p), ks), acc_g(_, _, make_coord(_, p)));
            }
          }
        }
      }

      if constexpr (kF16Acc) {
        Tensor h = recast<uint32_t>(acc_mma);
#pragma unroll
        for (int j = 0; j < size(h); ++j) unpack_half2(h(j), acc_s(2 * j), acc_s(2 * j + 1));
      }
      // ---- online softmax on the finished S tile (low precision: S rescaled by the Q
      // and K block scales).
      float s_scale = qk_scale_log2;
      if constexpr (kLowp)
        s_scale *= reinterpret_cast<const float*>(params.lowp_ws + lw.k_scale)[k_bh * lw.nkv_blocks + n_block];
      Tensor s_rc = make_tensor(acc_s.data(), cute_fwd::acc_rowcol(acc_s.layout()));
      const SeqMask cur = seq_now();  // kMasked (read again: seq_now)
      const bool need_mask = kMasked ? !block_visible(cur, m0, min(m0 + kBlockM, cur.len_q), n0, n0 + kBlockN)
                                     : tile_needs_mask(m0, n0, kBlockN, nkv, params.causal, causal_offset);
      float blk_max[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        blk_max[r] = -INFINITY;
#pragma unroll
        for (int c = 0; c < size<1>(s_rc); ++c) {
          float x = s_rc(r, c) * s_scale;
          if (need_mask) {
            const int row = m0 + get<0>(tScS_rc(r, c));
            const int col = n0 + get<1>(tScS_rc(r, c));
            if constexpr (kMasked) {
              x = masked_score(cur, x, row, col, math_rule);
            } else {
              x = mask_score(x, row, col, nkv, params.causal, causal_offset, math_rule);
            }
          }
          s_rc(r, c) = x;
          blk_max[r] = fmaxf(blk_max[r], x);
        }
        blk_max[r] = quad_max(blk_max[r]);
      }
      if constexpr (kNWarpsD > 1) {
        // The warps of a row group hold different key columns: combine their
        // maxima so that all of them scale P and O by the same row max.
        if ((tid & 3) == 0) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) smem_red[warp_d * kBlockM + get<0>(tScS_rc(r, 0))] = blk_max[r];
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int w = 0; w < kNWarpsD; ++w)
            blk_max[r] = fmaxf(blk_max[r], smem_red[w * kBlockM + get<0>(tScS_rc(r, 0))]);
      }
      float corr[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float new_max = fmaxf(row_max[r], blk_max[r]);
        // A row with no visible key yet keeps max -inf; 0 as the base there makes
        // exp2(-inf - base) = 0 instead of NaN.
        const float base = new_max == -INFINITY ? 0.f : new_max;
        corr[r] = fast_exp2(row_max[r] - base);
        row_max[r] = new_max;
        float blk_sum = 0.f;
#pragma unroll
        for (int c = 0; c < size<1>(s_rc); ++c) {
          const float p = fast_exp2(s_rc(r, c) - base);
          s_rc(r, c) = p;
          blk_sum += p;
        }
        row_sum[r] = row_sum[r] * corr[r] + blk_sum;
      }
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) {
        Tensor o_rc = make_tensor(acc_o(_, _, _, c).data(), cute_fwd::acc_rowcol(acc_o(_, _, _, c).layout()));
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int cc = 0; cc < size<1>(o_rc); ++cc) o_rc(r, cc) *= corr[r];
      }
      // P to 16 bits or e4m3: in registers (4x1), or published to shared memory for the
      // other warps of the row group; the barrier of the next pipeline step makes the
      // whole P tile visible before any P V step reads it.
      if constexpr (kLowp && kNWarpsD == 1) {
        cute_fwd::pack_p_e4m3<typename Atoms::Break>(acc_s, tOrP8);
      } else if constexpr (kLowp) {
        // Each (column 2t, 2t + 1) pair lands at V^T's permuted columns (lowp/layout.h),
        // still adjacent, so that the A fragment ldmatrix reads from sP meets V^T's order.
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int c = 0; c < size<1>(s_rc); c += 2) {
            const int col = get<1>(tScS_rc(r, c));
            const int pcol = (col & ~(kVtGroup - 1)) | vt_column(col & (kVtGroup - 1));
            *reinterpret_cast<uint16_t*>(&sP(get<0>(tScS_rc(r, c)), pcol)) =
                uint16_t(cute_fwd::p_e4m3x2<typename Atoms::Break>(s_rc(r, c), s_rc(r, c + 1)));
          }
      } else if constexpr (kNWarpsD == 1) {
        Tensor p32 = recast<uint32_t>(rP);
#pragma unroll
        for (int j = 0; j < size(p32); ++j) p32(j) = ET::pack(acc_s(2 * j), acc_s(2 * j + 1));
      } else {
        Tensor tSsP = thr_mma.partition_C(sP);
#pragma unroll
        for (int j = 0; j < size(acc_s) / 2; ++j)
          *reinterpret_cast<uint32_t*>(&tSsP(2 * j)) = ET::pack(acc_s(2 * j), acc_s(2 * j + 1));
      }

#pragma unroll
      for (int chunk = 0; chunk < kNChunks; ++chunk) {
        const int stage = advance(kNChunks + chunk);
        Tensor sVt = stage_vt(stage);
        Tensor tOsVt = s2r_bt_thr.partition_S(sVt);        // (CPY, CPY_N, kPvKSteps)
        Tensor tOrVt = thr_mma.partition_fragment_B(sVt);  // (MMA, MMA_N, kPvKSteps)
        Tensor tOrVt_cv = s2r_bt_thr.retile_D(tOrVt);
        Tensor tOrVt_g = cute_fwd::group_mode<1, 2>(tOrVt);
        Tensor acc_c = acc_o(_, _, _, chunk);
        Tensor acc_g = cute_fwd::group_mode<2, 2>(acc_c);
        // 4x2 / 2x4: P from shared memory as the A operand.
        Tensor tOsP = s2r_p_thr.partition_S(sP);          // (CPY, CPY_M, kPvKSteps)
        Tensor tOrPs = thr_mma.partition_fragment_A(sP);  // (MMA, MMA_M, kPvKSteps)
        Tensor tOrPs_cv = s2r_p_thr.retile_D(tOrPs);
        auto a_operand = [&](int ks) {
          if constexpr (kNWarpsD == 1 && kLowp) {
            return tOrP8(_, _, ks);
          } else if constexpr (kNWarpsD == 1) {
            return tOrP(_, _, ks);
          } else {
            copy(s2r_p, tOsP(_, _, ks), tOrPs_cv(_, _, ks));
            return tOrPs(_, _, ks);
          }
        };
        if constexpr (!kF16Acc) {
#pragma unroll
          for (int ks = 0; ks < kPvKSteps; ++ks) {
            auto a = a_operand(ks);
#pragma unroll
            for (int p = 0; p < size<1>(tOsVt); ++p) {
              copy(s2r_bt, tOsVt(_, p, ks), tOrVt_cv(_, p, ks));
              gemm(tiled_mma, a, tOrVt_g(_, make_coord(_, p), ks), acc_g(_, _, make_coord(_, p)));
            }
          }
        } else {
          // One n-tile pair at a time: its fp16 partial over the block's keys lives in
          // two registers per mma tile, then adds into the fp32 O.
#pragma unroll
          for (int p = 0; p < size<1>(tOsVt); ++p) {
            Tensor acc_h = make_fragment_like<half_t>(acc_g(_, _, make_coord(_, p)));
            clear(acc_h);
#pragma unroll
            for (int ks = 0; ks < kPvKSteps; ++ks) {
              auto a = a_operand(ks);
              copy(s2r_bt, tOsVt(_, p, ks), tOrVt_cv(_, p, ks));
              gemm(tiled_mma, a, tOrVt_g(_, make_coord(_, p), ks), acc_h);
            }
            Tensor h = recast<uint32_t>(acc_h);
            Tensor o = acc_g(_, _, make_coord(_, p));
#pragma unroll
            for (int j = 0; j < size(h); ++j) {
              float lo, hi;
              unpack_half2(h(j), lo, hi);
              o(2 * j) += lo;
              o(2 * j + 1) += hi;
            }
          }
        }
      }
    }
    // kTma: every issued fill was waited for (fills are issued only for blocks below
    // n_blocks, all of them consumed; Q's before the loop).
    if constexpr (!kTma) cp_async_wait<0>();

    // ---- epilogue: full row sums, normalise, store O (and LSE).
    float total[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) total[r] = quad_sum(row_sum[r]);
    if constexpr (kNWarpsD > 1) {
      // Each warp of a row group summed only its own key columns. smem_red was last read
      // in the softmax of the final KV block; the barriers of its P V steps separate
      // that read from these writes.
      __syncthreads();
      if ((tid & 3) == 0) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) smem_red[warp_d * kBlockM + get<0>(tScS_rc(r, 0))] = total[r];
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < kNWarpsD; ++w) s += smem_red[w * kBlockM + get<0>(tScS_rc(r, 0))];
        total[r] = s;
      }
    }
    float inv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) inv[r] = total[r] > 0.f ? 1.f / total[r] : 0.f;  // no visible key: O = 0

    // The sequence's rows and place again (kMasked: seq_now).
    const SeqMask fin = seq_now();
    const int rows_q = kMasked ? fin.len_q : params.nq;
    const int out_row0 = kMasked ? fin.q_start : 0;
    using OutElement = typename CuteElement<T>::type;  // 2 bytes: fp16 or bf16 (low precision: out_dtype says)
    OutElement* const o_ptr = static_cast<OutElement*>(params.o) + batch * params.o_batch_stride +
                              head * params.o_head_stride + int64_t(out_row0) * params.o_row_stride;
    Tensor mO = make_tensor(make_gmem_ptr(o_ptr),
                            make_layout(make_shape(rows_q, Int<kHeadDim>{}), make_stride(params.o_row_stride, _1{})));
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockD>>{});
    Tensor tOcO = thr_mma.partition_C(cO);
    Tensor tOcO_rc = make_tensor(tOcO.data(), cute_fwd::acc_rowcol(tOcO.layout()));
    // Low precision: O's channel d is in units of v_scale[d] / 448 (V^T's scale, P's 448).
    const float* const v_scale =
        kLowp ? reinterpret_cast<const float*>(params.lowp_ws + lw.v_scale) + k_bh * kHeadDim : nullptr;
    auto store_o = [&](auto elem_traits) {
      using OT = decltype(elem_traits);
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) {
        Tensor gO = local_tile(mO, Shape<Int<kBlockM>, Int<kBlockD>>{}, make_coord(m_block, c));
        Tensor tOgO = thr_mma.partition_C(gO);
        Tensor o_rc = make_tensor(acc_o(_, _, _, c).data(), cute_fwd::acc_rowcol(acc_o(_, _, _, c).layout()));
        Tensor g_rc = make_tensor(tOgO.data(), cute_fwd::acc_rowcol(tOgO.layout()));
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (m0 + get<0>(tOcO_rc(r, 0)) >= rows_q) continue;
            // Columns (r, 2n) and (r, 2n + 1) are one 32-bit pair.
#pragma unroll
          for (int n = 0; n < size<1>(o_rc) / 2; ++n) {
            float lo = o_rc(r, 2 * n) * inv[r], hi = o_rc(r, 2 * n + 1) * inv[r];
            if constexpr (kLowp) {
              // A row without a visible key is 0 already; with nkv = 0 the pass wrote no
              // scale to multiply (the workspace holds garbage there).
              if (inv[r] > 0.f) {
                const int col = c * kBlockD + get<1>(tOcO_rc(r, 2 * n));
                lo *= v_scale[col] * (1.f / kE4m3Max);
                hi *= v_scale[col + 1] * (1.f / kE4m3Max);
              }
            }
            *reinterpret_cast<uint32_t*>(&g_rc(r, 2 * n)) = OT::pack(lo, hi);
          }
        }
      }
    };
    if constexpr (kLowp) {
      if (params.out_dtype == DType::kBf16) {
        store_o(ElemTraits<__nv_bfloat16>{});
      } else {
        store_o(ElemTraits<__half>{});
      }
    } else {
      store_o(ET{});
    }
    if (params.lse != nullptr && (tid & 3) == 0 && warp_d == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int row = m0 + get<0>(tScS_rc(r, 0));
        if (row >= rows_q) continue;
        // row_max is max(s * scale * log2 e); back to natural log: * ln 2. Low precision:
        // plus the K smoothing's scale * q . mean(K) (lowp/layout.h).
        float lse = row_lse(row_max[r] * 0.6931471805599453f, total[r]);
        // (A row without a visible key keeps -inf: with nkv = 0 the pass wrote no shift.)
        if constexpr (kLowp)
          if (total[r] > 0.f) lse += reinterpret_cast<const float*>(params.lowp_ws + lw.lse_shift)[q_bh * nq + row];
        params.lse[batch * params.lse_batch_stride + head * params.lse_head_stride +
                   static_cast<int64_t>(out_row0 + row) * params.lse_row_stride] = lse;
      }
    }
  }     // not a stub
#endif  // FFPA_CUTE_DEVICE_CODE
}

}  // namespace ffpa
