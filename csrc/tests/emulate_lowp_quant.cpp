// The low-precision quantisation pass (csrc/kernels/ffpa/lowp/quant.cuh) run by the CPU
// emulator, against a host reference written from the rules of ffpa/lowp/layout.h and
// quant.cuh's header with numerics.h's host conversions. Every byte of the workspace is
// compared: q8 / k8 / vt8, the NVFP4 scale factors, every fp32 scale and lse_shift
// exactly, and the alignment gaps between the buffers must stay untouched. k_mean is a
// float sum whose order is the kernel's own: it is held to a double-precision mean
// (1e-5 of the channel's mean |K|: the mean itself may cancel to near 0), and the
// reference of K' and lse_shift then starts from the kernel's k_mean, so that those are
// exact too. Inputs live in buffers fenced by PROT_NONE pages (a read past a view or a
// write past the workspace faults), their padding holds a large value that any read of
// it would carry into a scale. Then each deliberate breakage of the pass
// (LowpQuantExact's policies: no smoothing, no V^T permutation) must be reported.
//   ffpa_emulate_kernels --lowp-quant   (emulate_kernels.cpp's main calls run_lowp_quant_tests)
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "emu_lowp_quant.h"
#include "emu_params.h"
#include "emu_state.h"
#include "ffpa/lowp/quant.cuh"

int run_lowp_quant_tests();

namespace {

using ffpa::LowpLayout;
using ffpa::LowpQK;

using emu_lowp::NoSmoothing;
using emu_lowp::NoVtPermutation;

// `bytes` (a multiple of 16) ending exactly at a PROT_NONE page, with another one before
// the first page: an access outside [data, data + bytes) beyond the alignment slack faults.
class Fenced {
 public:
  explicit Fenced(size_t bytes) : bytes_(bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    pages_ = (bytes + page - 1) / page * page + 2 * page;
    void* m = mmap(nullptr, pages_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) std::abort();
    base_ = static_cast<unsigned char*>(m);
    mprotect(base_, page, PROT_NONE);
    mprotect(base_ + pages_ - page, page, PROT_NONE);
    data_ = base_ + pages_ - page - bytes;
  }
  ~Fenced() { munmap(base_, pages_); }
  Fenced(const Fenced&) = delete;
  Fenced& operator=(const Fenced&) = delete;
  unsigned char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  unsigned char *base_ = nullptr, *data_ = nullptr;
  size_t bytes_ = 0, pages_ = 0;
};

struct QuantCase {
  const char* name;
  bool bf16;
  LowpQK qk;
  int d, b, hq, hkv, nq, nkv, block_m, block_n;
  bool bnhd;  // storage [B, N, H, D] (a transposed view) rather than [B, H, N, D]
  int pad;    // elements of slack after each row (BHND) or each head (BNHD); a multiple of 8
};

// A [B, H, N, D] view into fenced storage; slack elements hold kSlack.
template <typename T>
struct View {
  int64_t sb = 0, sh = 0, sn = 0;
  std::unique_ptr<Fenced> mem;
  T* ptr() const { return reinterpret_cast<T*>(mem->data()); }
  float at(int b, int h, int n, int c) const {
    return ffpa::ElemTraits<T>::to_float(ptr()[b * sb + h * sh + n * sn + c]);
  }
};

template <typename T>
View<T> make_view(const QuantCase& c, int heads, int n, const std::function<float(int, int, int, int)>& value) {
  View<T> v;
  const int64_t inner = c.d + c.pad;
  if (c.bnhd) {
    v.sh = inner, v.sn = int64_t(heads) * inner, v.sb = int64_t(n) * v.sn;
  } else {
    v.sn = inner, v.sh = int64_t(n) * inner, v.sb = int64_t(heads) * v.sh;
  }
  const size_t elems = size_t(c.b) * v.sb;
  v.mem = std::make_unique<Fenced>(elems * sizeof(T));
  T* p = v.ptr();
  const T slack = ffpa::ElemTraits<T>::from_float(30000.f);
  for (size_t i = 0; i < elems; ++i) p[i] = slack;
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < heads; ++h)
      for (int r = 0; r < n; ++r)
        for (int x = 0; x < c.d; ++x)
          p[b * v.sb + h * v.sh + r * v.sn + x] = ffpa::ElemTraits<T>::from_float(value(b, h, r, x));
  return v;
}

