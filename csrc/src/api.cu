// The exported C++ API: argument validation (no CUDA calls), device checks, dispatch
// through the generated compiled-set table.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver is reached through the runtime

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <mutex>
#include <string>

#include "ffpa/api.h"
#include "ffpa/arch_rules.h"
#include "ffpa/bwd_params.h"
#include "ffpa/nonfinite.cuh"
#include "ffpa/params.h"
#include "ffpa/tma.cuh"
#include "ffpa/tma_geometry.h"

namespace ffpa {

Status launch_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return {};
  std::string msg = std::string(what) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
      msg += "; this library has no code for the device's sm_" + std::to_string(prop.major * 10 + prop.minor) +
             " (compiled archs:";
      for (int i = 0; i < kNumCompiledArchs; ++i) msg += std::string(" ") + kCompiledArchs[i];
      msg += "): rebuild with -DFFPA_CUDA_ARCHS=" + std::to_string(prop.major * 10 + prop.minor);
    }
  }
  return {ErrorKind::kDevice, msg};
}

const char* impl_name(Impl impl) noexcept {
  const ImplFacts* facts = impl_facts(impl);
  return facts != nullptr ? facts->name : "unknown";
}

const char* accum_name(Accum accum) noexcept {
  switch (accum) {
    case Accum::kFp32:
      return "fp32";
    case Accum::kFp16:
      return "fp16";
  }
  return "unknown";
}

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFp16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
  }
  return "unknown";
}

namespace {

std::string shape_str(const int64_t* shape, int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

std::string compiled_head_dims_str() {
  std::vector<int> dims;
  for (int i = 0; i < kNumCompiledKernels; ++i) dims.push_back(kCompiledKernels[i].head_dim);
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const KernelEntry* find_kernel(int head_dim, DType dtype) {
  for (int i = 0; i < kNumCompiledKernels; ++i)
    if (kCompiledKernels[i].head_dim == head_dim && kCompiledKernels[i].dtype == dtype) return &kCompiledKernels[i];
  return nullptr;
}

// cp.async copies 16-byte vectors of every row: base pointers and the batch, head
// and row strides must keep 16-byte (8-element) alignment.
bool mma_aligned(const TensorDesc& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] % 8 != 0) return false;
  return true;
}

constexpr int kMaxGridYZ = 65535;

// FFPA_CUDA_ARCHS tokens by what their code holds (ffpa/arch_rules.h): the kernels have
// real bodies there and trap stubs elsewhere.
bool is_tma_arch(const char* token) { return sm_has_tma(arch_token_sm(token)); }
bool is_fp8_arch(const char* token) { return sm_has_fp8(arch_token_sm(token)); }
bool is_fp4_arch(const char* token) { return sm_has_nvfp4(arch_token_sm(token), arch_token_specific(token)); }

std::string compiled_archs_str() {
  std::string s;
  for (int i = 0; i < kNumCompiledArchs; ++i) s += std::string(i ? " " : "") + kCompiledArchs[i];
  return s.empty() ? "none" : s;
}

bool has_arch(bool (*pred)(const char*)) {
  for (int i = 0; i < kNumCompiledArchs; ++i)
    if (pred(kCompiledArchs[i])) return true;
  return false;
}
bool has_tma_arch() { return has_arch(is_tma_arch); }

// Every compiled instance carries its CuTe files (cmake/FfpaKernelInstances.cmake).
bool has_cute() {
  if (kNumCompiledKernels == 0) return false;
  for (int i = 0; i < kNumCompiledKernels; ++i)
    if (!kCompiledKernels[i].cute) return false;
  return true;
}

// Every compiled head dim has its low-precision kernels (cmake/FfpaKernelInstances.cmake).
bool has_lowp() { return kNumCompiledLowp > 0; }

bool is_tma_impl(Impl impl) { return impl == Impl::kTma || impl == Impl::kCuteTma; }
// The kernels fed by cp.async or TMA: 16-byte aligned rows.
bool is_tensor_core_impl(Impl impl) {
  return impl == Impl::kMma || impl == Impl::kTma || impl == Impl::kCute || impl == Impl::kCuteTma ||
         is_lowp_impl(impl);
}
bool is_known_impl(Impl impl) {
  for (Impl i : kAllImpls)
    if (i == impl) return true;
  return false;
}

bool mask_compiled(const char* kind) {
  for (const char* const* m = kCompiledMasks; *m != nullptr; ++m)
    if (std::strcmp(*m, kind) == 0) return true;
  return false;
}

// The masks' checks (MaskArgs), shared by the forward and the backward: extents, the
// int32 arrays' sizes and strides, and the varlen layout. b / nq / nkv: the arrays'.
Status validate_masks(const MaskArgs& m, int64_t b, int64_t nq, int64_t nkv) {
  for (const auto& [value, name] : {std::pair{m.window_left, "window_left"}, std::pair{m.window_right, "window_right"}})
    if (value < -1 || value > INT32_MAX)
      return {ErrorKind::kShape, std::string(name) + " = " + std::to_string(value) +
                                     ": pass -1 (unbounded) or a key count in [0, 2^31)"};
  const bool window = m.window_left != -1 || m.window_right != -1;
  if (window && !mask_compiled("window"))
    return {ErrorKind::kImpl, "this build's kernels take no sliding window (build_info()['masks']); drop window_size"};
  if (m.seqused_k.data != nullptr && !mask_compiled("seqused_k"))
    return {ErrorKind::kImpl, "this build's kernels take no seqused_k (build_info()['masks']); drop seqused_k"};
  if (m.varlen() && !mask_compiled("varlen"))
    return {ErrorKind::kImpl, "this build's kernels take no varlen layout (build_info()['masks']); pad the batch"};
  if ((m.cu_seqlens_q.data == nullptr) != (m.cu_seqlens_k.data == nullptr))
    return {ErrorKind::kShape, "varlen needs both cu_seqlens_q and cu_seqlens_k (int32 [S + 1] prefix sums); pass both"};
  const IntArrayDesc* arrs[3] = {&m.seqused_k, &m.cu_seqlens_q, &m.cu_seqlens_k};
  const char* names[3] = {"seqused_k", "cu_seqlens_q", "cu_seqlens_k"};
  for (int i = 0; i < 3; ++i)
    if (arrs[i]->data != nullptr && arrs[i]->size > 1 && arrs[i]->stride != 1)
      return {ErrorKind::kLayout, std::string(names[i]) + " must be contiguous (stride " +
                                      std::to_string(arrs[i]->stride) + "); call .contiguous() first"};
  int64_t seqs = b;
  if (m.varlen()) {
    if (b != 1)
      return {ErrorKind::kShape, "varlen takes q, k, v as [1, H, total, D] views of packed [total, H, D] tensors; got "
                                 "a batch of " + std::to_string(b)};
    if (m.cu_seqlens_q.size < 2 || m.cu_seqlens_q.size != m.cu_seqlens_k.size)
      return {ErrorKind::kShape, "cu_seqlens_q has " + std::to_string(m.cu_seqlens_q.size) + " entries and cu_seqlens_k " +
                                     std::to_string(m.cu_seqlens_k.size) + ": both must be [S + 1] with S >= 1 sequences"};
    seqs = m.cu_seqlens_q.size - 1;
    if (seqs > kMaxGridYZ)
      return {ErrorKind::kShape, std::to_string(seqs) + " sequences: at most 65535 per call (CUDA grid limit); split the batch"};
    if (m.max_seqlen_q < 0 || m.max_seqlen_q > nq || m.max_seqlen_k < 0 || m.max_seqlen_k > nkv)
      return {ErrorKind::kShape, "max_seqlen_q = " + std::to_string(m.max_seqlen_q) + ", max_seqlen_k = " +
                                     std::to_string(m.max_seqlen_k) + ": each must be the longest sequence's length, "
                                     "within [0, total] (total_q = " + std::to_string(nq) + ", total_k = " +
                                     std::to_string(nkv) + ")"};
    if ((nq > 0 && m.max_seqlen_q == 0) || (nkv > 0 && m.max_seqlen_k == 0))
      return {ErrorKind::kShape, "max_seqlen_q = " + std::to_string(m.max_seqlen_q) + ", max_seqlen_k = " +
                                     std::to_string(m.max_seqlen_k) + " with " + std::to_string(nq) + " / " +
                                     std::to_string(nkv) + " packed rows: pass the longest sequence's lengths"};
  }
  if (m.seqused_k.data != nullptr && m.seqused_k.size != seqs)
    return {ErrorKind::kShape, "seqused_k has " + std::to_string(m.seqused_k.size) + " entries; it must have one per " +
                                   (m.varlen() ? "sequence (" : "batch entry (") + std::to_string(seqs) + ")"};
  return {};
}

}  // namespace

