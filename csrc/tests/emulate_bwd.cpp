// CPU emulation of the backward kernels (ffpa/bwd_kernel_mma.cuh) on the emulator of
// emulate_kernels.cpp (fibers per CUDA thread, PTX modelled in emu/ffpa/utils.cuh,
// shared memory poisoned with NaN, cp.async landing at issue or late), against a
// float64 reference of torch's math backend: the forward and its autograd formulas
// (safe softmax: a row with no visible key has P = 0; dS = P (dP - rowsum(dP P));
// NaN propagates through every product, as matmuls do).
//   ffpa_emulate_kernels --bwd D...            the case list below, every D
//   ffpa_emulate_kernels --bwd-tma D...        the same on the TMA feed (Load::kTma)
//   ffpa_emulate_kernels --bwd-release D...    one fp16 and one bf16 case per D (label slow)
//   ffpa_emulate_kernels --bwd-tma-release D...  the same on the TMA feed (label slow)
//   ffpa_emulate_kernels --bwd-breakages       each deliberate defect (ffpa::BwdBreak) must fail
//   ffpa_emulate_kernels --bwd-tma-breakages   each TMA protocol defect (emu::Break) must fail
// The gradients' bound: the tolerance table's bwd_fp16 / bwd_bf16 rows (ffpa/tolerance.h).

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_bwd_ref.h"
#include "emu_cute.h"
#include "emu_params.h"
#include "emu_state.h"
#include "ffpa/bwd_kernel_mma.cuh"
#include "ffpa/nonfinite.h"
#include "ffpa/tma_geometry.h"
#include "ffpa/tolerance.h"

int run_bwd_cases(const std::vector<int>& dims, bool tma);
int run_bwd_release(const std::vector<int>& dims, bool tma);
int run_bwd_breakages();
int run_bwd_tma_breakages();

namespace {

using ffpa::BwdBreak;

// Where NaN / inf is planted (in one element of the named input).
enum class Plant { kNone, kNanQ, kNanK, kNanV, kNanDo, kInfV };
const char* plant_name(Plant p) {
  switch (p) {
    case Plant::kNone:
      return "none";
    case Plant::kNanQ:
      return "nan-q";
    case Plant::kNanK:
      return "nan-k";
    case Plant::kNanV:
      return "nan-v";
    case Plant::kNanDo:
      return "nan-dO";
    case Plant::kInfV:
      return "inf-v";
  }
  return "?";
}

struct BwdCase {
  int d;
  bool bf16;
  bool causal;
  bool top_left;  // causal offset 0 (SDPA's is_causal) instead of Nkv - Nq
  int b, hq, hkv, nq, nkv;
  bool bnhd = false;  // Q / dO / dQ as [B, N, H, D] views (head stride D, row stride H D)
  Plant plant = Plant::kNone;
  float scale = 0.f;  // 0: 1 / sqrt(D)
  BwdBreak br = BwdBreak::kNone;
  bool no_flags = false;  // breakage: causal without the non-finite pre-pass's flags
  bool tma = false;       // the main kernels on the TMA feed (Load::kTma)
};

const ffpa::BwdParams* g_bwd = nullptr;
template <int D, typename T, BwdBreak kBr>
void pre_body(const ffpa::FwdParams&) {
  ffpa::ffpa_bwd_preprocess_kernel<D, T, kBr>(*g_bwd);
}
ffpa::BwdTmaMaps g_bwd_maps;  // the TMA launches' maps (the cp.async feed ignores them)
template <typename Traits, bool kKeys, BwdBreak kBr, ffpa::Load kLoad = ffpa::Load::kCpAsync>
void main_body(const ffpa::FwdParams&) {
  ffpa::ffpa_bwd_kernel<Traits, kKeys, kBr, kLoad>(*g_bwd, g_bwd_maps);
}

// Error of a gradient against the reference: max |err| / max |ref| and sum |err| /
// sum |ref| over the finite reference entries; `nan_ok` is false when a NaN or inf sits
// where the reference has none or the other way round.
struct Err {
  double max_rel = 0, rel_l1 = 0;
  bool pattern_ok = true;
};
template <typename T>
Err compare(const std::vector<T>& got, const std::vector<double>& ref) {
  using ET = ffpa::ElemTraits<T>;
  double max_err = 0, max_ref = 0, sum_err = 0, sum_ref = 0;
  Err e;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = ET::to_float(got[i]), r = ref[i];
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) e.pattern_ok = false;
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (g != r) e.pattern_ok = false;
      continue;
    }
    const double err = std::fabs(g - r);
    max_err = std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(r));
    sum_err += err;
    sum_ref += std::fabs(r);
  }
  e.max_rel = max_ref > 0 ? max_err / max_ref : max_err;
  e.rel_l1 = sum_ref > 0 ? sum_err / sum_ref : sum_err;
  return e;
}

