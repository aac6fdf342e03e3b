// The C API's forward: validation, the arrays' device, the kernels' parameters, the impl
// (auto's rule on the arrays' device), the non-finite pre-pass, then the (head dim, dtype)
// instance of the compiled set.
#include <string>

#include "ffpa/api.h"
#include "ffpa/arch_rules.h"
#include "ffpa/mask.h"
#include "ffpa/params.h"
#include "internal.h"

namespace ffpa {

using namespace detail;

Status run_fwd_lowp(const FwdParams& p, DType dtype, Impl impl) {
  for (int i = 0; i < kNumCompiledLowp; ++i)
    if (kCompiledLowp[i].head_dim == p.head_dim) return kCompiledLowp[i].launch(p, dtype, impl);
  return {ErrorKind::kHeadDim, "internal: no low-precision kernel for head dim " + std::to_string(p.head_dim) +
                                   " although the head dim was compiled"};
}

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
  for (int i = 0; i < 4; ++i) {
    // Empty arrays may carry a null pointer; they are never dereferenced.
    const int64_t* s = ts[i]->shape;
    if (ts[i]->data == nullptr && s[0] * s[1] * s[2] * s[3] != 0)
      return {ErrorKind::kDevice, std::string(names[i]) + " has a null data pointer"};
  }
  const void* ptrs[5] = {a.q.data, a.k.data, a.v.data, a.out.data, a.lse.data};
  const char* ptr_names[5] = {"q", "k", "v", "out", "lse"};
  int device = -1;
  st = arrays_device(ptrs, ptr_names, 5, a.mask, &device);
  if (!st.ok()) return st;

  const int64_t b = a.q.shape[0], hq = a.q.shape[1], nq = a.q.shape[2];
  if (b * hq * nq == 0) return {};
  if (a.mask.varlen() && a.mask.max_seqlen_q == 0) return {};

  FwdParams p = make_fwd_params(a);

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
    st = nonfinite.run(p.b, p.hq, p.h_ratio, p.head_dim, a.q.dtype, a.stream);
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

}  // namespace ffpa
