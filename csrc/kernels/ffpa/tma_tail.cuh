// The masked kernels' zeroing of the tail rows of a TMA-landed tile, in one place: the
// mma forward (ffpa/fwd_kernel_mma.cuh), the backward (ffpa/bwd_kernel_mma.cuh) and the
// CuTe forward (ffpa/cute/fwd_kernel.cuh) call it; the library's ffpa/tma.cuh and the CPU
// emulator's model of it (csrc/tests/emu/ffpa/tma.cuh) both include this file, so the
// emulator runs this very code. Plain stores: no PTX.
#pragma once

#include <cstdint>

namespace ffpa {

// A box reads whole tiles: rows past a sequence's keys (or queries) hold the next packed
// sequence's rows or key padding (seqused_k), which may be NaN / inf, and a mask that adds
// or multiplies by 0 cannot hide them (0 * inf is NaN). The masked kernels' TMA feeds zero
// rows [valid, rows) of such a landed tile before any warp reads it, which is what the
// cp.async feeds' zero fill gives. A tile is kSlabs boxes one after another, each `rows`
// rows of 128 bytes (64 16-bit columns); the 128-byte swizzle moves 16-byte vectors within
// a row only, so whole rows are zeroed whatever the swizzle. Every thread of the block
// calls it (tid of nthreads); the caller then orders these generic-proxy writes before the
// async proxy refills the tile (fence_proxy_async_smem) and syncs the block before the reads.
template <int kSlabs = 1>
__device__ __forceinline__ void zero_tile_tail_rows(void* tile, int rows, int valid, int tid, int nthreads) {
  constexpr int kVecsPerRow = 8;  // 16-byte vectors of a 128-byte row
  for (int idx = tid; idx < kSlabs * rows * kVecsPerRow; idx += nthreads) {
    const int row = kSlabs == 1 ? idx / kVecsPerRow : idx / kVecsPerRow % rows;
    if (row >= valid) {
      uint32_t* const w = reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(tile) + idx * 16);
      w[0] = w[1] = w[2] = w[3] = 0u;
    }
  }
}

}  // namespace ffpa
