// CPU emulation of csrc/kernels/ffpa/utils.cuh for emulate_kernels.cpp: the same
// interface, with every PTX instruction replaced by a model of its documented
// semantics, run by one fiber per CUDA thread (warp-collective instructions meet at
// a per-warp barrier). Found before the real header through the include order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>

// The real host-side fp16/bf16 types: CUTLASS's headers (the CuTe kernel) include
// them too, so the emulator uses them rather than stand-ins; every conversion the
// kernels make still goes through ElemTraits below (the model). Included first: their
// headers define CUDA's keywords for the host, which the emulator then replaces.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __align__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __align__(n)
#define __launch_bounds__(...)
#define __trap() ::emu::fail("__trap(): a stub kernel body ran")

namespace emu {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
extern Dim3 g_block_idx, g_grid_dim;
const Dim3& thread_idx();
void syncthreads();
void warp_sync();
int lane();
// Per-warp exchange slots for the collective instructions.
struct WarpSlots {
  uintptr_t addr[32];
  uint32_t a[32][4];
  uint32_t b[32][2];
  float f[32];
};
WarpSlots& warp_slots();
// Shared memory of the running block and its size; global ranges cp.async may read.
extern unsigned char* g_smem;
extern size_t g_smem_bytes;
bool global_readable(const void* p, size_t n);
// Fails when [p, p + n) overlaps a TMA copy still in flight (emu_grid.cpp).
void check_no_tma_in_flight(const void* p, size_t n);
// cp.async model, per thread.
void cp_async(void* dst, const void* src, int src_size);
void cp_commit();
void cp_wait(int pending);
[[noreturn]] void fail(const char* what);
}  // namespace emu

#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::g_block_idx)
#define gridDim (::emu::g_grid_dim)
#define __syncthreads() ::emu::syncthreads()

namespace ffpa {

using std::min;
using std::max;

// The kernel's dynamic shared memory: `extern __shared__ ... smem_raw[]` inside the
// kernel declares this namespace-scope array.
alignas(1024) extern unsigned char smem_raw[];

// fp16 to float through a table of every bit pattern, filled once by the compiler's own
// conversion (the same values): without F16C in the target the conversion is a library
// call, and the emulated mma and ldmatrix make billions of them.
inline float half_to_float_exact(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
inline const float* half_table() {
  static const float* const table = [] {
    auto* t = new float[65536];
    for (uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float_exact(static_cast<uint16_t>(i));
    return t;
  }();
  return table;
}
inline float half_to_float(uint16_t b) { return half_table()[b]; }
inline uint16_t float_to_half(float x) {
  _Float16 h = static_cast<_Float16>(x);  // round to nearest even
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isnan(x)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The bits of a 16-bit element, and an element from bits (no conversion).
template <typename T>
inline uint16_t bits_of(T x) {
  uint16_t b;
  std::memcpy(&b, &x, 2);
  return b;
}
template <typename T>
inline T from_bits(uint16_t b) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  T x;
  std::memcpy(&x, &b, 2);
  return x;
}

template <typename T>
struct ElemTraits;

template <>
struct ElemTraits<__half> {
  static float to_float(__half x) { return half_to_float(bits_of(x)); }
  static uint32_t pack(float lo, float hi) { return float_to_half(lo) | (uint32_t(float_to_half(hi)) << 16); }
  static __half from_float(float x) { return from_bits<__half>(float_to_half(x)); }
};

template <>
struct ElemTraits<__nv_bfloat16> {
  static float to_float(__nv_bfloat16 x) { return bf16_to_float(bits_of(x)); }
  static uint32_t pack(float lo, float hi) { return float_to_bf16(lo) | (uint32_t(float_to_bf16(hi)) << 16); }
  static __nv_bfloat16 from_float(float x) { return from_bits<__nv_bfloat16>(float_to_bf16(x)); }
};

inline void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  emu::cp_async(smem_dst, gmem_src, valid ? 16 : 0);
}
inline void cp_async_commit() { emu::cp_commit(); }
template <int kPending>
inline void cp_async_wait() {
  emu::cp_wait(kPending);
}

inline const uint16_t* smem_b16(uintptr_t a) {
  const auto* p = reinterpret_cast<const unsigned char*>(a);
  if (p < emu::g_smem || p + 16 > emu::g_smem + emu::g_smem_bytes) emu::fail("ldmatrix address outside shared memory");
  if (a % 16 != 0) emu::fail("ldmatrix row address not 16-byte aligned");
  emu::check_no_tma_in_flight(p, 16);
  return reinterpret_cast<const uint16_t*>(p);
}

// ldmatrix.m8n8.x4[.trans].b16: lanes 8i..8i+7 give the 8 row addresses of matrix i;
// without .trans lane l receives row l/4, columns 2(l%4), 2(l%4)+1 of each matrix;
// with .trans it receives rows 2(l%4), 2(l%4)+1 of column l/4.
inline void ldmatrix_impl(uint32_t (&r)[4], const void* smem_row, bool trans) {
  emu::WarpSlots& w = emu::warp_slots();
  const int l = emu::lane();
  w.addr[l] = reinterpret_cast<uintptr_t>(smem_row);
  emu::warp_sync();
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (!trans) {
      const uint16_t* row = smem_b16(w.addr[8 * i + l / 4]);
      lo = row[2 * (l % 4)];
      hi = row[2 * (l % 4) + 1];
    } else {
      lo = smem_b16(w.addr[8 * i + 2 * (l % 4)])[l / 4];
      hi = smem_b16(w.addr[8 * i + 2 * (l % 4) + 1])[l / 4];
    }
    r[i] = lo | (uint32_t(hi) << 16);
  }
  emu::warp_sync();
}
inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) { ldmatrix_impl(r, smem_row, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) { ldmatrix_impl(r, smem_row, true); }

// mma.m16n8k16.row.col f32 += T x T, from the PTX fragment layouts (g = l/4, t = l%4):
// A a0 (g, 2t..) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..); B b0 (k 2t.., n g)
// b1 (k 2t+8.., n g); C c0,c1 (g, 2t..) c2,c3 (g+8, 2t..).
template <typename T>
struct Mma16816 {
  static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu::WarpSlots& w = emu::warp_slots();
    const int l = emu::lane();
    for (int i = 0; i < 4; ++i) w.a[l][i] = a[i];
    w.b[l][0] = b0;
    w.b[l][1] = b1;
    emu::warp_sync();
    // Lane l's results need rows g and g + 8 of A (from lanes 4g..4g+3) and columns 2t and
    // 2t + 1 of B (from lanes 8t..8t+7): only those are unpacked.
    const int g = l / 4, t = l % 4;
    float A[2][16], B[2][16];  // A[r]: row g + 8r; B[c]: column 2t + c; both indexed by k
    auto el = [](uint32_t reg, int h) { return ElemTraits<T>::to_float(from_bits<T>(uint16_t(h ? reg >> 16 : reg & 0xffff))); };
    for (int q = 0; q < 4; ++q) {
      const uint32_t* ra = w.a[4 * g + q];
      for (int h = 0; h < 2; ++h) {
        A[0][2 * q + h] = el(ra[0], h);
        A[1][2 * q + h] = el(ra[1], h);
        A[0][2 * q + 8 + h] = el(ra[2], h);
        A[1][2 * q + 8 + h] = el(ra[3], h);
        for (int c = 0; c < 2; ++c) {
          const uint32_t* rb = w.b[4 * (2 * t + c) + q];
          B[c][2 * q + h] = el(rb[0], h);
          B[c][2 * q + 8 + h] = el(rb[1], h);
        }
      }
    }
    emu::warp_sync();
    for (int e = 0; e < 4; ++e) {
      const float* a_row = A[e >> 1];
      const float* b_col = B[e & 1];
      float s = d[e];
      for (int k = 0; k < 16; ++k) s += a_row[k] * b_col[k];
      d[e] = s;
    }
  }
};

