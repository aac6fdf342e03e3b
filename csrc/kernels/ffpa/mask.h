// The masks of the mma / TMA and CuTe forward and the backward kernels, in one place: the sliding
// window, key padding (per-batch key lengths) and the packed variable-length layout.
// Host-compiler friendly (plain structs and inline functions; the kernels and the CPU
// emulator call the same code). Two questions only, so that other masking rules compose
// with them: which column blocks a block of rows must visit (kv_block_range /
// q_block_range: blocks outside them are skipped, never computed), and whether one
// (query, key) entry is visible (visible()).
//
// The rule. Per sequence s (a batch entry, or one packed sequence in varlen), with Nq(s)
// query rows and Nk(s) keys read (seqused_k[s] when given, else the sequence's keys),
// query i sees key j (local indices) iff
//     j < Nk(s)  and  diag(i) - left <= j <= diag(i) + right
// where diag(i) = i + off, off = Nk(s) - Nq(s) when the diagonal is bottom-right aligned
// (causal bottom-right, and always in varlen: flash-attn's rule) and 0 otherwise (top-left
// causal, or no alignment given); left / right = -1 are unbounded, and causal is
// right = 0. So visibility is a band on j - i: lo <= j - i <= hi.
// Keys at or past Nk(s) are not part of the problem: they are never loaded by cp.async
// (zero fill) and their TMA-loaded rows are zeroed in shared memory, so a masking rule that
// adds -inf (rather than selecting it) cannot see their values. Their dK / dV rows are
// written as zeros.
//
// The non-finite math rule (below): the forward's masked instance and the backward follow
// it under these masks too (masked_kv_block_range, masked_q_block_range, masked_score), for
// the keys its sequence reads only.
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
#include <cstdint>

// Callable from the kernels (nvcc) and from host code alike.
#if defined(__CUDACC__)
#define FFPA_MASK_FN __host__ __device__ __forceinline__
#else
#define FFPA_MASK_FN inline
#endif

