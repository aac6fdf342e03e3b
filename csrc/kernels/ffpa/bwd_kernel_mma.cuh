// FFPA split-D backward kernels: mma.sync m16n8k16 with fp32 accumulation, ldmatrix,
// a kStages-deep cp.async pipeline (or, Load::kTma, TMA boxes completing on mbarriers:
// the forward's protocol) into the forward's XOR-swizzled 64-column chunk tiles
// (fwd_kernel_mma.cuh's swizzle and fragment conventions), gradients written in the
// input dtype. Three launches:
//
// 1. ffpa_bwd_preprocess_kernel: Delta = rowsum(dO * O) in fp32 and the LSE moved to
//    the base-2 domain, into a contiguous fp32 workspace (BwdParams::workspace).
// 2. ffpa_bwd_kernel<.., kRowsAreKeys = true>: dK and dV. A block owns kBlockM keys of
//    one kv head and walks every query block of every query head of its group (GQA:
//    the group's sum happens in the block's registers; no expanded K / V, no atomics):
//      S^T = K Q^T, P^T = exp2(S^T * scale log2 e - lse2)   (recomputed from the LSE)
//      dV += P^T dO,  dP^T = V dO^T,  dS^T = P^T * (dP^T - Delta),  dK += dS^T Q
// 3. ffpa_bwd_kernel<.., kRowsAreKeys = false>: dQ. A block owns kBlockM query rows and
//    walks the key blocks: S = Q K^T, P, dP = dO V^T, dS, dQ += dS K.
//
// dQ's reduction over key blocks is this second pass rather than fp32 atomics from the
// dK / dV kernel (flash-attention 2's choice): no atomics means the gradients are
// bit-identical run to run with no separate deterministic mode, there is no fp32 dQ
// accumulation buffer (B Hq Nq D floats) and no conversion pass, and the pass reuses
// the same body. The price is recomputing S and dP: 7 matrix products instead of 5.
//
// Split-D as in the forward (D > 128): per column block the pipeline streams, in 64-wide
// D chunks,
//   steps [0, C)      the row operand's chunk and the column operand's chunk -> S
//   steps [C, 2C)     the second pair -> dP (dK / dV kernel: and dV += P^T dO chunk)
//   steps [2C, 3C)    the column operand's chunk -> gradient chunk += dS . chunk
// (C = D / 64), so shared memory stays O(1) in D: kStages x (rows + 64) x 64 elements
// plus the 16-bit P and dS tiles. Persist-D (D <= 128, bwd_kernel_traits.h says why):
// the block's rows stay resident for its whole loop and each column block's two
// operands are loaded once, whole-D, into three slots (the loop below says how); the
// products and the P / dS code are the same. The gradient accumulators live in registers, split
// across the kNWarpsD warps of a row group along D (bwd_kernel_traits.h). The P and dS
// tiles go through shared memory (every warp of a row group needs all 64 columns as
// its mma A operand).
//
// Masking and NaN: an entry (query i, key j) is visible when i < Nq and visible() of
// ffpa/mask.h holds (j < the keys read, the causal diagonal, the sliding window; per packed
// sequence in varlen). P of an invisible entry is exp2(-inf - lse2): 0, and NaN where
// the row's LSE is NaN, as torch's math backend (softmax of a NaN row is NaN in every
// column). A row that saw no key has lse2 = +inf (the preprocessing pass), so its P is 0
// and its gradients are 0, as SDPA gives. NaN and inf in the inputs propagate through
// the products. Column blocks the mask hides from every row of a block are skipped (never
// computed), as in the forward; keys past a sequence's read keys get zero dK / dV.
// Heads the non-finite pre-pass flagged (causal or windowed calls: src/backward.cpp) visit every
// block of the sequence's read keys with the mask added as -inf instead (ffpa/mask.h's
// math rule), so that a NaN in V or dO under the causal band or the window reaches the
// gradients through the products, as the math backend's autograd has it; a row that saw
// no key keeps dS = 0 * (dP - Delta), NaN where dP or Delta is, as the math backend's.
// Keys past a sequence's read keys (seqused_k padding, other packed sequences) stay
// outside the problem under the rule too.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "ffpa/bwd_kernel_traits.h"
#include "ffpa/bwd_params.h"
#include "ffpa/kernel_traits.h"  // Load
#include "ffpa/mask.h"
#include "ffpa/tma.cuh"
#include "ffpa/utils.cuh"