Status validate_forward(const ForwardArgs& a) {
  const TensorDesc* ts[4] = {&a.q, &a.k, &a.v, &a.out};
  const char* names[4] = {"q", "k", "v", "out"};
  for (int i = 0; i < 4; ++i) {
    for (int d = 0; d < 4; ++d)
      if (ts[i]->shape[d] < 0)
        return {ErrorKind::kShape, std::string(names[i]) + " has a negative extent " + shape_str(ts[i]->shape, 4)};
  }
  const int64_t b = a.q.shape[0], hq = a.q.shape[1], nq = a.q.shape[2], d = a.q.shape[3];
  const int64_t hkv = a.k.shape[1], nkv = a.k.shape[2];
  for (int i = 1; i < 3; ++i) {
    if (ts[i]->shape[0] != b || ts[i]->shape[3] != d)
      return {ErrorKind::kShape, std::string(names[i]) + " has shape " + shape_str(ts[i]->shape, 4) +
                                     " but q has " + shape_str(a.q.shape, 4) +
                                     ": batch and head dim must match ([B, H, N, D] layout)"};
  }
  if (!std::equal(a.k.shape, a.k.shape + 4, a.v.shape))
    return {ErrorKind::kShape, "k " + shape_str(a.k.shape, 4) + " and v " + shape_str(a.v.shape, 4) +
                                   " must have the same shape [B, Hkv, Nkv, D]"};
  if (!std::equal(a.q.shape, a.q.shape + 4, a.out.shape))
    return {ErrorKind::kShape, "out " + shape_str(a.out.shape, 4) + " must have the shape of q " + shape_str(a.q.shape, 4)};
  if (hkv == 0 ? hq != 0 : hq % hkv != 0)
    return {ErrorKind::kShape, "q has " + std::to_string(hq) + " heads and k/v have " + std::to_string(hkv) +
                                   ": grouped-query attention needs Hq % Hkv == 0"};
  if (b > kMaxGridYZ || hq > kMaxGridYZ)
    return {ErrorKind::kShape, "B = " + std::to_string(b) + ", Hq = " + std::to_string(hq) +
                                   ": each must be at most 65535 (CUDA grid limit); split the batch"};
  if (nq > INT32_MAX || nkv > INT32_MAX)
    return {ErrorKind::kShape, "sequence lengths must be below 2^31"};

  for (int i = 1; i < 4; ++i)
    if (ts[i]->dtype != a.q.dtype)
      return {ErrorKind::kDType, std::string("q, k, v and out must share one dtype: q is ") + dtype_name(a.q.dtype) +
                                     ", " + names[i] + " is " + dtype_name(ts[i]->dtype)};

  for (int i = 0; i < 4; ++i)
    if (ts[i]->shape[3] > 1 && ts[i]->stride[3] != 1)
      return {ErrorKind::kLayout, std::string(names[i]) + " must have a unit-stride last dim (stride " +
                                      std::to_string(ts[i]->stride[3]) + " elements); call .contiguous() first"};

  if (!find_kernel(static_cast<int>(d), a.q.dtype)) {
    bool dim_compiled = false;
    for (int i = 0; i < kNumCompiledKernels; ++i) dim_compiled |= kCompiledKernels[i].head_dim == d;
    if (!dim_compiled)
      return {ErrorKind::kHeadDim, "head dim " + std::to_string(d) + " was not compiled; this build has " +
                                       compiled_head_dims_str() +
                                       ". Rebuild with -DFFPA_HEAD_DIMS=\"...;" + std::to_string(d) +
                                       "\" (multiples of 64 up to 1024), or pad the head dim to a compiled one"};
    return {ErrorKind::kDType, std::string("dtype ") + dtype_name(a.q.dtype) + " was not compiled for head dim " +
                                   std::to_string(d) + "; rebuild with -DFFPA_DTYPES=\"fp16;bf16\""};
  }

  if (a.lse.data != nullptr) {
    const int64_t want[3] = {b, hq, nq};
    if (!std::equal(want, want + 3, a.lse.shape))
      return {ErrorKind::kShape, "lse has shape " + shape_str(a.lse.shape, 3) + ", expected [B, Hq, Nq] = " +
                                     shape_str(want, 3)};
  }
  if (!is_known_impl(a.impl)) {
    std::string known;
    for (Impl i : kAllImpls) known += std::string(known.empty() ? "" : ", ") + impl_name(i);
    return {ErrorKind::kImpl, "unknown impl code " + std::to_string(int(a.impl)) + "; choose " + known};
  }
  {
    Status st = validate_masks(a.mask, b, nq, nkv);
    if (!st.ok()) return st;
  }
  if (a.mask.active()) {
    // The masks live in the split-D mma kernel and the 16-bit CuTe kernel (both feeds of
    // each): the SIMT and low-precision kernels refuse them.
    const bool takes = a.impl == Impl::kAuto || a.impl == Impl::kMma || a.impl == Impl::kTma ||
                       a.impl == Impl::kCute || a.impl == Impl::kCuteTma;
    if (!takes)
      return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) +
                                    "' takes no sliding window, seqused_k or varlen layout (the mma, tma, cute and "
                                    "cute_tma kernels do): use impl='auto', 'mma', 'tma', 'cute' or 'cute_tma'"};
    for (int i = 0; i < 4; ++i)
      if (!mma_aligned(*ts[i]))
        return {ErrorKind::kLayout, std::string(names[i]) +
                                        " is not 16-byte aligned (data pointer, or batch/head/row strides not "
                                        "multiples of 8 elements), which the masked kernels (mma, tma, cute, "
                                        "cute_tma) need: call .contiguous() first"};
  }
  if (a.accum != Accum::kFp32 && a.accum != Accum::kFp16)
    return {ErrorKind::kImpl, "unknown accum code " + std::to_string(int(a.accum)) + "; choose fp32 or fp16"};
  const bool f16_acc = a.accum == Accum::kFp16;
  if (f16_acc && a.q.dtype != DType::kFp16)
    return {ErrorKind::kDType, std::string("accum='fp16' needs fp16 inputs (got ") + dtype_name(a.q.dtype) +
                                   "): bf16 always accumulates in fp32; drop accum or cast to fp16"};
  if (f16_acc && a.impl == Impl::kSimt)
    return {ErrorKind::kImpl, "accum='fp16' is an option of the tensor-core paths (impl 'mma', 'tma', "
                              "'cute', 'cute_tma' or 'auto'); the SIMT kernel accumulates in fp32"};
  if (f16_acc && is_lowp_impl(a.impl))
    return {ErrorKind::kImpl, std::string("accum='fp16' is not an option of impl='") + impl_name(a.impl) +
                                  "': the FP8 / NVFP4 mma accumulates in fp32; drop accum, or use impl 'mma', "
                                  "'tma', 'cute' or 'cute_tma' for fp16 accumulation"};
  if (is_lowp_impl(a.impl) && !has_lowp())
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) +
                                  "' (the FP8 / NVFP4 kernels) was not compiled in this build; use impl='cute_tma', "
                                  "'tma' or 'mma'"};
  if (is_lowp_impl(a.impl) && !is_fp4_impl(a.impl) && !has_arch(is_fp8_arch))
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) + "' was not compiled in this build (archs " +
                                  compiled_archs_str() +
                                  "; FP8 tensor cores need an arch >= " + std::to_string(kFp8MinSm) + "): rebuild with -DFFPA_CUDA_ARCHS including "
                                  "89, 90 or 120f"};
  if (a.impl == Impl::kCuteTmaFp8 && !has_tma_arch())
    return {ErrorKind::kImpl, std::string("impl='cute_tma_fp8' was not compiled in this build (archs ") +
                                  compiled_archs_str() +
                                  "; TMA code needs an arch >= " + std::to_string(kTmaMinSm) + "): use impl='fp8' (cp.async-fed below sm_" +
                                  std::to_string(kTmaMinSm) + "), or "
                                  "rebuild with -DFFPA_CUDA_ARCHS including 90 or 120f"};
  if (is_fp4_impl(a.impl) && !has_arch(is_fp4_arch))
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) + "' was not compiled in this build (archs " +
                                  compiled_archs_str() +
                                  "): NVFP4 (the block-scaled mma) runs on the sm_120 family only (RTX 50xx, RTX PRO "
                                  "Blackwell) and needs its family target: rebuild with -DFFPA_CUDA_ARCHS including "
                                  "120f, or use impl='fp8'"};
  if (is_tma_impl(a.impl) && !has_tma_arch())
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) +
                                  "' was not compiled in this build (archs " + compiled_archs_str() +
                                  "; TMA code needs an arch >= " + std::to_string(kTmaMinSm) + "): use impl='" +
                                  (a.impl == Impl::kTma ? "mma" : "cute") +
                                  "', or rebuild with -DFFPA_CUDA_ARCHS including 90 or 120f"};
  if ((a.impl == Impl::kCute || a.impl == Impl::kCuteTma) && !has_cute())
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) +
                                  "' (the CuTe kernels) was not compiled in this build; use impl='mma' or 'tma'"};
  // cp.async and TMA both need 16-byte aligned rows; auto falls back to SIMT only with
  // fp32 accumulation (the SIMT kernel has no fp16-accumulate variant).
  if (is_tensor_core_impl(a.impl) || (a.impl == Impl::kAuto && f16_acc)) {
    const std::string why = a.impl == Impl::kAuto ? "accum='fp16' (no SIMT fallback)"
                                                  : std::string("impl='") + impl_name(a.impl) + "'";
    for (int i = 0; i < 4; ++i)
      if (!mma_aligned(*ts[i]))
        return {ErrorKind::kLayout, std::string(names[i]) +
                                        " is not 16-byte aligned (data pointer, or batch/head/row strides not "
                                        "multiples of 8 elements), which " + why +
                                        " needs for cp.async/TMA; call .contiguous() or use impl='auto'/'simt'"};
  }
  return {};
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
}

