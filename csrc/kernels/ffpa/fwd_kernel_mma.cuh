// FFPA split-D forward kernel: mma.sync m16n8k16 (fp32 accumulation, or fp16 with
// Accum::kFp16), ldmatrix (.trans for V), a kStages-deep pipeline into XOR-swizzled
// shared memory, online softmax in fp32 (base-2 exponentials with log2(e) folded into
// the scale). One body, two ways to feed it (Load):
//   kCpAsync (sm_80+)  every thread copies 16-byte vectors with cp.async; a stage is
//                      ready after cp.async.wait_group and the barrier;
//   kTma     (sm_90+)  thread 0 issues one cp.async.bulk.tensor box per tile (Q, K or
//                      V chunk) with the 128-byte swizzle, which is exactly the XOR
//                      pattern below; a stage is ready when its mbarrier's phase
//                      completes (expect_tx = the boxes' bytes). No warp
//                      specialisation: 128 or 256 threads, three stages, the same
//                      compute as kCpAsync (the sm_120 family's shape).
//
// Per block: Br = kBlockM query rows of one (batch, head); per KV block of Bc = 64 keys
//   S[Br, Bc]  = sum over D chunks c of Q[Br, c] . K[Bc, c]^T   (Q and K chunks streamed)
//   online softmax on S (running row max m and sum l)
//   O[Br, c]  += P[Br, Bc] . V[Bc, c] for every D chunk c       (V chunks streamed)
// Q is re-streamed for every KV block rather than held on chip: that is what keeps
// shared memory independent of D (the point of split-D); the re-reads hit L2.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "ffpa/arch_rules.h"
#include "ffpa/kernel_traits.h"
#include "ffpa/mask.h"
#include "ffpa/params.h"
#include "ffpa/tma.cuh"
#include "ffpa/utils.cuh"

namespace ffpa {

// acc (an f32 C fragment) += h (the same fragment accumulated in fp16: two half2).
__device__ __forceinline__ void add_f16_frag(float (&acc)[4], const uint32_t (&h)[2]) {
  float f[4];
  unpack_half2(h[0], f[0], f[1]);
  unpack_half2(h[1], f[2], f[3]);
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] += f[e];
}

// Element offset of (row, 16-byte vector vec) in a [rows][64] chunk tile. XOR with
// (row % 8) puts the 8 rows an ldmatrix phase reads (same vec) in 8 different
// 16-byte bank groups, so ldmatrix and the cp.async writes are conflict-free.
__device__ __forceinline__ int swizzle(int row, int vec) { return row * 64 + ((vec ^ (row & 7)) << 3); }

// fp16 accumulation of P V: per 64-key block and d-tile pair (false) or per mma
// (true; see the PV step). Measured with nvcc 13.0, cp.async feed, D = 256 and 512:
// the per-pair form spills 16-52 bytes on sm_89 and sm_90, the per-mma form fits
// there (255 registers) and spills 100-300 bytes on sm_120f, where neither form fits
// at D = 256. So sm_80-sm_90 take the per-mma form, and on the sm_120 family fp16
// accumulation is the TMA feed's alone (kMmaF16AccCompiled; src/forward.cpp refuses
// impl='mma' with accum='fp16' there and auto takes TMA). ffpa.kernels.no_spills
// guards these choices; the CPU emulator runs both forms.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1000
inline constexpr bool kPvPerStepDefault = true;
#else
inline constexpr bool kPvPerStepDefault = false;
#endif
inline constexpr bool kMmaF16AccCompiled = kDeviceCpAsyncHeavy;  // ffpa/arch_rules.h

