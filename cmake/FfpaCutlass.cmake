# FfpaCutlass: where the CUTLASS / CuTe headers of the CuTe kernels come from, in one
# place (configure and the subset script, cmake/FfpaCutlassSubset.cmake, both use it).
#
# The pin: tools/requirements-cutlass.txt (PyPI nvidia-cutlass, hash-pinned; its wheel
# ships the headers under cutlass_library/source/include), installed into the tools
# venv by tools/bootstrap. The headers' own cutlass/version.h must match that pin.
#
#   ffpa_find_cutlass(OUT_INCLUDE_DIR <var> [OUT_VERSION <var>] [OUT_SOURCE <var>]
#                     [OUT_FILE_COUNT <var>] [SKIP_SUBSET] [REQUIRED])
#     Looks, in this order, for an include directory holding cute/tensor.hpp and
#     cutlass/version.h:
#       1. FFPA_CUTLASS_DIR (cache or -D; the directory itself or its include/), which
#          wins when set: a wrong one is an error, never a silent fallback;
#       2. the tools venv of FFPA_TOOLS_PYTHON (tools/bootstrap's .venv):
#          <venv>/lib/python3*/site-packages/cutlass_library/source/include;
#       3. the in-tree subset, <source>/.cutlass/include (gitignored), made by
#          `cmake -P cmake/FfpaCutlassSubset.cmake` for machines that reach no registry
#          (the bare GPU image: docs/perf.md). SKIP_SUBSET leaves it out (the subset
#          script must copy from a full copy).
#     OUT_SOURCE: "FFPA_CUTLASS_DIR", "venv" or "subset". OUT_FILE_COUNT: headers under
#     cute/ and cutlass/. REQUIRED: not found, or a version other than the pin, is a
#     FATAL_ERROR naming the fix; otherwise OUT_INCLUDE_DIR is set to "" and the reason
#     to FFPA_CUTLASS_NOT_FOUND_REASON.
#
#   ffpa_cutlass_pinned_version(<var>)   the pin's CUTLASS version, e.g. 4.2.0
include_guard(GLOBAL)

