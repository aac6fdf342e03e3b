// Which kernel has code on which arch: the one home of these thresholds. The kernels read
// the device-side constants (their compilation pass's arch), api.cu the host-side rules
// (a binary's arch from the runtime, or an FFPA_CUDA_ARCHS token); both call the same
// constexpr functions, so a kernel never has code that the launcher believes absent, or
// the other way round. Host-compiler friendly.
//
//   TMA (cp.async.bulk.tensor, mbarrier)          sm_90 and newer
//   FP8 mma (m16n8k32 e4m3)                       sm_89 and newer
//   cp.async-fed heavy kernels                    below the sm_120 family: there fp16
//     (fp16-accumulating mma, the CuTe kernels,   accumulation and the CuTe kernels are
//     the FP8 kernel)                             TMA-fed (their cp.async feeds spilled at
//                                                 D = 256 / D = 128 fp16 accumulation and
//                                                 cost half the CuTe compile time; the
//                                                 notes in fwd_kernel_mma.cuh and
//                                                 cute/fwd_kernel.cuh)
//   NVFP4 block-scaled mma (kind::mxf4nvf4)       the sm_120 family's family- or
//     and kind::f8f6f4                            arch-specific targets (120f, 120a):
//                                                 ptxas refuses both for plain sm_120
#pragma once

#include <cstdlib>
#include <cstring>

namespace ffpa {

inline constexpr int kTmaMinSm = 90;
inline constexpr int kFp8MinSm = 89;
inline constexpr int kFamily120Sm = 120;

constexpr bool sm_has_tma(int sm) { return sm >= kTmaMinSm; }
constexpr bool sm_has_fp8(int sm) { return sm >= kFp8MinSm; }
// cp.async-fed heavy kernels have code below the sm_120 family only.
constexpr bool sm_has_cp_async_heavy(int sm) { return sm < kFamily120Sm; }
// family_specific: the binary was compiled for a family- or arch-specific target.
constexpr bool sm_has_nvfp4(int sm, bool family_specific) { return sm >= kFamily120Sm && family_specific; }

// An FFPA_CUDA_ARCHS token ("89", "90a", "120f"): its sm number and whether it names a
// family- or arch-specific target.
inline int arch_token_sm(const char* token) { return std::atoi(token); }
inline bool arch_token_specific(const char* token) {
  const size_t n = std::strlen(token);
  return n > 0 && (token[n - 1] == 'a' || token[n - 1] == 'f');
}

// This compilation pass's arch (0 in host passes and in the CPU emulator, which stands
// for "every feature": the emulator runs every kernel body).
#if defined(__CUDA_ARCH__)
inline constexpr int kDeviceSm = __CUDA_ARCH__ / 10;
#if defined(__CUDA_ARCH_FAMILY_SPECIFIC__) || defined(__CUDA_ARCH_SPECIFIC__)
inline constexpr bool kDeviceSpecific = true;
#else
inline constexpr bool kDeviceSpecific = false;
#endif
inline constexpr bool kDeviceTma = sm_has_tma(kDeviceSm);
inline constexpr bool kDeviceFp8 = sm_has_fp8(kDeviceSm);
inline constexpr bool kDeviceCpAsyncHeavy = sm_has_cp_async_heavy(kDeviceSm);
inline constexpr bool kDeviceNvfp4 = sm_has_nvfp4(kDeviceSm, kDeviceSpecific);
#else
inline constexpr int kDeviceSm = 0;
inline constexpr bool kDeviceSpecific = false;
inline constexpr bool kDeviceTma = true;
inline constexpr bool kDeviceFp8 = true;
inline constexpr bool kDeviceCpAsyncHeavy = true;
inline constexpr bool kDeviceNvfp4 = true;
#endif

}  // namespace ffpa
