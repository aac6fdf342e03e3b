// CPU emulation of the masks (kernels/ffpa/mask.h) in the forward kernels (the mma kernel's
// and the CuTe kernel's masked instances, cp.async and TMA feeds; emulate_masks_cute.h) and
// the backward kernels: the sliding window (left only, right only, both,
// with and without causal), key padding (seqused_k) and the packed varlen layout, with GQA
// and Nq != Nkv. The reference is the float64 math backend of csrc/reference/
// attention_bwd_ref.cpp run per sequence on that sequence's own rows and only its
// seqused_k keys (so padding is simply absent there), with the window written from its
// definition; it shares no code with mask.h. Checked per case:
//   - the forward's O and LSE (the fp16 / bf16 rows of ffpa/tolerance.h) on both feeds,
//     and the backward's dQ, dK, dV (bwd_fp16 / bwd_bf16), padded keys' dK / dV zero;
//   - rows the grid covers but no sequence owns are never written (poisoned NaN stays);
//   - padded keys hold NaN in K and V: they must never reach a result (never read);
//   - NaN / inf planted (the cases named nan-*): the forward against SDPA's math backend
//     with the mask as an additive -inf bias over the sequence's read keys (written here
//     from the definition, in double), the NaN / inf pattern of O and the LSE exactly; the
//     backward's dQ, dK, dV against the reference's autograd with the same additive mask
//     (NaN / inf pattern exactly); the non-finite pre-pass runs as api.cu runs it for each
//     (band_hides_keys; the backward's scans dO too), so a NaN or an inf the window or the
//     causal band hides from a row reaches that row and the gradients it reaches, while
//     one past seqused_k or in another packed sequence reaches none;
//   - skipping: the bytes of K (forward, dQ kernel) and of Q (dK / dV kernel) the
//     cp.async feeds load equal a brute-force count over the blocks that hold at least
//     one visible (query, key) pair, so every block outside the mask is skipped and none
//     inside it is (a head the pre-pass flags: every block of the sequence's read keys, or
//     in the dK / dV kernel every query block for each block that holds a read key).
//   ffpa_emulate_kernels --masks [--late-only] D...   the case list at each D (copies landing
//                                                      at issue and late, or late only)
//   ffpa_emulate_kernels --masks-release D...  its five widest cases at each D, copies late (label slow)
//   ffpa_emulate_kernels --masks-breakages     each deliberate defect must make its run fail
//   ffpa_emulate_kernels --masks-cute-breakages | --masks-cute-nonfinite D...   the CuTe kernel's
#include <algorithm>
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
#include "ffpa/fwd_kernel_mma.cuh"
#include "ffpa/mask.h"
#include "ffpa/nonfinite.h"
#include "ffpa/tma_geometry.h"
#include "ffpa/tolerance.h"

int run_mask_cases(const std::vector<int>& dims, bool release, bool late_only);
int run_mask_breakages();
int run_cute_mask_nonfinite(const std::vector<int>& dims);
int run_cute_mask_breakages();

namespace {

using ffpa::BwdBreak;
using ffpa::MaskBreak;

// One value planted in q or d (dO; head: query head), k or v (head: kv head) at a
// sequence's local row.
struct Plant {
  char op;
  int seq, head, row;
  float value;
};

struct MaskCase {
  const char* name;
  int d;
  bool bf16;
  bool varlen;
  bool causal;
  bool top_left;  // causal aligned top-left (SDPA's is_causal) instead of bottom-right
  int hq, hkv;
  std::vector<int> lens_q, lens_k;  // per sequence (padded batch: all equal)
  std::vector<int> used_k;          // seqused_k per sequence; empty: not given
  int left = -1, right = -1;
  MaskBreak fbr = MaskBreak::kNone;
  BwdBreak bbr = BwdBreak::kNone;
  std::vector<Plant> plants = {};  // non-empty: the math rule's check
  // NaN in dO's first row of sequence 1 (varlen): the rows a box of sequence 0's last
  // query block reads past its end (the backward's TMA feed must zero them).
  bool nan_do_seq1 = false;
};

const ffpa::BwdParams* g_bwd = nullptr;

// The forward kernels a case runs (bits of FwdKernel; the CuTe breakage runs take the CuTe
// kernel alone) and the deliberate defect the CuTe kernel runs with (its own, so that a
// breakage run fails on the CuTe kernel and nowhere else).
enum class FwdKernel { kMma, kTma, kCute, kCuteTma, kCuteF16Acc, kCuteTmaF16Acc };
unsigned g_mask_fwd_kernels = 0x3fu;
MaskBreak g_cute_mask_break = MaskBreak::kNone;

// The head dims whose masked CuTe launches the emulator compiles (emu_cute_masks_dims.inc).
bool cute_masks_compiled(int d) {
  switch (d) {
#define FFPA_EMU_CUTE_MASKS_DIM(D) case D:
#include "emu_cute_masks_dims.inc"
#undef FFPA_EMU_CUTE_MASKS_DIM
    return true;
  }
  return false;
}
emu::CuteBlock launch_cute_masked(int d, const emu::CuteMaskedLaunch& l, const ffpa::FwdParams& p) {
  switch (d) {
#define FFPA_EMU_CUTE_MASKS_DIM(D) \
  case D:                          \
    return emu::launch_cute_masked_d##D(l, p);
#include "emu_cute_masks_dims.inc"
#undef FFPA_EMU_CUTE_MASKS_DIM
  }
  emu::fail("the masked CuTe kernel is not compiled in the emulator for this head dim");
}
template <typename Traits, ffpa::Load kLoad, MaskBreak kBr, bool kReplace>
void fwd_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<Traits, kLoad, false, 1, kBr, /*kMasked=*/true, kReplace>(p, emu::g_tma_maps);
}
template <int D, typename T>
void pre_body(const ffpa::FwdParams&) {
  ffpa::ffpa_bwd_preprocess_kernel<D, T>(*g_bwd);
}
ffpa::BwdTmaMaps g_bwd_maps;  // the backward's TMA launches' maps
template <typename Traits, bool kKeys, BwdBreak kBr, ffpa::Load kLoad>
void main_body(const ffpa::FwdParams&) {
  ffpa::ffpa_bwd_kernel<Traits, kKeys, kBr, kLoad>(*g_bwd, g_bwd_maps);
}

// The mask written from its definition (docs/perf.md "Masks"), for the brute-force block
// counts: query i of sequence s sees key j < used iff diag(i) - left <= j <= diag(i) + right,
// causal capping the right side at the diagonal.
bool ref_visible(const MaskCase& c, int len_q, int used, int i, int j) {
  if (j >= used || i >= len_q) return false;
  const bool bottom_right = c.varlen || (c.causal && !c.top_left);
  const long diag = long(i) + (bottom_right ? used - len_q : 0);
  if (c.causal && j > diag) return false;
  if (c.left >= 0 && j < diag - c.left) return false;
  if (c.right >= 0 && j > diag + c.right) return false;
  return true;
}

