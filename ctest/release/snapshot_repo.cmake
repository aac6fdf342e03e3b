# snapshot_repo.cmake: helpers for tests that configure the project in a scratch
# checkout. The scratch repo is a snapshot of the *working tree* (tracked and
# untracked-but-not-ignored files), committed once, so tests exercise the code being
# tested rather than the last commit, and start from a clean tree.

# ffpa_test_snapshot(SOURCE <repo> DEST <dir>)
function(ffpa_test_snapshot)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE;DEST" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_test_snapshot: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  file(REMOVE_RECURSE "${arg_DEST}")
  file(MAKE_DIRECTORY "${arg_DEST}")
  execute_process(COMMAND git -c core.quotepath=off ls-files --cached --others --exclude-standard
    WORKING_DIRECTORY "${arg_SOURCE}" OUTPUT_VARIABLE _files RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "ffpa_test_snapshot: ${arg_SOURCE} is not a git checkout")
  endif()
  # CMake strings cannot hold NUL, so names are newline-separated.
  string(REPLACE ";" "\\;" _files "${_files}")
  string(REPLACE "\n" ";" _files "${_files}")
  foreach(_f IN LISTS _files)
    if(_f STREQUAL "" OR NOT EXISTS "${arg_SOURCE}/${_f}" OR IS_DIRECTORY "${arg_SOURCE}/${_f}")
      continue()
    endif()
    get_filename_component(_d "${_f}" DIRECTORY)
    file(COPY "${arg_SOURCE}/${_f}" DESTINATION "${arg_DEST}/${_d}")
  endforeach()
  foreach(_cmd
      "init;-q;-b;main"
      "add;-A"
      "-c;user.name=ffpa-test;-c;user.email=test@localhost;commit;-q;-m;snapshot")
    execute_process(COMMAND git ${_cmd} WORKING_DIRECTORY "${arg_DEST}" RESULT_VARIABLE _rc OUTPUT_QUIET)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "ffpa_test_snapshot: git ${_cmd} failed in ${arg_DEST}")
    endif()
  endforeach()
endfunction()
