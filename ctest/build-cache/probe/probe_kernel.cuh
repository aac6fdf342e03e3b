// Shared template for the probe sources: a tiled row reduction, instantiated per
// head dim like the real kernels, so each object is a real device compile.
#pragma once
#include <cuda_runtime.h>

namespace ffpa::probe {

template <int kHeadDim, typename T>
__global__ void row_sum(const T* __restrict__ in, float* __restrict__ out, int rows) {
  __shared__ float tile[kHeadDim];
  const int row = blockIdx.x;
  if (row >= rows) return;
  for (int i = threadIdx.x; i < kHeadDim; i += blockDim.x) {
    tile[i] = static_cast<float>(in[row * kHeadDim + i]);
  }
  __syncthreads();
  for (int stride = kHeadDim / 2; stride > 0; stride /= 2) {
    for (int i = threadIdx.x; i < stride; i += blockDim.x) tile[i] += tile[i + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[row] = tile[0];
}

template <int kHeadDim, typename T>
cudaError_t launch_row_sum(const T* in, float* out, int rows, cudaStream_t stream) {
  row_sum<kHeadDim, T><<<rows, 128, 0, stream>>>(in, out, rows);
  return cudaGetLastError();
}

}  // namespace ffpa::probe