// Rows [r0, r0 + rows) x columns [c0, c0 + cols) hold a visible pair (rows are queries
// unless keys_are_rows).
bool block_has_pair(const MaskCase& c, int len_q, int used, bool keys_are_rows, int r0, int rows, int c0, int cols) {
  for (int r = r0; r < r0 + rows; ++r)
    for (int col = c0; col < c0 + cols; ++col)
      if (keys_are_rows ? ref_visible(c, len_q, used, col, r) : ref_visible(c, len_q, used, r, col)) return true;
  return false;
}

// SDPA's math backend on one sequence, in double, from the definition: the scores
// q k^T * scale over the sequence's read keys with the mask ADDED as a -inf bias (so a NaN
// or +inf score stays NaN under it), a row with a NaN score NaN, a row whose every score is
// -inf 0 (the safe softmax) with LSE -inf, then P V over those keys (0 * NaN and 0 * inf
// are NaN). q: [hq][len_q][D], k / v: [hkv][used][D]; o: [hq][len_q][D], lse: [hq][len_q].
void masked_math_reference(const MaskCase& c, int d, int len_q, int used, double scale,
                           const std::vector<double>& q, const std::vector<double>& k,
                           const std::vector<double>& v, std::vector<double>& o, std::vector<double>& lse) {
  o.assign(size_t(c.hq) * len_q * d, 0.0);
  lse.assign(size_t(c.hq) * len_q, 0.0);
  std::vector<double> s(used);
  for (int h = 0; h < c.hq; ++h) {
    const int hk = h / (c.hq / c.hkv);
    for (int i = 0; i < len_q; ++i) {
      bool any_nan = false, all_neg_inf = true;
      double mx = -INFINITY;
      for (int j = 0; j < used; ++j) {
        double dot = 0.0;
        for (int e = 0; e < d; ++e) dot += q[(size_t(h) * len_q + i) * d + e] * k[(size_t(hk) * used + j) * d + e];
        double x = dot * scale;
        if (!ref_visible(c, len_q, used, i, j)) x = x + -INFINITY;
        s[j] = x;
        any_nan = any_nan || std::isnan(x);
        all_neg_inf = all_neg_inf && x == -INFINITY;
        if (!std::isnan(x)) mx = std::max(mx, x);
      }
      double sum = 0.0;
      for (int j = 0; j < used && !all_neg_inf; ++j) sum += std::exp(s[j] - mx);
      lse[size_t(h) * len_q + i] = any_nan ? NAN : all_neg_inf ? -INFINITY : mx + std::log(sum);
      for (int e = 0; e < d; ++e) {
        double acc = 0.0;
        for (int j = 0; j < used; ++j) {
          const double p = any_nan ? NAN : all_neg_inf ? 0.0 : std::exp(s[j] - mx) / sum;
          acc += p * v[(size_t(hk) * used + j) * d + e];
        }
        o[(size_t(h) * len_q + i) * d + e] = acc;
      }
    }
  }
}

struct Err {
  double max_rel = 0, rel_l1 = 0;
  bool pattern_ok = true;
};
Err compare(const std::vector<double>& got, const std::vector<double>& ref) {
  double max_err = 0, max_ref = 0, sum_err = 0, sum_ref = 0;
  Err e;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    if (!std::isfinite(g) || !std::isfinite(r)) {
      if (!(g == r || (std::isnan(g) && std::isnan(r)))) e.pattern_ok = false;
      continue;
    }
    max_err = std::max(max_err, std::fabs(g - r));
    max_ref = std::max(max_ref, std::fabs(r));
    sum_err += std::fabs(g - r);
    sum_ref += std::fabs(r);
  }
  e.max_rel = max_ref > 0 ? max_err / max_ref : max_err;
  e.rel_l1 = sum_ref > 0 ? sum_err / sum_ref : sum_err;
  return e;
}