template <int D, typename T, BwdBreak kBr>
bool run_case_t(const BwdCase& c, std::mt19937& rng) {
  using ET = ffpa::ElemTraits<T>;
  using DqTraits = ffpa::BwdDqTraits<D, T>;
  using DkvTraits = ffpa::BwdDkvTraits<D, T>;
  const int B = c.b, nq = c.nq, nkv = c.nkv;
  const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(D));
  const int offset = c.top_left ? 0 : nkv - nq;
  std::normal_distribution<float> dist(0.f, 1.f);
  // Inputs rounded to T; the reference sees the rounded values.
  auto make = [&](size_t n, std::vector<T>& m, std::vector<double>& f) {
    m.resize(n);
    f.resize(n);
    for (size_t i = 0; i < n; ++i) {
      m[i] = ET::from_float(dist(rng));
      f[i] = ET::to_float(m[i]);
    }
  };
  std::vector<T> qm, km, vm, dom;
  std::vector<double> q, k, v, dout;
  make(size_t(B) * c.hq * nq * D, qm, q);
  make(size_t(B) * c.hkv * nkv * D, km, k);
  make(size_t(B) * c.hkv * nkv * D, vm, v);
  make(size_t(B) * c.hq * nq * D, dom, dout);
  auto plant = [&](std::vector<T>& m, std::vector<double>& f, size_t at, float x) {
    if (f.empty()) return;
    at %= f.size();
    m[at] = ET::from_float(x);
    f[at] = x;
  };
  switch (c.plant) {
    case Plant::kNone:
      break;
    case Plant::kNanQ:
      plant(qm, q, 5 * size_t(D) + 3, NAN);
      break;
    case Plant::kNanK:
      plant(km, k, 7 * size_t(D) + 1, NAN);
      break;
    case Plant::kNanV:
      plant(vm, v, 2 * size_t(D) + 9, NAN);
      break;
    case Plant::kNanDo:
      plant(dom, dout, 4 * size_t(D) + 2, NAN);
      break;
    case Plant::kInfV:
      plant(vm, v, 3 * size_t(D) + 4, INFINITY);
      break;
  }
  const ffpa::ref::BwdGrads ref = ffpa::ref::attention_backward(
      {c.b, c.hq, c.hkv, nq, nkv, D, c.causal, offset, scale}, q, k, v, dout);
  // The forward's outputs as the kernels get them: O in T, the LSE in fp32.
  std::vector<T> om(ref.o.size());
  for (size_t i = 0; i < om.size(); ++i) om[i] = ET::from_float(float(ref.o[i]));
  std::vector<float> lse(ref.lse.size());
  for (size_t i = 0; i < lse.size(); ++i) lse[i] = float(ref.lse[i]);

  // [B, N, H, D] views for Q, dO and dQ when asked: a permuted copy with the strides.
  const int64_t q_bs = int64_t(c.hq) * nq * D;
  const int64_t q_hs = c.bnhd ? D : int64_t(nq) * D;
  const int64_t q_rs = c.bnhd ? int64_t(c.hq) * D : D;
  auto to_view = [&](const std::vector<T>& m) {
    if (!c.bnhd) return m;
    std::vector<T> out(m.size());
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < c.hq; ++h)
        for (int i = 0; i < nq; ++i)
          std::memcpy(&out[b * q_bs + h * q_hs + i * q_rs], &m[((size_t(b) * c.hq + h) * nq + i) * D], D * sizeof(T));
    return out;
  };
  std::vector<T> qv = to_view(qm), dov = to_view(dom);
  const T poison = ffpa::from_bits<T>(0xffff);  // NaN in fp16 and bf16: an unwritten element shows
  std::vector<T> dqv(qv.size(), poison), dkm(km.size(), poison), dvm(vm.size(), poison);
  std::vector<float> ws(size_t(ffpa::bwd_workspace_floats(B, c.hq, nq)), NAN);

  emu::g_ranges = {{reinterpret_cast<const unsigned char*>(qv.data()), qv.size() * 2},
                   {reinterpret_cast<const unsigned char*>(km.data()), km.size() * 2},
                   {reinterpret_cast<const unsigned char*>(vm.data()), vm.size() * 2},
                   {reinterpret_cast<const unsigned char*>(dov.data()), dov.size() * 2}};
  // The C API's arguments of this problem (Q, dO and dQ as the views above), made into the
  // kernels' parameters by the library's make_bwd_params (emu_params.h).
  ffpa::BackwardArgs a;
  const ffpa::DType dt = c.bf16 ? ffpa::DType::kBf16 : ffpa::DType::kFp16;
  auto q_view = [&](const T* data) {
    ffpa::TensorDesc t = emu::dense(data, dt, B, c.hq, nq, D);
    t.stride[0] = q_bs, t.stride[1] = q_hs, t.stride[2] = q_rs;
    return t;
  };
  a.q = q_view(qv.data()), a.dout = q_view(dov.data()), a.dq = q_view(dqv.data());
  a.k = emu::dense(km.data(), dt, B, c.hkv, nkv, D), a.v = emu::dense(vm.data(), dt, B, c.hkv, nkv, D);
  a.dk = emu::dense(dkm.data(), dt, B, c.hkv, nkv, D), a.dv = emu::dense(dvm.data(), dt, B, c.hkv, nkv, D);
  a.out = emu::dense(om.data(), dt, B, c.hq, nq, D);
  a.lse = emu::dense_lse(lse.data(), B, c.hq, nq);
  a.causal = c.causal;
  a.causal_top_left = c.top_left;  // the offset above
  a.scale = float(scale);
  a.workspace = ws.data();
  ffpa::BwdParams p = ffpa::detail::make_bwd_params(a);
  // The non-finite pre-pass over Q, K, V and dO, as api.cu runs it for causal calls.
  std::vector<int> flags(size_t(B) * c.hq, 0);
  if (c.causal && !c.no_flags) {
    ffpa::NonfiniteScan scan;
    const int64_t q_shape[4] = {B, c.hq, nq, D}, kv_shape[4] = {B, c.hkv, nkv, D};
    const int64_t q_stride[4] = {q_bs, q_hs, q_rs, 1}, kv_stride[4] = {p.k_batch_stride, p.k_head_stride, D, 1};
    scan.add(p.q, q_shape, q_stride);
    scan.add(p.k, kv_shape, kv_stride);
    scan.add(p.v, kv_shape, kv_stride);
    scan.add(p.dout, q_shape, q_stride);
    scan.hq = c.hq, scan.h_ratio = c.hq / c.hkv, scan.d = D;
    scan.exp_mask = c.bf16 ? 0x7f80 : 0x7c00;
    scan.flags = flags.data();
    emu::run_nonfinite_scan(scan, B);
    p.nonfinite = flags.data();
  }
  g_bwd = &p;
  const ffpa::FwdParams unused;
  // The launch order of run_bwd (bwd_launch_template.cuh).
  constexpr int R = ffpa::BwdPreTraits::kRowsPerBlock;
  if (nq > 0) {
    emu::launch(&pre_body<D, T, kBr>, unused, {unsigned((nq + R - 1) / R), unsigned(c.hq), unsigned(B)},
                ffpa::BwdPreTraits::kNThreads, 0);
    const emu::Dim3 dkv_grid{unsigned((nkv + DkvTraits::kBlockM - 1) / DkvTraits::kBlockM), unsigned(c.hkv),
                             unsigned(B)};
    const emu::Dim3 dq_grid{unsigned((nq + DqTraits::kBlockM - 1) / DqTraits::kBlockM), unsigned(c.hq), unsigned(B)};
    if (c.tma) {
      // The TMA feed only with the defects it can carry (the persist-D slot defects are
      // the cp.async loop's).
      if constexpr (kBr == BwdBreak::kNone || kBr == BwdBreak::kTmaTailNotZeroed) {
        // The launcher's maps (bwd_launch_template.cuh): each kernel's own rows in boxes
        // of its kBlockM, its column blocks in boxes of 64.
        auto encode = [&](int box_q, int box_kv) {
          g_bwd_maps.q = emu::encode_tiled(p.q, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kQ, box_q));
          g_bwd_maps.dout = emu::encode_tiled(p.dout, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kDout, box_q));
          if (nkv > 0) {
            g_bwd_maps.k = emu::encode_tiled(p.k, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kK, box_kv));
            g_bwd_maps.v = emu::encode_tiled(p.v, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kV, box_kv));
          }
        };
        constexpr auto kTma = ffpa::Load::kTma;
        if (nkv > 0) {
          encode(DkvTraits::kBlockN, DkvTraits::kBlockM);
          emu::launch(&main_body<DkvTraits, true, kBr, kTma>, unused, dkv_grid, DkvTraits::kNThreads,
                      DkvTraits::kSmemBytesTma);
        }
        encode(DqTraits::kBlockM, DqTraits::kBlockN);
        emu::launch(&main_body<DqTraits, false, kBr, kTma>, unused, dq_grid, DqTraits::kNThreads,
                    DqTraits::kSmemBytesTma);
      } else {
        emu::fail("this breakage has no TMA form");
      }
    } else {
      if (nkv > 0)
        emu::launch(&main_body<DkvTraits, true, kBr>, unused, dkv_grid, DkvTraits::kNThreads, DkvTraits::kSmemBytes);
      emu::launch(&main_body<DqTraits, false, kBr>, unused, dq_grid, DqTraits::kNThreads, DqTraits::kSmemBytes);
    }
  } else {
    emu::fail("Nq == 0 has no launch (api.cu zero-fills dK and dV)");
  }
  // dQ back to [B, H, N, D].
  std::vector<T> dqm(qm.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < c.hq; ++h)
      for (int i = 0; i < nq; ++i)
        std::memcpy(&dqm[((size_t(b) * c.hq + h) * nq + i) * D], &dqv[b * q_bs + h * q_hs + i * q_rs], D * sizeof(T));

  const ffpa::Tolerance& tol = ffpa::tolerance(c.bf16 ? "bwd_bf16" : "bwd_fp16");
  bool ok = true;
  char buf[512];
  std::string line;
  const std::pair<const char*, Err> errs[] = {{"dq", compare(dqm, ref.dq)}, {"dk", compare(dkm, ref.dk)},
                                              {"dv", compare(dvm, ref.dv)}};
  for (const auto& [name, e] : errs) {
    const bool g_ok = e.pattern_ok && e.max_rel <= tol.atol && e.rel_l1 <= tol.max_rel_l1;
    ok = ok && g_ok;
    std::snprintf(buf, sizeof buf, " %s:max=%.2e,l1=%.2e%s", name, e.max_rel, e.rel_l1,
                  e.pattern_ok ? "" : ",NAN-PATTERN-DIFFERS");
    line += buf;
  }
  std::printf("[%s] bwd D=%d %s causal=%s B=%d Nq=%d Nkv=%d Hq=%d Hkv=%d%s plant=%s copies=%s%s%s\n", ok ? "PASS" : "FAIL",
              D, c.bf16 ? "bf16" : "fp16", !c.causal ? "none" : c.top_left ? "top-left" : "bottom-right", B, nq, nkv,
              c.hq, c.hkv, c.bnhd ? " bnhd" : "", plant_name(c.plant), emu::g_cp_late ? "late" : "early",
              c.tma ? " feed=tma" : "", line.c_str());
  std::fflush(stdout);
  return ok;
}