namespace {

Status pointer_device(const void* p, const char* name, int* device) {
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return {ErrorKind::kDevice, std::string(name) + ": cannot query the pointer (" + cudaGetErrorString(err) +
                                    "); pass arrays in CUDA device memory"};
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return {ErrorKind::kDevice, std::string(name) + " is not in CUDA device memory (host or unregistered "
                                                    "pointer); move it to the GPU first"};
  *device = attr.device;
  return {};
}

// The masks' int32 arrays live on the device of the other arrays.
Status check_mask_devices(const MaskArgs& m, int device) {
  for (const auto& [arr, name] : {std::pair{&m.seqused_k, "seqused_k"}, std::pair{&m.cu_seqlens_q, "cu_seqlens_q"},
                                  std::pair{&m.cu_seqlens_k, "cu_seqlens_k"}}) {
    if (arr->data == nullptr) continue;
    int dev = -1;
    Status st = pointer_device(arr->data, name, &dev);
    if (!st.ok()) return st;
    if (device >= 0 && dev != device)
      return {ErrorKind::kDevice, std::string(name) + " is on cuda:" + std::to_string(dev) + " but q on cuda:" +
                                      std::to_string(device) + "; move it to q's device"};
  }
  return {};
}

// The kernels' MaskParams (ffpa/mask.h) of validated MaskArgs; bottom_right: the
// backward's alignment (the forward's kernel knows its own; varlen is bottom-right always).
MaskParams mask_params(const MaskArgs& m, bool bottom_right) {
  MaskParams p;
  p.window_left = static_cast<int>(m.window_left);
  p.window_right = static_cast<int>(m.window_right);
  p.diag_bottom_right = bottom_right || m.varlen();
  p.seqused_k = m.seqused_k.data;
  if (m.varlen()) {
    p.cu_seqlens_q = m.cu_seqlens_q.data;
    p.cu_seqlens_k = m.cu_seqlens_k.data;
    p.num_seqs = static_cast<int>(m.cu_seqlens_q.size - 1);
    p.max_seqlen_q = static_cast<int>(m.max_seqlen_q);
    p.max_seqlen_k = static_cast<int>(m.max_seqlen_k);
  }
  return p;
}

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != device) {
      if (cudaSetDevice(device) == cudaSuccess) restore_ = true;
    }
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool restore_ = false;
};

}  // namespace

