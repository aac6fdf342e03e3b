// The non-finite pre-pass: one read of the attention's inputs that sets, per (batch,
// query head), whether any value the head reads (its Q rows, its kv head's K and V, and
// in the backward its dO rows) is a NaN or an inf. The kernels then follow SDPA's math
// backend for those heads under the causal mask too (ffpa/mask.h) and keep skipping
// masked blocks for every other head. Launched by src/nonfinite_prepass.cu on the call's stream after a
// cudaMemsetAsync of the flags: no host synchronisation, so CUDA graphs capture it.
//
// Grid: x = blocks of kRowsPerBlock rows, y = the scanned heads of every operand in turn
// (NonfiniteScan::heads), z = batch. Each thread tests 16-bit elements by their exponent
// bits (all ones: inf or NaN, in fp16 and bf16 alike) and, on a hit, stores 1 into the
// flags of every query head that reads the row (the same value from any number of threads:
// no atomics needed).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ffpa/nonfinite.h"
#include "ffpa/utils.cuh"  // (the CPU emulator's stand-in defines the CUDA keywords)

namespace ffpa {

__global__ void __launch_bounds__(NonfiniteScan::kNThreads) ffpa_nonfinite_kernel(const NonfiniteScan s) {
  int y = blockIdx.y;
  int op = 0;
  while (op + 1 < s.n_operands && y >= s.heads[op]) y -= s.heads[op++];
  const int head = y;
  const int batch = blockIdx.z;
  const int row0 = blockIdx.x * NonfiniteScan::kRowsPerBlock;
  int op_rows = s.rows[op];
  if (s.rows_used[op] != nullptr) {
    const int used = s.rows_used[op][batch];  // out-of-range values clamped, as seq_mask does
    op_rows = used < 0 ? 0 : used < op_rows ? used : op_rows;
  }
  const int rows = op_rows - row0 < NonfiniteScan::kRowsPerBlock ? op_rows - row0 : NonfiniteScan::kRowsPerBlock;
  if (rows <= 0) return;
  const auto* base = static_cast<const uint16_t*>(s.data[op]) + batch * s.batch_stride[op] + head * s.head_stride[op];
  bool hit = false;
  for (int i = threadIdx.x; i < rows * s.d; i += NonfiniteScan::kNThreads) {
    const int r = i / s.d;
    const uint16_t bits = base[static_cast<int64_t>(row0 + r) * s.row_stride[op] + (i - r * s.d)];
    hit = hit || (bits & s.exp_mask) == s.exp_mask;
  }
  if (!hit) return;
  // q and dout rows belong to their own head; k and v rows to every head of the group
  // (with Hq == Hkv the two readings agree).
  const bool per_query_head = s.heads[op] == s.hq;
  const int first = per_query_head ? head : head * s.h_ratio;
  const int count = per_query_head ? 1 : s.h_ratio;
  for (int h = first; h < first + count; ++h) s.flags[batch * s.hq + h] = 1;
}

}  // namespace ffpa
