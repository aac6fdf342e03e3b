# The build-cache test: two build trees, one shared Redis, no shared local cache.
#
#   cmake -DSOURCE_DIR=<project> -DWORK_DIR=<dir> -DTARGET=<target> -DPORT_FILE=<file>
#         -DCCACHE=<exe> [-DCONFIGURE_ARGS=<args joined by @@>] [-DJOBS=2] -P remote_hits.cmake
#
# 1. Configure <project> in WORK_DIR/A with FFPA_COMPILER_LAUNCHER=ccache and
#    FFPA_CCACHE_REMOTE=redis://127.0.0.1:<port>, local cache WORK_DIR/ccache-A; build
#    <target>; time it.
# 2. Delete the local cache of A.
# 3. Configure WORK_DIR/B (another directory) the same way with an empty local cache
#    WORK_DIR/ccache-B; build <target>; time it.
# 4. Read ccache's own per-compile statistics log for B (CCACHE_STATSLOG) and assert:
#    every CUDA object B built (*.cu.o) was a remote-storage hit, the number of such hits
#    equals the number of CUDA objects, and B had no cache miss at all. Print the
#    counters of `ccache --print-stats` and the B/A wall-time ratio (printed only: timing
#    on a shared machine is not a pass/fail criterion).
#
# A private, empty ccache config (CCACHE_CONFIGPATH) keeps the user's ccache.conf
# (a remote_only, a disable, a different base_dir) out of the result.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "@@" ";" CONFIGURE_ARGS "${CONFIGURE_ARGS}")

