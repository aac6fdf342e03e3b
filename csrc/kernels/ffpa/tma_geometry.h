// The geometry of the TMA path's tensor maps, in one place: the launcher encodes it
// with the driver's cuTensorMapEncodeTiled (src/runtime_cuda.cu), the CPU emulator with its model
// of the same call (csrc/tests/emulate_kernels.cpp, emulate_bwd.cpp). Host code, no CUDA types.
//
// One rank-4 map per array over its [B, H, N, D] layout, innermost first:
//   dims    {D, N, H, B}
//   strides {row, head, batch} in bytes (the D stride is 1 element by contract)
//   box     {64, rows, 1, 1}: one 64-column chunk (128 bytes, the 128-byte swizzle
//           span) of `rows` rows; the kernel's coordinates are {d0, row0, head, batch}
// An extent-1 dim is never stepped over, so its stride (which frameworks leave
// arbitrary there, 0 included) is replaced by the packed one.
// The low-precision kernel's maps (lowp_tma_geometry) are over the quantisation pass's
// packed byte arrays (ffpa/lowp/layout.h): Q and K as {row bytes, N, H, B} with boxes one
// swizzle slab wide (64 bytes: 64 e4m3, 32 bytes: 64 NVFP4 values), V^T as
// {nkv_pad, D, Hkv, B} with boxes of 64 tokens x the kernel's V step of channels.
#pragma once

#include <cstdint>

#include "ffpa/bwd_params.h"
#include "ffpa/params.h"

namespace ffpa {

struct TmaGeometry {
  uint64_t dims[4];
  uint64_t strides[3];  // bytes
  uint32_t box[4];
  uint32_t elem_bytes = 2;       // 2: fp16 / bf16; 1: the low-precision byte arrays
  uint32_t swizzle_bytes = 128;  // the box's swizzle span: 128, 64 or 32 (= the box row)
};

enum class TmaOperand { kQ, kK, kV };

// One [B, H, N, D] array with element strides row / head / batch (the D stride is 1).
inline TmaGeometry tma_geometry_bhnd(int64_t d, int64_t n, int64_t h, int64_t b, int64_t row, int64_t head,
                                     int64_t batch, int box_rows) {
  if (n == 1) row = d;
  if (h == 1) head = n * d;
  if (b == 1) batch = h * n * d;
  TmaGeometry g{};
  g.dims[0] = static_cast<uint64_t>(d);
  g.dims[1] = static_cast<uint64_t>(n);
  g.dims[2] = static_cast<uint64_t>(h);
  g.dims[3] = static_cast<uint64_t>(b);
  g.strides[0] = static_cast<uint64_t>(row) * 2;
  g.strides[1] = static_cast<uint64_t>(head) * 2;
  g.strides[2] = static_cast<uint64_t>(batch) * 2;
  g.box[0] = 64;
  g.box[1] = static_cast<uint32_t>(box_rows);
  g.box[2] = 1;
  g.box[3] = 1;
  return g;
}

inline TmaGeometry tma_geometry(const FwdParams& p, TmaOperand which, int box_rows) {
  const bool q = which == TmaOperand::kQ;
  const bool k = which == TmaOperand::kK;
  return tma_geometry_bhnd(p.head_dim, q ? p.nq : p.nkv, q ? p.hq : p.hkv, p.b,
                           q ? p.q_row_stride : k ? p.k_row_stride : p.v_row_stride,
                           q ? p.q_head_stride : k ? p.k_head_stride : p.v_head_stride,
                           q ? p.q_batch_stride : k ? p.k_batch_stride : p.v_batch_stride, box_rows);
}

// The backward's maps (ffpa/bwd_kernel_mma.cuh's TMA feed): Q and dO over [B, Hq, Nq, D],
// K and V over [B, Hkv, Nkv, D]; boxes of 64 columns x the kernel's row block (its own
// rows) or 64 (its column blocks).
enum class BwdTmaOperand { kQ, kK, kV, kDout };

inline TmaGeometry bwd_tma_geometry(const BwdParams& p, BwdTmaOperand which, int box_rows) {
  switch (which) {
    case BwdTmaOperand::kQ:
      return tma_geometry_bhnd(p.head_dim, p.nq, p.hq, p.b, p.q_row_stride, p.q_head_stride, p.q_batch_stride,
                               box_rows);
    case BwdTmaOperand::kDout:
      return tma_geometry_bhnd(p.head_dim, p.nq, p.hq, p.b, p.do_row_stride, p.do_head_stride, p.do_batch_stride,
                               box_rows);
    case BwdTmaOperand::kK:
      return tma_geometry_bhnd(p.head_dim, p.nkv, p.hkv, p.b, p.k_row_stride, p.k_head_stride, p.k_batch_stride,
                               box_rows);
    case BwdTmaOperand::kV:
      return tma_geometry_bhnd(p.head_dim, p.nkv, p.hkv, p.b, p.v_row_stride, p.v_head_stride, p.v_batch_stride,
                               box_rows);
  }
  return TmaGeometry{};  // unreachable: every operand is listed above
}

inline TmaGeometry lowp_tma_geometry(const LowpLayout& l, TmaOperand which, int box_rows, int slab_bytes) {
  const bool vt = which == TmaOperand::kV;
  const bool q = which == TmaOperand::kQ;
  const uint64_t inner = vt ? uint64_t(l.nkv_pad) : uint64_t(l.qk_row_bytes);
  const uint64_t rows = vt ? uint64_t(l.d) : uint64_t(q ? l.nq : l.nkv);
  const uint64_t heads = uint64_t(q ? l.hq : l.hkv);
  TmaGeometry g{};
  g.dims[0] = inner;
  g.dims[1] = rows;
  g.dims[2] = heads;
  g.dims[3] = uint64_t(l.b);
  g.strides[0] = inner;
  g.strides[1] = inner * rows;
  g.strides[2] = inner * rows * heads;
  g.box[0] = static_cast<uint32_t>(vt ? kVtPad : slab_bytes);
  g.box[1] = static_cast<uint32_t>(box_rows);
  g.box[2] = 1;
  g.box[3] = 1;
  g.elem_bytes = 1;
  g.swizzle_bytes = static_cast<uint32_t>(vt ? kVtPad : slab_bytes);
  return g;
}

}  // namespace ffpa
