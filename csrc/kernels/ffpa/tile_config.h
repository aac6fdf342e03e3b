// The one table of forward-kernel configurations: per head dim (and accumulator) the
// tiles, warp layout and stages each path compiles, and the measurement each choice came
// from. kernel_traits.h (mma / tma paths) and cute/config.h (cute / cute_tma) read it; the
// tuning sweep (cmake/FfpaSweep.cmake, docs/perf.md "Tuning sweep") measures candidates
// against these rows, and a winner replaces its row here with the sweep run named in
// `measured`. Host-compiler friendly: plain constexpr data.
//
// Arch: one row serves every compiled arch. A kernel's template arguments must not depend
// on __CUDA_ARCH__ (the host pass would register an instantiation the device code does not
// hold: docs/perf.md, GPU run 3), so per-arch tiles need a runtime dispatch on the
// device's arch, which no measurement has asked for yet. Until the release GPUs (sm_89, the
// sm_120 family) are lent, their use of these rows is a documented estimate: the no-spill
// constraint from ptxas (ffpa.kernels.no_spills) and shared memory within 99 KiB, never a
// timing.
#pragma once

namespace ffpa {

// One row. mma_*: FwdMmaTraits (64-key blocks, 64-column D chunks: always split-D);
// cute_*: CuteTile (block_d == head dim is persist-D, 64 split-D). `measured` names the
// run a choice was timed in, or says it is an estimate and why.
struct TileRow {
  int max_head_dim;  // the row covers head dims up to this one (after the previous row's)
  bool f16_acc;      // fp16 accumulation (the CuTe rows differ; the mma rows are shared)
  int mma_warps_m, mma_warps_d, mma_stages;
  int cute_block_m, cute_block_n, cute_block_d, cute_warps_m, cute_warps_d, cute_stages;  // block_d 0: = D
  // The low-precision CuTe kernel (FP8 / NVFP4; 64-key blocks always: a V^T row of 64
  // e4m3 tokens is one 64-byte swizzle slab). The same in both rows of a head dim (it
  // accumulates in fp32 either way).
  int lowp_block_m, lowp_block_d, lowp_warps_m, lowp_warps_d, lowp_stages;  // block_d 0: = D
  const char* measured;
};

// Why each row is what it is (registers and spills: ptxas, nvcc 13.0; sm_120f is the
// tightest compile, so the CuTe tiles are the largest without a spill there):
//   mma: 4x1 warps up to D = 256 (4 x 16 rows; 128 O accumulators at D = 256), 4x2 for
//        256 < D <= 512 (the 4x1 layout spilled 52 bytes at D = 320), 2x4 above; three
//        stages (prefetch distance two hides L2 latency; 48 / 57 KiB of shared memory).
//   cute: persist-D to D = 256 (Q, K and V tiles resident), split-D above with 4x2 warps;
//        D = 256 fp32 takes 32-key blocks (64 keys spilled 76 bytes on sm_120f); with fp16
//        accumulation D = 192/256 take 4x2 with 32 keys (20 bytes of spills with 4x1 at
//        D = 192), D = 320 32-key blocks and D = 512 the 2x4 layout (4x2 with 64 keys
//        spilled 52 bytes on sm_120f).
//   lowp: the CuTe kernel's shapes with 64-key blocks; persist-D to D = 256 with 4x2 warps
//        at D = 256 (64 fp32 O registers per thread next to S and the e4m3 P), split-D
//        above as the 16-bit rows. Estimates (no spills: ptxas), never timed.
inline constexpr TileRow kTileTable[] = {
    // D <= 64
    {64, false, 4, 1, 3, 128, 64, 0, 4, 1, 2, 128, 0, 4, 1, 2,
     "H200 run 3 (65d3f63): tma 239.2 TFLOPS (mma 199.5), against sdpa-default[kernel not recorded] 488.5; "
     "sm_89/sm_120: estimate"},
    {64, true, 4, 1, 3, 128, 64, 0, 4, 1, 2, 128, 0, 4, 1, 2, "H200 run 3: tma fp16-acc 213.9 TFLOPS; sm_89/sm_120: estimate"},
    // D <= 128
    {128, false, 4, 1, 3, 64, 64, 0, 4, 1, 2, 64, 0, 4, 1, 2,
     "H200 run 3 (65d3f63): tma 287.9 TFLOPS (mma 209.9), against sdpa-default[kernel not recorded] 666.5; "
     "sm_89/sm_120: estimate"},
    {128, true, 4, 1, 3, 64, 64, 0, 4, 1, 2, 64, 0, 4, 1, 2, "H200 run 3: tma fp16-acc 208.4 TFLOPS; sm_89/sm_120: estimate"},
    // D <= 192
    {192, false, 4, 1, 3, 64, 64, 0, 4, 1, 2, 64, 0, 4, 1, 2,
     "H200 run 1 (4fe514a): mma 233.8 TFLOPS; cute: not yet timed; sm_89/sm_120: estimate"},
    {192, true, 4, 1, 3, 64, 32, 0, 4, 2, 2, 64, 0, 4, 1, 2, "estimate: no spills on sm_120f (ptxas); not yet timed"},
    // D <= 256
    {256, false, 4, 1, 3, 64, 32, 0, 4, 1, 2, 64, 0, 4, 2, 2,
     "H200 run 1 (4fe514a): mma 228.8 TFLOPS; cute: not yet timed; sm_89/sm_120: estimate"},
    {256, true, 4, 1, 3, 64, 32, 0, 4, 2, 2, 64, 0, 4, 2, 2, "estimate: no spills on sm_120f (ptxas); not yet timed"},
    // D <= 384 (the release's 320)
    {384, false, 4, 2, 3, 64, 64, 64, 4, 2, 3, 64, 64, 4, 2, 3,
     "H200 run 3 (65d3f63): tma 185.7 TFLOPS (mma 155.5), 1.37x sdpa-default[kernel not recorded] 135.4; "
     "sm_89/sm_120: estimate"},
    {384, true, 4, 2, 3, 64, 32, 64, 4, 2, 3, 64, 64, 4, 2, 3, "H200 run 3: tma fp16-acc 163.0 TFLOPS; sm_89/sm_120: estimate"},
    // D <= 512
    {512, false, 4, 2, 3, 64, 64, 64, 4, 2, 3, 64, 64, 4, 2, 3,
     "H200 run 3 (65d3f63): tma 189.9 TFLOPS (mma 168.8), 1.43x sdpa-default[kernel not recorded] 132.4; "
     "sm_89/sm_120: estimate"},
    {512, true, 4, 2, 3, 32, 64, 64, 2, 4, 3, 64, 64, 4, 2, 3, "H200 run 3: tma fp16-acc 166.8 TFLOPS; sm_89/sm_120: estimate"},
    // D <= 1024 (2x4: 32 query rows; a 4x4 layout would need 512 threads x ~200 registers)
    {1024, false, 2, 4, 3, 32, 64, 64, 2, 4, 3, 64, 64, 2, 4, 3, "estimate: emulation only (csrc/tests/emu), never on a GPU"},
    {1024, true, 2, 4, 3, 32, 64, 64, 2, 4, 3, 64, 64, 2, 4, 3, "estimate: emulation only (csrc/tests/emu), never on a GPU"},
};

// The row of a head dim and accumulator. Head dims above the table are refused by the
// callers' static_asserts (FwdWarpLayout: multiples of 64 up to 1024).
constexpr const TileRow& tile_row(int head_dim, bool f16_acc) {
  for (const TileRow& r : kTileTable)
    if (head_dim <= r.max_head_dim && r.f16_acc == f16_acc) return r;
  return kTileTable[sizeof(kTileTable) / sizeof(kTileTable[0]) - 1];
}

}  // namespace ffpa
