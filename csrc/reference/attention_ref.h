// fp32 host reference attention for the device check: the same contract as the
// kernels (bottom-right causal, GQA, fully masked rows -> 0 with LSE -inf), computed
// directly with a two-pass softmax so it shares no code or algorithm with them.
#pragma once

#include <cstdint>

namespace ffpa::ref {

struct Problem {
  int b = 1, hq = 1, hkv = 1, nq = 1, nkv = 1, d = 64;
  bool causal = false;
  float scale = 0.f;
};

// q [b, hq, nq, d], k and v [b, hkv, nkv, d], out [b, hq, nq, d], lse [b, hq, nq]:
// contiguous fp32. Parallel over (batch, head) with std::thread.
void attention(const Problem& p, const float* q, const float* k, const float* v, float* out, float* lse);

}  // namespace ffpa::ref
