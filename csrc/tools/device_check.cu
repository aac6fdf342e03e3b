// ffpa_device_check: the GPU correctness matrix against the fp64-accumulated host
// reference, the backward's gradients against float64 (device_check_bwd.cu), and the
// kernels' own timings (for images without Python headers; in device_check_bench.cu).
// About 900 lines: the case plan, the runner and the incremental JSON report describe
// one matrix and change together.
//
//   ffpa_device_check [--json FILE] [--quick] [--dry-run]
//   ffpa_device_check --bench-csv FILE [--bench-dims 64,128,... (default: all compiled)] [--bench-n 8192]
//                     [--bench-h 32] [--bench-warmup 3] [--bench-iters 10] [--dry-run]
//   ffpa_device_check --sweep-csv FILE [--bench-n/-h/-warmup/-iters as above] [--dry-run]
//                     (the tuning sweep of an FFPA_SWEEP=ON build: device_check_sweep.cu)
//
// Correctness groups, one per compiled (head dim, dtype), each with B = 2, Hq = 4:
// causal x {aligned 256/256, Nq < Nkv 200/317, Nq > Nkv 317/200} x {MHA, GQA Hkv = 2}
// x impl {mma, simt, tma, cute, cute_tma}; [B, N, H, D]-in-memory views (non-contiguous
// [B, H, N, D] strides); Nkv shorter than one tile with Hkv = 1 (h_ratio 4). fp16
// groups also run accum=fp16 on mma, tma, cute and cute_tma over a smaller list
// (causal x {256/256 MHA, 200/317 GQA, 317/200 GQA, the strided view, the short Nkv}).
// After each, its low-precision group "lowp-D<d>-<dtype>": causal x the low-precision
// kernels the device runs (cute_fp8, cute_tma_fp8, cute_tma_fp4) x a short list of the
// same shapes (fp16: 256/256 MHA and 200/317 GQA on "outlier K" inputs, then 256/256
// MHA, 200/317 GQA, 317/200 GQA, the strided view and the short Nkv on the plain ones;
// bf16: the two outlier-K shapes, 317/200 GQA and the short Nkv). Outlier-K inputs add,
// per (batch, kv head), offsets of +-10, 20, 35 and 50 to four K channels, the K channel
// outliers of real models that the scheme's smoothing of K is for (the CPU emulator's
// inputs, csrc/tests/emulate_lowp.cpp); the plain cases share the 16-bit group's inputs
// and references, so only the outlier-K ones cost host time.
// Then one group per backward instance of the build, "bwd-D<d>-<dtype>"
// (device_check_bwd.cu): ffpa::backward() on the float64 reference's own O and LSE,
// its dQ, dK and dV against float64 gradients: non-causal 83/141 GQA (B = 2), bottom-right
// causal 141/83 GQA (rows that see no key), top-left causal 141/83 with Hkv = 1 and
// 83/141 on a [B, N, H, D] view (B = 2), and a square causal 128/128 GQA; judged per
// gradient by the bwd_fp16 / bwd_bf16 rows of ffpa/tolerance.h (max |g - ref| / max |ref|
// <= atol, sum |g - ref| / sum |ref| <= max_rel_l1, every value finite). The bench adds
// a "bwd" row per head dim (device_check_bench.cu).
// Then one group per backward instance, "masks-D<d>-<dtype>" (device_check_masks.cu): the
// sliding window, seqused_k and varlen (kernels/ffpa/mask.h) through ffpa::forward() on mma,
// tma, cute and cute_tma (each where the device runs it) and ffpa::backward(), per sequence against float64:
// a two-sided window (B = 2, GQA), varlen causal with a window and a one-row sequence,
// seqused_k with an empty entry (causal), a causal window with Nq < Nkv, varlen with
// seqused_k and a two-sided window; O / LSE by the fp16 / bf16 rows, the gradients by
// the bwd rows; padded keys hold NaN on the device (a read one shows).
// Then the group "long": N = 4096 and 8192 at D = 128 and 512 (those compiled), both
// dtypes, causal and not, GQA, on mma, tma and cute_tma (fp16-accumulated too at
// N = 8192, fp16, non-causal), checked on a sample of rows, and the low-precision kernels
// at N = 8192 (the first dtype, non-causal at each long head dim; causal on outlier-K
// inputs at the largest); and the group "api":
// impl="auto" picks tma on the sm_120 family when the device loads TMA code, else mma
// (never a CuTe kernel), for aligned arrays and simt (reported through impl_used) for
// misaligned ones; impl=tma and impl=cute_tma run bf16; impl=fp8 runs the FP8 kernel the
// device has (cute_tma_fp8 where TMA runs, else cute_fp8; impl_used) and impl=fp4 the
// NVFP4 one; the documented errors (accum=fp16 with bf16: dtype; with simt or a
// low-precision impl: impl; with misaligned auto, cute or fp8: layout; impl=tma or
// cute_tma where the device loads no TMA code: impl, naming the compiled archs;
// impl=cute (and cute_fp8) on the sm_120 family, where the CuTe kernels are TMA-fed only:
// impl; impl=fp4 without NVFP4 code for the device: impl, naming the sm_120 family; impl=fp8
// without FP8 code: impl); and a stale error left by an unrelated CUDA call does not fail
// a launch.
//
// TMA cases (tma, cute_tma) run when ffpa::tma_runs_on_current_device() (a dry run
// plans them when the build holds TMA code); otherwise they are not planned, one line
// says why, and the JSON's "tma" block carries the reason (the summary never counts
// them as passed). The "cute" block says whether the CuTe cases are planned (cute:
// where ffpa::cute_runs_on_current_device(), i.e. below the sm_120 family). The "lowp"
// block does the same for the low-precision kernels (ffpa::fp8_runs_on_current_device(),
// ffpa::fp4_runs_on_current_device(); a dry run plans each where the build's archs hold
// its code). fp16-accumulated cases run when the build has fp16 instances
// (BuildInfo::f16_acc).
//
// Errors against the reference, over the checked rows: abs = max |out - ref|, rel = abs /
// max |ref| (per case), lse = max |lse - ref|; for the low-precision cases also cos (cosine
// similarity of out with ref), rel_l1 = sum |out - ref| / sum |ref| and gain = sum out * ref
// / sum ref^2. Every bound comes from the one table, ffpa/tolerance.h (its row per path is
// the case's "tolerance" in the JSON, and the JSON's "tolerances" block is the table). A
// 16-bit case passes when rel <= rtol, abs <= atol and lse <= lse of its row (abs <= atol
// alone implies the table's elementwise |out - ref| <= atol + rtol |ref|); a low-precision
// case when cos >= min_cos, rel_l1 <= max_rel_l1, abs <= atol, lse <= lse and |gain - 1| <=
// max_gain_err (csrc/tests/emulate_lowp.cpp judges the CPU emulation the same way); a case
// that expects an error passes when forward() returns that error kind and launches
// nothing. --json FILE is rewritten atomically after every group, so a run cut short says
// how far it got. --dry-run makes no CUDA call: it prints and writes the plan (the
// rehearsal on machines without a GPU).
// Exit: 0 all passed (or dry run), 1 a case failed, 2 usage or CUDA errors, 77 no GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attention_ref.h"
#include "device_check.h"
#include "ffpa/api.h"
#include "ffpa/arch_rules.h"
#include "ffpa/tolerance.h"

using ffpa::check::row_offset;
using ffpa::check::set_desc;
using ffpa::check::BenchOpts;
using ffpa::check::run_bench;
using ffpa::check::to_bits;
using ffpa::check::from_bits;

