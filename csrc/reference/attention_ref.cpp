#include "attention_ref.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>
#include <vector>

namespace ffpa::ref {

namespace {

// Row i of head bh (batch * hq + head) into out_row [d] and *lse_row.
void one_row(const Problem& p, int bh, int i, const float* q, const float* k, const float* v, float* out_row,
             float* lse_row, std::vector<float>& s, std::vector<double>& acc) {
  const int batch = bh / p.hq;
  const int head = bh % p.hq;
  const int kv_head = head / (p.hq / p.hkv);
  const float* qi = q + ((static_cast<int64_t>(batch) * p.hq + head) * p.nq + i) * p.d;
  const float* kh = k + (static_cast<int64_t>(batch) * p.hkv + kv_head) * p.nkv * p.d;
  const float* vh = v + (static_cast<int64_t>(batch) * p.hkv + kv_head) * p.nkv * p.d;
  // Causal: key j is visible iff j <= i + (nkv - nq) bottom-right, j <= i top-left.
  const int64_t limit = p.causal ? static_cast<int64_t>(i) + (p.top_left ? 0 : p.nkv - p.nq) + 1 : p.nkv;
  const int visible = static_cast<int>(std::clamp<int64_t>(limit, 0, p.nkv));
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < visible; ++j) {
    double dot = 0.0;
    for (int c = 0; c < p.d; ++c) dot += static_cast<double>(qi[c]) * kh[static_cast<int64_t>(j) * p.d + c];
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
  for (int c = 0; c < p.d; ++c) out_row[c] = sum > 0 ? static_cast<float>(acc[c] / sum) : 0.f;
  *lse_row = sum > 0 ? static_cast<float>(mx + std::log(sum)) : -std::numeric_limits<float>::infinity();
}

}  // namespace

void attention_rows(const Problem& p, const float* q, const float* k, const float* v, const int* rows, int nrows,
                    float* out, float* lse) {
  const int64_t items = static_cast<int64_t>(p.b) * p.hq * nrows;
  const int workers = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(items, std::max(1u, std::thread::hardware_concurrency()))));
  // Rows are handed out in small chunks: causal rows differ a lot in cost.
  std::atomic<int64_t> next{0};
  constexpr int64_t kChunk = 4;
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      std::vector<float> s(p.nkv);
      std::vector<double> acc(p.d);
      for (int64_t start = next.fetch_add(kChunk); start < items; start = next.fetch_add(kChunk))
        for (int64_t it = start; it < std::min(items, start + kChunk); ++it) {
          const int bh = static_cast<int>(it / nrows), r = static_cast<int>(it % nrows);
          one_row(p, bh, rows[r], q, k, v, out + (static_cast<int64_t>(bh) * nrows + r) * p.d,
                  lse + static_cast<int64_t>(bh) * nrows + r, s, acc);
        }
    });
  for (auto& t : pool) t.join();
}

void attention(const Problem& p, const float* q, const float* k, const float* v, float* out, float* lse) {
  std::vector<int> rows(p.nq);
  std::iota(rows.begin(), rows.end(), 0);
  attention_rows(p, q, k, v, rows.data(), p.nq, out, lse);
}

}  // namespace ffpa::ref
