// The launch seam of the emulated-device build (found before csrc/kernels/ffpa/launch.cuh
// through the include order, csrc/emulated/CMakeLists.txt): the same launch_kernel, which
// runs the grid on the CPU emulator (csrc/tests/emu/emu_grid.cpp: one fiber per CUDA
// thread, PTX modelled) with the arrays the kernel's parameters name as the memory its
// cp.async and TMA loads may read. Synchronous: every launch is complete when it returns,
// which keeps the stream order of the real device trivially.
#pragma once

#include <cuda_fp16.h>  // dim3 (the toolkit's vector_types.h, host side)

#include <cstddef>
#include <type_traits>
#include <vector>

#include "ffpa/api.h"
#include "ffpa/bwd_params.h"
#include "ffpa/params.h"

namespace ffpa::emulated {

// A span of memory the running kernel may load from with cp.async or TMA.
struct Readable {
  const void* data;
  size_t bytes;
};
// The arrays a kernel argument names (q, k, v, and the backward's out and dout); any other
// argument (tensor maps, the pre-pass's scan, scalars) names none.
void add_readable(std::vector<Readable>& out, const FwdParams& p);
void add_readable(std::vector<Readable>& out, const BwdParams& p);
template <typename T>
void add_readable(std::vector<Readable>&, const T&) {}

// Runs body(ctx) once per thread of every block of grid (csrc/emulated/runtime_emulated.cpp):
// the emulated arch's launch limits (threads per block, dynamic shared memory) are checked
// first, as the device would refuse the launch.
Status run_grid(void (*body)(const void*), const void* ctx, dim3 grid, int threads, int smem_bytes, const char* what,
                const std::vector<Readable>& readable);

}  // namespace ffpa::emulated

namespace ffpa {

template <typename... KernelArgs, typename... Args>
Status launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, int threads, int smem_bytes, void* /*stream*/,
                     const char* what, const Args&... args) {
  static_assert(sizeof...(KernelArgs) == sizeof...(Args), "one argument per kernel parameter");
  static_assert((std::is_same_v<std::remove_cv_t<std::remove_reference_t<KernelArgs>>, Args> && ...),
                "each argument of its kernel parameter's type");
  std::vector<emulated::Readable> readable;
  (emulated::add_readable(readable, args), ...);
  const auto call = [&] { kernel(args...); };
  using Call = decltype(call);
  return emulated::run_grid([](const void* c) { (*static_cast<const Call*>(c))(); }, &call, grid, threads, smem_bytes,
                            what, readable);
}

}  // namespace ffpa
