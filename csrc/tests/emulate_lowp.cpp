// CPU emulation of the low-precision forward (FP8 fed by cp.async and by TMA, NVFP4): the
// real quantisation pass (ffpa/lowp/quant.cuh) and the real CuTe kernel with a
// low-precision spec (ffpa/cute/fwd_kernel.cuh) run by the emulator's fibers, the FP8 and
// block-scaled mma modelled (emu/ffpa/lowp/mma.cuh), against the double-precision host
// reference on the same fp16 / bf16 inputs. Accuracy is judged as the tolerance table says
// (ffpa/tolerance.h: cosine similarity, relative L1, max abs, LSE), on inputs with the
// outliers real models have: a few K channels carrying offsets 10 to 50 times the rest
// (the smoothing's case), as well as plain unit-normal noise.
//   ffpa_emulate_kernels --lowp D...            the case list, every low-precision impl
//   ffpa_emulate_kernels --lowp-accuracy D...   the accuracy table (docs/install.md)
//   ffpa_emulate_kernels --lowp-breakages       deliberate breakages must fail
//   ffpa_emulate_kernels --lowp-nonfinite D...  NaN / inf as SDPA's math backend

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_ref.h"
#include "emu_lowp_quant.h"
#include "emu_params.h"
#include "emu_state.h"
#include "ffpa/cute/config.h"
#include "ffpa/fwd_kernel_simt.cuh"
#include "ffpa/nonfinite.h"
#include "ffpa/tolerance.h"

int run_lowp_cases(const std::vector<int>& dims);
int run_lowp_accuracy(const std::vector<int>& dims);
int run_lowp_breakages();
int run_lowp_nonfinite(const std::vector<int>& dims);