namespace ffpa {

// Deliberate defects for the CPU emulator's breakage tests (csrc/tests/emulate_bwd.cpp),
// each of which must make a run fail; the library compiles kNone only.
enum class BwdBreak {
  kNone,
  kDeltaFirstChunk,  // Delta summed over the first 64 columns of D only
  kLseNoHeadOffset,  // the LSE read without its head offset (every head takes head 0's)
  kNoGroupSum,       // dK / dV from the first query head of each group only (GQA)
  kMaskEdge,         // the mask's upper edge off by one (causal: the diagonal masked)
  kMaskLeftEdge,     // the window's left edge off by one (key diag - left masked)
  kSeqOffset,        // varlen: keys read from the sequence's offset minus one row
  kPaddedKeyCounted, // seqused_k ignored: padded keys counted
  kSkipOneBlock,     // the last column block of every row block skipped
  kNoSkip,           // every column block of the sequence visited (computed, then masked)
  kDropSplit,        // every warp of a row group stores the columns of warp_d 0
  kFlagsIgnored,     // the non-finite pre-pass's flags ignored (the math rule never applied)
  // Persist-D only (D <= 128):
  kPersistStaleCols,  // the column operands loaded for the first column block only (every
                      // later block computed with its Q / dO, or K / V)
  kPersistOneSlot,    // one slot for the first operand: the next block's Q (or K) lands over
                      // the one this block's S and dS products still read
  // TMA feed only:
  kTmaTailNotZeroed,  // rows past a sequence's end left as the box read them (the next
                      // sequence's, or padding keys) instead of zeroed
};

// Element offset of (row, 16-byte vector vec) in a [rows][64] tile (fwd_kernel_mma.cuh).
__device__ __forceinline__ int bwd_swizzle(int row, int vec) { return row * 64 + ((vec ^ (row & 7)) << 3); }

// ---- 1. Delta and lse2 -----------------------------------------------------------------
template <int kHeadDim, typename T, BwdBreak kBreak = BwdBreak::kNone>
__global__ void __launch_bounds__(BwdPreTraits::kNThreads)
    ffpa_bwd_preprocess_kernel(const BwdParams params) {
  using ET = ElemTraits<T>;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * BwdPreTraits::kRowsPerBlock + (threadIdx.x >> 5);
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  if (row >= params.nq) return;  // whole warps: the shuffle below is warp-uniform
  const T* const o_row = static_cast<const T*>(params.o) + batch * params.o_batch_stride +
                         head * params.o_head_stride + static_cast<int64_t>(row) * params.o_row_stride;
  const T* const do_row = static_cast<const T*>(params.dout) + batch * params.do_batch_stride +
                          head * params.do_head_stride + static_cast<int64_t>(row) * params.do_row_stride;
  constexpr int kCols = kBreak == BwdBreak::kDeltaFirstChunk ? 64 : kHeadDim;
  float sum = 0.f;
#pragma unroll
  for (int c = 2 * lane; c < kCols; c += 64) {
    sum += ET::to_float(o_row[c]) * ET::to_float(do_row[c]);
    sum += ET::to_float(o_row[c + 1]) * ET::to_float(do_row[c + 1]);
  }
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  if (lane == 0) {
    const int64_t head_off = kBreak == BwdBreak::kLseNoHeadOffset ? 0 : head * params.lse_head_stride;
    const float lse = params.lse[batch * params.lse_batch_stride + head_off +
                                 static_cast<int64_t>(row) * params.lse_row_stride];
    const int64_t idx = (static_cast<int64_t>(batch) * params.hq + head) * params.nq + row;
    const int64_t n = static_cast<int64_t>(params.b) * params.hq * params.nq;
    params.workspace[idx] = sum;
    params.workspace[n + idx] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
  }
}

// ---- 2. and 3. the main kernels ----------------------------------------------------------
// kLoad: the feed. kCpAsync: every thread copies 16-byte vectors (cp.async, zero-filled
// past a sequence's rows). kTma (sm_90+; a trap stub below, never launched there:
// bwd_launch_template.cuh): thread 0 issues one cp.async.bulk.tensor box per 64-column
// chunk tile of the maps in `maps` (ffpa/tma_geometry.h's bwd_tma_geometry), completing
// on an mbarrier that every thread waits on before the tile is read; the boxes land in
// the same 128-byte-swizzled tiles, so every fragment loader is shared.
template <typename Traits, bool kRowsAreKeys, BwdBreak kBreak = BwdBreak::kNone, Load kLoad = Load::kCpAsync>
__global__ void __launch_bounds__(Traits::kNThreads, 1)
    ffpa_bwd_kernel(const BwdParams params, const __grid_constant__ BwdTmaMaps maps) {
  constexpr bool kTma = kLoad == Load::kTma;
#ifndef FFPA_TMA_DEVICE
  if constexpr (kTma) {
    __trap();
    return;
  }
#endif
  using T = typename Traits::Element;
  using ET = ElemTraits<T>;
  constexpr int kNThreads = Traits::kNThreads;
  constexpr int kNWarpsM = Traits::kNWarpsM;
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
  // Split-D: the kStages ring; persist-D: the resident rows, then the column slots.
  T* const smem_stages = reinterpret_cast<T*>(smem_base);
  // kTma: persist-D [rows, first slot 0, first slot 1, second slot]; split-D one per stage.
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem_base + Traits::kBarOffset);
  T* const smem_p = smem_stages + (Traits::kPersistD ? Traits::kPersistElems : kStages * Traits::kStageElems);  // [rows][64] P (dK / dV kernel)
  T* const smem_ds = smem_p + Traits::kPElems;                     // [rows][64] dS

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % kNWarpsM;
  const int warp_d = kBreak == BwdBreak::kDropSplit ? 0 : warp / kNWarpsM;  // columns it stores
  const int warp_dc = warp / kNWarpsM;                                     // columns it computes
  const int g = lane >> 2;
  const int t = lane & 3;

  const int m0 = blockIdx.x * kBlockM;
  const int64_t bh_rows = static_cast<int64_t>(params.b) * params.hq * params.nq;
  const float* const ws_delta = params.workspace;
  const float* const ws_lse2 = params.workspace + bh_rows;

