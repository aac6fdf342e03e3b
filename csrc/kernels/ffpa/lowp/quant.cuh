// The low-precision paths' quantisation pass: fp16 / bf16 Q, K, V in (any batch, head and
// row strides, 16-byte aligned rows), every buffer of ffpa/lowp/layout.h out, in two
// launches on the caller's stream:
//   1. ffpa_lowp_kv_stats_kernel: per (batch, kv head, channel) the mean of K over all nkv
//      tokens (k_mean, the smoothing) and the amax of V (v_scale = amax / 448). It reduces
//      over the whole sequence, which the quantisation of K needs before any K block can
//      start: a grid-wide dependency, hence its own launch.
//   2. ffpa_lowp_quant_kernel: every Q row block (q8 [+ q_sf], q_scale, lse_shift), every
//      K row block (smoothed; k8 [+ k_sf], k_scale) and every 64 x 64 tile of V^T (vt8), in
//      one launch with the role taken from blockIdx.x ([Q blocks | K blocks | V^T tiles]).
//      One launch because the three roles share the block shape (256 threads), depend
//      only on launch 1, and are each too small to fill the GPU for short sequences or
//      few heads; as one grid they fill it together and cost one launch latency, not
//      three. The role is uniform per block, so no warp diverges on it.
// Plain CUDA (no CuTe), and written for the CPU emulator as well (csrc/tests/
// emulate_lowp_quant.cpp runs these kernels): only the dynamic shared memory smem_raw,
// only the float __shfl_xor_sync over full warps, no atomics, simple loop counts.
//
// The numbers (layout.h states the scheme; every conversion is numerics.h's):
//   block scale   s = amax / 448 (FP8) or amax / (6 * 448) (NVFP4 outer scale), rounded
//                 division; a block whose amax is 0 gets s = 1, and s is never below
//                 FLT_MIN (2^-126), so that 1 / s is finite for the tiniest bf16 blocks.
//   FP8 value     e4m3(x * (1 / s)).
//   NVFP4 value   sf = ue4m3((amax16 / 6) / s) per 16 columns of a row (sf = 1.0 where that
//                 rounds to 0, i.e. amax16 < 2^-10 * 6 s: all 16 values then round to 0);
//                 e2m1(x * (1 / s) * (1 / sf)), so x ~ e2m1 * sf * s. Two finite factors
//                 rather than 1 / (s * sf), which overflows when s is near FLT_MIN.
//   K             x = K - k_mean[channel] before all of the above (K', layout.h).
//   lse_shift     scale * dot(q_row, k_mean[kv head]) with q as the fp16 / bf16 values.
// The inputs are finite (an inf or NaN in a block makes that block's codes meaningless).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ffpa/lowp/layout.h"
#include "ffpa/lowp/numerics.h"
#include "ffpa/params.h"
#include "ffpa/utils.cuh"

#if defined(__CUDACC__)
#include "ffpa/launch_common.cuh"
#endif

