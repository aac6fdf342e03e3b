// The runtime / driver seam (ffpa/runtime.h) on the CUDA runtime: device properties,
// stream-ordered memory, cuTensorMapEncodeTiled through the driver entry point, and the
// launch status of the launch seam (ffpa/launch.cuh).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver is reached through the runtime

#include <atomic>
#include <mutex>
#include <string>

#include "ffpa/api.h"
#include "ffpa/launch.cuh"
#include "ffpa/params.h"
#include "ffpa/runtime.h"

namespace ffpa {

Status launch_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return {};
  std::string msg = std::string(what) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
      msg += "; this library has no code for the device's sm_" + std::to_string(prop.major * 10 + prop.minor) +
             " (compiled archs:";
      for (int i = 0; i < kNumCompiledArchs; ++i) msg += std::string(" ") + kCompiledArchs[i];
      msg += "): rebuild with -DFFPA_CUDA_ARCHS=" + std::to_string(prop.major * 10 + prop.minor);
    }
  }
  return {ErrorKind::kDevice, msg};
}

namespace runtime {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
}

Status pointer_device(const void* p, const char* name, int* device) {
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return {ErrorKind::kDevice, std::string(name) + ": cannot query the pointer (" + cudaGetErrorString(err) +
                                    "); pass arrays in CUDA device memory"};
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return {ErrorKind::kDevice, std::string(name) + " is not in CUDA device memory (host or unregistered "
                                                    "pointer); move it to the GPU first"};
  *device = attr.device;
  return {};
}

int current_device() noexcept {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

bool set_device(int device) noexcept { return cudaSetDevice(device) == cudaSuccess; }

int current_device_cc() noexcept {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

namespace {


// Which binary of this library the device loads, asked of a kernel compiled with the
// same archs as the instances: its binaryVersion is the SASS arch picked for the
// current device (e.g. 120 for 120f code on an RTX 50xx, 89 on an L4). Cached per
// device ordinal; -1: not asked yet, 0: no loadable code.
__global__ void ffpa_binary_probe_kernel() {}

constexpr int kMaxDevices = 64;
std::atomic<int> g_binary_version[kMaxDevices];
std::once_flag g_binary_version_init;

int binary_version_of_current_device() {
  std::call_once(g_binary_version_init, [] {
    for (auto& v : g_binary_version) v.store(-1);
  });
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev < 0 || dev >= kMaxDevices) return 0;
  int v = g_binary_version[dev].load();
  if (v < 0) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, ffpa_binary_probe_kernel) == cudaSuccess) {
      v = attr.binaryVersion;
    } else {
      cudaGetLastError();
      v = 0;
    }
    g_binary_version[dev].store(v);
  }
  return v;
}

PFN_cuTensorMapEncodeTiled_v12000 g_encode_tiled = nullptr;
std::once_flag g_encode_tiled_once;
std::string g_encode_tiled_error;

Status tensor_map_encoder(PFN_cuTensorMapEncodeTiled_v12000* fn) {
  std::call_once(g_encode_tiled_once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
      cudaGetLastError();
      g_encode_tiled_error = std::string("the driver has no cuTensorMapEncodeTiled (") +
                             (err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found") +
                             "); impl='tma' needs a CUDA 12+ driver: update the driver or use impl='mma'";
      return;
    }
    g_encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  if (g_encode_tiled == nullptr) return {ErrorKind::kDevice, g_encode_tiled_error};
  *fn = g_encode_tiled;
  return {};
}

// One map, with the geometry tma_geometry() gives (ffpa/tma_geometry.h).
Status encode_one(PFN_cuTensorMapEncodeTiled_v12000 encode, CUtensorMap* map, const char* name, const void* data,
                  DType dtype, const TmaGeometry& g) {
  const cuuint64_t dims[4] = {g.dims[0], g.dims[1], g.dims[2], g.dims[3]};
  const cuuint64_t strides[3] = {g.strides[0], g.strides[1], g.strides[2]};
  const cuuint32_t box[4] = {g.box[0], g.box[1], g.box[2], g.box[3]};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = g.elem_bytes == 1         ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dtype == DType::kFp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMapSwizzle swizzle = g.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : g.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                             : CU_TENSOR_MAP_SWIZZLE_32B;
  const CUresult r = encode(map, type, 4, const_cast<void*>(data), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return {ErrorKind::kLayout, std::string("cuTensorMapEncodeTiled refused ") + name + " (CUresult " +
                                    std::to_string(int(r)) + ", byte strides " + std::to_string(g.strides[0]) +
                                    "/" + std::to_string(g.strides[1]) + "/" + std::to_string(g.strides[2]) +
                                    "): use impl='mma' for this layout, or call .contiguous()"};
  return {};
}

}  // namespace

int device_binary_version() noexcept { return binary_version_of_current_device(); }

Status malloc_async(void** p, size_t bytes, void* stream, const char* what) {
  return launch_status(cudaMallocAsync(p, bytes, static_cast<cudaStream_t>(stream)), what);
}
Status free_async(void* p, void* stream, const char* what) {
  return launch_status(cudaFreeAsync(p, static_cast<cudaStream_t>(stream)), what);
}
Status memset_async(void* p, int value, size_t bytes, void* stream, const char* what) {
  return launch_status(cudaMemsetAsync(p, value, bytes, static_cast<cudaStream_t>(stream)), what);
}
Status memset_2d_async(void* p, size_t pitch, int value, size_t width, size_t height, void* stream, const char* what) {
  return launch_status(cudaMemset2DAsync(p, pitch, value, width, height, static_cast<cudaStream_t>(stream)), what);
}

Status encode_tiled(CUtensorMap* map, const char* name, const void* data, DType dtype, const TmaGeometry& g) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  Status st = tensor_map_encoder(&encode);
  if (!st.ok()) return st;
  return encode_one(encode, map, name, data, dtype, g);
}

std::string runtime_version() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

}  // namespace runtime
}  // namespace ffpa
