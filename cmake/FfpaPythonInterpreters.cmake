# FfpaPythonInterpreters.cmake: the CPython interpreters of the release set.
#
# The release set is CPython 3.10 to 3.14, as many as the build machine has. Each
# found interpreter gets one thin _C module and one CUDA wheel; a missing one is a
# warning that names it, and its wheel is left out. FFPA_PYTHON_INTERPRETERS
# (explicit paths) replaces discovery.

set(FFPA_PYTHON_RELEASE_MINORS 10 11 12 13 14)

# _ffpa_probe_python(<path> <out-tag> <out-minor>)
#   Runs the interpreter once; sets <out-tag> to cp3XY (empty when it is not a usable
#   CPython 3 with development headers) and <out-minor> to XY.
function(_ffpa_probe_python path out_tag out_minor out_why)
  execute_process(
    COMMAND "${path}" -c "import sys, sysconfig, os; i = sysconfig.get_paths()['include']; print(sys.implementation.name, sys.version_info[0], sys.version_info[1], os.path.exists(os.path.join(i, 'Python.h')))"
    OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(${out_tag} "" PARENT_SCOPE)
  set(${out_minor} "" PARENT_SCOPE)
  if(NOT _rc EQUAL 0)
    set(${out_why} "does not run" PARENT_SCOPE)
  elseif(NOT _out MATCHES "^cpython 3 ([0-9]+) (True|False)$")
    set(${out_why} "is not CPython 3 ('${_out}')" PARENT_SCOPE)
  elseif(CMAKE_MATCH_2 STREQUAL "False")
    set(${out_why} "has no development headers (Python.h)" PARENT_SCOPE)
  else()
    set(${out_tag} "cp3${CMAKE_MATCH_1}" PARENT_SCOPE)
    set(${out_minor} "${CMAKE_MATCH_1}" PARENT_SCOPE)
    set(${out_why} "" PARENT_SCOPE)
  endif()
endfunction()

# ffpa_find_python_interpreters(OUT_TAGS <var> OUT_PATHS <var> [MINORS <n>...])
#   OUT_TAGS   list of tags (cp310, cp311, ...), sorted
#   OUT_PATHS  list of interpreter paths, same order
#   MINORS     minor versions to look for (default: the release set 10..14)
function(ffpa_find_python_interpreters)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_TAGS;OUT_PATHS" "MINORS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_find_python_interpreters: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_MINORS)
    set(arg_MINORS ${FFPA_PYTHON_RELEASE_MINORS})
  endif()
  set(_tags "")
  set(_paths "")

  if(FFPA_PYTHON_INTERPRETERS)
    foreach(_p IN LISTS FFPA_PYTHON_INTERPRETERS)
      if(NOT EXISTS "${_p}")
        message(FATAL_ERROR "FFPA_PYTHON_INTERPRETERS: '${_p}' does not exist; give full paths to python3.X executables.")
      endif()
      _ffpa_probe_python("${_p}" _tag _minor _why)
      if(NOT _tag)
        message(FATAL_ERROR "FFPA_PYTHON_INTERPRETERS: '${_p}' ${_why}; give CPython 3.10+ interpreters with headers.")
      endif()
      if(_tag IN_LIST _tags)
        message(FATAL_ERROR "FFPA_PYTHON_INTERPRETERS: two interpreters for ${_tag}; give one per Python version.")
      endif()
      list(APPEND _tags ${_tag})
      list(APPEND _paths "${_p}")
    endforeach()
  else()
    # pyenv installs every version under $(pyenv root)/versions; its shims on PATH
    # fail unless a version is selected, so real binaries are probed, not shims.
    set(_pyenv_root "$ENV{PYENV_ROOT}")
    if(NOT _pyenv_root)
      set(_pyenv_root "$ENV{HOME}/.pyenv")
    endif()
    foreach(_m IN LISTS arg_MINORS)
      set(_found "")
      set(_cands "")
      find_program(_ffpa_py_on_path NAMES python3.${_m} NO_CACHE)
      if(_ffpa_py_on_path)
        list(APPEND _cands "${_ffpa_py_on_path}")
      endif()
      file(GLOB _pyenv_cands "${_pyenv_root}/versions/3.${_m}.*/bin/python3.${_m}")
      list(SORT _pyenv_cands COMPARE NATURAL ORDER DESCENDING)
      list(APPEND _cands ${_pyenv_cands})
      foreach(_c IN LISTS _cands)
        _ffpa_probe_python("${_c}" _tag _minor _why)
        if(_tag STREQUAL "cp3${_m}")
          set(_found "${_c}")
          break()
        endif()
      endforeach()
      if(_found)
        list(APPEND _tags cp3${_m})
        list(APPEND _paths "${_found}")
      else()
        message(WARNING "CPython 3.${_m} not found (PATH, pyenv): its wheel is left out of this release. Install it, or list interpreters explicitly with -DFFPA_PYTHON_INTERPRETERS=/path/python3.X;...")
      endif()
    endforeach()
  endif()
  set(${arg_OUT_TAGS} "${_tags}" PARENT_SCOPE)
  set(${arg_OUT_PATHS} "${_paths}" PARENT_SCOPE)