template <int D, typename T, MaskBreak kFbr, BwdBreak kBbr, bool kReplace = false>
bool run_case_t(const MaskCase& c, std::mt19937& rng) {
  using ET = ffpa::ElemTraits<T>;
  using Traits = ffpa::DefaultFwdMmaTraits<D, T>;  // the TMA feed's (masked too)
  using CpTraits = ffpa::MaskedFwdMmaTraits<D, T, ffpa::Load::kCpAsync>;
  using DqTraits = ffpa::BwdDqTraits<D, T>;
  using DkvTraits = ffpa::BwdDkvTraits<D, T>;
  const int S = static_cast<int>(c.lens_q.size());
  const int hq = c.hq, hkv = c.hkv;
  // Row offsets: packed sequences one after another (varlen), or a batch of equal lengths.
  std::vector<int> cu_q(S + 1, 0), cu_k(S + 1, 0);
  for (int s = 0; s < S; ++s) cu_q[s + 1] = cu_q[s] + c.lens_q[s], cu_k[s + 1] = cu_k[s] + c.lens_k[s];
  const int B = c.varlen ? 1 : S;
  const int nq = c.varlen ? cu_q[S] : c.lens_q[0], nkv = c.varlen ? cu_k[S] : c.lens_k[0];
  const int max_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  const int max_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  auto used_of = [&](int s) {
    return c.used_k.empty() ? c.lens_k[s] : std::max(0, std::min(c.used_k[s], c.lens_k[s]));
  };
  // Varlen arrays are [1, H, total, D] views of packed [total, H, D]: head stride D, row
  // stride H D. A padded batch is [B, H, N, D].
  struct Layout {
    int64_t bs, hs, rs;
  };
  auto layout = [&](int h, int n) {
    return c.varlen ? Layout{0, D, int64_t(h) * D} : Layout{int64_t(h) * n * D, int64_t(n) * D, D};
  };
  const Layout lq = layout(hq, nq), lk = layout(hkv, nkv);
  // Element of (sequence s, head h, local row r, column e).
  auto at = [&](const Layout& l, bool is_q, int s, int h, int r, int e) {
    const int b = c.varlen ? 0 : s;
    const int row = c.varlen ? (is_q ? cu_q[s] : cu_k[s]) + r : r;
    return size_t(b * l.bs + h * l.hs + int64_t(row) * l.rs + e);
  };
  const size_t q_elems = size_t(B) * hq * nq * D, k_elems = size_t(B) * hkv * nkv * D;

  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](size_t n) {
    std::vector<T> m(n);
    for (T& x : m) x = ET::from_float(dist(rng));
    return m;
  };
  std::vector<T> qm = make(q_elems), km = make(k_elems), vm = make(k_elems), dom = make(q_elems);
  const T nan_t = ffpa::from_bits<T>(0xffff);  // NaN in fp16 and bf16
  // Padded keys hold NaN: any use of them shows.
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < hkv; ++h)
      for (int r = used_of(s); r < c.lens_k[s]; ++r)
        for (int e = 0; e < D; ++e) km[at(lk, false, s, h, r, e)] = vm[at(lk, false, s, h, r, e)] = nan_t;
  // The planted values (column 3 of the row).
  for (const Plant& pl : c.plants) {
    const bool query_side = pl.op == 'q' || pl.op == 'd';
    std::vector<T>& m = pl.op == 'q' ? qm : pl.op == 'd' ? dom : pl.op == 'k' ? km : vm;
    m[at(query_side ? lq : lk, query_side, pl.seq, pl.head, pl.row, 3)] = ET::from_float(pl.value);
  }
  const bool nonfinite = !c.plants.empty();

  if (c.nan_do_seq1)
    for (int h = 0; h < hq; ++h) dom[at(lq, true, 1, h, 0, 0)] = nan_t;

  // The reference, per sequence on its own rows and used keys.
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> ref_o(q_elems, NAN), ref_lse(size_t(B) * hq * nq, NAN), ref_dq(q_elems, NAN),
      ref_dk(k_elems, NAN), ref_dv(k_elems, NAN);
  std::vector<char> owned_o(q_elems, 0), owned_lse(ref_lse.size(), 0);  // rows a sequence owns
  auto lse_at = [&](int s, int h, int r) {
    return c.varlen ? size_t(h) * nq + cu_q[s] + r : (size_t(s) * hq + h) * nq + r;
  };
  for (int s = 0; s < S; ++s) {
    const int lq_s = c.lens_q[s], used = used_of(s);
    std::vector<double> q(size_t(hq) * lq_s * D), k(size_t(hkv) * used * D), v(k.size()), dout(q.size());
    for (int h = 0; h < hq; ++h)
      for (int r = 0; r < lq_s; ++r)
        for (int e = 0; e < D; ++e) {
          q[(size_t(h) * lq_s + r) * D + e] = ET::to_float(qm[at(lq, true, s, h, r, e)]);
          dout[(size_t(h) * lq_s + r) * D + e] = ET::to_float(dom[at(lq, true, s, h, r, e)]);
        }
    for (int h = 0; h < hkv; ++h)
      for (int r = 0; r < used; ++r)
        for (int e = 0; e < D; ++e) {
          k[(size_t(h) * used + r) * D + e] = ET::to_float(km[at(lk, false, s, h, r, e)]);
          v[(size_t(h) * used + r) * D + e] = ET::to_float(vm[at(lk, false, s, h, r, e)]);
        }
    const bool bottom_right = c.varlen || (c.causal && !c.top_left);
    ffpa::ref::BwdProblem pr{1, hq, hkv, lq_s, used, D, c.causal, bottom_right ? used - lq_s : 0, scale};
    pr.window_left = c.left, pr.window_right = c.right;
    const ffpa::ref::BwdGrads g = ffpa::ref::attention_backward(pr, q, k, v, dout);
    // Non-finite cases: the forward's reference is the one written here from the
    // definition (attention_backward's O and LSE follow the same rule; its gradients are
    // the backward's reference in every case).
    std::vector<double> mo, mlse;
    if (nonfinite) masked_math_reference(c, D, lq_s, used, scale, q, k, v, mo, mlse);
    const std::vector<double>& fo = nonfinite ? mo : g.o;
    const std::vector<double>& flse = nonfinite ? mlse : g.lse;
    for (int h = 0; h < hq; ++h)
      for (int r = 0; r < lq_s; ++r) {
        ref_lse[lse_at(s, h, r)] = flse[size_t(h) * lq_s + r];
        owned_lse[lse_at(s, h, r)] = 1;
        for (int e = 0; e < D; ++e) {
          ref_o[at(lq, true, s, h, r, e)] = fo[(size_t(h) * lq_s + r) * D + e];
          owned_o[at(lq, true, s, h, r, e)] = 1;
          ref_dq[at(lq, true, s, h, r, e)] = g.dq[(size_t(h) * lq_s + r) * D + e];
        }
      }
    for (int h = 0; h < hkv; ++h)
      for (int r = 0; r < c.lens_k[s]; ++r)
        for (int e = 0; e < D; ++e) {
          const bool in = r < used;
          ref_dk[at(lk, false, s, h, r, e)] = in ? g.dk[(size_t(h) * used + r) * D + e] : 0.0;
          ref_dv[at(lk, false, s, h, r, e)] = in ? g.dv[(size_t(h) * used + r) * D + e] : 0.0;
        }
  }

  // The C API's mask arguments (device-side arrays); make_fwd_params / make_bwd_params turn
  // them into the kernels' MaskParams as the library does (emu_params.h).
  std::vector<int> used_arr(c.used_k.begin(), c.used_k.end());
  ffpa::MaskArgs ma;
  ma.window_left = c.left, ma.window_right = c.right;
  if (!c.used_k.empty()) ma.seqused_k.data = used_arr.data(), ma.seqused_k.size = int64_t(used_arr.size());
  if (c.varlen) {
    ma.cu_seqlens_q.data = cu_q.data(), ma.cu_seqlens_q.size = S + 1;
    ma.cu_seqlens_k.data = cu_k.data(), ma.cu_seqlens_k.size = S + 1;
    ma.max_seqlen_q = max_q, ma.max_seqlen_k = max_k;
  }
  const ffpa::MaskParams mp = ffpa::detail::mask_params(ma, c.causal && !c.top_left);
  const ffpa::DType dt = c.bf16 ? ffpa::DType::kBf16 : ffpa::DType::kFp16;
  auto q_desc = [&](const T* data) {  // [B, Hq, Nq, D] in the layout lq
    ffpa::TensorDesc t = emu::dense(data, dt, B, hq, nq, D);
    t.stride[0] = lq.bs, t.stride[1] = lq.hs, t.stride[2] = lq.rs;
    return t;
  };
  auto kv_desc = [&](const T* data) {  // [B, Hkv, Nkv, D] in the layout lk
    ffpa::TensorDesc t = emu::dense(data, dt, B, hkv, nkv, D);
    t.stride[0] = lk.bs, t.stride[1] = lk.hs, t.stride[2] = lk.rs;
    return t;
  };
  auto bytes = [](const std::vector<T>& m) { return m.size() * sizeof(T); };
  auto range = [&](const std::vector<T>& m) {
    return emu::Range{reinterpret_cast<const unsigned char*>(m.data()), bytes(m)};
  };
  char buf[768];
  std::string line;
  bool ok = true;

  // Which query heads read a NaN or an inf, from the definition: the pass runs where the
  // causal band or a window hides keys (api.cu); it reads a padded batch's K / V rows below
  // seqused_k only, and in varlen the whole packed arrays (a head's flag covers all its
  // sequences: over-flagging, correct and only slower).
  // The backward's pass also reads dO (with_dout).
  const bool pass_runs = c.causal || c.left >= 0 || c.right >= 0;
  auto non_finite = [](T x) { return !std::isfinite(ET::to_float(x)); };
  auto head_flagged = [&](int s, int h, bool with_dout) {
    if (!pass_runs) return false;
    const int hk = h / (hq / hkv);
    for (int s2 = 0; s2 < S; ++s2) {
      if (!c.varlen && s2 != s) continue;
      const int rows_k = c.varlen ? c.lens_k[s2] : used_of(s2);
      for (int e = 0; e < D; ++e) {
        for (int r = 0; r < c.lens_q[s2]; ++r)
          if (non_finite(qm[at(lq, true, s2, h, r, e)]) || (with_dout && non_finite(dom[at(lq, true, s2, h, r, e)])))
            return true;
        for (int r = 0; r < rows_k; ++r)
          if (non_finite(km[at(lk, false, s2, hk, r, e)]) || non_finite(vm[at(lk, false, s2, hk, r, e)])) return true;
      }
    }
    return false;
  };
  // The forward's expected K bytes: per head, the visible blocks, or under the math rule every
  // block of the sequence's read keys.
  auto expected_fwd_bytes = [&](int row_block, int col_block) {
    size_t total = 0;
    for (int s = 0; s < S; ++s) {
      const int lq_s = c.lens_q[s], used = used_of(s);
      for (int h = 0; h < hq; ++h) {
        const bool all = head_flagged(s, h, false);
        for (int r0 = 0; r0 < lq_s; r0 += row_block)
          for (int c0 = 0; c0 < used; c0 += col_block)
            if (all || block_has_pair(c, lq_s, used, false, r0, std::min(row_block, lq_s - r0), c0, col_block))
              total += size_t(std::min(col_block, used - c0)) * D * sizeof(T);
      }
    }
    return total;
  };

  // The backward's expected cp.async bytes of an operand: row blocks of `row_block` x
  // column blocks of 64, counting the loaded operand rows (valid rows of a column block)
  // `loads` times per visited block and per query head (the dK / dV kernel's rows are keys:
  // each kv head's blocks once per head of its group). A flagged row (the dQ kernel's query
  // head, or any head of the dK / dV kernel's group) visits every column block of the
  // sequence, for a block of keys only when it holds a read key.
  auto expected_bytes = [&](int row_block, bool keys_are_rows, int loads) {
    size_t total = 0;
    const int ratio = hq / hkv;
    for (int s = 0; s < S; ++s) {
      const int lq_s = c.lens_q[s], used = used_of(s);
      const int n_rows = keys_are_rows ? c.lens_k[s] : lq_s, n_cols = keys_are_rows ? lq_s : used;
      for (int rh = 0; rh < (keys_are_rows ? hkv : hq); ++rh) {
        bool flagged = false;
        for (int h = keys_are_rows ? rh * ratio : rh; h < (keys_are_rows ? (rh + 1) * ratio : rh + 1); ++h)
          flagged = flagged || head_flagged(s, h, true);
        for (int r0 = 0; r0 < n_rows; r0 += row_block)
          for (int c0 = 0; c0 < n_cols; c0 += 64)
            if ((flagged && (!keys_are_rows || r0 < used)) ||
                block_has_pair(c, lq_s, used, keys_are_rows, r0, std::min(row_block, n_rows - r0), c0, 64))
              total += size_t(std::min(64, n_cols - c0)) * D * sizeof(T) * loads * (keys_are_rows ? ratio : 1);
      }
    }
    return total;
  };

  // The non-finite pre-pass as api.cu runs it (flags [B, Hq]): the forward's over Q, K and
  // V, the backward's over dO too.
  auto run_pass = [&](bool with_dout) {
    std::vector<int> f(size_t(B) * hq, 0);
    if (!ffpa::band_hides_keys(mp, c.causal)) return f;
    ffpa::NonfiniteScan scan;
    const int64_t q_shape[4] = {B, hq, nq, D}, kv_shape[4] = {B, hkv, nkv, D};
    const int64_t q_stride[4] = {lq.bs, lq.hs, lq.rs, 1}, kv_stride[4] = {lk.bs, lk.hs, lk.rs, 1};
    const int* kv_used = c.varlen ? nullptr : mp.seqused_k;
    scan.add(qm.data(), q_shape, q_stride);
    scan.add(km.data(), kv_shape, kv_stride, kv_used);
    scan.add(vm.data(), kv_shape, kv_stride, kv_used);
    if (with_dout) scan.add(dom.data(), q_shape, q_stride);
    scan.hq = hq, scan.h_ratio = hq / hkv, scan.d = D;
    scan.exp_mask = c.bf16 ? 0x7f80 : 0x7c00;
    scan.flags = f.data();
    emu::run_nonfinite_scan(scan, B);
    return f;
  };
  const std::vector<int> flags = run_pass(false), bwd_flags = run_pass(true);

  // ---- the forward: the mma kernel's masked instance on both feeds, then the CuTe
  // kernel's (emulate_masks_cute.h) on both where its head dim is compiled, fp16 cases with
  // fp16 accumulation too; the mma kernel takes kFbr, the CuTe kernel g_cute_mask_break.
  // The CuTe kernel with copies landing late only (its copy discipline under both timings
  // is ffpa.kernels.emulated_cute's; this keeps the test's time down).
  for (const FwdKernel kern : {FwdKernel::kMma, FwdKernel::kTma, FwdKernel::kCute, FwdKernel::kCuteTma,
                               FwdKernel::kCuteF16Acc, FwdKernel::kCuteTmaF16Acc}) {
    const bool f16acc = kern == FwdKernel::kCuteF16Acc || kern == FwdKernel::kCuteTmaF16Acc;
    const bool cute = kern != FwdKernel::kMma && kern != FwdKernel::kTma;
    const ffpa::Load load = kern == FwdKernel::kTma || kern == FwdKernel::kCuteTma || kern == FwdKernel::kCuteTmaF16Acc
                                ? ffpa::Load::kTma
                                : ffpa::Load::kCpAsync;
    if (!(g_mask_fwd_kernels & (1u << int(kern))) || (cute && (!cute_masks_compiled(D) || !emu::g_cp_late)) ||
        (f16acc && c.bf16))
      continue;
    const ffpa::Tolerance& ftol = ffpa::tolerance(f16acc ? "fp16_acc" : c.bf16 ? "bf16" : "fp16");
    std::vector<T> om(q_elems, nan_t);
    std::vector<float> lse(size_t(B) * hq * nq, NAN);
    emu::g_ranges = {range(qm), range(km), range(vm)};
    ffpa::ForwardArgs a;
    a.q = q_desc(qm.data()), a.k = kv_desc(km.data()), a.v = kv_desc(vm.data()), a.out = q_desc(om.data());
    a.lse = emu::dense_lse(lse.data(), B, hq, nq);
    a.mask = ma;
    a.causal = c.causal;
    a.causal_top_left = c.top_left;
    a.scale = float(scale);
    a.accum = f16acc ? ffpa::Accum::kFp16 : ffpa::Accum::kFp32;
    ffpa::FwdParams p = ffpa::detail::make_fwd_params(a);
    p.nonfinite = flags.data();
    const emu::Dim3 grid{unsigned((max_q + Traits::kBlockM - 1) / Traits::kBlockM), unsigned(hq), unsigned(S)};
    const emu::Dim3 cp_grid{unsigned((max_q + CpTraits::kBlockM - 1) / CpTraits::kBlockM), unsigned(hq), unsigned(S)};
    emu::CuteBlock blk{CpTraits::kBlockM, CpTraits::kBlockN};  // the cp.async feed's blocks (the skip check's)
    if (cute) {
      blk = launch_cute_masked(D, {load == ffpa::Load::kTma, c.bf16, f16acc, g_cute_mask_break}, p);
    } else if (load == ffpa::Load::kTma) {
      emu::g_tma_maps.q = emu::encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, Traits::kBlockM));
      emu::g_tma_maps.k = emu::encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, Traits::kBlockN));
      emu::g_tma_maps.v = emu::encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, Traits::kBlockN));
      emu::launch(&fwd_body<Traits, ffpa::Load::kTma, kFbr, kReplace>, p, grid, Traits::kNThreads, Traits::kSmemBytesTma);
    } else {
      emu::launch(&fwd_body<CpTraits, ffpa::Load::kCpAsync, kFbr, kReplace>, p, cp_grid, CpTraits::kNThreads, CpTraits::kSmemBytes);
    }
    // Rows no sequence owns are never written (the poisoned NaN stays); owned entries match
    // the reference: non-finite ones exactly (NaN for NaN, inf of the same sign), finite ones
    // within the tolerance.
    double o_err = 0, lse_err = 0;
    bool pattern = true;
    size_t nonfinite_diff = 0;
    auto check = [&](bool owned, double g, double r, double& err) {
      if (!owned) {
        pattern = pattern && std::isnan(g);
      } else if (!std::isfinite(r) || !std::isfinite(g)) {
        if (!(g == r || (std::isnan(g) && std::isnan(r)))) ++nonfinite_diff;
      } else {
        err = std::max(err, std::fabs(g - r));
      }
    };
    for (size_t i = 0; i < om.size(); ++i) check(owned_o[i], ET::to_float(om[i]), ref_o[i], o_err);
    for (size_t i = 0; i < lse.size(); ++i) check(owned_lse[i], lse[i], ref_lse[i], lse_err);
    // Skipping: the K bytes cp.async loaded are exactly those of the visible blocks (every
    // block of a flagged head's sequence).
    bool skip_ok = true;
    size_t k_read = 0, k_want = 0;
    if (load == ffpa::Load::kCpAsync) {
      k_read = emu::g_ranges[1].read;
      k_want = expected_fwd_bytes(blk.m, blk.n);
      skip_ok = k_read == k_want;
    }
    const bool f_ok = pattern && skip_ok && nonfinite_diff == 0 && o_err <= ftol.atol && lse_err <= ftol.lse;
    ok = ok && f_ok;
    static const char* const kFwdNames[] = {"mma", "tma", "cute", "cute_tma", "cute-f16acc", "cute_tma-f16acc"};
    std::snprintf(buf, sizeof buf, " fwd-%s:%s(o=%.2e,lse=%.2e%s%s%s)", kFwdNames[int(kern)],
                  f_ok ? "ok" : "FAIL", o_err, lse_err, pattern ? "" : ",UNOWNED-ROW-WRITTEN",
                  nonfinite_diff == 0 ? "" : (",NAN-INF-DIFF " + std::to_string(nonfinite_diff)).c_str(),
                  skip_ok ? "" : (",K-BYTES " + std::to_string(k_read) + "!=" + std::to_string(k_want)).c_str());
    line += buf;
  }

  // ---- the backward, from the reference's O and LSE (NaN rows included: what the forward
  // gives), both feeds (the TMA feed's boxes read the padded keys' NaN and the next
  // sequence's rows: its tail zeroing is checked). The TMA feed with copies landing late
  // only (emulate_bwd.cpp says why).
  for (ffpa::Load load : {ffpa::Load::kCpAsync, ffpa::Load::kTma}) {
    const bool tma = load == ffpa::Load::kTma;
    if (tma && !emu::g_cp_late) continue;
    std::vector<T> om(q_elems, nan_t);
    for (size_t i = 0; i < om.size(); ++i)
      if (owned_o[i]) om[i] = ET::from_float(float(ref_o[i]));
    std::vector<float> lse(ref_lse.size());
    for (size_t i = 0; i < lse.size(); ++i) lse[i] = owned_lse[i] ? float(ref_lse[i]) : 0.f;
    std::vector<T> dq(q_elems, nan_t), dk(k_elems, nan_t), dv(k_elems, nan_t);
    std::vector<float> ws(size_t(ffpa::bwd_workspace_floats(B, hq, nq)), NAN);
    emu::g_ranges = {range(qm), range(km), range(vm), range(dom)};
    ffpa::BackwardArgs a;
    a.q = q_desc(qm.data()), a.k = kv_desc(km.data()), a.v = kv_desc(vm.data()), a.out = q_desc(om.data());
    a.dout = q_desc(dom.data()), a.dq = q_desc(dq.data()), a.dk = kv_desc(dk.data()), a.dv = kv_desc(dv.data());
    a.lse = emu::dense_lse(lse.data(), B, hq, nq);
    a.mask = ma;
    a.causal = c.causal;
    a.causal_top_left = c.top_left;
    a.scale = float(scale);
    a.workspace = ws.data();
    ffpa::BwdParams p = ffpa::detail::make_bwd_params(a);
    p.nonfinite = bwd_flags.data();
    g_bwd = &p;
    const ffpa::FwdParams unused;
    constexpr int R = ffpa::BwdPreTraits::kRowsPerBlock;
    emu::launch(&pre_body<D, T>, unused, {unsigned((nq + R - 1) / R), unsigned(hq), unsigned(B)},
                ffpa::BwdPreTraits::kNThreads, 0);
    for (emu::Range& r : emu::g_ranges) r.read = 0;
    // TMA: the launcher's maps (bwd_launch_template.cuh), each kernel's own rows in boxes
    // of its kBlockM, its column blocks in boxes of 64.
    auto encode = [&](int box_q, int box_kv) {
      g_bwd_maps.q = emu::encode_tiled(p.q, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kQ, box_q));
      g_bwd_maps.dout = emu::encode_tiled(p.dout, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kDout, box_q));
      g_bwd_maps.k = emu::encode_tiled(p.k, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kK, box_kv));
      g_bwd_maps.v = emu::encode_tiled(p.v, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kV, box_kv));
    };
    if (tma) encode(DkvTraits::kBlockN, DkvTraits::kBlockM);
    emu::launch(tma ? &main_body<DkvTraits, true, kBbr, ffpa::Load::kTma>
                    : &main_body<DkvTraits, true, kBbr, ffpa::Load::kCpAsync>,
                unused, {unsigned((max_k + DkvTraits::kBlockM - 1) / DkvTraits::kBlockM), unsigned(hkv), unsigned(S)},
                DkvTraits::kNThreads, tma ? DkvTraits::kSmemBytesTma : DkvTraits::kSmemBytes);
    // dK / dV kernel: Q is loaded twice per visited query block (S, then dS^T Q), per head,
    // split-D; once, whole-D, persist-D (ffpa/bwd_kernel_traits.h).
    const size_t q_read = emu::g_ranges[0].read,
                 q_want = expected_bytes(DkvTraits::kBlockM, true, DkvTraits::kPersistD ? 1 : 2);
    for (emu::Range& r : emu::g_ranges) r.read = 0;
    if (tma) encode(DqTraits::kBlockM, DqTraits::kBlockN);
    emu::launch(tma ? &main_body<DqTraits, false, kBbr, ffpa::Load::kTma>
                    : &main_body<DqTraits, false, kBbr, ffpa::Load::kCpAsync>,
                unused, {unsigned((max_q + DqTraits::kBlockM - 1) / DqTraits::kBlockM), unsigned(hq), unsigned(S)},
                DqTraits::kNThreads, tma ? DqTraits::kSmemBytesTma : DqTraits::kSmemBytes);
    // dQ kernel: K twice per visited key block (S, then dS K), per query head; once persist-D.
    const size_t k_read = emu::g_ranges[1].read,
                 k_want = expected_bytes(DqTraits::kBlockM, false, DqTraits::kPersistD ? 1 : 2);
    // (The TMA feed reads whole boxes, rows past a sequence included: counted for cp.async.)
    const bool skip_ok = tma || (q_read == q_want && k_read == k_want);
    auto widen = [&](const std::vector<T>& m) {
      std::vector<double> out(m.size());
      for (size_t i = 0; i < m.size(); ++i) out[i] = ET::to_float(m[i]);
      return out;
    };
    const ffpa::Tolerance& btol = ffpa::tolerance(c.bf16 ? "bwd_bf16" : "bwd_fp16");
    bool b_ok = skip_ok;
    std::string parts;
    const std::pair<const char*, Err> errs[] = {
        {"dq", compare(widen(dq), ref_dq)}, {"dk", compare(widen(dk), ref_dk)}, {"dv", compare(widen(dv), ref_dv)}};
    for (const auto& [name, e] : errs) {
      const bool g_ok = e.pattern_ok && e.max_rel <= btol.atol && e.rel_l1 <= btol.max_rel_l1;
      b_ok = b_ok && g_ok;
      std::snprintf(buf, sizeof buf, " %s=%.2e/%.2e%s", name, e.max_rel, e.rel_l1, e.pattern_ok ? "" : ",NAN-PATTERN");
      parts += buf;
    }
    if (!skip_ok)
      parts += " Q-BYTES " + std::to_string(q_read) + "/" + std::to_string(q_want) + " K-BYTES " +
               std::to_string(k_read) + "/" + std::to_string(k_want);
    ok = ok && b_ok;
    line += std::string(tma ? " bwd-tma:" : " bwd:") + (b_ok ? "ok" : "FAIL") + "(" + parts + ")";
  }

  std::string used;
  for (int u : c.used_k) used += (used.empty() ? "" : ",") + std::to_string(u);
  std::string planted;
  for (const Plant& pl : c.plants)
    planted += (planted.empty() ? " planted=" : ",") + std::string(1, pl.op) + "[s" + std::to_string(pl.seq) + ",h" +
               std::to_string(pl.head) + ",r" + std::to_string(pl.row) + "]=" + (std::isnan(pl.value) ? "nan" : "inf");
  int n_flagged = 0, n_bwd_flagged = 0;
  for (int f : flags) n_flagged += f != 0;
  for (int f : bwd_flags) n_bwd_flagged += f != 0;
  if (ffpa::band_hides_keys(mp, c.causal))
    planted += " flagged=" + std::to_string(n_flagged) + "/" + std::to_string(flags.size()) +
               " bwd-flagged=" + std::to_string(n_bwd_flagged);
  if (nonfinite) {  // how many owned outputs the reference makes NaN / inf, and how many stay finite
    size_t bad = 0, fine = 0;
    for (size_t i = 0; i < ref_o.size(); ++i)
      if (owned_o[i]) ++(std::isfinite(ref_o[i]) ? fine : bad);
    planted += " ref-o-nonfinite=" + std::to_string(bad) + " finite=" + std::to_string(fine);
  }
  std::printf("[%s] masks %s D=%d %s %s causal=%s window=(%d,%d) S=%d Hq=%d Hkv=%d%s%s%s copies=%s%s\n",
              ok ? "PASS" : "FAIL", c.name, D, c.bf16 ? "bf16" : "fp16", c.varlen ? "varlen" : "padded",
              !c.causal ? "none" : c.top_left ? "top-left" : "bottom-right", c.left, c.right, S, hq, hkv,
              used.empty() ? "" : " seqused_k=", used.c_str(), planted.c_str(), emu::g_cp_late ? "late" : "early",
              line.c_str());
  std::fflush(stdout);
  return ok;
}

