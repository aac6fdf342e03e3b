// Shared by the device-check runner's correctness matrix (device_check.cu) and its
// kernel timings (device_check_bench.cu): one executable, two concerns, two files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ffpa/api.h"
#include "ffpa/tolerance.h"

#define CHECK_CUDA(expr)                                                                            \
  do {                                                                                              \
    cudaError_t e_ = (expr);                                                                        \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                                 \
    }                                                                                               \
  } while (0)

namespace ffpa::check {

inline int64_t row_offset(bool bnhd, int H, int N, int D, int bi, int hi, int ni) {
  if (bnhd) return ((static_cast<int64_t>(bi) * N + ni) * H + hi) * D;
  return ((static_cast<int64_t>(bi) * H + hi) * N + ni) * D;
}

inline void set_desc(ffpa::TensorDesc& t, void* data, bool bnhd, int B, int H, int N, int D, ffpa::DType dt) {
  t.data = data;
  t.shape[0] = B, t.shape[1] = H, t.shape[2] = N, t.shape[3] = D;
  if (bnhd) {
    t.stride[0] = static_cast<int64_t>(N) * H * D, t.stride[1] = D, t.stride[2] = static_cast<int64_t>(H) * D;
  } else {
    t.stride[0] = static_cast<int64_t>(H) * N * D, t.stride[1] = static_cast<int64_t>(N) * D, t.stride[2] = D;
  }
  t.stride[3] = 1;
  t.dtype = dt;
}

// A float rounded to the dtype's 16 bits, and back.
inline uint16_t to_bits(float x, ffpa::DType t) {
  uint16_t bits;
  if (t == ffpa::DType::kFp16) {
    __half h = __float2half_rn(x);
    std::memcpy(&bits, &h, 2);
  } else {
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}

inline float from_bits(uint16_t bits, ffpa::DType t) {
  if (t == ffpa::DType::kFp16) {
    __half h;
    std::memcpy(&h, &bits, 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  std::memcpy(&h, &bits, 2);
  return __bfloat162float(h);
}

// One backward case (device_check_bwd.cu): fp16 / bf16 inputs drawn from N(0, 1), the
// default scale, dout drawn the same way.
struct BwdSpec {
  int d;
  ffpa::DType dtype;
  bool causal;
  bool top_left;  // causal: SDPA's is_causal alignment (key j <= i) instead of bottom-right
  int b, nq, nkv, hq, hkv;
  bool bnhd;  // [B, N, H, D] memory: head / row strides
  // A NaN planted at (batch 0, head 0, row plant_row, column 3) of 'k', 'v' or 'o' (dO);
  // 0: none. The gradients' NaN pattern must then be the float64 reference's (torch's math
  // backend's autograd, the causal mask added) and the rest within the bounds.
  char plant = 0;
  int plant_row = 0;
};
// Over dQ, dK and dV, the worst of each: max |g - ref| / max |ref| (max_rel), max |g - ref|
// (max_abs) and sum |g - ref| / sum |ref| (rel_l1). ok: every gradient within its row of
// ffpa/tolerance.h (bwd_tolerance) and finite; error names the gradients that are not.
struct BwdResult {
  bool ok = true;
  double max_rel = 0, max_abs = 0, rel_l1 = 0;
  std::string error;
};
std::string bwd_spec_name(const BwdSpec& c);
// The row a backward case is judged by: bwd_fp16 or bwd_bf16 (atol bounds max_rel,
// max_rel_l1 bounds rel_l1).
const ffpa::Tolerance& bwd_tolerance(ffpa::DType dt);
// Runs ffpa::backward() on the case against its float64 reference (exit 2 on a device fault).
BwdResult run_bwd_case(const BwdSpec& c, uint64_t seed);

// One mask case (device_check_masks.cu): the sliding window, seqused_k and varlen through
// ffpa::forward() on an impl and ffpa::backward(), per sequence against float64.
struct MaskSpec {
  int d;
  ffpa::DType dtype;
  bool varlen;
  bool causal;  // bottom-right (per sequence)
  int hq, hkv;
  std::vector<int> lens_q, lens_k;  // per sequence (a padded batch: all equal)
  std::vector<int> used_k;          // seqused_k; empty: not given
  int left = -1, right = -1;
  // A value planted at column 3 of q, dO, k or v ('q', 'd', 'k', 'v'; 0: none), at local row
  // plant_row of sequence plant_seq, head plant_head (k / v: the kv head): the forward and
  // the backward are then held to SDPA's math backend's NaN / inf pattern (the window added
  // as -inf; docs/install.md "NaN and inf").
  char plant = 0;
  int plant_seq = 0, plant_head = 0, plant_row = 0;
  float plant_value = 0.f;
};
// o_err: max |O - ref| (fp16 / bf16 row's atol), lse_err (its lse), grad_max_rel and
// grad_rel_l1: the worst of dQ, dK, dV (bwd rows); ok: all within, every value finite.
struct MaskResult {
  bool ok = true;
  double o_err = 0, lse_err = 0, grad_max_rel = 0, grad_rel_l1 = 0;
  std::string error;
};
std::string mask_spec_name(const MaskSpec& c, ffpa::Impl impl);
MaskResult run_mask_case(const MaskSpec& c, ffpa::Impl impl, uint64_t seed);

struct BenchOpts {
  const char* csv = nullptr;
  std::vector<int> dims;  // empty: every compiled head dim
  int n = 8192, h = 32, warmup = 3, iters = 10;
};

// The paths the bench times besides impl=mma (fp32 accumulation), each where the device
// runs it (device_check.cu's Extras decide; a dry run: where the build holds its code).
struct BenchPaths {
  bool tma = false;         // impl=tma
  bool f16acc = false;      // accum=fp16 on the fp16-accumulating paths below
  bool mma_f16acc = false;  // ... and on impl=mma (not on the sm_120 family)
  bool cute = false;        // impl=cute
  bool cute_tma = false;    // impl=cute_tma (and with accum=fp16)
  // The low-precision kernels (fp16 in and out; quantisation pass, workspace and kernel
  // timed together, as a caller's forward() costs). On sm_90 nvcc 13.0 lowers the FP8 mma
  // to fp16 HMMA, so there these rows time that lowering, not FP8 tensor cores.
  bool cute_fp8 = false;      // impl=cute_fp8
  bool cute_tma_fp8 = false;  // impl=cute_tma_fp8
  bool cute_tma_fp4 = false;  // impl=cute_tma_fp4 (the sm_120 family)
};

// Times forward() with CUDA events on fp16 B=1 x H x N x D inputs, causal and not, for
// each path: impl=mma, impl=tma (when `tma`), accum=fp16 on each of them (when
// `f16acc`), impl=cute (when `cute`), impl=cute_tma and it with accum=fp16 (when
// `cute_tma`), then the low-precision kernels (cute_fp8, cute_tma_fp8, cute_tma_fp4, each
// where planned), and writes `source,D,dtype,causal,B,H,N,kernel,ms,tflops,accum` rows to
// o.csv (kernel: the kernel that ran; tflops: the attention's 16-bit FLOP count over the
// time, for every path alike, so that rates compare; the header alone for a dry run,
// which makes no CUDA call). A path whose launch is refused is reported and skipped
// (exit 1 at the end). Returns the process exit code.
int run_bench(const BenchOpts& o, const ffpa::BuildInfo& info, const BenchPaths& paths, bool dry_run);

// The tuning sweep (device_check_sweep.cu): each variant of an FFPA_SWEEP=ON build timed
// next to its path's default on fp16 B=1 x H x N x D non-causal inputs; writes
// `source,D,path,config,default,ms,tflops,max_diff,status` rows to csv_path (a dry run
// makes no CUDA call: it prints the plan and writes it with status "planned"). Exit 1 when a configuration was refused or
// wrong, or the build has no variants (not a dry run).
int run_sweep(const BenchOpts& o, const char* csv_path, bool dry_run);

}  // namespace ffpa::check
