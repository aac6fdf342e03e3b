// The small C++ API of libffpa_kernels.so: the only symbols the library exports
// (everything else is hidden). Used by the Python binding (ffpa_attn._C) and by the
// device-check runner. Deliberately free of CUDA headers so that callers compile
// with a plain host compiler and never need the CUDA include path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#if defined(FFPA_BUILDING_LIBRARY) || !defined(_WIN32)
#define FFPA_API __attribute__((visibility("default")))
#else
#define FFPA_API
#endif

namespace ffpa {

enum class DType : int { kFp16 = 0, kBf16 = 1 };
// kAuto picks kMma, and falls back to kSimt when the arrays are not 16-byte aligned
// (cp.async needs 16-byte aligned rows); kMma on such arrays is a layout error. The
// SIMT kernel is several times slower, so the choice is reported (ForwardArgs::
// impl_used) and the Python layer warns when auto fell back.
enum class Impl : int { kAuto = 0, kMma = 1, kSimt = 2 };

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

struct ForwardArgs {
  TensorDesc q, k, v, out;
  LseDesc lse;
  bool causal = false;  // bottom-right aligned: query i sees keys j <= i + (Nkv - Nq)
  float scale = 0.f;    // softmax scale, already resolved by the caller (1/sqrt(D) default)
  Impl impl = Impl::kAuto;
  void* stream = nullptr;  // cudaStream_t; nullptr is the legacy default stream
  // When non-null, forward() stores the kernel it launched (kMma or kSimt; kAuto when
  // nothing was launched, e.g. an empty problem).
  Impl* impl_used = nullptr;
};

// The kernel forward() would launch for these arguments: args.impl unless kAuto,
// then kMma when every array keeps the 16-byte alignment cp.async needs, else kSimt.
FFPA_API Impl resolve_impl(const ForwardArgs& args);

FFPA_API const char* impl_name(Impl impl) noexcept;

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
  std::vector<std::string> impls;   // "mma", "simt"
  bool fwd = false;
  bool tma = false;
  bool cute_tma = false;
  std::string cuda_runtime;  // version of the statically linked CUDA runtime, "13.0"
};

// What this library was compiled with (from the generated compiled-set table).
FFPA_API BuildInfo build_info();

FFPA_API const char* dtype_name(DType dtype) noexcept;

}  // namespace ffpa
