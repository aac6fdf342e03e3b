#include "attention_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace ffpa::ref {

namespace {

void one_head(const Problem& p, int bh, const float* q, const float* k, const float* v, float* out, float* lse) {
  const int batch = bh / p.hq;
  const int head = bh % p.hq;
  const int kv_head = head / (p.hq / p.hkv);
  const float* qh = q + (static_cast<int64_t>(batch) * p.hq + head) * p.nq * p.d;
  const float* kh = k + (static_cast<int64_t>(batch) * p.hkv + kv_head) * p.nkv * p.d;
  const float* vh = v + (static_cast<int64_t>(batch) * p.hkv + kv_head) * p.nkv * p.d;
  float* oh = out + (static_cast<int64_t>(batch) * p.hq + head) * p.nq * p.d;
  float* lh = lse + (static_cast<int64_t>(batch) * p.hq + head) * p.nq;
  std::vector<float> s(p.nkv);
  std::vector<double> acc(p.d);
  for (int i = 0; i < p.nq; ++i) {
    // Bottom-right causal: key j is visible iff j <= i + (nkv - nq).
    const int64_t limit = p.causal ? static_cast<int64_t>(i) + p.nkv - p.nq + 1 : p.nkv;
    const int visible = static_cast<int>(std::clamp<int64_t>(limit, 0, p.nkv));
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < visible; ++j) {
      double dot = 0.0;
      for (int c = 0; c < p.d; ++c) dot += static_cast<double>(qh[i * p.d + c]) * kh[static_cast<int64_t>(j) * p.d + c];
      s[j] = static_cast<float>(dot * p.scale);
      mx = std::max(mx, s[j]);
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    double sum = 0.0;
    for (int j = 0; j < visible; ++j) {
      const double e = std::exp(static_cast<double>(s[j]) - mx);
      sum += e;
      for (int c = 0; c < p.d; ++c) acc[c] += e * vh[static_cast<int64_t>(j) * p.d + c];
    }
    for (int c = 0; c < p.d; ++c) oh[i * p.d + c] = sum > 0 ? static_cast<float>(acc[c] / sum) : 0.f;
    lh[i] = sum > 0 ? static_cast<float>(mx + std::log(sum)) : -std::numeric_limits<float>::infinity();
  }
}

}  // namespace

void attention(const Problem& p, const float* q, const float* k, const float* v, float* out, float* lse) {
  const int heads = p.b * p.hq;
  const int workers = std::max(1, std::min<int>(heads, static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int bh = w; bh < heads; bh += workers) one_head(p, bh, q, k, v, out, lse);
    });
  for (auto& t : pool) t.join();
}

}  // namespace ffpa::ref
