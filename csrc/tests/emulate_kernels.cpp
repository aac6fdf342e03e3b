// CPU emulation of the forward kernels (no GPU needed): the real kernel sources run
// with one fiber per CUDA thread, PTX instructions modelled from the ISA (emu/ffpa/
// utils.cuh), shared memory poisoned with NaN, cp.async either landing at issue or
// only at the wait_group that covers it (FFPA_EMU_CP=late), and every ldmatrix /
// cp.async address checked for range and 16-byte alignment. Results are compared
// with the fp32 host reference at the spec tolerances. This checks index arithmetic,
// fragment layouts, masking, the online softmax and the pipeline bookkeeping. Races,
// barrier misuse and stray stores are the sanitizer's (sanitize_kernels.cpp,
// docs/emulator.md): the same grid runner with every shared access checked.
//   ffpa_emulate_kernels [D ...]    (default: 64 128 320; ctest runs 64 320)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_ref.h"
#include "emu_cute.h"
#include "emu_params.h"
#include "emu_state.h"
#include "ffpa/fwd_kernel_mma.cuh"
#include "ffpa/fwd_kernel_simt.cuh"
#include "ffpa/nonfinite.cuh"
#include "ffpa/tma_geometry.h"
#include "ffpa/tolerance.h"


namespace {

ffpa::TmaMaps& g_maps = emu::g_tma_maps;  // the TMA launches' maps (the cp.async feed ignores them)
template <typename Traits, bool kF16Acc>
void mma_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<Traits, ffpa::Load::kCpAsync, kF16Acc, 1>(p, g_maps);
}
// fp16 accumulation with the per-mma P V form (what sm_80-sm_89 compile; see
// kPvPerStepDefault): the emulator's default is the per-pair form.
template <typename Traits>
void mma_pv_step_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<Traits, ffpa::Load::kCpAsync, true, 2>(p, g_maps);
}
template <typename Traits, bool kF16Acc>
void tma_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<Traits, ffpa::Load::kTma, kF16Acc, 1>(p, g_maps);
}
template <int D, typename T>
void simt_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_simt_kernel<D, T>(p);
}
// The mma kernel with the causal mask replacing scores under the math rule (breakage).
template <typename Traits>
void mma_mask_replace_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<Traits, ffpa::Load::kCpAsync, false, 1, ffpa::MaskBreak::kNone, false, true>(p, g_maps);
}

// The non-finite pre-pass (ffpa/nonfinite.cuh), as api.cu launches it for causal calls,
// and the two breakages of the math rule (--nonfinite-breakages): no pre-pass (the flags
// ignored) and the mma kernel replacing masked scores instead of adding -inf.
enum class NonfiniteMode { kScan, kNoFlags, kMaskReplace };
NonfiniteMode g_nonfinite_mode = NonfiniteMode::kScan;
const ffpa::NonfiniteScan* g_scan = nullptr;
void nonfinite_body(const ffpa::FwdParams&) { ffpa::ffpa_nonfinite_kernel(*g_scan); }

}  // namespace

void emu::run_nonfinite_scan(const ffpa::NonfiniteScan& s, int b) {
  g_scan = &s;
  emu::launch(&nonfinite_body, ffpa::FwdParams{}, {unsigned(s.grid_x()), unsigned(s.total_heads), unsigned(b)},
              ffpa::NonfiniteScan::kNThreads, 0);
  g_scan = nullptr;
}

// Runs the pre-pass over q, k and v of p ([B, H, N, D] with the given strides) into flags.
void emu::run_nonfinite_prepass(const ffpa::FwdParams& p, bool bf16, std::vector<int>& flags) {
  flags.assign(static_cast<size_t>(p.b) * p.hq, 0);
  ffpa::NonfiniteScan scan;
  const int64_t d = p.head_dim;
  const int64_t q_shape[4] = {p.b, p.hq, p.nq, d}, kv_shape[4] = {p.b, p.hkv, p.nkv, d};
  const int64_t q_stride[4] = {p.q_batch_stride, p.q_head_stride, p.q_row_stride, 1};
  const int64_t k_stride[4] = {p.k_batch_stride, p.k_head_stride, p.k_row_stride, 1};
  const int64_t v_stride[4] = {p.v_batch_stride, p.v_head_stride, p.v_row_stride, 1};
  scan.add(p.q, q_shape, q_stride);
  scan.add(p.k, kv_shape, k_stride);
  scan.add(p.v, kv_shape, v_stride);
  scan.hq = p.hq, scan.h_ratio = p.h_ratio, scan.d = p.head_dim;
  scan.exp_mask = bf16 ? 0x7f80 : 0x7c00;
  scan.flags = flags.data();
  emu::run_nonfinite_scan(scan, p.b);
}

namespace {


enum class Kind { kMma, kSimt, kTma, kCute, kCuteTma };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kMma:
      return "mma";
    case Kind::kSimt:
      return "simt";
    case Kind::kTma:
      return "tma";
    case Kind::kCute:
      return "cute";
    case Kind::kCuteTma:
      return "cute_tma";
  }
  return "unknown";
}

struct Case {
  int d;
  bool bf16;
  bool causal;
  int nq, nkv, hq, hkv;
  Kind kind;
  int b = 1;
  bool f16acc = false;   // fp16 accumulation (fp16 inputs, mma / tma)
  bool pv_step = false;  // with f16acc on mma: the per-mma P V form
  // --nonfinite: one value planted in q, k or v (batch 0, head 0, row plant_row, column 3);
  // the check is then the rule of every path (SDPA's math backend, docs/install.md).
  char plant = 0;
  float plant_value = 0.f;
  int plant_row = 0;
  int plant_batch = 0;
  bool top_left = false;  // causal aligned top-left (FwdParams::causal_offset 0)
};