namespace ffpa {

// The pass as layout.h specifies it. The emulator's checker also runs deliberate
// breakages of it (emulate_lowp_quant.cpp) and must report each as a mismatch.
struct LowpQuantExact {
  static constexpr bool kSmoothK = true;    // subtract k_mean from K before quantising it
  static constexpr bool kPermuteVt = true;  // store V^T's tokens at vt_column() within groups of 32
};

struct LowpQuantGeometry {
  static constexpr int kThreads = 256;
  // Stats: 32 channels per block (4 threads x 8 channels: 64-byte row segments), 64 rows
  // in flight. Narrower than a 128-byte row so that a (batch, kv head) of D = 64 still
  // gives 2 blocks; the partials of both statistics fit 16 KiB of shared memory.
  static constexpr int kStatsCols = 32;
  static constexpr int kStatsLanes = kStatsCols / 8;
  static constexpr int kStatsSlots = kThreads / kStatsLanes;
  static constexpr int kStatsSmemBytes = 2 * kStatsSlots * kStatsCols * int(sizeof(float));
  // Q / K roles: 8 threads x 8 elements cover 64 columns (one 128-byte line per row and
  // load), so 32 rows are in flight and every D that is a multiple of 64 is covered by
  // whole chunks. A row's 8 threads are 8 consecutive lanes (the lse_shift dot and the
  // NVFP4 16-column amax reduce with xor shuffles inside them).
  static constexpr int kRowLanes = 8;
  static constexpr int kRowSlots = kThreads / kRowLanes;
  static constexpr int kColsPerChunk = 8 * kRowLanes;
  // V^T role: a tile of 64 channels x 64 tokens (kVtPad, so a tile never straddles the
  // padding boundary), transposed through 4 KiB of shared memory.
  static constexpr int kVtTile = 64;
  static constexpr int kQuantSmemBytes = kVtTile * kVtTile;
  static_assert(kVtTile == kVtPad && kVtTile % kVtGroup == 0, "V^T tiles are whole groups and pads");
  static_assert(kColsPerChunk % kNvfp4Block == 0, "NVFP4 blocks lie within a thread pair");
};

// 16 bytes of a row: 8 elements (the row strides are multiples of 8 elements and the
// bases 16-byte aligned, so every such load is one 128-bit access).
template <typename T>
struct alignas(16) LowpVec8 {
  T v[8];
};
struct alignas(16) LowpBytes16 {
  uint32_t w[4];
};
struct alignas(8) LowpBytes8 {
  uint32_t w[2];
};

template <typename T>
__device__ __forceinline__ void lowp_load8(const T* src, float (&x)[8]) {
  const LowpVec8<T> v = *reinterpret_cast<const LowpVec8<T>*>(src);
#pragma unroll
  for (int e = 0; e < 8; ++e) x[e] = ElemTraits<T>::to_float(v.v[e]);
}

// A block scale with a finite reciprocal (the header comment's rule).
__device__ __forceinline__ float lowp_block_scale(float amax, float denom) {
  if (amax == 0.f) return 1.f;
  const float s = lowp_div_rn(amax, denom);
  return s < 0x1p-126f ? 0x1p-126f : s;
}

__device__ __forceinline__ float lowp_warp_max(float x) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, m));
  return x;
}

// Launch 1. Grid (d / kStatsCols, hkv, b), kThreads threads, kStatsSmemBytes.
template <typename T, typename Variant = LowpQuantExact>
__global__ void __launch_bounds__(LowpQuantGeometry::kThreads)
    ffpa_lowp_kv_stats_kernel(const FwdParams p, const LowpLayout l, unsigned char* ws) {
  using G = LowpQuantGeometry;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* const s_sum = reinterpret_cast<float*>(smem_raw);  // [kStatsSlots][kStatsCols]
  float* const s_max = s_sum + G::kStatsSlots * G::kStatsCols;

  const int tid = threadIdx.x;
  const int lane = tid % G::kStatsLanes, slot = tid / G::kStatsLanes;
  const int c_block = blockIdx.x * G::kStatsCols;
  const int kvh = blockIdx.y, b = blockIdx.z;
  const T* const k_col = static_cast<const T*>(p.k) + b * p.k_batch_stride + kvh * p.k_head_stride + c_block + 8 * lane;
  const T* const v_col = static_cast<const T*>(p.v) + b * p.v_batch_stride + kvh * p.v_head_stride + c_block + 8 * lane;

  float sum[8], amax[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) sum[e] = 0.f, amax[e] = 0.f;
  for (int j = slot; j < l.nkv; j += G::kStatsSlots) {
    float kx[8], vx[8];
    lowp_load8(k_col + int64_t(j) * p.k_row_stride, kx);
    lowp_load8(v_col + int64_t(j) * p.v_row_stride, vx);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sum[e] += kx[e];
      amax[e] = fmaxf(amax[e], fabsf(vx[e]));
    }
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    s_sum[slot * G::kStatsCols + 8 * lane + e] = sum[e];
    s_max[slot * G::kStatsCols + 8 * lane + e] = amax[e];
  }
  __syncthreads();
  // Threads 0..31 finish channel tid's K sum, threads 32..63 its V amax, each over the
  // slots in order (a fixed order: the pass gives the same k_mean on every run).
  if (tid < 2 * G::kStatsCols) {
    const int c = tid % G::kStatsCols;
    const bool is_k = tid < G::kStatsCols;
    const float* const src = (is_k ? s_sum : s_max) + c;
    float acc = 0.f;
    for (int s = 0; s < G::kStatsSlots; ++s) {
      const float v = src[s * G::kStatsCols];
      acc = is_k ? acc + v : fmaxf(acc, v);
    }
    const int64_t at = (int64_t(b) * l.hkv + kvh) * l.d + c_block + c;
    if (is_k) {
      reinterpret_cast<float*>(ws + l.k_mean)[at] = lowp_div_rn(acc, float(l.nkv));
    } else {
      reinterpret_cast<float*>(ws + l.v_scale)[at] = lowp_block_scale(acc, kE4m3Max);
    }
  }
}

