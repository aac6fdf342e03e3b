// PTX wrappers of the low-precision paths' tensor-core instructions. The CPU emulator
// models each of them from the PTX ISA (csrc/tests/emu/ffpa/lowp/mma.cuh, found first in
// its include order); keep the two interfaces identical.
//
// Fragment layouts, g = lane / 4, t = lane % 4, bytes numbered from the low end:
//   Mma16832E4m3 (m16n8k32, A and B e4m3, one byte per element):
//     A 16x32 (row):  a0 = (g, 4t..4t+3)  a1 = (g+8, 4t..)  a2 = (g, 16+4t..)  a3 = (g+8, 16+4t..)
//     B 32x8  (col):  b0 = (k 4t..4t+3, n g)               b1 = (k 16+4t..16+4t+3, n g)
//     C 16x8  (f32):  c0,c1 = (g, 2t..2t+1)                c2,c3 = (g+8, 2t..2t+1)
//   i.e. the byte layout of ldmatrix.x4 over 8x16-byte matrices, so A and B load with
//   ldmatrix from row-major [rows][k] bytes exactly like the 16-bit operands.
//   Mma16864Nvf4 (m16n8k64, A and B e2m1, two per byte, the lower k in the low nibble):
//     the same byte layout (4 bytes = 8 values of k), so A and B load the same way from
//     [rows][k / 2] bytes; sfa holds the four ue4m3 scales of one A row (byte j scales
//     k = 16j..16j+15): row g in lanes 4g, row g+8 in lanes 4g+1; sfb those of B column
//     g in lane 4g (CUTLASS's SFALayout / SFBLayout of SM120_16x8x64_TN_VS with thread
//     and byte selectors 0). Every lane passes its registers; the others are ignored.
#pragma once

#include <cstdint>

namespace ffpa {

// kind::f8f6f4 is the sm_120 family's form of the FP8 mma (ptxas wants its family- or
// arch-specific target); sm_89 / sm_90 take the plain form, which nvcc 13.0 lowers to
// QMMA on sm_89 and to two HMMA.16816 per instruction on sm_90.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#if (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1200 && \
     __CUDA_ARCH_FAMILY_SPECIFIC__ < 1300)
#define FFPA_MMA_E4M3_FORM "mma.sync.aligned.kind::f8f6f4.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
#define FFPA_NVFP4_DEVICE 1
#else
#define FFPA_MMA_E4M3_FORM "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
#endif
#define FFPA_FP8_DEVICE 1
#endif

struct Mma16832E4m3 {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef FFPA_FP8_DEVICE
    asm volatile(FFPA_MMA_E4M3_FORM
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // below sm_89: never launched (src/forward.cpp, ffpa/arch_rules.h)
#endif
  }
};

struct Mma16864Nvf4 {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                             uint32_t sfa, uint32_t sfb) {
#ifdef FFPA_NVFP4_DEVICE
    asm volatile(
        "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, {%10}, {%11, %12}, {%13}, {%14, %15};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sfa), "h"(uint16_t(0)), "h"(uint16_t(0)),
          "r"(sfb), "h"(uint16_t(0)), "h"(uint16_t(0)));
#else
    __trap();  // outside the sm_120 family's specific targets: never launched (src/forward.cpp)
#endif
  }
};

#undef FFPA_MMA_E4M3_FORM

}  // namespace ffpa
