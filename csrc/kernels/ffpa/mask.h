// The masks of the mma / TMA forward and the backward kernels, in one place: the sliding
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
#pragma once

#include <cstdint>

// Callable from the kernels (nvcc) and from host code alike.
#if defined(__CUDACC__)
#define FFPA_MASK_FN __host__ __device__ __forceinline__
#else
#define FFPA_MASK_FN inline
#endif

namespace ffpa {

// What a launch passes (FwdParams::mask, BwdParams::mask; set by api.cu).
struct MaskParams {
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded (causal: 0)
  // The backward's alignment: bottom-right (diag(i) = i + Nk - Nq) unless its causal is
  // top-left (api.cu). The forward's causal is bottom-right by contract (seq_mask's caller
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
FFPA_MASK_FN SeqMask plain_mask(int batch, int nq, int nkv, bool causal) {
  SeqMask s{};
  s.batch = batch;
  s.len_q = nq;
  s.rows_k = s.len_k = nkv;
  s.lo = -kMaskUnbounded;
  s.hi = causal ? nkv - nq : kMaskUnbounded;  // bottom-right
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

// Whether a launch uses any of these masks (the SIMT, CuTe and low-precision kernels refuse them).
FFPA_MASK_FN bool mask_active(const MaskParams& m) {
  return m.window_left >= 0 || m.window_right >= 0 || m.seqused_k != nullptr || m.cu_seqlens_q != nullptr;
}

}  // namespace ffpa
