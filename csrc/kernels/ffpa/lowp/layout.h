// The low-precision paths' quantised operands: what the quantisation pass (lowp/quant.cuh)
// writes and the FP8 / NVFP4 attention kernel (cute/fwd_kernel.cuh with a low-precision
// spec) reads, in one workspace per forward call. Host-compiler friendly: the launcher
// sizes the workspace from this, the CPU emulator and the tests read the same offsets.
//
// The scheme (SageAttention's, docs/install.md "Low-precision paths" states its accuracy):
//   K smoothed   K' = K - mean_tokens(K) per (batch, kv head, channel). Q K'^T differs from
//                Q K^T by q . mean(K) in each query row, a constant per row that the softmax
//                ignores; the row log-sum-exp gets it back (lse_shift below).
//   Q, K'        FP8: e4m3 with one fp32 scale per block of rows (Q: block_m rows, the
//                kernel's query tile; K': block_n rows, its key tile): x = e4m3 * scale,
//                scale = amax(block) / 448, so S = (Q8 K8^T) * q_scale * k_scale per tile.
//                NVFP4: e2m1 values (two per byte, the lower column in the low nibble)
//                with one ue4m3 scale per 16 consecutive columns of a row (the
//                mxf4nvf4 block-scaled mma's scale_vec::4X) and the same per-row-block
//                fp32 scale as FP8 on top: x = e2m1 * ue4m3 * scale, scale =
//                amax(block) / (6 * 448), so every ue4m3 scale stays within its 448.
//   V            e4m3 with one fp32 scale per channel (amax over the tokens / 448), stored
//                transposed ([D, nkv_pad] per kv head: the tokens are the k dimension of
//                the P V mma, which reads them contiguous) and with the tokens of every
//                group of 32 permuted (vt_column below) so that P's fp32 accumulator
//                fragment packs into the mma's A fragment without a shuffle. Tokens past
//                nkv are zero (P is zero there, and 0 * NaN would not be).
//   P            e4m3 of P * 448 in the kernel (P <= 1 after the running-max subtraction),
//                O = (P8 V8) * v_scale[d] / 448 / row_sum.
#pragma once

#include <cstddef>
#include <cstdint>

// The kernels call the token permutation too (nvcc without --expt-relaxed-constexpr calls
// only __host__ __device__ constexpr functions from device code).
#if defined(__CUDACC__)
#define FFPA_LAYOUT_HD __host__ __device__
#else
#define FFPA_LAYOUT_HD
#endif