float scale_ref(float amax, float denom) {
  if (amax == 0.f) return 1.f;
  const float s = amax / denom;
  return s < 0x1p-126f ? 0x1p-126f : s;
}

void put_f32(std::vector<unsigned char>& img, size_t at, float v) { std::memcpy(img.data() + at, &v, 4); }
float get_f32(const unsigned char* ws, size_t at) {
  float v;
  std::memcpy(&v, ws + at, 4);
  return v;
}

// The expected workspace for Q and K (given the kernel's k_mean) in `img`.
template <typename T>
void reference_rows(const LowpLayout& l, const View<T>& x_view, bool is_q, const float* kmean, float scale,
                    std::vector<unsigned char>& img) {
  const int heads = is_q ? l.hq : l.hkv, n = is_q ? l.nq : l.nkv, block = is_q ? l.block_m : l.block_n;
  const int64_t nblocks = is_q ? l.nq_blocks : l.nkv_blocks;
  const bool fp8 = l.qk == LowpQK::kFp8;
  const int d = l.d;
  std::vector<float> x(size_t(block) * d);
  for (int b = 0; b < l.b; ++b)
    for (int h = 0; h < heads; ++h) {
      const int kvh = is_q ? h / (l.hq / l.hkv) : h;
      const float* m = kmean + (int64_t(b) * l.hkv + kvh) * d;
      for (int64_t blk = 0; blk < nblocks; ++blk) {
        const int row0 = int(blk) * block, rows = std::min(block, n - row0);
        float amax = 0.f;
        for (int r = 0; r < rows; ++r)
          for (int col = 0; col < d; ++col) {
            const float v = x_view.at(b, h, row0 + r, col);
            x[size_t(r) * d + col] = is_q ? v : v - m[col];
            amax = std::max(amax, std::fabs(x[size_t(r) * d + col]));
          }
        const float s = scale_ref(amax, fp8 ? 448.f : 6.f * 448.f), inv = 1.f / s;
        put_f32(img, (is_q ? l.q_scale : l.k_scale) + 4 * size_t((int64_t(b) * heads + h) * nblocks + blk), s);
        for (int r = 0; r < rows; ++r) {
          const int64_t row = (int64_t(b) * heads + h) * n + row0 + r;
          const float* xr = &x[size_t(r) * d];
          unsigned char* codes = img.data() + (is_q ? l.q8 : l.k8) + row * l.qk_row_bytes;
          if (fp8) {
            for (int col = 0; col < d; ++col) codes[col] = ffpa::float_to_e4m3(xr[col] * inv);
          } else {
            for (int c16 = 0; c16 < d / 16; ++c16) {
              float a16 = 0.f;
              for (int e = 0; e < 16; ++e) a16 = std::max(a16, std::fabs(xr[16 * c16 + e]));
              uint8_t sf = ffpa::float_to_ue4m3((a16 / 6.f) / s);
              if (sf == 0) sf = 0x38;
              img[(is_q ? l.q_sf : l.k_sf) + row * (d / 16) + c16] = sf;
              const float inv_sf = 1.f / ffpa::ue4m3_to_float(sf);
              for (int e = 0; e < 16; e += 2) {
                const uint8_t lo = ffpa::float_to_e2m1(xr[16 * c16 + e] * inv * inv_sf);
                const uint8_t hi = ffpa::float_to_e2m1(xr[16 * c16 + e + 1] * inv * inv_sf);
                codes[(16 * c16 + e) / 2] = uint8_t(lo | (hi << 4));
              }
            }
          }
          if (is_q) {
            // scale * q . mean, summed as the kernel does: 8 lanes of 8-column pieces per
            // 64 columns, each an fma chain, then a butterfly over the lanes.
            float part[8];
            for (int lane = 0; lane < 8; ++lane) {
              float acc = 0.f;
              for (int ch = 0; ch < d / 64; ++ch)
                for (int e = 0; e < 8; ++e) acc = std::fmaf(xr[64 * ch + 8 * lane + e], m[64 * ch + 8 * lane + e], acc);
              part[lane] = acc;
            }
            const float dot = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
            put_f32(img, l.lse_shift + 4 * size_t(row), scale * dot);
          }
        }
      }
    }
}