template <int D, BwdBreak kBr>
bool run_case_d(const BwdCase& c, std::mt19937& rng) {
  return c.bf16 ? run_case_t<D, __nv_bfloat16, kBr>(c, rng) : run_case_t<D, __half, kBr>(c, rng);
}

// A breakage run at head dim D.
template <int D>
bool run_breakage_d(const BwdCase& c, std::mt19937& rng) {
  switch (c.br) {
    case BwdBreak::kDeltaFirstChunk:
      return run_case_d<D, BwdBreak::kDeltaFirstChunk>(c, rng);
    case BwdBreak::kLseNoHeadOffset:
      return run_case_d<D, BwdBreak::kLseNoHeadOffset>(c, rng);
    case BwdBreak::kNoGroupSum:
      return run_case_d<D, BwdBreak::kNoGroupSum>(c, rng);
    case BwdBreak::kMaskEdge:
      return run_case_d<D, BwdBreak::kMaskEdge>(c, rng);
    case BwdBreak::kDropSplit:
      return run_case_d<D, BwdBreak::kDropSplit>(c, rng);
    case BwdBreak::kPersistStaleCols:
    case BwdBreak::kPersistOneSlot:
      if constexpr (ffpa::BwdDkvTraits<D, __half>::kPersistD) {
        if (c.br == BwdBreak::kPersistStaleCols) return run_case_d<D, BwdBreak::kPersistStaleCols>(c, rng);
        return run_case_d<D, BwdBreak::kPersistOneSlot>(c, rng);
      }
      emu::fail("the persist-D breakages need a persist-D head dim");
    case BwdBreak::kMaskLeftEdge:
    case BwdBreak::kSeqOffset:
    case BwdBreak::kPaddedKeyCounted:
    case BwdBreak::kSkipOneBlock:
    case BwdBreak::kNoSkip:
      emu::fail("the mask breakages run in emulate_masks.cpp");
    case BwdBreak::kNone:
      break;
  }
  return run_case_d<D, BwdBreak::kNone>(c, rng);
}

