# cmake -DEXPECT_EXIT=zero|nonzero -DEXPECT_OUTPUT=<regex> -DCOMMAND=<arg|arg|...> -P expect_exit.cmake
# Runs COMMAND (its arguments separated by '|') and passes only when its exit status is the
# expected one AND its output (stdout and stderr together) matches EXPECT_OUTPUT. CTest's
# PASS_REGULAR_EXPRESSION alone ignores the exit status: a probe that must be refused would
# pass on its message even if it then went on and succeeded, and one that must succeed would
# pass on a printed line even if it failed after it. The tests whose verdict needs both go
# through here (csrc/CMakeLists.txt, index/tests/CMakeLists.txt, ctest/gpu/CMakeLists.txt).
cmake_minimum_required(VERSION 3.25)
if(NOT EXPECT_EXIT MATCHES "^(zero|nonzero)$")
  message(FATAL_ERROR "expect_exit.cmake: set -DEXPECT_EXIT=zero or -DEXPECT_EXIT=nonzero")
endif()
if(NOT DEFINED EXPECT_OUTPUT OR EXPECT_OUTPUT STREQUAL "")
  message(FATAL_ERROR "expect_exit.cmake: set -DEXPECT_OUTPUT=<regex> (what the output must contain)")
endif()
if(NOT COMMAND)
  message(FATAL_ERROR "expect_exit.cmake: set -DCOMMAND=<program|arg|...>")
endif()
string(REPLACE "|" ";" _cmd "${COMMAND}")
execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
message("${_out}")
if(EXPECT_EXIT STREQUAL "zero" AND NOT _rc STREQUAL "0")
  message(FATAL_ERROR "expect_exit.cmake: the command failed (${_rc}) where it must succeed")
elseif(EXPECT_EXIT STREQUAL "nonzero" AND (_rc STREQUAL "0" OR NOT _rc MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "expect_exit.cmake: the command exited with '${_rc}' where it must fail with an error status")
endif()
if(NOT _out MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "expect_exit.cmake: the output lacks /${EXPECT_OUTPUT}/")
endif()
message("expect_exit.cmake: exit ${_rc} (${EXPECT_EXIT}) and the output matched, as wanted")