namespace {

// Which binary of this library the device loads, asked of a kernel compiled with the
// same archs as the instances: its binaryVersion is the SASS arch picked for the
// current device (e.g. 120 for 120f code on an RTX 50xx, 89 on an L4). Cached per
// device ordinal; -1: not asked yet, 0: no loadable code.
__global__ void ffpa_binary_probe_kernel() {}

constexpr int kMaxDevices = 64;
std::atomic<int> g_binary_version[kMaxDevices];
std::once_flag g_binary_version_init;

int device_binary_version() {
  std::call_once(g_binary_version_init, [] {
    for (auto& v : g_binary_version) v.store(-1);
  });
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev < 0 || dev >= kMaxDevices) return 0;
  int v = g_binary_version[dev].load();
  if (v < 0) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, ffpa_binary_probe_kernel) == cudaSuccess) {
      v = attr.binaryVersion;
    } else {
      cudaGetLastError();
      v = 0;
    }
    g_binary_version[dev].store(v);
  }
  return v;
}

int current_device_cc() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

}  // namespace

bool tma_runs_on_current_device() noexcept { return has_tma_arch() && sm_has_tma(device_binary_version()); }

// The cp.async-fed heavy kernels are compiled below the sm_120 family only
// (ffpa/arch_rules.h).
bool mma_f16_acc_runs_on_current_device() noexcept {
  const int v = device_binary_version();
  return v > 0 && sm_has_cp_async_heavy(v);
}

bool cute_runs_on_current_device() noexcept {
  const int v = device_binary_version();
  return v > 0 && sm_has_cp_async_heavy(v);
}

bool fp8_runs_on_current_device(Impl impl) noexcept {
  const int v = device_binary_version();
  if (!has_lowp() || v <= 0 || !sm_has_fp8(v)) return false;
  if (impl == Impl::kCuteFp8) return sm_has_cp_async_heavy(v);
  if (impl == Impl::kCuteTmaFp8) return has_tma_arch() && sm_has_tma(v);
  return false;
}

// The loaded binary's version says sm_120 for a plain 120 binary and for 120f alike, so
// the compiled tokens decide: NVFP4 code exists only in a family- or arch-specific one.
bool fp4_runs_on_current_device() noexcept {
  const int v = device_binary_version();
  if (!has_lowp() || v <= 0) return false;
  for (int i = 0; i < kNumCompiledArchs; ++i)
    if (is_fp4_arch(kCompiledArchs[i]) && arch_token_sm(kCompiledArchs[i]) / 10 == v / 10 &&
        arch_token_sm(kCompiledArchs[i]) <= v)
      return true;
  return false;
}

// impl='auto': the one rule (auto_rule() below says it in words; docs/perf.md,
// "impl='auto'", has the measurements it rests on). Only measured paths are picked:
// the sm_120 family is where the TMA-fed kernel is the one to take; on sm_90 the
// cp.async kernel stays the default until a warp-specialised variant exists. The CuTe
// paths (cute, cute_tma) have no GPU measurement yet, so auto never picks them.
Impl resolve_impl(const ForwardArgs& a) {
  // The low-precision aliases name the kernel the device has code for.
  if (a.impl == Impl::kFp8) return fp8_runs_on_current_device(Impl::kCuteTmaFp8) ? Impl::kCuteTmaFp8 : Impl::kCuteFp8;
  if (a.impl == Impl::kFp4) return Impl::kCuteTmaFp4;
  if (a.impl != Impl::kAuto) return a.impl;
  const TensorDesc* ts[4] = {&a.q, &a.k, &a.v, &a.out};
  for (const TensorDesc* t : ts)
    if (!mma_aligned(*t)) return Impl::kSimt;
  if (current_device_cc() / 10 == 12 && tma_runs_on_current_device()) return Impl::kTma;
  return Impl::kMma;
}

const char* auto_rule() noexcept {
#define FFPA_AUTO_RULE_TAIL                                                                              \
  "; simt when an array is not 16-byte aligned (fp32 accumulation only); never cute or cute_tma (no GPU " \
  "measurement of them yet: docs/perf.md)"
  return has_tma_arch() ? "tma on sm_120-family GPUs that this build's TMA code runs on, else mma" FFPA_AUTO_RULE_TAIL
                        : "mma" FFPA_AUTO_RULE_TAIL;
#undef FFPA_AUTO_RULE_TAIL
}

namespace {

PFN_cuTensorMapEncodeTiled_v12000 g_encode_tiled = nullptr;
std::once_flag g_encode_tiled_once;
std::string g_encode_tiled_error;

Status tensor_map_encoder(PFN_cuTensorMapEncodeTiled_v12000* fn) {
  std::call_once(g_encode_tiled_once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
      cudaGetLastError();
      g_encode_tiled_error = std::string("the driver has no cuTensorMapEncodeTiled (") +
                             (err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found") +
                             "); impl='tma' needs a CUDA 12+ driver: update the driver or use impl='mma'";
      return;
    }
    g_encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  if (g_encode_tiled == nullptr) return {ErrorKind::kDevice, g_encode_tiled_error};
  *fn = g_encode_tiled;
  return {};
}

// One map, with the geometry tma_geometry() gives (ffpa/tma_geometry.h).
Status encode_one(PFN_cuTensorMapEncodeTiled_v12000 encode, CUtensorMap* map, const char* name, const void* data,
                  DType dtype, const TmaGeometry& g) {
  const cuuint64_t dims[4] = {g.dims[0], g.dims[1], g.dims[2], g.dims[3]};
  const cuuint64_t strides[3] = {g.strides[0], g.strides[1], g.strides[2]};
  const cuuint32_t box[4] = {g.box[0], g.box[1], g.box[2], g.box[3]};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = g.elem_bytes == 1         ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dtype == DType::kFp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMapSwizzle swizzle = g.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : g.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                             : CU_TENSOR_MAP_SWIZZLE_32B;
  const CUresult r = encode(map, type, 4, const_cast<void*>(data), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return {ErrorKind::kLayout, std::string("cuTensorMapEncodeTiled refused ") + name + " (CUresult " +
                                    std::to_string(int(r)) + ", byte strides " + std::to_string(g.strides[0]) +
                                    "/" + std::to_string(g.strides[1]) + "/" + std::to_string(g.strides[2]) +
                                    "): use impl='mma' for this layout, or call .contiguous()"};
  return {};
}

}  // namespace

Status encode_tma_maps(const FwdParams& p, DType dtype, int box_rows_q, int box_rows_kv, TmaMaps* maps) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  Status st = tensor_map_encoder(&encode);
  if (!st.ok()) return st;
  std::memset(maps, 0, sizeof(*maps));
  st = encode_one(encode, &maps->q, "q", p.q, dtype, tma_geometry(p, TmaOperand::kQ, box_rows_q));
  // nkv == 0: no KV block is ever loaded, and a zero extent is not encodable.
  if (st.ok() && p.nkv > 0)
    st = encode_one(encode, &maps->k, "k", p.k, dtype, tma_geometry(p, TmaOperand::kK, box_rows_kv));
  if (st.ok() && p.nkv > 0)
    st = encode_one(encode, &maps->v, "v", p.v, dtype, tma_geometry(p, TmaOperand::kV, box_rows_kv));
  return st;
}

Status encode_bwd_tma_maps(const BwdParams& p, DType dtype, int box_rows_q, int box_rows_kv, BwdTmaMaps* maps) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  Status st = tensor_map_encoder(&encode);
  if (!st.ok()) return st;
  std::memset(maps, 0, sizeof(*maps));
  st = encode_one(encode, &maps->q, "q", p.q, dtype, bwd_tma_geometry(p, BwdTmaOperand::kQ, box_rows_q));
  if (st.ok())
    st = encode_one(encode, &maps->dout, "dout", p.dout, dtype, bwd_tma_geometry(p, BwdTmaOperand::kDout, box_rows_q));
  // nkv == 0: no key block is ever loaded, and a zero extent is not encodable.
  if (st.ok() && p.nkv > 0)
    st = encode_one(encode, &maps->k, "k", p.k, dtype, bwd_tma_geometry(p, BwdTmaOperand::kK, box_rows_kv));
  if (st.ok() && p.nkv > 0)
    st = encode_one(encode, &maps->v, "v", p.v, dtype, bwd_tma_geometry(p, BwdTmaOperand::kV, box_rows_kv));
  return st;
}

