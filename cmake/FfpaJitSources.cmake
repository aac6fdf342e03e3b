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
include_guard(GLOBAL)
set(_FFPA_JIT_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/..")

function(ffpa_jit_source_files)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_VAR" "")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_OUT_VAR)
    message(FATAL_ERROR "ffpa_jit_source_files(OUT_VAR <var>)")
  endif()
  get_filename_component(root "${_FFPA_JIT_SOURCE_ROOT}" ABSOLUTE)
  file(GLOB_RECURSE files RELATIVE "${root}" CONFIGURE_DEPENDS
       "${root}/cmake/*.cmake" "${root}/cmake/*.json" "${root}/cmake/templates/*.in"
       "${root}/csrc/*.h" "${root}/csrc/*.cuh" "${root}/csrc/*.cu" "${root}/csrc/*.cpp"
       "${root}/csrc/*.cmake" "${root}/csrc/CMakeLists.txt"
       "${root}/python/ffpa_attn/*.py")
  list(FILTER files EXCLUDE REGEX "^csrc/tests/")
  # The emulated-device build (a test program built beside the library) is no part of a first-use build.
  list(FILTER files EXCLUDE REGEX "^csrc/emulated/")
  list(APPEND files CMakeLists.txt python/CMakeLists.txt tools/requirements-cutlass.txt)
  list(SORT files)
  set(${arg_OUT_VAR} "${files}" PARENT_SCOPE)
endfunction()