// The kernel, for both feeds. The tensor maps travel as a __grid_constant__ parameter
// (the TMA unit reads them from the kernel's parameter space by address; the cp.async
// feed ignores them). Both parameters are used in place: routing them through a
// by-reference helper made ptxas copy them to the stack and spill at D = 256.
// Below sm_90 (the release's sm_89 pass) the TMA instantiations are trap stubs; the
// launcher only starts them where the device loads an sm_90+ binary of this library.
// __launch_bounds__ names one block per SM as the minimum: without it ptxas capped the
// registers for occupancy and spilled (sm_89, D = 128: 168 registers, 28 bytes).
// kPvForm: 0 = the arch's default form (kPvPerStepDefault), 1 = per pair, 2 = per mma
// (the emulator runs both explicitly). Template arguments must not depend on
// __CUDA_ARCH__: the host pass registers the kernel by its template arguments, and a
// default that differed between the host and device passes named a kernel the device
// code does not hold (cudaErrorInvalidResourceHandle, seen on the H200).
// kMaskBreak: the emulator's deliberate mask defects (ffpa/mask.h); kNone in the library.
// kMasked: the instance for calls with a window, seqused_k or varlen (mask_active); the
// unmasked instance takes its extents from the parameters alone (plain_mask), as the
// kernel did before the masks, so an unmasked call pays nothing for them in registers.
// kBreakMaskReplace: the CPU emulator's breakage (csrc/tests/emulate_kernels.cpp,
// emulate_masks.cpp), the causal mask (masked instance: the band) replacing scores under the
// math rule instead of adding -inf; never compiled into the library.
template <typename Traits, Load kLoad, bool kF16Acc, int kPvForm = 0, MaskBreak kMaskBreak = MaskBreak::kNone,
          bool kMasked = false, bool kBreakMaskReplace = false>
