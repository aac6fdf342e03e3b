# FfpaJitSources: the CMake sources every wheel carries under ffpa_attn/_src, from which
# ffpa_attn.jit builds the kernels-only tree (FFPA_COMPONENTS=kernels) for a GPU the wheel
# has no code for (docs/install.md, "First-use builds").
#
#   ffpa_jit_source_files(OUT_VAR <var>)
#     <var>: the files' paths relative to the source root, sorted. What the kernels-only
#     configuration reads (the top-level CMakeLists.txt, cmake/, csrc/ without its tests,
#     python/'s package and its CMakeLists.txt, the CUTLASS pin) and nothing else: no
#     release engine, tests, docs or notebooks. Text files only (the pure wheel still
#     holds no binary); by suffix, so a stray binary or editor file in those directories
#     is never shipped.
#
# In a git checkout of this tree the files are git's tracked files (its index), as the
# sdist's are (tools/pep517): an untracked file (a local secret, notes) never ships, and
# a tracked symlink, or a tracked file the worktree replaced by a link, is refused (its
# target could be anything on the build machine). Outside git (an unpacked sdist, which
# holds exactly the tracked files of its commit) the files present are taken.
#
# Nothing here is a variable of the including directory: the module is included from
# several directories (python/, the top level) under one include guard.
include_guard(GLOBAL)

# _ffpa_jit_git_files(<root> <out-var>)
#   <out-var>: NOTFOUND when <root> is no git checkout of its own, else the tracked paths
#   the suffix rules (below, as regexes over paths relative to the root) take.
function(_ffpa_jit_git_files root out_var)
  set(_rules
    "^cmake/.*\\.(cmake|json)$" "^cmake/templates/.*\\.in$"
    "^csrc/.*\\.(h|cuh|cu|cpp|cmake)$" "^csrc/(.*/)?CMakeLists\\.txt$"
    "^python/ffpa_attn/.*\\.py$"
    "^CMakeLists\\.txt$" "^python/CMakeLists\\.txt$" "^tools/requirements-cutlass\\.txt$")
  execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY "${root}"
                  OUTPUT_VARIABLE _top RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    set(${out_var} NOTFOUND PARENT_SCOPE)
    return()
  endif()
  file(REAL_PATH "${_top}" _top)
  file(REAL_PATH "${root}" _root)
  if(NOT _top STREQUAL _root)
    # A copy inside another repository: that repository's index is not this tree's.
    set(${out_var} NOTFOUND PARENT_SCOPE)
    return()
  endif()
  # -s: the mode of each entry. Names stay quoted by git when they hold anything unusual,
  # which the name check below refuses.
  execute_process(COMMAND git -c core.quotePath=true ls-files -s --
                          CMakeLists.txt cmake csrc python/CMakeLists.txt python/ffpa_attn
                          tools/requirements-cutlass.txt
                  WORKING_DIRECTORY "${root}" OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "ffpa: git ls-files failed in ${root} (${_err}); the wheels' sources are git's tracked "
                        "files: repair the checkout (git status) and configure again.")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  set(_files "")
  foreach(_line IN LISTS _lines)
    if(_line STREQUAL "")
      continue()
    endif()
    if(NOT _line MATCHES "^([0-7]+) [0-9a-f]+ [0-3]\t(.*)$")
      message(FATAL_ERROR "ffpa: git ls-files printed '${_line}', not '<mode> <object> <stage>\\t<path>'.")
    endif()
    set(_mode "${CMAKE_MATCH_1}")
    set(_path "${CMAKE_MATCH_2}")
    set(_shipped FALSE)
    foreach(_rule IN LISTS _rules)
      if(_path MATCHES "${_rule}")
        set(_shipped TRUE)
      endif()
    endforeach()
    # csrc/emulated: the emulated-device build, a test program built beside the library,
    # is no part of a first-use build.
    if(NOT _shipped OR _path MATCHES "^csrc/(tests|emulated)/")
      continue()
    endif()
    if(NOT _path MATCHES "^[A-Za-z0-9_./+-]+$")
      message(FATAL_ERROR "ffpa: the tracked file ${_path} would ship in every wheel (ffpa_attn/_src), and its name "
                          "holds characters other than letters, digits and _ . / + -: rename it (git mv).")
    endif()
    if(NOT _mode MATCHES "^100(644|755)$" OR IS_SYMLINK "${root}/${_path}")
      message(FATAL_ERROR "ffpa: ${_path} would ship in every wheel (ffpa_attn/_src) and is a symlink or a "
                          "submodule (git mode ${_mode}, or a link in the worktree): the wheels' sources are plain "
                          "files; put the file itself there (git checkout -- ${_path}).")
    endif()
    # A tracked file deleted in the worktree is not there to ship; the dirty flag says so.
    if(EXISTS "${root}/${_path}")
      list(APPEND _files "${_path}")
    endif()
  endforeach()
  set(${out_var} "${_files}" PARENT_SCOPE)
endfunction()

function(ffpa_jit_source_files)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_VAR" "")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_OUT_VAR)
    message(FATAL_ERROR "ffpa_jit_source_files(OUT_VAR <var>)")
  endif()
  get_filename_component(root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/.." ABSOLUTE)
  _ffpa_jit_git_files("${root}" files)
  if(files STREQUAL "NOTFOUND")
    set(_depends CONFIGURE_DEPENDS)
    if(CMAKE_SCRIPT_MODE_FILE)
      set(_depends "")
    endif()
    file(GLOB_RECURSE files RELATIVE "${root}" ${_depends}
         "${root}/cmake/*.cmake" "${root}/cmake/*.json" "${root}/cmake/templates/*.in"
         "${root}/csrc/*.h" "${root}/csrc/*.cuh" "${root}/csrc/*.cu" "${root}/csrc/*.cpp"
         "${root}/csrc/*.cmake" "${root}/csrc/CMakeLists.txt"
         "${root}/python/ffpa_attn/*.py")
    list(FILTER files EXCLUDE REGEX "^csrc/(tests|emulated)/")
    list(APPEND files CMakeLists.txt python/CMakeLists.txt tools/requirements-cutlass.txt)
  endif()
  list(REMOVE_DUPLICATES files)
  list(SORT files)
  set(${arg_OUT_VAR} "${files}" PARENT_SCOPE)
endfunction()