// SDPA's math backend on one problem, in double, the reference of --nonfinite: scores
// q k^T * scale with the causal mask ADDED as -inf (a NaN or +inf score stays NaN under
// it), softmax (a row with a NaN or +inf score is NaN; a row whose every score is -inf
// gives 0), then P V over every key (0 * inf and 0 * NaN are NaN). Causal aligned as the
// problem says (bottom-right, or top-left with top_left).
// The LSE: -inf for a row whose every score is -inf, NaN for a row with a NaN sum (a NaN or
// +inf score; the kernels write NaN there, ffpa/mask.h row_lse). (emu_state.h declares it:
// the low-precision driver checks against it too.)
}  // namespace

void emu::math_rule_reference(const ffpa::ref::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<float>& out, std::vector<float>& lse) {
  const int d = p.d;
  std::vector<double> s(p.nkv);
  for (int b = 0; b < p.b; ++b)
    for (int h = 0; h < p.hq; ++h) {
      const int hk = h / (p.hq / p.hkv);
      for (int i = 0; i < p.nq; ++i) {
        const float* qi = &q[((static_cast<size_t>(b) * p.hq + h) * p.nq + i) * d];
        bool all_neg_inf = true;
        double mx = -INFINITY;
        bool any_nan = false;
        for (int j = 0; j < p.nkv; ++j) {
          const float* kj = &k[((static_cast<size_t>(b) * p.hkv + hk) * p.nkv + j) * d];
          double dot = 0.0;
          for (int c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
          double x = dot * p.scale;
          if (p.causal && j > i + (p.top_left ? 0 : p.nkv - p.nq)) x = x + -INFINITY;
          s[j] = x;
          any_nan = any_nan || std::isnan(x);
          all_neg_inf = all_neg_inf && x == -INFINITY;
          if (!std::isnan(x)) mx = std::max(mx, x);
        }
        float* o = &out[((static_cast<size_t>(b) * p.hq + h) * p.nq + i) * d];
        float* lse_i = &lse[(static_cast<size_t>(b) * p.hq + h) * p.nq + i];
        if (all_neg_inf) {
          // P = 0 (the safe softmax), and P V a matrix product: 0 * NaN / inf is NaN.
          for (int c = 0; c < d; ++c) {
            double acc = 0.0;
            for (int j = 0; j < p.nkv; ++j) acc += 0.0 * v[((static_cast<size_t>(b) * p.hkv + hk) * p.nkv + j) * d + c];
            o[c] = static_cast<float>(acc);
          }
          *lse_i = -INFINITY;
          continue;
        }
        double sum = 0.0;
        for (int j = 0; j < p.nkv; ++j) sum += any_nan ? NAN : std::exp(s[j] - mx);
        *lse_i = static_cast<float>(mx + std::log(sum));
        for (int c = 0; c < d; ++c) {
          double acc = 0.0;
          for (int j = 0; j < p.nkv; ++j) {
            const double pj = any_nan ? NAN : std::exp(s[j] - mx) / sum;
            acc += pj * v[((static_cast<size_t>(b) * p.hkv + hk) * p.nkv + j) * d + c];
          }
          o[c] = static_cast<float>(acc);
        }
      }
    }
}

namespace {

// One launch of the CuTe kernel of head dim D (its own translation unit per head dim:
// emu/emu_cute.h).
emu::CuteVariant g_cute_variant = emu::CuteVariant::kDefault;  // --breakages-cute
void launch_cute(int d, const Case& c, const ffpa::FwdParams& p) {
  const emu::CuteLaunch l{c.kind == Kind::kCuteTma, c.bf16, c.f16acc, c.b, c.hq, c.nq, g_cute_variant};
  switch (d) {
#define FFPA_EMU_HEAD_DIM(D) \
  case D:                    \
    return emu::launch_cute_d##D(l, p);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  emu::fail("head dim not in the emulator's list");
}

template <int D, typename T>
bool run_case(const Case& c, std::mt19937& rng) {
  using ET = ffpa::ElemTraits<T>;
  const int B = c.b;
  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](int H, int N, std::vector<float>& f, std::vector<T>& m) {
    f.resize(static_cast<size_t>(B) * H * N * D);
    m.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      m[i] = ET::from_float(dist(rng));
      f[i] = ET::to_float(m[i]);
    }
  };
  std::vector<float> q, k, v;
  std::vector<T> qm, km, vm;
  make(c.hq, c.nq, q, qm);
  make(c.hkv, c.nkv, k, km);
  make(c.hkv, c.nkv, v, vm);
  if (c.plant) {
    std::vector<float>& f = c.plant == 'q' ? q : c.plant == 'k' ? k : v;
    std::vector<T>& m = c.plant == 'q' ? qm : c.plant == 'k' ? km : vm;
    const int H = c.plant == 'q' ? c.hq : c.hkv, N = c.plant == 'q' ? c.nq : c.nkv;  // head 0
    const size_t at = ((static_cast<size_t>(c.plant_batch) * H) * N + c.plant_row) * D + 3;
    m[at] = ET::from_float(c.plant_value);
    f[at] = ET::to_float(m[at]);
  }
  ffpa::ref::Problem pr;
  pr.b = B, pr.hq = c.hq, pr.hkv = c.hkv, pr.nq = c.nq, pr.nkv = c.nkv, pr.d = D, pr.causal = c.causal;
  pr.top_left = c.top_left;
  pr.scale = 1.f / std::sqrt(static_cast<float>(D));
  std::vector<float> ref_o(q.size()), ref_lse(static_cast<size_t>(B) * c.hq * c.nq);
  ffpa::ref::attention(pr, q.data(), k.data(), v.data(), ref_o.data(), ref_lse.data());

  std::vector<T> om(qm.size(), ffpa::from_bits<T>(0xffff));
  std::vector<float> lse(ref_lse.size(), NAN);
  // Inputs sit in arrays with no slack, so an out-of-range read is a fault.
  emu::g_ranges = {{reinterpret_cast<const unsigned char*>(qm.data()), qm.size() * 2},
                   {reinterpret_cast<const unsigned char*>(km.data()), km.size() * 2},
                   {reinterpret_cast<const unsigned char*>(vm.data()), vm.size() * 2}};
  // The C API's arguments of this problem, made into the kernels' parameters by the
  // library's make_fwd_params (emu_params.h).
  ffpa::ForwardArgs a;
  const ffpa::DType dt = c.bf16 ? ffpa::DType::kBf16 : ffpa::DType::kFp16;
  a.q = emu::dense(qm.data(), dt, B, c.hq, c.nq, D);
  a.k = emu::dense(km.data(), dt, B, c.hkv, c.nkv, D);
  a.v = emu::dense(vm.data(), dt, B, c.hkv, c.nkv, D);
  a.out = emu::dense(om.data(), dt, B, c.hq, c.nq, D);
  a.lse = emu::dense_lse(lse.data(), B, c.hq, c.nq);
  a.causal = c.causal;
  a.causal_top_left = c.top_left;
  a.scale = pr.scale;
  a.accum = c.f16acc ? ffpa::Accum::kFp16 : ffpa::Accum::kFp32;
  ffpa::FwdParams p = ffpa::detail::make_fwd_params(a);
  std::vector<int> flags;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (c.causal && g_nonfinite_mode != NonfiniteMode::kNoFlags) {
    emu::run_nonfinite_prepass(p, c.bf16, flags);
    p.nonfinite = flags.data();
  }
  const auto t1 = Clock::now();
  using Traits = ffpa::DefaultFwdMmaTraits<D, T>;
  const emu::Dim3 grid{unsigned((c.nq + Traits::kBlockM - 1) / Traits::kBlockM), unsigned(c.hq), unsigned(B)};
  if (c.kind == Kind::kMma && g_nonfinite_mode == NonfiniteMode::kMaskReplace) {
    emu::launch(&mma_mask_replace_body<Traits>, p, grid, Traits::kNThreads, Traits::kSmemBytes);
  } else if (c.kind == Kind::kMma) {
    emu::launch(c.pv_step ? &mma_pv_step_body<Traits> : c.f16acc ? &mma_body<Traits, true> : &mma_body<Traits, false>,
                p, grid, Traits::kNThreads, Traits::kSmemBytes);
  } else if (c.kind == Kind::kTma) {
    // The launcher's geometry (ffpa/tma_geometry.h), encoded by the model of the driver
    // call. (The emulated shared memory starts 1024-aligned, so the kernel's round-up
    // of the base is a no-op here; the TMA model checks the 1024-byte alignment.)
    g_maps.q = emu::encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, Traits::kBlockM));
    g_maps.k = emu::encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, Traits::kBlockN));
    g_maps.v = emu::encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, Traits::kBlockN));
    emu::launch(c.f16acc ? &tma_body<Traits, true> : &tma_body<Traits, false>, p, grid, Traits::kNThreads,
                Traits::kSmemBytesTma);
  } else if (c.kind == Kind::kCute || c.kind == Kind::kCuteTma) {
    launch_cute(D, c, p);
  } else {
    constexpr int R = ffpa::FwdSimtTraits::kRowsPerBlock;
    emu::launch(&simt_body<D, T>, p, {unsigned((c.nq + R - 1) / R), unsigned(c.hq), unsigned(B)},
                ffpa::FwdSimtTraits::kNThreads, 0);
  }
  const auto t2 = Clock::now();
  // The pre-pass's emulated time next to the kernel's (docs/install.md quotes it; the
  // emulator's times say nothing of a GPU's).
  char timing[96] = "";
  if (c.causal)
    std::snprintf(timing, sizeof timing, " emu_ms prepass=%.1f kernel=%.1f",
                  std::chrono::duration<double, std::milli>(t1 - t0).count(),
                  std::chrono::duration<double, std::milli>(t2 - t1).count());
  if (c.plant) {
    // The NaN / inf pattern must be the math backend's exactly; finite values within atol.
    std::vector<float> want(q.size()), want_lse(lse.size());
    emu::math_rule_reference(pr, q, k, v, want, want_lse);
    const ffpa::Tolerance& tol = ffpa::tolerance(c.bf16 ? "bf16" : "fp16");
    size_t nan_diff = 0, inf_diff = 0, far = 0;
    auto check = [&](float got, float w, float atol) {
      if (std::isnan(got) != std::isnan(w)) ++nan_diff;
      else if (std::isinf(got) != std::isinf(w) || (std::isinf(got) && got != w)) ++inf_diff;
      else if (std::isfinite(got) && std::fabs(got - w) > atol) ++far;
    };
    for (size_t i = 0; i < om.size(); ++i) check(ET::to_float(om[i]), want[i], tol.atol);
    // The LSE too: NaN where the row's softmax sum is NaN (the backward reads it).
    size_t lse_diff = nan_diff + inf_diff + far;
    for (size_t i = 0; i < lse.size(); ++i) check(lse[i], want_lse[i], tol.lse);
    lse_diff = nan_diff + inf_diff + far - lse_diff;
    const bool ok = nan_diff == 0 && inf_diff == 0 && far == 0;
    std::printf("[%s] nonfinite D=%d %s causal=%d%s B=%d Nq=%d Nkv=%d impl=%s plant=%c[b%d,%d]=%g nan_diff=%zu "
                "inf_diff=%zu far=%zu (lse %zu)%s\n", ok ? "PASS" : "FAIL", D, c.bf16 ? "bf16" : "fp16", c.causal,
                c.top_left ? " top-left" : "", B, c.nq, c.nkv,
                kind_name(c.kind), c.plant, c.plant_batch, c.plant_row, c.plant_value, nan_diff, inf_diff, far, lse_diff,
                timing);
    std::fflush(stdout);
    return ok;
  }
  float out_err = 0.f, lse_err = 0.f, max_ref = 0.f;
  for (size_t i = 0; i < om.size(); ++i) {
    const float e = std::fabs(ET::to_float(om[i]) - ref_o[i]);
    out_err = std::isnan(e) ? INFINITY : std::max(out_err, e);
    max_ref = std::max(max_ref, std::fabs(ref_o[i]));
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    const float e = (std::isinf(ref_lse[i]) && lse[i] == ref_lse[i]) ? 0.f : std::fabs(lse[i] - ref_lse[i]);
    lse_err = std::isnan(e) ? INFINITY : std::max(lse_err, e);
  }
  // The path's tolerance (ffpa/tolerance.h): its atol bounds the output, its lse the LSE.
  const ffpa::Tolerance& tol = ffpa::tolerance(c.f16acc ? "fp16_acc" : c.bf16 ? "bf16" : "fp16");
  const bool ok = out_err <= tol.atol && lse_err <= tol.lse;
  std::printf("[%s] D=%d %s causal=%d%s B=%d Nq=%d Nkv=%d Hq=%d Hkv=%d impl=%s accum=%s copies=%s out_err=%.3e rel_err=%.3e lse_err=%.3e%s\n",
              ok ? "PASS" : "FAIL", D, c.bf16 ? "bf16" : "fp16", c.causal, c.top_left ? " top-left" : "", B, c.nq, c.nkv,
              c.hq, c.hkv,
              kind_name(c.kind), c.pv_step ? "fp16/pv-per-mma" : c.f16acc ? "fp16" : "fp32", emu::g_cp_late ? "late" : "early", out_err,
              max_ref > 0.f ? out_err / max_ref : out_err, lse_err, timing);
  std::fflush(stdout);
  return ok;
}