template <typename T>
void reference_v(const LowpLayout& l, const View<T>& v, std::vector<unsigned char>& img) {
  std::vector<float> vs(l.d);
  for (int b = 0; b < l.b; ++b)
    for (int h = 0; h < l.hkv; ++h) {
      const int64_t bh = int64_t(b) * l.hkv + h;
      for (int col = 0; col < l.d; ++col) {
        float amax = 0.f;
        for (int j = 0; j < l.nkv; ++j) amax = std::max(amax, std::fabs(v.at(b, h, j, col)));
        vs[col] = scale_ref(amax, 448.f);
        put_f32(img, l.v_scale + 4 * size_t(bh * l.d + col), vs[col]);
        unsigned char* row = img.data() + l.vt8 + (bh * l.d + col) * l.nkv_pad;
        for (int64_t j = 0; j < l.nkv_pad; ++j) {
          const int64_t at = j / ffpa::kVtGroup * ffpa::kVtGroup + ffpa::vt_column(int(j % ffpa::kVtGroup));
          row[at] = j < l.nkv ? ffpa::float_to_e4m3(v.at(b, h, int(j), col) * (1.f / vs[col])) : 0;
        }
      }
    }
}

struct Region {
  const char* name;
  size_t at, bytes;
};

std::vector<Region> regions(const LowpLayout& l) {
  const size_t q_rows = size_t(l.b) * l.hq * l.nq, k_rows = size_t(l.b) * l.hkv * l.nkv;
  const size_t bhkv = size_t(l.b) * l.hkv;
  std::vector<Region> r = {{"q8", l.q8, q_rows * l.qk_row_bytes},
                           {"k8", l.k8, k_rows * l.qk_row_bytes},
                           {"vt8", l.vt8, bhkv * l.d * l.nkv_pad},
                           {"q_scale", l.q_scale, size_t(l.b) * l.hq * l.nq_blocks * 4},
                           {"k_scale", l.k_scale, bhkv * l.nkv_blocks * 4},
                           {"v_scale", l.v_scale, bhkv * l.d * 4},
                           {"k_mean", l.k_mean, bhkv * l.d * 4},
                           {"lse_shift", l.lse_shift, q_rows * 4}};
  if (l.qk == LowpQK::kNvfp4) {
    r.push_back({"q_sf", l.q_sf, q_rows * (l.d / 16)});
    r.push_back({"k_sf", l.k_sf, k_rows * (l.d / 16)});
  }
  return r;
}

struct Outcome {
  bool k_mean_ok = false;
  size_t mismatches = 0;
};

