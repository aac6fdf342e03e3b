// Kernel parameters of the forward pass (flash-attention's Flash_fwd_params split).
// Host-compiler friendly (no CUDA types): the generated dispatch table, compiled by
// the host compiler, refers to launchers taking this struct.
#pragma once

#include <cstdint>

#include "ffpa/api.h"
#include "ffpa/lowp/layout.h"
#include "ffpa/mask.h"

namespace ffpa {

struct TmaMaps;  // ffpa/tma.cuh (CUDA types)

struct FwdParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // nullptr: no LSE output

  // Element strides of [B, H, N, D] (the D stride is 1 by contract).
  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 0;

  int b = 0, hq = 0, hkv = 0, nq = 0, nkv = 0;
  int head_dim = 0;  // D (the instance's compile-time head dim; the TMA maps need it on the host)
  int h_ratio = 1;  // hq / hkv: query heads per kv head (grouped-query attention)

  float scale = 0.f;       // softmax scale (natural-exp domain)
  float scale_log2 = 0.f;  // scale * log2(e): the mma kernel works with exp2
  bool causal = false;     // bottom-right aligned (see api.h)
  // Causal: query i sees keys j <= i + causal_offset: Nkv - Nq bottom-right (the default
  // alignment), 0 top-left (ForwardArgs::causal_top_left). Set by whoever fills these
  // parameters (src/params.cpp, the emulator's tests); the masked instance reads mask instead.
  int causal_offset = 0;
  // [B, Hq] flags of the non-finite pre-pass (ffpa/nonfinite.cuh): non-zero where the
  // head's Q, K or V holds a NaN or an inf, so its kernel follows SDPA's math backend
  // under the causal mask (the masked instance: and the window) too (ffpa/mask.h).
  // nullptr: no pre-pass ran (finite inputs, or no key hidden from a row).
  const int* nonfinite = nullptr;
  // The SIMT kernel computes only the heads whose flag is set (the low-precision paths'
  // second launch, src/forward.cpp): every other block returns at once.
  bool nonfinite_heads_only = false;
  // Sliding window, key padding, varlen (ffpa/mask.h; the mma and TMA feeds only). In
  // varlen the arrays are [1, H, total, D] views: nq / nkv are the totals, b is 1, and the
  // grid covers mask.num_seqs sequences of up to mask.max_seqlen_q rows.
  MaskParams mask;
  Accum accum = Accum::kFp32;  // kFp16: fp16 instances on the mma / tma paths only

  // The low-precision kernels (FP8 / NVFP4): the workspace holding the quantised operands
  // (ffpa/lowp/layout.h gives the offsets) and the output's element type (one kernel per
  // head dim writes fp16 or bf16; q, k and v are read only by the quantisation pass).
  const unsigned char* lowp_ws = nullptr;
  LowpLayout lowp;
  DType out_dtype = DType::kFp16;

  void* stream = nullptr;  // cudaStream_t
};

// One compiled (head dim, dtype) instance: the generated table lists these.
using FwdLauncher = Status (*)(const FwdParams&, Impl);

template <int kHeadDim, DType kDType>
Status run_fwd(const FwdParams& params, Impl impl);

struct KernelEntry {
  int head_dim;
  DType dtype;
  FwdLauncher launch;
  bool cute;  // the instance's CuTe files were generated and compiled (impl cute, cute_tma)
};

// One compiled head dim's low-precision kernels (FP8 fed by cp.async and by TMA, NVFP4):
// dtype-independent, so one entry per head dim; launch runs the quantisation pass and the
// kernel of a resolved low-precision impl on inputs of the given dtype.
using LowpLauncher = Status (*)(const FwdParams&, DType, Impl);
template <int kHeadDim>
Status run_fwd_lowp_d(const FwdParams& params, DType dtype, Impl impl);

struct LowpEntry {
  int head_dim;
  LowpLauncher launch;
};

// Dispatch to the low-precision entry of params.head_dim (src/forward.cpp).
Status run_fwd_lowp(const FwdParams& params, DType dtype, Impl impl);

// Defined in the generated compiled-set source (cmake/FfpaKernelInstances.cmake).
extern const KernelEntry kCompiledKernels[];
extern const int kNumCompiledKernels;
extern const LowpEntry kCompiledLowp[];
extern const int kNumCompiledLowp;
extern const char* const kCompiledArchs[];
extern const int kNumCompiledArchs;
extern const char* const kCutlassVersion;  // the CUTLASS headers the CuTe instances saw

}  // namespace ffpa