__global__ void __launch_bounds__(Traits::kNThreads, 1)
    ffpa_fwd_kernel(const FwdParams params, const __grid_constant__ TmaMaps maps) {
  using T = typename Traits::Element;
  constexpr bool kPvPerStep = kPvForm == 0 ? kPvPerStepDefault : kPvForm == 2;
  constexpr bool kTma = kLoad == Load::kTma;
  static_assert(!kF16Acc || sizeof(T) == 2, "fp16 accumulation");
#ifndef FFPA_TMA_DEVICE
  if constexpr (kTma) {
    __trap();
    return;
  }
#endif
  if constexpr (!kTma && kF16Acc && !kMmaF16AccCompiled) {
    __trap();
    return;
  }
  using ET = ElemTraits<T>;
  constexpr int kNThreads = Traits::kNThreads;
  constexpr int kNWarpsM = Traits::kNWarpsM;
  constexpr int kNWarpsD = Traits::kNWarpsD;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kBlockD = Traits::kBlockD;
  constexpr int kStages = Traits::kStages;
  constexpr int kNChunks = Traits::kNChunks;
  constexpr int kSteps = Traits::kStepsPerBlock;
  constexpr int kWarpN = Traits::kWarpN;
  constexpr int kWarpNTiles = Traits::kWarpNTiles;
  constexpr int kWarpD = Traits::kWarpD;
  constexpr int kWarpDTiles = Traits::kWarpDTiles;
  constexpr int kVecsPerRow = Traits::kVecsPerRow;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem_base = smem_raw;
  if constexpr (kTma) {
    // Swizzle atoms are 1024 bytes: round the base up (the launch reserved the slack).
    const uintptr_t addr = reinterpret_cast<uintptr_t>(smem_raw);
    smem_base += (Traits::kTmaAlign - addr % Traits::kTmaAlign) % Traits::kTmaAlign;
  }
  T* const smem_stages = reinterpret_cast<T*>(smem_base);
  T* const smem_p = smem_stages + kStages * Traits::kStageElems;        // [Br][Bc], 4x2 / 2x4 only
  float* const smem_red = reinterpret_cast<float*>(smem_p + Traits::kPElems);  // [kNWarpsD][Br]
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem_base + Traits::kBarOffset);  // kTma: one per stage

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % kNWarpsM;
  const int warp_d = warp / kNWarpsM;
  const int g = lane >> 2;  // mma group: fragment rows g and g + 8
  const int t = lane & 3;   // thread in group: fragment columns 2t, 2t + 1

  // Causal blocks near the end of Q have the most keys: launch them first.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y;
  const int kv_head = head / params.h_ratio;
  const int m0 = m_block * kBlockM;

  // The sequence (blockIdx.z: a batch entry, or a packed sequence in varlen) and its mask
  // (ffpa/mask.h): from here on rows and keys are the sequence's own (local) indices.
  MaskParams mp = params.mask;
  if constexpr (kMaskBreak == MaskBreak::kPaddedKeyCounted) mp.seqused_k = nullptr;
  // The forward's causal is bottom-right aligned (api.h).
  auto make_mask = [&]() {
    return kMasked ? seq_mask(mp, blockIdx.z, params.nq, params.nkv, params.causal, mp.diag_bottom_right)
                   : plain_mask(blockIdx.z, params.nq, params.nkv, params.causal, params.causal_offset);
  };
  SeqMask sm = make_mask();
  if constexpr (kMaskBreak == MaskBreak::kUpperEdge) sm.hi -= 1;
  if constexpr (kMaskBreak == MaskBreak::kLowerEdge) sm.lo += 1;
  if constexpr (kMaskBreak == MaskBreak::kSeqOffset) sm.k_start = sm.k_start > 0 ? sm.k_start - 1 : 0;
  // Varlen grids cover the longest sequence: blocks past this one's rows have no work (the
  // whole block leaves before any barrier).
  if constexpr (kMasked)
    if (m0 >= sm.len_q) return;
  const SeqMask& seq = sm;
  const int batch = sm.batch;

  // Causal: row i sees keys j <= i + causal_offset (nkv - nq bottom-right, 0 top-left,
  // set on the host: FwdParams). The masked instance
  // (window, seqused_k, varlen) has its own rule (SeqMask); both follow the non-finite
  // pre-pass's flags (ffpa/mask.h: the masked instance for the keys its sequence reads).
  // The offset and the head's flag are read again where a tile needs them rather than
  // held across the main loop, and the flag is not hoisted out of the per-score mask
  // either (held or hoisted, ptxas spilled 28-96 bytes at D = 256 on sm_89, nvcc 13.0).
  // The flags are [B, Hq]; in varlen B is 1 and batch 0, so one flag covers every sequence
  // of the head (a flagged sequence without NaN / inf gets the same values, more slowly).
  auto causal_offset = [&]() { return params.causal_offset; };
  auto math_rule = [&]() {
    return kMaskBreak != MaskBreak::kFlagsIgnored && math_rule_for(params.nonfinite, batch, params.hq, head);
  };
  const T* const q_base = static_cast<const T*>(params.q) + batch * params.q_batch_stride +
                          head * params.q_head_stride + static_cast<int64_t>(sm.q_start) * params.q_row_stride;
  const T* const k_base = static_cast<const T*>(params.k) + batch * params.k_batch_stride +
                          kv_head * params.k_head_stride + static_cast<int64_t>(sm.k_start) * params.k_row_stride;
  const T* const v_base = static_cast<const T*>(params.v) + batch * params.v_batch_stride +
                          kv_head * params.v_head_stride + static_cast<int64_t>(sm.k_start) * params.v_row_stride;

  // Only the KV blocks the mask lets some row of this block see are visited: blocks past
  // the causal diagonal or the window's right edge, before its left edge, or past the
  // sequence's keys are skipped (under the math rule only those past the sequence's keys).
  // Rows past nq are padding and do not count.
  int n_first = 0, n_end;
  if constexpr (kMasked) {
    masked_kv_block_range(sm, m0, min(m0 + kBlockM, sm.len_q), kBlockN, math_rule(), &n_first, &n_end);
  } else {
    // Unmasked: keys beyond the last row's causal limit (bottom-right) are skipped unless
    // this head follows the math rule (ffpa/mask.h: a NaN / inf under the causal mask).
    n_end = kv_blocks_for_rows(m0, kBlockM, params.nq, params.nkv, kBlockN, params.causal, causal_offset(),
                               math_rule());
  }
  if constexpr (kMaskBreak == MaskBreak::kSkipLastBlock) n_end = max(n_first, n_end - 1);
  if constexpr (kMaskBreak == MaskBreak::kNoSkip) n_first = 0, n_end = (sm.len_k + kBlockN - 1) / kBlockN;
  const int n_blocks = n_end - n_first;  // visited blocks: n_first + [0, n_blocks)

  // ---- pipeline step loads: step < kNChunks loads Q and K chunk `step`, otherwise
  // the V chunk (step - kNChunks): columns [64 c, 64 c + 64) of V, split between the
  // kNWarpsD warps of a row group (kWarpD columns each). Rows outside [0, nq) /
  // [0, nkv) are zero-filled (cp.async src-size 0; TMA out-of-bounds fill). kTma:
  // thread 0 alone calls this.
  auto load_step = [&](int step, int n_block, int stage) {
    T* const s_stage = smem_stages + stage * Traits::kStageElems;
    if constexpr (kTma) {
      uint64_t* const bar = bars + stage;
      const int q_row = seq.q_start + m0, k_row = seq.k_start + n_block * kBlockN;  // the arrays' rows
      const int b = seq.batch;
      if (step < kNChunks) {
        mbar_arrive_expect_tx(bar, (Traits::kQTileElems + Traits::kKTileElems) * 2);
        tma_load_4d(s_stage, &maps.q, step * kBlockD, q_row, head, b, bar);
        tma_load_4d(s_stage + Traits::kQTileElems, &maps.k, step * kBlockD, k_row, kv_head, b, bar);
      } else {
        mbar_arrive_expect_tx(bar, Traits::kVTileElems * 2);
        tma_load_4d(s_stage, &maps.v, (step - kNChunks) * kBlockD, k_row, kv_head, b, bar);
      }
      return;
    }
    // Rows of this tile inside the sequence.
    const int k_rows = (kMasked ? seq.len_k : params.nkv) - n_block * kBlockN;
    if (step < kNChunks) {
      const int q_rows = (kMasked ? seq.len_q : params.nq) - m0;
      const int d0 = step * kBlockD;
      T* const s_q = s_stage;
      T* const s_k = s_stage + Traits::kQTileElems;
#pragma unroll
      for (int i = 0; i < Traits::kQCopies; ++i) {
        const int idx = tid + i * kNThreads;
        const int r = idx / kVecsPerRow;
        const int vec = idx % kVecsPerRow;
        const int row = m0 + r;
        const bool valid = kMasked ? r < q_rows : row < params.nq;
        const T* src = q_base + static_cast<int64_t>(valid ? row : 0) * params.q_row_stride + d0 + vec * 8;
        cp_async_16(s_q + swizzle(r, vec), src, valid);
      }
#pragma unroll
      for (int i = 0; i < Traits::kKVCopies; ++i) {
        const int idx = tid + i * kNThreads;
        const int r = idx / kVecsPerRow;
        const int vec = idx % kVecsPerRow;
        const int row = n_block * kBlockN + r;
        const bool valid = kMasked ? r < k_rows : row < params.nkv;
        const T* src = k_base + static_cast<int64_t>(valid ? row : 0) * params.k_row_stride + d0 + vec * 8;
        cp_async_16(s_k + swizzle(r, vec), src, valid);
      }
    } else {
      const int chunk = step - kNChunks;
      T* const s_v = s_stage;
#pragma unroll
      for (int i = 0; i < Traits::kKVCopies; ++i) {
        const int idx = tid + i * kNThreads;
        const int r = idx / kVecsPerRow;
        const int vec = idx % kVecsPerRow;
        const int col = chunk * kBlockD + vec * 8;
        const int row = n_block * kBlockN + r;
        const bool valid = kMasked ? r < k_rows : row < params.nkv;
        const T* src = v_base + static_cast<int64_t>(valid ? row : 0) * params.v_row_stride + col;
        cp_async_16(s_v + swizzle(r, vec), src, valid);
      }
    }
  };

  // O accumulators: chunk c, n-tile j covers columns
  // c * 64 + warp_d * kWarpD + j * 8 + {2t, 2t + 1} of rows g and g + 8.
  float acc_o[kNChunks][kWarpDTiles][4];