namespace {

// Each row this runner reads must exist under its name (ffpa::tolerance() answers its
// first row for a name it does not know).
static_assert(ffpa::find_tolerance("fp16") && ffpa::find_tolerance("bf16") && ffpa::find_tolerance("fp16_acc") &&
                  ffpa::find_tolerance("fp8") && ffpa::find_tolerance("fp4"),
              "cmake/kernel-facts.json lost a tolerance row the device check judges by");
static_assert(ffpa::find_tolerance("bwd_fp16") && ffpa::find_tolerance("bwd_bf16"),
              "cmake/kernel-facts.json lost a backward row the device check judges by");
static_assert(ffpa::tolerance("fp8").min_cos > 0.f && ffpa::tolerance("fp4").min_cos > 0.f,
              "the low-precision rows of cmake/kernel-facts.json state their cosine bound");

struct Case {
  std::string group;
  int d;
  ffpa::DType dtype;
  bool causal;
  int b, nq, nkv, hq, hkv;
  bool bnhd;          // memory order [B, N, H, D]: exercises head/row strides
  ffpa::Impl impl;    // requested
  ffpa::Impl expect;  // kernel that must run (kAuto: whatever was requested)
  int sample_rows;    // 0: check every row; else this many rows (first, last, spread)
  bool misalign;      // data pointers offset by one element (not 16-byte aligned)
  bool stale_error;   // leave an unrelated CUDA error pending before the launch
  ffpa::Accum accum = ffpa::Accum::kFp32;
  // kOk: the case runs and is compared with the reference. Else forward() must
  // return this error kind (launching nothing), its message holding every string of
  // expect_in_message.
  ffpa::ErrorKind expect_error = ffpa::ErrorKind::kOk;
  std::vector<std::string> expect_in_message = {};
  // K with four outlier channels per (batch, kv head) (the low-precision cases; see the top).
  bool outlier_k = false;
  // A backward case (device_check_bwd.cu): ffpa::backward() against the float64 gradients;
  // impl, expect, sample_rows, misalign, stale_error and accum do not apply.
  bool bwd = false;
  bool top_left = false;  // causal alignment of a backward case: SDPA's is_causal
  char nan_plant = 0;     // a backward case's planted NaN (BwdSpec::plant)
  int nan_row = 0;
  // A mask case (device_check_masks.cu): index into mask_specs(); impl is the forward's.
  int mask = -1;
};

// The mask cases' shapes (kernels/ffpa/mask.h), per backward instance: a two-sided window
// on a batch of 2 with GQA, a causal window with Nq < Nkv, seqused_k with an empty entry
// and causal, and varlen (a one-row sequence, lengths over several 64-row blocks) causal
// with a window and with seqused_k. The first two run in --quick.
std::vector<ffpa::check::MaskSpec> g_mask_specs;
int add_mask_spec(const ffpa::check::MaskSpec& m) {
  g_mask_specs.push_back(m);
  return static_cast<int>(g_mask_specs.size()) - 1;
}

ffpa::check::BwdSpec bwd_spec(const Case& c) {
  return {c.d, c.dtype, c.causal, c.top_left, c.b, c.nq, c.nkv, c.hq, c.hkv, c.bnhd, c.nan_plant, c.nan_row};
}

// The row of ffpa/tolerance.h a case is judged by.
const ffpa::Tolerance& tolerance(const Case& c) {
  if (c.bwd) return ffpa::check::bwd_tolerance(c.dtype);
  if (c.mask >= 0) return ffpa::tolerance(c.dtype == ffpa::DType::kFp16 ? "fp16" : "bf16");  // and the bwd rows
  if (ffpa::is_lowp_impl(c.impl)) return ffpa::tolerance(ffpa::impl_facts(c.impl)->precision);
  if (c.accum == ffpa::Accum::kFp16) return ffpa::tolerance("fp16_acc");
  return ffpa::tolerance(c.dtype == ffpa::DType::kFp16 ? "fp16" : "bf16");
}

const char* error_kind_name(ffpa::ErrorKind k) {
  switch (k) {
    case ffpa::ErrorKind::kOk: return "ok";
    case ffpa::ErrorKind::kHeadDim: return "head_dim";
    case ffpa::ErrorKind::kDType: return "dtype";
    case ffpa::ErrorKind::kLayout: return "layout";
    case ffpa::ErrorKind::kShape: return "shape";
    case ffpa::ErrorKind::kDevice: return "device";
    case ffpa::ErrorKind::kImpl: return "impl";
  }
  return "unknown";
}

// A case's inputs: "normal", "outlier-k" (the low-precision cases) or, for a backward
// case with a planted NaN, "nan-<k|v|dout>[row]".
std::string inputs_name(const Case& c) {
  if (c.outlier_k) return "outlier-k";
  if (c.nan_plant == 0) return "normal";
  return std::string("nan-") + (c.nan_plant == 'o' ? "dout" : c.nan_plant == 'k' ? "k" : "v") + "[" +
         std::to_string(c.nan_row) + "]";
}

std::string case_name(const Case& c) {
  if (c.bwd) return ffpa::check::bwd_spec_name(bwd_spec(c));
  if (c.mask >= 0) return ffpa::check::mask_spec_name(g_mask_specs[c.mask], c.impl);
  char buf[400];
  std::snprintf(buf, sizeof(buf), "D=%d %s causal=%d B=%d Nq=%d Nkv=%d Hq=%d Hkv=%d layout=%s impl=%s%s%s%s%s%s%s",
                c.d, ffpa::dtype_name(c.dtype), c.causal ? 1 : 0, c.b, c.nq, c.nkv, c.hq, c.hkv,
                c.bnhd ? "bnhd" : "bhnd", ffpa::impl_name(c.impl),
                c.accum == ffpa::Accum::kFp16 ? " accum=fp16" : "", c.outlier_k ? " inputs=outlier-k" : "",
                c.misalign ? " misaligned" : "",
                c.stale_error ? " stale-error" : "", c.expect_error != ffpa::ErrorKind::kOk ? " expect-error=" : "",
                c.expect_error != ffpa::ErrorKind::kOk ? error_kind_name(c.expect_error) : "");
  return buf;
}

struct Result {
  bool ok = true;
  float abs_err = 0.f, rel_err = 0.f, lse_err = 0.f, max_ref = 0.f;
  // Over the checked rows: cosine similarity, relative L1 and gain (see the top); the
  // low-precision cases are judged by them.
  double cos = NAN, rel_l1 = NAN, gain = NAN;
  std::string impl_used = "-";
  std::string error_kind = "ok";  // the kind forward() returned
  std::string error;
};

// Logical [B, H, N, D] row (b, h, n) -> element offset in either memory order.

std::vector<int> rows_to_check(const Case& c) {
  std::vector<int> rows;
  if (c.sample_rows <= 0 || c.sample_rows >= c.nq) {
    for (int i = 0; i < c.nq; ++i) rows.push_back(i);
    return rows;
  }
  // The first and last rows (causal edges, the last partial tile) and an even spread.
  const int edge = c.sample_rows / 4;
  for (int i = 0; i < edge; ++i) rows.push_back(i);
  for (int i = c.nq - edge; i < c.nq; ++i) rows.push_back(i);
  const int spread = c.sample_rows - 2 * edge;
  for (int i = 0; i < spread; ++i) rows.push_back(edge + static_cast<int>((int64_t(i) * (c.nq - 2 * edge)) / spread));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// A fast normal generator (splitmix64 + Box-Muller): inputs of the long cases have
// tens of millions of elements, and std::normal_distribution dominated the run time.
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  float operator()() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double u1 = (next() >> 11) * 0x1.0p-53 + 0x1.0p-54, u2 = (next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(6.283185307179586 * u2));
    have_spare_ = true;
    return static_cast<float>(r * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  float spare_ = 0.f;
  bool have_spare_ = false;
};

// Inputs and references are shared by the cases of a group that differ only in the
// impl (and, for inputs, in causal): the host side, not the GPU, is the slow part.
struct Inputs {
  std::vector<float> q, k, v;         // logical [B, H, N, D], rounded to the dtype
  std::vector<uint16_t> qm, km, vm;   // device memory images (layout, padding)
};
struct Reference {
  std::vector<int> rows;
  std::vector<float> out, lse;
};
// The cache lives as long as consecutive cases share a scope: a low-precision group
// "lowp-D<d>-<dtype>" shares the inputs and references of the 16-bit group "D<d>-<dtype>"
// that precedes it (its plain-input cases cost no host time).
std::string cache_scope(const std::string& group) { return group.rfind("lowp-", 0) == 0 ? group.substr(5) : group; }

struct GroupCache {
  std::string group;  // the scope (cache_scope)
  std::vector<std::pair<std::string, std::shared_ptr<Inputs>>> inputs;
  std::vector<std::pair<std::string, std::shared_ptr<Reference>>> refs;
};

std::string input_key(const Case& c) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%d %d %d %d %d %d %d %d %d %d", c.d, int(c.dtype), c.b, c.nq, c.nkv, c.hq, c.hkv,
                int(c.bnhd), int(c.misalign), int(c.outlier_k));
  return buf;
}

template <typename T>
std::shared_ptr<T> find_cached(std::vector<std::pair<std::string, std::shared_ptr<T>>>& v, const std::string& key) {
  for (auto& kv : v)
    if (kv.first == key) return kv.second;
  return nullptr;
}