set(_FFPA_CUTLASS_MODULE_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(FFPA_CUTLASS_DIR "" CACHE PATH
    "CUTLASS include directory (holding cute/ and cutlass/); empty: the tools venv, else the in-tree subset .cutlass/")

function(ffpa_cutlass_pinned_version out_var)
  if(ARGC GREATER 1)
    message(FATAL_ERROR "ffpa_cutlass_pinned_version: unexpected arguments: ${ARGN}")
  endif()
  set(req "${_FFPA_CUTLASS_MODULE_DIR}/../tools/requirements-cutlass.txt")
  file(STRINGS "${req}" lines REGEX "^nvidia-cutlass==")
  if(NOT lines MATCHES "^nvidia-cutlass==([0-9]+)\\.([0-9]+)\\.([0-9]+)")
    message(FATAL_ERROR "ffpa: ${req} has no 'nvidia-cutlass==X.Y.Z...' line")
  endif()
  set(${out_var} "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}" PARENT_SCOPE)
endfunction()

# The version a header tree declares (cutlass/version.h), or "" when unreadable.
function(_ffpa_cutlass_version include_dir out_var)
  set(v "")
  if(EXISTS "${include_dir}/cutlass/version.h")
    file(STRINGS "${include_dir}/cutlass/version.h" defs REGEX "^#define CUTLASS_(MAJOR|MINOR|PATCH) +[0-9]+")
    foreach(part MAJOR MINOR PATCH)
      string(REGEX MATCH "#define CUTLASS_${part} +([0-9]+)" m "${defs}")
      list(APPEND v "${CMAKE_MATCH_1}")
    endforeach()
    list(JOIN v "." v)
  endif()
  set(${out_var} "${v}" PARENT_SCOPE)
endfunction()

function(ffpa_find_cutlass)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SKIP_SUBSET;REQUIRED" "OUT_INCLUDE_DIR;OUT_VERSION;OUT_SOURCE;OUT_FILE_COUNT" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_find_cutlass: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_OUT_INCLUDE_DIR)
    message(FATAL_ERROR "ffpa_find_cutlass: OUT_INCLUDE_DIR is required")
  endif()
  ffpa_cutlass_pinned_version(pin)
  get_filename_component(source_dir "${_FFPA_CUTLASS_MODULE_DIR}/.." ABSOLUTE)
  string(CONCAT fix "run tools/bootstrap (it installs the pinned nvidia-cutlass ${pin} headers into .venv), or pass "
          "-DFFPA_CUTLASS_DIR=<an include directory with cute/ and cutlass/ of CUTLASS ${pin}>. A machine "
          "without registry access (the bare GPU image) builds from the header subset: on a machine with the "
          "headers run `cmake -P cmake/FfpaCutlassSubset.cmake` in the source tree and carry its .cutlass/ "
          "directory along (docs/perf.md)")

  set(found "")
  set(source "")
  set(why "")
  if(FFPA_CUTLASS_DIR)
    foreach(cand "${FFPA_CUTLASS_DIR}" "${FFPA_CUTLASS_DIR}/include")
      if(EXISTS "${cand}/cute/tensor.hpp" AND EXISTS "${cand}/cutlass/version.h")
        set(found "${cand}")
        break()
      endif()
    endforeach()
    set(source "FFPA_CUTLASS_DIR")
    if(NOT found)
      set(why "FFPA_CUTLASS_DIR=${FFPA_CUTLASS_DIR} holds no cute/tensor.hpp and cutlass/version.h (nor under include/)")
    endif()
  else()
    set(cands "")
    if(FFPA_TOOLS_PYTHON)
      get_filename_component(venv_bin "${FFPA_TOOLS_PYTHON}" DIRECTORY)
      file(GLOB venv_cands "${venv_bin}/../lib/python3*/site-packages/cutlass_library/source/include")
      foreach(c IN LISTS venv_cands)
        list(APPEND cands "venv|${c}")
      endforeach()
    endif()
    if(NOT arg_SKIP_SUBSET)
      list(APPEND cands "subset|${source_dir}/.cutlass/include")
    endif()
    foreach(item IN LISTS cands)
      string(FIND "${item}" "|" bar)
      string(SUBSTRING "${item}" 0 ${bar} kind)
      math(EXPR start "${bar} + 1")
      string(SUBSTRING "${item}" ${start} -1 dir)
      if(EXISTS "${dir}/cute/tensor.hpp" AND EXISTS "${dir}/cutlass/version.h")
        get_filename_component(found "${dir}" ABSOLUTE)
        set(source "${kind}")
        break()
      endif()
    endforeach()
    if(NOT found)
      set(why "no CUTLASS headers in the tools venv (FFPA_TOOLS_PYTHON=${FFPA_TOOLS_PYTHON})")
      if(NOT arg_SKIP_SUBSET)
        string(APPEND why " nor in the in-tree subset ${source_dir}/.cutlass/include")
      endif()
    endif()
  endif()

  set(version "")
  if(found)
    _ffpa_cutlass_version("${found}" version)
    if(NOT version STREQUAL pin)
      set(why "the CUTLASS headers at ${found} (${source}) are version '${version}', but tools/requirements-cutlass.txt pins ${pin}")
      set(found "")
    endif()
  endif()
  if(NOT found)
    if(arg_REQUIRED)
      message(FATAL_ERROR "ffpa: the CuTe kernels need CUTLASS ${pin}'s headers: ${why}.\nFix: ${fix}.")
    endif()
    set(FFPA_CUTLASS_NOT_FOUND_REASON "${why}" PARENT_SCOPE)
  endif()

  set(${arg_OUT_INCLUDE_DIR} "${found}" PARENT_SCOPE)
  if(arg_OUT_VERSION)
    set(${arg_OUT_VERSION} "${version}" PARENT_SCOPE)
  endif()
  if(arg_OUT_SOURCE)
    set(${arg_OUT_SOURCE} "${source}" PARENT_SCOPE)
  endif()
  if(arg_OUT_FILE_COUNT)
    set(n 0)
    if(found)
      file(GLOB_RECURSE files "${found}/cute/*" "${found}/cutlass/*")
      list(LENGTH files n)
    endif()
    set(${arg_OUT_FILE_COUNT} "${n}" PARENT_SCOPE)
  endif()
endfunction()
