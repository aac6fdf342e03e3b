// What every launcher shares (the mma / tma / simt launchers of fwd_launch_template.cuh
// and the CuTe ones of cute/launch.cuh): element types, the launch seam (ffpa/launch.cuh),
// the tensor-map encoders (through the runtime seam, ffpa/runtime.h), and the CuTe entry
// points that the (head dim, dtype) dispatcher calls into their own instance files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "ffpa/bwd_params.h"
#include "ffpa/kernel_traits.h"
#include "ffpa/launch.cuh"
#include "ffpa/params.h"
#include "ffpa/runtime.h"
#include "ffpa/tma.cuh"
#include "ffpa/tma_geometry.h"

namespace ffpa {

template <DType kDType>
struct DTypeElement;
template <>
struct DTypeElement<DType::kFp16> {
  using type = __half;
};
template <>
struct DTypeElement<DType::kBf16> {
  using type = __nv_bfloat16;
};

// The tensor maps of one launch, encoded in order through the runtime seam
// (ffpa/runtime.h); the first refusal stops it. A map with skip set stays zero: K and V
// when nkv == 0 (no KV block is ever loaded, and a zero extent is not encodable).
struct TmaMapSpec {
  CUtensorMap* map;
  const char* name;
  const void* data;
  DType dtype;
  TmaGeometry geometry;
  bool skip = false;
};
template <size_t N>
Status encode_tma_map_list(const TmaMapSpec (&specs)[N]) {
  for (const TmaMapSpec& s : specs) std::memset(s.map, 0, sizeof(CUtensorMap));
  for (const TmaMapSpec& s : specs) {
    if (s.skip) continue;
    Status st = runtime::encode_tiled(s.map, s.name, s.data, s.dtype, s.geometry);
    if (!st.ok()) return st;
  }
  return {};
}

// The forward's maps (boxes of box_rows_q / box_rows_kv rows by 64 columns, 128-byte
// swizzle, zero fill: ffpa/tma_geometry.h).
inline Status encode_tma_maps(const FwdParams& p, DType dtype, int box_rows_q, int box_rows_kv, TmaMaps* maps) {
  const bool no_kv = p.nkv == 0;
  return encode_tma_map_list({TmaMapSpec{&maps->q, "q", p.q, dtype, tma_geometry(p, TmaOperand::kQ, box_rows_q)},
                              TmaMapSpec{&maps->k, "k", p.k, dtype, tma_geometry(p, TmaOperand::kK, box_rows_kv), no_kv},
                              TmaMapSpec{&maps->v, "v", p.v, dtype, tma_geometry(p, TmaOperand::kV, box_rows_kv), no_kv}});
}
// The backward's four maps (bwd_tma_geometry): Q and dO in boxes of box_rows_q rows, K
// and V of box_rows_kv.
inline Status encode_bwd_tma_maps(const BwdParams& p, DType dtype, int box_rows_q, int box_rows_kv, BwdTmaMaps* maps) {
  const bool no_kv = p.nkv == 0;
  return encode_tma_map_list(
      {TmaMapSpec{&maps->q, "q", p.q, dtype, bwd_tma_geometry(p, BwdTmaOperand::kQ, box_rows_q)},
       TmaMapSpec{&maps->dout, "dout", p.dout, dtype, bwd_tma_geometry(p, BwdTmaOperand::kDout, box_rows_q)},
       TmaMapSpec{&maps->k, "k", p.k, dtype, bwd_tma_geometry(p, BwdTmaOperand::kK, box_rows_kv), no_kv},
       TmaMapSpec{&maps->v, "v", p.v, dtype, bwd_tma_geometry(p, BwdTmaOperand::kV, box_rows_kv), no_kv}});
}
// The low-precision kernel's maps over the workspace's byte arrays (lowp_tma_geometry):
// Q / K boxes of slab_bytes x box rows, V^T boxes of 64 tokens x box_rows_vt channels.
inline Status encode_lowp_tma_maps(const FwdParams& p, int box_rows_q, int box_rows_kv, int box_rows_vt, int slab_bytes,
                                   TmaMaps* maps) {
  const LowpLayout& l = p.lowp;
  const bool no_kv = p.nkv == 0;
  return encode_tma_map_list(
      {TmaMapSpec{&maps->q, "q (quantised)", p.lowp_ws + l.q8, DType::kFp16,
                  lowp_tma_geometry(l, TmaOperand::kQ, box_rows_q, slab_bytes)},
       TmaMapSpec{&maps->k, "k (quantised)", p.lowp_ws + l.k8, DType::kFp16,
                  lowp_tma_geometry(l, TmaOperand::kK, box_rows_kv, slab_bytes), no_kv},
       TmaMapSpec{&maps->v, "v^T (quantised)", p.lowp_ws + l.vt8, DType::kFp16,
                  lowp_tma_geometry(l, TmaOperand::kV, box_rows_vt, slab_bytes), no_kv}});
}

// The CuTe kernel of one (head dim, dtype) and feed (kCpAsync: impl cute, kTma: impl
// cute_tma), either accumulator; defined in ffpa/cute/launch.cuh and instantiated in
// the instance files ffpa_fwd_d<D>_cute.cu (cmake/FfpaKernelInstances.cmake).
template <int kHeadDim, DType kDType, Load kLoad>
Status run_fwd_cute(const FwdParams& params);

// The low-precision CuTe kernel of one head dim, Q K^T precision and feed, on a quantised
// workspace (params.lowp_ws / params.lowp); defined in ffpa/cute/launch.cuh and
// instantiated in ffpa_fwd_d<D>_lowp.cu (cmake/FfpaKernelInstances.cmake).
template <int kHeadDim, LowpQK kQK, Load kLoad>
Status run_fwd_lowp_kernel(const FwdParams& params);

// The quantisation pass (ffpa/lowp/quant.cuh) for inputs of dtype (src/lowp_quant.cu).
Status quantize_lowp(const FwdParams& params, DType dtype, unsigned char* workspace);

}  // namespace ffpa
