// The real C API (ffpa/api.h) on the emulated device: forward and backward of small
// problems through validation, the device rules, the kernels' parameters, the tensor-map
// encoders, the non-finite pre-pass and the launches, with host arrays as the device's
// memory, against the float64 reference (csrc/reference/attention_bwd_ref.h) at the
// tolerance table's rows, on each emulated arch (FFPA_EMULATED_ARCH), each call naming the
// kernel it ran. Prints one verdict line per check and asserts the count it ran.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_bwd_ref.h"
#include "ffpa/api.h"
#include "ffpa/tolerance.h"

namespace {

uint16_t to_bits(float x, bool bf16) {
  if (bf16) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float from_bits(uint16_t b, bool bf16) {
  if (bf16) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

// A contiguous [B, H, N, D] 16-bit array, 16-byte aligned (as a device allocation is).
struct Array {
  std::vector<uint16_t> bits;
  int64_t shape[4];
  explicit Array(int b, int h, int n, int d) : bits(size_t(b) * h * n * d + 8), shape{b, h, n, d} {}
  uint16_t* data() {
    auto p = reinterpret_cast<uintptr_t>(bits.data());
    return reinterpret_cast<uint16_t*>((p + 15) / 16 * 16);
  }
  size_t size() const { return size_t(shape[0]) * shape[1] * shape[2] * shape[3]; }
  ffpa::TensorDesc desc(bool bf16) {
    ffpa::TensorDesc t;
    t.data = data();
    for (int i = 0; i < 4; ++i) t.shape[i] = shape[i];
    t.stride[3] = 1, t.stride[2] = shape[3], t.stride[1] = shape[2] * shape[3], t.stride[0] = shape[1] * shape[2] * shape[3];
    t.dtype = bf16 ? ffpa::DType::kBf16 : ffpa::DType::kFp16;
    return t;
  }
  std::vector<double> fill(std::mt19937& rng, bool bf16) {
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<double> out(size());
    for (size_t i = 0; i < size(); ++i) {
      data()[i] = to_bits(dist(rng), bf16);
      out[i] = from_bits(data()[i], bf16);
    }
    return out;
  }
  std::vector<double> values(bool bf16) {
    std::vector<double> out(size());
    for (size_t i = 0; i < size(); ++i) out[i] = from_bits(data()[i], bf16);
    return out;
  }
};

struct Case {
  const char* name;
  bool bf16;
  int b, hq, hkv, nq, nkv;
  bool causal, top_left;
  int window_left = -1, window_right = -1;
  ffpa::Impl impl = ffpa::Impl::kAuto;
};

int g_checks = 0, g_failed = 0;

void verdict(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) ++g_failed;
  std::printf("[%s] %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
}

// |got - ref| <= atol + rtol * |ref| everywhere (the forward's rows of the table).
bool close_elementwise(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol,
                       double* worst) {
  *worst = 0;
  bool ok = got.size() == ref.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    const double err = std::fabs(got[i] - ref[i]);
    if (!(err <= atol + rtol * std::fabs(ref[i]))) ok = false;
    if (err > *worst) *worst = err;
  }
  return ok;
}
// The backward's rows: max |err| / max |ref| and sum |err| / sum |ref|.
bool close_grads(const std::vector<double>& got, const std::vector<double>& ref, const ffpa::Tolerance& tol,
                 double* max_rel, double* l1) {
  double max_err = 0, max_ref = 0, sum_err = 0, sum_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got[i] - ref[i]);
    if (!(e == e)) return false;
    max_err = std::max(max_err, e), max_ref = std::max(max_ref, std::fabs(ref[i]));
    sum_err += e, sum_ref += std::fabs(ref[i]);
  }
  *max_rel = max_ref > 0 ? max_err / max_ref : max_err;
  *l1 = sum_ref > 0 ? sum_err / sum_ref : sum_err;
  return got.size() == ref.size() && *max_rel <= tol.atol && *l1 <= tol.max_rel_l1;
}

