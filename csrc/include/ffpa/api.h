// The small C++ API of libffpa_kernels.so: the only symbols the library exports
// (everything else is hidden). Used by the Python binding (ffpa_attn._C) and by the
// device-check runner. Deliberately free of CUDA headers so that callers compile
// with a plain host compiler and never need the CUDA include path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ffpa/impls.h"  // generated from cmake/kernel-facts.json

#if defined(FFPA_BUILDING_LIBRARY) || !defined(_WIN32)
#define FFPA_API __attribute__((visibility("default")))
#else
#define FFPA_API
#endif

namespace ffpa {

enum class DType : int { kFp16 = 0, kBf16 = 1 };
// kMma: the split-D mma.sync kernel fed by cp.async (every supported arch: ffpa::kMinSm
// of ffpa/arch_rules.h, cmake/kernel-facts.json's arch_rules.min_sm). kTma: the same split-D
// kernel fed by the Tensor Memory Accelerator (cp.async.bulk.tensor + mbarrier; code
// exists only for the archs >= 90 of the build, see BuildInfo::tma_archs). kSimt:
// the plain fallback. kCute: the CuTe kernel (CUTLASS's CuTe layouts, tiled copies
// and MMA atoms; Q resident in shared memory, persist-D up to D = 256, split-D above)
// fed by cp.async, every arch. kCuteTma: the same CuTe kernel fed by TMA, archs >= 90.
// kAuto follows resolve_impl()'s rule (auto_rule() says it in words; docs/perf.md has
// the measurements it rests on). The SIMT kernel is several times slower, so the
// choice is reported (ForwardArgs::impl_used) and the Python layer warns when auto
// fell back to it.
// Low-precision paths (fp16 / bf16 in, the same dtype out; quantised on the GPU by a pass
// before the kernel, ffpa/lowp/layout.h; accuracy stated in docs/install.md):
// kCuteFp8: the CuTe kernel with Q K^T and P V on FP8 (e4m3) tensor cores, fed by
// cp.async (archs >= 89 below the sm_120 family); kCuteTmaFp8: the same fed by TMA
// (archs >= 90); kFp8: whichever of the two the current device runs (resolve_impl()).
// kCuteTmaFp4: Q K^T on NVFP4 (e2m1 with ue4m3 scales per 16 elements, the block-scaled
// mma of the sm_120 family), P V on FP8, TMA-fed; kFp4: the same (the one NVFP4 kernel).
// kAuto never picks a low-precision path: they trade accuracy for speed.
// enum class Impl (kAuto = 0, kMma, kSimt, ...), kAllImpls (every Impl in enum order: the
// one list that spellings are parsed from) and kImplFacts (each one's spelling and facts)
// are generated from cmake/kernel-facts.json into ffpa/impls.h, so an enumerator and its
// spelling cannot drift apart.
// An impl's row of the facts table; nullptr for a value outside the enum.
constexpr const ImplFacts* impl_facts(Impl impl) {
  const int i = static_cast<int>(impl);
  return i >= 0 && i < static_cast<int>(sizeof(kImplFacts) / sizeof(kImplFacts[0])) ? &kImplFacts[i] : nullptr;
}
// The low-precision impls (FP8 and NVFP4: a precision of their own), and NVFP4's among them.
constexpr bool is_lowp_impl(Impl impl) { return impl_facts(impl) != nullptr && impl_facts(impl)->precision != nullptr; }
constexpr bool is_fp4_impl(Impl impl) { return impl_facts(impl) != nullptr && impl_facts(impl)->needs_nvfp4; }

// Accumulator precision of the tensor-core paths (kMma, kTma, kCute, kCuteTma). kFp16: fp16 inputs
// only, both S = Q K^T and P V accumulate in fp16 (mma.sync ... f16.f16.f16.f16); the
// softmax and the running O stay fp32. Faster on GPUs whose fp16-accumulate tensor
// rate is twice the fp32 one (consumer parts), at a stated precision cost.
enum class Accum : int { kFp32 = 0, kFp16 = 1 };

// One category per exception class of ffpa_attn.errors; the binding maps them 1:1.
enum class ErrorKind : int {
  kOk = 0,
  kHeadDim,  // UnsupportedHeadDimError
  kDType,    // UnsupportedDTypeError
  kLayout,   // UnsupportedLayoutError
  kShape,    // ShapeError
  kDevice,   // DeviceError (also launch failures: they are about the device)
  kImpl,     // UnsupportedImplError
};

struct Status {
  ErrorKind kind = ErrorKind::kOk;
  std::string message;
  bool ok() const { return kind == ErrorKind::kOk; }
};

// A [B, H, N, D] array. Strides are in elements; stride[3] must be 1.
struct TensorDesc {
  void* data = nullptr;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 1};
  DType dtype = DType::kFp16;
  int device = -1;  // CUDA ordinal when the producer said (DLPack), -1: ask the driver
};

