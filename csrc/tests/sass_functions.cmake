# Included by the SASS checks (check_tma_sass.cmake, check_lowp_sass.cmake).
# ffpa_sass_functions(<arch token> <out-var>): the SASS of sm_<token> in ${LIBRARY} as
# cuobjdump prints it, one list item per function (cuobjdump's "Function : <name>"
# headers; the header before the first function dropped). SASS lines end in " ;", which
# CMake would read as list separators: they are removed first. cuobjdump disassembles
# through nvdisasm, found next to it (PyPI nvidia-cuda-nvdisasm).
get_filename_component(_ffpa_sass_bin_dir "${CUOBJDUMP}" DIRECTORY)
set(ENV{PATH} "${_ffpa_sass_bin_dir}:$ENV{PATH}")
function(ffpa_sass_functions token out_var)
  execute_process(COMMAND "${CUOBJDUMP}" --dump-sass -arch "sm_${token}" "${LIBRARY}"
                  OUTPUT_VARIABLE sass ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump --dump-sass -arch sm_${token} failed (${rc}): ${err}")
  endif()
  string(REPLACE ";" "" sass "${sass}")
  string(REPLACE "Function : " ";" parts "${sass}")
  list(POP_FRONT parts)
  set(${out_var} "${parts}" PARENT_SCOPE)
endfunction()