Result run_case(const Case& c, GroupCache& cache, uint64_t seed) {
  if (c.mask >= 0) {
    const ffpa::check::MaskResult m = ffpa::check::run_mask_case(g_mask_specs[c.mask], c.impl, seed);
    Result r;
    r.ok = m.ok;
    r.abs_err = static_cast<float>(m.o_err), r.lse_err = static_cast<float>(m.lse_err);
    r.rel_err = static_cast<float>(m.grad_max_rel), r.rel_l1 = m.grad_rel_l1;
    r.impl_used = ffpa::impl_name(c.impl);
    r.error = m.error;
    return r;
  }
  if (c.bwd) {
    const ffpa::check::BwdResult b = ffpa::check::run_bwd_case(bwd_spec(c), seed);
    Result r;
    r.ok = b.ok;
    r.abs_err = static_cast<float>(b.max_abs), r.rel_err = static_cast<float>(b.max_rel), r.lse_err = NAN;
    r.rel_l1 = b.rel_l1;
    r.impl_used = "bwd";
    r.error = b.error;
    if (!b.ok && std::isnan(b.max_abs)) r.error_kind = "refused";
    return r;
  }
  const int B = c.b, D = c.d;
  if (cache.group != cache_scope(c.group)) cache = GroupCache{cache_scope(c.group), {}, {}};
  const int64_t pad = c.misalign ? 1 : 0;  // elements before the array in its allocation
  const std::string ikey = input_key(c);
  std::shared_ptr<Inputs> in = find_cached(cache.inputs, ikey);
  if (!in) {
    in = std::make_shared<Inputs>();
    Normal dist(seed);
    // Outlier K: four distinct channels of every (batch, kv head) offset by 10, 20, 35 and
    // 50, signs drawn, on top of their noise (csrc/tests/emulate_lowp.cpp's inputs).
    std::vector<float> k_offset(static_cast<size_t>(B) * c.hkv * D, 0.f);
    if (c.outlier_k) {
      uint64_t h = seed ^ 0x6a09e667f3bcc909ull;
      auto draw = [&h]() {
        uint64_t z = (h += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
      };
      for (int bh = 0; bh < B * c.hkv; ++bh)
        for (float m : {10.f, 20.f, 35.f, 50.f}) {
          float* row = &k_offset[static_cast<size_t>(bh) * D];
          int ch = static_cast<int>(draw() % D);
          while (row[ch] != 0.f) ch = (ch + 1) % D;
          row[ch] = (draw() & 1) ? m : -m;
        }
    }
    auto make = [&](int H, int N, std::vector<float>& logical, std::vector<uint16_t>& mem, const float* offset) {
      logical.assign(static_cast<size_t>(B) * H * N * D, 0.f);
      mem.assign(logical.size() + pad, 0);
      for (int bi = 0; bi < B; ++bi)
        for (int hi = 0; hi < H; ++hi)
          for (int ni = 0; ni < N; ++ni)
            for (int di = 0; di < D; ++di) {
              const float shift = offset != nullptr ? offset[(static_cast<size_t>(bi) * H + hi) * D + di] : 0.f;
              const uint16_t bits = to_bits(dist() + shift, c.dtype);
              logical[(((static_cast<size_t>(bi) * H + hi) * N + ni) * D) + di] = from_bits(bits, c.dtype);
              mem[pad + row_offset(c.bnhd, H, N, D, bi, hi, ni) + di] = bits;
            }
    };
    make(c.hq, c.nq, in->q, in->qm, nullptr);
    make(c.hkv, c.nkv, in->k, in->km, c.outlier_k ? k_offset.data() : nullptr);
    make(c.hkv, c.nkv, in->v, in->vm, nullptr);
    cache.inputs.emplace_back(ikey, in);
  }
  const std::vector<uint16_t>&qm = in->qm, &km = in->km, &vm = in->vm;

  ffpa::ref::Problem p;
  p.b = B, p.hq = c.hq, p.hkv = c.hkv, p.nq = c.nq, p.nkv = c.nkv, p.d = D, p.causal = c.causal;
  p.scale = 1.f / std::sqrt(static_cast<float>(D));
  const std::string rkey = ikey + (c.causal ? " causal " : " full ") + std::to_string(c.sample_rows);
  std::shared_ptr<Reference> ref = find_cached(cache.refs, rkey);
  if (!ref && c.expect_error != ffpa::ErrorKind::kOk) {
    ref = std::make_shared<Reference>();  // nothing to compare: forward() must refuse
  } else if (!ref) {
    ref = std::make_shared<Reference>();
    ref->rows = rows_to_check(c);
    const int n = static_cast<int>(ref->rows.size());
    ref->out.resize(static_cast<size_t>(B) * c.hq * n * D);
    ref->lse.resize(static_cast<size_t>(B) * c.hq * n);
    ffpa::ref::attention_rows(p, in->q.data(), in->k.data(), in->v.data(), ref->rows.data(), n, ref->out.data(),
                              ref->lse.data());
    cache.refs.emplace_back(rkey, ref);
  }
  const std::vector<int>& rows = ref->rows;
  const std::vector<float>&ref_out = ref->out, &ref_lse = ref->lse;
  const int nr = static_cast<int>(rows.size());

  void *dq, *dk, *dv, *dout;
  float* dlse;
  const size_t lse_elems = static_cast<size_t>(B) * c.hq * c.nq;
  CHECK_CUDA(cudaMalloc(&dq, qm.size() * 2));
  CHECK_CUDA(cudaMalloc(&dk, km.size() * 2));
  CHECK_CUDA(cudaMalloc(&dv, vm.size() * 2));
  CHECK_CUDA(cudaMalloc(&dout, qm.size() * 2));
  CHECK_CUDA(cudaMalloc(&dlse, lse_elems * 4));
  CHECK_CUDA(cudaMemcpy(dq, qm.data(), qm.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, km.data(), km.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, vm.data(), vm.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, qm.size() * 2));  // NaN pattern: unwritten output fails
  CHECK_CUDA(cudaMemset(dlse, 0xff, lse_elems * 4));

  auto at = [&](void* base) { return static_cast<void*>(static_cast<uint16_t*>(base) + pad); };
  ffpa::ForwardArgs a;
  set_desc(a.q, at(dq), c.bnhd, B, c.hq, c.nq, D, c.dtype);
  set_desc(a.k, at(dk), c.bnhd, B, c.hkv, c.nkv, D, c.dtype);
  set_desc(a.v, at(dv), c.bnhd, B, c.hkv, c.nkv, D, c.dtype);
  set_desc(a.out, at(dout), c.bnhd, B, c.hq, c.nq, D, c.dtype);
  a.lse.data = dlse;
  a.lse.shape[0] = B, a.lse.shape[1] = c.hq, a.lse.shape[2] = c.nq;
  a.lse.stride[0] = static_cast<int64_t>(c.hq) * c.nq, a.lse.stride[1] = c.nq, a.lse.stride[2] = 1;
  a.causal = c.causal;
  a.scale = p.scale;
  a.impl = c.impl;
  a.accum = c.accum;
  ffpa::Impl used = ffpa::Impl::kAuto;
  a.impl_used = &used;
  Result r;
  if (c.stale_error) {
    // An invalid ordinal sets the runtime's last-error state without touching the
    // context; a launch that reads cudaGetLastError() would report it as its own.
    (void)cudaSetDevice(-1);
  }
  const ffpa::Status st = ffpa::forward(a);
  if (c.stale_error) (void)cudaGetLastError();
  r.impl_used = ffpa::impl_name(used);
  r.error_kind = error_kind_name(st.kind);
  if (c.expect_error != ffpa::ErrorKind::kOk) {
    // An argument error: forward() must refuse with that kind and launch nothing.
    r.abs_err = r.rel_err = r.lse_err = NAN;
    r.error = st.message;
    if (st.ok()) {
      const cudaError_t e = cudaDeviceSynchronize();
      r.ok = false;
      r.error = std::string("expected a ") + error_kind_name(c.expect_error) + " error, forward() launched " +
                r.impl_used + (e == cudaSuccess ? "" : std::string(" and failed: ") + cudaGetErrorString(e));
      if (e != cudaSuccess) {
        std::fprintf(stderr, "kernel failed in case %s: %s\n", case_name(c).c_str(), cudaGetErrorString(e));
        std::exit(2);
      }
    } else if (st.kind != c.expect_error) {
      r.ok = false;
      r.error = std::string("expected a ") + error_kind_name(c.expect_error) + " error, got " + r.error_kind + ": " +
                st.message;
    } else {
      for (const std::string& want : c.expect_in_message)
        if (st.message.find(want) == std::string::npos) {
          r.ok = false;
          r.error = "the message does not name '" + want + "': " + st.message;
        }
    }
  } else if (!st.ok()) {
    r.ok = false;
    r.abs_err = r.rel_err = r.lse_err = NAN;
    r.error = st.message;
  } else {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::fprintf(stderr, "kernel failed in case %s: %s\n", case_name(c).c_str(), cudaGetErrorString(e));
      std::exit(2);  // the context is unusable after a device fault
    }
    std::vector<uint16_t> om(qm.size());
    std::vector<float> lse(lse_elems);
    CHECK_CUDA(cudaMemcpy(om.data(), dout, om.size() * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
    double dot = 0, n_out = 0, n_ref = 0, l1 = 0, l1_ref = 0;
    for (int bi = 0; bi < B; ++bi)
      for (int hi = 0; hi < c.hq; ++hi)
        for (int ri = 0; ri < nr; ++ri) {
          const int ni = rows[ri];
          const size_t li = (static_cast<size_t>(bi) * c.hq + hi) * nr + ri;
          for (int di = 0; di < D; ++di) {
            const float want = ref_out[li * D + di];
            const float got = from_bits(om[pad + row_offset(c.bnhd, c.hq, c.nq, D, bi, hi, ni) + di], c.dtype);
            const float err = std::fabs(got - want);
            r.abs_err = std::isnan(err) ? INFINITY : std::max(r.abs_err, err);
            r.max_ref = std::max(r.max_ref, std::fabs(want));
            dot += double(got) * want, n_out += double(got) * got, n_ref += double(want) * want;
            l1 += err, l1_ref += std::fabs(want);
          }
          const float want = ref_lse[li];
          const float got = lse[(static_cast<size_t>(bi) * c.hq + hi) * c.nq + ni];
          const float err = (std::isinf(want) && got == want) ? 0.f : std::fabs(got - want);
          r.lse_err = std::isnan(err) ? INFINITY : std::max(r.lse_err, err);
        }
    // A case whose reference is all zeros (every row fully masked) has no scale:
    // relative error is then the absolute one.
    r.rel_err = r.max_ref > 0.f ? r.abs_err / r.max_ref : r.abs_err;
    // As csrc/tests/emulate_lowp.cpp: an all-zero reference has no direction (cos 1 when
    // the output is all zero too) and no scale (gain 1, rel_l1 the absolute L1). A NaN in
    // the output leaves cos 0 and gain and rel_l1 NaN, which no bound admits.
    r.cos = n_out > 0 && n_ref > 0 ? dot / std::sqrt(n_out * n_ref) : (n_out == n_ref ? 1.0 : 0.0);
    r.gain = n_ref > 0 ? dot / n_ref : 1.0;
    r.rel_l1 = l1_ref > 0 ? l1 / l1_ref : l1;
    const ffpa::Tolerance& tol = tolerance(c);
    if (ffpa::is_lowp_impl(c.impl)) {
      r.ok = r.cos >= tol.min_cos && r.rel_l1 <= tol.max_rel_l1 && r.abs_err <= tol.atol && r.lse_err <= tol.lse &&
             std::fabs(r.gain - 1.0) <= tol.max_gain_err;
      if (!r.ok) {  // name the bounds missed: the metrics sit close to them
        char buf[320] = "";
        std::snprintf(buf, sizeof(buf), "outside the %s bounds:%s%s%s%s%s", tol.name,
                      r.cos >= tol.min_cos ? "" : " cos < min_cos",
                      r.rel_l1 <= tol.max_rel_l1 ? "" : " rel_l1 > max_rel_l1",
                      r.abs_err <= tol.atol ? "" : " abs > atol", r.lse_err <= tol.lse ? "" : " lse > lse",
                      std::fabs(r.gain - 1.0) <= tol.max_gain_err ? "" : " |gain-1| > max_gain_err");
        r.error = buf;
      }
    } else {
      r.ok = r.rel_err <= tol.rtol && r.abs_err <= tol.atol && r.lse_err <= tol.lse;
    }
    if (c.expect != ffpa::Impl::kAuto && used != c.expect) {
      r.ok = false;
      r.error = std::string("expected the ") + ffpa::impl_name(c.expect) + " kernel, ran " + r.impl_used;
    }
  }
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout), cudaFree(dlse);
  return r;
}

// What the device and the build allow beyond the mma/simt matrix, and why: decided
// once, printed, written into the JSON and the summary.
struct Extras {
  bool tma = false;     // impl=tma cases are planned
  std::string tma_why;  // the reason either way
  bool cute = false;      // impl=cute cases are planned (compiled, and code for this device)
  bool cute_refused = false;  // compiled, but not for this device (the sm_120 family)
  bool cute_tma = false;  // impl=cute_tma cases: the CuTe kernels and tma
  std::string cute_why;
  bool f16acc = false;  // accum=fp16 cases are planned
  bool mma_f16acc = false;  // ... on impl=mma too (not on the sm_120 family: TMA only there)
  std::string f16acc_why;
  int major = 0;        // the device's compute capability major (0: dry run)
  // The low-precision kernels planned (compiled, and code for this device; a dry run: the
  // build's archs hold their code).
  bool fp8_cp = false;     // impl=cute_fp8
  bool fp8_tma = false;    // impl=cute_tma_fp8
  bool fp4 = false;        // impl=cute_tma_fp4
  bool fp8_cp_refused = false;  // cute_fp8 compiled, no code for this device (the sm_120 family)
  ffpa::Impl fp8_pick = ffpa::Impl::kAuto;  // the kernel impl=fp8 must run (kAuto: none)
  std::string lowp_why;
  // The backward cases: one group per backward instance of the build (ffpa::backward_instances()).
  std::vector<std::pair<int, ffpa::DType>> bwd;
  std::string bwd_why;
  bool lowp() const { return fp8_cp || fp8_tma || fp4; }
  // The planned low-precision kernels, in the order the groups run them.
  std::vector<ffpa::Impl> lowp_impls() const {
    std::vector<ffpa::Impl> v;
    if (fp8_cp) v.push_back(ffpa::Impl::kCuteFp8);
    if (fp8_tma) v.push_back(ffpa::Impl::kCuteTmaFp8);
    if (fp4) v.push_back(ffpa::Impl::kCuteTmaFp4);
    return v;
  }
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string o;
  for (const std::string& x : v) o += (o.empty() ? "" : sep) + x;
  return o.empty() ? "none" : o;
}

bool contains(const std::vector<std::string>& v, const char* x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The low-precision kernels: which are planned and why, per kernel. BuildInfo::impls
// lists the spellings with code for some compiled arch; the device queries say whether
// the current device loads that code.
void decide_lowp(const ffpa::BuildInfo& info, bool dry_run, int major, int minor, Extras& e) {
  using ffpa::Impl;
  const std::string dev = "sm_" + std::to_string(major) + std::to_string(minor);
  const bool has_cp = contains(info.impls, "cute_fp8"), has_tma = contains(info.impls, "cute_tma_fp8"),
             has_fp4 = contains(info.impls, "cute_tma_fp4");
  e.fp8_cp = has_cp && (dry_run || ffpa::fp8_runs_on_current_device(Impl::kCuteFp8));
  e.fp8_tma = has_tma && (dry_run || ffpa::fp8_runs_on_current_device(Impl::kCuteTmaFp8));
  e.fp4 = has_fp4 && (dry_run || ffpa::fp4_runs_on_current_device());
  e.fp8_cp_refused = has_cp && !e.fp8_cp && e.fp8_tma;
  // resolve_impl()'s rule for the alias: the TMA-fed kernel where it runs.
  e.fp8_pick = e.fp8_tma ? Impl::kCuteTmaFp8 : e.fp8_cp ? Impl::kCuteFp8 : Impl::kAuto;
  auto state = [&](bool compiled, bool planned, const char* no_code_why) {
    return std::string(!compiled ? "not compiled" : planned ? "planned" : no_code_why);
  };
  const std::string on_dev = dry_run ? "" : " on " + dev;
  std::string why = "cute_fp8 " + state(has_cp, e.fp8_cp, ("no code" + on_dev).c_str()) + ", cute_tma_fp8 " +
                    state(has_tma, e.fp8_tma, ("no code" + on_dev).c_str()) + ", cute_tma_fp4 " +
                    state(has_fp4, e.fp4, ("no code" + on_dev + " (NVFP4 runs on the sm_120 family only)").c_str());
  why += std::string(dry_run ? "; dry run: as on a device that runs each kernel the build's archs hold code for" : "") +
         " (FP8 archs " + join(info.fp8_archs, ", ") + "; NVFP4 archs " + join(info.fp4_archs, ", ") +
         ": NVFP4 code needs the sm_120 family's 120f or 120a)";
  // nvcc 13.0 lowers sm_90's m16n8k32 e4m3 mma to two fp16 HMMA (docs/install.md, "The
  // scheme"): on an sm_90 device these cases check FP8's numerics, and the bench times the
  // lowering, not FP8 tensor cores.
  bool sm90 = !dry_run && major == 9;
  for (const std::string& a : info.fp8_archs) sm90 |= dry_run && a.rfind("90", 0) == 0;
  if (sm90 && (e.fp8_cp || e.fp8_tma))
    why += "; on sm_90 the FP8 mma runs as fp16 HMMA (nvcc's lowering): FP8 correctness, not FP8 speed";
  const ffpa::Tolerance &t8 = ffpa::tolerance("fp8"), &t4 = ffpa::tolerance("fp4");
  char bounds[256];
  std::snprintf(bounds, sizeof(bounds),
                "; bounds (cmake/kernel-facts.json) fp8 cos >= %g, rel_l1 <= %g, abs <= %g, lse <= %g, |gain-1| <= %g; "
                "fp4 cos >= %g, rel_l1 <= %g, abs <= %g, lse <= %g, |gain-1| <= %g",
                t8.min_cos, t8.max_rel_l1, t8.atol, t8.lse, t8.max_gain_err, t4.min_cos, t4.max_rel_l1, t4.atol, t4.lse,
                t4.max_gain_err);
  e.lowp_why = why + bounds;
}

Extras decide_extras(const ffpa::BuildInfo& info, bool dry_run, int major, int minor) {
  Extras e;
  e.major = dry_run ? 0 : major;
  const std::string archs = join(info.archs, ", "), tma_archs = join(info.tma_archs, ", ");
  const std::string dev = "sm_" + std::to_string(major) + std::to_string(minor);
  if (!info.tma) {
    e.tma_why = "this build has no TMA code (archs " + archs + "; TMA code needs an arch >= " +
                std::to_string(ffpa::kTmaMinSm) + ")";
  } else if (dry_run) {
    e.tma = true;
    e.tma_why = "dry run: as on a device that loads this build's TMA code (TMA archs " + tma_archs + ")";
  } else if (ffpa::tma_runs_on_current_device()) {
    e.tma = true;
    e.tma_why = "the device (" + dev + ") loads this build's TMA code (TMA archs " + tma_archs + ")";
  } else {
    e.tma_why = "the device (" + dev + ") loads none of this build's TMA code (TMA archs " + tma_archs + ")";
  }
  // impl=cute has no code on the sm_120 family (the CuTe kernel is TMA-fed there):
  // refused there, which the api group checks.
  e.cute = info.cute && (dry_run || ffpa::cute_runs_on_current_device());
  e.cute_refused = info.cute && !e.cute;
  e.cute_tma = info.cute && e.tma;
  const std::string cute_part = e.cute ? "cute" : "cute refused on " + dev + " (TMA-fed only there)";
  e.cute_why = !info.cute ? "this build has no CuTe kernels"
               : e.cute_tma ? cute_part + " and cute_tma (CUTLASS " + info.cutlass_version + "; the TMA feed as above)"
                            : cute_part + " (CUTLASS " + info.cutlass_version + "); cute_tma: " + e.tma_why;
  const bool fp16 = std::find(info.dtypes.begin(), info.dtypes.end(), "fp16") != info.dtypes.end();
  if (!info.f16_acc || !fp16) {
    e.f16acc_why = "this build has no fp16 instances (accum=fp16 takes fp16 inputs only)";
  } else {
    e.f16acc = true;
    e.mma_f16acc = dry_run || ffpa::mma_f16_acc_runs_on_current_device();
    const ffpa::Tolerance& t = ffpa::tolerance("fp16_acc");
    char tol[96];
    std::snprintf(tol, sizeof(tol), " (tolerances rel %g, abs %g, lse %g)", t.rtol, t.atol, t.lse);
    e.f16acc_why = std::string("fp16 inputs, accum=fp16 on ") +
                   (e.mma_f16acc ? (e.tma ? "mma and tma" : "mma") : "tma only (the sm_120 family)") +
                   (e.cute ? (e.cute_tma ? ", cute and cute_tma" : ", cute") : "") + tol;
  }
  decide_lowp(info, dry_run, major, minor, e);
  // "<D>:<dtype>" per instance; the binding's bwd_instances reads the same list.
  for (const std::string& inst : ffpa::backward_instances()) {
    const size_t colon = inst.find(':');
    const std::string t = colon == std::string::npos ? "" : inst.substr(colon + 1);
    const int d = std::atoi(inst.c_str());
    if (d <= 0 || (t != "fp16" && t != "bf16")) {
      // A new dtype or spelling in ffpa::backward_instances() must be planned here first.
      std::fprintf(stderr, "ffpa::backward_instances() lists '%s': this runner knows <D>:fp16 and <D>:bf16 only\n",
                   inst.c_str());
      std::exit(2);
    }
    e.bwd.emplace_back(d, t == "fp16" ? ffpa::DType::kFp16 : ffpa::DType::kBf16);
  }
  const ffpa::Tolerance &b16 = ffpa::tolerance("bwd_fp16"), &bb16 = ffpa::tolerance("bwd_bf16");
  char bounds[200];
  std::snprintf(bounds, sizeof(bounds),
                "; bounds (ffpa/tolerance.h) per gradient: bwd_fp16 max rel <= %g, rel L1 <= %g; bwd_bf16 max rel <= "
                "%g, rel L1 <= %g",
                b16.atol, b16.max_rel_l1, bb16.atol, bb16.max_rel_l1);
  e.bwd_why = e.bwd.empty() ? std::string("this build has no backward kernels")
                            : "backward instances " + join(ffpa::backward_instances(), ", ") + bounds;
  return e;
}

std::vector<Case> plan_cases(const ffpa::BuildInfo& info, const Extras& x, bool quick) {
  using ffpa::Accum;
  using ffpa::ErrorKind;
  using ffpa::Impl;
  std::vector<Case> cases;
  std::vector<ffpa::DType> dtypes;
  for (const std::string& s : info.dtypes) dtypes.push_back(s == "fp16" ? ffpa::DType::kFp16 : ffpa::DType::kBf16);
  std::vector<Impl> impls = {Impl::kMma, Impl::kSimt};
  if (x.tma) impls.push_back(Impl::kTma);
  if (x.cute) impls.push_back(Impl::kCute);
  if (x.cute_tma) impls.push_back(Impl::kCuteTma);
  std::vector<Impl> f16_impls;
  if (x.mma_f16acc) f16_impls.push_back(Impl::kMma);
  if (x.tma) f16_impls.push_back(Impl::kTma);
  if (x.cute) f16_impls.push_back(Impl::kCute);
  if (x.cute_tma) f16_impls.push_back(Impl::kCuteTma);
  for (int d : info.head_dims)
    for (ffpa::DType dt : dtypes) {
      char group[64];
      std::snprintf(group, sizeof(group), "D%d-%s", d, ffpa::dtype_name(dt));
      auto add = [&](bool causal, int nq, int nkv, int hkv, bool bnhd, Impl impl, Accum accum = Accum::kFp32) {
        cases.push_back({group, d, dt, causal, 2, nq, nkv, 4, hkv, bnhd, impl, Impl::kAuto, 0, false, false, accum});
      };
      for (bool causal : {false, true}) {
        for (Impl impl : impls) {
          for (int hkv : {4, 2}) {
            add(causal, 256, 256, hkv, false, impl);
            add(causal, 200, 317, hkv, false, impl);
            if (!quick) add(causal, 317, 200, hkv, false, impl);  // bottom-right: first rows see no key
          }
          if (quick) continue;
          add(causal, 200, 317, 2, true, impl);  // [B, N, H, D] memory: strided views
          add(causal, 37, 23, 1, false, impl);   // Nkv < one 64-key tile, h_ratio 4
        }
        // fp16 accumulation: one of each shape class (the inputs and references are
        // those of the fp32 cases above: only the launches are extra).
        if (!x.f16acc || dt != ffpa::DType::kFp16) continue;
        for (Impl impl : f16_impls) {
          add(causal, 256, 256, 4, false, impl, Accum::kFp16);
          add(causal, 200, 317, 2, false, impl, Accum::kFp16);
          if (quick) continue;
          add(causal, 317, 200, 2, false, impl, Accum::kFp16);
          add(causal, 200, 317, 2, true, impl, Accum::kFp16);
          add(causal, 37, 23, 1, false, impl, Accum::kFp16);
        }
      }
      // The low-precision group of this head dim and dtype, right after the 16-bit group
      // whose inputs and references its plain-input cases share (cache_scope). Judged by
      // the fp8 / fp4 rows of ffpa/tolerance.h. One list for every kernel: the feeds
      // differ in how they reach the tails (cp.async zero-fill, TMA's out-of-bounds
      // boxes), which the non-aligned Nq / Nkv exercise.
      if (!x.lowp()) continue;
      struct Shape {
        int nq, nkv, hkv;
        bool bnhd, outlier_k;
      };
      std::vector<Shape> shapes;
      if (quick) {
        shapes = {{256, 256, 4, false, true}, {200, 317, 2, false, false}};
      } else if (dt == ffpa::DType::kFp16) {
        shapes = {{256, 256, 4, false, true},   {200, 317, 2, false, true},  {256, 256, 4, false, false},
                  {200, 317, 2, false, false},  {317, 200, 2, false, false}, {200, 317, 2, true, false},
                  {37, 23, 1, false, false}};
      } else {
        shapes = {{256, 256, 4, false, true}, {200, 317, 2, false, true}, {317, 200, 2, false, false},
                  {37, 23, 1, false, false}};
      }
      const std::string lgroup = std::string("lowp-") + group;
      for (bool causal : {false, true})
        for (Impl impl : x.lowp_impls())
          for (const Shape& sh : shapes) {
            Case c{lgroup, d, dt, causal, 2, sh.nq, sh.nkv, 4, sh.hkv, sh.bnhd, impl, impl, 0, false, false};
            c.outlier_k = sh.outlier_k;
            cases.push_back(c);
          }
    }
  // The backward: one group per backward instance. B = 2 and Hq = 4 as above; ragged
  // Nq / Nkv (83 / 141 and 141 / 83: partial tiles of the 64-query and 32 / 64-key
  // blocks), GQA (h_ratio 2 and 4: dK / dV summed over the group), both causal alignments
  // (bottom-right with Nq > Nkv has rows that see no key, whose gradients are zero;
  // top-left with Nq > Nkv sees every key from row Nkv - 1 on), a square causal case and a
  // strided [B, N, H, D] view. The float64 reference is the host's cost (about 0.3 s per
  // case at D = 512): B = 1 where the batch stride is not what the case is about.
  for (const std::pair<int, ffpa::DType>& inst : x.bwd) {
    const int d = inst.first;
    const ffpa::DType dt = inst.second;
    char group[64];
    std::snprintf(group, sizeof(group), "bwd-D%d-%s", d, ffpa::dtype_name(dt));
    auto add = [&](bool causal, bool top_left, int b, int nq, int nkv, int hkv, bool bnhd, char plant = 0,
                   int plant_row = 0) {
      Case c{group, d, dt, causal, b, nq, nkv, 4, hkv, bnhd, Impl::kMma, Impl::kAuto, 0, false, false};
      c.bwd = true, c.top_left = top_left, c.nan_plant = plant, c.nan_row = plant_row;
      cases.push_back(c);
    };
    add(false, false, 2, 83, 141, 2, false);
    add(true, false, 1, 141, 83, 2, false);
    // NaN where the bottom-right mask hides it (Nq 141 > Nkv 83: rows 0-57 see no key):
    // in dO of row 4, which sees no key (dV = P^T dO is NaN in every key row), in K row 7
    // and V row 2 (hidden from rows 0-64 / 0-59). The non-finite pre-pass's heads then
    // visit every key block (kernels/ffpa/mask.h).
    add(true, false, 1, 141, 83, 2, false, 'o', 4);
    if (quick) continue;
    add(true, false, 1, 141, 83, 2, false, 'k', 7);
    add(true, false, 1, 141, 83, 2, true, 'v', 2);
    add(true, true, 1, 141, 83, 1, false);
    add(true, true, 2, 83, 141, 4, true);
    add(true, false, 1, 128, 128, 2, false);
  }
  // The masks, per backward instance (they need the forward and the backward of the head
  // dim and dtype): the forward on mma and, where the device runs them, tma and the CuTe
  // kernels' masked instances (cute, cute_tma; fp32 accumulation).
  std::vector<Impl> mask_impls = {Impl::kMma};
  if (x.tma) mask_impls.push_back(Impl::kTma);
  if (x.cute) mask_impls.push_back(Impl::kCute);
  if (x.cute_tma) mask_impls.push_back(Impl::kCuteTma);
  for (const std::pair<int, ffpa::DType>& inst : x.bwd) {
    const int d = inst.first;
    const ffpa::DType dt = inst.second;
    char group[64];
    std::snprintf(group, sizeof(group), "masks-D%d-%s", d, ffpa::dtype_name(dt));
    using MS = ffpa::check::MaskSpec;
    const MS specs[] = {
        MS{d, dt, false, false, 4, 2, {300, 300}, {300, 300}, {}, 100, 40},
        MS{d, dt, true, true, 4, 1, {70, 1, 257}, {90, 33, 300}, {}, 64, -1},
        MS{d, dt, false, true, 4, 2, {141, 141, 141}, {200, 200, 200}, {200, 77, 0}, -1, -1},
        MS{d, dt, false, true, 4, 4, {200}, {317}, {}, 64, -1},
        MS{d, dt, true, false, 4, 2, {100, 180}, {128, 180}, {60, 180}, 30, 20},
        // NaN / inf the window hides from some rows (SDPA's math backend: those rows NaN
        // too, and the gradients they reach): a NaN in K at key 250 (rows 0-209 do not see
        // it), +inf in V of a packed sequence at key 5 (rows past 26 do not see it; the
        // other sequences, flagged with it, stay finite), and a NaN in dO row 100 of a
        // padded sequence (which sees keys 0-36 of its 77: the dK / dV of all 77 go NaN).
        MS{d, dt, false, false, 4, 2, {300, 300}, {300, 300}, {}, 100, 40, 'k', 0, 1, 250, NAN},
        MS{d, dt, true, true, 4, 1, {70, 1, 257}, {90, 33, 300}, {}, 64, -1, 'v', 2, 0, 5, INFINITY},
        MS{d, dt, false, true, 4, 2, {141, 141, 141}, {200, 200, 200}, {200, 77, 0}, 64, -1, 'd', 1, 3, 100, NAN},
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); ++i) {
      if (quick && i >= 2) break;
      const MS& m = specs[i];
      const int idx = add_mask_spec(m);
      for (Impl impl : mask_impls) {
        Case c{group, d, dt, m.causal, static_cast<int>(m.lens_q.size()), m.lens_q[0], m.lens_k[0], m.hq, m.hkv,
               m.varlen, impl, Impl::kAuto, 0, false, false};
        c.mask = idx;
        cases.push_back(c);
      }
    }
  }
  if (!quick && !info.head_dims.empty() && !dtypes.empty()) {
    std::vector<int> long_dims;
    for (int d : {128, 512})
      if (std::find(info.head_dims.begin(), info.head_dims.end(), d) != info.head_dims.end()) long_dims.push_back(d);
    if (long_dims.empty()) long_dims.push_back(info.head_dims.back());
    auto add_long = [&](int d, ffpa::DType dt, bool causal, int nq, int nkv, Impl impl, Accum accum) {
      cases.push_back({"long", d, dt, causal, 1, nq, nkv, 2, 1, false, impl, Impl::kAuto, 128, false, false, accum});
    };
    for (int d : long_dims)
      for (int n : {4096, 8192})
        for (ffpa::DType dt : dtypes)
          for (bool causal : {false, true}) {
            // Adjacent: the impls share the inputs and the sampled reference rows.
            add_long(d, dt, causal, n, n, Impl::kMma, Accum::kFp32);
            if (x.tma) add_long(d, dt, causal, n, n, Impl::kTma, Accum::kFp32);
            if (x.cute_tma) add_long(d, dt, causal, n, n, Impl::kCuteTma, Accum::kFp32);
            if (!x.f16acc || dt != ffpa::DType::kFp16 || n != 8192 || causal) continue;
            for (Impl impl : f16_impls) add_long(d, dt, causal, n, n, impl, Accum::kFp16);
          }
    // Nq != Nkv at length: a short query block against a long KV (decode-like prefill).
    add_long(long_dims.back(), dtypes[0], true, 1000, 8192, Impl::kMma, Accum::kFp32);
    if (x.tma) add_long(long_dims.back(), dtypes[0], true, 1000, 8192, Impl::kTma, Accum::kFp32);
    if (x.cute_tma) add_long(long_dims.back(), dtypes[0], true, 1000, 8192, Impl::kCuteTma, Accum::kFp32);
    // The low-precision kernels at length: 128 key blocks of quantisation scales and P
    // rounded over 8192 keys. Non-causal at each long head dim on the inputs of the 16-bit
    // rows above (shared: no host time), and causal on outlier-K inputs at the largest
    // (one more input set and its sampled reference).
    for (int d : long_dims)
      for (Impl impl : x.lowp_impls()) add_long(d, dtypes[0], false, 8192, 8192, impl, Accum::kFp32);
    for (Impl impl : x.lowp_impls()) {
      add_long(long_dims.back(), dtypes[0], true, 8192, 8192, impl, Accum::kFp32);
      cases.back().outlier_k = true;
    }
  }
  if (!info.head_dims.empty() && !dtypes.empty()) {
    const int d = info.head_dims.front();
    const ffpa::DType dt = dtypes.front();
    const bool has_fp16 = std::find(dtypes.begin(), dtypes.end(), ffpa::DType::kFp16) != dtypes.end();
    const bool has_bf16 = std::find(dtypes.begin(), dtypes.end(), ffpa::DType::kBf16) != dtypes.end();
    // impl=auto: tma on the sm_120 family when the device loads TMA code, else mma.
    const Impl auto_pick = (x.major == 12 && x.tma) ? Impl::kTma : Impl::kMma;
    auto api = [&](ffpa::DType t, bool causal, Impl impl, Impl expect, bool misalign, bool stale,
                   Accum accum = Accum::kFp32, ErrorKind err = ErrorKind::kOk, std::vector<std::string> names = {}) {
      cases.push_back({"api", d, t, causal, 2, 200, 317, 4, 2, false, impl, expect, 0, misalign, stale, accum, err,
                       std::move(names)});
    };
    api(dt, false, Impl::kAuto, auto_pick, false, false);
    api(dt, false, Impl::kAuto, Impl::kSimt, true, false);
    api(dt, true, Impl::kMma, Impl::kMma, false, true);
    if (x.tma) api(has_bf16 ? ffpa::DType::kBf16 : dt, false, Impl::kTma, Impl::kTma, false, false);
    if (x.cute_tma) api(has_bf16 ? ffpa::DType::kBf16 : dt, false, Impl::kCuteTma, Impl::kCuteTma, false, false);
    // The CuTe kernels need 16-byte aligned rows like the other tensor-core paths.
    if (x.cute) api(dt, false, Impl::kCute, Impl::kAuto, true, false, Accum::kFp32, ErrorKind::kLayout);
    if (has_fp16 && x.f16acc) {
      api(ffpa::DType::kFp16, false, Impl::kAuto, auto_pick, false, false, Accum::kFp16);
      api(ffpa::DType::kFp16, false, Impl::kSimt, Impl::kAuto, false, false, Accum::kFp16, ErrorKind::kImpl);
      // No SIMT fallback for fp16 accumulation: misaligned arrays are a layout error.
      api(ffpa::DType::kFp16, false, Impl::kAuto, Impl::kAuto, true, false, Accum::kFp16, ErrorKind::kLayout);
    }
    api(ffpa::DType::kBf16, false, Impl::kMma, Impl::kAuto, false, false, Accum::kFp16, ErrorKind::kDType);
    // Where the device loads no TMA code, impl=tma is refused, naming the compiled archs.
    if (!x.tma) api(dt, false, Impl::kTma, Impl::kAuto, false, false, Accum::kFp32, ErrorKind::kImpl, info.archs);
    if (x.cute && !x.cute_tma)
      api(dt, false, Impl::kCuteTma, Impl::kAuto, false, false, Accum::kFp32, ErrorKind::kImpl, info.archs);
    // On the sm_120 family impl=cute is refused (the CuTe kernel is TMA-fed there).
    if (x.cute_refused) api(dt, false, Impl::kCute, Impl::kAuto, false, false, Accum::kFp32, ErrorKind::kImpl);
    // The low-precision impls (ffpa/api.h): the alias fp8 runs the FP8 kernel the device
    // has (cute_tma_fp8 where TMA runs, else cute_fp8), reported through impl_used and
    // judged by the fp8 bounds; misaligned arrays are a layout error as for every
    // cp.async / TMA feed. Without FP8 code for the device, impl=fp8 is an impl error.
    const ffpa::DType dt2 = has_bf16 ? ffpa::DType::kBf16 : dt;
    if (x.fp8_pick != Impl::kAuto) {
      api(dt2, true, Impl::kFp8, x.fp8_pick, false, false);
      api(dt, false, Impl::kFp8, Impl::kAuto, true, false, Accum::kFp32, ErrorKind::kLayout);
    } else {
      api(dt, false, Impl::kFp8, Impl::kAuto, false, false, Accum::kFp32, ErrorKind::kImpl);
    }
    // The FP8 / NVFP4 mmas accumulate in fp32 only: accum=fp16 is refused (validation,
    // before any device question).
    if (has_fp16)
      api(ffpa::DType::kFp16, false, Impl::kFp8, Impl::kAuto, false, false, Accum::kFp16, ErrorKind::kImpl,
          {"accum='fp16'"});
    // NVFP4 has code only for the sm_120 family's 120f / 120a targets: elsewhere impl=fp4
    // is refused and the message names the GPUs that have it.
    if (x.fp4)
      api(dt, false, Impl::kFp4, Impl::kCuteTmaFp4, false, false);
    else
      api(dt, false, Impl::kFp4, Impl::kAuto, false, false, Accum::kFp32, ErrorKind::kImpl, {"sm_120 family"});
    // On the sm_120 family the FP8 kernel is TMA-fed only: impl=cute_fp8 is refused there.
    if (x.fp8_cp_refused)
      api(dt, false, Impl::kCuteFp8, Impl::kAuto, false, false, Accum::kFp32, ErrorKind::kImpl);
  }
  return cases;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) o += ' ';
    else o += ch;
  }
  return o;
}

