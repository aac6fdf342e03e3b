// PTX wrappers for the TMA-fed path (sm_90+): mbarrier and cp.async.bulk.tensor.
// The CPU emulator (csrc/tests/emu/ffpa/tma.cuh) models each of these from the PTX
// ISA; keep the two interfaces identical.
//
// Protocol used by the forward kernel, per pipeline stage (one mbarrier, count 1):
//   thread 0: mbar_arrive_expect_tx(bar, bytes of every box it is about to load),
//             then tma_load_4d(...) for each box, completing on bar;
//   everyone: mbar_wait(bar, phase) before reading the stage; the phase bit flips
//             each time the stage is refilled.
// After init, fence_barrier_init() (by the initialising thread) and a __syncthreads()
// make the barriers visible to the async proxy and to the other threads.
#pragma once

#include <cuda.h>  // CUtensorMap (a 128-byte opaque struct); no libcuda link
#include <cuda_runtime.h>

#include <cstdint>

#include "ffpa/utils.cuh"

namespace ffpa {

// The three tensor maps of one launch, passed by value as a __grid_constant__ kernel
// parameter (the TMA unit reads them from the parameter space).
struct TmaMaps {
  CUtensorMap q, k, v;
};

// The backward's four maps (ffpa/bwd_kernel_mma.cuh's TMA feed): Q, K, V and dO.
struct BwdTmaMaps {
  CUtensorMap q, k, v, dout;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FFPA_TMA_DEVICE 1
#endif

// Every wrapper exists in every compilation pass (the kernel templates name them), but
// only the sm_90+ passes hold the instructions; below sm_90 they trap. The launcher
// never starts the TMA kernel on such a binary (tma_runs_on_current_device()).
#ifdef FFPA_TMA_DEVICE
#define FFPA_TMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define FFPA_TMA_ASM(...) __trap()
#endif

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  FFPA_TMA_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}

// Makes the initialised barriers visible to the async proxy (the TMA unit).
__device__ __forceinline__ void fence_barrier_init() {
  FFPA_TMA_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  FFPA_TMA_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Blocks until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  FFPA_TMA_ASM(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// One box of a rank-4 tensor map ({D, N, H, B}, innermost first) into shared memory;
// completes `bytes(box)` transaction bytes on bar. Out-of-bounds elements read as zero.
__device__ __forceinline__ void tma_load_4d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  FFPA_TMA_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}

// Orders this thread's generic-proxy writes to shared memory (the forward's zeroed tail
// rows) before later async-proxy (TMA) writes to the same bytes.
__device__ __forceinline__ void fence_proxy_async_smem() { FFPA_TMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory"); }

#undef FFPA_TMA_ASM

}  // namespace ffpa

// The masked kernels' zeroing of a landed tile's tail rows (shared with the CPU emulator,
// whose csrc/tests/emu/ffpa/tma.cuh includes it too).
#include "ffpa/tma_tail.cuh"
