// The non-finite pre-pass's launch (ffpa/nonfinite.cuh): the flags' memory through the
// runtime seam (ffpa/runtime.h), the scan through the launch seam (ffpa/launch.cuh).
#include <cstddef>

#include "ffpa/launch.cuh"
#include "ffpa/nonfinite.cuh"
#include "ffpa/runtime.h"
#include "internal.h"

namespace ffpa::detail {

Status NonfiniteFlags::run(int b, int hq, int h_ratio, int d, DType dtype, void* stream) {
  stream_ = stream;
  scan_.hq = hq, scan_.h_ratio = h_ratio, scan_.d = d;
  scan_.exp_mask = dtype == DType::kBf16 ? 0x7f80 : 0x7c00;
  const size_t bytes = sizeof(int) * static_cast<size_t>(b) * hq;
  void* mem = nullptr;
  Status st = runtime::malloc_async(&mem, bytes, stream, "non-finite flags (cudaMallocAsync)");
  if (!st.ok()) return st;
  scan_.flags = static_cast<int*>(mem);
  st = runtime::memset_async(mem, 0, bytes, stream, "non-finite flags (cudaMemsetAsync)");
  if (!st.ok() || scan_.max_rows == 0 || d == 0) return st;
  return launch_kernel(&ffpa_nonfinite_kernel, dim3(scan_.grid_x(), scan_.total_heads, b), NonfiniteScan::kNThreads,
                       0, stream, "non-finite pre-pass launch", scan_);
}

Status NonfiniteFlags::release(Status st) {
  if (scan_.flags == nullptr) return st;
  const Status freed = runtime::free_async(scan_.flags, stream_, "non-finite flags release (cudaFreeAsync)");
  scan_.flags = nullptr;
  return st.ok() ? freed : st;
}

}  // namespace ffpa::detail
