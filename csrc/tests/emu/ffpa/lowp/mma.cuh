// CPU emulation of csrc/kernels/ffpa/lowp/mma.cuh (found first in the emulator's include
// order): the FP8 and the block-scaled NVFP4 mma modelled from the PTX ISA's fragment
// layouts, the element codes decoded by ffpa/lowp/numerics.h (the conversions its tests hold
// to CUDA's own), the products summed in fp32 like the hardware's fp32 accumulation. The
// scale registers are read only from the lanes the PTX ISA names (thread-id and byte-id
// selectors 0: A row g from lane 4g, row g + 8 from lane 4g + 1, B column g from lane
// 4g), so a kernel that puts a row's scales in another lane, or packs them in another
// order, gets wrong results here, as it would on the GPU.
#pragma once

#include <cstdint>

#include "ffpa/lowp/numerics.h"
#include "ffpa/utils.cuh"

namespace ffpa {

namespace emu_lowp {

// The fragments of all 32 lanes, exchanged through the warp's slots: A (4 registers), B
// (2) and, packed into the address slot, the two scale registers.
struct Gathered {
  uint32_t a[32][4], b[32][2], sfa[32], sfb[32];
};
inline void gather(Gathered& g, const uint32_t (&a)[4], uint32_t b0, uint32_t b1, uint32_t sfa, uint32_t sfb) {
  emu::WarpSlots& w = emu::warp_slots();
  const int l = emu::lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a[i];
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  w.addr[l] = uintptr_t(sfa) | (uintptr_t(sfb) << 32);
  emu::warp_sync();
  for (int ln = 0; ln < 32; ++ln) {
    for (int i = 0; i < 4; ++i) g.a[ln][i] = w.a[ln][i];
    g.b[ln][0] = w.b[ln][0];
    g.b[ln][1] = w.b[ln][1];
    g.sfa[ln] = uint32_t(w.addr[ln] & 0xffffffffu);
    g.sfb[ln] = uint32_t(uint64_t(w.addr[ln]) >> 32);
  }
  emu::warp_sync();
}

// A (16 x K) and B (K x 8) from the gathered fragments, E elements per 32-bit register
// (4 e4m3 or 8 e2m1), K = 8 E: lane (g, t) holds A rows g (a0, a2) and g + 8 (a1, a3) at
// k = E t .. E t + E - 1 (a0, a1) and K / 2 + E t .. (a2, a3), B column g at the same k
// (b0, b1); element v of a register is its v-th lowest E-th. decode(register, v) gives it.
template <int E, typename Decode>
inline void unpack(const Gathered& gt, Decode decode, float (&A)[16][8 * E], float (&B)[8 * E][8]) {
  constexpr int kHalf = 4 * E;
  for (int ln = 0; ln < 32; ++ln) {
    const int g = ln / 4, t = ln % 4;
    for (int v = 0; v < E; ++v) {
      A[g][E * t + v] = decode(gt.a[ln][0], v);
      A[g + 8][E * t + v] = decode(gt.a[ln][1], v);
      A[g][kHalf + E * t + v] = decode(gt.a[ln][2], v);
      A[g + 8][kHalf + E * t + v] = decode(gt.a[ln][3], v);
      B[E * t + v][g] = decode(gt.b[ln][0], v);
      B[kHalf + E * t + v][g] = decode(gt.b[ln][1], v);
    }
  }
}

// d (this lane's four accumulators) += A (16 x K) . B (K x 8), the sums in fp32 in k order.
template <int K>
inline void accumulate(float (&d)[4], const float (&A)[16][K], const float (&B)[K][8]) {
  const int l = emu::lane(), g = l / 4, t = l % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
    float s = d[e];
    for (int k = 0; k < K; ++k) s += A[row][k] * B[k][col];
    d[e] = s;
  }
}

}  // namespace emu_lowp

// mma.m16n8k32 e4m3: a0 (g, 4t..4t+3) a1 (g+8, ..) a2 (g, 16+4t..) a3 (g+8, 16+4t..), byte i
// = column + i; b0 (k 4t.., n g) b1 (k 16+4t.., n g).
struct Mma16832E4m3 {
  static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu_lowp::Gathered gt;
    emu_lowp::gather(gt, a, b0, b1, 0, 0);
    float A[16][32], B[32][8];
    emu_lowp::unpack<4>(gt, [](uint32_t r, int i) { return e4m3_to_float(uint8_t(r >> (8 * i))); }, A, B);
    emu_lowp::accumulate<32>(d, A, B);
  }
};

// mma.m16n8k64 kind::mxf4nvf4 scale_vec::4X, e2m1 with ue4m3 scales: the same byte layout
// with eight values per register (value 2i in the low nibble of byte i, 2i + 1 in the
// high one); element (row, k) of A is e2m1 * the row's scale byte k / 16, of B likewise.
struct Mma16864Nvf4 {
  static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, uint32_t sfa, uint32_t sfb) {
    emu_lowp::Gathered gt;
    emu_lowp::gather(gt, a, b0, b1, sfa, sfb);
    float A[16][64], B[64][8];
    emu_lowp::unpack<8>(gt, [](uint32_t r, int v) { return e2m1_to_float(uint8_t((r >> (4 * v)) & 0xfu)); }, A, B);
    auto sf = [](uint32_t r, int k) { return ue4m3_to_float(uint8_t(r >> (8 * (k / 16)))); };
    for (int row = 0; row < 16; ++row) {
      const uint32_t s = gt.sfa[4 * (row % 8) + row / 8];  // row g: lane 4g; row g + 8: lane 4g + 1
      for (int k = 0; k < 64; ++k) A[row][k] *= sf(s, k);
    }
    for (int col = 0; col < 8; ++col) {
      const uint32_t s = gt.sfb[4 * col];  // column g: lane 4g
      for (int k = 0; k < 64; ++k) B[k][col] *= sf(s, k);
    }
    emu_lowp::accumulate<64>(d, A, B);
  }
};

}  // namespace ffpa
