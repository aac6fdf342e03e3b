# cmake [-DFACTS=<kernel-facts.json>] -DMODE=load|validate [-DTOKENS=<a|b>] [-DNVCC=<nvcc>]
#       -P probe_facts.cmake
# The kernel facts' CMake readers on a given facts file (default cmake/kernel-facts.json),
# for ctest/facts/test_min_sm.py: MODE=load loads them (cmake/FfpaKernelFacts.cmake) and
# prints the floor; MODE=validate validates arch tokens (cmake/FfpaCudaArchs.cmake) against
# NVCC and prints the CUDA_ARCHITECTURES value. A malformed file is the FATAL_ERROR the
# configure would stop with.
cmake_minimum_required(VERSION 3.25)
get_filename_component(root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
list(APPEND CMAKE_MODULE_PATH "${root}/cmake")
include(FfpaKernelFacts)
include(FfpaCudaArchs)
if(FACTS)
  set(FFPA_KERNEL_FACTS_JSON "${FACTS}")
endif()
if(MODE STREQUAL "load")
  ffpa_load_kernel_facts()
  message("PROBE MIN_SM: ${FFPA_MIN_SM}")
elseif(MODE STREQUAL "validate")
  string(REPLACE "|" ";" tokens "${TOKENS}")
  ffpa_validate_cuda_archs(${tokens} OUT_VAR archs COMPILER "${NVCC}")
  message("PROBE ARCHS: ${archs}")
else()
  message(FATAL_ERROR "probe_facts.cmake: unknown MODE '${MODE}' (load, validate)")
endif()