  // Rows: keys of kv head blockIdx.y (dK / dV) or queries of head blockIdx.y (dQ).
  // Columns: query blocks of the group's heads, or key blocks of the kv head.
  const int row_head = blockIdx.y;
  const int kv_head = kRowsAreKeys ? row_head : row_head / params.h_ratio;
  const int n_groups = kRowsAreKeys ? (kBreak == BwdBreak::kNoGroupSum ? 1 : params.h_ratio) : 1;
  // The sequence (blockIdx.z: a batch entry, or a packed sequence in varlen) and its mask
  // (ffpa/mask.h); rows and columns below are the sequence's own (local) indices.
  MaskParams mp = params.mask;
  if constexpr (kBreak == BwdBreak::kPaddedKeyCounted) mp.seqused_k = nullptr;
  SeqMask sm = seq_mask(mp, blockIdx.z, params.nq, params.nkv, params.causal, mp.diag_bottom_right);
  if constexpr (kBreak == BwdBreak::kMaskEdge) sm.hi -= 1;
  if constexpr (kBreak == BwdBreak::kMaskLeftEdge) sm.lo += 1;
  if constexpr (kBreak == BwdBreak::kSeqOffset) sm.k_start = sm.k_start > 0 ? sm.k_start - 1 : 0;
  const int nq = sm.len_q;
  const int nkv = sm.len_k;  // keys at or past it are never loaded
  const int batch = sm.batch;
  // Varlen grids cover the longest sequence: blocks past this one's rows have no work and
  // write nothing (those rows belong to the next sequence). Key rows in [len_k, rows_k)
  // (padding) are written as zeros below.
  if (m0 >= (kRowsAreKeys ? sm.rows_k : nq)) return;

  // The math rule (ffpa/mask.h): the dQ kernel's own head's flag; the dK / dV kernel's kv
  // head follows it when any head of its group is flagged (for the others the added mask
  // gives what the skip gave: their inputs are finite). In varlen the flags are [1, Hq]
  // (batch 0): one flag covers every packed sequence of the head.
  // Kept in shared memory and read again where a tile needs it: held in a register across
  // the main loop, or recomputed from the flags' address there, it made ptxas spill (D = 64
  // dK / dV and D = 512 dQ on sm_89, D = 512 dK / dV on sm_120f). Every thread stores the
  // same value, so no barrier is needed before its own reads.
  __shared__ int smem_math_rule;
  {
    bool rule = false;
    if constexpr (kBreak != BwdBreak::kFlagsIgnored)
      for (int h = 0; h < n_groups; ++h)
        rule = rule || math_rule_for(params.nonfinite, batch, params.hq,
                                     kRowsAreKeys ? row_head * params.h_ratio + h : row_head);
    smem_math_rule = rule;
  }
  auto math_rule = [&]() { return smem_math_rule != 0; };

  // The column blocks some row of this block sees (mask.h); the rest are skipped, except
  // under the math rule, which visits every block of the sequence's queries or read keys.
  int col_first, col_end;
  if (math_rule()) {
    col_first = 0;
    col_end = kRowsAreKeys ? (m0 < nkv ? (nq + kBlockN - 1) / kBlockN : 0) : (nkv + kBlockN - 1) / kBlockN;
  } else if constexpr (kRowsAreKeys) {
    q_block_range(sm, m0, m0 + kBlockM, kBlockN, &col_first, &col_end);
  } else {
    kv_block_range(sm, m0, min(m0 + kBlockM, nq), kBlockN, &col_first, &col_end);
  }
  if constexpr (kBreak == BwdBreak::kSkipOneBlock) col_end = max(col_first, col_end - 1);
  if constexpr (kBreak == BwdBreak::kNoSkip) col_first = 0, col_end = ((kRowsAreKeys ? nq : nkv) + kBlockN - 1) / kBlockN;
  const int n_per_group = col_end - col_first;
  const int n_iters = n_per_group * n_groups;

  // Iteration it: column block col_first + it % n_per_group of group head it / n_per_group.
  auto col_block_of = [&](int it) { return col_first + it % n_per_group; };
  auto q_head_of = [&](int it) { return kRowsAreKeys ? row_head * params.h_ratio + it / n_per_group : row_head; };

  const int64_t q_start = sm.q_start, k_start = sm.k_start;
  const T* const k_base = static_cast<const T*>(params.k) + batch * params.k_batch_stride +
                          kv_head * params.k_head_stride + k_start * params.k_row_stride;
  const T* const v_base = static_cast<const T*>(params.v) + batch * params.v_batch_stride +
                          kv_head * params.v_head_stride + k_start * params.v_row_stride;
  auto q_ptr = [&](int head) {
    return static_cast<const T*>(params.q) + batch * params.q_batch_stride + head * params.q_head_stride +
           q_start * params.q_row_stride;
  };
  auto do_ptr = [&](int head) {
    return static_cast<const T*>(params.dout) + batch * params.do_batch_stride + head * params.do_head_stride +
           q_start * params.do_row_stride;
  };
  // The workspace row (Delta, lse2) of query `row` of head `head`: contiguous [B, Hq, Nq]
  // over the arrays' rows (the totals in varlen).
  auto ws_row = [&](int head, int row) {
    return (static_cast<int64_t>(batch) * params.hq + head) * params.nq + q_start + row;
  };

