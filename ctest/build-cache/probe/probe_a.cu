#include "probe_kernel.cuh"

namespace ffpa::probe {
template cudaError_t launch_row_sum<64, float>(const float*, float*, int, cudaStream_t);
}  // namespace ffpa::probe