template <int D>
bool run_d(const MaskCase& c, std::mt19937& rng) {
  return c.bf16 ? run_case_t<D, __nv_bfloat16, MaskBreak::kNone, BwdBreak::kNone>(c, rng)
                : run_case_t<D, __half, MaskBreak::kNone, BwdBreak::kNone>(c, rng);
}

bool dispatch(const MaskCase& c, std::mt19937& rng) {
  switch (c.d) {
#define FFPA_EMU_HEAD_DIM(D) \
  case D:                    \
    return run_d<D>(c, rng);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  std::fprintf(stderr, "head dim %d is not in the emulator's list (%s)\n", c.d, FFPA_EMU_HEAD_DIMS_TEXT);
  std::exit(2);
}

// The case list of a head dim. Lengths are ragged and span several 64-key blocks, so
// that whole blocks fall outside the window (skipped) next to partial ones.
// The case table. kRelease marks the cases the slow release sweep (--masks-release) runs
// at every release head dim: those combining the most masks (both window sides, top-left
// causal, seqused_k with an empty entry, varlen with causal / seqused_k and a window).
enum class Sweep { kUnit, kRelease };
struct TableCase {
  Sweep sweep;
  MaskCase c;
};
constexpr Sweep kUnit = Sweep::kUnit, kRelease = Sweep::kRelease;
std::vector<TableCase> mask_cases(int d) {
  return {
      {kUnit, {"window-left", d, false, false, false, false, 2, 1, {200, 200}, {200, 200}, {}, 37, -1}},
      {kUnit, {"window-right", d, false, false, false, false, 2, 2, {83}, {141}, {}, -1, 20}},
      {kRelease, {"window-both", d, true, false, false, false, 2, 1, {150}, {170}, {}, 30, 70}},
      {kUnit, {"window-causal", d, false, false, true, false, 4, 2, {83}, {210}, {}, 50, -1}},
      {kRelease, {"window-causal-top-left", d, false, false, true, true, 2, 1, {150}, {120}, {}, 40, -1}},
      {kRelease, {"seqused_k", d, false, false, false, false, 2, 1, {83, 83, 83}, {141, 141, 141}, {141, 70, 0}, -1, -1}},
      {kUnit, {"seqused_k-causal", d, false, false, true, false, 2, 2, {70, 70}, {141, 141}, {100, 30}, -1, -1}},
      {kUnit, {"varlen", d, false, true, false, false, 2, 1, {70, 1, 130}, {90, 33, 130}, {}, -1, -1}},
      {kRelease, {"varlen-causal-window", d, true, true, true, false, 2, 1, {70, 5, 140}, {90, 33, 140}, {}, 40, -1}},
      {kRelease, {"varlen-seqused_k-window", d, false, true, false, false, 2, 2, {64, 100}, {130, 100}, {80, 3}, 20, 10}},
      // NaN / inf the band hides from some rows (the math rule): seq 0 head 0 a NaN in K at
      // key 100 (rows < 80 do not see it), seq 1 head 1 +inf in K at key 110 (rows < 90;
      // -inf scores where the query's column is negative), seq 1 head 0 +inf in V at key
      // 135 (no row sees it); seq 0 head 1 stays finite (its blocks still skipped).
      {kUnit, {"nan-window-right", d, false, false, false, false, 2, 2, {100, 100}, {140, 140}, {}, -1, 20,
       MaskBreak::kNone, BwdBreak::kNone,
       {{'k', 0, 0, 100, NAN}, {'k', 1, 1, 110, INFINITY}, {'v', 1, 0, 135, INFINITY}}}},
      // Key padding: every key past seqused_k holds NaN. A NaN query row flags seq 0's head
      // 1, whose other rows must stay finite (the flagged head visits every block of its
      // read keys and none past them); a NaN in V of seq 1 reaches every row of its head
      // (0 * NaN), rows that see no key included; the heads holding NaN only in their
      // padding are not flagged (the pass scans below seqused_k). The backward: a NaN in
      // dO row 60 of seq 1 head 1 (which sees keys 0-20 of its 30) reaches the dK / dV of
      // every read key of its kv head (0 * NaN under the window) and its own dQ row only.
      {kUnit, {"nan-seqused_k-causal-window", d, false, false, true, false, 2, 2, {70, 70}, {141, 141}, {100, 30}, 20, -1,
       MaskBreak::kNone, BwdBreak::kNone, {{'q', 0, 1, 3, NAN}, {'v', 1, 0, 2, NAN}, {'d', 1, 1, 60, NAN}}}},
      // Varlen: NaN in K of sequence 1 and +inf in V of sequence 2 flag both heads (the
      // packed arrays' flags cover every sequence); sequence 0 must stay finite.
      {kUnit, {"nan-varlen-causal-window", d, true, true, true, false, 2, 1, {70, 5, 140}, {90, 33, 140}, {}, 40, -1,
       MaskBreak::kNone, BwdBreak::kNone, {{'k', 1, 0, 3, NAN}, {'v', 2, 0, 10, INFINITY}}}},
  };
}

// The D = 64 cases the breakage runs share (run_mask_breakages, run_cute_mask_breakages),
// each exposing the defects its runs name.
struct BreakageCases {
  MaskCase causal{"control", 64, false, false, true, false, 2, 1, {83}, {141}, {}, 50, -1};
  MaskCase left{"control", 64, false, false, false, false, 2, 1, {200}, {200}, {}, 37, -1};
  MaskCase varlen{"control", 64, false, true, true, false, 2, 1, {70, 5, 140}, {90, 33, 140}, {}, 40, -1};
  MaskCase padded{"control", 64, false, false, false, false, 2, 1, {83, 83}, {141, 141}, {100, 30}, -1, -1};
  // NaN / inf the window hides from some rows (the first row block's): the math rule.
  MaskCase planted{"control", 64, false, false, false, false, 2, 2, {150}, {200}, {}, -1, 20,
                   MaskBreak::kNone, BwdBreak::kNone, {{'k', 0, 0, 150, NAN}}};
};
const BreakageCases& breakage_cases() {
  static const BreakageCases cases;
  return cases;
}

}  // namespace