namespace ffpa {

// What a launch passes (FwdParams::mask, BwdParams::mask; set by src/params.cpp).
struct MaskParams {
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded (causal: 0)
  // The backward's alignment: bottom-right (diag(i) = i + Nk - Nq) unless its causal is
  // top-left (src/params.cpp). The forward's causal is bottom-right by contract (seq_mask's caller
  // says so); varlen is bottom-right always.
  bool diag_bottom_right = false;
  const int* seqused_k = nullptr;     // [B] (varlen: [S]) keys read per sequence; nullptr: all
  const int* cu_seqlens_q = nullptr;  // [S + 1] row offsets of the packed sequences; nullptr: not varlen
  const int* cu_seqlens_k = nullptr;  // [S + 1]
  int num_seqs = 0;                   // S (varlen)
  int max_seqlen_q = 0, max_seqlen_k = 0;  // varlen: the grid's extents
};

inline constexpr int kMaskUnbounded = 0x7fffffff;

// Deliberate defects for the CPU emulator's breakage tests of the forward kernel
// (csrc/tests/emulate_masks.cpp; the backward's are ffpa::BwdBreak), each of which must
// make a run fail; the library compiles kNone only.
enum class MaskBreak {
  kNone,
  kUpperEdge,         // the band's upper edge off by one (causal: the diagonal masked)
  kLowerEdge,         // the window's left edge off by one (key diag - left masked)
  kSeqOffset,         // varlen: keys read from the sequence's offset minus one row
  kPaddedKeyCounted,  // seqused_k ignored: padded keys counted
  kSkipLastBlock,     // the last visited KV block of every row block skipped
  kNoSkip,            // every KV block of the sequence visited (computed, then masked)
  kFlagsIgnored,      // the non-finite pre-pass's flags ignored (the math rule never applied)
  kTmaTailNotZeroed,  // TMA feed: rows of a tile past the sequence's keys not zeroed (CuTe kernel)
};

// One sequence's mask and place, computed once per block. Trivial (no initialisers) so
// that a kernel can keep one in __shared__ memory; seq_mask() sets every field.
struct SeqMask {
  int batch;    // the batch index of the strides (0 in varlen: [1, H, total, D] views)
  int q_start;  // first row of the sequence (varlen; else 0)
  int k_start;
  int len_q;   // query rows
  int rows_k;  // key rows the sequence owns (dK / dV rows written)
  int len_k;   // key rows read: rows_k, or seqused_k when smaller
  int lo, hi;  // visible: lo <= j - i <= hi
};

FFPA_MASK_FN int mask_clamp(int64_t x) {
  return x > kMaskUnbounded ? kMaskUnbounded : x < -kMaskUnbounded ? -kMaskUnbounded : static_cast<int>(x);
}

// The mask of sequence (or batch entry) `seq`; nq / nkv are the arrays' row extents
// (the totals in varlen); bottom_right: the call's diagonal alignment (varlen forces it).
FFPA_MASK_FN SeqMask seq_mask(const MaskParams& m, int seq, int nq, int nkv, bool causal, bool bottom_right) {
  SeqMask s{};
  if (m.cu_seqlens_q != nullptr) {
    s.q_start = m.cu_seqlens_q[seq];
    s.k_start = m.cu_seqlens_k[seq];
    s.len_q = m.cu_seqlens_q[seq + 1] - s.q_start;
    s.rows_k = m.cu_seqlens_k[seq + 1] - s.k_start;
  } else {
    s.batch = seq;
    s.len_q = nq;
    s.rows_k = nkv;
  }
  s.len_k = s.rows_k;
  // Out-of-range lengths would read outside the arrays: clamped to what the sequence owns.
  if (m.seqused_k != nullptr) {
    const int used = m.seqused_k[seq];
    s.len_k = used < 0 ? 0 : used < s.rows_k ? used : s.rows_k;
  }
  const int64_t off = bottom_right || m.cu_seqlens_q != nullptr ? int64_t(s.len_k) - s.len_q : 0;
  s.lo = m.window_left < 0 ? -kMaskUnbounded : mask_clamp(off - m.window_left);
  s.hi = causal ? mask_clamp(off) : m.window_right < 0 ? kMaskUnbounded : mask_clamp(off + m.window_right);
  return s;
}

// The mask of an unmasked call (no window, padding or varlen) from the arrays' extents
// alone: the kernels' unmasked instances use it, so their extents stay constant-bank reads
// rather than registers (the masked form pushed D = 256 / 512 over 255 registers).
FFPA_MASK_FN SeqMask plain_mask(int batch, int nq, int nkv, bool causal, int causal_offset) {
  SeqMask s{};
  s.batch = batch;
  s.len_q = nq;
  s.rows_k = s.len_k = nkv;
  s.lo = -kMaskUnbounded;
  s.hi = causal ? causal_offset : kMaskUnbounded;  // FwdParams::causal_offset
  return s;
}

// Query i sees key j (local indices; the caller bounds i by len_q where it matters).
FFPA_MASK_FN bool visible(const SeqMask& s, int i, int j) {
  const int d = j - i;
  return j < s.len_k && d >= s.lo && d <= s.hi;
}

// Every entry of rows [r0, r1) x columns [c0, c1) visible, queries by keys (no mask needed).
FFPA_MASK_FN bool block_visible(const SeqMask& s, int r0, int r1, int c0, int c1) {
  // Indices are in [0, 2^31): the differences fit in 32 bits.
  return c1 <= s.len_k && c0 - (r1 - 1) >= s.lo && (c1 - 1) - r0 <= s.hi;
}

// Column blocks of `block` keys that query rows [r0, r1) (r1 <= len_q) may see:
// [*first, *end); empty (first == end) when they see none.
FFPA_MASK_FN void kv_block_range(const SeqMask& s, int r0, int r1, int block, int* first, int* end) {
  int64_t j0 = int64_t(r0) + s.lo, j1 = int64_t(r1 - 1) + s.hi + 1;  // keys [j0, j1)
  if (j0 < 0) j0 = 0;
  if (j1 > s.len_k) j1 = s.len_k;
  if (r1 <= r0 || j1 <= j0) {
    *first = *end = 0;
    return;
  }
  *first = static_cast<int>(j0 / block);
  *end = static_cast<int>((j1 + block - 1) / block);
}

// Column blocks of `block` queries that key rows [c0, c1) may be seen by (keys at or past
// len_k are seen by none).
FFPA_MASK_FN void q_block_range(const SeqMask& s, int c0, int c1, int block, int* first, int* end) {
  if (c1 > s.len_k) c1 = s.len_k;
  int64_t i0 = int64_t(c0) - s.hi, i1 = int64_t(c1 - 1) - s.lo + 1;  // queries [i0, i1)
  if (i0 < 0) i0 = 0;
  if (i1 > s.len_q) i1 = s.len_q;
  if (c1 <= c0 || i1 <= i0) {
    *first = *end = 0;
    return;
  }
  *first = static_cast<int>(i0 / block);
  *end = static_cast<int>((i1 + block - 1) / block);
}

// The masked instance under the non-finite math rule (the head's flag set): every key block
// of the sequence's read keys [0, len_k) is visited, so that a NaN or an inf the band hides
// from a row reaches it as in SDPA's math backend; keys at or past len_k (key padding, other
// packed sequences) are not part of the problem and stay unvisited. Otherwise the blocks of
// kv_block_range.
FFPA_MASK_FN void masked_kv_block_range(const SeqMask& s, int r0, int r1, int block, bool math_rule, int* first,
                                        int* end) {
  if (math_rule) {
    *first = 0;
    *end = s.len_k > 0 ? (s.len_k + block - 1) / block : 0;
    return;
  }
  kv_block_range(s, r0, r1, block, first, end);
}

// The backward's dK / dV kernel under the math rule (the kv head's group flagged): key rows
// [c0, c1) that hold a read key (c0 < len_k) are reached by every query block of the
// sequence, so that a NaN the band hides from them (in a row's LSE, Delta or dO) reaches
// their dK / dV as the math backend's autograd has it; a block of padding keys only is
// reached by none (its rows are written as zeros). Otherwise the blocks of q_block_range.
FFPA_MASK_FN void masked_q_block_range(const SeqMask& s, int c0, int c1, int block, bool math_rule, int* first,
                                       int* end) {
  if (math_rule) {
    *first = 0;
    *end = c0 < s.len_k && s.len_q > 0 ? (s.len_q + block - 1) / block : 0;
    return;
  }
  q_block_range(s, c0, c1, block, first, end);
}

// The masked instance's score x (already scaled) of query i and key j (local indices) after
// the mask: keys at or past len_k are not keys (replaced by -inf in both modes, whatever they
// hold: their rows are zero-filled or zeroed anyway); keys the band hides are replaced by -inf,
// or under the math rule get -inf ADDED (a NaN or +inf score stays NaN, as the math backend's
// additive mask leaves it).
FFPA_MASK_FN float masked_score(const SeqMask& s, float x, int i, int j, bool math_rule) {
  if (j >= s.len_k) return -INFINITY;
  const int d = j - i;
  if (d < s.lo || d > s.hi) return math_rule ? x + -INFINITY : -INFINITY;
  return x;
}

// Whether a forward call's mask hides, from some row, keys its sequence reads (causal or a
// sliding window): the calls whose NaN / inf the non-finite pre-pass must find (src/forward.cpp).
// Key padding and varlen alone hide none (keys past len_k are not part of the problem).
FFPA_MASK_FN bool band_hides_keys(const MaskParams& m, bool causal) {
  return causal || m.window_left >= 0 || m.window_right >= 0;
}

// Whether a launch uses any of these masks (the SIMT and low-precision kernels refuse them;
// the mma, TMA and CuTe kernels run their masked instances).
FFPA_MASK_FN bool mask_active(const MaskParams& m) {
  return m.window_left >= 0 || m.window_right >= 0 || m.seqused_k != nullptr || m.cu_seqlens_q != nullptr;
}

// ---- the causal mask of unmasked calls and the non-finite math rule ----

// True where the math rule applies to (batch, query head): flags is the pre-pass's
// [B, Hq] array, nullptr when the caller ran none (every input finite by contract).
FFPA_MASK_FN bool math_rule_for(const int* flags, int batch, int hq, int head) {
  return flags != nullptr && flags[batch * hq + head] != 0;
}

// The number of key blocks (of block_n keys, from key 0) that query rows [m0, m0 + rows)
// visit: all of them under the math rule or without the causal mask, else up to the last
// row's causal limit (0 when no row sees a key). Rows past nq are padding.
FFPA_MASK_FN int kv_blocks_for_rows(int m0, int rows, int nq, int nkv, int block_n, bool causal,
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
FFPA_MASK_FN int first_q_block_for_keys(int n0, int nq, int block_m, bool causal, int offset,
                                                               bool math_rule) {
  if (!causal || math_rule) return 0;
  const int first_q = n0 - offset > 0 ? n0 - offset : 0;
  return first_q >= nq ? (nq + block_m - 1) / block_m : first_q / block_m;
}

// Whether a score tile of query rows [m0, m0 + block_m) and keys [n0, n0 + block_n)
// holds any masked entry (padding keys or, causal, keys past the first row's limit);
// tiles without one skip the per-score mask.
FFPA_MASK_FN bool tile_needs_mask(int m0, int n0, int block_n, int nkv, bool causal,
                                                         int offset) {
  return n0 + block_n > nkv || (causal && n0 + block_n - 1 > m0 + offset);
}

// Whether (row, col) is masked by the causal mask (padding excluded).
FFPA_MASK_FN bool causal_masked(int row, int col, bool causal, int offset) {
  return causal && col > row + offset;
}

// The score x (already scaled) of query row `row` and key `col` after the mask.
FFPA_MASK_FN float mask_score(float x, int row, int col, int nkv, bool causal, int offset,
                                                     bool math_rule) {
  if (col >= nkv) return -INFINITY;
  if (causal_masked(row, col, causal, offset)) return math_rule ? x + -INFINITY : -INFINITY;
  return x;
}

// A row's log-sum-exp (natural log) from its max score (natural-log domain) and its sum
// of exponentials: -inf for a row that saw no key (sum 0), NaN where the sum is NaN (a
// NaN or +inf score, where the math backend's row is NaN): the backward then makes every
// gradient the row reaches NaN, as the math backend's autograd does.
FFPA_MASK_FN float row_lse(float max_ln, float sum) {
  if (sum != sum) return sum;
  return sum > 0.f ? max_ln + logf(sum) : -INFINITY;
}

}  // namespace ffpa
