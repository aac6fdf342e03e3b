# FfpaOptions.cmake: every cache option of the build, with per-profile defaults.
#
# Profiles (docs/release.md, README):
#   full  kernels for the fixed release arch set and head dims of
#         cmake/release-matrix.json, every
#         interpreter found, plus the pure wheel; release version, committed sources
#   pure  no extension at all; one py3-none-any wheel; release version
#   mini  development: head dim 128, one arch; never publishable
#   dev   day-to-day: like mini by default; the ci preset widens it to the release
#         matrix without the release guards (CI has no release version)

set(FFPA_PROFILE "dev" CACHE STRING "Build profile: full, pure, mini or dev")
set_property(CACHE FFPA_PROFILE PROPERTY STRINGS full pure mini dev)
if(NOT FFPA_PROFILE MATCHES "^(full|pure|mini|dev)$")
  message(FATAL_ERROR "FFPA_PROFILE='${FFPA_PROFILE}' is not a profile; use full, pure, mini or dev (or a preset: cmake --list-presets).")
endif()

# What this tree builds. "kernels" is the GPU-check configuration for a bare GPU
# image (nvcc, CMake, Ninja and a Python 3; no OpenSSL, zlib, nlohmann_json, GTest or
# tools venv): csrc/ (kernel library, device-check runner, resource report), the
# staged Python package, and its binding when the interpreter has Python.h and
# pybind11. No release engine, wheels, site or release tests (ctest/gpu/device_check.sh).
set(FFPA_COMPONENTS "all" CACHE STRING "all: the release system; kernels: only the kernels, package and device check")
set_property(CACHE FFPA_COMPONENTS PROPERTY STRINGS all kernels)
if(NOT FFPA_COMPONENTS MATCHES "^(all|kernels)$")
  message(FATAL_ERROR "FFPA_COMPONENTS='${FFPA_COMPONENTS}' is not a component set; use all or kernels.")
endif()
if(FFPA_COMPONENTS STREQUAL "kernels" AND NOT FFPA_PROFILE STREQUAL "dev")
  message(FATAL_ERROR "FFPA_COMPONENTS=kernels builds no wheels, so it needs FFPA_PROFILE=dev (it is '${FFPA_PROFILE}'); "
                      "use the gpu-check preset, or FFPA_COMPONENTS=all for a release profile.")
endif()

include(FfpaReleaseMatrix)
set(FFPA_CHANNEL "" CACHE STRING "CUDA wheel channel (default: cu<CUDA major> of the nvcc in use; the channels are cmake/release-matrix.json's)")
set(FFPA_RELEASE_VERSION "" CACHE STRING "Release version X.Y.Z (wins over git; env FFPA_RELEASE_VERSION too)")
option(FFPA_RELEASE_DRY_RUN "Print the release plan and build nothing" OFF)
option(FFPA_RELEASE_ALLOW_UNCOMMITTED "Allow profile full from uncommitted sources (loud warning)" OFF)
option(FFPA_BUILD_TESTING "Register the CTest suite" ON)
# A wheel built from source for one machine (`pip install .`, the local preset, the
# PEP 517 backend in tools/pep517): the CUDA wheels' version ends in .local
# (X.Y.Z+cu13.local), so nobody mistakes it for a release wheel, and pip still takes it
# for ==X.Y.Z. Only the dev profile builds one: a release never carries the marker.
option(FFPA_LOCAL_BUILD "Mark the CUDA wheels as a local build from source (+cuNN.local)" OFF)
if(FFPA_LOCAL_BUILD AND NOT FFPA_PROFILE STREQUAL "dev")
  message(FATAL_ERROR "FFPA_LOCAL_BUILD=ON builds wheels for this machine only, so it needs FFPA_PROFILE=dev "
                      "(it is '${FFPA_PROFILE}'); use the local preset (cmake --preset local) or pip install ., "
                      "or drop -DFFPA_LOCAL_BUILD for a release profile.")
endif()

if(FFPA_PROFILE MATCHES "^(full|pure)$")
  set(_ffpa_default_dist "${CMAKE_SOURCE_DIR}/dist")