template <int D>
bool run_dim(const Case& c, std::mt19937& rng) {
  return c.bf16 ? run_case<D, __nv_bfloat16>(c, rng) : run_case<D, __half>(c, rng);
}

// The head dims this emulator instantiates come from the release matrix at configure
// time (emu_head_dims.inc, generated by csrc/CMakeLists.txt), plus 576 for the 2x4
// warp layout.
bool dispatch(const Case& c, std::mt19937& rng) {
  switch (c.d) {
#define FFPA_EMU_HEAD_DIM(D) \
  case D:                    \
    return run_dim<D>(c, rng);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  std::fprintf(stderr, "head dim %d is not in the emulator's list (%s)\n", c.d, FFPA_EMU_HEAD_DIMS_TEXT);
  std::exit(2);
}

}  // namespace

// --release D...: the release's coverage run (label slow): for every head dim, one fp16
// case (batch 2, causal, GQA 4:2, non-aligned Nq < Nkv) and one bf16 case (batch 2,
// non-causal, Nq > Nkv) on the cp.async and TMA feeds of the mma and the CuTe kernels,
// and the fp16 case with fp16 accumulation on all four, with copies completing late.
int run_release(const std::vector<int>& dims) {
  std::mt19937 rng(7);
  int failed = 0, total = 0;
  emu::g_cp_late = true;
  for (int d : dims)
    for (Kind kind : {Kind::kMma, Kind::kTma, Kind::kCute, Kind::kCuteTma}) {
      Case fp16_case{d, false, true, 70, 100, 4, 2, kind, 2};
      Case bf16_case{d, true, false, 90, 50, 2, 2, kind, 2};
      Case f16acc_case = fp16_case;
      f16acc_case.f16acc = true;
      for (const Case& c : {fp16_case, bf16_case, f16acc_case}) {
        ++total;
        if (!dispatch(c, rng)) ++failed;
      }
    }
  return emu::verdict("release cases", total, failed, "failed");
}

