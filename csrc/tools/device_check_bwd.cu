// The device-check runner's backward cases: ffpa::backward() against a float64 reference
// of torch's math backend (forward and autograd formulas: safe softmax, a row with no
// visible key has zero gradients), on the reference's own O and LSE rounded as the
// forward hands them over (O in the input dtype, LSE in fp32), so that a case judges the
// backward alone. See device_check.h.
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

std::string bwd_spec_name(const BwdSpec& c) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "backward D=%d %s causal=%s B=%d Nq=%d Nkv=%d Hq=%d Hkv=%d layout=%s", c.d,
                ffpa::dtype_name(c.dtype), !c.causal ? "0" : c.top_left ? "top-left" : "bottom-right", c.b, c.nq,
                c.nkv, c.hq, c.hkv, c.bnhd ? "bnhd" : "bhnd");
  std::string name = buf;
  if (c.plant) name += std::string(" nan=") + (c.plant == 'o' ? "dout" : c.plant == 'k' ? "k" : "v") + "[" +
                       std::to_string(c.plant_row) + "]";
  return name;
}

const ffpa::Tolerance& bwd_tolerance(ffpa::DType dt) {
  return ffpa::tolerance(dt == ffpa::DType::kFp16 ? "bwd_fp16" : "bwd_bf16");
}

