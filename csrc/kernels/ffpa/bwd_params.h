// Kernel parameters of the backward pass (the forward's FwdParams split, params.h).
// Host-compiler friendly (no CUDA types): the generated dispatch table, compiled by the
// host compiler, refers to launchers taking this struct.
#pragma once

#include <cstdint>

#include "ffpa/api.h"
#include "ffpa/mask.h"

namespace ffpa {

struct BwdParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;     // the forward's output
  const void* dout = nullptr;  // dO, the gradient of the output
  const float* lse = nullptr;  // the forward's fp32 row log-sum-exp (natural log), [B, Hq, Nq]
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  // fp32 workspace of 2 x B x Hq x Nq floats, filled by the preprocessing pass:
  // [0, B Hq Nq) Delta = rowsum(dO * O), then the LSE in the base-2 domain (lse * log2 e;
  // +inf where the row saw no key, so that exp2(s - lse2) is 0 there and still NaN for a
  // NaN score). Contiguous [B, Hq, Nq] each, whatever the strides of the inputs.
  float* workspace = nullptr;

  // Element strides of [B, H, N, D] (the D stride is 1 by contract).
  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;
  int64_t do_batch_stride = 0, do_head_stride = 0, do_row_stride = 0;
  int64_t dq_batch_stride = 0, dq_head_stride = 0, dq_row_stride = 0;
  int64_t dk_batch_stride = 0, dk_head_stride = 0, dk_row_stride = 0;
  int64_t dv_batch_stride = 0, dv_head_stride = 0, dv_row_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 0;

  int b = 0, hq = 0, hkv = 0, nq = 0, nkv = 0;
  int head_dim = 0;
  int h_ratio = 1;  // hq / hkv: query heads per kv head (dK / dV sum over the group)

  float scale = 0.f;       // softmax scale (natural-exp domain)
  float scale_log2 = 0.f;  // scale * log2(e)
  bool causal = false;
  // The diagonal's alignment (mask.diag_bottom_right: the forward's bottom-right causal,
  // else SDPA's is_causal, top-left), the sliding window, key padding and varlen
  // (ffpa/mask.h). Varlen: [1, H, total, D] views, nq / nkv the totals, b = 1; the main
  // kernels' grids cover mask.num_seqs sequences.
  MaskParams mask;
  // [B, Hq] flags of the non-finite pre-pass (ffpa/nonfinite.cuh over Q, K, V and dO):
  // non-zero where the head reads a NaN or an inf, so its gradients follow the math
  // backend's autograd under the causal mask too (ffpa/mask.h). nullptr: none ran.
  const int* nonfinite = nullptr;

  // The main kernels' feed: true where this build's TMA code runs on the device
  // (src/backward.cpp sets it from tma_runs_on_current_device(); bwd_launch_template.cuh says why
  // the choice is automatic), else the cp.async feed.
  bool tma = false;

  void* stream = nullptr;  // cudaStream_t
};

// The workspace's size in floats for a problem (BwdParams::workspace).
inline int64_t bwd_workspace_floats(int b, int hq, int nq) { return 2 * int64_t(b) * hq * nq; }

// One compiled (head dim, dtype) backward instance: the generated table lists these.
using BwdLauncher = Status (*)(const BwdParams&);

template <int kHeadDim, DType kDType>
Status run_bwd(const BwdParams& params);

struct BwdEntry {
  int head_dim;
  DType dtype;
  BwdLauncher launch;
};

// Defined in the generated compiled-set source (cmake/FfpaKernelInstances.cmake).
extern const BwdEntry kCompiledBwd[];
extern const int kNumCompiledBwd;

}  // namespace ffpa
