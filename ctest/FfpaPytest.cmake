# FfpaPytest.cmake: pytest modules as CTest tests, one function for every directory
# (ctest/, index/tests, index/site/tests). Each test runs `python -m pytest` on one
# module with the shared fixtures of ctest/pytest_ffpa.py, its inputs as FFPA_*
# environment variables, and a work directory of its own under <build>/pytest-work
# (so tests of different modules never share scratch state and may run in parallel).
include_guard(GLOBAL)

# ffpa_add_pytest(<name> <module>
#                 [SELECT <expr>]          pytest -k: the tests of <module> this CTest test runs
#                 [ENV <NAME=value>...]    FFPA_* inputs (and any other variable the module reads)
#                 [LABELS <label>...]      CTest labels (from the closed set of ctest/CMakeLists.txt)
#                 [TIMEOUT <s>]            default 300
#                 [PROPERTIES <p> <v>...]) further test properties (RESOURCE_LOCK, FIXTURES_REQUIRED, ...)
function(ffpa_add_pytest name module)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "SELECT;TIMEOUT" "ENV;LABELS;PROPERTIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_add_pytest: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  get_filename_component(module "${module}" ABSOLUTE)
  set(select "")
  if(arg_SELECT)
    set(select -k "${arg_SELECT}")
  endif()
  add_test(NAME ${name}
    COMMAND "${FFPA_TOOLS_PYTHON}" -m pytest -q -rs -p no:cacheprovider -p pytest_ffpa "${module}" ${select})
  set_tests_properties(${name} PROPERTIES
    LABELS "${arg_LABELS}" TIMEOUT ${arg_TIMEOUT}
    ENVIRONMENT "FFPA_TEST_WORK=${CMAKE_BINARY_DIR}/pytest-work/${name};PYTHONDONTWRITEBYTECODE=1;${arg_ENV}"
    ENVIRONMENT_MODIFICATION "PYTHONPATH=path_list_prepend:${CMAKE_CURRENT_FUNCTION_LIST_DIR}"
    ${arg_PROPERTIES})
endfunction()