// One row block of Q (kIsQ) or K: pass 1 reads it for its amax (and Q's lse_shift), pass 2
// reads it again and writes the codes. The block (up to 128 rows x D) does not fit in
// registers or, for large D, in shared memory; its second read comes from L2 (the block
// was read a moment before by the same SM).
template <typename T, typename Variant, bool kIsQ>
__device__ __forceinline__ void lowp_quant_rows(const FwdParams& p, const LowpLayout& l, unsigned char* ws, int64_t id,
                                                float* s_warp) {
  using G = LowpQuantGeometry;
  const int tid = threadIdx.x;
  const int c8 = tid % G::kRowLanes, slot = tid / G::kRowLanes;
  const int heads = kIsQ ? l.hq : l.hkv;
  const int64_t n_blocks = kIsQ ? l.nq_blocks : l.nkv_blocks;
  const int blk = int(id % n_blocks);
  const int h = int(id / n_blocks % heads);
  const int b = int(id / n_blocks / heads);
  const int kvh = kIsQ ? h / (l.hq / l.hkv) : h;
  const int n = kIsQ ? l.nq : l.nkv;
  const int block_rows = kIsQ ? l.block_m : l.block_n;
  const int row0 = blk * block_rows;
  const int rows = n - row0 < block_rows ? n - row0 : block_rows;
  const int iters = (block_rows + G::kRowSlots - 1) / G::kRowSlots;  // the same in every thread
  const int chunks = l.d / G::kColsPerChunk;
  const bool fp8 = l.qk == LowpQK::kFp8;

  const T* const src = kIsQ ? static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride
                            : static_cast<const T*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride;
  const int64_t row_stride = kIsQ ? p.q_row_stride : p.k_row_stride;
  const float* const mean = reinterpret_cast<const float*>(ws + l.k_mean) + (int64_t(b) * l.hkv + kvh) * l.d;
  const int64_t first_row = (int64_t(b) * heads + h) * n + row0;  // of this block in q8 / k8 / q_sf / k_sf

  // The values a thread quantises: Q as is, K minus its mean; zeros in rows past n.
  auto load = [&](int r, int c, float(&x)[8]) {
    lowp_load8(src + int64_t(row0 + r) * row_stride + c, x);
    if (!kIsQ && Variant::kSmoothK) {
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] -= mean[c + e];
    }
  };

  // Pass 1.
  float amax = 0.f;
  for (int it = 0; it < iters; ++it) {
    const int r = slot + G::kRowSlots * it;
    const bool valid = r < rows;
    float dot = 0.f;
    for (int ch = 0; ch < chunks; ++ch) {
      const int c = ch * G::kColsPerChunk + 8 * c8;
      if (!valid) continue;
      float x[8];
      load(r, c, x);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        amax = fmaxf(amax, fabsf(x[e]));
        if (kIsQ) dot = fmaf(x[e], mean[c + e], dot);
      }
    }
    if (kIsQ) {
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      dot += __shfl_xor_sync(0xffffffffu, dot, 4);
      if (valid && c8 == 0) reinterpret_cast<float*>(ws + l.lse_shift)[first_row + r] = p.scale * dot;
    }
  }
  amax = lowp_warp_max(amax);
  if (tid % 32 == 0) s_warp[tid / 32] = amax;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < G::kThreads / 32; ++w) amax = fmaxf(amax, s_warp[w]);
  const float scale = lowp_block_scale(amax, fp8 ? kE4m3Max : kE2m1Max * kE4m3Max);
  const float inv = lowp_div_rn(1.f, scale);
  if (tid == 0) {
    float* const scales = reinterpret_cast<float*>(ws + (kIsQ ? l.q_scale : l.k_scale));
    scales[(int64_t(b) * heads + h) * n_blocks + blk] = scale;
  }

  // Pass 2.
  unsigned char* const codes = ws + (kIsQ ? l.q8 : l.k8) + first_row * l.qk_row_bytes;
  unsigned char* const sfs = ws + (kIsQ ? l.q_sf : l.k_sf) + first_row * (l.d / kNvfp4Block);
  for (int it = 0; it < iters; ++it) {
    const int r = slot + G::kRowSlots * it;
    const bool valid = r < rows;
    for (int ch = 0; ch < chunks; ++ch) {
      const int c = ch * G::kColsPerChunk + 8 * c8;
      float x[8];
      if (valid) {
        load(r, c, x);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = 0.f;
      }
      if (fp8) {
        LowpBytes8 out;
#pragma unroll
        for (int i = 0; i < 2; ++i)
          out.w[i] = uint32_t(cvt_e4m3x2(x[4 * i] * inv, x[4 * i + 1] * inv)) |
                     (uint32_t(cvt_e4m3x2(x[4 * i + 2] * inv, x[4 * i + 3] * inv)) << 16);
        if (valid) *reinterpret_cast<LowpBytes8*>(codes + int64_t(r) * l.qk_row_bytes + c) = out;
      } else {
        // A 16-column block is this thread's 8 columns and its neighbour's (lane ^ 1).
        float a16 = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) a16 = fmaxf(a16, fabsf(x[e]));
        a16 = fmaxf(a16, __shfl_xor_sync(0xffffffffu, a16, 1));
        uint8_t sf = float_to_ue4m3(lowp_div_rn(lowp_div_rn(a16, kE2m1Max), scale));
        if (sf == 0) sf = 0x38;  // 1.0
        const float inv_sf = lowp_div_rn(1.f, ue4m3_to_float(sf));
        uint8_t q[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) q[e] = float_to_e2m1(x[e] * inv * inv_sf);
        if (valid) {
          *reinterpret_cast<uint32_t*>(codes + int64_t(r) * l.qk_row_bytes + c / 2) = pack_e2m1x8(q);
          if (c8 % 2 == 0) sfs[int64_t(r) * (l.d / kNvfp4Block) + c / kNvfp4Block] = sf;
        }
      }
    }
  }
}