// The case list every kernel kind runs: non-aligned Nq / Nkv over several KV blocks
// with GQA; a KV length shorter than one tile; Nq > Nkv (causal rows that see no key);
// one bf16 case.
std::vector<Case> standard_cases(int d, bool causal, Kind kind, bool f16acc, bool pv_step) {
  std::vector<Case> cases = {
      {d, false, causal, 83, 141, 2, 1, kind},
      {d, false, causal, 19, 23, 1, 1, kind},
      {d, false, causal, 70, 40, 1, 1, kind},
      {d, true, causal, 64, 128, 2, 2, kind},
  };
  if (causal) {
    // SDPA's top-left alignment (FwdParams::causal_offset 0) over every key: Nq < Nkv,
    // and Nq > Nkv (rows past Nkv see every key).
    Case nq_lt{d, false, true, 45, 141, 2, 1, kind}, nq_gt{d, false, true, 100, 70, 2, 2, kind};
    nq_lt.top_left = nq_gt.top_left = true;
    cases.insert(cases.end() - 1, {nq_lt, nq_gt});  // before the bf16 case, which f16acc drops
  }
  if (f16acc) {
    cases.pop_back();  // fp16 accumulation takes fp16 inputs only
    for (Case& c : cases) c.f16acc = true, c.pv_step = pv_step;
  }
  return cases;
}

