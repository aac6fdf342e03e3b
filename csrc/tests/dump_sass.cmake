# cmake -DCUOBJDUMP=<path> -DLIBRARY=<libffpa_kernels.so> -DARCHS=<a|b> -DSASS_DIR=<dir> -P dump_sass.cmake
# The fixture of the SASS checks (ffpa.kernels.sass_dump): the library's SASS, one file
# per arch (sm_<token>.sass), disassembled once for check_tma_sass.cmake and
# check_lowp_sass.cmake.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/sass_functions.cmake")
file(REMOVE_RECURSE "${SASS_DIR}")
file(MAKE_DIRECTORY "${SASS_DIR}")
string(REPLACE "|" ";" tokens "${ARCHS}")
foreach(token IN LISTS tokens)
  ffpa_sass_dump("${token}" "${SASS_DIR}/sm_${token}.sass")
  file(SIZE "${SASS_DIR}/sm_${token}.sass" size)
  message(STATUS "sm_${token}: ${size} bytes of SASS")
endforeach()