else()
  set(_ffpa_default_dist "${CMAKE_BINARY_DIR}/dist")
endif()
set(FFPA_RELEASE_DIST "${_ffpa_default_dist}" CACHE PATH
  "Where wheels, SHA256SUMS and the manifest go (release profiles: <source>/dist)")

if(FFPA_COMPONENTS STREQUAL "kernels")
  set(FFPA_BUILD_KERNELS ON CACHE BOOL "Build the CUDA kernel library and the _C modules" FORCE)
elseif(FFPA_PROFILE STREQUAL "pure")
  # The pure profile has no extension at all: no nvcc, no compiler cache needed.
  set(FFPA_BUILD_KERNELS OFF CACHE BOOL "Build the CUDA kernel library and the _C modules" FORCE)
else()
  set(FFPA_BUILD_KERNELS ON CACHE BOOL "Build the CUDA kernel library and the _C modules")
endif()

# The release matrix (cmake/release-matrix.json) gives every default below.
# FFPA_MATRIX picks which part: "release" (its archs, head dims and dtypes: the ci
# preset; profile full always), "release-dims" (its head dims and dtypes for the
# present GPU's arch: the gpu-check preset) or "dev" (one head dim, the present GPU).
include(FfpaCudaArchs)
set(FFPA_MATRIX "" CACHE STRING "Kernel matrix defaults: release, release-dims or dev (empty: release for profile full, else dev)")
set_property(CACHE FFPA_MATRIX PROPERTY STRINGS "" release release-dims dev)
set(_ffpa_matrix "${FFPA_MATRIX}")
if(NOT _ffpa_matrix)
  if(FFPA_PROFILE STREQUAL "full")
    set(_ffpa_matrix release)
  else()
    set(_ffpa_matrix dev)
  endif()
endif()
if(NOT _ffpa_matrix MATCHES "^(release|release-dims|dev)$")
  message(FATAL_ERROR "FFPA_MATRIX='${FFPA_MATRIX}' is not a matrix; use release, release-dims or dev.")
endif()
if(FFPA_PROFILE STREQUAL "full" AND NOT _ffpa_matrix STREQUAL "release")
  message(FATAL_ERROR "profile full builds the release matrix; drop -DFFPA_MATRIX=${FFPA_MATRIX}.")
endif()
if(_ffpa_matrix STREQUAL "release")
  set(_ffpa_default_archs "${FFPA_RELEASE_CUDA_ARCHS}")
else()
  ffpa_detect_cuda_arch(_ffpa_default_archs)
endif()
if(_ffpa_matrix STREQUAL "dev")
  set(_ffpa_default_dims "${FFPA_DEV_HEAD_DIMS}")
else()
  set(_ffpa_default_dims "${FFPA_RELEASE_HEAD_DIMS}")
endif()
set(FFPA_CUDA_ARCHS "${_ffpa_default_archs}" CACHE STRING "CUDA archs (e.g. 89;120f; a/f suffixes allowed)")
set(FFPA_HEAD_DIMS "${_ffpa_default_dims}" CACHE STRING "Head dims to compile (multiples of 64 up to 1024)")
set(FFPA_DTYPES "${FFPA_RELEASE_DTYPES}" CACHE STRING "Input dtypes to compile (fp16, bf16)")
# Commas are accepted as separators too: shells make ';' awkward on command lines.
foreach(_ffpa_list_var FFPA_CUDA_ARCHS FFPA_HEAD_DIMS FFPA_DTYPES)
  string(REPLACE "," ";" ${_ffpa_list_var} "${${_ffpa_list_var}}")
endforeach()
set(FFPA_PYTHON_INTERPRETERS "" CACHE STRING "Explicit interpreter paths (default: discover the pythons of cmake/release-matrix.json)")

set(FFPA_TOOLS_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
  "Python of the pinned tools venv (made by tools/bootstrap): pytest, pip, twine, nbclient")
set(FFPA_PYTHON_BUILD_DIR "${CMAKE_BINARY_DIR}/python")