// Every case at every D, copies landing at issue and late; release: the cases that
// combine the most masks (both window sides, top-left causal, seqused_k with an empty
// entry, varlen with causal / seqused_k and a window), copies landing late only.
// The CuTe kernel runs there with fp32 accumulation only (its fp16 accumulation at every
// release head dim is --masks-cute-nonfinite's), to keep the slow sweep's time down.
// late_only: copies landing late only (the unit run's split-D head dim: the early landing's
// check, a stage refilled while another thread still reads it, is the same pipeline code at
// every head dim of a layout; emulated and emulated_tma run it unmasked at D = 320 and this
// run masked at D = 64).
int run_mask_cases(const std::vector<int>& dims, bool release, bool late_only) {
  std::mt19937 rng(31);
  int failed = 0, total = 0;
  if (release) g_mask_fwd_kernels &= ~((1u << int(FwdKernel::kCuteF16Acc)) | (1u << int(FwdKernel::kCuteTmaF16Acc)));
  for (int d : dims)
    for (bool late : {false, true})
      for (const auto& [sweep, c] : mask_cases(d)) {
        if ((release || late_only) && !late) continue;
        if (release && sweep != Sweep::kRelease) continue;
        emu::g_cp_late = late;
        ++total;
        if (!dispatch(c, rng)) ++failed;
      }
  return emu::verdict(release ? "release mask cases" : "mask cases", total, failed, "failed");
}

