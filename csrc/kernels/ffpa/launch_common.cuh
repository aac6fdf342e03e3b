// What every launcher shares (the mma / tma / simt launchers of fwd_launch_template.cuh
// and the CuTe ones of cute/launch.cuh): element types, the launch-status and shared
// memory opt-in helpers, the tensor-map encoder (api.cu), and the CuTe entry points
// that the (head dim, dtype) dispatcher calls into their own instance files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ffpa/bwd_params.h"
#include "ffpa/kernel_traits.h"
#include "ffpa/params.h"
#include "ffpa/tma.cuh"

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

Status launch_status(cudaError_t err, const char* what);  // api.cu

// Above 48 KiB of dynamic shared memory a kernel must opt in, per device.
template <typename Kernel>
Status smem_opt_in(Kernel kernel, int bytes) {
  if (bytes <= 48 * 1024) return {};
  return launch_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                       "cudaFuncSetAttribute (shared memory opt-in)");
}

// api.cu: the tensor maps of a launch (boxes of box_rows_q / box_rows_kv rows by 64
// columns, 128-byte swizzle, zero fill), encoded through the driver entry point.
Status encode_tma_maps(const FwdParams& params, DType dtype, int box_rows_q, int box_rows_kv, TmaMaps* maps);
// api.cu: the backward's four maps (ffpa/tma_geometry.h's bwd_tma_geometry): Q and dO
// in boxes of box_rows_q rows, K and V of box_rows_kv (nkv == 0: none for K and V).
Status encode_bwd_tma_maps(const BwdParams& params, DType dtype, int box_rows_q, int box_rows_kv, BwdTmaMaps* maps);
// api.cu: the low-precision kernel's maps over the workspace's byte arrays (ffpa/
// tma_geometry.h, lowp_tma_geometry): Q / K boxes of slab_bytes x box rows, V^T boxes of
// 64 tokens x box_rows_vt channels.
Status encode_lowp_tma_maps(const FwdParams& params, int box_rows_q, int box_rows_kv, int box_rows_vt, int slab_bytes,
                            TmaMaps* maps);

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