namespace {

using ffpa::Impl;
using ffpa::LowpLayout;
using ffpa::LowpQK;

// Breakages of the pass and the workspace (the kernel's own are emu::LowpVariant).
enum class PassBreak { kNone, kNoSmoothing, kNoVtPermutation, kNoLseShift };

void launch_kernel(int d, const emu::LowpLaunch& l, const ffpa::FwdParams& p) {
  switch (d) {
#define FFPA_EMU_HEAD_DIM(D) \
  case D:                    \
    return emu::launch_lowp_d##D(l, p);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  emu::fail("head dim not in the emulator's list");
}

const char* impl_label(Impl i) {
  return i == Impl::kCuteFp8 ? "cute_fp8" : i == Impl::kCuteTmaFp8 ? "cute_tma_fp8" : "cute_tma_fp4";
}

enum class Inputs { kNormal, kOutlierK };

struct LowpCase {
  int d;
  Impl impl;
  bool bf16;
  bool causal;
  int b, hq, hkv, nq, nkv;
  Inputs inputs;
  emu::LowpVariant variant = emu::LowpVariant::kDefault;
  PassBreak pass = PassBreak::kNone;
  // --lowp-nonfinite: one value planted in q, k or v (batch 0, head 0, row plant_row,
  // column 3); the check is then the NaN / inf rule (nonfinite_ok).
  char plant = 0;
  float plant_value = 0.f;
  int plant_row = 0;
  bool no_rerun = false;  // breakage: the SIMT rerun of the flagged heads left out
};

template <int D, typename T>
void simt_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_simt_kernel<D, T>(p);
}

// api.cu's second launch on the low-precision paths: the non-finite pre-pass over q, k
// and v, then the SIMT kernel on the flagged heads only (every other block returns).
template <typename T>
void rerun_nonfinite_heads(ffpa::FwdParams p, bool bf16) {
  std::vector<int> flags;
  emu::run_nonfinite_prepass(p, bf16, flags);
  p.nonfinite = flags.data();
  p.nonfinite_heads_only = true;
  p.lowp_ws = nullptr;
  constexpr int R = ffpa::FwdSimtTraits::kRowsPerBlock;
  const emu::Dim3 grid{unsigned((p.nq + R - 1) / R), unsigned(p.hq), unsigned(p.b)};
  switch (p.head_dim) {
#define FFPA_EMU_HEAD_DIM(D)                                                         \
  case D:                                                                            \
    return emu::launch(&simt_body<D, T>, p, grid, ffpa::FwdSimtTraits::kNThreads, 0);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  emu::fail("head dim not in the emulator's list");
}

struct Metrics {
  double cos = 0, rel_l1 = 0, max_abs = 0, lse = 0, gain = 0;
  // --lowp-nonfinite: entries whose NaN / inf differs from the math backend's, and finite
  // entries outside the bound (the planted head: the 16-bit SIMT kernel's atol; the others:
  // the low-precision atol).
  size_t pattern_diff = 0, far = 0;
};

template <typename T>
Metrics run_typed(const LowpCase& c, std::mt19937& rng) {
  using ET = ffpa::ElemTraits<T>;
  const int D = c.d;
  std::normal_distribution<float> dist(0.f, 1.f);
  // K outliers: four channels of every (batch, kv head) offset by 10, 20, 35 and 50 (signs
  // random) on top of their noise, as the K channel outliers of real models are.
  std::vector<float> offset(static_cast<size_t>(c.b) * c.hkv * D, 0.f);
  if (c.inputs == Inputs::kOutlierK) {
    const float mags[4] = {10.f, 20.f, 35.f, 50.f};
    std::uniform_int_distribution<int> pick(0, D - 1);
    for (int bh = 0; bh < c.b * c.hkv; ++bh)
      for (float m : mags) offset[size_t(bh) * D + pick(rng)] = (rng() & 1) ? m : -m;
  }
  auto make = [&](int H, int N, bool is_k, std::vector<float>& f, std::vector<T>& m) {
    f.resize(static_cast<size_t>(c.b) * H * N * D);
    m.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      const size_t bh = i / (size_t(N) * D);
      const float x = dist(rng) + (is_k ? offset[bh * D + i % D] : 0.f);
      m[i] = ET::from_float(x);
      f[i] = ET::to_float(m[i]);
    }
  };
  std::vector<float> q, k, v;
  std::vector<T> qm, km, vm;
  make(c.hq, c.nq, false, q, qm);
  make(c.hkv, c.nkv, true, k, km);
  make(c.hkv, c.nkv, false, v, vm);
  if (c.plant) {
    std::vector<float>& f = c.plant == 'q' ? q : c.plant == 'k' ? k : v;
    std::vector<T>& m = c.plant == 'q' ? qm : c.plant == 'k' ? km : vm;
    const size_t at = static_cast<size_t>(c.plant_row) * D + 3;  // batch 0, head 0
    m[at] = ET::from_float(c.plant_value);
    f[at] = ET::to_float(m[at]);
  }
  ffpa::ref::Problem pr;
  pr.b = c.b, pr.hq = c.hq, pr.hkv = c.hkv, pr.nq = c.nq, pr.nkv = c.nkv, pr.d = D, pr.causal = c.causal;
  pr.scale = 1.f / std::sqrt(static_cast<float>(D));
  std::vector<float> ref_o(q.size()), ref_lse(static_cast<size_t>(c.b) * c.hq * c.nq);
  ffpa::ref::attention(pr, q.data(), k.data(), v.data(), ref_o.data(), ref_lse.data());

  std::vector<T> om(qm.size(), ffpa::from_bits<T>(0xffff));
  std::vector<float> lse(ref_lse.size(), NAN);
  // The C API's arguments of this problem, made into the kernels' parameters by the
  // library's make_fwd_params (emu_params.h); the causal mask bottom-right (the top-left
  // alignment is the 16-bit tests').
  ffpa::ForwardArgs a;
  const ffpa::DType dt = c.bf16 ? ffpa::DType::kBf16 : ffpa::DType::kFp16;
  a.q = emu::dense(qm.data(), dt, c.b, c.hq, c.nq, D);
  a.k = emu::dense(km.data(), dt, c.b, c.hkv, c.nkv, D);
  a.v = emu::dense(vm.data(), dt, c.b, c.hkv, c.nkv, D);
  a.out = emu::dense(om.data(), dt, c.b, c.hq, c.nq, D);
  a.lse = emu::dense_lse(lse.data(), c.b, c.hq, c.nq);
  a.causal = c.causal;
  a.scale = pr.scale;
  ffpa::FwdParams p = ffpa::detail::make_fwd_params(a);
  const ffpa::CuteTileParams tile = ffpa::lowp_default_tile(D);
  const LowpQK qk = c.impl == Impl::kCuteTmaFp4 ? LowpQK::kNvfp4 : LowpQK::kFp8;
  p.lowp = ffpa::lowp_layout(qk, c.b, c.hq, c.hkv, c.nq, c.nkv, D, tile.block_m, tile.block_n);
  // The workspace as cudaMallocAsync may leave it: garbage where the pass writes nothing,
  // here 0xff (NaN as e4m3 and as fp32), so that a read of an unwritten byte shows.
  std::vector<unsigned char> ws_mem(p.lowp.bytes + 256, 0xff);
  unsigned char* ws = ws_mem.data() + (256 - reinterpret_cast<uintptr_t>(ws_mem.data()) % 256) % 256;
  p.lowp_ws = ws;
  // The kernel's cp.async and TMA reads must stay inside the workspace.
  emu::g_ranges = {{reinterpret_cast<const unsigned char*>(qm.data()), qm.size() * sizeof(T)},
                   {reinterpret_cast<const unsigned char*>(km.data()), km.size() * sizeof(T)},
                   {reinterpret_cast<const unsigned char*>(vm.data()), vm.size() * sizeof(T)},
                   {ws, p.lowp.bytes}};
  if (c.pass == PassBreak::kNoSmoothing) {
    emu_lowp::quantize<T, emu_lowp::NoSmoothing>(p, p.lowp, ws);
  } else if (c.pass == PassBreak::kNoVtPermutation) {
    emu_lowp::quantize<T, emu_lowp::NoVtPermutation>(p, p.lowp, ws);
  } else {
    emu_lowp::quantize<T>(p, p.lowp, ws);
  }
  if (c.pass == PassBreak::kNoLseShift)  // the smoothing's correction of the LSE forgotten
    std::memset(ws + p.lowp.lse_shift, 0, size_t(c.b) * c.hq * c.nq * sizeof(float));
  launch_kernel(D, {c.impl, c.variant}, p);
  if (!c.no_rerun) rerun_nonfinite_heads<T>(p, c.bf16);

  Metrics m;
  if (c.plant) {
    std::vector<float> want(q.size()), want_lse(lse.size());
    emu::math_rule_reference(pr, q, k, v, want, want_lse);
    const double atol16 = ffpa::tolerance(c.bf16 ? "bf16" : "fp16").atol;
    const double atol_lowp = ffpa::tolerance(c.impl == Impl::kCuteTmaFp4 ? "fp4" : "fp8").atol;
    const size_t head_elems = size_t(c.nq) * D;
    for (size_t i = 0; i < om.size(); ++i) {
      const float got = ET::to_float(om[i]);
      if (std::isnan(got) != std::isnan(want[i]) || std::isinf(got) != std::isinf(want[i]) ||
          (std::isinf(got) && got != want[i]))
        ++m.pattern_diff;
      else if (std::isfinite(got) && std::fabs(got - want[i]) > (i < head_elems ? atol16 : atol_lowp))
        ++m.far;
    }
    for (size_t i = 0; i < lse.size(); ++i)
      if (std::isnan(lse[i]) != std::isnan(want_lse[i])) ++m.pattern_diff;
    return m;
  }
  double dot = 0, no = 0, nr = 0, l1 = 0, l1r = 0;
  for (size_t i = 0; i < om.size(); ++i) {
    const double o = ET::to_float(om[i]), r = ref_o[i];
    dot += o * r, no += o * o, nr += r * r;
    l1 += std::fabs(o - r), l1r += std::fabs(r);
    const double e = std::fabs(o - r);
    m.max_abs = std::isnan(e) ? INFINITY : std::max(m.max_abs, e);
  }
  m.cos = no > 0 && nr > 0 ? dot / std::sqrt(no * nr) : (no == nr ? 1.0 : 0.0);
  m.gain = nr > 0 ? dot / nr : 1.0;
  m.rel_l1 = l1r > 0 ? l1 / l1r : l1;
  if (std::isnan(m.cos) || std::isnan(m.rel_l1) || std::isnan(m.gain)) m.cos = 0, m.rel_l1 = INFINITY, m.gain = 0;
  for (size_t i = 0; i < lse.size(); ++i) {
    const double e = (std::isinf(ref_lse[i]) && lse[i] == ref_lse[i]) ? 0.0 : std::fabs(lse[i] - ref_lse[i]);
    m.lse = std::isnan(e) ? INFINITY : std::max(m.lse, e);
  }
  return m;
}

bool within(const LowpCase& c, const Metrics& m) {
  const ffpa::Tolerance& t = ffpa::tolerance(c.impl == Impl::kCuteTmaFp4 ? "fp4" : "fp8");
  return m.cos >= t.min_cos && m.rel_l1 <= t.max_rel_l1 && m.max_abs <= t.atol && m.lse <= t.lse &&
         std::fabs(m.gain - 1.0) <= t.max_gain_err;
}

bool run(const LowpCase& c, std::mt19937& rng, Metrics* out = nullptr) {
  const Metrics m = c.bf16 ? run_typed<__nv_bfloat16>(c, rng) : run_typed<__half>(c, rng);
  const bool ok = within(c, m);
  std::printf("[%s] D=%d %s causal=%d B=%d Nq=%d Nkv=%d Hq=%d Hkv=%d impl=%s inputs=%s copies=%s cos=%.5f "
              "rel_l1=%.4f max_abs=%.4f lse_err=%.4f gain=%.4f\n",
              ok ? "PASS" : "FAIL", c.d, c.bf16 ? "bf16" : "fp16", c.causal, c.b, c.nq, c.nkv, c.hq, c.hkv,
              impl_label(c.impl), c.inputs == Inputs::kOutlierK ? "outlier-k" : "normal",
              emu::g_cp_late ? "late" : "early", m.cos, m.rel_l1, m.max_abs, m.lse, m.gain);
  std::fflush(stdout);
  if (out != nullptr) *out = m;
  return ok;
}

constexpr Impl kLowpImpls[] = {Impl::kCuteFp8, Impl::kCuteTmaFp8, Impl::kCuteTmaFp4};

bool run_nonfinite_case(const LowpCase& c, std::mt19937& rng) {
  const Metrics m = c.bf16 ? run_typed<__nv_bfloat16>(c, rng) : run_typed<__half>(c, rng);
  const bool ok = m.pattern_diff == 0 && m.far == 0;
  std::printf("[%s] lowp nonfinite D=%d causal=%d impl=%s plant=%c[%d]=%g%s pattern_diff=%zu far=%zu\n",
              ok ? "PASS" : "FAIL", c.d, c.causal, impl_label(c.impl), c.plant, c.plant_row, c.plant_value,
              c.no_rerun ? " (no SIMT rerun)" : "", m.pattern_diff, m.far);
  std::fflush(stdout);
  return ok;
}

}  // namespace

