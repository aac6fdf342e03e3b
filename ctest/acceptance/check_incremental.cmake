# check_incremental.cmake: a version-only re-release recompiles nothing.
# Run with cmake -P and -DSOURCE=<repo> -DWORK=<dir> -DARGS=<configure args joined by @@>.
# Builds once at version 1.0.0, reconfigures at 1.0.1, asks Ninja what it would do
# (ninja -n), requires no compile step, then re-packs and checks the new wheels.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../release/snapshot_repo.cmake")
string(REPLACE "@@" ";" ARGS "${ARGS}")

ffpa_test_snapshot(SOURCE "${SOURCE}" DEST "${WORK}/src")
set(_b "${WORK}/build")
set(_d "${WORK}/dist")
file(REMOVE_RECURSE "${_b}" "${_d}")

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${_o}${_e}")
  endif()
  set(_step_out "${_o}${_e}" PARENT_SCOPE)
endfunction()

step("${CMAKE_COMMAND}" -S "${WORK}/src" -B "${_b}" -G Ninja ${ARGS}
     -DFFPA_BUILD_TESTING=OFF -DFFPA_RELEASE_DIST=${_d} -DFFPA_RELEASE_VERSION=1.0.0)
step("${CMAKE_COMMAND}" --build "${_b}" --target package)

step("${CMAKE_COMMAND}" -S "${WORK}/src" -B "${_b}" -DFFPA_RELEASE_VERSION=1.0.1)
# What would a build do now? Every command Ninja would run, without running it.
step("${CMAKE_COMMAND}" --build "${_b}" -- -n -v)
set(_plan "${_step_out}")
message("---- ninja -n after the version change ----\n${_plan}")
string(REGEX MATCHALL "[^\n]*(nvcc|c\\+\\+|g\\+\\+|/cc )[^\n]* -c [^\n]*" _compiles "${_plan}")
if(_compiles)
  message(FATAL_ERROR "a version-only change would recompile:\n${_compiles}")
endif()

string(TIMESTAMP _t0 "%s")
step("${CMAKE_COMMAND}" --build "${_b}" --target package)
string(TIMESTAMP _t1 "%s")
math(EXPR _dt "${_t1} - ${_t0}")
file(GLOB _new RELATIVE "${_d}" "${_d}/ffpa_attn-1.0.1*.whl")
file(GLOB _old RELATIVE "${_d}" "${_d}/ffpa_attn-1.0.0*.whl")
list(LENGTH _new _nn)
list(LENGTH _old _no)
if(NOT _nn EQUAL _no OR _nn EQUAL 0)
  message(FATAL_ERROR "re-release produced ${_nn} wheel(s) for 1.0.1, expected ${_no}: ${_new}")
endif()
message("check_incremental: OK - no compile step; ${_nn} wheel(s) re-packed as 1.0.1 in ${_dt} s: ${_new}")