std::string num(float x) {
  if (!std::isfinite(x)) return "null";  // JSON has no inf/nan; null reads as "not measured"
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

// The low-precision metrics sit close to their bounds (cos >= 0.998): more digits.
std::string num6(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.7g", x);
  return buf;
}

// The whole report, rewritten atomically (temp file + rename) after every group.
void write_json(const char* path, const std::string& device, const Extras& x, const std::vector<Case>& cases,
                const std::vector<Result>& results, size_t groups_done, size_t groups_total, const char* status) {
  if (path == nullptr) return;
  // ffpa/tolerance.h's table, row by row under its names: the 16-bit rows' rel (rtol), abs
  // (atol) and lse; the low-precision rows' cos, rel_l1 and gain bounds, abs and lse.
  auto tol = [](const ffpa::Tolerance& t) {
    // The backward's rows bound each gradient's max |g - ref| / max |ref| (its atol) and
    // sum |g - ref| / sum |ref|.
    if (std::strncmp(t.name, "bwd_", 4) == 0)
      return "{\"max_rel\": " + num(t.atol) + ", \"max_rel_l1\": " + num(t.max_rel_l1) + "}";
    if (t.min_cos > 0.f)
      return "{\"min_cos\": " + num(t.min_cos) + ", \"max_rel_l1\": " + num(t.max_rel_l1) + ", \"abs\": " +
             num(t.atol) + ", \"lse\": " + num(t.lse) + ", \"max_gain_err\": " + num(t.max_gain_err) + "}";
    return "{\"rel\": " + num(t.rtol) + ", \"abs\": " + num(t.atol) + ", \"lse\": " + num(t.lse) + "}";
  };
  std::string j = "{\n  \"device\": \"" + json_escape(device) + "\",\n  \"status\": \"" + status + "\",\n";
  j += "  \"tolerances\": {";
  for (const ffpa::Tolerance& t : ffpa::kTolerances)
    j += std::string(&t == ffpa::kTolerances ? "" : ", ") + "\"" + t.name + "\": " + tol(t);
  j += "},\n";
  // Whether the TMA and fp16-accumulated cases are in the plan, and why (either way).
  j += "  \"tma\": {\"planned\": " + std::string(x.tma ? "true" : "false") + ", \"reason\": \"" +
       json_escape(x.tma_why) + "\"},\n";
  j += "  \"cute\": {\"planned\": " + std::string(x.cute ? "true" : "false") + ", \"cute_tma\": " +
       std::string(x.cute_tma ? "true" : "false") + ", \"reason\": \"" + json_escape(x.cute_why) + "\"},\n";
  // The low-precision kernels: each one planned or not, what impl=fp8 resolves to, why.
  j += "  \"lowp\": {\"planned\": " + std::string(x.lowp() ? "true" : "false") + ", \"cute_fp8\": " +
       (x.fp8_cp ? "true" : "false") + ", \"cute_tma_fp8\": " + (x.fp8_tma ? "true" : "false") +
       ", \"cute_tma_fp4\": " + (x.fp4 ? "true" : "false") + ", \"fp8_resolves_to\": \"" +
       (x.fp8_pick == ffpa::Impl::kAuto ? "none" : ffpa::impl_name(x.fp8_pick)) + "\", \"reason\": \"" +
       json_escape(x.lowp_why) + "\"},\n";
  j += "  \"bwd\": {\"planned\": " + std::string(x.bwd.empty() ? "false" : "true") + ", \"reason\": \"" +
       json_escape(x.bwd_why) + "\"},\n";
  j += "  \"f16_acc\": {\"planned\": " + std::string(x.f16acc ? "true" : "false") + ", \"reason\": \"" +
       json_escape(x.f16acc_why) + "\"},\n";
  j += "  \"groups_done\": " + std::to_string(groups_done) + ",\n  \"groups_total\": " + std::to_string(groups_total) +
       ",\n  \"cases\": [\n";
  size_t failed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    j += "    {\"case\": \"" + json_escape(case_name(c)) + "\", \"group\": \"" + c.group + "\", \"d\": " +
         std::to_string(c.d) + ", \"dtype\": \"" + ffpa::dtype_name(c.dtype) + "\", \"causal\": " +
         (c.causal ? "true" : "false") + ", \"b\": " + std::to_string(c.b) + ", \"nq\": " + std::to_string(c.nq) +
         ", \"nkv\": " + std::to_string(c.nkv) + ", \"hq\": " + std::to_string(c.hq) +
         ", \"hkv\": " + std::to_string(c.hkv) + ", \"layout\": \"" + (c.bnhd ? "bnhd" : "bhnd") +
         "\", \"impl\": \"" + (c.bwd ? "bwd" : ffpa::impl_name(c.impl)) + "\", \"accum\": \"" + ffpa::accum_name(c.accum) +
         "\", \"inputs\": \"" + inputs_name(c) + "\", \"tolerance\": \"" +
         tolerance(c).name + "\", \"expect_error\": \"" + error_kind_name(c.expect_error) + "\", \"rows_checked\": " +
         (c.expect_error != ffpa::ErrorKind::kOk ? std::string("0")
          : c.sample_rows > 0                    ? std::to_string(rows_to_check(c).size())
                                                 : std::to_string(c.nq));
    // A backward case's causal alignment (the forward's cases are bottom-right).
    if (c.bwd) j += std::string(", \"top_left\": ") + (c.top_left ? "true" : "false");
    if (c.expect_error != ffpa::ErrorKind::kOk) {
      j += ", \"expect_in_message\": [";
      for (size_t m = 0; m < c.expect_in_message.size(); ++m)
        j += (m ? ", \"" : "\"") + json_escape(c.expect_in_message[m]) + "\"";
      j += "]";
    }
    if (i < results.size()) {
      const Result& r = results[i];
      failed += r.ok ? 0 : 1;
      j += ", \"ran\": true, \"pass\": " + std::string(r.ok ? "true" : "false") + ", \"impl_used\": \"" +
           r.impl_used + "\", \"error_kind\": \"" + r.error_kind + "\", \"abs_err\": " + num(r.abs_err) +
           ", \"rel_err\": " + num(r.rel_err) + ", \"lse_err\": " + num(r.lse_err) +
           ", \"max_ref\": " + num(r.max_ref) + ", \"error\": \"" + json_escape(r.error) + "\"";
      if (c.bwd || c.mask >= 0) j += ", \"rel_l1\": " + num6(r.rel_l1);
      if (ffpa::is_lowp_impl(c.impl) && c.expect_error == ffpa::ErrorKind::kOk && !c.bwd)
        j += ", \"cos\": " + num6(r.cos) + ", \"rel_l1\": " + num6(r.rel_l1) + ", \"gain\": " + num6(r.gain);
    } else {
      j += ", \"ran\": false";
    }
    j += std::string("}") + (i + 1 < cases.size() ? "," : "") + "\n";
  }
  j += "  ],\n  \"total\": " + std::to_string(cases.size()) + ",\n  \"ran\": " + std::to_string(results.size()) +
       ",\n  \"failed\": " + std::to_string(failed) + "\n}\n";
  const std::string tmp = std::string(path) + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr || std::fputs(j.c_str(), f) < 0 || std::fclose(f) != 0 || std::rename(tmp.c_str(), path) != 0) {
    std::fprintf(stderr, "cannot write %s\n", path);
    std::exit(2);
  }
}