// --lowp-nonfinite D...: NaN and inf planted in q, k and v (head 0 of two; the causal
// mask hides key / value row 70 from rows 0-69, and query row 0 sees one key) on the FP8
// and NVFP4 kernels: the output is SDPA's math backend's NaN / inf pattern everywhere, the
// planted head within the 16-bit atol (api.cu reruns it on the SIMT kernel), the clean
// head within the low-precision atol. Then the breakage: without the rerun some case fails.
int run_lowp_nonfinite(const std::vector<int>& dims) {
  std::mt19937 rng(31);
  int failed = 0, total = 0;
  emu::g_cp_late = true;
  for (int d : dims)
    for (Impl impl : {Impl::kCuteFp8, Impl::kCuteTmaFp4})
      for (bool causal : {false, true})
        for (char plant : {'q', 'k', 'v'})
          for (float value : {NAN, INFINITY}) {
            LowpCase c{d, impl, false, causal, 1, 2, 1, 80, 80, Inputs::kNormal};
            c.plant = plant, c.plant_value = value, c.plant_row = plant == 'q' ? 0 : 70;
            ++total;
            if (!run_nonfinite_case(c, rng)) ++failed;
          }
  // The breakage: the FP8 cases of the first head dim without the rerun; some must fail.
  int broken_failed = 0;
  if (!dims.empty())
    for (bool causal : {false, true})
      for (char plant : {'q', 'k', 'v'})
        for (float value : {NAN, INFINITY}) {
          LowpCase c{dims.front(), Impl::kCuteFp8, false, causal, 1, 2, 1, 80, 80, Inputs::kNormal};
          c.plant = plant, c.plant_value = value, c.plant_row = plant == 'q' ? 0 : 70, c.no_rerun = true;
          if (!run_nonfinite_case(c, rng)) ++broken_failed;
        }
  const int missed = !dims.empty() && broken_failed == 0 ? 1 : 0;
  std::printf("[%s] lowp nonfinite breakage: the SIMT rerun of the flagged heads left out -> %d cases failed\n",
              missed ? "MISSED" : "CAUGHT", broken_failed);
  const int cases_verdict = emu::verdict("lowp nonfinite cases", total, failed, "failed");
  return emu::verdict("lowp nonfinite breakages", dims.empty() ? 0 : 1, missed, "missed", false) | cases_verdict;
}