// The optional fp32 [B, Hq, Nq] row log-sum-exp (natural log). Strides in elements.
struct LseDesc {
  float* data = nullptr;  // nullptr: not requested
  int64_t shape[3] = {0, 0, 0};
  int64_t stride[3] = {0, 0, 1};
  int device = -1;
};

// An int32 CUDA array of one dimension (seqused_k, cu_seqlens_q / _k). Stride in elements.
struct IntArrayDesc {
  const int32_t* data = nullptr;  // nullptr: not given
  int64_t size = 0;
  int64_t stride = 1;
  int device = -1;
};

// The masks of the mma, TMA and 16-bit CuTe forwards (impl mma, tma, cute, cute_tma) and of
// the backward (kernels/ffpa/mask.h has the rule; docs/perf.md "Masks in the kernels"):
// query i of a sequence sees key j iff j < its keys read and
// diag(i) - window_left <= j <= diag(i) + window_right, diag(i) = i + (Nk - Nq) with the
// bottom-right alignment (the forward's causal, the backward's causal without
// causal_top_left, and every varlen call, per sequence) and i otherwise; causal is
// window_right = 0. The SIMT and low-precision kernels refuse them (validate_forward).
struct MaskArgs {
  int64_t window_left = -1;   // -1: unbounded; else >= 0 keys before the diagonal
  int64_t window_right = -1;  // -1: unbounded; else >= 0 keys after it
  // int32 [B] (varlen: [S]): keys at or past seqused_k[b] are padding, never read (values
  // outside [0, the sequence's keys] are clamped to it).
  IntArrayDesc seqused_k;
  // Varlen: int32 [S + 1] prefix sums of the packed sequences' rows (both or neither); q,
  // k, v, out (and the backward's arrays) are then [1, H, total, D] views of packed
  // [total, H, D] tensors, lse [1, Hq, total_q]. max_seqlen_q / _k must be at least every
  // sequence's length (the grid's extent; rows beyond it are not computed), as flash-attn's
  // varlen API requires. Rows of the arrays outside [cu[0], cu[S]) are not written.
  IntArrayDesc cu_seqlens_q, cu_seqlens_k;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  bool varlen() const { return cu_seqlens_q.data != nullptr || cu_seqlens_k.data != nullptr; }
  bool active() const {
    return window_left != -1 || window_right != -1 || seqused_k.data != nullptr || varlen();
  }
};

struct ForwardArgs {
  TensorDesc q, k, v, out;
  LseDesc lse;
  MaskArgs mask;
  bool causal = false;  // bottom-right aligned: query i sees keys j <= i + (Nkv - Nq)
  // causal (and a window): aligned top-left instead, query i sees keys j <= i (SDPA's
  // is_causal); every Nkv key is read, so a NaN or inf the mask hides reaches the output
  // as in SDPA's math backend. Varlen calls are bottom-right per sequence regardless.
  bool causal_top_left = false;
  float scale = 0.f;    // softmax scale, already resolved by the caller (1/sqrt(D) default)
  Impl impl = Impl::kAuto;
  Accum accum = Accum::kFp32;
  void* stream = nullptr;  // cudaStream_t; nullptr is the legacy default stream
  // When non-null, forward() stores the kernel it launched (kAuto when nothing was
  // launched, e.g. an empty problem).
  Impl* impl_used = nullptr;
};

// The kernel forward() would launch for these arguments on the current device:
// args.impl unless kAuto; then kSimt when an array lacks the 16-byte alignment
// cp.async/TMA need (fp32 accumulation only), else kTma on the sm_120 family when
// tma_runs_on_current_device(), else kMma. The CuTe paths are never auto's pick until
// a GPU measurement says they are faster (docs/perf.md, "impl='auto'").
FFPA_API Impl resolve_impl(const ForwardArgs& args);

// resolve_impl()'s rule in words (build_info() of the binding reports it), next to
// the code, so that the two cannot drift apart.
FFPA_API const char* auto_rule() noexcept;

// True when this library holds TMA code the current device loads (its selected
// binary is for sm_90 or newer). False without a device or a driver.
FFPA_API bool tma_runs_on_current_device() noexcept;

// True when impl=kMma with Accum::kFp16 has code for the current device: every
// binary below the sm_120 family (there fp16 accumulation runs on the TMA feed only;
// the cp.async form does not fit in 255 registers at D = 256).
FFPA_API bool mma_f16_acc_runs_on_current_device() noexcept;
// True when impl=kCute (the cp.async-fed CuTe kernel) has code for the current device:
// every binary below the sm_120 family (there the CuTe kernel is fed by TMA only,
// impl=kCuteTma; ffpa/cute/fwd_kernel.cuh says why).
FFPA_API bool cute_runs_on_current_device() noexcept;
// True when this library holds FP8 code the current device loads: impl kCuteFp8 below
// the sm_120 family (sm_89+), kCuteTmaFp8 on sm_90+ (ffpa/arch_rules.h).
FFPA_API bool fp8_runs_on_current_device(Impl impl) noexcept;
// True when the NVFP4 kernel (kCuteTmaFp4) has code for the current device: a binary
// of the sm_120 family compiled for its family-specific target (120f or 120a).
FFPA_API bool fp4_runs_on_current_device() noexcept;

