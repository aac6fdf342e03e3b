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
// (sm_90+; trap stubs below, never launched there: api.cu).
// fp16 accumulation (Atoms::kF16Accum, fp16 inputs): S accumulates in fp16 over all of
// D; P V accumulates in fp16 over the kBlockN keys of one block for one pair of
// 8-column n-tiles at a time, then adds into the fp32 O.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "ffpa/arch_rules.h"
#include "ffpa/cute/spec.h"
#include "ffpa/kernel_traits.h"  // Load
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
// api.cu refuses impl='cute' there, naming cute_tma; sm_80-sm_90 keep it (the
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

}  // namespace cute_fwd
#endif  // FFPA_CUTE_DEVICE_CODE

// The kernel, for both feeds. Same parameter passing as the mma kernel (the tensor
// maps as a __grid_constant__ by value, used in place; the cp.async feed ignores them).
// Template arguments never depend on __CUDA_ARCH__ (ffpa.kernels.kernel_names).
template <typename Spec, Load kLoad>
__global__ void __launch_bounds__(Spec::kNThreads, 1)
    ffpa_fwd_cute_kernel(const FwdParams params, const __grid_constant__ TmaMaps maps) {
#if FFPA_CUTE_DEVICE_CODE
  if constexpr ((kLoad == Load::kTma && !kCuteTmaCode) || (kLoad == Load::kCpAsync && !kCuteCpAsyncCode)) {
    __trap();  // a cute_tma instance below sm_90, a cute one on the sm_120 family: never launched (api.cu)
  } else {
    using namespace cute;
    using Traits = CuteFwdTraits<Spec>;
    using T = typename Traits::T;
    using Element = typename Traits::Element;
    using Atoms = typename Traits::Atoms;
    using ET = ElemTraits<T>;
    constexpr bool kTma = kLoad == Load::kTma;
    constexpr bool kF16Acc = Traits::kF16Acc;
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
    constexpr int kSlabs = kBlockD / 64;  // TMA boxes per K / V step

    // Both feeds: tiles from a 1024-byte aligned base (the swizzle acts on address bits
    // up to 9; the launch reserved the slack).
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char* smem_base = smem_raw;
    {
      const uintptr_t addr = reinterpret_cast<uintptr_t>(smem_raw);
      smem_base += (Traits::kAlign - addr % Traits::kAlign) % Traits::kAlign;
    }
    Element* const smem_q = reinterpret_cast<Element*>(smem_base);
    Element* const smem_kv = smem_q + Traits::kQElems;
    Element* const smem_p = smem_kv + kStages * Traits::kKVElems;
    float* const smem_red = reinterpret_cast<float*>(smem_p + Traits::kPElems);  // [kNWarpsD][kBlockM]
    // kTma: bars[s] for K / V stage s, bars[kStages] for Q.
    uint64_t* const bars = reinterpret_cast<uint64_t*>(smem_base + Traits::kBarOffset);

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int warp_d = warp / kNWarpsM;  // the tiled MMA's column-major warp layout
    // Causal blocks near the end of Q have the most keys: launch them first.
    const int m_block = gridDim.x - 1 - blockIdx.x;
    const int head = blockIdx.y;
    const int batch = blockIdx.z;
    const int kv_head = head / params.h_ratio;
    const int nq = params.nq;
    const int nkv = params.nkv;
    const int m0 = m_block * kBlockM;

    // ---- global tensors of this (batch, head): (rows, D), unit stride along D.
    const Element* const q_ptr =
        static_cast<const Element*>(params.q) + batch * params.q_batch_stride + head * params.q_head_stride;
    const Element* const k_ptr =
        static_cast<const Element*>(params.k) + batch * params.k_batch_stride + kv_head * params.k_head_stride;
    const Element* const v_ptr =
        static_cast<const Element*>(params.v) + batch * params.v_batch_stride + kv_head * params.v_head_stride;
    Element* const o_ptr =
        static_cast<Element*>(params.o) + batch * params.o_batch_stride + head * params.o_head_stride;
    Tensor mQ = make_tensor(make_gmem_ptr(q_ptr),
                            make_layout(make_shape(nq, Int<kHeadDim>{}), make_stride(params.q_row_stride, _1{})));
    Tensor mK = make_tensor(make_gmem_ptr(k_ptr),
                            make_layout(make_shape(nkv, Int<kHeadDim>{}), make_stride(params.k_row_stride, _1{})));
    Tensor mV = make_tensor(make_gmem_ptr(v_ptr),
                            make_layout(make_shape(nkv, Int<kHeadDim>{}), make_stride(params.v_row_stride, _1{})));
    Tensor mO = make_tensor(make_gmem_ptr(o_ptr),
                            make_layout(make_shape(nq, Int<kHeadDim>{}), make_stride(params.o_row_stride, _1{})));

    // ---- shared tensors
    Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Traits::SmemLayoutQ{});  // (kBlockM, D)
    Tensor sP = make_tensor(make_smem_ptr(smem_p), typename Traits::SmemLayoutP{});  // (kBlockM, kBlockN)
    auto stage_kv = [&](int s) {  // (kBlockN, kBlockD): a K or V step
      return make_tensor(make_smem_ptr(smem_kv + s * Traits::kKVElems), typename Traits::SmemLayoutKV{});
    };
    auto stage_vt = [&](int s) {  // (kBlockD, kBlockN): the same V bytes as P V's B operand
      return make_tensor(make_smem_ptr(smem_kv + s * Traits::kKVElems), typename Traits::SmemLayoutVt{});
    };

    // Keys beyond the last row's causal limit are never needed (bottom-right alignment:
    // row i sees keys j <= i + nkv - nq; rows past nq are padding).
    const int causal_offset = nkv - nq;
    int n_blocks = (nkv + kBlockN - 1) / kBlockN;
    if (params.causal) {
      const int last_row = cute::min(m0 + kBlockM, nq) - 1;
      const int last_key = last_row + causal_offset;
      n_blocks = last_key < 0 ? 0 : cute::min(n_blocks, last_key / kBlockN + 1);
    }

    // ---- loads. cp.async: every thread, its slice of the tiled copy, rows outside
    // [0, nq) / [0, nkv) zero-filled. TMA: thread 0 alone, one box per 64-column slab
    // (out-of-bounds rows read as zeros), all of a tile completing on one mbarrier.
    typename Traits::GmemTiledCopy g2s;
    auto g2s_thr = g2s.get_slice(tid);
    auto copy_rows = [&](auto const& gsrc, auto& sdst, int row0, int rows_valid) {
      Tensor cid = make_identity_tensor(shape(gsrc));  // flat (rows, columns), like the global tile
      Tensor tg = g2s_thr.partition_S(gsrc);
      Tensor ts = g2s_thr.partition_D(sdst);
      Tensor tc = g2s_thr.partition_S(cid);
#pragma unroll
      for (int m = 0; m < size<1>(ts); ++m) {
        const bool valid = row0 + get<0>(tc(0, m, 0)) < rows_valid;
#pragma unroll
        for (int k = 0; k < size<2>(ts); ++k) copy(g2s.with(valid), tg(_, m, k), ts(_, m, k));
      }
    };
    auto load_q = [&]() {
      if constexpr (kTma) {
        if (tid == 0) {
          uint64_t* const bar = bars + kStages;
          mbar_arrive_expect_tx(bar, Traits::kQElems * 2);
#pragma unroll
          for (int c = 0; c < kHeadDim / 64; ++c)
            Atoms::Tma::copy(&maps.q, bar, &sQ(0, c * 64), c * 64, m0, head, batch);
        }
      } else {
        Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(m_block, 0));
        copy_rows(gQ, sQ, m0, nq);
        cp_async_commit();
      }
    };
    // Step `step` of KV block n_block into `stage`: step < kNChunks is K chunk `step`,
    // else V chunk step - kNChunks. kTma: thread 0 only (issue() below).
    auto load_step = [&](int step, int n_block, int stage) {
      const bool is_k = step < kNChunks;
      const int chunk = is_k ? step : step - kNChunks;
      Tensor s = stage_kv(stage);
      if constexpr (kTma) {
        uint64_t* const bar = bars + stage;
        mbar_arrive_expect_tx(bar, Traits::kKVElems * 2);
#pragma unroll
        for (int j = 0; j < kSlabs; ++j)
          Atoms::Tma::copy(is_k ? &maps.k : &maps.v, bar, &s(0, j * 64), chunk * kBlockD + j * 64, n_block * kBlockN,
                           kv_head, batch);
      } else {
        Tensor g = local_tile(is_k ? mK : mV, Shape<Int<kBlockN>, Int<kBlockD>>{}, make_coord(n_block, chunk));
        copy_rows(g, s, n_block * kBlockN, nkv);
      }
    };
    auto issue = [&](int step, int n_block, int stage) {  // no-op past the last block
      if constexpr (kTma) {
        if (tid == 0 && n_block < n_blocks) load_step(step, n_block, stage);
      } else {
        if (n_block < n_blocks) load_step(step, n_block, stage);
        cp_async_commit();  // empty groups keep the wait_group arithmetic uniform
      }
    };

    // ---- MMA and shared -> register copies
    typename Traits::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_slice(tid);
    auto s2r_a = make_tiled_copy_A(typename Traits::SmemCopyAtomA{}, tiled_mma);
    auto s2r_b = make_tiled_copy_B(typename Traits::SmemCopyAtomB{}, tiled_mma);
    auto s2r_bt = make_tiled_copy_B(typename Traits::SmemCopyAtomBTrans{}, tiled_mma);
    auto s2r_a_thr = s2r_a.get_slice(tid);
    auto s2r_b_thr = s2r_b.get_slice(tid);
    auto s2r_bt_thr = s2r_bt.get_slice(tid);

    Tensor tSsQ = s2r_a_thr.partition_S(sQ);  // (CPY, CPY_M, D / 16)
    Tensor tSrQ = thr_mma.partition_fragment_A(local_tile(sQ, Shape<Int<kBlockM>, Int<kBlockD>>{}, make_coord(0, 0)));
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

    for (int n_block = 0; n_block < n_blocks; ++n_block) {
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
      // 4x1: P in registers, in the A-operand layout of P V.
      Tensor rP = make_tensor<Element>(acc_mma.layout());
      Tensor tOrP = make_tensor(rP.data(), cute_fwd::acc_as_a(rP.layout()));

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
        issue(ahead % kSteps, n_block + ahead / kSteps, write_stage);
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        const int stage = read_stage;
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
        if (read_stage == 0) phase ^= 1u;
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
            gemm(tiled_mma, tSrQ(_, _, ks), tSrK_g(_, make_coord(_, p), ks), acc_g(_, _, make_coord(_, p)));
          }
        }
      }

      if constexpr (kF16Acc) {
        Tensor h = recast<uint32_t>(acc_mma);
#pragma unroll
        for (int j = 0; j < size(h); ++j) unpack_half2(h(j), acc_s(2 * j), acc_s(2 * j + 1));
      }
      // ---- online softmax on the finished S tile.
      Tensor s_rc = make_tensor(acc_s.data(), cute_fwd::acc_rowcol(acc_s.layout()));
      const bool need_mask = n0 + kBlockN > nkv || (params.causal && n0 + kBlockN - 1 > m0 + causal_offset);
      float blk_max[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        blk_max[r] = -INFINITY;
#pragma unroll
        for (int c = 0; c < size<1>(s_rc); ++c) {
          float x = s_rc(r, c) * params.scale_log2;
          if (need_mask) {
            const int row = m0 + get<0>(tScS_rc(r, c));
            const int col = n0 + get<1>(tScS_rc(r, c));
            if (col >= nkv || (params.causal && col > row + causal_offset)) x = -INFINITY;
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
      // P to 16 bits: in registers (4x1), or published to shared memory for the
      // other warps of the row group; the barrier of the next pipeline step makes
      // the whole P tile visible before any P V step reads it.
      if constexpr (kNWarpsD == 1) {
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
        Tensor tOsP = s2r_a_thr.partition_S(sP);          // (CPY, CPY_M, kPvKSteps)
        Tensor tOrPs = thr_mma.partition_fragment_A(sP);  // (MMA, MMA_M, kPvKSteps)
        Tensor tOrPs_cv = s2r_a_thr.retile_D(tOrPs);
        auto a_operand = [&](int ks) {
          if constexpr (kNWarpsD == 1) {
            return tOrP(_, _, ks);
          } else {
            copy(s2r_a, tOsP(_, _, ks), tOrPs_cv(_, _, ks));
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

    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockD>>{});
    Tensor tOcO = thr_mma.partition_C(cO);
    Tensor tOcO_rc = make_tensor(tOcO.data(), cute_fwd::acc_rowcol(tOcO.layout()));
#pragma unroll
    for (int c = 0; c < kNChunks; ++c) {
      Tensor gO = local_tile(mO, Shape<Int<kBlockM>, Int<kBlockD>>{}, make_coord(m_block, c));
      Tensor tOgO = thr_mma.partition_C(gO);
      Tensor o_rc = make_tensor(acc_o(_, _, _, c).data(), cute_fwd::acc_rowcol(acc_o(_, _, _, c).layout()));
      Tensor g_rc = make_tensor(tOgO.data(), cute_fwd::acc_rowcol(tOgO.layout()));
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (m0 + get<0>(tOcO_rc(r, 0)) >= nq) continue;
          // Columns (r, 2n) and (r, 2n + 1) are one 32-bit pair.
#pragma unroll
        for (int n = 0; n < size<1>(o_rc) / 2; ++n)
          *reinterpret_cast<uint32_t*>(&g_rc(r, 2 * n)) =
              ET::pack(o_rc(r, 2 * n) * inv[r], o_rc(r, 2 * n + 1) * inv[r]);
      }
    }
    if (params.lse != nullptr && (tid & 3) == 0 && warp_d == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int row = m0 + get<0>(tScS_rc(r, 0));
        if (row >= nq) continue;
        // row_max is max(s * scale * log2 e); back to natural log: * ln 2.
        const float lse = total[r] > 0.f ? row_max[r] * 0.6931471805599453f + logf(total[r]) : -INFINITY;
        params.lse[batch * params.lse_batch_stride + head * params.lse_head_stride +
                   static_cast<int64_t>(row) * params.lse_row_stride] = lse;
      }
    }
  }     // not a stub
#endif  // FFPA_CUTE_DEVICE_CODE
}

}  // namespace ffpa