bool dispatch(const BwdCase& c, std::mt19937& rng) {
  if (c.br != BwdBreak::kNone) {
    // The breakage runs use D = 128 (persist-D; dQ and dK / dV 4x2: a split to drop) and
    // D = 192 (split-D; dQ 4x2, dK / dV 2x4) only.
    if (c.d == 128) return run_breakage_d<128>(c, rng);
    if (c.d == 192) return run_breakage_d<192>(c, rng);
    emu::fail("breakage runs take D = 128 or 192");
  }
  switch (c.d) {
#define FFPA_EMU_HEAD_DIM(D) \
  case D:                    \
    return run_case_d<D, BwdBreak::kNone>(c, rng);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  std::fprintf(stderr, "head dim %d is not in the emulator's list (%s)\n", c.d, FFPA_EMU_HEAD_DIMS_TEXT);
  std::exit(2);
}

}  // namespace

// The case list of a head dim: GQA with ragged Nq < Nkv over several blocks, both causal
// alignments, Nq > Nkv (causal rows that see no key), a [B, N, H, D] view with a custom
// scale, bf16, no key (Nkv = 0: dQ is zero), and NaN / inf planted, without the causal
// mask and under it (the non-finite pre-pass's flags, ffpa/mask.h).
int run_bwd_cases(const std::vector<int>& dims, bool tma) {
  std::mt19937 rng(29);
  int failed = 0, total = 0;
  for (int d : dims) {
    std::vector<BwdCase> cases = {
        {d, false, false, false, 1, 4, 2, 83, 141},
        {d, false, true, false, 1, 4, 2, 83, 141},
        {d, false, true, true, 1, 2, 1, 83, 141},
        {d, false, true, false, 2, 2, 2, 70, 40},
        {d, false, true, true, 1, 2, 2, 70, 40},
        {d, false, false, false, 1, 2, 2, 19, 23, true, Plant::kNone, 0.3f},
        {d, true, true, true, 1, 2, 1, 19, 23, true, Plant::kNone, 0.3f},
        {d, true, true, false, 1, 2, 1, 64, 128},
        {d, false, false, false, 1, 2, 2, 17, 0},
    };
    // Non-causal: every key visible. Causal bottom-right with Nq > Nkv: K row 7, V rows 2
    // and 3 are hidden from some rows, query row 5 and dO row 4 see no key at all, so
    // the math backend's additive mask and matrix products are what is checked.
    for (Plant pl : {Plant::kNanQ, Plant::kNanK, Plant::kNanV, Plant::kNanDo, Plant::kInfV}) {
      cases.push_back({d, false, false, false, 1, 2, 1, 37, 45, false, pl});
      cases.push_back({d, false, true, false, 1, 2, 1, 45, 37, false, pl});
    }
    for (bool late : {false, true})
      for (const BwdCase& c : cases) {
        if (!late && c.plant != Plant::kNone) continue;
        // The TMA feed: copies landing late only, where the emulator faults on a tile read
        // or refilled while its box is in flight (a refill issued before the block barrier
        // shows there as well as with early landing).
        if (!late && tma) continue;
        emu::g_cp_late = late;
        ++total;
        BwdCase run = c;
        run.tma = tma;
        if (!dispatch(run, rng)) ++failed;
      }
  }
  return emu::verdict("backward cases", total, failed, "failed");
}

