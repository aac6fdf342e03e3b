// The runtime / driver seam: everything the library's host code asks of the CUDA runtime
// and driver, in one interface without CUDA runtime types. The real library implements
// it with the CUDA runtime (csrc/src/runtime_cuda.cu); the emulated-device build with
// host memory and an emulated arch (csrc/emulated/runtime_emulated.cpp). Kernel launches
// have their own seam (ffpa/launch.cuh).
#pragma once

#include <cuda.h>  // CUtensorMap (128 opaque bytes); no libcuda link

#include <cstddef>
#include <string>

#include "ffpa/api.h"
#include "ffpa/tma_geometry.h"

namespace ffpa::runtime {

// The devices this process sees (0: none, or no driver).
int device_count() noexcept;
// The device holding p (device or managed memory), or a kDevice error naming `name`.
Status pointer_device(const void* p, const char* name, int* device);
// The current device (-1: none) and a switch to another.
int current_device() noexcept;
bool set_device(int device) noexcept;
// The current device's compute capability (major * 10 + minor; 0: unknown).
int current_device_cc() noexcept;
// The SASS arch of this library's code that the current device loads (e.g. 120 for 120f
// code on an RTX 50xx; 0: no loadable code).
int device_binary_version() noexcept;

// Stream-ordered memory (what `what` names goes into the error).
Status malloc_async(void** p, size_t bytes, void* stream, const char* what);
Status free_async(void* p, void* stream, const char* what);
Status memset_async(void* p, int value, size_t bytes, void* stream, const char* what);
Status memset_2d_async(void* p, size_t pitch, int value, size_t width, size_t height, void* stream, const char* what);

// cuTensorMapEncodeTiled of one map (found through the driver entry point the first
// time): 4-d, the geometry's dims, strides, box and swizzle, zero fill. A layout the
// driver refuses is a kLayout error naming `name`; a driver without the entry point, kDevice.
Status encode_tiled(CUtensorMap* map, const char* name, const void* data, DType dtype, const TmaGeometry& g);

// The runtime's version, "major.minor" (build_info()'s cuda_runtime).
std::string runtime_version();

}  // namespace ffpa::runtime
