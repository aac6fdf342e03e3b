# The thin pybind11 module ffpa_attn._C, once per interpreter, linking the one kernel
# library (five Pythons cost one kernel build plus five small
# binding builds).
#
#   ffpa_add_python_binding(TARGET <name> PYTHON <interpreter>)
#     TARGET   name of the MODULE library target to create (e.g. ffpa_C_cp312)
#     PYTHON   path of the interpreter to build for; its include dir and EXT_SUFFIX
#              come from the one interpreter probe (ffpa_probe_python,
#              FfpaPythonInterpreters.cmake, which asked it during discovery) instead
#              of find_package(Python), which caches one interpreter per directory scope
#     EMULATED the module ffpa_attn._C_emulated over the emulated-device library
#              (csrc/emulated/CMakeLists.txt: ffpa_kernels_emulated, CPU arrays); a test
#              program, never in a wheel
#   The module is built from csrc/python/binding.cpp with pybind11's headers from the
#   tools venv (`<source>/.venv/bin/python -m pybind11 --includes`) or the
#   pybind11_INCLUDE_DIR cache variable. It is not linked to libpython (the
#   interpreter provides the symbols), links ffpa_kernels, carries RUNPATH $ORIGIN
#   only, and lands in ${FFPA_PYTHON_BUILD_DIR}/ffpa_attn/ next to libffpa_kernels.so,
#   as <name>_C<EXT_SUFFIX> so several interpreters' modules coexist.

include(FfpaPythonInterpreters)
get_filename_component(_FFPA_BINDING_SOURCE "${CMAKE_CURRENT_LIST_DIR}/../csrc/python/binding.cpp" ABSOLUTE)
set(pybind11_INCLUDE_DIR "" CACHE PATH "pybind11 headers (default: asked from the tools venv, .venv)")

function(_ffpa_pybind11_include out_var)
  if(pybind11_INCLUDE_DIR)
    set(${out_var} "${pybind11_INCLUDE_DIR}" PARENT_SCOPE)
    return()
  endif()
  set(venv_python "${FFPA_TOOLS_PYTHON}")
  if(NOT EXISTS "${venv_python}")
    message(FATAL_ERROR "ffpa: pybind11 not found: ${venv_python} does not exist. "
                        "Run tools/bootstrap (it installs the pinned pybind11 into .venv), "
                        "or pass -Dpybind11_INCLUDE_DIR=<dir containing pybind11/pybind11.h>.")
  endif()
  execute_process(COMMAND "${venv_python}" -c "import pybind11; print(pybind11.get_include())"
                  OUTPUT_VARIABLE inc RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${inc}/pybind11/pybind11.h")
    message(FATAL_ERROR "ffpa: pybind11 is not installed in the tools venv of ${FFPA_TOOLS_PYTHON} (${err}). "
                        "Run tools/bootstrap, or pass -Dpybind11_INCLUDE_DIR=<dir>.")
  endif()
  set(pybind11_INCLUDE_DIR "${inc}" CACHE PATH "pybind11 headers (default: asked from the tools venv, .venv)" FORCE)
  set(${out_var} "${inc}" PARENT_SCOPE)
endfunction()

function(ffpa_add_python_binding)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "EMULATED" "TARGET;PYTHON" "")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_add_python_binding: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required TARGET PYTHON)
    if(NOT ARG_${required})
      message(FATAL_ERROR "ffpa_add_python_binding: ${required} is required")
    endif()
  endforeach()
  set(_library ffpa_kernels)
  set(_module _C)
  if(ARG_EMULATED)
    set(_library ffpa_kernels_emulated)
    set(_module _C_emulated)
  endif()
  if(NOT TARGET ${_library})
    message(FATAL_ERROR "ffpa_add_python_binding: call it after add_subdirectory(csrc) (needs ${_library})")
  endif()
  if(NOT FFPA_PYTHON_BUILD_DIR)
    message(FATAL_ERROR "ffpa_add_python_binding: FFPA_PYTHON_BUILD_DIR is not set")
  endif()

  ffpa_probe_python("${ARG_PYTHON}" py)
  if(NOT py_TAG)
    message(FATAL_ERROR "ffpa: the binding cannot be built for ${ARG_PYTHON}: ${py_WHY}")
  endif()
  _ffpa_pybind11_include(pybind11_inc)

  add_library(${ARG_TARGET} MODULE "${_FFPA_BINDING_SOURCE}")
  target_include_directories(${ARG_TARGET} SYSTEM PRIVATE "${py_INCLUDE}" "${pybind11_inc}")
  target_link_libraries(${ARG_TARGET} PRIVATE ${_library})
  if(ARG_EMULATED)
    target_compile_definitions(${ARG_TARGET} PRIVATE FFPA_EMULATED_DEVICE=1)
  else()
    ffpa_shipped_target(${ARG_TARGET})
  endif()
  set_target_properties(${ARG_TARGET} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "${_module}"
    SUFFIX "${py_SUFFIX}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    # $ORIGIN only: libffpa_kernels.so sits next to the module in the package; no
    # build-tree path may end up in a wheel.
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "$ORIGIN"
    LIBRARY_OUTPUT_DIRECTORY "${FFPA_PYTHON_BUILD_DIR}/ffpa_attn")
endfunction()