// mma.m16n8k16.row.col.f16.f16.f16.f16: the same products, the sum rounded to fp16
// once per instruction (the hardware keeps more precision inside one mma and rounds
// the result; the C input is the previous fp16 value). d[0] = (g, 2t..2t+1) and
// d[1] = (g+8, 2t..2t+1) as half2.
struct Mma16816F16Acc {
  static void run(uint32_t (&d)[2], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    float c[4] = {half_to_float(uint16_t(d[0] & 0xffff)), half_to_float(uint16_t(d[0] >> 16)),
                  half_to_float(uint16_t(d[1] & 0xffff)), half_to_float(uint16_t(d[1] >> 16))};
    Mma16816<__half>::run(c, a, b0, b1);
    d[0] = float_to_half(c[0]) | (uint32_t(float_to_half(c[1])) << 16);
    d[1] = float_to_half(c[2]) | (uint32_t(float_to_half(c[3])) << 16);
  }
};

inline void unpack_half2(uint32_t r, float& lo, float& hi) {
  lo = half_to_float(uint16_t(r & 0xffff));
  hi = half_to_float(uint16_t(r >> 16));
}

inline float fast_exp2(float x) { return std::exp2(x); }

inline float shfl_xor(float x, int m) {
  emu::WarpSlots& w = emu::warp_slots();
  const int l = emu::lane();
  w.f[l] = x;
  emu::warp_sync();
  const float y = w.f[l ^ m];
  emu::warp_sync();
  return y;
}

inline float quad_max(float x) {
  x = fmaxf(x, shfl_xor(x, 1));
  return fmaxf(x, shfl_xor(x, 2));
}
inline float quad_sum(float x) {
  x += shfl_xor(x, 1);
  return x + shfl_xor(x, 2);
}

}  // namespace ffpa

inline float __shfl_xor_sync(unsigned, float x, int m) { return ffpa::shfl_xor(x, m); }
