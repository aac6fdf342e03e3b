# The CUTLASS header subset for machines that reach no package registry (the bare GPU
# image of the device check: docs/perf.md). Run in the source tree, on a machine with
# the pinned headers (tools/bootstrap) and nvcc:
#
#   cmake -P cmake/FfpaCutlassSubset.cmake
#
# It copies ONLY the CUTLASS headers the CuTe kernels include into the gitignored
# <source>/.cutlass/include, where cmake/FfpaCutlass.cmake finds them when there is no
# tools venv, and writes .cutlass/SUBSET.txt (version, where it was copied from, file
# count, bytes, the file list). The set is the kernels' include closure as nvcc sees
# it (nvcc -M over a translation unit including ffpa/cute/launch.cuh, the header every
# CuTe instance file includes), for the host pass and the device pass of every arch
# nvcc lists from cmake/kernel-facts.json's arch_rules.min_sm on, plus 90a and 120f, so
# any arch a kernels-only build picks preprocesses the same files. About 130 files / 6 MB, under the 64 MiB a carried
# tree may hold.
#
# Options (-D): OUT (default <source>/.cutlass), NVCC (default: nvcc on PATH, else
# /usr/local/cuda/bin/nvcc), FFPA_CUTLASS_DIR / FFPA_TOOLS_PYTHON (where the full
# headers are; default the tools venv <source>/.venv). The output is replaced
# atomically (a new directory renamed over the old one).
cmake_minimum_required(VERSION 3.25)
get_filename_component(source_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
if(NOT DEFINED FFPA_TOOLS_PYTHON)
  set(FFPA_TOOLS_PYTHON "${source_dir}/.venv/bin/python")
endif()
include(FfpaCutlass)
include(FfpaKernelFacts)
ffpa_load_kernel_facts()   # FFPA_MIN_SM: the archs the kernels support
ffpa_find_cutlass(OUT_INCLUDE_DIR inc OUT_VERSION version OUT_SOURCE from SKIP_SUBSET REQUIRED)

if(NOT OUT)
  set(OUT "${source_dir}/.cutlass")
endif()
get_filename_component(OUT "${OUT}" ABSOLUTE)
if(NOT NVCC)
  find_program(NVCC nvcc HINTS /usr/local/cuda/bin NO_CACHE)
endif()
if(NOT NVCC)
  message(FATAL_ERROR "FfpaCutlassSubset: no nvcc on PATH or in /usr/local/cuda/bin; pass -DNVCC=<path>")
endif()

execute_process(COMMAND "${NVCC}" --list-gpu-arch OUTPUT_VARIABLE listed RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "FfpaCutlassSubset: '${NVCC} --list-gpu-arch' failed (${rc}): ${err}")
endif()
string(REGEX MATCHALL "compute_[0-9]+" listed "${listed}")
# One nvcc -M for every base arch, one per arch-/family-specific variant (nvcc refuses
# sm_120 and sm_120f in one command).
set(archs "")
set(runs "")
foreach(item IN LISTS listed)
  string(REPLACE "compute_" "" a "${item}")
  if(a GREATER_EQUAL FFPA_MIN_SM)
    list(APPEND archs "${a}")
    string(APPEND base_run "--generate-code=arch=compute_${a},code=sm_${a}|")
  endif()
endforeach()
list(APPEND runs "${base_run}")
foreach(a 90a 120f)
  list(APPEND archs "${a}")
  list(APPEND runs "--generate-code=arch=compute_${a},code=sm_${a}")
endforeach()

string(RANDOM LENGTH 8 tag)
set(tmp "${OUT}.tmp-${tag}")
file(REMOVE_RECURSE "${tmp}")
file(MAKE_DIRECTORY "${tmp}/include")
# The kernels include the generated fact headers (cmake/FfpaKernelFacts.cmake).
ffpa_generate_kernel_facts(OUT_INCLUDE_DIR "${tmp}/facts" OUT_PY_VAR unused)
set(tu "${tmp}/closure.cu")
file(WRITE "${tu}" "#include \"ffpa/cute/launch.cuh\"\n")
set(deps "")
foreach(run IN LISTS runs)
  string(REPLACE "|" ";" gencode "${run}")
  list(REMOVE_ITEM gencode "")
  execute_process(
    COMMAND "${NVCC}" -std=c++17 -M -x cu ${gencode} "-I${source_dir}/csrc/include" "-I${source_dir}/csrc/kernels"
            "-I${tmp}/facts" "-I${inc}" "${tu}" -o "${tmp}/closure.d"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    file(REMOVE_RECURSE "${tmp}")
    message(FATAL_ERROR "FfpaCutlassSubset: nvcc -M ${gencode} failed (${rc}):\n${err}")
  endif()
  file(READ "${tmp}/closure.d" d)
  string(APPEND deps " ${d}")
endforeach()
file(REMOVE "${tu}" "${tmp}/closure.d")
file(REMOVE_RECURSE "${tmp}/facts")  # only CUTLASS's headers are carried
string(REGEX REPLACE "\\\\\n" " " deps "${deps}")
string(REGEX REPLACE "[ \t\n]+" ";" deps "${deps}")
file(REAL_PATH "${inc}" inc_real)
set(rels "cutlass/version.h")  # FfpaCutlass.cmake reads the version from it
foreach(dep IN LISTS deps)
  if(dep STREQUAL "" OR dep MATCHES ":$")
    continue()
  endif()
  if(NOT IS_ABSOLUTE "${dep}")
    continue()
  endif()
  file(REAL_PATH "${dep}" real)
  string(FIND "${real}" "${inc_real}/" pos)
  if(pos EQUAL 0)
    file(RELATIVE_PATH rel "${inc_real}" "${real}")
    list(APPEND rels "${rel}")
  endif()
endforeach()
list(REMOVE_DUPLICATES rels)
list(SORT rels)
set(bytes 0)
foreach(rel IN LISTS rels)
  get_filename_component(dir "${tmp}/include/${rel}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  file(COPY_FILE "${inc_real}/${rel}" "${tmp}/include/${rel}")
  file(SIZE "${inc_real}/${rel}" size)
  math(EXPR bytes "${bytes} + ${size}")
endforeach()
list(LENGTH rels n)
list(JOIN rels "\n" listing)
list(JOIN archs " " archs_text)
file(WRITE "${tmp}/SUBSET.txt"
  "# The CUTLASS headers the CuTe kernels include, copied by cmake/FfpaCutlassSubset.cmake; do not edit.\n"
  "version=${version}\nfrom=${from}: ${inc_real}\nfiles=${n}\nbytes=${bytes}\narchs=${archs_text}\n\n${listing}\n")
file(REMOVE_RECURSE "${OUT}")
file(RENAME "${tmp}" "${OUT}")
math(EXPR kib "${bytes} / 1024")
message(STATUS "ffpa: CUTLASS ${version} subset: ${n} headers (${kib} KiB) from ${inc_real} -> ${OUT}/include")