endfunction()

# ffpa_find_check_python(OUT_PATH <var> OUT_TAG <var> OUT_WHY <var>)
#   The one interpreter of the kernels-only configuration (FFPA_COMPONENTS=kernels):
#   the first of FFPA_PYTHON_INTERPRETERS, else python3 on PATH (the GPU image's).
#   OUT_PATH  the interpreter (a configure error when there is none: the package
#             tests and the bench need it)
#   OUT_TAG   cp3XY when the binding can be built for it: Python.h (under
#             FFPA_PYTHON_INCLUDE_DIR when set, else the interpreter's include dir)
#             and pybind11 (pybind11_INCLUDE_DIR, else importable by it); else empty
#   OUT_WHY   what is missing when OUT_TAG is empty
#   Without the binding the device check still builds and runs the C++ runner, which
#   times the kernels itself; SDPA is timed by a separate Python process.
set(FFPA_PYTHON_INCLUDE_DIR "" CACHE PATH
  "Python.h directory for the binding (default: asked from the interpreter; one interpreter only)")
function(ffpa_find_check_python)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_PATH;OUT_TAG;OUT_WHY" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_find_check_python: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(FFPA_PYTHON_INTERPRETERS)
    list(GET FFPA_PYTHON_INTERPRETERS 0 _py)
  else()
    find_program(_py NAMES python3 NO_CACHE)
  endif()
  if(NOT _py OR NOT EXISTS "${_py}")
    message(FATAL_ERROR "ffpa (FFPA_COMPONENTS=kernels): no Python 3 interpreter ('${_py}'); put python3 on PATH "
                        "or pass -DFFPA_PYTHON_INTERPRETERS=/path/to/python3.")
  endif()
  execute_process(
    COMMAND "${_py}" -c "import sys, sysconfig; print(sys.implementation.name, sys.version_info[0], sys.version_info[1]); print(sysconfig.get_paths()['include'])"
    OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES "^cpython 3 ([0-9]+)\n(.*)$")
    message(FATAL_ERROR "ffpa (FFPA_COMPONENTS=kernels): ${_py} is not a working CPython 3 (${_err}${_out}).")
  endif()
  set(_tag "cp3${CMAKE_MATCH_1}")
  set(_inc "${CMAKE_MATCH_2}")
  if(FFPA_PYTHON_INCLUDE_DIR)
    set(_inc "${FFPA_PYTHON_INCLUDE_DIR}")
  endif()
  set(_why "")
  if(NOT EXISTS "${_inc}/Python.h")
    set(_why "no Python.h under ${_inc}")
  elseif(NOT pybind11_INCLUDE_DIR)
    execute_process(COMMAND "${_py}" -c "import pybind11; print(pybind11.get_include())"
                    OUTPUT_VARIABLE _pb RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT _rc EQUAL 0 OR NOT EXISTS "${_pb}/pybind11/pybind11.h")
      set(_why "pybind11 is not importable by ${_py}")
    else()
      set(pybind11_INCLUDE_DIR "${_pb}" CACHE PATH "pybind11 headers (default: asked from the tools venv, .venv)" FORCE)
    endif()
  endif()
  if(_why)
    set(_tag "")
  endif()
  set(${arg_OUT_PATH} "${_py}" PARENT_SCOPE)
  set(${arg_OUT_TAG} "${_tag}" PARENT_SCOPE)
  set(${arg_OUT_WHY} "${_why}" PARENT_SCOPE)
endfunction()
