# The kernel library's CUDA compile launcher (csrc/CMakeLists.txt):
#   cmake -DLOG_DIR=<dir> -P ptxas_capture.cmake -- <launcher and compiler command...>
# Runs the compile command (through the compiler cache when there is one), writes its
# ptxas -v output to <LOG_DIR>/<object name>.log (atomically) for the resource report
# (parse_ptxas.cmake), and passes every other line of the compiler's output through,
# so the build log shows warnings but not hundreds of "ptxas info" lines. A compiler
# cache replays the stored output on a hit, so cached objects still refresh their log.
# The report thus costs nothing beyond the library build itself.
cmake_minimum_required(VERSION 3.25)
set(cmd "")
set(seen_sep OFF)
set(object "")
set(prev "")
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  set(arg "${CMAKE_ARGV${i}}")
  if(seen_sep)
    list(APPEND cmd "${arg}")
    if(prev STREQUAL "-o")
      set(object "${arg}")
    endif()
    set(prev "${arg}")
  elseif(arg STREQUAL "--")
    set(seen_sep ON)
  endif()
endforeach()
if(NOT cmd OR NOT LOG_DIR)
  message(FATAL_ERROR "usage: cmake -DLOG_DIR=<dir> -P ptxas_capture.cmake -- <command...>")
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(object)
  get_filename_component(name "${object}" NAME)
  string(REGEX REPLACE "\\.(cu|cpp)\\.o(bj)?$" "" name "${name}")
  file(MAKE_DIRECTORY "${LOG_DIR}")
  file(WRITE "${LOG_DIR}/${name}.log.tmp" "${all}")
  file(RENAME "${LOG_DIR}/${name}.log.tmp" "${LOG_DIR}/${name}.log")
endif()
# Pass through what is not ptxas's resource report.
string(REGEX REPLACE "(^|\n)ptxas info[^\n]*" "" rest "${all}")
string(REGEX REPLACE "(^|\n)    [0-9]+ bytes stack frame[^\n]*" "" rest "${rest}")
string(STRIP "${rest}" rest)
if(rest)
  message(NOTICE "${rest}")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compile failed (${rc}): ${object}")
endif()