// --nonfinite D...: NaN and +-inf planted in q, k and v for every kernel kind, causal and
// not, against SDPA's math backend (math_rule_reference): the NaN / inf pattern exactly,
// the rest within atol. Without the causal mask the plant sits in key / query row 0 and 70;
// with it, only where every row that the plant reaches also sees it (key 0, query row 70).
// --nonfinite-masked adds the plants the causal mask hides from some rows (key 70, query
// row 0): SDPA's math backend adds the mask to a NaN / inf score (NaN) and multiplies
// masked V by 0 (NaN), which the kernels reproduce for the heads the pre-pass flags
// (ffpa/mask.h). kinds: the kernel kinds to run (default all five).
int run_nonfinite(const std::vector<int>& dims, bool masked, const std::vector<Kind>& kinds, bool masked_only = false) {
  std::mt19937 rng(5);
  int failed = 0, total = 0;
  for (int d : dims)
    for (Kind kind : kinds)
      for (bool causal : {false, true})
        for (char plant : {'q', 'k', 'v'})
          for (float value : {NAN, INFINITY, -INFINITY})
            for (int row : {0, 70}) {
              const bool hidden = causal && (plant == 'q' ? row == 0 : row == 70);
              if ((hidden && !masked) || (!hidden && masked_only)) continue;
              Case c{d, false, causal, 80, 80, 2, 1, kind};
              c.plant = plant, c.plant_value = value, c.plant_row = row;
              ++total;
              if (!dispatch(c, rng)) ++failed;
            }
  // Masked: also an inf in V of batch 1 (the flags' batch index) with Nq 100 > Nkv 80, so
  // that rows 0-19 see no key and are NaN by P V's 0 * inf.
  if (masked)
    for (int d : dims)
      for (Kind kind : kinds) {
        Case c{d, false, true, 100, 80, 2, 1, kind, 2};
        c.plant = 'v', c.plant_value = INFINITY, c.plant_row = 70, c.plant_batch = 1;
        ++total;
        if (!dispatch(c, rng)) ++failed;
      }
  // Masked: top-left with Nq 40 < Nkv 100 (SDPA's is_causal), a NaN / inf in key or value
  // row 70, which no query row sees: the math backend makes every row NaN, so every key
  // must reach the kernel (the op passes all Nkv, not the first Nq).
  if (masked)
    for (int d : dims)
      for (Kind kind : kinds)
        for (char plant : {'k', 'v'})
          for (float value : {NAN, INFINITY}) {
            Case c{d, false, true, 40, 100, 2, 1, kind};
            c.top_left = true, c.plant = plant, c.plant_value = value, c.plant_row = 70;
            ++total;
            if (!dispatch(c, rng)) ++failed;
          }
  return emu::verdict("nonfinite cases", total, failed, "failed");
}

// --nonfinite-breakages D: the plants the causal mask hides, on the mma kernel, with the
// math rule broken (no pre-pass flags; masked scores replaced instead of added): each
// must fail some case; the control (the pre-pass and the additive mask) must pass.
int run_nonfinite_breakages(int d) {
  const std::pair<NonfiniteMode, const char*> modes[] = {
      {NonfiniteMode::kScan, "none (control)"},
      {NonfiniteMode::kNoFlags, "the pre-pass's flags ignored"},
      {NonfiniteMode::kMaskReplace, "masked scores replaced by -inf instead of -inf added"},
  };
  int wrong = 0;
  // The inner runs' counts are not this run's (--expect counts the breakage runs).
  const long expect = emu::g_expect_cases;
  emu::g_expect_cases = -1;
  for (const auto& [mode, name] : modes) {
    g_nonfinite_mode = mode;
    const bool passed = run_nonfinite({d}, true, {Kind::kMma}, true) == 0;
    const bool want_pass = mode == NonfiniteMode::kScan;
    const bool ok = passed == want_pass;
    std::printf("[%s] nonfinite breakage: %s -> %s\n", ok ? (want_pass ? "PASS" : "CAUGHT") : "MISSED", name,
                passed ? "passed" : "failed");
    if (!ok) ++wrong;
  }
  g_nonfinite_mode = NonfiniteMode::kScan;
  emu::g_expect_cases = expect;
  return emu::verdict("nonfinite breakage runs", long(sizeof(modes) / sizeof(modes[0])), wrong, "wrong");
}

