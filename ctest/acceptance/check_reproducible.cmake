# check_reproducible.cmake: two clean builds of the same commit must give
# byte-identical wheels. Run with cmake -P and:
#   -DSOURCE=<repo> -DWORK=<dir> -DARGS=<configure args joined by @@> -DNO_CCACHE=ON|OFF
# Both builds configure the same committed snapshot in two different build
# directories (so a build path leaking into a binary shows up as a difference).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../release/snapshot_repo.cmake")
string(REPLACE "@@" ";" ARGS "${ARGS}")

ffpa_test_snapshot(SOURCE "${SOURCE}" DEST "${WORK}/src")
if(NO_CCACHE)
  # A cache hit would hand back the first build's objects and hide a
  # non-deterministic compiler run.
  set(ENV{CCACHE_DISABLE} 1)
endif()
foreach(_n 1 2)
  set(_b "${WORK}/build-${_n}")
  set(_d "${WORK}/dist-${_n}")
  file(REMOVE_RECURSE "${_b}" "${_d}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${WORK}/src" -B "${_b}" -G Ninja ${ARGS}
      -DFFPA_BUILD_TESTING=OFF -DFFPA_RELEASE_DIST=${_d}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "configure ${_n} failed:\n${_o}${_e}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${_b}" --target package
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "build ${_n} failed:\n${_o}${_e}")
  endif()
  file(GLOB _w RELATIVE "${_d}" "${_d}/*.whl")
  list(SORT _w)
  set(_wheels_${_n} "${_w}")
endforeach()

if(NOT _wheels_1)
  message(FATAL_ERROR "no wheel was built")
endif()
if(NOT "${_wheels_1}" STREQUAL "${_wheels_2}")
  message(FATAL_ERROR "the two builds made different wheel sets:\n  ${_wheels_1}\n  ${_wheels_2}")
endif()
set(_diff "")
foreach(_w IN LISTS _wheels_1)
  file(SHA256 "${WORK}/dist-1/${_w}" _h1)
  file(SHA256 "${WORK}/dist-2/${_w}" _h2)
  message(STATUS "${_h1}  ${_w} (build 1)")
  message(STATUS "${_h2}  ${_w} (build 2)")
  if(NOT _h1 STREQUAL _h2)
    list(APPEND _diff "${_w}")
  endif()
endforeach()
if(_diff)
  message(FATAL_ERROR "not reproducible: ${_diff} differ between two clean builds of one commit")
endif()
list(LENGTH _wheels_1 _n)
message("check_reproducible: OK (${_n} wheel(s) byte-identical)")
