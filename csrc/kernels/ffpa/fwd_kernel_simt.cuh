// Plain SIMT forward kernel: the second witness for the mma kernel. Deliberately
// simple: one warp per query row, the row of Q in registers (D / 32 values per lane),
// keys visited one at a time with a warp-shuffle dot product and the textbook online
// softmax in natural-exp fp32. No shared memory, no tensor cores, no tiling; works
// for any element strides.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "ffpa/kernel_traits.h"
#include "ffpa/mask.h"
#include "ffpa/params.h"
#include "ffpa/utils.cuh"

namespace ffpa {

template <int kHeadDim, typename T>
__global__ void __launch_bounds__(FwdSimtTraits::kNThreads) ffpa_fwd_simt_kernel(const FwdParams params) {
  using ET = ElemTraits<T>;
  constexpr int kPerLane = kHeadDim / 32;  // lane l holds columns l, l + 32, l + 64, ...
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * FwdSimtTraits::kRowsPerBlock + (threadIdx.x >> 5);
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  if (row >= params.nq) return;  // whole warp leaves; no block-wide barrier follows
  const int kv_head = head / params.h_ratio;

  const T* q_row = static_cast<const T*>(params.q) + batch * params.q_batch_stride +
                   head * params.q_head_stride + static_cast<int64_t>(row) * params.q_row_stride;
  const T* k_head = static_cast<const T*>(params.k) + batch * params.k_batch_stride +
                    kv_head * params.k_head_stride;
  const T* v_head = static_cast<const T*>(params.v) + batch * params.v_batch_stride +
                    kv_head * params.v_head_stride;

  float q[kPerLane];
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    q[i] = ET::to_float(q_row[lane + 32 * i]) * params.scale;
    acc[i] = 0.f;
  }

  // Causal: row sees keys j <= row + causal_offset (FwdParams); the keys past that are
  // skipped unless the head follows the math rule (ffpa/mask.h; blocks of one key here).
  const int causal_offset = params.causal_offset;
  const bool math_rule = math_rule_for(params.nonfinite, batch, params.hq, head);
  if (params.nonfinite_heads_only && !math_rule) return;  // whole block: the flag is per head
  const int kv_end = kv_blocks_for_rows(row, 1, params.nq, params.nkv, 1, params.causal, causal_offset, math_rule);

  float m = -INFINITY;
  float l = 0.f;
  for (int j = 0; j < kv_end; ++j) {
    const T* k_row = k_head + static_cast<int64_t>(j) * params.k_row_stride;
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) dot += q[i] * ET::to_float(k_row[lane + 32 * i]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    dot = mask_score(dot, row, j, params.nkv, params.causal, causal_offset, math_rule);

    const float m_new = fmaxf(m, dot);
    // expf(-inf) = 0 on the first key. While the row has seen only -inf scores (a key
    // with -inf in it), m and m_new are both -inf: -inf - -inf would be NaN, where SDPA's
    // math backend gives such a key probability 0 (docs/install.md "NaN and inf"); an
    // unchanged max needs no correction. A NaN score still makes the row NaN through p.
    const float corr = m == m_new ? 1.f : expf(m - m_new);
    const float p = dot == -INFINITY ? 0.f : expf(dot - m_new);
    l = l * corr + p;
    const T* v_row = v_head + static_cast<int64_t>(j) * params.v_row_stride;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = acc[i] * corr + p * ET::to_float(v_row[lane + 32 * i]);
    m = m_new;
  }

  const float inv = l > 0.f ? 1.f / l : 0.f;
  T* o_row = static_cast<T*>(params.o) + batch * params.o_batch_stride + head * params.o_head_stride +
             static_cast<int64_t>(row) * params.o_row_stride;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) o_row[lane + 32 * i] = ET::from_float(acc[i] * inv);
  if (params.lse != nullptr && lane == 0) {
    params.lse[batch * params.lse_batch_stride + head * params.lse_head_stride +
               static_cast<int64_t>(row) * params.lse_row_stride] = row_lse(m, l);
  }
}

}  // namespace ffpa
