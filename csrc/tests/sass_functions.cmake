# Included by the SASS checks (check_tma_sass.cmake, check_lowp_sass.cmake) and by
# dump_sass.cmake, the fixture that disassembles the library once for both.
#
# ffpa_sass_functions(<arch token> <out-var> KEEP <regex>): the SASS of sm_<token> in
# ${LIBRARY}, one list item per function (cuobjdump's "Function : <name>" headers; the
# text before the first function dropped), holding only the instruction lines that match
# <regex>: a check reads the mnemonics it counts, and the release library's SASS is
# hundreds of megabytes that CMake's string operations would otherwise walk. The SASS
# comes from ${SASS_DIR}/sm_<token>.sass when SASS_DIR is given (the fixture
# ffpa.kernels.sass_dump), else from cuobjdump directly. cuobjdump disassembles through
# nvdisasm, found next to it (PyPI nvidia-cuda-nvdisasm).
get_filename_component(_ffpa_sass_bin_dir "${CUOBJDUMP}" DIRECTORY)
set(ENV{PATH} "${_ffpa_sass_bin_dir}:$ENV{PATH}")

# ffpa_sass_dump(<arch token> <file>): cuobjdump's SASS of sm_<token> in ${LIBRARY}.
function(ffpa_sass_dump token file)
  execute_process(COMMAND "${CUOBJDUMP}" --dump-sass -arch "sm_${token}" "${LIBRARY}"
                  OUTPUT_FILE "${file}.tmp" ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    file(REMOVE "${file}.tmp")
    message(FATAL_ERROR "cuobjdump --dump-sass -arch sm_${token} failed (${rc}): ${err}")
  endif()
  file(RENAME "${file}.tmp" "${file}")
endfunction()

function(ffpa_sass_functions token out_var)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "KEEP" "")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_KEEP)
    message(FATAL_ERROR "ffpa_sass_functions: use ffpa_sass_functions(<token> <var> KEEP <regex>)")
  endif()
  if(SASS_DIR)
    set(file "${SASS_DIR}/sm_${token}.sass")
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "${file} is missing: the fixture ffpa.kernels.sass_dump writes it")
    endif()
  else()
    string(RANDOM LENGTH 8 tag)
    set(file "${CMAKE_CURRENT_BINARY_DIR}/ffpa-sass-${token}-${tag}.sass")
    ffpa_sass_dump("${token}" "${file}")
  endif()
  # file(STRINGS) filters in C++ and keeps each line whole (its " ;" escaped); joined
  # back, the lines' own semicolons would be list separators, so they are removed.
  file(STRINGS "${file}" lines REGEX "Function : |${arg_KEEP}")
  if(NOT SASS_DIR)
    file(REMOVE "${file}")
  endif()
  list(JOIN lines "\n" sass)
  string(REPLACE ";" "" sass "${sass}")
  string(REPLACE "Function : " ";" parts "${sass}")
  list(POP_FRONT parts)
  set(${out_var} "${parts}" PARENT_SCOPE)
endfunction()
