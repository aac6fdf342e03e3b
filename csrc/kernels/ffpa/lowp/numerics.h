// The low-precision paths' number formats: float <-> e4m3 (OCP FP8 E4M3FN), e2m1 (the
// NVFP4 value) and ue4m3 (the NVFP4 block scale), and their packing, as ffpa/lowp/layout.h
// stores them. Host and device: the quantisation pass (lowp/quant.cuh) runs these on the
// GPU, the CPU emulator runs the same source through a host compiler, and the tests
// (csrc/tests/test_lowp_numerics.cpp) hold every conversion to CUDA's own host
// conversions in cuda_fp8.h / cuda_fp4.h, which are NVIDIA's reference of the hardware cvt.
//
// The formats (all round to nearest even, all saturate finite overflow, "satfinite"):
//   e4m3   sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, 0x7f / 0xff are
//          NaN, so the largest finite is 0x7e = 448. NaN converts to 0x7f (the canonical
//          NaN, sign dropped, as cvt.rn.satfinite.e4m3x2.f32 and __nv_cvt_float_to_fp8 do);
//          +-inf saturates to +-448 like any finite overflow.
//   e2m1   sign, 2 exponent bits (bias 1), 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6. The
//          format has no NaN and no infinity: NaN converts to +6 (0x7), which is what
//          CUDA's host conversion __nv_cvt_float_to_fp4 does as its model of
//          cvt.rn.satfinite.e2m1x2.f32 (satfinite gives a format without NaN its MAX_NORM).
//   ue4m3  e4m3 without the sign: 0 .. 448 (0x00 .. 0x7e), 0x7f NaN. Negative inputs
//          clamp to 0 (the format's lower end; the pass only converts non-negative
//          ratios); bit 7 is never written and is ignored when decoding.
// The encoders are templates on a policy (LowpCvtExact); the tests instantiate deliberate
// breakages of it (round toward zero, no saturation, NaN flushed to zero) and require the
// comparison with CUDA's conversions to fail for each.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FFPA_LOWP_HD __host__ __device__ __forceinline__
#else
#define FFPA_LOWP_HD inline
#endif

namespace ffpa {

// The real conversions: what the hardware's cvt.rn.satfinite does.
struct LowpCvtExact {
  static constexpr bool kRoundNearestEven = true;  // false: truncate (round toward zero)
  static constexpr bool kSatFinite = true;         // false: overflow becomes NaN (e4m3) or wraps (e2m1)
  static constexpr bool kNanStaysNan = true;       // false: NaN becomes +0
};

FFPA_LOWP_HD uint32_t lowp_float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
FFPA_LOWP_HD float lowp_bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// IEEE round-to-nearest division on both sides (the device's `/` follows -prec-div, so the
// pass names the rounded one: the host reference must produce the same bits).
FFPA_LOWP_HD float lowp_div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// |x| (as float bits, NaN excluded) to the magnitude code of a minifloat with kExpBits /
// kManBits and bias kBias whose largest finite code is kMaxCode. Returns kMaxCode + 1 or
// more on overflow (the caller saturates or not).
template <int kExpBits, int kManBits, int kBias, typename Policy>
FFPA_LOWP_HD uint32_t lowp_encode_magnitude(uint32_t abs_bits) {
  static_assert(kExpBits + kManBits <= 7, "a minifloat of at most 8 bits");
  constexpr int kEmin = 1 - kBias;       // exponent of the smallest normal
  const int fexp = int(abs_bits >> 23);  // biased float exponent; 0 for zero and subnormals
  const uint32_t fman = abs_bits & 0x7fffffu;
  // The significand with its leading bit, and the unbiased exponent of its bit 23.
  const uint32_t sig = fexp == 0 ? fman : (fman | 0x800000u);
  const int e = fexp == 0 ? -126 : fexp - 127;
  if (e > 30) return 0xffu;  // beyond any minifloat (and +inf): overflow
  // Bits of sig below the kept ones: normals keep kManBits below the leading bit;
  // subnormals of the target keep fewer, shifted by how far e lies below kEmin.
  const int shift = 23 - kManBits + (e < kEmin ? kEmin - e : 0);
  if (shift >= 25) return 0;  // below half the smallest subnormal (ties there are even: 0)
  uint32_t code;
  if (e >= kEmin) {
    code = (uint32_t(e + kBias) << kManBits) | ((sig >> shift) & ((1u << kManBits) - 1u));
  } else {
    code = sig >> shift;  // subnormal of the target: exponent field 0
  }
  if (Policy::kRoundNearestEven) {
    const uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (code & 1u))) ++code;  // a carry into the exponent is right
  }
  return code;
}