// Each deliberate mask defect of the forward (ffpa::MaskBreak) and of the backward
// (ffpa::BwdBreak) on a case that exposes it, D = 64, in a child process: every one must
// make its run fail, the controls must pass.
int run_mask_breakages() {
  struct Run {
    const char* what;
    MaskCase c;
    bool (*run)(const MaskCase&, std::mt19937&);
  };
  using H = __half;
  const auto& [causal, left, varlen, padded, planted] = breakage_cases();
  MaskCase padded320 = padded;
  padded320.d = 320;
  // Non-causal, no window: every query of sequence 1 sees every key, so its NaN dO row
  // makes all of its dK / dV NaN (the reference's too) and nothing of sequence 0's.
  MaskCase varlen_nan{"control", 64, false, true, false, false, 2, 1, {70, 40}, {90, 33}, {}, -1, -1};
  varlen_nan.nan_do_seq1 = true;
  const Run runs[] = {
      {"none (control, causal window)", causal, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNone>},
      {"none (control, varlen)", varlen, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNone>},
      {"fwd: the band's upper edge off by one (diagonal masked)", causal, &run_case_t<64, H, MaskBreak::kUpperEdge, BwdBreak::kNone>},
      {"fwd: the window's left edge off by one", left, &run_case_t<64, H, MaskBreak::kLowerEdge, BwdBreak::kNone>},
      {"fwd: varlen keys read one row before the sequence", varlen, &run_case_t<64, H, MaskBreak::kSeqOffset, BwdBreak::kNone>},
      {"fwd: padded keys counted (seqused_k ignored)", padded, &run_case_t<64, H, MaskBreak::kPaddedKeyCounted, BwdBreak::kNone>},
      {"fwd: the last visible KV block skipped", left, &run_case_t<64, H, MaskBreak::kSkipLastBlock, BwdBreak::kNone>},
      {"fwd: no block skipped (hidden blocks computed, then masked)", left, &run_case_t<64, H, MaskBreak::kNoSkip, BwdBreak::kNone>},
      {"none (control, NaN planted under the window)", planted, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNone>},
      {"fwd: the non-finite pre-pass's flags ignored", planted, &run_case_t<64, H, MaskBreak::kFlagsIgnored, BwdBreak::kNone>},
      {"fwd: the band's -inf replacing scores under the math rule (not added)", planted,
       &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNone, true>},
      {"bwd: the band's upper edge off by one", causal, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kMaskEdge>},
      {"bwd: the window's left edge off by one", left, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kMaskLeftEdge>},
      {"bwd: varlen keys read one row before the sequence", varlen, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kSeqOffset>},
      {"bwd: padded keys counted (seqused_k ignored)", padded, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kPaddedKeyCounted>},
      {"bwd: the last visible column block skipped", left, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kSkipOneBlock>},
      {"bwd: no block skipped (hidden blocks computed, then masked)", left, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNoSkip>},
      // (Keys 170-199 are hidden from every row, yet the math backend's dK / dV of them
      // are NaN: every row of head 0 reads the NaN key.)
      {"bwd: the non-finite pre-pass's flags ignored", planted, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kFlagsIgnored>},
      // The TMA feed's boxes read the padded keys (NaN here) past each sequence's used keys.
      {"none (control, seqused_k with NaN padded keys)", padded, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNone>},
      {"bwd-tma: tail rows past a sequence not zeroed (NaN padded keys)", padded, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kTmaTailNotZeroed>},
      {"none (control D=320, seqused_k with NaN padded keys)", padded320, &run_case_t<320, H, MaskBreak::kNone, BwdBreak::kNone>},
      {"bwd-tma D=320: tail rows past a sequence not zeroed (NaN padded keys)", padded320, &run_case_t<320, H, MaskBreak::kNone, BwdBreak::kTmaTailNotZeroed>},
      {"none (control, varlen with NaN in sequence 1's first dO row)", varlen_nan, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kNone>},
      {"bwd-tma: tail rows past a sequence not zeroed (NaN in the next sequence's dO)", varlen_nan, &run_case_t<64, H, MaskBreak::kNone, BwdBreak::kTmaTailNotZeroed>},
  };
  int wrong = 0;
  for (const Run& r : runs) {
    const bool want_pass = std::strncmp(r.what, "none", 4) == 0;
    const bool good = emu::breakage_run(std::string("breakage: ") + r.what, want_pass, [&] {
      emu::g_cp_late = true;
      std::mt19937 rng(13);
      return r.run(r.c, rng);
    });
    if (!good) ++wrong;
  }
  return emu::verdict("mask breakage runs", long(sizeof(runs) / sizeof(runs[0])), wrong, "wrong");
}