// One 64-channel x 64-token tile of V^T: each thread quantises 8 channels of 2 tokens into
// the shared tile [channel][storage column], then the tile leaves as 64 rows of 64 bytes.
template <typename T, typename Variant>
__device__ __forceinline__ void lowp_quant_vt(const FwdParams& p, const LowpLayout& l, unsigned char* ws, int64_t id,
                                              unsigned char* s_tile) {
  using G = LowpQuantGeometry;
  const int tid = threadIdx.x;
  const int c8 = tid % 8, tok_slot = tid / 8;
  const int64_t tok_tiles = l.nkv_pad / G::kVtTile;
  const int ch_tiles = l.d / G::kVtTile;
  const int tt = int(id % tok_tiles);
  const int ct = int(id / tok_tiles % ch_tiles);
  const int kvh = int(id / tok_tiles / ch_tiles % l.hkv);
  const int b = int(id / tok_tiles / ch_tiles / l.hkv);
  const int c0 = ct * G::kVtTile + 8 * c8;  // this thread's first channel
  const float* const v_scale = reinterpret_cast<const float*>(ws + l.v_scale) + (int64_t(b) * l.hkv + kvh) * l.d;
  float inv[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) inv[e] = lowp_div_rn(1.f, v_scale[c0 + e]);
  const T* const v_col = static_cast<const T*>(p.v) + b * p.v_batch_stride + kvh * p.v_head_stride + c0;

#pragma unroll
  for (int g = 0; g < G::kVtTile / kVtGroup; ++g) {
    const int tok = g * kVtGroup + tok_slot;  // within the tile; tok_slot < 32 = kVtGroup
    const int64_t j = int64_t(tt) * G::kVtTile + tok;
    float x[8];
    if (j < l.nkv) {
      lowp_load8(v_col + j * p.v_row_stride, x);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = 0.f;  // tokens past nkv are zero (layout.h)
    }
    const int col = g * kVtGroup + (Variant::kPermuteVt ? vt_column(tok_slot) : tok_slot);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint16_t pair = cvt_e4m3x2(x[2 * i] * inv[2 * i], x[2 * i + 1] * inv[2 * i + 1]);
      s_tile[(8 * c8 + 2 * i) * G::kVtTile + col] = uint8_t(pair & 0xffu);
      s_tile[(8 * c8 + 2 * i + 1) * G::kVtTile + col] = uint8_t(pair >> 8);
    }
  }
  __syncthreads();
  const int row = tid / 4, quarter = tid % 4;  // 64 rows x 4 x 16 bytes
  unsigned char* const dst = ws + l.vt8 + ((int64_t(b) * l.hkv + kvh) * l.d + ct * G::kVtTile + row) * l.nkv_pad +
                             int64_t(tt) * G::kVtTile + 16 * quarter;
  *reinterpret_cast<LowpBytes16*>(dst) =
      *reinterpret_cast<const LowpBytes16*>(s_tile + row * G::kVtTile + 16 * quarter);
}

