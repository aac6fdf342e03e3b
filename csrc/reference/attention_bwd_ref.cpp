#include "attention_bwd_ref.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace ffpa::ref {

BwdGrads attention_backward(const BwdProblem& c, const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v, const std::vector<double>& dout) {
  const int D = c.d, nq = c.nq, nkv = c.nkv;
  const double scale = c.scale;
  BwdGrads r;
  r.o.assign(q.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  r.lse.assign(size_t(c.b) * c.hq * nq, 0.0);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> s(nkv), p(nkv), dp(nkv);
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < c.hq; ++h) {
      const int hk = h / (c.hq / c.hkv);
      const double* qh = &q[(size_t(b) * c.hq + h) * nq * D];
      const double* doh = &dout[(size_t(b) * c.hq + h) * nq * D];
      const double* kh = &k[(size_t(b) * c.hkv + hk) * nkv * D];
      const double* vh = &v[(size_t(b) * c.hkv + hk) * nkv * D];
      double* dqh = &r.dq[(size_t(b) * c.hq + h) * nq * D];
      double* dkh = &r.dk[(size_t(b) * c.hkv + hk) * nkv * D];
      double* dvh = &r.dv[(size_t(b) * c.hkv + hk) * nkv * D];
      double* oh = &r.o[(size_t(b) * c.hq + h) * nq * D];
      for (int i = 0; i < nq; ++i) {
        double mx = -inf;
        bool any = false, nan = false;
        for (int j = 0; j < nkv; ++j) {
          double x = 0;
          for (int e = 0; e < D; ++e) x += qh[size_t(i) * D + e] * kh[size_t(j) * D + e];
          x *= scale;
          const long diag = long(i) + c.causal_offset;
          const bool hidden = (c.causal && j > diag) || (c.window_left >= 0 && j < diag - c.window_left) ||
                              (c.window_right >= 0 && j > diag + c.window_right);
          // The math backend adds its mask: a NaN or +inf score stays NaN under it.
          if (hidden) x += -inf;
          // Its safe softmax zero-fills a row whose every score is -inf.
          if (x != -inf) any = true;
          s[j] = x;
          if (std::isnan(x)) nan = true;
          else mx = std::max(mx, x);
        }
        if (nan) mx = NAN;  // torch's max propagates NaN
        double sum = 0;
        for (int j = 0; j < nkv; ++j) sum += (p[j] = std::exp(s[j] - mx));
        for (int j = 0; j < nkv; ++j) p[j] = any ? p[j] / sum : 0.0;  // safe softmax
        r.lse[(size_t(b) * c.hq + h) * nq + i] = any ? mx + std::log(sum) : -inf;
        for (int e = 0; e < D; ++e) {
          double acc = 0;
          for (int j = 0; j < nkv; ++j) acc += p[j] * vh[size_t(j) * D + e];
          oh[size_t(i) * D + e] = acc;
        }
        double delta = 0;
        for (int j = 0; j < nkv; ++j) {
          double x = 0;
          for (int e = 0; e < D; ++e) x += doh[size_t(i) * D + e] * vh[size_t(j) * D + e];
          dp[j] = x;
          delta += x * p[j];
        }
        for (int j = 0; j < nkv; ++j) {
          // A zero-filled row (no key) has ds = 0 * (dp - delta): 0, or NaN where dp or
          // delta is (the safe softmax's backward is the same product).
          const double ds = p[j] * (dp[j] - delta);
          for (int e = 0; e < D; ++e) {
            dvh[size_t(j) * D + e] += p[j] * doh[size_t(i) * D + e];
            dqh[size_t(i) * D + e] += scale * ds * kh[size_t(j) * D + e];
            dkh[size_t(j) * D + e] += scale * ds * qh[size_t(i) * D + e];
          }
        }
      }
    }
  return r;
}

}  // namespace ffpa::ref