// One case on the current emulated arch: forward (impl_used must be `want`), then backward.
void run_case(const Case& c, const char* arch, ffpa::Impl want, std::mt19937& rng) {
  const int d = 64;
  Array q(c.b, c.hq, c.nq, d), k(c.b, c.hkv, c.nkv, d), v(c.b, c.hkv, c.nkv, d), o(c.b, c.hq, c.nq, d);
  Array dout(c.b, c.hq, c.nq, d), dq(c.b, c.hq, c.nq, d), dk(c.b, c.hkv, c.nkv, d), dv(c.b, c.hkv, c.nkv, d);
  const std::vector<double> qv = q.fill(rng, c.bf16), kv = k.fill(rng, c.bf16), vv = v.fill(rng, c.bf16);
  const std::vector<double> dov = dout.fill(rng, c.bf16);
  std::vector<float> lse(size_t(c.b) * c.hq * c.nq);
  const float scale = 1.f / std::sqrt(float(d));

  ffpa::ForwardArgs a;
  a.q = q.desc(c.bf16), a.k = k.desc(c.bf16), a.v = v.desc(c.bf16), a.out = o.desc(c.bf16);
  a.lse.data = lse.data();
  a.lse.shape[0] = c.b, a.lse.shape[1] = c.hq, a.lse.shape[2] = c.nq;
  a.lse.stride[0] = int64_t(c.hq) * c.nq, a.lse.stride[1] = c.nq, a.lse.stride[2] = 1;
  a.causal = c.causal, a.causal_top_left = c.top_left, a.scale = scale, a.impl = c.impl;
  a.mask.window_left = c.window_left, a.mask.window_right = c.window_right;
  ffpa::Impl used = ffpa::Impl::kAuto;
  a.impl_used = &used;
  const std::string label = std::string(c.name) + " arch=" + arch + (c.bf16 ? " bf16" : " fp16");
  ffpa::Status st = ffpa::forward(a);
  verdict(st.ok() && used == want, label + " forward ran impl '" + ffpa::impl_name(used) + "' (want '" +
                                       ffpa::impl_name(want) + "')" + (st.ok() ? "" : ": " + st.message));
  if (!st.ok()) return;

  ffpa::ref::BwdProblem p;
  p.b = c.b, p.hq = c.hq, p.hkv = c.hkv, p.nq = c.nq, p.nkv = c.nkv, p.d = d;
  p.causal = c.causal, p.causal_offset = c.top_left ? 0 : c.nkv - c.nq, p.scale = scale;
  p.window_left = c.window_left, p.window_right = c.window_right;
  const ffpa::ref::BwdGrads ref = ffpa::ref::attention_backward(p, qv, kv, vv, dov);
  const ffpa::Tolerance& ft = ffpa::tolerance(c.bf16 ? "bf16" : "fp16");
  double worst = 0, worst_lse = 0;
  const bool out_ok = close_elementwise(o.values(c.bf16), ref.o, ft.atol, ft.rtol, &worst);
  bool lse_ok = true;
  for (size_t i = 0; i < lse.size(); ++i) {
    const double e = std::isinf(ref.lse[i]) && lse[i] == ref.lse[i] ? 0 : std::fabs(lse[i] - ref.lse[i]);
    if (!(e <= ft.lse)) lse_ok = false;
    if (e > worst_lse || e != e) worst_lse = e;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, " forward out max|err| %.2e, lse max|err| %.2e", worst, worst_lse);
  verdict(out_ok && lse_ok, label + buf);
  // The comparison discriminates: the other causal alignment's reference must not pass
  // where it differs (Nq != Nkv).
  if (c.causal && c.nq != c.nkv && c.window_left < 0) {
    ffpa::ref::BwdProblem other = p;
    other.causal_offset = c.top_left ? c.nkv - c.nq : 0;
    const ffpa::ref::BwdGrads wrong = ffpa::ref::attention_backward(other, qv, kv, vv, dov);
    double w = 0;
    verdict(!close_elementwise(o.values(c.bf16), wrong.o, ft.atol, ft.rtol, &w),
            label + " the check refuses the other causal alignment's reference");
  }

  ffpa::BackwardArgs b;
  b.q = a.q, b.k = a.k, b.v = a.v, b.out = a.out, b.dout = dout.desc(c.bf16);
  b.dq = dq.desc(c.bf16), b.dk = dk.desc(c.bf16), b.dv = dv.desc(c.bf16);
  b.lse = a.lse, b.mask = a.mask, b.causal = c.causal, b.causal_top_left = c.top_left, b.scale = scale;
  std::vector<float> ws(size_t(ffpa::backward_workspace_floats(b)) + 64);
  b.workspace = ws.data();
  st = ffpa::backward(b);
  verdict(st.ok(), label + " backward ran" + (st.ok() ? "" : ": " + st.message));
  if (!st.ok()) return;
  const ffpa::Tolerance& bt = ffpa::tolerance(c.bf16 ? "bwd_bf16" : "bwd_fp16");
  std::string line = label + " backward";
  bool ok = true;
  const std::pair<const char*, std::pair<std::vector<double>, const std::vector<double>*>> grads[] = {
      {"dq", {dq.values(c.bf16), &ref.dq}}, {"dk", {dk.values(c.bf16), &ref.dk}}, {"dv", {dv.values(c.bf16), &ref.dv}}};
  for (const auto& [name, g] : grads) {
    double mr = 0, l1 = 0;
    ok = close_grads(g.first, *g.second, bt, &mr, &l1) && ok;
    std::snprintf(buf, sizeof buf, " %s:max=%.2e,l1=%.2e", name, mr, l1);
    line += buf;
  }
  verdict(ok, line);
}

