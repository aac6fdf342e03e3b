// The device-check runner's mask cases (kernels/ffpa/mask.h: sliding window, seqused_k,
// varlen): ffpa::forward() on the requested impl (mma, tma, cute or cute_tma) and then ffpa::backward()
// on the forward's own O and LSE, against the float64 reference of csrc/reference/
// attention_bwd_ref.cpp run per sequence on that sequence's rows and its seqused_k keys
// only (padding is absent there; its K and V hold NaN on the device, so a padded key that
// is read shows). O and the LSE are judged by the fp16 / bf16 rows, dQ, dK and dV by the
// bwd_fp16 / bwd_bf16 rows of ffpa/tolerance.h; padded keys' dK / dV must be zero.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_bwd_ref.h"
#include "device_check.h"
#include "ffpa/tolerance.h"

namespace ffpa::check {

std::string mask_spec_name(const MaskSpec& c, ffpa::Impl impl) {
  std::string lens;
  for (size_t s = 0; s < c.lens_q.size(); ++s)
    lens += (s ? "," : "") + std::to_string(c.lens_q[s]) + "/" + std::to_string(c.lens_k[s]);
  std::string used;
  for (int u : c.used_k) used += (used.empty() ? "" : ",") + std::to_string(u);
  char buf[400];
  std::snprintf(buf, sizeof(buf), "masks D=%d %s %s causal=%d window=(%d,%d) Nq/Nkv=%s%s%s Hq=%d Hkv=%d impl=%s", c.d,
                ffpa::dtype_name(c.dtype), c.varlen ? "varlen" : "padded", c.causal ? 1 : 0, c.left, c.right,
                lens.c_str(), used.empty() ? "" : " seqused_k=", used.c_str(), c.hq, c.hkv, ffpa::impl_name(impl));
  std::string name = buf;
  if (c.plant != 0)
    name += std::string(" plant=") + c.plant + "[s" + std::to_string(c.plant_seq) + ",h" + std::to_string(c.plant_head) +
            ",r" + std::to_string(c.plant_row) + "]=" + (std::isnan(c.plant_value) ? "nan" : c.plant_value > 0 ? "inf" : "-inf");
  return name;
}

MaskResult run_mask_case(const MaskSpec& c, ffpa::Impl impl, uint64_t seed) {
  const int D = c.d, S = static_cast<int>(c.lens_q.size()), hq = c.hq, hkv = c.hkv;
  std::vector<int> cu_q(S + 1, 0), cu_k(S + 1, 0);
  for (int s = 0; s < S; ++s) cu_q[s + 1] = cu_q[s] + c.lens_q[s], cu_k[s + 1] = cu_k[s] + c.lens_k[s];
  const int B = c.varlen ? 1 : S;
  const int nq = c.varlen ? cu_q[S] : c.lens_q[0], nkv = c.varlen ? cu_k[S] : c.lens_k[0];
  auto used_of = [&](int s) { return c.used_k.empty() ? c.lens_k[s] : std::min(c.used_k[s], c.lens_k[s]); };
  // Varlen: [1, H, total, D] views of packed [total, H, D] (the [B, N, H, D] order with
  // B = 1); a padded batch: [B, H, N, D].
  const bool bnhd = c.varlen;
  auto at = [&](int h, int n, bool is_q, int s, int hi, int r) {
    const int b = c.varlen ? 0 : s;
    const int row = c.varlen ? (is_q ? cu_q[s] : cu_k[s]) + r : r;
    return size_t(row_offset(bnhd, h, n, D, b, hi, row));
  };
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](size_t n) {
    std::vector<uint16_t> m(n);
    for (uint16_t& x : m) x = to_bits(dist(rng), c.dtype);
    return m;
  };
  const size_t q_elems = size_t(B) * hq * nq * D, k_elems = size_t(B) * hkv * nkv * D;
  std::vector<uint16_t> qm = make(q_elems), km = make(k_elems), vm = make(k_elems), dom = make(q_elems);
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < hkv; ++h)
      for (int r = used_of(s); r < c.lens_k[s]; ++r)
        for (int e = 0; e < D; ++e) km[at(hkv, nkv, false, s, h, r) + e] = vm[at(hkv, nkv, false, s, h, r) + e] = 0xffff;
  if (c.plant != 0) {
    std::vector<uint16_t>& m = c.plant == 'q' ? qm : c.plant == 'd' ? dom : c.plant == 'k' ? km : vm;
    const bool is_q = c.plant == 'q' || c.plant == 'd';
    m[at(is_q ? hq : hkv, is_q ? nq : nkv, is_q, c.plant_seq, c.plant_head, c.plant_row) + 3] =
        to_bits(c.plant_value, c.dtype);
  }

  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> ref_o(q_elems, 0.0), ref_lse(size_t(B) * hq * nq, 0.0), ref_dq(q_elems, 0.0),
      ref_dk(k_elems, 0.0), ref_dv(k_elems, 0.0);
  auto lse_at = [&](int s, int h, int r) {
    return c.varlen ? size_t(h) * nq + cu_q[s] + r : (size_t(s) * hq + h) * nq + r;
  };
  for (int s = 0; s < S; ++s) {
    const int lq = c.lens_q[s], used = used_of(s);
    std::vector<double> q(size_t(hq) * lq * D), k(size_t(hkv) * used * D), v(k.size()), dout(q.size());
    for (int h = 0; h < hq; ++h)
      for (int r = 0; r < lq; ++r)
        for (int e = 0; e < D; ++e) {
          q[(size_t(h) * lq + r) * D + e] = from_bits(qm[at(hq, nq, true, s, h, r) + e], c.dtype);
          dout[(size_t(h) * lq + r) * D + e] = from_bits(dom[at(hq, nq, true, s, h, r) + e], c.dtype);
        }
    for (int h = 0; h < hkv; ++h)
      for (int r = 0; r < used; ++r)
        for (int e = 0; e < D; ++e) {
          k[(size_t(h) * used + r) * D + e] = from_bits(km[at(hkv, nkv, false, s, h, r) + e], c.dtype);
          v[(size_t(h) * used + r) * D + e] = from_bits(vm[at(hkv, nkv, false, s, h, r) + e], c.dtype);
        }
    // The forward's causal is bottom-right; varlen is bottom-right per sequence.
    const bool bottom_right = c.varlen || c.causal;
    ffpa::ref::BwdProblem pr{1, hq, hkv, lq, used, D, c.causal, bottom_right ? used - lq : 0, scale};
    pr.window_left = c.left, pr.window_right = c.right;
    const ffpa::ref::BwdGrads g = ffpa::ref::attention_backward(pr, q, k, v, dout);
    for (int h = 0; h < hq; ++h)
      for (int r = 0; r < lq; ++r) {
        ref_lse[lse_at(s, h, r)] = g.lse[size_t(h) * lq + r];
        for (int e = 0; e < D; ++e) {
          ref_o[at(hq, nq, true, s, h, r) + e] = g.o[(size_t(h) * lq + r) * D + e];
          ref_dq[at(hq, nq, true, s, h, r) + e] = g.dq[(size_t(h) * lq + r) * D + e];
        }
      }
    for (int h = 0; h < hkv; ++h)
      for (int r = 0; r < used; ++r)
        for (int e = 0; e < D; ++e) {
          ref_dk[at(hkv, nkv, false, s, h, r) + e] = g.dk[(size_t(h) * used + r) * D + e];
          ref_dv[at(hkv, nkv, false, s, h, r) + e] = g.dv[(size_t(h) * used + r) * D + e];
        }
  }

  std::vector<void*> allocs;
  auto upload = [&](const void* host, size_t bytes) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    if (host != nullptr) CHECK_CUDA(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    else CHECK_CUDA(cudaMemset(p, 0xff, bytes));  // NaN: an unwritten element fails
    allocs.push_back(p);
    return p;
  };
  auto int_array = [&](const std::vector<int>& v, ffpa::IntArrayDesc& d) {
    d.data = static_cast<const int32_t*>(upload(v.data(), v.size() * 4));
    d.size = static_cast<int64_t>(v.size());
  };
  ffpa::MaskArgs m;
  m.window_left = c.left, m.window_right = c.right;
  if (!c.used_k.empty()) int_array(c.used_k, m.seqused_k);
  if (c.varlen) {
    int_array(cu_q, m.cu_seqlens_q);
    int_array(cu_k, m.cu_seqlens_k);
    m.max_seqlen_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
    m.max_seqlen_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  }
  auto lse_desc = [&](ffpa::LseDesc& l, float* data) {
    l.data = data;
    l.shape[0] = B, l.shape[1] = hq, l.shape[2] = nq;
    l.stride[0] = int64_t(hq) * nq, l.stride[1] = nq, l.stride[2] = 1;
  };
  MaskResult r;
  auto fail = [&](const std::string& why) {
    r.ok = false;
    r.error += (r.error.empty() ? "" : "; ") + why;
  };
  void* dq_ = upload(qm.data(), qm.size() * 2);
  void* dk_ = upload(km.data(), km.size() * 2);
  void* dv_ = upload(vm.data(), vm.size() * 2);
  void* ddo = upload(dom.data(), dom.size() * 2);
  void* dout_o = upload(nullptr, q_elems * 2);
  float* dlse = static_cast<float*>(upload(nullptr, ref_lse.size() * 4));

  ffpa::ForwardArgs f;
  set_desc(f.q, dq_, bnhd, B, hq, nq, D, c.dtype);
  set_desc(f.k, dk_, bnhd, B, hkv, nkv, D, c.dtype);
  set_desc(f.v, dv_, bnhd, B, hkv, nkv, D, c.dtype);
  set_desc(f.out, dout_o, bnhd, B, hq, nq, D, c.dtype);
  lse_desc(f.lse, dlse);
  f.mask = m;
  f.causal = c.causal;
  f.scale = float(scale);
  f.impl = impl;
  ffpa::Status st = ffpa::forward(f);
  if (!st.ok()) {
    fail("forward refused: " + st.message);
  } else {
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> o(q_elems);
    std::vector<float> lse(ref_lse.size());
    CHECK_CUDA(cudaMemcpy(o.data(), dout_o, o.size() * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
    // Non-finite references (a planted value, or a row's -inf LSE) must be matched exactly
    // (NaN for NaN, an inf of the same sign); a non-finite result where the reference is
    // finite counts as an infinite error.
    size_t pattern_diff = 0;
    auto err = [&](double g, double want) {
      if (!std::isfinite(want)) {
        if (!(g == want || (std::isnan(g) && std::isnan(want)))) ++pattern_diff;
        return 0.0;
      }
      return std::isfinite(g) ? std::fabs(g - want) : INFINITY;
    };
    for (size_t i = 0; i < o.size(); ++i) r.o_err = std::max(r.o_err, err(from_bits(o[i], c.dtype), ref_o[i]));
    for (size_t i = 0; i < lse.size(); ++i) r.lse_err = std::max(r.lse_err, err(lse[i], ref_lse[i]));
    if (pattern_diff > 0) fail("forward: " + std::to_string(pattern_diff) + " NaN / inf entries differ from the math backend's");
    const ffpa::Tolerance& ft = ffpa::tolerance(c.dtype == ffpa::DType::kFp16 ? "fp16" : "bf16");
    if (!(r.o_err <= ft.atol && r.lse_err <= ft.lse)) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "forward: max |O - ref| %.3g (bound %g), LSE %.3g (bound %g)", r.o_err, ft.atol,
                    r.lse_err, ft.lse);
      fail(buf);
    }
  }

  // The backward on the reference's own O (rounded) and LSE, as device_check_bwd.cu (NaN
  // rows included, with a planted value: what the forward gives).
  std::vector<uint16_t> om(q_elems);
  for (size_t i = 0; i < om.size(); ++i) om[i] = to_bits(float(ref_o[i]), c.dtype);
  std::vector<float> lse_in(ref_lse.size());
  for (size_t i = 0; i < lse_in.size(); ++i) lse_in[i] = float(ref_lse[i]);
  ffpa::BackwardArgs a;
  a.q = f.q, a.k = f.k, a.v = f.v;
  set_desc(a.out, upload(om.data(), om.size() * 2), bnhd, B, hq, nq, D, c.dtype);
  set_desc(a.dout, ddo, bnhd, B, hq, nq, D, c.dtype);
  set_desc(a.dq, upload(nullptr, q_elems * 2), bnhd, B, hq, nq, D, c.dtype);
  set_desc(a.dk, upload(nullptr, k_elems * 2), bnhd, B, hkv, nkv, D, c.dtype);
  set_desc(a.dv, upload(nullptr, k_elems * 2), bnhd, B, hkv, nkv, D, c.dtype);
  lse_desc(a.lse, static_cast<float*>(upload(lse_in.data(), lse_in.size() * 4)));
  a.mask = m;
  a.causal = c.causal;
  a.scale = float(scale);
  a.workspace = static_cast<float*>(upload(nullptr, size_t(ffpa::backward_workspace_floats(a)) * 4));
  st = ffpa::backward(a);
  if (!st.ok()) {
    fail("backward refused: " + st.message);
  } else {
    CHECK_CUDA(cudaDeviceSynchronize());
    const ffpa::Tolerance& bt = bwd_tolerance(c.dtype);
    const std::pair<const ffpa::TensorDesc*, const std::vector<double>*> gs[3] = {
        {&a.dq, &ref_dq}, {&a.dk, &ref_dk}, {&a.dv, &ref_dv}};
    const char* names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; ++i) {
      std::vector<uint16_t> got(gs[i].second->size());
      CHECK_CUDA(cudaMemcpy(got.data(), gs[i].first->data, got.size() * 2, cudaMemcpyDeviceToHost));
      double max_err = 0, max_ref = 0, sum_err = 0, sum_ref = 0;
      bool finite = true;
      size_t pattern_diff = 0;  // non-finite references (a planted value) matched exactly
      for (size_t e = 0; e < got.size(); ++e) {
        const double x = from_bits(got[e], c.dtype), want = (*gs[i].second)[e];
        if (!std::isfinite(want)) {
          if (!(x == want || (std::isnan(x) && std::isnan(want)))) ++pattern_diff;
          continue;
        }
        finite &= std::isfinite(x);
        max_err = std::max(max_err, std::fabs(x - want)), max_ref = std::max(max_ref, std::fabs(want));
        sum_err += std::fabs(x - want), sum_ref += std::fabs(want);
      }
      const double rel = !finite ? INFINITY : max_ref > 0 ? max_err / max_ref : max_err;
      const double l1 = !finite ? INFINITY : sum_ref > 0 ? sum_err / sum_ref : sum_err;
      r.grad_max_rel = std::max(r.grad_max_rel, rel);
      r.grad_rel_l1 = std::max(r.grad_rel_l1, l1);
      if (!(rel <= bt.atol && l1 <= bt.max_rel_l1)) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "%s: max rel %.3g (bound %g), rel L1 %.3g (bound %g)%s", names[i], rel, bt.atol,
                      l1, bt.max_rel_l1, finite ? "" : ", non-finite values");
        fail(buf);
      }
      if (pattern_diff > 0)
        fail(std::string(names[i]) + ": " + std::to_string(pattern_diff) +
             " NaN / inf entries differ from the math backend's autograd");
    }
  }
  for (void* p : allocs) cudaFree(p);
  return r;
}

}  // namespace ffpa::check