namespace ffpa {

// The precision of a low-precision kernel's Q K^T (P V is e4m3 in both).
enum class LowpQK : int { kFp8 = 0, kNvfp4 = 1 };

inline constexpr float kE4m3Max = 448.f;
inline constexpr float kE2m1Max = 6.f;
inline constexpr int kNvfp4Block = 16;  // elements per ue4m3 scale
inline constexpr int kVtGroup = 32;     // tokens per permutation group of V^T (the P V mma's k)
inline constexpr int kVtPad = 64;       // nkv_pad is a multiple of this (the kernel's key tile)

// The storage column of token j within its group of 32 (and back). P's accumulator
// fragment gives lane (g, t) the S columns {2t, 2t+1} + 8i of each 32-column group; the
// mma's A fragment wants columns 4t..4t+3 (a0, a1) and 16+4t..16+4t+3 (a2, a3). Storing
// token 16h + 8i + 2t + e at column 16h + 4t + 2i + e makes the lane's own values the
// A fragment, in register order.
FFPA_LAYOUT_HD constexpr int vt_column(int token_in_group) {
  const int h = token_in_group >> 4, i = (token_in_group >> 3) & 1, t = (token_in_group >> 1) & 3,
            e = token_in_group & 1;
  return 16 * h + 4 * t + 2 * i + e;
}
FFPA_LAYOUT_HD constexpr int vt_token(int column_in_group) {
  const int h = column_in_group >> 4, t = (column_in_group >> 2) & 3, i = (column_in_group >> 1) & 1,
            e = column_in_group & 1;
  return 16 * h + 8 * i + 2 * t + e;
}

// One forward call's quantised operands. Every array is packed (no strides); rows of a
// (batch, head) are contiguous, heads follow, then batches.
struct LowpLayout {
  LowpQK qk = LowpQK::kFp8;
  int b = 0, hq = 0, hkv = 0, nq = 0, nkv = 0, d = 0;
  int block_m = 0, block_n = 0;  // rows per q_scale / k_scale block (the kernel's tiles)
  int64_t nq_blocks = 0, nkv_blocks = 0, nkv_pad = 0;
  int64_t qk_row_bytes = 0;  // bytes per row of q8 / k8: d (e4m3) or d / 2 (e2m1)
  // Byte offsets into the workspace (each 256-byte aligned) and its size.
  size_t q8 = 0, k8 = 0, vt8 = 0;  // [b][hq][nq][row], [b][hkv][nkv][row], [b][hkv][d][nkv_pad]
  size_t q_sf = 0, k_sf = 0;       // NVFP4: ue4m3 [b][hq][nq][d/16], [b][hkv][nkv][d/16]
  size_t q_scale = 0, k_scale = 0;  // fp32 [b][hq][nq_blocks], [b][hkv][nkv_blocks]
  size_t v_scale = 0;               // fp32 [b][hkv][d]
  size_t k_mean = 0;                // fp32 [b][hkv][d]: the smoothing mean (the pass's own scratch)
  size_t lse_shift = 0;             // fp32 [b][hq][nq]: scale * q . mean(K), added to the LSE
  size_t bytes = 0;
};

constexpr size_t lowp_align(size_t n) { return (n + 255) / 256 * 256; }

inline LowpLayout lowp_layout(LowpQK qk, int b, int hq, int hkv, int nq, int nkv, int d, int block_m, int block_n) {
  LowpLayout l;
  l.qk = qk;
  l.b = b, l.hq = hq, l.hkv = hkv, l.nq = nq, l.nkv = nkv, l.d = d;
  l.block_m = block_m, l.block_n = block_n;
  l.nq_blocks = (int64_t(nq) + block_m - 1) / block_m;
  l.nkv_blocks = (int64_t(nkv) + block_n - 1) / block_n;
  l.nkv_pad = (int64_t(nkv) + kVtPad - 1) / kVtPad * kVtPad;
  l.qk_row_bytes = qk == LowpQK::kFp8 ? d : d / 2;
  const int64_t q_rows = int64_t(b) * hq * nq, k_rows = int64_t(b) * hkv * nkv;
  size_t off = 0;
  auto take = [&](size_t n) {
    const size_t at = off;
    off += lowp_align(n);
    return at;
  };
  l.q8 = take(size_t(q_rows * l.qk_row_bytes));
  l.k8 = take(size_t(k_rows * l.qk_row_bytes));
  l.vt8 = take(size_t(int64_t(b) * hkv * d * l.nkv_pad));
  if (qk == LowpQK::kNvfp4) {
    l.q_sf = take(size_t(q_rows * (d / kNvfp4Block)));
    l.k_sf = take(size_t(k_rows * (d / kNvfp4Block)));
  }
  l.q_scale = take(size_t(int64_t(b) * hq * l.nq_blocks) * sizeof(float));
  l.k_scale = take(size_t(int64_t(b) * hkv * l.nkv_blocks) * sizeof(float));
  l.v_scale = take(size_t(int64_t(b) * hkv * d) * sizeof(float));
  l.k_mean = take(size_t(int64_t(b) * hkv * d) * sizeof(float));
  l.lse_shift = take(size_t(q_rows) * sizeof(float));
  l.bytes = off;
  return l;
}

}  // namespace ffpa
