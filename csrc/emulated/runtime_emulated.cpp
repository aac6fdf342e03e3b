// The runtime / driver seam (ffpa/runtime.h) of the emulated-device build: one device,
// whose memory is the host's (every non-null pointer is on it, so a Python caller's CPU
// tensors are device arrays), of the arch FFPA_EMULATED_ARCH names at run time (the archs
// of cmake/kernel-facts.json's emulated_device); stream-ordered calls run at once (every
// launch is synchronous);
// cuTensorMapEncodeTiled is the CPU emulator's model, which records the map the kernels'
// TMA model then reads (csrc/tests/emu/emu_grid.cpp). The grid runner behind the launch
// seam (ffpa/launch.cuh of this directory) is here too. A fault the emulator finds inside
// a kernel is that launch's error (DeviceError in Python), never the process's exit.
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "emu_cute.h"
#include "emu_state.h"
#include "ffpa/emulated_archs.h"
#include "ffpa/launch.cuh"
#include "ffpa/runtime.h"
#include "ffpa/tma.cuh"

namespace ffpa {
namespace {

// The emulated arch FFPA_EMULATED_ARCH names (its row of ffpa/emulated_archs.h, generated
// from cmake/kernel-facts.json), or sm 0 when it names none.
struct EmulatedArch {
  int sm = 0;  // 0: FFPA_EMULATED_ARCH names no emulated arch
  std::string token;
  int max_smem_bytes = 0;  // the largest dynamic shared memory a block may opt in to
};

EmulatedArch emulated_arch() {
  const char* env = std::getenv("FFPA_EMULATED_ARCH");
  const std::string token = env == nullptr || *env == '\0' ? emulated::kDefaultArch : env;
  for (const emulated::ArchRow& row : emulated::kArchs)
    if (token == row.name) return {row.sm, token, row.max_smem_bytes};
  return {0, token, 0};
}

std::mutex g_grid_mutex;  // the emulator's state is one grid at a time
void (*g_body)(const void*) = nullptr;
const void* g_ctx = nullptr;
void grid_body(const FwdParams&) { g_body(g_ctx); }

// Where a fault returns to: run_grid's frame, saved before the grid runs. The fault may be
// found on a fiber's stack (one per CUDA thread), which no C++ exception can leave, so the
// handler resumes that saved context; the next launch starts the emulator afresh (every
// block resets its fibers, barriers and copies).
ucontext_t g_fault_return;
std::string g_fault;
[[noreturn]] void on_fault(const char* what) {
  char block[64];
  std::snprintf(block, sizeof(block), " (block %u,%u,%u)", emu::g_block_idx.x, emu::g_block_idx.y,
                emu::g_block_idx.z);
  g_fault = std::string(what) + block;
  setcontext(&g_fault_return);
  std::abort();  // setcontext returns only when the context is unusable
}

// FFPA_EMULATED_INJECT_FAULT=short_read (tests only): the first array a launch names (q)
// is 16 bytes shorter as memory the kernel may read, so its last load of q faults: the
// fault path through the C API and the binding, proven on a real kernel.
const char* injected_fault(bool* short_read) {
  const char* env = std::getenv("FFPA_EMULATED_INJECT_FAULT");
  *short_read = env != nullptr && std::strcmp(env, "short_read") == 0;
  if (env == nullptr || *env == '\0' || *short_read) return nullptr;
  return env;
}

// The bytes an [B, H, N, D] array spans (16-bit elements, unit stride along D).
size_t span_bytes(const void* p, int64_t b, int64_t h, int64_t n, int64_t d, int64_t sb, int64_t sh, int64_t sr) {
  if (p == nullptr || b <= 0 || h <= 0 || n <= 0 || d <= 0) return 0;
  return static_cast<size_t>(((b - 1) * sb + (h - 1) * sh + (n - 1) * sr + d) * 2);
}

}  // namespace

namespace emulated {

void add_readable(std::vector<Readable>& out, const FwdParams& p) {
  out.push_back({p.q, span_bytes(p.q, p.b, p.hq, p.nq, p.head_dim, p.q_batch_stride, p.q_head_stride, p.q_row_stride)});
  out.push_back({p.k, span_bytes(p.k, p.b, p.hkv, p.nkv, p.head_dim, p.k_batch_stride, p.k_head_stride, p.k_row_stride)});
  out.push_back({p.v, span_bytes(p.v, p.b, p.hkv, p.nkv, p.head_dim, p.v_batch_stride, p.v_head_stride, p.v_row_stride)});
}

void add_readable(std::vector<Readable>& out, const BwdParams& p) {
  out.push_back({p.q, span_bytes(p.q, p.b, p.hq, p.nq, p.head_dim, p.q_batch_stride, p.q_head_stride, p.q_row_stride)});
  out.push_back({p.k, span_bytes(p.k, p.b, p.hkv, p.nkv, p.head_dim, p.k_batch_stride, p.k_head_stride, p.k_row_stride)});
  out.push_back({p.v, span_bytes(p.v, p.b, p.hkv, p.nkv, p.head_dim, p.v_batch_stride, p.v_head_stride, p.v_row_stride)});
  out.push_back({p.o, span_bytes(p.o, p.b, p.hq, p.nq, p.head_dim, p.o_batch_stride, p.o_head_stride, p.o_row_stride)});
  out.push_back(
      {p.dout, span_bytes(p.dout, p.b, p.hq, p.nq, p.head_dim, p.do_batch_stride, p.do_head_stride, p.do_row_stride)});
}

Status run_grid(void (*body)(const void*), const void* ctx, dim3 grid, int threads, int smem_bytes, const char* what,
                const std::vector<Readable>& readable) {
  const EmulatedArch arch = emulated_arch();
  if (threads <= 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535)
    return {ErrorKind::kDevice, std::string(what) + " failed: cudaErrorInvalidConfiguration (grid " +
                                    std::to_string(grid.x) + "x" + std::to_string(grid.y) + "x" +
                                    std::to_string(grid.z) + ", " + std::to_string(threads) + " threads)"};
  if (smem_bytes > arch.max_smem_bytes)
    return {ErrorKind::kDevice, std::string(what) + " failed: cudaErrorInvalidValue (" + std::to_string(smem_bytes) +
                                    " bytes of dynamic shared memory; the emulated sm_" + std::to_string(arch.sm) +
                                    " allows " + std::to_string(arch.max_smem_bytes) + ")"};
  bool short_read = false;
  if (const char* bad = injected_fault(&short_read))
    return {ErrorKind::kDevice, std::string("FFPA_EMULATED_INJECT_FAULT='") + bad +
                                    "' is not a fault the emulated device injects: set it to short_read or unset it"};
  std::lock_guard<std::mutex> lock(g_grid_mutex);
  emu::g_ranges.clear();
  for (const Readable& r : readable)
    if (r.bytes > 0) emu::g_ranges.push_back({static_cast<const unsigned char*>(r.data), r.bytes});
  if (short_read && !emu::g_ranges.empty()) emu::g_ranges.front().n -= std::min<size_t>(16, emu::g_ranges.front().n);
  g_body = body;
  g_ctx = ctx;
  g_fault.clear();
  emu::g_fault_handler = &on_fault;
  getcontext(&g_fault_return);
  // A fault resumes here with g_fault set: the grid is abandoned, not run again.
  if (g_fault.empty())
    emu::launch(&grid_body, FwdParams{}, emu::Dim3{grid.x, grid.y, grid.z}, threads, static_cast<size_t>(smem_bytes));
  emu::g_fault_handler = nullptr;
  g_body = nullptr;
  g_ctx = nullptr;
  emu::g_ranges.clear();
  if (!g_fault.empty())
    return {ErrorKind::kDevice, std::string(what) + " failed: the emulated device faulted: " + g_fault +
                                    " (a bug in that kernel that the emulator caught: report it with this message)"};
  return {};
}

}  // namespace emulated

namespace runtime {

int device_count() noexcept { return 1; }

Status pointer_device(const void*, const char*, int* device) {
  const EmulatedArch arch = emulated_arch();
  if (arch.sm == 0)
    return {ErrorKind::kDevice, "FFPA_EMULATED_ARCH='" + arch.token +
                                    "' is not an emulated arch: set it to " + emulated::kArchWords +
                                    " (or unset it: " + emulated::kDefaultArch + ")"};
  *device = 0;  // the host's memory is the emulated device's
  return {};
}

int current_device() noexcept { return 0; }
bool set_device(int device) noexcept { return device == 0; }
int current_device_cc() noexcept { return emulated_arch().sm; }
// The emulated library holds code for each emulated arch (its compiled set is their
// targets), so the device loads its own.
int device_binary_version() noexcept { return emulated_arch().sm; }

Status malloc_async(void** p, size_t bytes, void*, const char* what) {
  // 256-byte aligned, as cudaMallocAsync's pool gives (the low-precision workspace needs it).
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (*p == nullptr) return {ErrorKind::kDevice, std::string(what) + " failed: out of host memory"};
  return {};
}
Status free_async(void* p, void*, const char*) {
  std::free(p);
  return {};
}
Status memset_async(void* p, int value, size_t bytes, void*, const char*) {
  std::memset(p, value, bytes);
  return {};
}
Status memset_2d_async(void* p, size_t pitch, int value, size_t width, size_t height, void*, const char*) {
  for (size_t r = 0; r < height; ++r) std::memset(static_cast<char*>(p) + r * pitch, value, width);
  return {};
}

Status encode_tiled(CUtensorMap* map, const char* name, const void* data, DType, const TmaGeometry& g) {
  if (const char* why = emu::tensor_map_refusal(data, g))
    return {ErrorKind::kLayout, std::string("cuTensorMapEncodeTiled refused ") + name + " (" + why + ", byte strides " +
                                    std::to_string(g.strides[0]) + "/" + std::to_string(g.strides[1]) + "/" +
                                    std::to_string(g.strides[2]) + "): use impl='mma' for this layout, or call .contiguous()"};
  *map = emu::encode_tiled(data, g);
  return {};
}

std::string runtime_version() { return "emulated"; }

}  // namespace runtime
}  // namespace ffpa
