# CUDA architecture tokens: validation against the nvcc in use, and the dev default.
#
#   ffpa_validate_cuda_archs(<token>... OUT_VAR <var> [COMPILER <nvcc>])
#     <token>...  arch tokens as users write them: 89, 90, 90a, 120f, ...
#     OUT_VAR     receives the CUDA_ARCHITECTURES value, e.g. "89-real;120f-real"
#     COMPILER    nvcc to ask (default: CMAKE_CUDA_COMPILER)
#   Valid tokens are the base archs nvcc lists (`nvcc --list-gpu-arch`: compute_XX)
#   and their `a` / `f` variants that this nvcc really compiles (nvcc 13 builds 90a
#   and 120f but does not list them), restricted to the archs from
#   cmake/kernel-facts.json's arch_rules.min_sm (cp.async, ldmatrix and bf16 mma).
#   Anything else is a configure error naming the valid tokens: a typo
#   must never silently drop an arch from a release.
#   CMake 3.25 accepts family/arch-specific tokens in CUDA_ARCHITECTURES: "120f-real"
#   becomes --generate-code=arch=compute_120f,code=[sm_120f] (checked with nvcc 13.0),
#   so no hand-written -gencode flags are needed. "-real" ships SASS only: the library
#   is built for the exact archs it names, and cuobjdump --list-elf shows them.
#
#   ffpa_detect_cuda_arch(<var>)
#     The compute capability of the first GPU nvidia-smi reports ("90" for 9.0),
#     else the release matrix's dev fallback arch (89): the dev preset builds for the
#     machine it runs on.

# The lowest arch the kernels support has its one home in cmake/kernel-facts.json; this
# module is included before the top level loads the facts (cmake/FfpaOptions.cmake) and by
# `cmake -P` probes, so its functions load them themselves.
include("${CMAKE_CURRENT_LIST_DIR}/FfpaKernelFacts.cmake")

# Base archs nvcc lists, plus the a/f variants it accepts, cached per compiler path
# (one `nvcc --dryrun` per candidate, about 10 ms each).
function(_ffpa_nvcc_valid_archs compiler out_var)
  if(NOT DEFINED FFPA_MIN_SM)
    ffpa_load_kernel_facts()
  endif()
  # The floor is part of the key: a changed arch_rules.min_sm must not reuse an old list.
  string(MAKE_C_IDENTIFIER "${compiler}-from-sm${FFPA_MIN_SM}" key)
  if(DEFINED _FFPA_VALID_ARCHS_${key})
    set(${out_var} "${_FFPA_VALID_ARCHS_${key}}" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${compiler}" --list-gpu-arch
                  OUTPUT_VARIABLE listed ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ffpa: '${compiler} --list-gpu-arch' failed (${rc}): ${err}\n"
                        "Point CMAKE_CUDA_COMPILER at a CUDA 13.x nvcc.")
  endif()
  string(REGEX MATCHALL "compute_[0-9]+" listed "${listed}")
  set(valid "")
  set(probe_src "${CMAKE_BINARY_DIR}/CMakeFiles/ffpa_arch_probe.cu")
  file(WRITE "${probe_src}" "__global__ void ffpa_arch_probe() {}\n")
  foreach(item IN LISTS listed)
    string(REPLACE "compute_" "" base "${item}")
    if(base LESS FFPA_MIN_SM)
      continue()
    endif()
    list(APPEND valid "${base}")
    foreach(suffix a f)
      execute_process(COMMAND "${compiler}" --dryrun -arch=sm_${base}${suffix} -c "${probe_src}" -o probe.o
                      RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
      if(probe_rc EQUAL 0)
        list(APPEND valid "${base}${suffix}")
      endif()
    endforeach()
  endforeach()
  set(_FFPA_VALID_ARCHS_${key} "${valid}" CACHE INTERNAL "CUDA arch tokens ${compiler} compiles")
  set(${out_var} "${valid}" PARENT_SCOPE)
endfunction()

function(ffpa_validate_cuda_archs)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "OUT_VAR;COMPILER" "")
  if(NOT ARG_OUT_VAR)
    message(FATAL_ERROR "ffpa_validate_cuda_archs: OUT_VAR is required")
  endif()
  set(tokens ${ARG_UNPARSED_ARGUMENTS})
  if(NOT tokens)
    message(FATAL_ERROR "ffpa: FFPA_CUDA_ARCHS is empty; give at least one arch, e.g. -DFFPA_CUDA_ARCHS=89")
  endif()
  set(compiler "${ARG_COMPILER}")
  if(NOT compiler)
    set(compiler "${CMAKE_CUDA_COMPILER}")
  endif()
  if(NOT compiler)
    message(FATAL_ERROR "ffpa_validate_cuda_archs: no nvcc (enable the CUDA language or pass COMPILER)")
  endif()
  # FFPA_MIN_SM from the file itself, whatever the caller's scope holds (a `cmake -P` probe
  # has no facts loaded; a -DFFPA_MIN_SM cache entry must not move the floor).
  ffpa_load_kernel_facts()
  _ffpa_nvcc_valid_archs("${compiler}" valid)
  string(REPLACE ";" " " valid_text "${valid}")
  set(result "")
  set(seen "")
  foreach(token IN LISTS tokens)
    string(STRIP "${token}" token)
    if(NOT token MATCHES "^[0-9]+[af]?$")
      message(FATAL_ERROR "ffpa: '${token}' in FFPA_CUDA_ARCHS is not an arch token (write 89, 90a, 120f; "
                          "no sm_ prefix, no -real/-virtual suffix). Valid for this nvcc: ${valid_text}")
    endif()
    if(NOT token IN_LIST valid)
      message(FATAL_ERROR "ffpa: CUDA arch '${token}' in FFPA_CUDA_ARCHS is not compiled by ${compiler} "
                          "for these kernels (sm_${FFPA_MIN_SM}+ needed). Valid tokens: ${valid_text}")
    endif()
    if(token IN_LIST seen)
      message(FATAL_ERROR "ffpa: CUDA arch '${token}' appears twice in FFPA_CUDA_ARCHS")
    endif()
    list(APPEND seen "${token}")
    list(APPEND result "${token}-real")
  endforeach()
  set(${ARG_OUT_VAR} "${result}" PARENT_SCOPE)
endfunction()

function(ffpa_detect_cuda_arch out_var)
  if(ARGC GREATER 1)
    message(FATAL_ERROR "ffpa_detect_cuda_arch: unexpected arguments: ${ARGN}")
  endif()
  set(arch "${FFPA_DEV_FALLBACK_ARCH}")   # cmake/release-matrix.json "dev"
  if(NOT arch)
    message(FATAL_ERROR "ffpa_detect_cuda_arch: include(FfpaReleaseMatrix) first (FFPA_DEV_FALLBACK_ARCH)")
  endif()
  find_program(FFPA_NVIDIA_SMI nvidia-smi)
  mark_as_advanced(FFPA_NVIDIA_SMI)
  if(FFPA_NVIDIA_SMI)
    execute_process(COMMAND "${FFPA_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND caps MATCHES "^([0-9]+)\\.([0-9]+)")
      set(arch "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    endif()
  endif()
  set(${out_var} "${arch}" PARENT_SCOPE)
endfunction()
