// float64 host reference of attention's forward and backward as torch's math backend
// computes them (scores, safe softmax, P V; autograd's formulas), for the backward
// kernels' checks: the CPU emulator (csrc/tests/emulate_bwd.cpp) and the device-check
// runner (csrc/tools/device_check_bwd.cu). Written straight from the formulas in double,
// so it shares no code or algorithm with the kernels.
#pragma once

#include <vector>

namespace ffpa::ref {

struct BwdProblem {
  int b = 1, hq = 1, hkv = 1, nq = 1, nkv = 1, d = 64;
  bool causal = false;
  // diag(i) = i + causal_offset (0: SDPA's is_causal, top-left; nkv - nq: bottom-right).
  // Causal: key j is visible to query i when j <= diag(i). The sliding window, with or
  // without causal: diag(i) - window_left <= j <= diag(i) + window_right (-1: unbounded).
  int causal_offset = 0;
  double scale = 0.0;
  int window_left = -1, window_right = -1;
};

struct BwdGrads {
  std::vector<double> o, lse, dq, dk, dv;
};

// q and dout [b, hq, nq, d], k and v [b, hkv, nkv, d], contiguous. The math backend's
// non-finite behaviour: the causal mask is added as -inf (a NaN or +inf score stays NaN
// under it); a NaN score makes its row NaN (max propagates NaN); a row whose every score
// is -inf (one that sees no key) has O = 0, LSE = -inf and dS = 0 * (dP - Delta) (0 for
// finite dP; the safe softmax's backward is the same product); P V, P^T dO, dS K and
// dS^T Q are matrix products over every key and query, so 0 * NaN and 0 * inf give NaN.
BwdGrads attention_backward(const BwdProblem& p, const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v, const std::vector<double>& dout);

}  // namespace ffpa::ref
