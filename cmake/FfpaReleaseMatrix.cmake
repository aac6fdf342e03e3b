# FfpaReleaseMatrix.cmake: the release matrix, read from its one source,
# cmake/release-matrix.json (docs/release.md "How to change the release matrix").
#
#   channels     the CUDA wheel channels that exist (cu<CUDA major>); a build's channel
#                is cu<nvcc major> and must be one of these; docs may name no other
#   pythons      the CPython versions of a release, oldest first: one CUDA wheel each
#                (as many as the build machine has); the oldest is Requires-Python
#   cuda_archs   the fixed arch set of a release (profile full, and the ci preset)
#   head_dims    the release head dims (profile full, ci, the gpu-check preset, the CPU
#                emulator's release run, the device check)
#   dtypes       the input dtypes compiled everywhere
#   dev          the dev/mini defaults: head dims, and the arch used when no GPU is present
#   wheel_top_level  per project, the paths its wheels may install (read by index/CMakeLists.txt
#                into the engine's install rule, not here)
#
# Sets FFPA_RELEASE_CHANNELS, FFPA_RELEASE_PYTHONS, FFPA_RELEASE_CUDA_ARCHS, FFPA_RELEASE_HEAD_DIMS,
# FFPA_RELEASE_DTYPES, FFPA_DEV_HEAD_DIMS, FFPA_DEV_FALLBACK_ARCH and
# FFPA_RELEASE_MATRIX_FILE. A JSON file, not a CMake list, because the Python tools
# (ctest/gpu/rehearse.py, the notebook and acceptance scripts) read it too; changing
# it re-runs configure.

include_guard(GLOBAL)

set(FFPA_RELEASE_MATRIX_FILE "${CMAKE_CURRENT_LIST_DIR}/release-matrix.json")
if(NOT CMAKE_SCRIPT_MODE_FILE)   # cmake -P scripts read it too (FfpaSourceRecord.cmake)
  set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${FFPA_RELEASE_MATRIX_FILE}")
endif()
file(READ "${FFPA_RELEASE_MATRIX_FILE}" _ffpa_matrix_json)

# _ffpa_matrix_list(<out-var> <json-key>...): a JSON array of strings or numbers as a list.
function(_ffpa_matrix_list out_var)
  string(JSON _type ERROR_VARIABLE _err TYPE "${_ffpa_matrix_json}" ${ARGN})
  if(_err OR NOT _type STREQUAL "ARRAY")
    string(REPLACE ";" "." _path "${ARGN}")
    message(FATAL_ERROR "${FFPA_RELEASE_MATRIX_FILE}: '${_path}' must be a JSON array (${_err})")
  endif()
  string(JSON _n LENGTH "${_ffpa_matrix_json}" ${ARGN})
  set(_items "")
  if(_n GREATER 0)
    math(EXPR _last "${_n} - 1")
    foreach(_i RANGE ${_last})
      string(JSON _v GET "${_ffpa_matrix_json}" ${ARGN} ${_i})
      list(APPEND _items "${_v}")
    endforeach()
  endif()
  if(NOT _items)
    string(REPLACE ";" "." _path "${ARGN}")
    message(FATAL_ERROR "${FFPA_RELEASE_MATRIX_FILE}: '${_path}' is empty")
  endif()
  set(${out_var} "${_items}" PARENT_SCOPE)
endfunction()

_ffpa_matrix_list(FFPA_RELEASE_CHANNELS channels)
_ffpa_matrix_list(FFPA_RELEASE_PYTHONS pythons)
_ffpa_matrix_list(FFPA_RELEASE_CUDA_ARCHS cuda_archs)
_ffpa_matrix_list(FFPA_RELEASE_HEAD_DIMS head_dims)
_ffpa_matrix_list(FFPA_RELEASE_DTYPES dtypes)
_ffpa_matrix_list(FFPA_DEV_HEAD_DIMS dev head_dims)
string(JSON FFPA_DEV_FALLBACK_ARCH GET "${_ffpa_matrix_json}" dev fallback_arch)
foreach(_ffpa_channel IN LISTS FFPA_RELEASE_CHANNELS)
  if(NOT _ffpa_channel MATCHES "^cu[0-9]+$")
    message(FATAL_ERROR "${FFPA_RELEASE_MATRIX_FILE}: channel '${_ffpa_channel}' is not cu<CUDA major>")
  endif()
endforeach()
foreach(_ffpa_python IN LISTS FFPA_RELEASE_PYTHONS)
  if(NOT _ffpa_python MATCHES "^3\\.[0-9]+$")
    message(FATAL_ERROR "${FFPA_RELEASE_MATRIX_FILE}: python '${_ffpa_python}' is not 3.<minor>")
  endif()
endforeach()