#pragma unroll
  for (int c = 0; c < kNChunks; ++c)
#pragma unroll
    for (int j = 0; j < kWarpDTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[c][j][e] = 0.f;

  // Row state for rows g (index 0) and g + 8 (index 1), base-2 scaled domain.
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // partial: this thread's columns only, reduced at the end

  if constexpr (kTma) {
    // One barrier per stage, one arrival (thread 0's expect_tx) per fill.
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) mbar_init(bars + s, 1);
      fence_barrier_init();
    }
    __syncthreads();
  }
  // Issue step `step` of the it-th visited KV block into `stage` (no-op past the last).
  auto issue = [&](int step, int it, int stage) {
    if constexpr (kTma) {
      if (tid == 0 && it < n_blocks) load_step(step, n_first + it, stage);
    } else {
      if (it < n_blocks) load_step(step, n_first + it, stage);
      cp_async_commit();  // empty groups keep the wait_group arithmetic uniform
    }
  };

  // ---- prologue: the first kStages - 1 steps.
  int write_stage = 0;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    issue(s % kSteps, s / kSteps, write_stage);
    write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
  }
  int read_stage = 0;
  uint32_t phase = 0;  // kTma: parity of the fill being waited for, per round of stages

  for (int it = 0; it < n_blocks; ++it) {
    const int n_block = n_first + it;
    const int n0 = n_block * kBlockN;
    // kTma: a box reads whole 64-row tiles, so rows past the sequence's keys hold the next
    // sequence's (varlen) or padding keys (seqused_k); they are zeroed below before use.
    // (Past the arrays' last row the TMA unit fills zeros itself.)
    int tail_keys = kBlockN;
    if constexpr (kTma) {
      const int nkv = seq.len_k;
      if (n0 + kBlockN > nkv && seq.k_start + nkv < params.nkv) tail_keys = nkv - n0;
    }
    float acc_s[kWarpNTiles][4];
#pragma unroll
    for (int j = 0; j < kWarpNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[j][e] = 0.f;
    // 4x1 layout: P packed to 16 bits once after the softmax, as the A fragments of the
    // P V k-steps (n-tiles 2ks and 2ks + 1 of S are exactly k-step ks's fragment), so
    // the fp32 S tile is dead during the V chunks.
    uint32_t p_frag[kNWarpsD == 1 ? Traits::kPvKSteps : 1][4];
    // kF16Acc: S accumulates in half2 registers, converted to acc_s for the softmax.
    uint32_t acc_sh[kF16Acc ? kWarpNTiles : 1][2];
#pragma unroll
    for (int j = 0; j < (kF16Acc ? kWarpNTiles : 1); ++j) acc_sh[j][0] = acc_sh[j][1] = 0u;

#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      // kCpAsync: the group of this step has landed once at most kStages - 2 newer
      // ones are pending. kTma: the stage's barrier completed the phase of this fill.
      // The block barrier then also guarantees every warp finished the step that last
      // used the stage refilled next.
      if constexpr (kTma) {
        mbar_wait(bars + read_stage, phase);
      } else {
        cp_async_wait<kStages - 2>();
      }
      __syncthreads();
      {
        const int ahead = step + kStages - 1;
        issue(ahead % kSteps, it + ahead / kSteps, write_stage);
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
      }
      const T* const s_stage = smem_stages + read_stage * Traits::kStageElems;
      if constexpr (kTma) {
        if (tail_keys < kBlockN) {
          // The K (or V) tile of this step: rows [tail_keys, 64) to zero, so that no value
          // of a key outside the sequence reaches S or P V (0 * inf would be NaN). The
          // async proxy refills this stage later: order these generic writes before it.
          T* const tile = const_cast<T*>(s_stage) + (step < kNChunks ? Traits::kQTileElems : 0);
          zero_tile_tail_rows(tile, kBlockN, tail_keys, tid, kNThreads);
          fence_proxy_async_smem();
          __syncthreads();
        }
      }
      read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
      if (read_stage == 0) phase ^= 1u;

      if (step < kNChunks) {
        // ---- S += Q[16 rows of warp_m, chunk] . K[kWarpN keys of warp_d, chunk]^T
        const T* const s_q = s_stage;
        const T* const s_k = s_stage + Traits::kQTileElems;
#pragma unroll
        for (int ks = 0; ks < Traits::kKSteps; ++ks) {
          uint32_t a[4];
          // A: lanes 0-15 address rows 0-15 at k 0, lanes 16-31 rows 0-15 at k 8.
          ldmatrix_x4(a, s_q + swizzle(warp_m * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
          for (int jp = 0; jp < kWarpNTiles / 2; ++jp) {
            uint32_t b[4];
            // B from K[n][k]: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
            // (n 8-15, k 8-15) -> b[0], b[1] for n-tile 2jp and b[2], b[3] for 2jp + 1.
            const int krow = warp_d * kWarpN + jp * 16 + (lane & 7) + ((lane >> 4) << 3);
            ldmatrix_x4(b, s_k + swizzle(krow, ks * 2 + ((lane >> 3) & 1)));
            if constexpr (kF16Acc) {
              Mma16816F16Acc::run(acc_sh[2 * jp], a, b[0], b[1]);
              Mma16816F16Acc::run(acc_sh[2 * jp + 1], a, b[2], b[3]);
            } else {
              Mma16816<T>::run(acc_s[2 * jp], a, b[0], b[1]);
              Mma16816<T>::run(acc_s[2 * jp + 1], a, b[2], b[3]);
            }
          }
        }

        if (step == kNChunks - 1) {
          if constexpr (kF16Acc) {
#pragma unroll
            for (int j = 0; j < kWarpNTiles; ++j) {
              unpack_half2(acc_sh[j][0], acc_s[j][0], acc_s[j][1]);
              unpack_half2(acc_sh[j][1], acc_s[j][2], acc_s[j][3]);
            }
          }
          // ---- online softmax on the finished S tile.
          const int row_lo = m0 + warp_m * 16 + g;
          const SeqMask& cur = sm;
          const bool need_mask = kMasked ? !block_visible(cur, m0, min(m0 + kBlockM, cur.len_q), n0, n0 + kBlockN)
                                         : tile_needs_mask(m0, n0, kBlockN, params.nkv, params.causal, causal_offset());
#pragma unroll
          for (int j = 0; j < kWarpNTiles; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float x = acc_s[j][e] * params.scale_log2;
              if (need_mask) {
                const int col = n0 + warp_d * kWarpN + j * 8 + 2 * t + (e & 1);
                const int row = row_lo + (e >> 1) * 8;
                if constexpr (kMasked) {
                  x = masked_score(cur, x, row, col, math_rule() && !kBreakMaskReplace);
                } else {
                  x = mask_score(x, row, col, params.nkv, params.causal, causal_offset(), math_rule() && !kBreakMaskReplace);
                }
              }
              acc_s[j][e] = x;
            }
          }
          float blk_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
          for (int j = 0; j < kWarpNTiles; ++j) {
            blk_max[0] = fmaxf(blk_max[0], fmaxf(acc_s[j][0], acc_s[j][1]));
            blk_max[1] = fmaxf(blk_max[1], fmaxf(acc_s[j][2], acc_s[j][3]));
          }
          blk_max[0] = quad_max(blk_max[0]);
          blk_max[1] = quad_max(blk_max[1]);
          if constexpr (kNWarpsD > 1) {
            // The warps of a row group hold different key columns: combine their maxima
            // so that all of them scale P and O by the same row max.
            if (t == 0) {
              smem_red[warp_d * kBlockM + warp_m * 16 + g] = blk_max[0];
              smem_red[warp_d * kBlockM + warp_m * 16 + g + 8] = blk_max[1];
            }
            __syncthreads();
#pragma unroll
            for (int w = 0; w < kNWarpsD; ++w) {
              blk_max[0] = fmaxf(blk_max[0], smem_red[w * kBlockM + warp_m * 16 + g]);
              blk_max[1] = fmaxf(blk_max[1], smem_red[w * kBlockM + warp_m * 16 + g + 8]);
            }
          }
          float corr[2];
          float base[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const float new_max = fmaxf(row_max[r], blk_max[r]);
            // A row with no visible key yet keeps max -inf; use 0 as the base there so
            // exp2(-inf - base) = 0 instead of NaN.
            base[r] = new_max == -INFINITY ? 0.f : new_max;
            corr[r] = fast_exp2(row_max[r] - base[r]);
            row_max[r] = new_max;
          }
          float blk_sum[2] = {0.f, 0.f};
#pragma unroll
          for (int j = 0; j < kWarpNTiles; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float p = fast_exp2(acc_s[j][e] - base[e >> 1]);
              acc_s[j][e] = p;
              blk_sum[e >> 1] += p;
            }
          }
#pragma unroll
          for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * corr[r] + blk_sum[r];
#pragma unroll
          for (int c = 0; c < kNChunks; ++c)
#pragma unroll
            for (int j = 0; j < kWarpDTiles; ++j) {
              acc_o[c][j][0] *= corr[0];
              acc_o[c][j][1] *= corr[0];
              acc_o[c][j][2] *= corr[1];
              acc_o[c][j][3] *= corr[1];
            }
          if constexpr (kNWarpsD == 1) {
#pragma unroll
            for (int ks = 0; ks < Traits::kPvKSteps; ++ks) {
              p_frag[ks][0] = ET::pack(acc_s[2 * ks][0], acc_s[2 * ks][1]);
              p_frag[ks][1] = ET::pack(acc_s[2 * ks][2], acc_s[2 * ks][3]);
              p_frag[ks][2] = ET::pack(acc_s[2 * ks + 1][0], acc_s[2 * ks + 1][1]);
              p_frag[ks][3] = ET::pack(acc_s[2 * ks + 1][2], acc_s[2 * ks + 1][3]);
            }
          }
          if constexpr (kNWarpsD > 1) {
            // Publish this warp's P columns; the barrier at the next pipeline step
            // makes the whole [Br, Bc] P tile visible before any PV step reads it.
#pragma unroll
            for (int j = 0; j < kWarpNTiles; ++j) {
              const int col = warp_d * kWarpN + j * 8 + 2 * t;
              const int row = warp_m * 16 + g;
              const int vec = col >> 3;
              *reinterpret_cast<uint32_t*>(smem_p + swizzle(row, vec) + (col & 7)) =
                  ET::pack(acc_s[j][0], acc_s[j][1]);
              *reinterpret_cast<uint32_t*>(smem_p + swizzle(row + 8, vec) + (col & 7)) =
                  ET::pack(acc_s[j][2], acc_s[j][3]);
            }
          }
        }
      } else {
        // ---- O[16 rows, kWarpD columns of this chunk] += P[16, Bc] . V[Bc, chunk]
        const int chunk = step - kNChunks;
        const T* const s_v = s_stage;
        // kF16Acc: this block's P V (64 keys) accumulates in half2 registers, then adds
        // into the fp32 O accumulators. The d-tile pairs then run one at a time (outer
        // loop) so that only one pair's 4 half2 registers are live, at the price of
        // re-packing / re-loading the P fragment per pair. kPvPerStep instead adds
        // each mma's fp16 result (16 keys) into O at once. Which one fits in 255
        // registers at D = 512 depends on the arch (see kPvPerStepDefault).
        constexpr int kGroups = kF16Acc && !kPvPerStep ? kWarpDTiles / 2 : 1;
        constexpr int kPairsPerGroup = kF16Acc && !kPvPerStep ? 1 : kWarpDTiles / 2;
#pragma unroll
        for (int grp = 0; grp < kGroups; ++grp) {
          uint32_t acc_ph[2][2] = {{0u, 0u}, {0u, 0u}};
#pragma unroll
          for (int ks = 0; ks < Traits::kPvKSteps; ++ks) {
            uint32_t a[4];
            if constexpr (kNWarpsD == 1) {
#pragma unroll
              for (int i = 0; i < 4; ++i) a[i] = p_frag[ks][i];
            } else {
              ldmatrix_x4(a, smem_p + swizzle(warp_m * 16 + (lane & 15), ks * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int jj = 0; jj < kPairsPerGroup; ++jj) {
              const int jp = grp * kPairsPerGroup + jj;
              uint32_t b[4];
              // B from V[kv][d] transposed: matrices (kv 0-7, d 0-7), (kv 8-15, d 0-7),
              // (kv 0-7, d 8-15), (kv 8-15, d 8-15) -> b[0], b[1] for d-tile 2jp, b[2],
              // b[3] for 2jp + 1.
              const int vrow = ks * 16 + (lane & 15);
              const int vvec = warp_d * (kWarpD / 8) + jp * 2 + (lane >> 4);
              ldmatrix_x4_trans(b, s_v + swizzle(vrow, vvec));
              if constexpr (kF16Acc && kPvPerStep) {
                uint32_t t[2][2] = {{0u, 0u}, {0u, 0u}};
                Mma16816F16Acc::run(t[0], a, b[0], b[1]);
                Mma16816F16Acc::run(t[1], a, b[2], b[3]);
                add_f16_frag(acc_o[chunk][2 * jp], t[0]);
                add_f16_frag(acc_o[chunk][2 * jp + 1], t[1]);
              } else if constexpr (kF16Acc) {
                Mma16816F16Acc::run(acc_ph[0], a, b[0], b[1]);
                Mma16816F16Acc::run(acc_ph[1], a, b[2], b[3]);
              } else {
                Mma16816<T>::run(acc_o[chunk][2 * jp], a, b[0], b[1]);
                Mma16816<T>::run(acc_o[chunk][2 * jp + 1], a, b[2], b[3]);
              }
            }
          }
          if constexpr (kF16Acc && !kPvPerStep) {
            add_f16_frag(acc_o[chunk][2 * grp], acc_ph[0]);
            add_f16_frag(acc_o[chunk][2 * grp + 1], acc_ph[1]);
          }
        }
      }
    }
  }
  // kTma: every issued fill was waited for above (fills are only issued for blocks
  // below n_blocks, and all of those are consumed), so no copy is in flight here.
  if constexpr (!kTma) cp_async_wait<0>();

  // ---- epilogue: full row sums, normalise, store O (and LSE).
  float total[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) total[r] = quad_sum(row_sum[r]);
  if constexpr (kNWarpsD > 1) {
    // Every warp of a row group summed only its own key columns. smem_red was last
    // read in the softmax of the final KV block; the pipeline barriers of its PV
    // steps separate that read from these writes.
    __syncthreads();
    if (t == 0) {
      smem_red[warp_d * kBlockM + warp_m * 16 + g] = total[0];
      smem_red[warp_d * kBlockM + warp_m * 16 + g + 8] = total[1];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < kNWarpsD; ++w) s += smem_red[w * kBlockM + warp_m * 16 + g + r * 8];
      total[r] = s;
    }
  }

  // The sequence's place again (global loads in varlen): kept from the start, it held two
  // registers through the main loop.
  SeqMask fin = make_mask();
  if constexpr (kMaskBreak == MaskBreak::kSeqOffset) fin.k_start = fin.k_start > 0 ? fin.k_start - 1 : 0;
  T* const o_base = static_cast<T*>(params.o) + fin.batch * params.o_batch_stride + head * params.o_head_stride +
                    static_cast<int64_t>(fin.q_start) * params.o_row_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = m0 + warp_m * 16 + g + r * 8;
    if (row >= fin.len_q) continue;
    // A row that saw no key (causal with nq > nkv, a window or key padding that leaves it
    // none, or nkv == 0) is 0, like the NumPy reference; its LSE is -inf. A NaN sum (a NaN
    // or +inf score) leaves O NaN (its accumulators are NaN) and gives a NaN LSE (row_lse).
    const float inv = total[r] > 0.f ? 1.f / total[r] : 0.f;
    T* const o_row = o_base + static_cast<int64_t>(row) * params.o_row_stride;
#pragma unroll
    for (int c = 0; c < kNChunks; ++c)
#pragma unroll
      for (int j = 0; j < kWarpDTiles; ++j) {
        const int col = c * kBlockD + warp_d * kWarpD + j * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(o_row + col) =
            ET::pack(acc_o[c][j][2 * r] * inv, acc_o[c][j][2 * r + 1] * inv);
      }
    if (params.lse != nullptr && t == 0 && warp_d == 0) {
      // row_max is max(s * scale * log2 e); back to natural log: * ln 2.
      const float lse = row_lse(row_max[r] * 0.6931471805599453f, total[r]);
      params.lse[fin.batch * params.lse_batch_stride + head * params.lse_head_stride +
                 static_cast<int64_t>(fin.q_start + row) * params.lse_row_stride] = lse;
    }
  }
}

}  // namespace ffpa
