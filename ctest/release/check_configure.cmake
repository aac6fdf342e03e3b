# check_configure.cmake: configure the project in a scratch snapshot and check
# what a user would see. Run with cmake -P and:
#   -DSOURCE=<repo> -DWORK=<scratch dir>
#   -DARGS=<configure args joined by @@>   e.g. -DFFPA_PROFILE=full@@-DFFPA_RELEASE_VERSION=1.2.3
#   -DMUTATE=none|dirty|untracked|docs-cu14|fake-nvcc-12|matrix-one-line|kernel-facts-one-line
#   -DEXPECT=pass|fail
#   -DREGEX=<regexes joined by @@ that must all appear in the configure output>
#   -DBUILD=ON  also run `cmake --build` and require that nothing was produced
#   -DFILES=<build-tree files joined by @@>  their contents are matched by REGEX too
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/snapshot_repo.cmake")
string(REPLACE "@@" ";" ARGS "${ARGS}")
string(REPLACE "@@" ";" REGEX "${REGEX}")
string(REPLACE "@@" ";" FILES "${FILES}")

set(_src "${WORK}/src")
set(_bld "${WORK}/build")
ffpa_test_snapshot(SOURCE "${SOURCE}" DEST "${_src}")
file(REMOVE_RECURSE "${_bld}")

set(_extra "")
if(MUTATE STREQUAL "dirty")
  file(APPEND "${_src}/README.md" "\nan uncommitted edit\n")
elseif(MUTATE STREQUAL "untracked")
  file(WRITE "${_src}/csrc/untracked_kernel.cu" "// not committed\n")
elseif(MUTATE STREQUAL "docs-cu14")
  file(MAKE_DIRECTORY "${_src}/docs")
  file(WRITE "${_src}/docs/channels.md" "Install from whl/cu14/ for CUDA 14.\n")
  execute_process(COMMAND git add -A WORKING_DIRECTORY "${_src}")
  execute_process(COMMAND git -c user.name=t -c user.email=t@l commit -qm docs WORKING_DIRECTORY "${_src}")
elseif(MUTATE STREQUAL "matrix-one-line")
  # docs/release.md "How to change the release matrix": head dim 384 and a cu14
  # channel are one edited line each in cmake/release-matrix.json, plus a docs line.
  file(READ "${_src}/cmake/release-matrix.json" _m)
  string(REPLACE "320, 512]" "320, 384, 512]" _m2 "${_m}")
  string(REPLACE "[\"cu13\"]" "[\"cu13\", \"cu14\"]" _m2 "${_m2}")
  if(_m2 STREQUAL _m)
    message(FATAL_ERROR "check_configure: cmake/release-matrix.json no longer has the lines this test edits")
  endif()
  file(WRITE "${_src}/cmake/release-matrix.json" "${_m2}")
  file(WRITE "${_src}/docs/channels.md" "CUDA 14 users install from whl/cu14/.\n")
  execute_process(COMMAND git add -A WORKING_DIRECTORY "${_src}")
  execute_process(COMMAND git -c user.name=t -c user.email=t@l commit -qm matrix WORKING_DIRECTORY "${_src}")
elseif(MUTATE STREQUAL "kernel-facts-one-line")
  # One edited line of cmake/kernel-facts.json (the TMA threshold, the lowest supported arch
  # (to 86, whatever it was), and the fp16 row on its own line) reaches the C++ headers, the
  # build-info module and the CMake checks.
  file(READ "${_src}/cmake/kernel-facts.json" _m)
  string(REPLACE "\"tma_min_sm\": 90," "\"tma_min_sm\": 100," _m2 "${_m}")
  string(REGEX REPLACE "\"min_sm\": [0-9]+," "\"min_sm\": 86," _m2 "${_m2}")
  string(REPLACE "\"rtol\": 1e-2, \"atol\": 2e-2," "\"rtol\": 1e-2, \"atol\": 4e-2," _m2 "${_m2}")
  if(_m2 STREQUAL _m)
    message(FATAL_ERROR "check_configure: cmake/kernel-facts.json no longer has the lines this test edits")
  endif()
  file(WRITE "${_src}/cmake/kernel-facts.json" "${_m2}")
  execute_process(COMMAND git add -A WORKING_DIRECTORY "${_src}")
  execute_process(COMMAND git -c user.name=t -c user.email=t@l commit -qm facts WORKING_DIRECTORY "${_src}")
elseif(MUTATE STREQUAL "fake-nvcc-12")
  # Stands in for an old toolkit: only `nvcc --version` is asked before the guard.
  file(WRITE "${WORK}/fake-nvcc/nvcc"
    "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
  file(CHMOD "${WORK}/fake-nvcc/nvcc" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  list(APPEND _extra "-DCMAKE_CUDA_COMPILER=${WORK}/fake-nvcc/nvcc")
elseif(NOT MUTATE STREQUAL "none" AND DEFINED MUTATE)
  message(FATAL_ERROR "check_configure: unknown MUTATE=${MUTATE}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${_src}" -B "${_bld}" -G Ninja ${ARGS} ${_extra}
  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
set(_all "${_out}${_err}")
foreach(_file IN LISTS FILES)
  if(NOT EXISTS "${_bld}/${_file}")
    message(FATAL_ERROR "configure did not write ${_file}")
  endif()
  file(READ "${_bld}/${_file}" _text)
  string(APPEND _all "\n---- ${_file} ----\n${_text}")
endforeach()
message("---- configure output ----\n${_all}\n--------------------------")

if(EXPECT STREQUAL "fail" AND _rc EQUAL 0)
  message(FATAL_ERROR "configure succeeded but was expected to fail")
elseif(EXPECT STREQUAL "pass" AND NOT _rc EQUAL 0)
  message(FATAL_ERROR "configure failed but was expected to succeed")
endif()
# CMake wraps long message lines; compare against a whitespace-normalised copy.
string(REGEX REPLACE "[ \t\r\n]+" " " _flat "${_all}")
foreach(_re IN LISTS REGEX)
  if(NOT _flat MATCHES "${_re}")
    message(FATAL_ERROR "configure output lacks /${_re}/")
  endif()
endforeach()

if(BUILD)
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${_bld}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _bo ERROR_VARIABLE _be)
  message("---- build output ----\n${_bo}${_be}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "build of the dry-run tree failed")
  endif()
  file(GLOB_RECURSE _made "${_bld}/*.o" "${_bld}/*.so" "${_bld}/*.whl" "${_bld}/bin/*")
  file(GLOB _dist "${WORK}/dist/*")
  if(_made OR _dist)
    message(FATAL_ERROR "the dry run built something: ${_made} ${_dist}")
  endif()
endif()
message("check_configure: OK")