// Every release head dim, both dtypes: batch 2, GQA 4:2, causal bottom-right with ragged
// Nq < Nkv (fp16) and non-causal Nq > Nkv (bf16), copies landing late.
int run_bwd_release(const std::vector<int>& dims, bool tma) {
  std::mt19937 rng(7);
  int failed = 0, total = 0;
  emu::g_cp_late = true;
  for (int d : dims)
    for (BwdCase c : {BwdCase{d, false, true, false, 2, 4, 2, 70, 100}, BwdCase{d, true, false, false, 2, 2, 2, 90, 50}}) {
      ++total;
      c.tma = tma;
      if (!dispatch(c, rng)) ++failed;
    }
  return emu::verdict("backward cases", total, failed, "failed");
}

// Each deliberate defect of ffpa::BwdBreak on one case that exposes it (GQA 4:2 causal,
// ragged lengths), at D = 128 (persist-D) and D = 192 (split-D), in a child process; the
// unbroken controls must pass.
int run_bwd_breakages() {
  struct Run {
    BwdBreak br;
    const char* name;
    Plant plant = Plant::kNone;  // with a plant: causal Nq > Nkv (the NaN under the mask)
    bool no_flags = false;
    bool persist_only = false;  // a defect of the persist-D loop (D = 128 only)
    bool early = false;         // copies land at issue (a slot overwritten while read shows)
  };
  const Run runs[] = {
      {BwdBreak::kNone, "none (control)"},
      {BwdBreak::kNone, "none (control, NaN in a dO row that sees no key)", Plant::kNanDo},
      {BwdBreak::kDeltaFirstChunk, "Delta summed over the first D chunk only"},
      {BwdBreak::kLseNoHeadOffset, "LSE read without its head offset"},
      {BwdBreak::kNoGroupSum, "dK / dV without the sum over the query group"},
      {BwdBreak::kMaskEdge, "causal mask off by one (diagonal masked)"},
      {BwdBreak::kDropSplit, "gradient columns of warps_d > 0 dropped (every warp stores warp 0's)"},
      // (dV is a matrix product over every query: 0 * NaN reaches every key's row.)
      {BwdBreak::kNone, "the non-finite pre-pass's flags ignored (NaN in a dO row that sees no key)", Plant::kNanDo,
       true},
      {BwdBreak::kNone, "none (control, copies landing at issue)", Plant::kNone, false, true, true},
      {BwdBreak::kPersistStaleCols, "persist-D: column operands not reloaded for a new column block", Plant::kNone,
       false, true},
      {BwdBreak::kPersistOneSlot, "persist-D: the next block's Q / K loaded over the one still read", Plant::kNone,
       false, true, true},
  };
  int wrong = 0, total = 0;
  for (int d : {128, 192})
    for (const Run& r : runs) {
      if (r.persist_only && d != 128) continue;
      ++total;
      const bool want_pass = r.br == BwdBreak::kNone && !r.no_flags;
      const bool ok = emu::breakage_run("breakage D=" + std::to_string(d) + ": " + r.name, want_pass, [&] {
        emu::g_cp_late = !r.early;
        std::mt19937 rng(11);
        BwdCase c{d, false, true, false, 1, 4, 2, 83, 141, false, Plant::kNone, 0.f, r.br};
        if (r.plant != Plant::kNone) c.nq = 141, c.nkv = 83, c.plant = r.plant, c.no_flags = r.no_flags;
        return dispatch(c, rng);
      });
      if (!ok) ++wrong;
    }
  return emu::verdict("backward breakage runs", total, wrong, "wrong");
}

