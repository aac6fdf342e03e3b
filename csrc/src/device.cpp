// The device side of the C API's rules: which device the arrays are on, which of this
// library's code the current device runs (through the runtime seam, ffpa/runtime.h), and
// impl='auto''s choice.
#include <string>

#include "ffpa/api.h"
#include "ffpa/arch_rules.h"
#include "ffpa/runtime.h"
#include "internal.h"

namespace ffpa {

using namespace detail;

int device_count() noexcept { return runtime::device_count(); }

namespace detail {

Status arrays_device(const void* const* ptrs, const char* const* names, int n, const MaskArgs& mask, int* device) {
  *device = -1;
  for (int i = 0; i < n; ++i) {
    if (ptrs[i] == nullptr) continue;  // empty arrays (the validation required the rest)
    int dev = -1;
    Status st = runtime::pointer_device(ptrs[i], names[i], &dev);
    if (!st.ok()) return st;
    if (*device >= 0 && dev != *device)
      return {ErrorKind::kDevice, std::string(names[i]) + " is on cuda:" + std::to_string(dev) +
                                      " but the other arrays on cuda:" + std::to_string(*device) +
                                      "; move them to one device"};
    *device = dev;
  }
  // The masks' int32 arrays live on the device of the other arrays.
  for (const auto& [arr, name] : {std::pair{&mask.seqused_k, "seqused_k"}, std::pair{&mask.cu_seqlens_q, "cu_seqlens_q"},
                                  std::pair{&mask.cu_seqlens_k, "cu_seqlens_k"}}) {
    if (arr->data == nullptr) continue;
    int dev = -1;
    Status st = runtime::pointer_device(arr->data, name, &dev);
    if (!st.ok()) return st;
    if (*device >= 0 && dev != *device)
      return {ErrorKind::kDevice, std::string(name) + " is on cuda:" + std::to_string(dev) + " but q on cuda:" +
                                      std::to_string(*device) + "; move it to q's device"};
  }
  return {};
}

int current_device_cc() { return runtime::current_device_cc(); }

DeviceGuard::DeviceGuard(int device) {
  prev_ = runtime::current_device();
  if (device >= 0 && prev_ >= 0 && prev_ != device && runtime::set_device(device)) restore_ = true;
}
DeviceGuard::~DeviceGuard() {
  if (restore_) runtime::set_device(prev_);
}

}  // namespace detail

namespace {
int device_binary_version() { return runtime::device_binary_version(); }
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

}  // namespace ffpa