Status run_fwd_lowp(const FwdParams& p, DType dtype, Impl impl) {
  for (int i = 0; i < kNumCompiledLowp; ++i)
    if (kCompiledLowp[i].head_dim == p.head_dim) return kCompiledLowp[i].launch(p, dtype, impl);
  return {ErrorKind::kHeadDim, "internal: no low-precision kernel for head dim " + std::to_string(p.head_dim) +
                                   " although the head dim was compiled"};
}

Status encode_lowp_tma_maps(const FwdParams& p, int box_rows_q, int box_rows_kv, int box_rows_vt, int slab_bytes,
                            TmaMaps* maps) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  Status st = tensor_map_encoder(&encode);
  if (!st.ok()) return st;
  std::memset(maps, 0, sizeof(*maps));
  const LowpLayout& l = p.lowp;
  st = encode_one(encode, &maps->q, "q (quantised)", p.lowp_ws + l.q8, DType::kFp16,
                  lowp_tma_geometry(l, TmaOperand::kQ, box_rows_q, slab_bytes));
  if (st.ok() && p.nkv > 0)
    st = encode_one(encode, &maps->k, "k (quantised)", p.lowp_ws + l.k8, DType::kFp16,
                    lowp_tma_geometry(l, TmaOperand::kK, box_rows_kv, slab_bytes));
  if (st.ok() && p.nkv > 0)
    st = encode_one(encode, &maps->v, "v^T (quantised)", p.lowp_ws + l.vt8, DType::kFp16,
                    lowp_tma_geometry(l, TmaOperand::kV, box_rows_vt, slab_bytes));
  return st;
}

namespace {

// The non-finite pre-pass of one call (ffpa/nonfinite.cuh): [B, Hq] int flags in a
// stream-ordered allocation (graph capture records it as a graph allocation, like the
// low-precision workspace), zeroed, then set by the scan of the given operands. The
// caller launches its kernels with flags() and then release()s them on the same stream.
class NonfiniteFlags {
 public:
  // One operand to scan: a TensorDesc of q, k, v or dout; used: int32 [B] rows to scan per
  // batch entry (NonfiniteScan::rows_used), nullptr: all.
  void add(const TensorDesc& t, const int* used = nullptr) { scan_.add(t.data, t.shape, t.stride, used); }
  Status run(int b, int hq, int h_ratio, int d, DType dtype, cudaStream_t stream) {
    stream_ = stream;
    scan_.hq = hq, scan_.h_ratio = h_ratio, scan_.d = d;
    scan_.exp_mask = dtype == DType::kBf16 ? 0x7f80 : 0x7c00;
    const size_t bytes = sizeof(int) * static_cast<size_t>(b) * hq;
    void* mem = nullptr;
    Status st = launch_status(cudaMallocAsync(&mem, bytes, stream), "non-finite flags (cudaMallocAsync)");
    if (!st.ok()) return st;
    scan_.flags = static_cast<int*>(mem);
    st = launch_status(cudaMemsetAsync(mem, 0, bytes, stream), "non-finite flags (cudaMemsetAsync)");
    if (!st.ok() || scan_.max_rows == 0 || d == 0) return st;
    const dim3 grid(scan_.grid_x(), scan_.total_heads, b);
    void* args[] = {&scan_};
    return launch_status(cudaLaunchKernel(reinterpret_cast<const void*>(&ffpa_nonfinite_kernel), grid,
                                          dim3(NonfiniteScan::kNThreads), args, 0, stream),
                         "non-finite pre-pass launch");
  }
  const int* flags() const { return scan_.flags; }
  // Frees the flags after the kernels that read them (stream order); st: their status.
  Status release(Status st) {
    if (scan_.flags == nullptr) return st;
    const Status freed = launch_status(cudaFreeAsync(scan_.flags, stream_), "non-finite flags release (cudaFreeAsync)");
    scan_.flags = nullptr;
    return st.ok() ? freed : st;
  }