// --breakages D: each deliberate breakage of the TMA protocol (emu::Break) runs one
// TMA case in a child process with copies landing late, and must make it fail (a
// fault or wrong results); the unbroken control run must pass.
int run_breakages(int d) {
  const std::pair<emu::Break, const char*> breaks[] = {
      {emu::Break::kNone, "none (control)"},
      {emu::Break::kNoExpectTx, "arrive without expect_tx"},
      {emu::Break::kShortExpectTx, "expect_tx of half the bytes"},
      {emu::Break::kWrongParity, "wait on the wrong phase parity"},
      {emu::Break::kNoWait, "read the stage without waiting on its mbarrier"},
      {emu::Break::kNoFence, "no fence.mbarrier_init after init"},
      {emu::Break::kNoSwizzle, "TMA box without the 128-byte swizzle"},
  };
  int wrong = 0;
  for (const auto& [br, name] : breaks) {
    const emu::Break brk = br;
    const bool ok = emu::breakage_run(std::string("breakage: ") + name, brk == emu::Break::kNone, [&] {
      emu::g_break = brk;
      emu::g_cp_late = true;
      std::mt19937 rng(11);
      const Case c{d, false, true, 83, 141, 2, 1, Kind::kTma};
      return dispatch(c, rng);
    });
    if (!ok) ++wrong;
  }
  return emu::verdict("breakage runs", long(sizeof(breaks) / sizeof(breaks[0])), wrong, "wrong");
}

// --breakages-cute: the CuTe kernel's breakages. The instruction-model ones of
// run_breakages (TMA protocol) on cute_tma, a cp.async wait that does not wait on
// cute, and the source-level ones (emu::CuteVariant: a swapped traits policy each),
// every one in a child process with copies landing late; it must make its run fail
// while the unbroken controls pass.
int run_cute_breakages() {
  struct Run {
    const char* name;
    Kind kind;
    int d;
    bool bf16;
    emu::Break br;
    emu::CuteVariant variant;
  };
  using B = emu::Break;
  using V = emu::CuteVariant;
  const Run runs[] = {
      {"none (control, cute D=64)", Kind::kCute, 64, false, B::kNone, V::kDefault},
      {"none (control, cute_tma D=64)", Kind::kCuteTma, 64, false, B::kNone, V::kDefault},
      {"none (control, cute D=320, 4x2)", Kind::kCute, 320, false, B::kNone, V::kDefault},
      {"none (control, cute D=64 bf16)", Kind::kCute, 64, true, B::kNone, V::kDefault},
      {"cute_tma: arrive without expect_tx", Kind::kCuteTma, 64, false, B::kNoExpectTx, V::kDefault},
      {"cute_tma: expect_tx of half the bytes", Kind::kCuteTma, 64, false, B::kShortExpectTx, V::kDefault},
      {"cute_tma: wait on the wrong phase parity", Kind::kCuteTma, 64, false, B::kWrongParity, V::kDefault},
      {"cute_tma: read a stage without waiting on its mbarrier", Kind::kCuteTma, 64, false, B::kNoWait, V::kDefault},
      {"cute_tma: no fence.mbarrier_init after init", Kind::kCuteTma, 64, false, B::kNoFence, V::kDefault},
      {"cute_tma: TMA box without the 128-byte swizzle", Kind::kCuteTma, 64, false, B::kNoSwizzle, V::kDefault},
      {"cute: cp.async.wait_group that does not wait", Kind::kCute, 64, false, B::kCpNoWait, V::kDefault},
      {"cute_tma: shared tiles with a 64-byte swizzle (wrong swizzle)", Kind::kCuteTma, 64, false, B::kNone,
       V::kSwizzle64},
      {"cute: K's copy atom runs ldmatrix.trans under the plain atom's layouts", Kind::kCute, 64, false, B::kNone,
       V::kKTransAtom},
      {"cute D=320: warps row-major in the tiled MMA (wrong partition for the 4x2 exchange)", Kind::kCute, 320, false,
       B::kNone, V::kWarpOrderDMajor},
      {"cute: bf16 data through the fp16 mma atom", Kind::kCute, 64, true, B::kNone, V::kFp16AtomForBf16},
  };
  int wrong = 0;
  for (const Run& r : runs) {
    const bool want_pass = r.br == B::kNone && r.variant == V::kDefault;
    const bool ok = emu::breakage_run(std::string("breakage: ") + r.name, want_pass, [&] {
      emu::g_break = r.br;
      g_cute_variant = r.variant;
      emu::g_cp_late = true;
      std::mt19937 rng(11);
      const Case c{r.d, r.bf16, true, 83, 141, 2, 1, r.kind};
      return dispatch(c, rng);
    });
    if (!ok) ++wrong;
  }
  return emu::verdict("CuTe breakage runs", long(sizeof(runs) / sizeof(runs[0])), wrong, "wrong");
}