// The case list of every low-precision impl: non-aligned Nq / Nkv over several KV blocks
// with GQA, a KV length shorter than one tile, Nq > Nkv (causal rows that see no key),
// batch 2 in bf16, no keys at all (the pass writes nothing); copies landing at issue and
// late; causal and not.
int run_lowp_cases(const std::vector<int>& dims) {
  std::mt19937 rng(23);
  int failed = 0, total = 0;
  for (int d : dims)
    for (Impl impl : kLowpImpls)
      for (bool late : {false, true})
        for (bool causal : {false, true}) {
          emu::g_cp_late = late;
          const LowpCase cases[] = {
              {d, impl, false, causal, 1, 2, 1, 83, 141, Inputs::kOutlierK},
              {d, impl, false, causal, 1, 1, 1, 19, 23, Inputs::kNormal},
              {d, impl, false, causal, 1, 1, 1, 70, 40, Inputs::kOutlierK},
              {d, impl, true, causal, 2, 2, 2, 64, 128, Inputs::kOutlierK},
              {d, impl, false, causal, 1, 2, 1, 17, 0, Inputs::kNormal},  // no keys: O = 0, LSE -inf
          };
          for (const LowpCase& c : cases) {
            ++total;
            if (!run(c, rng)) ++failed;
          }
        }
  return emu::verdict("lowp cases", total, failed, "failed");
}