template <typename T, typename Variant>
Outcome run_quant(const QuantCase& c, bool report) {
  std::mt19937 rng(1234 + c.d + 7 * c.nq + c.nkv);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(-3.f, 3.f);
  const bool tiny_head = c.bf16;  // a bf16 head so small that its scales sit at the FLT_MIN floor
  std::vector<float> k_offset(c.d);
  for (float& o : k_offset) o = ud(rng);
  auto q_value = [&](int b, int h, int r, int x) {
    if (b == 0 && h == 0 && r < c.block_m) return 0.f;                              // a zero block: scale 1
    if (b == 0 && h == c.hq - 1 && r == c.nq - 1 && x >= 16 && x < 32) return 0.f;  // a zero 16-column block
    float v = nd(rng) * (r % 7 == 3 ? 8.f : 1.f);
    if (tiny_head && b == c.b - 1 && h == c.hq - 1) v *= 1e-37f;
    return v;
  };
  // K: per-channel offsets (what the smoothing removes) and outlier channels.
  auto k_value = [&](int, int, int, int x) { return nd(rng) * (x % 17 == 3 ? 20.f : 1.f) + k_offset[x]; };
  auto v_value = [&](int b, int h, int, int x) {
    if (b == 0 && h == 0 && x == 7) return 0.f;  // an all-zero channel: v_scale 1
    return nd(rng) * (x % 13 == 5 ? 10.f : 1.f);
  };
  const View<T> q = make_view<T>(c, c.hq, c.nq, q_value);
  const View<T> k = make_view<T>(c, c.hkv, c.nkv, k_value);
  const View<T> v = make_view<T>(c, c.hkv, c.nkv, v_value);

  const LowpLayout l = ffpa::lowp_layout(c.qk, c.b, c.hq, c.hkv, c.nq, c.nkv, c.d, c.block_m, c.block_n);
  Fenced ws(l.bytes);
  std::memset(ws.data(), 0xff, l.bytes);  // NaN as fp32 and e4m3
  // The C API's arguments of the views (the pass reads q, k and v only), made into the
  // kernels' parameters by the library's make_fwd_params (emu_params.h).
  const ffpa::DType dt = c.bf16 ? ffpa::DType::kBf16 : ffpa::DType::kFp16;
  auto desc = [&](const View<T>& x, int heads, int n) {
    ffpa::TensorDesc t = emu::dense(x.ptr(), dt, c.b, heads, n, c.d);
    t.stride[0] = x.sb, t.stride[1] = x.sh, t.stride[2] = x.sn;
    return t;
  };
  ffpa::ForwardArgs a;
  a.q = desc(q, c.hq, c.nq), a.k = desc(k, c.hkv, c.nkv), a.v = desc(v, c.hkv, c.nkv);
  a.scale = 1.f / std::sqrt(float(c.d));
  const ffpa::FwdParams p = ffpa::detail::make_fwd_params(a);
  emu_lowp::quantize<T, Variant>(p, l, ws.data());

  // k_mean against a double-precision mean.
  Outcome out;
  const unsigned char* got = ws.data();
  std::vector<float> kmean(size_t(c.b) * c.hkv * c.d);
  double worst = 0.;
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < c.hkv; ++h)
      for (int x = 0; x < c.d; ++x) {
        double sum = 0., sum_abs = 0.;
        for (int j = 0; j < c.nkv; ++j) sum += k.at(b, h, j, x), sum_abs += std::fabs(k.at(b, h, j, x));
        const size_t i = (size_t(b) * c.hkv + h) * c.d + x;
        kmean[i] = get_f32(got, l.k_mean + 4 * i);
        const double err = std::fabs(double(kmean[i]) - sum / c.nkv) / std::max(sum_abs / c.nkv, 1e-30);
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
      }
  out.k_mean_ok = worst <= 1e-5;

  std::vector<unsigned char> img(l.bytes, 0xff);
  std::memcpy(img.data() + l.k_mean, got + l.k_mean, kmean.size() * 4);
  reference_rows(l, q, true, kmean.data(), p.scale, img);
  reference_rows(l, k, false, kmean.data(), p.scale, img);
  reference_v(l, v, img);

  const std::vector<Region> rs = regions(l);
  std::map<std::string, size_t> bad;
  for (size_t i = 0; i < l.bytes; ++i) {
    if (got[i] == img[i]) continue;
    const char* where = "gap between buffers";
    size_t off = i;
    for (const Region& r : rs)
      if (i >= r.at && i < r.at + r.bytes) where = r.name, off = i - r.at;
    if (report && bad[where] < 3)
      std::printf("  %s byte %zu: 0x%02x, expected 0x%02x\n", where, off, unsigned(got[i]), unsigned(img[i]));
    ++bad[where];
    ++out.mismatches;
  }
  if (report) {
    const bool ok = out.k_mean_ok && out.mismatches == 0;
    std::string detail;
    for (const auto& [name, n] : bad) detail += " " + name + "=" + std::to_string(n);
    std::printf(
        "[%s] %s: %s %s D=%d B=%d Hq=%d Hkv=%d Nq=%d Nkv=%d tiles %dx%d %s pad %d: %zu bytes, %zu mismatched%s, "
        "k_mean rel err %.2e\n",
        ok ? "PASS" : "FAIL", c.name, c.bf16 ? "bf16" : "fp16", c.qk == LowpQK::kFp8 ? "fp8" : "nvfp4", c.d, c.b, c.hq,
        c.hkv, c.nq, c.nkv, c.block_m, c.block_n, c.bnhd ? "BNHD" : "BHND", c.pad, size_t(l.bytes), out.mismatches,
        detail.c_str(), worst);
    std::fflush(stdout);
  }
  return out;
}