// Launch 2. Grid (Q blocks + K blocks + V^T tiles), kThreads threads, kQuantSmemBytes.
template <typename T, typename Variant = LowpQuantExact>
__global__ void __launch_bounds__(LowpQuantGeometry::kThreads)
    ffpa_lowp_quant_kernel(const FwdParams p, const LowpLayout l, unsigned char* ws) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int64_t q_blocks = int64_t(l.b) * l.hq * l.nq_blocks;
  const int64_t k_blocks = int64_t(l.b) * l.hkv * l.nkv_blocks;
  const int64_t id = blockIdx.x;
  if (id < q_blocks) {
    lowp_quant_rows<T, Variant, true>(p, l, ws, id, reinterpret_cast<float*>(smem_raw));
  } else if (id < q_blocks + k_blocks) {
    lowp_quant_rows<T, Variant, false>(p, l, ws, id - q_blocks, reinterpret_cast<float*>(smem_raw));
  } else {
    lowp_quant_vt<T, Variant>(p, l, ws, id - q_blocks - k_blocks, smem_raw);
  }
}

// The number of blocks of launch 2 (the host and the emulator size its grid from this).
inline int64_t lowp_quant_blocks(const LowpLayout& l) {
  const int64_t vt_tiles =
      int64_t(l.b) * l.hkv * (l.d / LowpQuantGeometry::kVtTile) * (l.nkv_pad / LowpQuantGeometry::kVtTile);
  return int64_t(l.b) * l.hq * l.nq_blocks + int64_t(l.b) * l.hkv * l.nkv_blocks + vt_tiles;
}

#if defined(__CUDACC__)
// Both launches on p.stream. The layout must be lowp_layout() of p's shape with the
// attention kernel's tiles; an empty problem writes nothing.
template <typename T>
Status launch_lowp_quant(const FwdParams& p, const LowpLayout& l, unsigned char* workspace) {
  using G = LowpQuantGeometry;
  if (l.b != p.b || l.hq != p.hq || l.hkv != p.hkv || l.nq != p.nq || l.nkv != p.nkv || l.d != p.head_dim)
    return {ErrorKind::kShape, "low-precision quantisation: the workspace layout was made for another shape"};
  if (l.d % G::kColsPerChunk != 0 || l.d <= 0)
    return {ErrorKind::kHeadDim, "low-precision quantisation: head dims are multiples of 64"};
  if (l.hkv <= 0 || l.hq % l.hkv != 0 || l.block_m <= 0 || l.block_n <= 0)
    return {ErrorKind::kShape, "low-precision quantisation: hq must be a multiple of hkv and the tiles positive"};
  if (l.b == 0 || l.hq == 0 || l.nq == 0 || l.nkv == 0) return {};
  // 16-byte vector loads: every row of Q, K and V starts 16-byte aligned.
  const int64_t strides[] = {p.q_batch_stride, p.q_head_stride,  p.q_row_stride,  p.k_batch_stride, p.k_head_stride,
                             p.k_row_stride,   p.v_batch_stride, p.v_head_stride, p.v_row_stride};
  bool aligned = reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && reinterpret_cast<uintptr_t>(p.k) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(p.v) % 16 == 0 && reinterpret_cast<uintptr_t>(workspace) % 256 == 0;
  for (int64_t s : strides) aligned = aligned && s % 8 == 0;
  if (!aligned)
    return {ErrorKind::kLayout,
            "low-precision quantisation: Q, K and V need 16-byte aligned rows (strides multiples of 8 elements) "
            "and a 256-byte aligned workspace; pass contiguous tensors"};
  const int64_t blocks = lowp_quant_blocks(l);
  if (l.hkv > 65535 || l.b > 65535 || blocks > 0x7fffffff)
    return {ErrorKind::kShape, "low-precision quantisation: too many batches, heads or blocks for one launch"};
  Status st = launch_kernel(&ffpa_lowp_kv_stats_kernel<T, LowpQuantExact>, dim3(l.d / G::kStatsCols, l.hkv, l.b),
                            G::kThreads, G::kStatsSmemBytes, p.stream, "low-precision K / V statistics kernel launch",
                            p, l, workspace);
  if (!st.ok()) return st;
  return launch_kernel(&ffpa_lowp_quant_kernel<T, LowpQuantExact>, dim3(unsigned(blocks)), G::kThreads,
                       G::kQuantSmemBytes, p.stream, "low-precision quantisation kernel launch", p, l, workspace);
}
#endif

}  // namespace ffpa