// The TMA feed's protocol defects (emu::Break, modelled in the emulator's mbarrier):
// an expect_tx of half the bytes and a wait on the wrong phase parity, at D = 128
// (persist-D: the rows' barrier, two first-operand slots, one second) and D = 192
// (split-D: one barrier per stage), copies landing late, in a child process; the
// unbroken controls must pass. (The tail rows left unzeroed need rows past a sequence:
// emulate_masks.cpp's breakages.)
int run_bwd_tma_breakages() {
  const std::pair<emu::Break, const char*> breaks[] = {
      {emu::Break::kNone, "none (control)"},
      {emu::Break::kShortExpectTx, "expect_tx of half the bytes"},
      {emu::Break::kWrongParity, "wait on the wrong phase parity"},
  };
  int wrong = 0, total = 0;
  for (int d : {128, 192})
    for (const auto& [br, name] : breaks) {
      ++total;
      const emu::Break brk = br;
      const bool ok = emu::breakage_run("tma breakage D=" + std::to_string(d) + ": " + name, brk == emu::Break::kNone, [&] {
        emu::g_break = brk;
        emu::g_cp_late = true;
        std::mt19937 rng(11);
        BwdCase c{d, false, true, false, 1, 4, 2, 83, 141};
        c.tma = true;
        // dispatch() sends breakage runs (c.br) to D = 128 / 192 only; these are unbroken
        // kernels, so the plain head-dim switch runs them.
        return dispatch(c, rng);
      });
      if (!ok) ++wrong;
    }
  return emu::verdict("backward TMA breakage runs", total, wrong, "wrong");
}