  // Copies `rows` rows [r0, r0 + rows) of a [N, D] operand's chunk into a swizzled tile;
  // rows at or past n are zero-filled.
  auto copy_tile = [&](T* dst, const T* base, int64_t row_stride, int r0, int n, int d0, auto copies) {
    constexpr int kCopies = decltype(copies)::value;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const int idx = tid + i * kNThreads;
      const int r = idx / kVecsPerRow;
      const int vec = idx % kVecsPerRow;
      const int row = r0 + r;
      const bool valid = row < n;
      const T* src = base + static_cast<int64_t>(valid ? row : 0) * row_stride + d0 + vec * 8;
      cp_async_16(dst + bwd_swizzle(r, vec), src, valid);
    }
  };
  using RowCopies = std::integral_constant<int, Traits::kRowCopies>;
  using ColCopies = std::integral_constant<int, Traits::kColCopies>;

  auto load_step = [&](int step, int it, int stage) {
    T* const s_row = smem_stages + stage * Traits::kStageElems;
    T* const s_col = s_row + Traits::kRowTileElems;
    const int c0 = col_block_of(it) * kBlockN;
    const int head = q_head_of(it);
    const int phase = step / kNChunks;
    const int d0 = (step % kNChunks) * kBlockD;
    if constexpr (kRowsAreKeys) {
      // Rows K / V (phase 0 / 1); columns Q / dO / Q.
      if (phase == 0) copy_tile(s_row, k_base, params.k_row_stride, m0, nkv, d0, RowCopies{});
      if (phase == 1) copy_tile(s_row, v_base, params.v_row_stride, m0, nkv, d0, RowCopies{});
      if (phase == 1) copy_tile(s_col, do_ptr(head), params.do_row_stride, c0, nq, d0, ColCopies{});
      else copy_tile(s_col, q_ptr(head), params.q_row_stride, c0, nq, d0, ColCopies{});
    } else {
      // Rows Q / dO (phase 0 / 1); columns K / V / K.
      if (phase == 0) copy_tile(s_row, q_ptr(head), params.q_row_stride, m0, nq, d0, RowCopies{});
      if (phase == 1) copy_tile(s_row, do_ptr(head), params.do_row_stride, m0, nq, d0, RowCopies{});
      if (phase == 1) copy_tile(s_col, v_base, params.v_row_stride, c0, nkv, d0, ColCopies{});
      else copy_tile(s_col, k_base, params.k_row_stride, c0, nkv, d0, ColCopies{});
    }
  };

  // ---- the TMA feed (kTma): thread 0 issues, every thread waits on the tile's mbarrier.
  // Row operand op (0: K or Q, 1: V or dO) of this block, D chunk at d0.
  auto tma_rows = [&](T* dst, int op, int d0, uint64_t* bar) {
    if constexpr (kRowsAreKeys)
      tma_load_4d(dst, op == 0 ? &maps.k : &maps.v, d0, static_cast<int>(k_start) + m0, kv_head, batch, bar);
    else
      tma_load_4d(dst, op == 0 ? &maps.q : &maps.dout, d0, static_cast<int>(q_start) + m0, row_head, batch, bar);
  };
  // Column operand op (0: Q or K, 1: dO or V) of iteration it's column block.
  auto tma_cols = [&](T* dst, int op, int it, int d0, uint64_t* bar) {
    const int c0 = col_block_of(it) * kBlockN;
    if constexpr (kRowsAreKeys)
      tma_load_4d(dst, op == 0 ? &maps.q : &maps.dout, d0, static_cast<int>(q_start) + c0, q_head_of(it), batch,
                  bar);
    else
      tma_load_4d(dst, op == 0 ? &maps.k : &maps.v, d0, static_cast<int>(k_start) + c0, kv_head, batch, bar);
  };
  // A box reads whole tiles: rows past the sequence's keys or queries hold the next
  // sequence's (varlen) or padding keys (seqused_k), which may be NaN / inf. P is 0 there,
  // but dV += P^T dO, dK += dS^T Q and dQ += dS K multiply by those rows (0 x inf is NaN),
  // and dP = dO V^T reads them: rows [valid, rows) of a landed [rows][64] tile are zeroed
  // (what the cp.async feed's zero fill gives) before any warp reads it. Returns whether it
  // wrote, so that the caller fences those generic writes before the async proxy refills
  // the tile. (Past the arrays' last row the TMA unit fills zeros itself; zeroing there
  // too keeps the rule one comparison.)
  auto zero_tail = [&](T* tile, int rows, int valid) {
    if (kBreak == BwdBreak::kTmaTailNotZeroed || valid >= rows) return false;
    zero_tile_tail_rows(tile, rows, valid, tid, kNThreads);
    return true;
  };
  const int row_valid = (kRowsAreKeys ? nkv : nq) - m0;               // rows of the block in the sequence
  auto col_valid = [&](int c0) { return (kRowsAreKeys ? nq : nkv) - c0; };  // columns of a block
  if constexpr (kTma) {
    // One barrier per tile group, one arrival (thread 0's expect_tx) per fill.
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < Traits::kNBars; ++s) mbar_init(bars + s, 1);
      fence_barrier_init();
    }
    __syncthreads();
  }

  // Gradient accumulators: chunk c, n-tile j covers columns
  // c * 64 + warp_d * kWarpD + j * 8 + {2t, 2t + 1} of rows g and g + 8.
  // acc_a: dK (dK / dV kernel) or dQ; acc_b: dV (dK / dV kernel only).
  float acc_a[kNChunks][kWarpDTiles][4];
  float acc_b[kRowsAreKeys ? kNChunks : 1][kWarpDTiles][4];