std::vector<int> parse_ints(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const long x = std::strtol(p, &end, 10);
    if (end == p || x <= 0) return {};
    v.push_back(static_cast<int>(x));
    p = (*end == ',' || *end == ';') ? end + 1 : end;
    if (*end != 0 && *end != ',' && *end != ';') return {};
  }
  return v;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--json FILE] [--quick] [--dry-run]\n"
               "       %s --bench-csv FILE [--bench-dims 64,128,...] [--bench-n N] [--bench-h H]\n"
               "          [--bench-warmup W] [--bench-iters I] [--dry-run]\n"
               "       %s --sweep-csv FILE [--bench-n N] [--bench-h H] [--bench-warmup W] [--bench-iters I] [--dry-run]\n",
               argv0, argv0, argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  bool quick = false, dry_run = false, bench = false;
  const char* sweep_csv = nullptr;
  BenchOpts bo;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json" && has_value) json_path = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--dry-run") dry_run = true;
    else if (a == "--bench-csv" && has_value) bo.csv = argv[++i], bench = true;
    else if (a == "--sweep-csv" && has_value) sweep_csv = argv[++i];
    else if (a == "--bench-dims" && has_value) {
      bo.dims = parse_ints(argv[++i]);
      if (bo.dims.empty()) return usage(argv[0]);
    } else if ((a == "--bench-n" || a == "--bench-h" || a == "--bench-warmup" || a == "--bench-iters") && has_value) {
      const int x = std::atoi(argv[++i]);
      if (x <= 0 && a != "--bench-warmup") return usage(argv[0]);
      (a == "--bench-n" ? bo.n : a == "--bench-h" ? bo.h : a == "--bench-warmup" ? bo.warmup : bo.iters) = x;
    } else {
      return usage(argv[0]);
    }
  }
  const ffpa::BuildInfo info = ffpa::build_info();
  if (sweep_csv != nullptr) {
    if (!dry_run && ffpa::device_count() == 0) {
      std::printf("SKIPPED: no CUDA device\n");
      return 77;
    }
    return run_sweep(bo, sweep_csv, dry_run);
  }
  std::string device = "none (dry run)";
  cudaDeviceProp prop{};
  if (!dry_run) {
    if (ffpa::device_count() == 0) {
      std::printf("SKIPPED: no CUDA device\n");
      return 77;
    }
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    device = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  }
  const Extras extras = decide_extras(info, dry_run, prop.major, prop.minor);
  std::printf("device: %s; compiled head dims:", device.c_str());
  for (int d : info.head_dims) std::printf(" %d", d);
  std::printf("; dtypes:");
  for (const std::string& t : info.dtypes) std::printf(" %s", t.c_str());
  std::printf("\n");
  // One line each: whether the TMA and fp16-accumulated cases (and bench rows) run, and why.
  const char* skipped = "skipped, not run and not counted as passed";
  std::printf("TMA cases: %s (%s)\n", extras.tma ? "planned" : skipped, extras.tma_why.c_str());
  std::printf("fp16-accumulated cases: %s (%s)\n", extras.f16acc ? "planned" : skipped, extras.f16acc_why.c_str());
  std::printf("CuTe cases: %s (%s)\n", extras.cute ? "planned" : skipped, extras.cute_why.c_str());
  std::printf("Low-precision cases: %s (%s)\n", extras.lowp() ? "planned" : skipped, extras.lowp_why.c_str());
  std::printf("Backward cases: %s (%s)\n", extras.bwd.empty() ? skipped : "planned", extras.bwd_why.c_str());
  if (bench) {
    ffpa::check::BenchPaths paths;
    paths.tma = extras.tma, paths.f16acc = extras.f16acc, paths.mma_f16acc = extras.mma_f16acc;
    paths.cute = extras.cute, paths.cute_tma = extras.cute_tma;
    paths.cute_fp8 = extras.fp8_cp, paths.cute_tma_fp8 = extras.fp8_tma, paths.cute_tma_fp4 = extras.fp4;
    return run_bench(bo, info, paths, dry_run);
  }

  const std::vector<Case> cases = plan_cases(info, extras, quick);
  std::vector<std::string> groups;
  for (const Case& c : cases)
    if (groups.empty() || groups.back() != c.group) groups.push_back(c.group);
  std::string tols;
  for (const ffpa::Tolerance& t : ffpa::kTolerances) {
    char buf[160];
    if (std::strncmp(t.name, "bwd_", 4) == 0)
      std::snprintf(buf, sizeof(buf), "%s max rel %g rel_l1 %g", t.name, t.atol, t.max_rel_l1);
    else if (t.min_cos > 0.f)
      std::snprintf(buf, sizeof(buf), "%s cos >= %g rel_l1 <= %g abs %g lse %g |gain-1| <= %g", t.name, t.min_cos,
                    t.max_rel_l1, t.atol, t.lse, t.max_gain_err);
    else
      std::snprintf(buf, sizeof(buf), "%s rel %.0e abs %.0e lse %.0e", t.name, t.rtol, t.atol, t.lse);
    tols += (tols.empty() ? "" : ", ") + std::string(buf);
  }
  std::printf("plan: %zu cases in %zu groups; tolerances (ffpa/tolerance.h) %s\n", cases.size(), groups.size(),
              tols.c_str());
  std::vector<Result> results;
  write_json(json_path, device, extras, cases, results, 0, groups.size(), dry_run ? "planned" : "running");
  if (dry_run) {
    for (const Case& c : cases) std::printf("[PLAN] %s: %s\n", c.group.c_str(), case_name(c).c_str());
    return 0;
  }

  GroupCache cache;
  int failed = 0;
  std::vector<std::string> failures;
  size_t groups_done = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Result r = run_case(c, cache, 1234 + i);
    results.push_back(r);
    const std::string name = case_name(c);
    if (c.expect_error != ffpa::ErrorKind::kOk)
      std::printf("[%s] %s returned=%s error=%s\n", r.ok ? "PASS" : "FAIL", name.c_str(), r.error_kind.c_str(),
                  r.error.c_str());
    else if (c.mask >= 0)
      std::printf("[%s] %s O abs=%.3e lse=%.3e grads max_rel=%.3e rel_l1=%.3e%s%s\n", r.ok ? "PASS" : "FAIL",
                  name.c_str(), r.abs_err, r.lse_err, r.rel_err, r.rel_l1, r.error.empty() ? "" : " error=",
                  r.error.c_str());
    else if (c.bwd)
      std::printf("[%s] %s max_rel=%.3e rel_l1=%.3e abs=%.3e%s%s\n", r.ok ? "PASS" : "FAIL", name.c_str(), r.rel_err,
                  r.rel_l1, r.abs_err, r.error.empty() ? "" : " error=", r.error.c_str());
    else if (ffpa::is_lowp_impl(c.impl))
      std::printf("[%s] %s ran=%s cos=%.6f rel_l1=%.4f gain=%.4f abs=%.3e lse=%.3e%s%s\n", r.ok ? "PASS" : "FAIL",
                  name.c_str(), r.impl_used.c_str(), r.cos, r.rel_l1, r.gain, r.abs_err, r.lse_err,
                  r.error.empty() ? "" : " error=", r.error.c_str());
    else
      std::printf("[%s] %s ran=%s abs=%.3e rel=%.3e lse=%.3e%s%s\n", r.ok ? "PASS" : "FAIL", name.c_str(),
                  r.impl_used.c_str(), r.abs_err, r.rel_err, r.lse_err, r.error.empty() ? "" : " error=",
                  r.error.c_str());
    std::fflush(stdout);
    if (!r.ok) {
      ++failed;
      failures.push_back(name);
    }
    if (i + 1 == cases.size() || cases[i + 1].group != c.group) {
      ++groups_done;
      write_json(json_path, device, extras, cases, results, groups_done, groups.size(),
                 i + 1 == cases.size() ? "done" : "running");
    }
  }
  std::printf("%zu cases, %d failed\n", cases.size(), failed);
  for (const std::string& f : failures) std::printf("FAILED: %s\n", f.c_str());
  return failed ? 1 : 0;
}
