// ffpa/lowp/numerics.h against CUDA's own host conversions (cuda_fp8.h, cuda_fp4.h: the
// toolkit's model of the hardware cvt): every byte's decode, and the encode of a dense set
// of floats (every float within 256 ulps of each representable value and each rounding
// midpoint, every 16-bit high pattern with several low patterns, so every exponent,
// subnormals, infinities and NaN payloads, plus a large random sample), for e4m3, e2m1 and
// ue4m3. Then each deliberate breakage of the conversion policy (round toward zero, no
// saturation, NaN flushed to zero) must fail the same comparison.
//   test_lowp_numerics    (plain host C++; exit status 0 when everything matches)
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ffpa/lowp/numerics.h"

namespace {

using ffpa::LowpCvtExact;

// ---- CUDA's conversions --------------------------------------------------------------
uint8_t ref_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
uint8_t ref_e2m1(float x) { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }
// ue4m3 has no toolkit conversion of its own: it is the e4m3 one on the non-negative
// half (NaN included), and 0 below it (numerics.h).
uint8_t ref_ue4m3(float x) {
  if (std::isnan(x)) return ref_e4m3(x);
  return std::signbit(x) ? 0 : ref_e4m3(x);
}
float half_raw_to_float(__half_raw h) { return __half2float(__half(h)); }
float ref_e4m3_decode(uint8_t b) { return half_raw_to_float(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)); }
float ref_e2m1_decode(uint8_t b) { return half_raw_to_float(__nv_cvt_fp4_to_halfraw(b, __NV_E2M1)); }

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// Same bits, or both NaN (NaN payloads and signs are not part of either decode's contract).
bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

// ---- the dense set of floats ---------------------------------------------------------
// Every float within `ulps` of each anchor (and of its negation).
void add_neighbourhood(std::vector<float>& xs, float anchor, int ulps) {
  for (float a : {anchor, -anchor}) {
    float lo = a, hi = a;
    xs.push_back(a);
    for (int i = 0; i < ulps; ++i) {
      lo = std::nextafter(lo, -std::numeric_limits<float>::infinity());
      hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
      xs.push_back(lo);
      xs.push_back(hi);
    }
  }
}

// The anchors of a format: each representable magnitude, each midpoint between
// neighbours, the midpoint above the largest, twice the largest.
std::vector<float> format_samples(float (*decode)(uint8_t), int max_code, uint32_t seed) {
  std::vector<float> xs;
  std::vector<float> values;
  for (int c = 0; c <= max_code; ++c) values.push_back(decode(uint8_t(c)));
  for (size_t i = 0; i < values.size(); ++i) {
    add_neighbourhood(xs, values[i], 256);
    if (i + 1 < values.size()) add_neighbourhood(xs, 0.5f * (values[i] + values[i + 1]), 256);
  }
  const float top = values.back(), step = top - values[values.size() - 2];
  add_neighbourhood(xs, top + 0.5f * step, 256);  // e4m3: 464, the satfinite boundary
  add_neighbourhood(xs, top + step, 64);
  add_neighbourhood(xs, 2.f * top, 64);
  add_neighbourhood(xs, 0.25f * values[1], 64);  // a quarter of the smallest subnormal
  // Specials.
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.f, -0.f, inf, -inf, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()})
    xs.push_back(s);
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu, 0x7fa00000u})
    xs.push_back(from_bits(nan));
  // Every high half-word: every exponent and sign, subnormals, infinities, NaN payloads.
  for (uint32_t h = 0; h < 0x10000u; ++h)
    for (uint32_t l : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) xs.push_back(from_bits((h << 16) | l));
  // Random bit patterns, and random magnitudes spread log-uniformly over the format's
  // range and a little beyond.
  std::mt19937 rng(seed);
  for (int i = 0; i < 2000000; ++i) xs.push_back(from_bits(rng()));
  std::uniform_real_distribution<float> lg(std::log2(values[1]) - 3.f, std::log2(top) + 2.f);
  for (int i = 0; i < 2000000; ++i) {
    const float m = std::exp2(lg(rng));
    xs.push_back(rng() & 1u ? -m : m);
  }
  return xs;
}

// ---- comparisons ---------------------------------------------------------------------
struct Tally {
  size_t checked = 0, mismatches = 0;
};

template <typename Enc, typename Ref>
Tally compare_encode(const char* what, const std::vector<float>& xs, Enc enc, Ref ref, bool verbose) {
  Tally t;
  for (float x : xs) {
    ++t.checked;
    const uint8_t got = enc(x), want = ref(x);
    if (got != want) {
      if (verbose && t.mismatches < 5)
        std::printf("  %s(%a = 0x%08x): 0x%02x, CUDA 0x%02x\n", what, x, bits(x), got, want);
      ++t.mismatches;
    }
  }
  return t;
}

const std::vector<float>& e4m3_samples() {
  static const std::vector<float> xs = format_samples(&ffpa::e4m3_to_float, 0x7e, 1);
  return xs;
}
const std::vector<float>& e2m1_samples() {
  static const std::vector<float> xs = format_samples(&ffpa::e2m1_to_float, 0x7, 2);
  return xs;
}