// The accuracy table: per head dim, FP8 (the cp.async feed: the TMA feed computes the same
// numbers, and the case list runs both) and NVFP4, fp16 and bf16 inputs, 256 queries over
// 256 keys, two heads, both input kinds; one markdown row each (docs/install.md quotes
// them).
int run_lowp_accuracy(const std::vector<int>& dims) {
  std::mt19937 rng(5);
  int failed = 0;
  std::vector<std::string> rows;
  for (Impl impl : {Impl::kCuteFp8, Impl::kCuteTmaFp4})
    for (bool bf16 : {false, true})
      for (int d : dims)
        for (Inputs in : {Inputs::kNormal, Inputs::kOutlierK}) {
          const LowpCase c{d, impl, bf16, false, 1, 2, 2, 256, 256, in};
          Metrics m;
          if (!run(c, rng, &m)) ++failed;
          char buf[256];
          std::snprintf(buf, sizeof(buf), "| %s | %s | %d | %s | %.5f | %.4f | %.4f | %.4f | %.4f |",
                        impl == Impl::kCuteTmaFp4 ? "NVFP4" : "FP8", bf16 ? "bf16" : "fp16", d,
                        in == Inputs::kOutlierK ? "outlier K" : "normal", m.cos, m.rel_l1, m.max_abs, m.lse, m.gain);
          rows.emplace_back(buf);
        }
  std::printf("\n| path | dtype | D | inputs | cosine similarity | relative L1 | max abs | LSE max abs | gain |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& r : rows) std::printf("%s\n", r.c_str());
  return emu::verdict("accuracy rows", long(rows.size()), failed, "out of bounds");
}

// Each deliberate breakage runs one case in a child process with copies landing late and
// must fail (a fault or results outside the bounds); the controls must pass.
int run_lowp_breakages() {
  struct Break {
    const char* name;
    Impl impl;
    emu::LowpVariant variant;
    PassBreak pass;
    bool want_pass;
  };
  using V = emu::LowpVariant;
  const Break runs[] = {
      {"none (control, cute_fp8)", Impl::kCuteFp8, V::kDefault, PassBreak::kNone, true},
      {"none (control, cute_tma_fp4)", Impl::kCuteTmaFp4, V::kDefault, PassBreak::kNone, true},
      {"K quantised without its smoothing (outlier channels)", Impl::kCuteFp8, V::kDefault, PassBreak::kNoSmoothing,
       false},
      {"V^T without the token permutation P's register pack assumes", Impl::kCuteFp8, V::kDefault,
       PassBreak::kNoVtPermutation, false},
      {"the LSE without the smoothing's shift", Impl::kCuteTmaFp8, V::kDefault, PassBreak::kNoLseShift, false},
      {"P to e4m3 rounding toward zero", Impl::kCuteFp8, V::kTruncateP, PassBreak::kNone, false},
      {"NVFP4 scales of rows g and g + 8 in each other's lanes", Impl::kCuteTmaFp4, V::kSwapSfLanes, PassBreak::kNone,
       false},
      {"NVFP4 scales of a row in reverse byte order", Impl::kCuteTmaFp4, V::kReverseSfBytes, PassBreak::kNone, false},
  };
  int wrong = 0;
  for (const Break& r : runs) {
    const bool ok = emu::breakage_run(std::string("breakage: ") + r.name, r.want_pass, [&] {
      emu::g_cp_late = true;
      std::mt19937 rng(11);
      const LowpCase c{64, r.impl, false, true, 1, 2, 1, 83, 141, Inputs::kOutlierK, r.variant, r.pass};
      return run(c, rng);
    });
    if (!ok) ++wrong;
  }
  return emu::verdict("lowp breakage runs", long(sizeof(runs) / sizeof(runs[0])), wrong, "wrong");
}
