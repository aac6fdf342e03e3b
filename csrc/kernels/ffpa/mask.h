// Which keys a query row sees, and what a score becomes where it does not: the one home
// of the masking of the forward kernels (mma / tma, simt, cute / cute_tma) and of the
// backward kernels. Block ranges and per-score masks are decided here and nowhere else.
//
// Two modes per (batch, query head), chosen by the non-finite pre-pass (nonfinite.cuh):
//   finite inputs (the common case): key blocks no row of a query block reaches are
//     skipped, and a masked score is replaced by -inf;
//   math rule (the head's Q, K or V, or in the backward its dO, holds a NaN or an inf):
//     every key block is visited and the causal mask is ADDED as -inf, exactly as SDPA's
//     math backend adds its mask, so a NaN or +inf score under the mask stays NaN and the
//     masked rows of V enter P V (0 * NaN and 0 * inf are NaN). docs/install.md,
//     "NaN and inf", states the rule; for finite scores both modes give the same values.
// Causal alignment: query i sees keys j <= i + offset (offset = Nkv - Nq bottom-right,
// 0 top-left); keys at or past nkv are the zero-filled padding of the last block and are
// never seen (replaced by -inf in both modes: they are not keys).
#pragma once

#include <cmath>

namespace ffpa {

// True where the math rule applies to (batch, query head): flags is the pre-pass's
// [B, Hq] array, nullptr when the caller ran none (every input finite by contract).
__host__ __device__ __forceinline__ bool math_rule_for(const int* flags, int batch, int hq, int head) {
  return flags != nullptr && flags[batch * hq + head] != 0;
}

// The number of key blocks (of block_n keys, from key 0) that query rows [m0, m0 + rows)
// visit: all of them under the math rule or without the causal mask, else up to the last
// row's causal limit (0 when no row sees a key). Rows past nq are padding.
__host__ __device__ __forceinline__ int kv_blocks_for_rows(int m0, int rows, int nq, int nkv, int block_n, bool causal,
                                                           int offset, bool math_rule) {
  const int all = (nkv + block_n - 1) / block_n;
  if (!causal || math_rule) return all;
  const int last_row = (m0 + rows < nq ? m0 + rows : nq) - 1;
  const int last_key = last_row + offset;
  if (last_key < 0) return 0;
  return all < last_key / block_n + 1 ? all : last_key / block_n + 1;
}

// The first query block (of block_m rows) that keys [n0, ...) are seen by: 0 under the
// math rule or without the causal mask; n_blocks when no query sees them.
__host__ __device__ __forceinline__ int first_q_block_for_keys(int n0, int nq, int block_m, bool causal, int offset,
                                                               bool math_rule) {
  if (!causal || math_rule) return 0;
  const int first_q = n0 - offset > 0 ? n0 - offset : 0;
  return first_q >= nq ? (nq + block_m - 1) / block_m : first_q / block_m;
}

// Whether a score tile of query rows [m0, m0 + block_m) and keys [n0, n0 + block_n)
// holds any masked entry (padding keys or, causal, keys past the first row's limit);
// tiles without one skip the per-score mask.
__host__ __device__ __forceinline__ bool tile_needs_mask(int m0, int n0, int block_n, int nkv, bool causal,
                                                         int offset) {
  return n0 + block_n > nkv || (causal && n0 + block_n - 1 > m0 + offset);
}

// Whether (row, col) is masked by the causal mask (padding excluded).
__host__ __device__ __forceinline__ bool causal_masked(int row, int col, bool causal, int offset) {
  return causal && col > row + offset;
}

// The score x (already scaled) of query row `row` and key `col` after the mask.
__host__ __device__ __forceinline__ float mask_score(float x, int row, int col, int nkv, bool causal, int offset,
                                                     bool math_rule) {
  if (col >= nkv) return -INFINITY;
  if (causal_masked(row, col, causal, offset)) return math_rule ? x + -INFINITY : -INFINITY;
  return x;
}

// A row's log-sum-exp (natural log) from its max score (natural-log domain) and its sum
// of exponentials: -inf for a row that saw no key (sum 0), NaN where the sum is NaN (a
// NaN or +inf score, where the math backend's row is NaN): the backward then makes every
// gradient the row reaches NaN, as the math backend's autograd does.
__host__ __device__ __forceinline__ float row_lse(float max_ln, float sum) {
  if (sum != sum) return sum;
  return sum > 0.f ? max_ln + logf(sum) : -INFINITY;
}

}  // namespace ffpa