BwdResult run_bwd_case(const BwdSpec& c, uint64_t seed) {
  const int B = c.b, D = c.d;
  const double scale = 1.0 / std::sqrt(double(D));
  const int offset = c.top_left ? 0 : c.nkv - c.nq;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  // Logical values (rounded to the dtype) and memory images in the case's layout.
  auto make = [&](int H, int N, std::vector<double>& logical, std::vector<uint16_t>& mem) {
    logical.assign(size_t(B) * H * N * D, 0.0);
    mem.assign(logical.size(), 0);
    for (int bi = 0; bi < B; ++bi)
      for (int hi = 0; hi < H; ++hi)
        for (int ni = 0; ni < N; ++ni)
          for (int di = 0; di < D; ++di) {
            const uint16_t bits = to_bits(dist(rng), c.dtype);
            logical[((size_t(bi) * H + hi) * N + ni) * D + di] = from_bits(bits, c.dtype);
            mem[row_offset(c.bnhd, H, N, D, bi, hi, ni) + di] = bits;
          }
  };
  std::vector<double> q, k, v, dout;
  std::vector<uint16_t> qm, km, vm, dom;
  make(c.hq, c.nq, q, qm);
  make(c.hkv, c.nkv, k, km);
  make(c.hkv, c.nkv, v, vm);
  make(c.hq, c.nq, dout, dom);
  if (c.plant) {
    std::vector<double>& logical = c.plant == 'k' ? k : c.plant == 'v' ? v : dout;
    std::vector<uint16_t>& mem = c.plant == 'k' ? km : c.plant == 'v' ? vm : dom;
    const int H = c.plant == 'o' ? c.hq : c.hkv, N = c.plant == 'o' ? c.nq : c.nkv;
    logical[size_t(c.plant_row) * D + 3] = NAN;  // batch 0, head 0
    mem[row_offset(c.bnhd, H, N, D, 0, 0, c.plant_row) + 3] = to_bits(NAN, c.dtype);
  }
  const ffpa::ref::BwdGrads ref = ffpa::ref::attention_backward(
      {c.b, c.hq, c.hkv, c.nq, c.nkv, c.d, c.causal, offset, scale}, q, k, v, dout);
  std::vector<uint16_t> om(qm.size());
  for (int bi = 0; bi < B; ++bi)
    for (int hi = 0; hi < c.hq; ++hi)
      for (int ni = 0; ni < c.nq; ++ni)
        for (int di = 0; di < D; ++di)
          om[row_offset(c.bnhd, c.hq, c.nq, D, bi, hi, ni) + di] =
              to_bits(float(ref.o[((size_t(bi) * c.hq + hi) * c.nq + ni) * D + di]), c.dtype);
  std::vector<float> lse(ref.lse.size());
  for (size_t i = 0; i < lse.size(); ++i) lse[i] = float(ref.lse[i]);

  // Device arrays; the gradients start as NaN (0xffff): an unwritten element fails.
  std::vector<void*> allocs;
  auto upload = [&](const void* host, size_t bytes) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    if (host != nullptr) CHECK_CUDA(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    else CHECK_CUDA(cudaMemset(p, 0xff, bytes));
    allocs.push_back(p);
    return p;
  };
  ffpa::BackwardArgs a;
  set_desc(a.q, upload(qm.data(), qm.size() * 2), c.bnhd, B, c.hq, c.nq, D, c.dtype);
  set_desc(a.k, upload(km.data(), km.size() * 2), c.bnhd, B, c.hkv, c.nkv, D, c.dtype);
  set_desc(a.v, upload(vm.data(), vm.size() * 2), c.bnhd, B, c.hkv, c.nkv, D, c.dtype);
  set_desc(a.out, upload(om.data(), om.size() * 2), c.bnhd, B, c.hq, c.nq, D, c.dtype);
  set_desc(a.dout, upload(dom.data(), dom.size() * 2), c.bnhd, B, c.hq, c.nq, D, c.dtype);
  set_desc(a.dq, upload(nullptr, qm.size() * 2), c.bnhd, B, c.hq, c.nq, D, c.dtype);
  set_desc(a.dk, upload(nullptr, km.size() * 2), c.bnhd, B, c.hkv, c.nkv, D, c.dtype);
  set_desc(a.dv, upload(nullptr, vm.size() * 2), c.bnhd, B, c.hkv, c.nkv, D, c.dtype);
  a.lse.data = static_cast<float*>(upload(lse.data(), lse.size() * 4));
  a.lse.shape[0] = B, a.lse.shape[1] = c.hq, a.lse.shape[2] = c.nq;
  a.lse.stride[0] = int64_t(c.hq) * c.nq, a.lse.stride[1] = c.nq, a.lse.stride[2] = 1;
  a.causal = c.causal;
  a.causal_top_left = c.top_left;
  a.scale = float(scale);
  a.workspace = static_cast<float*>(upload(nullptr, size_t(ffpa::backward_workspace_floats(a)) * 4));

  BwdResult r;
  const ffpa::Status st = ffpa::backward(a);
  if (!st.ok()) {
    r.ok = false;
    r.max_rel = r.max_abs = r.rel_l1 = NAN;
    r.error = st.message;
  } else {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::fprintf(stderr, "kernel failed in case %s: %s\n", bwd_spec_name(c).c_str(), cudaGetErrorString(e));
      std::exit(2);  // the context is unusable after a device fault
    }
    // Each gradient: max |g - ref| / max |ref| and sum |g - ref| / sum |ref| (the bwd rows'
    // atol and max_rel_l1) over the entries the reference has finite; a NaN where the
    // reference has none, or none where it has one (a planted NaN), fails.
    const ffpa::Tolerance& tol = bwd_tolerance(c.dtype);
    struct G {
      const char* name;
      const TensorDesc* t;
      const std::vector<double>* ref;
      int h, n;
    } gs[3] = {{"dq", &a.dq, &ref.dq, c.hq, c.nq}, {"dk", &a.dk, &ref.dk, c.hkv, c.nkv},
               {"dv", &a.dv, &ref.dv, c.hkv, c.nkv}};
    for (const G& g : gs) {
      std::vector<uint16_t> got(g.ref->size());
      CHECK_CUDA(cudaMemcpy(got.data(), g.t->data, got.size() * 2, cudaMemcpyDeviceToHost));
      double max_err = 0, max_ref = 0, sum_err = 0, sum_ref = 0;
      bool finite = true;
      for (int bi = 0; bi < B; ++bi)
        for (int hi = 0; hi < g.h; ++hi)
          for (int ni = 0; ni < g.n; ++ni)
            for (int di = 0; di < D; ++di) {
              const double want = (*g.ref)[((size_t(bi) * g.h + hi) * g.n + ni) * D + di];
              const double x = from_bits(got[row_offset(c.bnhd, g.h, g.n, D, bi, hi, ni) + di], c.dtype);
              if (std::isnan(want)) {
                finite &= std::isnan(x);
                continue;
              }
              finite &= std::isfinite(x);
              const double err = std::fabs(x - want);
              max_err = std::max(max_err, err), max_ref = std::max(max_ref, std::fabs(want));
              sum_err += err, sum_ref += std::fabs(want);
            }
      const double rel = !finite ? INFINITY : max_ref > 0 ? max_err / max_ref : max_err;
      const double l1 = !finite ? INFINITY : sum_ref > 0 ? sum_err / sum_ref : sum_err;
      r.max_abs = std::max(r.max_abs, finite ? max_err : INFINITY);
      r.max_rel = std::max(r.max_rel, rel);
      r.rel_l1 = std::max(r.rel_l1, l1);
      if (!(rel <= tol.atol && l1 <= tol.max_rel_l1)) {
        r.ok = false;
        char buf[200];
        std::snprintf(buf, sizeof(buf), "%s%s: max rel %.3g (bound %g), rel L1 %.3g (bound %g)%s",
                      r.error.empty() ? "" : "; ", g.name, rel, tol.atol, l1, tol.max_rel_l1,
                      finite ? "" : ", NaN / inf where the reference differs");
        r.error += buf;
      }
    }
  }
  for (void* p : allocs) cudaFree(p);
  return r;
}

}  // namespace ffpa::check