foreach(var IN ITEMS SOURCE_DIR WORK_DIR TARGET PORT_FILE CCACHE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "remote_hits.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT DEFINED JOBS)
  set(JOBS 2)
endif()
if(NOT EXISTS "${PORT_FILE}")
  message(FATAL_ERROR "no Redis port file ${PORT_FILE}: the redis fixture did not start "
                      "(run the whole test set, or ctest -R with the fixture's setup test)")
endif()
file(STRINGS "${PORT_FILE}" port LIMIT_COUNT 1)
set(remote "redis://127.0.0.1:${port}")

# Build trees share hits when they sit at the same depth under ccache's base dir (see
# cmake/FfpaCompilerLauncher.cmake). A and B are siblings; the base dir is the deepest
# parent of the source and of WORK_DIR, as the module would pick it.
file(REAL_PATH "${SOURCE_DIR}" src)
file(REAL_PATH "${WORK_DIR}" work)
set(basedir "${src}")
while(NOT basedir STREQUAL "/")
  string(FIND "${work}/" "${basedir}/" pos)
  if(pos EQUAL 0)
    break()
  endif()
  get_filename_component(basedir "${basedir}" DIRECTORY)
endwhile()
if(basedir STREQUAL "/")
  message(STATUS "work dir ${work} is outside the source tree: base dir / for this test "
                 "(build trees under the checkout get the source dir)")
endif()

file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")
file(TOUCH "${work}/ccache.conf")

function(_ffpa_timed_build tree out_seconds)
  set(cache "${work}/ccache-${tree}")
  set(env "${CMAKE_COMMAND}" -E env
      --unset=CCACHE_DISABLE --unset=CCACHE_REMOTE_STORAGE --unset=CCACHE_REMOTE_ONLY
      --unset=CCACHE_RECACHE --unset=CCACHE_READONLY
      "CCACHE_CONFIGPATH=${work}/ccache.conf" "CCACHE_DIR=${cache}"
      "CCACHE_STATSLOG=${work}/stats-${tree}.log")
  execute_process(
    COMMAND ${env} "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${work}/${tree}" -G Ninja
            -DFFPA_COMPILER_LAUNCHER=ccache "-DFFPA_CCACHE_EXECUTABLE=${CCACHE}"
            "-DFFPA_CCACHE_REMOTE=${remote}" "-DFFPA_CCACHE_BASEDIR=${basedir}"
            ${CONFIGURE_ARGS}
    OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configure of build tree ${tree} failed:\n${out}")
  endif()
  string(REGEX MATCHALL "-- ffpa: (compiler launcher|CUDA compile job pool)[^\n]*" lines "${out}")
  foreach(line IN LISTS lines)
    message(STATUS "[${tree}] ${line}")
  endforeach()
  string(TIMESTAMP t0 "%s%f" UTC)
  execute_process(
    COMMAND ${env} "${CMAKE_COMMAND}" --build "${work}/${tree}" --target "${TARGET}" -j "${JOBS}"
    OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  string(TIMESTAMP t1 "%s%f" UTC)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build of ${TARGET} in tree ${tree} failed:\n${out}")
  endif()
  math(EXPR ms "(${t1} - ${t0}) / 1000")
  set(${out_seconds} "${ms}" PARENT_SCOPE)
  execute_process(COMMAND ${env} "${CCACHE}" --print-stats OUTPUT_VARIABLE stats)
  set(summary "")
  foreach(counter IN ITEMS direct_cache_hit preprocessed_cache_hit cache_miss
                           remote_storage_hit remote_storage_miss remote_storage_write
                           remote_storage_error remote_storage_timeout)
    string(REGEX MATCH "(^|\n)${counter}\t([0-9]+)" _ "${stats}")
    string(APPEND summary " ${counter}=${CMAKE_MATCH_2}")
  endforeach()
  message(STATUS "[${tree}] ${TARGET} built in ${ms} ms; ccache --print-stats:${summary}")
endfunction()

_ffpa_timed_build(A ms_a)
file(REMOVE_RECURSE "${work}/ccache-A")
_ffpa_timed_build(B ms_b)

# The CUDA objects B built for the target (and whatever it depends on).
file(GLOB_RECURSE cu_objects LIST_DIRECTORIES false "${work}/B/*.cu.o")
list(LENGTH cu_objects n_cu)
if(n_cu EQUAL 0)
  message(FATAL_ERROR "build tree B holds no *.cu.o: ${TARGET} compiled no CUDA source")
endif()

# CCACHE_STATSLOG: one "# <input file>" line per compile, then one counter per line.
file(STRINGS "${work}/stats-B.log" log)
set(file "")
set(cu_remote_hits 0)
set(cu_other "")
set(misses "")
set(cu_seen "")
macro(_ffpa_close_entry)
  if(file MATCHES "[.]cu$")
    list(APPEND cu_seen "${file}")
    if("remote_storage_hit" IN_LIST counters)
      math(EXPR cu_remote_hits "${cu_remote_hits} + 1")
    else()
      string(REPLACE ";" "," c "${counters}")
      list(APPEND cu_other "${file} (${c})")
    endif()
  endif()
  if("cache_miss" IN_LIST counters)
    list(APPEND misses "${file}")
  endif()
endmacro()
foreach(line IN LISTS log)
  if(line MATCHES "^# (.*)$")
    # Saved first: the MATCHES in _ffpa_close_entry resets CMAKE_MATCH_1.
    set(next_file "${CMAKE_MATCH_1}")
    _ffpa_close_entry()
    set(file "${next_file}")
    set(counters "")
  else()
    list(APPEND counters "${line}")
  endif()
endforeach()
_ffpa_close_entry()
list(LENGTH cu_seen n_cu_compiles)

if(ms_a EQUAL 0)
  set(ms_a 1)
endif()
math(EXPR ratio_permille "(${ms_b} * 1000) / ${ms_a}")
math(EXPR ratio_int "${ratio_permille} / 1000")
math(EXPR ratio_frac "${ratio_permille} % 1000")
string(LENGTH "${ratio_frac}" len)
if(len EQUAL 1)
  set(ratio_frac "00${ratio_frac}")
elseif(len EQUAL 2)
  set(ratio_frac "0${ratio_frac}")
endif()
message(STATUS "B/A build time: ${ms_b} ms / ${ms_a} ms = ${ratio_int}.${ratio_frac}")
message(STATUS "B: ${n_cu} CUDA objects, ${n_cu_compiles} CUDA compiles through ccache, "
               "${cu_remote_hits} remote hits")

set(failures "")
if(cu_other)
  list(JOIN cu_other "\n  " s)
  string(APPEND failures "CUDA compiles in B that were not remote hits:\n  ${s}\n")
endif()
if(NOT cu_remote_hits EQUAL n_cu)
  string(APPEND failures "remote hits for CUDA sources (${cu_remote_hits}) != CUDA objects "
                         "in B (${n_cu})\n")
endif()
if(misses)
  list(JOIN misses "\n  " s)
  string(APPEND failures "cache misses in B:\n  ${s}\n")
endif()
if(failures)
  message(FATAL_ERROR "${failures}ccache log of B: ${work}/stats-B.log; a miss usually means "
                      "a build-tree path reached the cache key (see docs/build-cache.md)")
endif()
message(STATUS "PASS: all ${n_cu} CUDA objects of build tree B came from the remote cache")
