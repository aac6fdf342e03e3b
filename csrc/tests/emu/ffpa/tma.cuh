// CPU emulation of csrc/kernels/ffpa/tma.cuh for emulate_kernels.cpp: the same
// interface, each instruction replaced by a model of the PTX ISA's semantics
// (mbarrier phases, arrival counts and transaction bytes; cp.async.bulk.tensor boxes
// with out-of-bounds zero fill and the 128-, 64- and 32-byte swizzles). Stricter than the hardware
// where a kernel bug would otherwise pass silently: a complete_tx beyond the bytes
// the phase expects fails (the hardware tolerates a transiently negative count, but
// this kernel always expects before it issues), as does any shared-memory read that
// overlaps a copy still in flight, a barrier used by the async proxy without
// fence.mbarrier_init, or a wait by another thread before a block barrier made the
// init visible. The models live in emu_grid.cpp (namespace emu).
#pragma once

#include <cuda.h>  // the real CUtensorMap (128 opaque bytes); CuTe's headers include it too

#include <cstdint>
#include <cstring>

#include "ffpa/utils.cuh"

#define FFPA_TMA_DEVICE 1
#undef __grid_constant__
#define __grid_constant__

namespace emu {
// What the emulator's cuTensorMapEncodeTiled records, kept inside the opaque bytes of
// a real CUtensorMap (as the driver keeps its encoding there).
struct TensorMapRecord {
  const void* base = nullptr;
  uint64_t dims[4] = {0, 0, 0, 0};
  uint64_t strides[3] = {0, 0, 0};  // bytes, dims 1..3
  uint32_t box[4] = {0, 0, 0, 0};
  uint32_t elem_bytes = 2;     // 2 (fp16 / bf16) or 1 (the low-precision byte arrays)
  uint32_t swizzle_bytes = 0;  // 128, 64 or 32: the box row's swizzle span
  bool encoded = false;
};
static_assert(sizeof(TensorMapRecord) <= sizeof(CUtensorMap), "the record fits a CUtensorMap");
inline TensorMapRecord read_map(const CUtensorMap* m) {
  TensorMapRecord r;
  std::memcpy(&r, m, sizeof(r));
  return r;
}
inline void write_map(CUtensorMap* m, const TensorMapRecord& r) {
  std::memset(m, 0, sizeof(*m));
  std::memcpy(m, &r, sizeof(r));
}
}  // namespace emu

namespace emu {
void mbar_init(uint64_t* bar, uint32_t count);
void fence_barrier_init();
void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes);
void mbar_wait(uint64_t* bar, uint32_t parity);
void tma_load(void* smem_dst, const CUtensorMap* map, const int (&coords)[4], uint64_t* bar);
}  // namespace emu

namespace ffpa {

struct TmaMaps {
  CUtensorMap q, k, v;
};
struct BwdTmaMaps {
  CUtensorMap q, k, v, dout;
};

inline void mbar_init(uint64_t* bar, uint32_t count) { emu::mbar_init(bar, count); }
inline void fence_barrier_init() { emu::fence_barrier_init(); }
inline void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) { emu::mbar_arrive_expect_tx(bar, bytes); }
inline void mbar_wait(uint64_t* bar, uint32_t parity) { emu::mbar_wait(bar, parity); }
// The zeroed tail rows are plain stores here; the fence has nothing to order.
inline void fence_proxy_async_smem() {}
inline void tma_load_4d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2, int c3, uint64_t* bar) {
  const int coords[4] = {c0, c1, c2, c3};
  emu::tma_load(smem_dst, map, coords, bar);
}

}  // namespace ffpa

// The library's own tail zeroing (plain stores), run as it is.
#include "ffpa/tma_tail.cuh"