// ffpa_emulate_kernels [--kinds mma,simt,tma,f16acc] D...   the standard cases (f16acc:
//                                                            mma in both P V forms, tma)
// ffpa_emulate_kernels --release D...                         the release coverage run
// ffpa_emulate_kernels --breakages D                          the TMA protocol breakages
// ffpa_emulate_kernels --breakages-cute                       the CuTe kernel's breakages
// ffpa_emulate_kernels --nonfinite[-masked] D...              NaN / inf as SDPA's math backend
// ffpa_emulate_kernels --nonfinite-breakages D                the math rule's breakages
// ffpa_emulate_kernels --lowp-quant                           the low-precision quantisation pass
// ffpa_emulate_kernels --lowp D... | --lowp-accuracy D... | --lowp-breakages | --lowp-nonfinite D...
//                                                             the low-precision kernels (emulate_lowp.cpp)
//   kinds: mma, simt, tma, f16acc, cute, cute_tma, cute_f16acc (cute and cute_tma with
//   fp16 accumulation)
int run_lowp_quant_tests();  // emulate_lowp_quant.cpp
int run_lowp_cases(const std::vector<int>& dims);  // emulate_lowp.cpp
int run_lowp_accuracy(const std::vector<int>& dims);
int run_lowp_breakages();
int run_lowp_nonfinite(const std::vector<int>& dims);
// ffpa_emulate_kernels --bwd[-tma] D... | --bwd[-tma]-release D... | --bwd-breakages | --bwd-tma-breakages
//                                                             the backward kernels (emulate_bwd.cpp)
int run_bwd_cases(const std::vector<int>& dims, bool tma);
int run_bwd_tma_breakages();
int run_bwd_release(const std::vector<int>& dims, bool tma);
int run_bwd_breakages();
// ffpa_emulate_kernels --masks[-release] [--late-only] D... | --masks-breakages    the sliding window, key padding and
//                                                        varlen, forward and backward (emulate_masks.cpp)
int run_mask_cases(const std::vector<int>& dims, bool release, bool late_only);
int run_mask_breakages();
// ffpa_emulate_kernels --masks-cute-nonfinite D... | --masks-cute-breakages    the masked CuTe
//                                 kernel alone: the math rule's cases, its deliberate defects
int run_cute_mask_nonfinite(const std::vector<int>& dims);
int run_cute_mask_breakages();
// Every mode takes --expect N anywhere on its command line: the count of cases (or breakage
// runs) it must run (emu::verdict). Head dims must be positive integers.
int main(int argc, char** argv) {
  {
    int out = 1;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--expect") == 0) {
        char* end = nullptr;
        const long n = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : -1;
        if (i + 1 >= argc || *end != '\0' || n < 0) {
          std::fprintf(stderr, "--expect needs a count of cases (a non-negative integer)\n");
          return 2;
        }
        emu::g_expect_cases = n;
        ++i;
        continue;
      }
      // A head dim must be a number: atoi would turn a typo into 0 and a case list into none.
      // (--kinds takes a list.)
      if (std::strcmp(argv[i], "--kinds") == 0 && i + 1 < argc) {
        argv[out++] = argv[i++];
        argv[out++] = argv[i];
        continue;
      }
      if (argv[i][0] != '-') {
        char* end = nullptr;
        const long d = std::strtol(argv[i], &end, 10);
        if (*end != '\0' || d <= 0) {
          std::fprintf(stderr, "'%s' is not a head dim (a positive integer) nor an option\n", argv[i]);
          return 2;
        }
      }
      argv[out++] = argv[i];
    }
    argc = out;
    argv[argc] = nullptr;
  }
  // The head dims after a mode's option; any other option there is an error (not a dim 0).
  auto dims_after = [&](int from, std::vector<int>& dims) {
    for (int i = from; i < argc; ++i) {
      if (argv[i][0] == '-') {
        std::fprintf(stderr, "%s takes head dims only, not %s\n", argv[1], argv[i]);
        std::exit(2);
      }
      dims.push_back(std::atoi(argv[i]));
    }
  };
  if (argc > 1 && std::strcmp(argv[1], "--masks-breakages") == 0) return run_mask_breakages();
  if (argc > 1 && std::strcmp(argv[1], "--masks-cute-breakages") == 0) return run_cute_mask_breakages();
  if (argc > 1 && std::strcmp(argv[1], "--masks-cute-nonfinite") == 0) {
    std::vector<int> dims;
    dims_after(2, dims);
    if (dims.empty()) dims = {64};
    return run_cute_mask_nonfinite(dims);
  }
  if (argc > 1 && (std::strcmp(argv[1], "--masks") == 0 || std::strcmp(argv[1], "--masks-release") == 0)) {
    std::vector<int> mask_dims;
    const bool late_only = argc > 2 && std::strcmp(argv[2], "--late-only") == 0;
    dims_after(late_only ? 3 : 2, mask_dims);
    if (mask_dims.empty()) mask_dims = {64};
    return run_mask_cases(mask_dims, std::strcmp(argv[1], "--masks-release") == 0, late_only);
  }
  if (argc > 1 && std::strcmp(argv[1], "--bwd-breakages") == 0) return run_bwd_breakages();
  if (argc > 1 && std::strcmp(argv[1], "--bwd-tma-breakages") == 0) return run_bwd_tma_breakages();
  if (argc > 1 && (std::strcmp(argv[1], "--bwd") == 0 || std::strcmp(argv[1], "--bwd-tma") == 0 ||
                   std::strcmp(argv[1], "--bwd-release") == 0 || std::strcmp(argv[1], "--bwd-tma-release") == 0)) {
    std::vector<int> bwd_dims;
    dims_after(2, bwd_dims);
    if (bwd_dims.empty()) bwd_dims = {64, 320};
    if (std::strcmp(argv[1], "--bwd-release") == 0) return run_bwd_release(bwd_dims, false);
    if (std::strcmp(argv[1], "--bwd-tma-release") == 0) return run_bwd_release(bwd_dims, true);
    return run_bwd_cases(bwd_dims, std::strcmp(argv[1], "--bwd-tma") == 0);
  }
  if (argc > 1 && std::strcmp(argv[1], "--lowp-quant") == 0) return run_lowp_quant_tests();
  if (argc > 1 && std::strcmp(argv[1], "--lowp-breakages") == 0) return run_lowp_breakages();
  if (argc > 1 && std::strcmp(argv[1], "--lowp-nonfinite") == 0) {
    std::vector<int> lowp_dims;
    dims_after(2, lowp_dims);
    return run_lowp_nonfinite(lowp_dims.empty() ? std::vector<int>{64} : lowp_dims);
  }
  if (argc > 1 && (std::strcmp(argv[1], "--lowp") == 0 || std::strcmp(argv[1], "--lowp-accuracy") == 0)) {
    std::vector<int> lowp_dims;
    dims_after(2, lowp_dims);
    if (lowp_dims.empty()) lowp_dims = {64, 320};
    return std::strcmp(argv[1], "--lowp") == 0 ? run_lowp_cases(lowp_dims) : run_lowp_accuracy(lowp_dims);
  }
  std::vector<int> dims;
  bool release = false, breakages = false, cute_breakages = false, nonfinite = false, nonfinite_masked = false,
       nonfinite_breakages = false;
  std::string kinds = "mma,simt";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--release") == 0) release = true;
    else if (std::strcmp(argv[i], "--breakages") == 0) breakages = true;
    else if (std::strcmp(argv[i], "--breakages-cute") == 0) cute_breakages = true;
    else if (std::strcmp(argv[i], "--nonfinite") == 0) nonfinite = true;
    else if (std::strcmp(argv[i], "--nonfinite-masked") == 0) nonfinite = nonfinite_masked = true;
    else if (std::strcmp(argv[i], "--nonfinite-breakages") == 0) nonfinite_breakages = true;
    else if (std::strcmp(argv[i], "--kinds") == 0 && i + 1 < argc) kinds = argv[++i];
    else if (argv[i][0] == '-') {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    } else dims.push_back(std::atoi(argv[i]));
  }
  if (release) return run_release(dims);
  if (nonfinite_breakages) return run_nonfinite_breakages(dims.empty() ? 64 : dims.front());
  if (nonfinite)
    return run_nonfinite(dims.empty() ? std::vector<int>{64} : dims, nonfinite_masked,
                         {Kind::kMma, Kind::kSimt, Kind::kTma, Kind::kCute, Kind::kCuteTma});
  if (breakages) return run_breakages(dims.empty() ? 64 : dims.front());
  if (cute_breakages) return run_cute_breakages();
  if (dims.empty()) dims = {64, 128, 320};
  auto wants = [&](const char* k) { return ("," + kinds + ",").find(std::string(",") + k + ",") != std::string::npos; };
  // An unknown kind would silently run nothing of what was asked.
  {
    static const char* const kKnown[] = {"mma", "simt", "tma", "f16acc", "cute", "cute_tma", "cute_f16acc"};
    size_t from = 0;
    while (from <= kinds.size()) {
      const size_t to = std::min(kinds.find(',', from), kinds.size());
      const std::string k = kinds.substr(from, to - from);
      if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* x) { return k == x; }) == std::end(kKnown)) {
        std::fprintf(stderr, "--kinds: unknown kind '%s' (mma, simt, tma, f16acc, cute, cute_tma, cute_f16acc)\n",
                     k.c_str());
        return 2;
      }
      from = to + 1;
    }
  }
  struct Run {
    Kind kind;
    bool f16acc;
    bool pv_step;
  };
  std::vector<Run> runs;
  if (wants("mma")) runs.push_back({Kind::kMma, false, false});
  if (wants("simt")) runs.push_back({Kind::kSimt, false, false});
  if (wants("tma")) runs.push_back({Kind::kTma, false, false});
  if (wants("cute")) runs.push_back({Kind::kCute, false, false});
  if (wants("cute_tma")) runs.push_back({Kind::kCuteTma, false, false});
  if (wants("cute_f16acc")) {
    runs.push_back({Kind::kCute, true, false});
    runs.push_back({Kind::kCuteTma, true, false});
  }
  if (wants("f16acc")) {
    runs.push_back({Kind::kMma, true, false});
    runs.push_back({Kind::kMma, true, true});
    runs.push_back({Kind::kTma, true, false});
  }
  std::mt19937 rng(42);
  int failed = 0, total = 0;
  std::vector<int> per_run(runs.size(), 0), per_failed(runs.size(), 0);
  for (int d : dims)
    for (bool late : {false, true})
      for (bool causal : {false, true})
        for (size_t r = 0; r < runs.size(); ++r) {
          const Run& run = runs[r];
          if (run.kind == Kind::kSimt && late) continue;  // the SIMT kernel has no async copies
          emu::g_cp_late = late;
          for (const Case& c : standard_cases(d, causal, run.kind, run.f16acc, run.pv_step)) {
            ++total;
            ++per_run[r];
            if (!dispatch(c, rng)) ++failed, ++per_failed[r];
          }
        }
  // The kinds: every kernel kind asked for ran cases (the total alone could hide one that ran none).
  int kinds_verdict = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string what = std::string(kind_name(runs[r].kind)) + (runs[r].pv_step ? " fp16/pv-per-mma" : runs[r].f16acc ? " fp16-acc" : "") + " cases";
    kinds_verdict |= emu::verdict(what.c_str(), per_run[r], per_failed[r], "failed", false);
  }
  return emu::verdict("cases", total, failed, "failed") | kinds_verdict;
}
