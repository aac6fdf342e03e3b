// The C API's validation (no CUDA call: shapes, dtypes, layouts, masks, the compiled set)
// and what the build holds (build_info, backward_instances); the names of the enums.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ffpa/api.h"
#include "ffpa/arch_rules.h"
#include "ffpa/runtime.h"
#include "internal.h"

namespace ffpa {

using namespace detail;

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

namespace detail {

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

}  // namespace detail

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
  info.cuda_runtime = runtime::runtime_version();
  return info;
}

// ---- the backward (ffpa/bwd_kernel_mma.cuh) ----------------------------------------------

namespace detail {

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

}  // namespace detail

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


}  // namespace ffpa
