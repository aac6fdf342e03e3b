// fp32 host reference attention for the device check: the same contract as the
// kernels (bottom-right causal, GQA, fully masked rows -> 0 with LSE -inf), computed
// directly with a two-pass softmax in double so it shares no code or algorithm with them.
#pragma once

#include <cstdint>

namespace ffpa::ref {

struct Problem {
  int b = 1, hq = 1, hkv = 1, nq = 1, nkv = 1, d = 64;
  bool causal = false;
  bool top_left = false;  // causal aligned top-left (key j <= i, SDPA's is_causal), else bottom-right
  float scale = 0.f;
};

// q [b, hq, nq, d], k and v [b, hkv, nkv, d], out [b, hq, nq, d], lse [b, hq, nq]:
// contiguous fp32. Parallel over (batch, head, row) with std::thread.
void attention(const Problem& p, const float* q, const float* k, const float* v, float* out, float* lse);

// Only the query rows rows[0..nrows) (each in [0, nq)): out [b, hq, nrows, d] and
// lse [b, hq, nrows] hold them in that order. Long sequences are checked on a sample
// of rows: a full fp64 reference at N = 8192, D = 512 costs minutes of CPU.
void attention_rows(const Problem& p, const float* q, const float* k, const float* v, const int* rows, int nrows,
                    float* out, float* lse);

}  // namespace ffpa::ref