// "auto", "mma", "simt", "tma", "cute", "cute_tma", "cute_fp8", "cute_tma_fp8", "fp8",
// "cute_tma_fp4", "fp4" (upstream ffpa-attn's spellings where it has them).
FFPA_API const char* impl_name(Impl impl) noexcept;
FFPA_API const char* accum_name(Accum accum) noexcept;  // "fp32", "fp16"

// Argument checks that touch no CUDA API (shapes, dtypes, strides, head dim): callers
// can rely on these errors on machines without a GPU.
FFPA_API Status validate_forward(const ForwardArgs& args);

// validate_forward, then device checks (a device exists, every pointer is device
// memory of one device), then the launch on args.stream. Asynchronous.
FFPA_API Status forward(const ForwardArgs& args);

// Number of CUDA devices; 0 (never an error) without a driver or a GPU.
FFPA_API int device_count() noexcept;

struct BuildInfo {
  std::vector<int> head_dims;
  std::vector<std::string> dtypes;  // "fp16", "bf16"
  std::vector<std::string> archs;   // FFPA_CUDA_ARCHS tokens, e.g. "89", "120f"
  std::vector<std::string> impls;   // the impl spellings with code: "mma", "simt", "cute", "tma",
                                    // "cute_tma", "cute_fp8", "cute_tma_fp8", "fp8", "cute_tma_fp4", "fp4"
  std::vector<std::string> tma_archs;  // the archs tokens >= 90 (TMA code), e.g. "120f"
  bool fwd = false;
  bool tma = false;      // the TMA-fed kernels were compiled for at least one arch
  bool f16_acc = false;  // Accum::kFp16 is available (fp16 instances exist)
  bool cute = false;     // the CuTe kernels were compiled (every instance has them)
  bool cute_tma = false;  // cute and tma: the TMA-fed CuTe kernels have code
  bool fp8 = false;       // an FP8 kernel has code for at least one arch (fp8_archs)
  std::vector<std::string> fp8_archs;  // the archs tokens >= 89, e.g. "89", "120f"
  bool fp4 = false;       // the NVFP4 kernel has code (fp4_archs)
  std::vector<std::string> fp4_archs;  // the family-specific sm_120 tokens, e.g. "120f"
  std::string cutlass_version;  // the CUTLASS headers the CuTe kernels were built with
  std::string cuda_runtime;  // version of the statically linked CUDA runtime, "13.0"
  // The masks compiled into the mma / TMA forwards and the backward ("window", "seqused_k",
  // "varlen": cmake/kernel-facts.json's "masks"); empty without forward kernels.
  std::vector<std::string> masks;
};

// What this library was compiled with (from the generated compiled-set table).
FFPA_API BuildInfo build_info();

FFPA_API const char* dtype_name(DType dtype) noexcept;

// ---- the backward -----------------------------------------------------------------------
// dQ, dK, dV of softmax(scale Q K^T) V from the forward's out and lse (the split-D
// backward kernels, ffpa/bwd_kernel_mma.cuh; fp16 / bf16 in, fp32 accumulation, gradients
// in the input dtype). GQA: dK / dV are summed over each kv head's query group. No
// atomics: the gradients are bit-identical run to run. A row that saw no key gets zero
// gradients; NaN propagates as in torch's math backend given the same LSE.
struct BackwardArgs {
  TensorDesc q, k, v, out, dout;  // out: the forward's output; dout: its gradient
  TensorDesc dq, dk, dv;          // written (shapes of q, k, v)
  LseDesc lse;                    // the forward's fp32 [B, Hq, Nq] LSE (required)
  MaskArgs mask;                  // the forward's masks (varlen: causal is bottom-right)
  bool causal = false;
  bool causal_top_left = false;  // causal: query i sees keys j <= i (SDPA's is_causal)
                                 // instead of the forward's bottom-right j <= i + Nkv - Nq
  float scale = 0.f;
  // fp32 scratch of backward_workspace_floats() floats on the arrays' device (the caller
  // allocates it, so a captured CUDA graph owns no hidden allocation).
  float* workspace = nullptr;
  void* stream = nullptr;
};

FFPA_API int64_t backward_workspace_floats(const BackwardArgs& args) noexcept;

// Argument checks that touch no CUDA API (shapes, dtypes, strides, alignment, head dim).
FFPA_API Status validate_backward(const BackwardArgs& args);

// validate_backward, device checks, then the launches on args.stream. Asynchronous.
FFPA_API Status backward(const BackwardArgs& args);

// The head dims / dtypes with backward kernels in this build ("<D>:<dtype>", e.g. "128:fp16").
FFPA_API std::vector<std::string> backward_instances();

}  // namespace ffpa