 private:
  NonfiniteScan scan_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

Status forward(const ForwardArgs& a) {
  if (a.impl_used != nullptr) *a.impl_used = Impl::kAuto;
  Status st = validate_forward(a);
  if (!st.ok()) return st;
  if (device_count() == 0)
    return {ErrorKind::kDevice,
            "no CUDA device: the CUDA runtime sees no GPU (check nvidia-smi, the driver and "
            "CUDA_VISIBLE_DEVICES); the NumPy reference (ffpa_attn.reference) runs without one"};

  const TensorDesc* ts[4] = {&a.q, &a.k, &a.v, &a.out};
  const char* names[4] = {"q", "k", "v", "out"};
  int device = -1;
  for (int i = 0; i < 5; ++i) {
    const void* p = i < 4 ? ts[i]->data : a.lse.data;
    if (p == nullptr) {
      if (i == 4) continue;
      // Empty arrays may carry a null pointer; they are never dereferenced.
      const int64_t* s = ts[i]->shape;
      if (s[0] * s[1] * s[2] * s[3] == 0) continue;
      return {ErrorKind::kDevice, std::string(names[i]) + " has a null data pointer"};
    }
    int dev = -1;
    st = pointer_device(p, i < 4 ? names[i] : "lse", &dev);
    if (!st.ok()) return st;
    if (device >= 0 && dev != device)
      return {ErrorKind::kDevice, std::string(i < 4 ? names[i] : "lse") + " is on cuda:" + std::to_string(dev) +
                                      " but the other arrays on cuda:" + std::to_string(device) +
                                      "; move them to one device"};
    device = dev;
  }

  st = check_mask_devices(a.mask, device);
  if (!st.ok()) return st;

  const int64_t b = a.q.shape[0], hq = a.q.shape[1], nq = a.q.shape[2];
  if (b * hq * nq == 0) return {};
  if (a.mask.varlen() && a.mask.max_seqlen_q == 0) return {};

  FwdParams p;
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.out.data;
  p.lse = a.lse.data;
  p.q_batch_stride = a.q.stride[0], p.q_head_stride = a.q.stride[1], p.q_row_stride = a.q.stride[2];
  p.k_batch_stride = a.k.stride[0], p.k_head_stride = a.k.stride[1], p.k_row_stride = a.k.stride[2];
  p.v_batch_stride = a.v.stride[0], p.v_head_stride = a.v.stride[1], p.v_row_stride = a.v.stride[2];
  p.o_batch_stride = a.out.stride[0], p.o_head_stride = a.out.stride[1], p.o_row_stride = a.out.stride[2];
  p.lse_batch_stride = a.lse.stride[0], p.lse_head_stride = a.lse.stride[1], p.lse_row_stride = a.lse.stride[2];
  p.b = static_cast<int>(b);
  p.hq = static_cast<int>(hq);
  p.hkv = static_cast<int>(a.k.shape[1]);
  p.nq = static_cast<int>(nq);
  p.nkv = static_cast<int>(a.k.shape[2]);
  p.h_ratio = p.hq / p.hkv;
  p.scale = a.scale;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.causal = a.causal;
  p.causal_offset = a.causal_top_left ? 0 : p.nkv - p.nq;
  p.mask = mask_params(a.mask, /*bottom_right=*/a.causal && !a.causal_top_left);
  p.accum = a.accum;
  p.out_dtype = a.out.dtype;
  p.head_dim = static_cast<int>(a.q.shape[3]);
  p.stream = a.stream;

  DeviceGuard guard(device);
  // Resolved on the arrays' device: auto's choice and TMA's availability depend on it.
  const Impl impl = resolve_impl(a);
  if (is_tma_impl(impl) && !tma_runs_on_current_device()) {
    const int cc = current_device_cc();
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(impl) + "' cannot run on this GPU (sm_" +
                                  std::to_string(cc) +
                                  "): this library's TMA code is for archs >= " + std::to_string(kTmaMinSm) + " among its compiled archs (" +
                                  compiled_archs_str() + "), and the device loads none of them; use impl='" +
                                  (impl == Impl::kTma ? "mma" : "cute") + "' or 'auto', or rebuild with "
                                  "-DFFPA_CUDA_ARCHS=" + std::to_string(cc)};
  }
  if (impl == Impl::kMma && a.accum == Accum::kFp16 && !mma_f16_acc_runs_on_current_device()) {
    return {ErrorKind::kImpl, "impl='mma' with accum='fp16' has no code for this GPU (sm_" +
                                  std::to_string(current_device_cc()) +
                                  "): on the sm_120 family fp16 accumulation runs on the TMA path; use "
                                  "impl='tma' or 'auto'"};
  }
  if (impl == Impl::kCute && !cute_runs_on_current_device()) {
    return {ErrorKind::kImpl, "impl='cute' has no code for this GPU (sm_" + std::to_string(current_device_cc()) +
                                  "): on the sm_120 family the CuTe kernel is fed by TMA; use impl='cute_tma'"};
  }
  if ((impl == Impl::kCuteFp8 || impl == Impl::kCuteTmaFp8) && !fp8_runs_on_current_device(impl)) {
    const int cc = current_device_cc();
    return {ErrorKind::kImpl,
            std::string("impl='") + impl_name(a.impl) + "' has no code for this GPU (sm_" + std::to_string(cc) + "): " +
                (!sm_has_fp8(cc) ? "FP8 tensor cores need sm_" + std::to_string(kFp8MinSm) +
                                   " or newer (Ada, Hopper, Blackwell); use impl='cute_tma', 'tma' or 'mma'"
                 : impl == Impl::kCuteFp8
                     ? "on the sm_120 family the FP8 kernel is fed by TMA; use impl='fp8' or 'cute_tma_fp8'"
                     : "the TMA-fed FP8 kernel needs sm_" + std::to_string(kTmaMinSm) + " or newer; use impl='fp8' or 'cute_fp8'") +
                " (compiled archs: " + compiled_archs_str() + ")"};
  }
  if (impl == Impl::kCuteTmaFp4 && !fp4_runs_on_current_device()) {
    return {ErrorKind::kImpl, std::string("impl='") + impl_name(a.impl) + "' has no code for this GPU (sm_" +
                                  std::to_string(current_device_cc()) +
                                  "): NVFP4 runs on the sm_120 family only (RTX 50xx, RTX PRO Blackwell; compiled "
                                  "archs: " + compiled_archs_str() + "); use impl='fp8' for FP8 on sm_" + std::to_string(kFp8MinSm) +
                                  " and newer"};
  }
  // Which heads read a NaN or an inf: they follow SDPA's math backend under the causal
  // mask and the sliding window too (ffpa/mask.h). Where no band hides a key from a row the
  // 16-bit kernels already do (nothing is skipped or replaced but keys that are not part of
  // the problem: the padding, keys past seqused_k, other packed sequences), so the pass runs
  // for causal or windowed calls (band_hides_keys), and for every low-precision call (their
  // flagged heads are recomputed below). In a padded batch it scans K and V below
  // seqused_k[b] only; in varlen the packed arrays are [1, H, total, D], so a head's flag
  // covers all its sequences: a NaN in one sequence, or past one's seqused_k, flags the head
  // in every sequence, which is correct (keys outside a sequence's own read keys stay
  // unread, and a finite score plus -inf is -inf), only slower for those heads.
  NonfiniteFlags nonfinite;
  const KernelEntry* entry = find_kernel(static_cast<int>(a.q.shape[3]), a.q.dtype);
  if (band_hides_keys(p.mask, a.causal) || is_lowp_impl(impl)) {
    const int* kv_used = p.mask.cu_seqlens_q == nullptr ? p.mask.seqused_k : nullptr;
    nonfinite.add(a.q), nonfinite.add(a.k, kv_used), nonfinite.add(a.v, kv_used);
    st = nonfinite.run(p.b, p.hq, p.h_ratio, p.head_dim, a.q.dtype, static_cast<cudaStream_t>(a.stream));
    if (!st.ok()) return nonfinite.release(st);
    p.nonfinite = nonfinite.flags();
  }
  if (is_lowp_impl(impl)) {
    FwdParams lp = p;
    lp.nonfinite = nullptr;
    st = run_fwd_lowp(lp, a.q.dtype, impl);
    // Quantisation has no NaN / inf to carry (e4m3 has no inf; one NaN would spoil a
    // whole block's scale): the heads that read one are computed again, in full
    // precision by the SIMT kernel, which follows the rule; it returns at once for
    // every other head (FwdParams::nonfinite_heads_only).
    if (st.ok()) {
      p.nonfinite_heads_only = true;
      st = entry->launch(p, Impl::kSimt);
    }
  } else {
    st = entry->launch(p, impl);
  }
  st = nonfinite.release(st);
  if (st.ok() && a.impl_used != nullptr) *a.impl_used = impl;
  return st;
}

BuildInfo build_info() {
  BuildInfo info;
  for (int i = 0; i < kNumCompiledKernels; ++i) {
    const int d = kCompiledKernels[i].head_dim;
    if (std::find(info.head_dims.begin(), info.head_dims.end(), d) == info.head_dims.end()) info.head_dims.push_back(d);
    const std::string dt = dtype_name(kCompiledKernels[i].dtype);
    if (std::find(info.dtypes.begin(), info.dtypes.end(), dt) == info.dtypes.end()) info.dtypes.push_back(dt);
  }
  std::sort(info.head_dims.begin(), info.head_dims.end());
  for (int i = 0; i < kNumCompiledArchs; ++i) info.archs.emplace_back(kCompiledArchs[i]);
  info.fwd = kNumCompiledKernels > 0;
  for (int i = 0; i < kNumCompiledArchs; ++i)
    if (is_tma_arch(kCompiledArchs[i])) info.tma_archs.emplace_back(kCompiledArchs[i]);
  info.tma = info.fwd && !info.tma_archs.empty();
  info.cute = info.fwd && has_cute();
  // True exactly when both the TMA-fed kernels and the CuTe kernels are compiled in.
  info.cute_tma = info.cute && info.tma;
  if (info.fwd) info.impls = {"mma", "simt"};
  if (info.tma) info.impls.push_back("tma");
  if (info.cute) info.impls.push_back("cute");
  if (info.cute_tma) info.impls.push_back("cute_tma");
  for (int i = 0; i < kNumCompiledArchs; ++i) {
    if (is_fp8_arch(kCompiledArchs[i])) info.fp8_archs.emplace_back(kCompiledArchs[i]);
    if (is_fp4_arch(kCompiledArchs[i])) info.fp4_archs.emplace_back(kCompiledArchs[i]);
  }
  info.fp8 = info.fwd && has_lowp() && !info.fp8_archs.empty();
  info.fp4 = info.fwd && has_lowp() && !info.fp4_archs.empty();
  if (info.fp8) {
    // cute_fp8 where an FP8 arch below the sm_120 family is compiled, cute_tma_fp8 where a
    // TMA one is (ffpa/arch_rules.h).
    bool cp = false, tma = false;
    for (const std::string& t : info.fp8_archs) {
      cp |= sm_has_cp_async_heavy(arch_token_sm(t.c_str()));
      tma |= sm_has_tma(arch_token_sm(t.c_str()));
    }
    if (cp) info.impls.push_back("cute_fp8");
    if (tma) info.impls.push_back("cute_tma_fp8");
    info.impls.push_back("fp8");
  }
  if (info.fp4) {
    info.impls.push_back("cute_tma_fp4");
    info.impls.push_back("fp4");
  }
  info.f16_acc = std::find(info.dtypes.begin(), info.dtypes.end(), "fp16") != info.dtypes.end();
  if (info.cute) info.cutlass_version = kCutlassVersion;
  if (info.fwd)
    for (const char* const* m = kCompiledMasks; *m != nullptr; ++m) info.masks.emplace_back(*m);
  info.cuda_runtime = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  return info;
}

// ---- the backward (ffpa/bwd_kernel_mma.cuh) ----------------------------------------------

namespace {

const BwdEntry* find_bwd(int head_dim, DType dtype) {
  for (int i = 0; i < kNumCompiledBwd; ++i)
    if (kCompiledBwd[i].head_dim == head_dim && kCompiledBwd[i].dtype == dtype) return &kCompiledBwd[i];
  return nullptr;
}

std::string bwd_instances_str() {
  std::string out;
  for (int i = 0; i < kNumCompiledBwd; ++i)
    out += (out.empty() ? "" : ", ") + std::to_string(kCompiledBwd[i].head_dim) + ":" + dtype_name(kCompiledBwd[i].dtype);
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<std::string> backward_instances() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumCompiledBwd; ++i)
    out.push_back(std::to_string(kCompiledBwd[i].head_dim) + ":" + dtype_name(kCompiledBwd[i].dtype));
  return out;
}

int64_t backward_workspace_floats(const BackwardArgs& a) noexcept {
  if (a.q.shape[0] < 0 || a.q.shape[1] < 0 || a.q.shape[2] < 0) return 0;
  return 2 * a.q.shape[0] * a.q.shape[1] * a.q.shape[2];
}

Status validate_backward(const BackwardArgs& a) {
  // q, k, v, out: the forward's own checks (shapes, GQA, dtypes, unit-stride D, head dim).
  ForwardArgs f;
  f.q = a.q, f.k = a.k, f.v = a.v, f.out = a.out;
  f.lse = a.lse;
  f.mask = a.mask;
  Status st = validate_forward(f);
  if (!st.ok()) return st;
  const TensorDesc* grads[4] = {&a.dout, &a.dq, &a.dk, &a.dv};
  const TensorDesc* like[4] = {&a.q, &a.q, &a.k, &a.v};
  const char* names[4] = {"dout", "dq", "dk", "dv"};
  const char* like_names[4] = {"q", "q", "k", "v"};
  for (int i = 0; i < 4; ++i) {
    if (!std::equal(grads[i]->shape, grads[i]->shape + 4, like[i]->shape))
      return {ErrorKind::kShape, std::string(names[i]) + " has shape " + shape_str(grads[i]->shape, 4) +
                                     "; it must have the shape of " + like_names[i] + " " + shape_str(like[i]->shape, 4)};
    if (grads[i]->dtype != a.q.dtype)
      return {ErrorKind::kDType, std::string(names[i]) + " is " + dtype_name(grads[i]->dtype) + " but q is " +
                                     dtype_name(a.q.dtype) + ": the backward takes and returns one dtype"};
    if (grads[i]->shape[3] > 1 && grads[i]->stride[3] != 1)
      return {ErrorKind::kLayout, std::string(names[i]) + " must have a unit-stride last dim (stride " +
                                      std::to_string(grads[i]->stride[3]) + " elements); call .contiguous() first"};
  }
  const int64_t b = a.q.shape[0], hq = a.q.shape[1], nq = a.q.shape[2];
  if (b * hq * nq > 0 && a.lse.data == nullptr)
    return {ErrorKind::kShape, "the backward needs the forward's lse ([B, Hq, Nq] fp32): run the forward with an lse"};
  const int d = static_cast<int>(a.q.shape[3]);
  if (!find_bwd(d, a.q.dtype))
    return {ErrorKind::kHeadDim, "no backward kernel for head dim " + std::to_string(d) + " " + dtype_name(a.q.dtype) +
                                     " in this build (backward instances: " + bwd_instances_str() +
                                     "); use backward='torch', or rebuild with that head dim in -DFFPA_HEAD_DIMS"};
  // cp.async reads q, k, v and dout in 16-byte vectors; the gradients are stored in 4-byte
  // pairs: one rule for all of them (out is read element by element).
  const TensorDesc* aligned[7] = {&a.q, &a.k, &a.v, &a.dout, &a.dq, &a.dk, &a.dv};
  const char* aligned_names[7] = {"q", "k", "v", "dout", "dq", "dk", "dv"};
  for (int i = 0; i < 7; ++i) {
    const int64_t* sh = aligned[i]->shape;
    if (sh[0] * sh[1] * sh[2] * sh[3] != 0 && !mma_aligned(*aligned[i]))
      return {ErrorKind::kLayout, std::string(aligned_names[i]) +
                                      " is not 16-byte aligned (data pointer, or batch/head/row strides not multiples "
                                      "of 8 elements), which the backward kernels need; call .contiguous() or use "
                                      "backward='torch'"};
  }
  if (b * hq * nq > 0 && a.workspace == nullptr)
    return {ErrorKind::kShape, "the backward needs an fp32 workspace of backward_workspace_floats() = " +
                                   std::to_string(backward_workspace_floats(a)) + " floats"};
  return {};
}

Status backward(const BackwardArgs& a) {
  Status st = validate_backward(a);
  if (!st.ok()) return st;
  if (device_count() == 0)
    return {ErrorKind::kDevice,
            "no CUDA device: the CUDA runtime sees no GPU (check nvidia-smi, the driver and CUDA_VISIBLE_DEVICES)"};
  const TensorDesc* ts[8] = {&a.q, &a.k, &a.v, &a.out, &a.dout, &a.dq, &a.dk, &a.dv};
  const char* names[10] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv", "lse", "workspace"};
  int device = -1;
  for (int i = 0; i < 10; ++i) {
    const void* p = i < 8 ? ts[i]->data : i == 8 ? static_cast<const void*>(a.lse.data) : a.workspace;
    if (p == nullptr) continue;  // empty arrays (validate_backward required the rest)
    int dev = -1;
    st = pointer_device(p, names[i], &dev);
    if (!st.ok()) return st;
    if (device >= 0 && dev != device)
      return {ErrorKind::kDevice, std::string(names[i]) + " is on cuda:" + std::to_string(dev) +
                                      " but the other arrays on cuda:" + std::to_string(device) +
                                      "; move them to one device"};
    device = dev;
  }
  st = check_mask_devices(a.mask, device);
  if (!st.ok()) return st;
  DeviceGuard guard(device);
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const int64_t b = a.q.shape[0], hq = a.q.shape[1], nq = a.q.shape[2];
  const int64_t hkv = a.k.shape[1], nkv = a.k.shape[2], d = a.q.shape[3];
  if (b * hq * nq == 0) {
    // No query: dK and dV are zero (dQ is empty). Row by row of each (batch, head).
    for (const TensorDesc* g : {&a.dk, &a.dv}) {
      if (g->data == nullptr || b * hkv * nkv * d == 0) continue;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t h = 0; h < hkv; ++h) {
          auto* base = static_cast<char*>(g->data) + (i * g->stride[0] + h * g->stride[1]) * 2;
          st = launch_status(cudaMemset2DAsync(base, g->stride[2] * 2, 0, d * 2, nkv, stream),
                             "cudaMemset2DAsync (zero dK / dV)");
          if (!st.ok()) return st;
        }
    }
    return {};
  }
  BwdParams p;
  p.q = a.q.data, p.k = a.k.data, p.v = a.v.data, p.o = a.out.data, p.dout = a.dout.data, p.lse = a.lse.data;
  p.dq = a.dq.data, p.dk = a.dk.data, p.dv = a.dv.data, p.workspace = a.workspace;
  p.q_batch_stride = a.q.stride[0], p.q_head_stride = a.q.stride[1], p.q_row_stride = a.q.stride[2];
  p.k_batch_stride = a.k.stride[0], p.k_head_stride = a.k.stride[1], p.k_row_stride = a.k.stride[2];
  p.v_batch_stride = a.v.stride[0], p.v_head_stride = a.v.stride[1], p.v_row_stride = a.v.stride[2];
  p.o_batch_stride = a.out.stride[0], p.o_head_stride = a.out.stride[1], p.o_row_stride = a.out.stride[2];
  p.do_batch_stride = a.dout.stride[0], p.do_head_stride = a.dout.stride[1], p.do_row_stride = a.dout.stride[2];
  p.dq_batch_stride = a.dq.stride[0], p.dq_head_stride = a.dq.stride[1], p.dq_row_stride = a.dq.stride[2];
  p.dk_batch_stride = a.dk.stride[0], p.dk_head_stride = a.dk.stride[1], p.dk_row_stride = a.dk.stride[2];
  p.dv_batch_stride = a.dv.stride[0], p.dv_head_stride = a.dv.stride[1], p.dv_row_stride = a.dv.stride[2];
  p.lse_batch_stride = a.lse.stride[0], p.lse_head_stride = a.lse.stride[1], p.lse_row_stride = a.lse.stride[2];
  p.b = static_cast<int>(b), p.hq = static_cast<int>(hq), p.hkv = static_cast<int>(hkv);
  p.nq = static_cast<int>(nq), p.nkv = static_cast<int>(nkv), p.head_dim = static_cast<int>(d);
  p.h_ratio = p.hq / p.hkv;
  p.scale = a.scale;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.causal = a.causal;
  p.mask = mask_params(a.mask, /*bottom_right=*/a.causal && !a.causal_top_left);
  p.stream = a.stream;
  p.tma = tma_runs_on_current_device();  // the main kernels' feed (bwd_launch_template.cuh)
  // As in forward(): the heads reading a NaN or an inf (dO included) follow the math
  // backend's autograd under the causal mask and the sliding window (ffpa/mask.h); causal
  // or windowed calls only (band_hides_keys), K and V of a padded batch below seqused_k[b]
  // only, the whole packed arrays in varlen (a head's flag covers all its sequences).
  NonfiniteFlags nonfinite;
  if (band_hides_keys(p.mask, a.causal)) {
    const int* kv_used = p.mask.cu_seqlens_q == nullptr ? p.mask.seqused_k : nullptr;
    nonfinite.add(a.q), nonfinite.add(a.k, kv_used), nonfinite.add(a.v, kv_used), nonfinite.add(a.dout);
    st = nonfinite.run(p.b, p.hq, p.h_ratio, p.head_dim, a.q.dtype, stream);
    if (!st.ok()) return nonfinite.release(st);
    p.nonfinite = nonfinite.flags();
  }
  return nonfinite.release(find_bwd(p.head_dim, a.q.dtype)->launch(p));
}

}  // namespace ffpa