// The masked CuTe kernel alone (both feeds) on the nan-* cases (the math rule: flagged heads
// visit every block of their read keys, the band added as -inf), copies landing late, at
// each D (the release head dims in the slow run; the unit run's --masks covers 64 and 320).
int run_cute_mask_nonfinite(const std::vector<int>& dims) {
  std::mt19937 rng(37);
  int failed = 0, total = 0;
  g_mask_fwd_kernels = (1u << int(FwdKernel::kCute)) | (1u << int(FwdKernel::kCuteTma)) |
                       (1u << int(FwdKernel::kCuteF16Acc)) | (1u << int(FwdKernel::kCuteTmaF16Acc));
  emu::g_cp_late = true;
  for (int d : dims) {
    if (!cute_masks_compiled(d)) {
      std::fprintf(stderr, "head dim %d has no masked CuTe kernel in the emulator (emu_cute_masks_dims.inc)\n", d);
      return 2;
    }
    for (const auto& [sweep, c] : mask_cases(d)) {
      if (c.plants.empty()) continue;
      ++total;
      if (!dispatch(c, rng)) ++failed;
    }
  }
  return emu::verdict("CuTe nonfinite mask cases", total, failed, "failed");
}

// Each deliberate mask defect of the CuTe kernel (g_cute_mask_break), D = 64, the CuTe
// kernel alone on the feed the defect is in, in a child process: every one must make its
// run fail, the controls must pass.
int run_cute_mask_breakages() {
  struct Run {
    const char* what;
    MaskCase c;
    FwdKernel kernel;
    MaskBreak brk;
  };
  const auto& [causal, left, varlen, padded, planted] = breakage_cases();
  const FwdKernel cp = FwdKernel::kCute, tma = FwdKernel::kCuteTma;
  const Run runs[] = {
      {"none (control, causal window)", causal, cp, MaskBreak::kNone},
      {"none (control tma, causal window)", causal, tma, MaskBreak::kNone},
      {"none (control, varlen)", varlen, cp, MaskBreak::kNone},
      {"none (control tma, varlen)", varlen, tma, MaskBreak::kNone},
      {"cute: the window's left edge off by one", left, cp, MaskBreak::kLowerEdge},
      {"cute: varlen keys read one row before the sequence", varlen, cp, MaskBreak::kSeqOffset},
      {"cute: padded keys counted (seqused_k ignored)", padded, cp, MaskBreak::kPaddedKeyCounted},
      {"cute: no block skipped (hidden blocks computed, then masked)", left, cp, MaskBreak::kNoSkip},
      {"none (control, NaN planted under the window)", planted, cp, MaskBreak::kNone},
      {"cute: the non-finite pre-pass's flags ignored", planted, cp, MaskBreak::kFlagsIgnored},
      {"none (control tma, seqused_k with NaN padded keys)", padded, tma, MaskBreak::kNone},
      {"cute_tma: tail rows past a sequence not zeroed (NaN padded keys)", padded, tma, MaskBreak::kTmaTailNotZeroed},
  };
  int wrong = 0;
  for (const Run& r : runs) {
    const bool want_pass = std::strncmp(r.what, "none", 4) == 0;
    const bool good = emu::breakage_run(std::string("breakage: ") + r.what, want_pass, [&] {
      emu::g_cp_late = true;
      g_mask_fwd_kernels = 1u << int(r.kernel);
      g_cute_mask_break = r.brk;
      std::mt19937 rng(13);
      return run_case_t<64, __half, MaskBreak::kNone, BwdBreak::kNone>(r.c, rng);
    });
    if (!good) ++wrong;
  }
  return emu::verdict("CuTe mask breakage runs", long(sizeof(runs) / sizeof(runs[0])), wrong, "wrong");
}