#pragma unroll
  for (int c = 0; c < kNChunks; ++c)
#pragma unroll
    for (int j = 0; j < kWarpDTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc_a[c][j][e] = 0.f;
        if constexpr (kRowsAreKeys) acc_b[c][j][e] = 0.f;
      }

  // dQ kernel: the rows' Delta and lse2 (rows g and g + 8), fixed for the block.
  float row_delta[2] = {0.f, 0.f}, row_lse2[2] = {INFINITY, INFINITY};
  if constexpr (!kRowsAreKeys) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = m0 + warp_m * 16 + g + r * 8;
      if (row < nq) {
        const int64_t idx = ws_row(row_head, row);
        row_delta[r] = ws_delta[idx];
        row_lse2[r] = ws_lse2[idx];
      }
    }
  }

  // Publishes a warp's 16 x kWarpN fp32 tile as 16-bit into a [rows][64] tile.
  auto publish = [&](T* dst, const float (&tile)[kWarpNTiles][4]) {
#pragma unroll
    for (int j = 0; j < kWarpNTiles; ++j) {
      const int col = warp_dc * kWarpN + j * 8 + 2 * t;
      const int row = warp_m * 16 + g;
      const int vec = col >> 3;
      *reinterpret_cast<uint32_t*>(dst + bwd_swizzle(row, vec) + (col & 7)) = ET::pack(tile[j][0], tile[j][1]);
      *reinterpret_cast<uint32_t*>(dst + bwd_swizzle(row + 8, vec) + (col & 7)) = ET::pack(tile[j][2], tile[j][3]);
    }
  };
  // acc[chunk] += X[16 rows, 64 columns] . col_tile[64, chunk's kWarpD columns]: X (P or
  // dS) from shared memory, the column tile through ldmatrix.trans (the forward's P V).
  auto x_times_cols = [&](float (&acc)[kWarpDTiles][4], const T* s_x, const T* s_col) {
#pragma unroll
    for (int ks = 0; ks < Traits::kNKSteps; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, s_x + bwd_swizzle(warp_m * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
      for (int jp = 0; jp < kWarpDTiles / 2; ++jp) {
        uint32_t b[4];
        const int vrow = ks * 16 + (lane & 15);
        const int vvec = warp_dc * (kWarpD / 8) + jp * 2 + (lane >> 4);
        ldmatrix_x4_trans(b, s_col + bwd_swizzle(vrow, vvec));
        Mma16816<T>::run(acc[2 * jp], a, b[0], b[1]);
        Mma16816<T>::run(acc[2 * jp + 1], a, b[2], b[3]);
      }
    }
  };
  // acc += row_tile[16 rows of warp_m, chunk] . col_tile[kWarpN columns of warp_d, chunk]^T
  // (the forward's Q K^T).
  auto rows_times_cols_t = [&](float (&acc)[kWarpNTiles][4], const T* s_row, const T* s_col) {
#pragma unroll
    for (int ks = 0; ks < Traits::kKSteps; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, s_row + bwd_swizzle(warp_m * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
      for (int jp = 0; jp < kWarpNTiles / 2; ++jp) {
        uint32_t b[4];
        const int crow = warp_dc * kWarpN + jp * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, s_col + bwd_swizzle(crow, ks * 2 + ((lane >> 3) & 1)));
        Mma16816<T>::run(acc[2 * jp], a, b[0], b[1]);
        Mma16816<T>::run(acc[2 * jp + 1], a, b[2], b[3]);
      }
    }
  };

  // P = exp2(S * scale log2 e - lse2), masked, in place of S (column block at c0, query
  // head q_head).
  auto make_p = [&](float (&acc_s)[kWarpNTiles][4], int c0, int q_head) {
    const bool tile_math_rule = math_rule();
#pragma unroll
    for (int j = 0; j < kWarpNTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = c0 + warp_dc * kWarpN + j * 8 + 2 * t + (e & 1);
        const int row = m0 + warp_m * 16 + g + (e >> 1) * 8;
        const int query = kRowsAreKeys ? col : row;
        const int key = kRowsAreKeys ? row : col;
        float lse2;
        if constexpr (kRowsAreKeys) {
          lse2 = query < nq ? ws_lse2[ws_row(q_head, query)] : INFINITY;
        } else {
          lse2 = row_lse2[e >> 1];
        }
        // Invisible entries: -inf, or under the math rule the score plus -inf (NaN for
        // a NaN or +inf score); padding keys and rows are never scores.
        const float raw = acc_s[j][e] * params.scale_log2;
        const float x = query >= nq || key >= nkv ? -INFINITY
                        : visible(sm, query, key) ? raw
                        : tile_math_rule ? raw + -INFINITY
                                         : -INFINITY;
        acc_s[j][e] = fast_exp2(x - lse2);
      }
    }
  };
  // dS = P * (dP - Delta), in place of dP.
  auto make_ds = [&](float (&acc_dp)[kWarpNTiles][4], const float (&acc_s)[kWarpNTiles][4], int c0, int q_head) {
#pragma unroll
    for (int j = 0; j < kWarpNTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float delta;
        if constexpr (kRowsAreKeys) {
          const int query = c0 + warp_dc * kWarpN + j * 8 + 2 * t + (e & 1);
          delta = query < nq ? ws_delta[ws_row(q_head, query)] : 0.f;
        } else {
          delta = row_delta[e >> 1];
        }
        acc_dp[j][e] = acc_s[j][e] * (acc_dp[j][e] - delta);
      }
    }
  };

  if constexpr (Traits::kPersistD) {
    // ---- Persist-D (D <= 128; bwd_kernel_traits.h says why): the block's rows (K and V,
    // or Q and dO) resident for its whole loop, each column block's operands whole-D in
    // three slots: the first operand (Q, or K: read by S and by the dS product) in slot
    // it & 1, the second (dO, or V: read by dP and dV) in slot 2. One cp.async group per
    // operand load, issued once the slot's previous tile is read (the barrier before):
    //   prologue  rows + first operand of block 0 | second operand of block 0
    //   step 0    wait first(it); issue first(it + 1)        S, P
    //   step 1    wait second(it)                            dP, dV += P^T dO, dS
    //   step 2    issue second(it + 1)                       dK += dS^T Q, or dQ += dS K
    // so one group stays pending at each wait; a slot is refilled a step after its last
    // read at the earliest and lands two steps (second) or three (first) later.
    T* const smem_rows = smem_stages;  // [2][kNChunks][rows][64]
    T* const smem_cols = smem_rows + 2 * Traits::kRowOperandElems;  // [3][kNChunks][64][64]
    auto row_operand = [&](int op) { return smem_rows + op * Traits::kRowOperandElems; };
    auto col_slot = [&](int slot) { return smem_cols + slot * Traits::kColOperandElems; };
    auto load_rows = [&]() {
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) {
        T* const a = row_operand(0) + c * Traits::kRowTileElems;
        T* const b = row_operand(1) + c * Traits::kRowTileElems;
        if constexpr (kRowsAreKeys) {
          copy_tile(a, k_base, params.k_row_stride, m0, nkv, c * kBlockD, RowCopies{});
          copy_tile(b, v_base, params.v_row_stride, m0, nkv, c * kBlockD, RowCopies{});
        } else {
          copy_tile(a, q_ptr(row_head), params.q_row_stride, m0, nq, c * kBlockD, RowCopies{});
          copy_tile(b, do_ptr(row_head), params.do_row_stride, m0, nq, c * kBlockD, RowCopies{});
        }
      }
    };
    // Operand op (0: Q or K, 1: dO or V) of iteration it's column block, whole-D.
    auto load_cols = [&](int op, int it, int slot) {
      const int c0 = col_block_of(it) * kBlockN;
      const int head = q_head_of(it);
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) {
        T* const dst = col_slot(slot) + c * Traits::kColTileElems;
        if constexpr (kRowsAreKeys) {
          if (op == 0) copy_tile(dst, q_ptr(head), params.q_row_stride, c0, nq, c * kBlockD, ColCopies{});
          else copy_tile(dst, do_ptr(head), params.do_row_stride, c0, nq, c * kBlockD, ColCopies{});
        } else {
          if (op == 0) copy_tile(dst, k_base, params.k_row_stride, c0, nkv, c * kBlockD, ColCopies{});
          else copy_tile(dst, v_base, params.v_row_stride, c0, nkv, c * kBlockD, ColCopies{});
        }
      }
    };
    // The first operand's slot of iteration it.
    auto first_slot = [&](int it) {
      return kBreak == BwdBreak::kPersistOneSlot || kBreak == BwdBreak::kPersistStaleCols ? 0 : it & 1;
    };
    // Whether iteration it's column operands are loaded (all of them, unbroken).
    auto loads_cols = [&](int it) { return it < n_iters && (kBreak != BwdBreak::kPersistStaleCols || it == 0); };

    // kTma: the same steps with a barrier per group instead of cp.async groups: bars[0]
    // the resident rows (waited once), bars[1 + s] first-operand slot s (filled every
    // other iteration: iteration it waits for fill it >> 1 of its slot, parity
    // (it >> 1) & 1), bars[3] the second slot (fill it, parity it & 1).
    uint64_t* const bar_rows = bars;
    uint64_t* const bar_second = bars + 3;
    auto bar_first = [&](int slot) { return bars + 1 + slot; };
    auto tma_load_cols = [&](int op, int it, int slot, uint64_t* bar) {
      mbar_arrive_expect_tx(bar, Traits::kColOperandElems * 2);
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) tma_cols(col_slot(slot) + c * Traits::kColTileElems, op, it, c * kBlockD, bar);
    };
    if constexpr (kTma) {
      if (tid == 0 && n_iters > 0) {
        mbar_arrive_expect_tx(bar_rows, 2 * Traits::kRowOperandElems * 2);
#pragma unroll
        for (int c = 0; c < kNChunks; ++c) {
          tma_rows(row_operand(0) + c * Traits::kRowTileElems, 0, c * kBlockD, bar_rows);
          tma_rows(row_operand(1) + c * Traits::kRowTileElems, 1, c * kBlockD, bar_rows);
        }
        tma_load_cols(0, 0, first_slot(0), bar_first(first_slot(0)));
        tma_load_cols(1, 0, 2, bar_second);
      }
    } else {
      if (n_iters > 0) {
        load_rows();
        load_cols(0, 0, first_slot(0));
      }
      cp_async_commit();
      if (n_iters > 0) load_cols(1, 0, 2);
      cp_async_commit();
    }
    // Zeroes the tail rows of a whole-D column slot, then fences them (kTma).
    auto zero_slot_tail = [&](int slot, int c0) {
      bool wrote = false;
#pragma unroll
      for (int c = 0; c < kNChunks; ++c)
        wrote = zero_tail(col_slot(slot) + c * Traits::kColTileElems, kBlockN, col_valid(c0)) || wrote;
      if (wrote) fence_proxy_async_smem();
    };

    for (int it = 0; it < n_iters; ++it) {
      const int c0 = col_block_of(it) * kBlockN;
      const int q_head = q_head_of(it);
      const T* const col_a = col_slot(first_slot(it));
      const T* const col_b = col_slot(2);
      float acc_s[kWarpNTiles][4];   // S, then P (fp32)
      float acc_dp[kWarpNTiles][4];  // dP, then dS
#pragma unroll
      for (int j = 0; j < kWarpNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[j][e] = acc_dp[j][e] = 0.f;

      // ---- step 0: S = rows_a . first^T, P. The barrier: the rows and the first operand
      // landed for every thread, every warp finished the previous iteration (the first
      // slot refilled below, P and dS rewritten).
      if constexpr (kTma) {
        if (it == 0) {
          mbar_wait(bar_rows, 0);
          // The resident rows are never refilled: no fence.
#pragma unroll
          for (int c = 0; c < kNChunks; ++c) {
            zero_tail(row_operand(0) + c * Traits::kRowTileElems, kBlockM, row_valid);
            zero_tail(row_operand(1) + c * Traits::kRowTileElems, kBlockM, row_valid);
          }
        }
        mbar_wait(bar_first(first_slot(it)), (it >> 1) & 1);
        zero_slot_tail(first_slot(it), c0);
        __syncthreads();
        if (tid == 0 && loads_cols(it + 1))
          tma_load_cols(0, it + 1, first_slot(it + 1), bar_first(first_slot(it + 1)));
      } else {
        cp_async_wait<1>();
        __syncthreads();
        if (loads_cols(it + 1)) load_cols(0, it + 1, first_slot(it + 1));
        cp_async_commit();
      }
#pragma unroll
      for (int c = 0; c < kNChunks; ++c)
        rows_times_cols_t(acc_s, row_operand(0) + c * Traits::kRowTileElems, col_a + c * Traits::kColTileElems);
      make_p(acc_s, c0, q_head);
      if constexpr (kRowsAreKeys) publish(smem_p, acc_s);  // dV's A operand

      // ---- step 1: dP = rows_b . second^T (and dV += P^T dO), dS.
      if constexpr (kTma) {
        mbar_wait(bar_second, it & 1);
        zero_slot_tail(2, c0);
      } else {
        cp_async_wait<1>();
      }
      __syncthreads();
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) {
        const T* const s_col = col_b + c * Traits::kColTileElems;
        rows_times_cols_t(acc_dp, row_operand(1) + c * Traits::kRowTileElems, s_col);
        if constexpr (kRowsAreKeys) x_times_cols(acc_b[c], smem_p, s_col);  // dV += P^T dO
      }
      make_ds(acc_dp, acc_s, c0, q_head);
      publish(smem_ds, acc_dp);

      // ---- step 2: dK += dS^T Q, or dQ += dS K. The barrier: dS published, and the
      // second slot read by every warp (refilled now).
      __syncthreads();
      if constexpr (kTma) {
        if (tid == 0 && loads_cols(it + 1)) tma_load_cols(1, it + 1, 2, bar_second);
      } else {
        if (loads_cols(it + 1)) load_cols(1, it + 1, 2);
        cp_async_commit();
      }
#pragma unroll
      for (int c = 0; c < kNChunks; ++c) x_times_cols(acc_a[c], smem_ds, col_a + c * Traits::kColTileElems);
    }
  } else {
    // ---- Split-D (D > 128): the kStages ring of 64-column chunk steps (the file's header).
    // kTma: one barrier per stage, as the forward's; step `step` of a column block loads
    // the row operand's chunk (phases 0 and 1) and the column operand's.
    auto tma_step = [&](int step, int it, int stage) {
      T* const s_row = smem_stages + stage * Traits::kStageElems;
      T* const s_col = s_row + Traits::kRowTileElems;
      uint64_t* const bar = bars + stage;
      const int phase = step / kNChunks;
      const int d0 = (step % kNChunks) * kBlockD;
      if (phase < 2) {
        mbar_arrive_expect_tx(bar, (Traits::kRowTileElems + Traits::kColTileElems) * 2);
        tma_rows(s_row, phase, d0, bar);
      } else {
        mbar_arrive_expect_tx(bar, Traits::kColTileElems * 2);
      }
      tma_cols(s_col, phase == 1 ? 1 : 0, it, d0, bar);
    };
    auto issue = [&](int step, int it, int stage) {
      if constexpr (kTma) {
        if (tid == 0 && it < n_iters) tma_step(step, it, stage);
      } else {
        if (it < n_iters) load_step(step, it, stage);
        cp_async_commit();  // empty groups keep the wait_group arithmetic uniform
      }
    };
    int write_stage = 0;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      issue(s % kSteps, s / kSteps, write_stage);
      write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
    }
    int read_stage = 0;
    uint32_t parity = 0;  // kTma: parity of the fill being waited for, per round of stages

    for (int it = 0; it < n_iters; ++it) {
      const int c0 = col_block_of(it) * kBlockN;
      const int q_head = q_head_of(it);
      float acc_s[kWarpNTiles][4];   // S, then P (fp32)
      float acc_dp[kWarpNTiles][4];  // dP
#pragma unroll
      for (int j = 0; j < kWarpNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[j][e] = acc_dp[j][e] = 0.f;

#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        // The group of this step has landed once at most kStages - 2 newer ones are
        // pending; the barrier also guarantees every warp finished the step that last used
        // the stage refilled next, and makes the P / dS tiles published at the end of the
        // previous step visible. kTma: the stage's barrier completed the phase of this
        // fill, and its tail rows are zeroed before the block barrier.
        T* const s_row = smem_stages + read_stage * Traits::kStageElems;
        T* const s_col = s_row + Traits::kRowTileElems;
        if constexpr (kTma) {
          mbar_wait(bars + read_stage, parity);
          bool wrote = step < 2 * kNChunks && zero_tail(s_row, kBlockM, row_valid);
          wrote = zero_tail(s_col, kBlockN, col_valid(c0)) || wrote;
          if (wrote) fence_proxy_async_smem();
        } else {
          cp_async_wait<kStages - 2>();
        }
        __syncthreads();
        {
          const int ahead = step + kStages - 1;
          issue(ahead % kSteps, it + ahead / kSteps, write_stage);
          write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        }
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
        if (read_stage == 0) parity ^= 1u;

        if (step < kNChunks) {
          rows_times_cols_t(acc_s, s_row, s_col);
          if (step == kNChunks - 1) {
            make_p(acc_s, c0, q_head);
            if constexpr (kRowsAreKeys) publish(smem_p, acc_s);  // dV's A operand, next step on
          }
        } else if (step < 2 * kNChunks) {
          const int chunk = step - kNChunks;
          rows_times_cols_t(acc_dp, s_row, s_col);
          if constexpr (kRowsAreKeys) x_times_cols(acc_b[chunk], smem_p, s_col);  // dV += P^T dO
          if (step == 2 * kNChunks - 1) {
            make_ds(acc_dp, acc_s, c0, q_head);
            publish(smem_ds, acc_dp);
          }
        } else {
          // ---- dK += dS^T Q chunk, or dQ += dS K chunk
          x_times_cols(acc_a[step - 2 * kNChunks], smem_ds, s_col);
        }
      }
    }
  }
  // kTma: every issued fill was waited for above (fills are issued for visited column
  // blocks only).
  if constexpr (!kTma) cp_async_wait<0>();

  // ---- epilogue: dK = scale dS^T Q, dV; or dQ = scale dS K.
  T* out_a;
  T* out_b = nullptr;
  int64_t stride_a, stride_b = 0;
  int n_rows;
  if constexpr (kRowsAreKeys) {
    out_a = static_cast<T*>(params.dk) + batch * params.dk_batch_stride + kv_head * params.dk_head_stride +
            k_start * params.dk_row_stride;
    out_b = static_cast<T*>(params.dv) + batch * params.dv_batch_stride + kv_head * params.dv_head_stride +
            k_start * params.dv_row_stride;
    stride_a = params.dk_row_stride;
    stride_b = params.dv_row_stride;
    n_rows = sm.rows_k;  // padded keys too: written as zeros below
  } else {
    out_a = static_cast<T*>(params.dq) + batch * params.dq_batch_stride + row_head * params.dq_head_stride +
            q_start * params.dq_row_stride;
    stride_a = params.dq_row_stride;
    n_rows = nq;
  }
  const float scale = params.scale;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = m0 + warp_m * 16 + g + r * 8;
    if (row >= n_rows) continue;
    // Keys past the sequence's read keys are not part of the problem: zero, selected rather
    // than accumulated (under the math rule a NaN in a row's dO or Delta reaches their
    // accumulators as 0 * NaN).
    const bool pad = kRowsAreKeys && row >= nkv;
#pragma unroll
    for (int c = 0; c < kNChunks; ++c)
#pragma unroll
      for (int j = 0; j < kWarpDTiles; ++j) {
        const int col = c * kBlockD + warp_d * kWarpD + j * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(out_a + static_cast<int64_t>(row) * stride_a + col) =
            pad ? 0u : ET::pack(acc_a[c][j][2 * r] * scale, acc_a[c][j][2 * r + 1] * scale);
        if constexpr (kRowsAreKeys)
          *reinterpret_cast<uint32_t*>(out_b + static_cast<int64_t>(row) * stride_b + col) =
              pad ? 0u : ET::pack(acc_b[c][j][2 * r], acc_b[c][j][2 * r + 1]);
      }
  }
}

}  // namespace ffpa