// The three encoders under one policy against CUDA; returns the mismatches.
template <typename Policy>
size_t encode_mismatches(bool verbose) {
  const Tally a = compare_encode("e4m3", e4m3_samples(), &ffpa::float_to_e4m3_as<Policy>, &ref_e4m3, verbose);
  const Tally b = compare_encode("e2m1", e2m1_samples(), &ffpa::float_to_e2m1_as<Policy>, &ref_e2m1, verbose);
  const Tally c = compare_encode("ue4m3", e4m3_samples(), &ffpa::float_to_ue4m3_as<Policy>, &ref_ue4m3, verbose);
  if (verbose) {
    std::printf("e4m3 encode: %zu floats, %zu mismatches\n", a.checked, a.mismatches);
    std::printf("e2m1 encode: %zu floats, %zu mismatches\n", b.checked, b.mismatches);
    std::printf("ue4m3 encode: %zu floats, %zu mismatches\n", c.checked, c.mismatches);
  }
  return a.mismatches + b.mismatches + c.mismatches;
}

size_t decode_mismatches() {
  size_t bad = 0;
  for (int b = 0; b < 256; ++b) {
    const uint8_t u = uint8_t(b);
    if (!same_float(ffpa::e4m3_to_float(u), ref_e4m3_decode(u))) {
      std::printf("  e4m3 decode 0x%02x: %a, CUDA %a\n", b, ffpa::e4m3_to_float(u), ref_e4m3_decode(u));
      ++bad;
    }
    // ue4m3: bit 7 is not part of the format (numerics.h); the rest decodes as e4m3.
    if (!same_float(ffpa::ue4m3_to_float(u), ref_e4m3_decode(uint8_t(b & 0x7f)))) {
      std::printf("  ue4m3 decode 0x%02x: %a, CUDA %a\n", b, ffpa::ue4m3_to_float(u), ref_e4m3_decode(b & 0x7f));
      ++bad;
    }
    // Every finite e4m3 value converts back to its own byte.
    if ((b & 0x7f) != 0x7f && ffpa::float_to_e4m3(ffpa::e4m3_to_float(u)) != u) {
      std::printf("  e4m3 round trip 0x%02x\n", b);
      ++bad;
    }
  }
  for (int b = 0; b < 16; ++b) {
    const uint8_t u = uint8_t(b);
    if (!same_float(ffpa::e2m1_to_float(u), ref_e2m1_decode(u))) {
      std::printf("  e2m1 decode 0x%x: %a, CUDA %a\n", b, ffpa::e2m1_to_float(u), ref_e2m1_decode(u));
      ++bad;
    }
    if (ffpa::float_to_e2m1(ffpa::e2m1_to_float(u)) != u) {
      std::printf("  e2m1 round trip 0x%x\n", b);
      ++bad;
    }
  }
  std::printf("decode: 256 e4m3, 256 ue4m3, 16 e2m1 codes (and round trips), %zu mismatches\n", bad);
  return bad;
}

// Packing: the pair / octet forms against CUDA's x2 conversions (float2.x is the low
// element there too) and the nibble order of layout.h.
size_t packing_mismatches() {
  size_t bad = 0;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-500.f, 500.f);
  for (int i = 0; i < 200000; ++i) {
    float2 f;
    f.x = u(rng);
    f.y = i % 7 == 0 ? from_bits(0x7fc00000u) : u(rng) * (i % 3 == 0 ? 0.01f : 1.f);
    if (ffpa::cvt_e4m3x2(f.x, f.y) != __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3)) ++bad;
    const float2 g{f.x / 64.f, f.y / 64.f};
    if (ffpa::pack_e2m1x2(ffpa::float_to_e2m1(g.x), ffpa::float_to_e2m1(g.y)) !=
        __nv_cvt_float2_to_fp4x2(g, __NV_E2M1, cudaRoundNearest))
      ++bad;
  }
  const uint8_t codes[8] = {0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8};
  if (ffpa::pack_e2m1x8(codes) != 0x87654321u) ++bad;
  if (ffpa::pack_e4m3x2(0x12, 0x34) != 0x3412u) ++bad;
  std::printf("packing: 200000 e4m3 pairs and e2m1 pairs against CUDA's x2 conversions, %zu mismatches\n", bad);
  return bad;
}

// ---- deliberate breakages ------------------------------------------------------------
struct BreakRz : LowpCvtExact {
  static constexpr bool kRoundNearestEven = false;
};
struct BreakNoSat : LowpCvtExact {
  static constexpr bool kSatFinite = false;
};
struct BreakNanToZero : LowpCvtExact {
  static constexpr bool kNanStaysNan = false;
};

template <typename Policy>
bool caught(const char* name) {
  const size_t n = encode_mismatches<Policy>(false);
  std::printf("[%s] breakage: %s -> %zu mismatches\n", n ? "CAUGHT" : "MISSED", name, n);
  return n != 0;
}

}  // namespace

int main() {
  size_t bad = decode_mismatches();
  bad += encode_mismatches<LowpCvtExact>(true);
  bad += packing_mismatches();
  int missed = 0;
  missed += !caught<BreakRz>("rz rounding");
  missed += !caught<BreakNoSat>("no saturation");
  missed += !caught<BreakNanToZero>("NaN flushed to zero");
  std::printf("3 numerics breakages, %d missed\n", missed);
  std::printf("%s\n", bad == 0 && missed == 0 ? "lowp numerics: all conversions match CUDA's host conversions"
                                              : "lowp numerics: FAILED");
  return bad == 0 && missed == 0 ? 0 : 1;
}