// A call the arch has no code for: a clear error, no launch.
void expect_error(const char* arch, ffpa::Impl impl, ffpa::ErrorKind kind, const char* needle) {
  Array q(1, 1, 16, 64), k(1, 1, 16, 64), v(1, 1, 16, 64), o(1, 1, 16, 64);
  ffpa::ForwardArgs a;
  a.q = q.desc(false), a.k = k.desc(false), a.v = v.desc(false), a.out = o.desc(false);
  a.scale = 0.125f, a.impl = impl;
  const ffpa::Status st = ffpa::forward(a);
  verdict(!st.ok() && st.kind == kind && st.message.find(needle) != std::string::npos,
          std::string("arch=") + arch + " impl='" + ffpa::impl_name(impl) + "' refused naming '" + needle +
              "': " + (st.ok() ? "(no error)" : st.message));
}

}  // namespace

int main() {
  std::mt19937 rng(40);
  const Case cases[] = {
      // GQA 2:1, Nq < Nkv, bottom-right causal.
      {"gqa causal-bottom-right", false, 1, 2, 1, 40, 72, true, false},
      // Nq > Nkv, top-left causal, bf16, two batch entries.
      {"causal-top-left", true, 2, 2, 2, 72, 40, true, true},
      // A sliding window (left 16, right 0) with causal.
      {"window", false, 1, 2, 2, 48, 48, true, false, 16, 0},
  };
  struct ArchRun {
    const char* arch;
    ffpa::Impl auto_impl;  // impl='auto' on this arch (csrc/src/device.cpp, resolve_impl)
  };
  const ArchRun archs[] = {{"89", ffpa::Impl::kMma}, {"90", ffpa::Impl::kMma}, {"120f", ffpa::Impl::kTma}};
  int expected = 0;
  for (const ArchRun& r : archs) {
    setenv("FFPA_EMULATED_ARCH", r.arch, 1);
    for (const Case& c : cases) {
      run_case(c, r.arch, r.auto_impl, rng);
      expected += 4 + (c.causal && c.nq != c.nkv && c.window_left < 0 ? 1 : 0);
    }
  }
  // The TMA feed asked for by name where it runs (sm_90), and refused where it has no code.
  setenv("FFPA_EMULATED_ARCH", "90", 1);
  Case tma = cases[0];
  tma.name = "impl=tma gqa causal-bottom-right";
  tma.impl = ffpa::Impl::kTma;
  run_case(tma, "90", ffpa::Impl::kTma, rng);
  expected += 5;
  setenv("FFPA_EMULATED_ARCH", "89", 1);
  expect_error("89", ffpa::Impl::kTma, ffpa::ErrorKind::kImpl, "cannot run on this GPU (sm_89)");
  setenv("FFPA_EMULATED_ARCH", "75", 1);
  expect_error("75", ffpa::Impl::kAuto, ffpa::ErrorKind::kDevice, "set it to 89, 90 or 120f");
  expected += 2;
  // A fault inside a kernel (injected: q's last 16 bytes unreadable) is the call's kDevice
  // error naming the kernel and the fault, not the process's exit; the next call runs clean.
  setenv("FFPA_EMULATED_ARCH", "90", 1);
  setenv("FFPA_EMULATED_INJECT_FAULT", "short_read", 1);
  expect_error("90", ffpa::Impl::kAuto, ffpa::ErrorKind::kDevice,
               "mma forward kernel launch failed: the emulated device faulted: cp.async source outside the input "
               "arrays (block 0,0,0)");
  unsetenv("FFPA_EMULATED_INJECT_FAULT");
  run_case(cases[2], "90 (after a fault)", ffpa::Impl::kMma, rng);
  expected += 1 + 4;
  std::printf("%d checks, %d failed (expected %d checks)\n", g_checks, g_failed, expected);
  return g_failed == 0 && g_checks == expected ? 0 : 1;
}
