// What the C API's files share (validate.cpp, device.cpp, params.cpp, forward.cpp,
// backward.cpp, nonfinite_prepass.cu): the compiled set's lookups, the device rules'
// helpers, the kernels' parameters built from the C API's arguments, and the non-finite
// pre-pass. Host-compiler friendly (no CUDA runtime type).
#pragma once

#include <cstdint>
#include <string>

#include "ffpa/api.h"
#include "ffpa/bwd_params.h"
#include "ffpa/nonfinite.h"
#include "ffpa/params.h"

namespace ffpa::detail {

constexpr int kMaxGridYZ = 65535;  // CUDA's grid limit in y and z

// ---- the compiled set and the arguments' shapes (validate.cpp) ----
std::string shape_str(const int64_t* shape, int n);
const KernelEntry* find_kernel(int head_dim, DType dtype);
const BwdEntry* find_bwd(int head_dim, DType dtype);
// cp.async and TMA read 16-byte vectors of every row: base pointer and the batch, head
// and row strides 16-byte (8-element) aligned.
bool mma_aligned(const TensorDesc& t);
std::string compiled_archs_str();
bool is_tma_arch(const char* token);
bool is_fp4_arch(const char* token);
bool has_tma_arch();
bool has_lowp();
bool is_tma_impl(Impl impl);

// ---- the device (device.cpp) ----
// The device of every non-null array of `ptrs` (names alongside), one device for all; the
// masks' int32 arrays on it too. *device stays -1 when every array is empty.
Status arrays_device(const void* const* ptrs, const char* const* names, int n, const MaskArgs& mask, int* device);
int current_device_cc();
// Makes `device` current for its scope (the caller's current device is restored).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
  bool restore_ = false;
};

// ---- the kernels' parameters (params.cpp): built once, from validated arguments ----
MaskParams mask_params(const MaskArgs& m, bool bottom_right);
FwdParams make_fwd_params(const ForwardArgs& a);
BwdParams make_bwd_params(const BackwardArgs& a);

// ---- the non-finite pre-pass of one call (nonfinite_prepass.cu, ffpa/nonfinite.cuh) ----
// [B, Hq] int flags in a stream-ordered allocation (graph capture records it as a graph
// allocation, like the low-precision workspace), zeroed, then set by the scan of the given
// operands. The caller launches its kernels with flags() and then release()s them on the
// same stream.
class NonfiniteFlags {
 public:
  // One operand to scan: a TensorDesc of q, k, v or dout; used: int32 [B] rows to scan per
  // batch entry (NonfiniteScan::rows_used), nullptr: all.
  void add(const TensorDesc& t, const int* used = nullptr) { scan_.add(t.data, t.shape, t.stride, used); }
  Status run(int b, int hq, int h_ratio, int d, DType dtype, void* stream);
  const int* flags() const { return scan_.flags; }
  // Frees the flags after the kernels that read them (stream order); st: their status.
  Status release(Status st);

 private:
  NonfiniteScan scan_;
  void* stream_ = nullptr;
};

}  // namespace ffpa::detail