template <typename Policy>
FFPA_LOWP_HD uint8_t float_to_e4m3_as(float x) {
  const uint32_t u = lowp_float_bits(x), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return Policy::kNanStaysNan ? 0x7f : 0x00;
  uint32_t code = lowp_encode_magnitude<4, 3, 7, Policy>(a);
  if (code > 0x7eu) code = Policy::kSatFinite ? 0x7eu : 0x7fu;
  return uint8_t(sign | code);
}

template <typename Policy>
FFPA_LOWP_HD uint8_t float_to_e2m1_as(float x) {
  const uint32_t u = lowp_float_bits(x), a = u & 0x7fffffffu, sign = (u >> 28) & 0x8u;
  if (a > 0x7f800000u) return Policy::kNanStaysNan ? 0x7 : 0x0;
  uint32_t code = lowp_encode_magnitude<2, 1, 1, Policy>(a);
  if (code > 0x7u) code = Policy::kSatFinite ? 0x7u : (code & 0x7u);
  return uint8_t(sign | code);
}

template <typename Policy>
FFPA_LOWP_HD uint8_t float_to_ue4m3_as(float x) {
  const uint32_t u = lowp_float_bits(x), a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return Policy::kNanStaysNan ? 0x7f : 0x00;
  if (u >> 31) return 0;  // negative (and -0): the unsigned format's lower end
  uint32_t code = lowp_encode_magnitude<4, 3, 7, Policy>(a);
  if (code > 0x7eu) code = Policy::kSatFinite ? 0x7eu : 0x7fu;
  return uint8_t(code);
}

FFPA_LOWP_HD uint8_t float_to_e4m3(float x) { return float_to_e4m3_as<LowpCvtExact>(x); }
FFPA_LOWP_HD uint8_t float_to_e2m1(float x) { return float_to_e2m1_as<LowpCvtExact>(x); }
FFPA_LOWP_HD uint8_t float_to_ue4m3(float x) { return float_to_ue4m3_as<LowpCvtExact>(x); }

FFPA_LOWP_HD float e4m3_to_float(uint8_t b) {
  const uint32_t mag = b & 0x7fu, sign = uint32_t(b & 0x80u) << 24;
  if (mag == 0x7fu) return lowp_bits_float(0x7fc00000u);
  const uint32_t exp = mag >> 3, man = mag & 7u;
  // Subnormals are man * 2^-9, exact in float; normals re-bias 7 -> 127.
  const float m = exp == 0 ? float(man) * 0x1p-9f : lowp_bits_float(((exp + 120u) << 23) | (man << 20));
  return lowp_bits_float(lowp_float_bits(m) | sign);
}

FFPA_LOWP_HD float ue4m3_to_float(uint8_t b) { return e4m3_to_float(uint8_t(b & 0x7fu)); }

FFPA_LOWP_HD float e2m1_to_float(uint8_t code) {
  const uint32_t mag = code & 0x7u;
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6: (2 + man) * 2^(exp - 2) for exp > 0, man * 0.5 below.
  const uint32_t exp = mag >> 1, man = mag & 1u;
  const float m = exp == 0 ? 0.5f * float(man) : float((2u + man) << exp) * 0.25f;
  return (code & 0x8u) ? -m : m;
}

// Packing as ffpa/lowp/layout.h stores the operands: the lower-index element in the low
// byte / nibble.
FFPA_LOWP_HD uint16_t pack_e4m3x2(uint8_t lo, uint8_t hi) { return uint16_t(lo | (uint32_t(hi) << 8)); }
FFPA_LOWP_HD uint8_t pack_e2m1x2(uint8_t lo, uint8_t hi) { return uint8_t((lo & 0xfu) | ((hi & 0xfu) << 4)); }
FFPA_LOWP_HD uint32_t pack_e2m1x8(const uint8_t (&codes)[8]) {
  uint32_t w = 0;
  for (int i = 0; i < 8; ++i) w |= uint32_t(codes[i] & 0xfu) << (4 * i);
  return w;
}

// Two floats to two packed e4m3 (lo in the low byte): the pass's hot conversion. On sm_89+
// one cvt; PTX puts its FIRST source in the UPPER byte, hence (hi, lo). The tests check
// the software path; the PTX form's equivalence is the ISA's rounding contract, which
// the software path reproduces bit for bit (test_lowp_numerics.cpp).
FFPA_LOWP_HD uint16_t cvt_e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return pack_e4m3x2(float_to_e4m3(lo), float_to_e4m3(hi));
#endif
}

}  // namespace ffpa