template <typename Variant>
Outcome run_variant(const QuantCase& c, bool report) {
  return c.bf16 ? run_quant<__nv_bfloat16, Variant>(c, report) : run_quant<__half, Variant>(c, report);
}

}  // namespace

// GQA and MHA, Nq / Nkv off the tiles, batch 2, BHND with padded rows and BNHD views,
// fp16 and bf16, D = 64 and 320 (several 64-column chunks and 64-channel V^T tiles) and
// 128 / 192 / 512, both Q K^T precisions, tiles of 16 to 128 rows, a 1000-token K / V (the
// statistics' slots sum many rows); then the breakages.
int run_lowp_quant_tests() {
  const QuantCase cases[] = {
      {"gqa", false, LowpQK::kFp8, 64, 2, 4, 2, 83, 141, 64, 64, false, 8},
      {"gqa-view", true, LowpQK::kNvfp4, 64, 2, 4, 1, 70, 100, 128, 64, true, 0},
      {"d320", false, LowpQK::kNvfp4, 320, 1, 2, 1, 37, 65, 64, 128, false, 0},
      {"d320-view", true, LowpQK::kFp8, 320, 2, 2, 2, 50, 97, 128, 64, true, 16},
      {"aligned", false, LowpQK::kNvfp4, 64, 1, 2, 2, 64, 128, 64, 64, false, 0},
      {"small-tiles", true, LowpQK::kFp8, 64, 1, 3, 1, 45, 33, 16, 32, false, 8},
      {"long-kv", false, LowpQK::kNvfp4, 128, 1, 8, 2, 100, 1000, 128, 64, true, 8},
      {"d192", true, LowpQK::kFp8, 192, 1, 2, 1, 40, 300, 64, 128, false, 0},
      {"d512", false, LowpQK::kFp8, 512, 1, 1, 1, 33, 70, 64, 64, false, 0},
  };
  int failed = 0;
  for (const QuantCase& c : cases) {
    const Outcome o = run_variant<ffpa::LowpQuantExact>(c, true);
    if (!o.k_mean_ok || o.mismatches != 0) ++failed;
  }
  const int cases_verdict = emu::verdict("lowp quant cases", long(sizeof(cases) / sizeof(cases[0])), failed, "failed");

  // Breakages: each runs the first case and must come back with mismatched bytes.
  struct Breakage {
    const char* name;
    Outcome (*run)(const QuantCase&, bool);
    bool want_pass;
  };
  const Breakage breaks[] = {
      {"none (control)", &run_variant<ffpa::LowpQuantExact>, true},
      {"K quantised without its mean subtracted (no smoothing)", &run_variant<NoSmoothing>, false},
      {"V^T stored without the vt_column permutation", &run_variant<NoVtPermutation>, false},
  };
  int missed = 0;
  for (const Breakage& br : breaks) {
    const Outcome o = br.run(cases[0], false);
    const bool passed = o.k_mean_ok && o.mismatches == 0;
    const bool ok = passed == br.want_pass;
    std::printf("[%s] breakage: %s -> %zu mismatched bytes\n", ok ? (br.want_pass ? "PASS" : "CAUGHT") : "MISSED",
                br.name, o.mismatches);
    if (!ok) ++missed;
  }
  return emu::verdict("lowp quant breakages", long(sizeof(breaks) / sizeof(breaks[0]) - 1), missed, "missed", false) |
         cases_verdict;
}
