# FfpaPackWheels.cmake: CPack External package script (run by `cpack`, i.e. the
# `package` target). Do not include() this from a project: it reads the CPACK_FFPA_*
# variables that FfpaWheelPackaging.cmake stored in CPackConfig.cmake.
#
# It writes the release plan (ffpa-release-plan.json: version, channel, profile, the
# staged trees and their tags, output and site directories) and calls the engine
# once: `ffpa-index release --plan` packs every wheel in one pass (the kernel library
# shared by the CUDA wheels is compressed once), hashes each wheel once, and writes
# SHA256SUMS, requirements-<channel>.txt, ffpa-release-manifest.json, ffpa-build.log
# and the local site. Nothing here parses the engine's output.

cmake_minimum_required(VERSION 3.25)

function(_ffpa_fail)
  list(JOIN ARGN "" _msg)
  message(FATAL_ERROR "ffpa packaging: ${_msg}")
endfunction()

# _ffpa_json_array(<json-var> <member> STRING|NUMBER <items>...)
#   Sets <member> of the JSON object in <json-var> to an array of <items>.
function(_ffpa_json_array json_var member kind)
  set(_j "${${json_var}}")
  string(JSON _j SET "${_j}" ${member} "[]")
  set(_i 0)
  foreach(_item IN LISTS ARGN)
    if(kind STREQUAL "STRING")
      set(_item "\"${_item}\"")
    endif()
    string(JSON _j SET "${_j}" ${member} ${_i} "${_item}")
    math(EXPR _i "${_i} + 1")
  endforeach()
  set(${json_var} "${_j}" PARENT_SCOPE)
endfunction()

# A release must describe the sources it was built from: re-check right before
# writing, since files may have changed after configure.
# The same check as configure's guard (FfpaReleaseGuards.cmake, one list of shipped inputs).
if(CPACK_FFPA_PROFILE STREQUAL "full" AND NOT CPACK_FFPA_ALLOW_UNCOMMITTED)
  include("${CPACK_FFPA_SOURCE_DIR}/cmake/FfpaReleaseGuards.cmake")
  ffpa_uncommitted_inputs(_changed SOURCE_DIR "${CPACK_FFPA_SOURCE_DIR}")
  if(_changed)
    list(JOIN _changed "\n  " _list)
    _ffpa_fail("profile full builds from committed sources; commit these first (they changed after configure):\n  ${_list}")
  endif()
endif()

if(NOT EXISTS "${CPACK_FFPA_INDEX_TOOL}")
  _ffpa_fail("the engine ${CPACK_FFPA_INDEX_TOOL} is missing; build the project first (cmake --build <dir>).")
endif()

# The plan: what to build, decided here; the engine does the rest in one call
# (docs/release.md "The release plan").
set(_plan "{}")
string(JSON _plan SET "${_plan}" schema 1)
string(JSON _plan SET "${_plan}" name "\"ffpa-attn\"")
string(JSON _plan SET "${_plan}" version "\"${CPACK_FFPA_VERSION}\"")
string(JSON _plan SET "${_plan}" profile "\"${CPACK_FFPA_PROFILE}\"")
string(JSON _plan SET "${_plan}" source "{}")
string(JSON _plan SET "${_plan}" source commit "\"${CPACK_FFPA_COMMIT}\"")
if(CPACK_FFPA_DIRTY)
  string(JSON _plan SET "${_plan}" source dirty true)
else()
  string(JSON _plan SET "${_plan}" source dirty false)
endif()
string(JSON _plan SET "${_plan}" source date_epoch "${CPACK_FFPA_EPOCH}")
string(JSON _plan SET "${_plan}" toolchain "{}")
string(JSON _plan SET "${_plan}" toolchain cmake "\"${CPACK_FFPA_CMAKE_VERSION}\"")
string(JSON _plan SET "${_plan}" toolchain gcc "\"${CPACK_FFPA_GCC_VERSION}\"")
if(CPACK_FFPA_BUILD_KERNELS)
  string(JSON _plan SET "${_plan}" toolchain nvcc "\"${CPACK_FFPA_NVCC_VERSION}\"")
  string(JSON _plan SET "${_plan}" channel "\"${CPACK_FFPA_CHANNEL}\"")
  string(JSON _plan SET "${_plan}" cuda_version "\"${CPACK_FFPA_CUDA_VERSION}\"")
  string(JSON _plan SET "${_plan}" fatbin_compression "\"${CPACK_FFPA_FATBIN_COMPRESSION}\"")
  _ffpa_json_array(_plan archs STRING ${CPACK_FFPA_ARCHS})
  _ffpa_json_array(_plan head_dims NUMBER ${CPACK_FFPA_HEAD_DIMS})
  _ffpa_json_array(_plan dtypes STRING ${CPACK_FFPA_DTYPES})
else()
  string(JSON _plan SET "${_plan}" toolchain nvcc null)
  string(JSON _plan SET "${_plan}" channel null)
endif()
string(JSON _plan SET "${_plan}" metadata "\"${CPACK_FFPA_METADATA}\"")
string(JSON _plan SET "${_plan}" readme "\"${CPACK_FFPA_README}\"")
string(JSON _plan SET "${_plan}" readme_type "\"text/markdown\"")
string(JSON _plan SET "${_plan}" deflate_cache "\"${CPACK_FFPA_DEFLATE_CACHE}\"")
# No path of the build machine may leak into a shipped binary.
_ffpa_json_array(_plan forbid_paths STRING "${CPACK_FFPA_BUILD_DIR}")
string(JSON _plan SET "${_plan}" out_dir "\"${CPACK_FFPA_DIST}\"")
if(CPACK_FFPA_LOCAL_SITE)
  string(JSON _plan SET "${_plan}" site_dir "\"${CPACK_FFPA_LOCAL_SITE}\"")
else()
  string(JSON _plan SET "${_plan}" site_dir null)
endif()
string(JSON _plan SET "${_plan}" wheels "[]")
set(_i 0)
foreach(_spec IN LISTS CPACK_FFPA_SPECS)
  string(REPLACE "|" ";" _f "${_spec}")
  list(GET _f 0 _comp)
  list(GET _f 1 _version)
  list(GET _f 2 _tag)
  list(GET _f 3 _purelib)
  set(_w "{}")
  string(JSON _w SET "${_w}" component "\"${_comp}\"")
  string(JSON _w SET "${_w}" tree "\"${CPACK_TEMPORARY_DIRECTORY}/${_comp}\"")
  string(JSON _w SET "${_w}" tag "\"${_tag}\"")
  string(JSON _w SET "${_w}" version "\"${_version}\"")
  string(JSON _w SET "${_w}" root_is_purelib ${_purelib})
  if(_purelib STREQUAL "true")
    string(JSON _w SET "${_w}" kind "\"pure\"")
  else()
    string(JSON _w SET "${_w}" kind "\"cuda\"")
    string(JSON _w SET "${_w}" kernel_library "\"ffpa_attn/libffpa_kernels.so\"")
  endif()
  string(JSON _plan SET "${_plan}" wheels ${_i} "${_w}")
  math(EXPR _i "${_i} + 1")
endforeach()
set(_plan_file "${CPACK_TOPLEVEL_DIRECTORY}/ffpa-release-plan.json")
file(WRITE "${_plan_file}" "${_plan}\n")

execute_process(COMMAND "${CPACK_FFPA_INDEX_TOOL}" release --plan "${_plan_file}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  _ffpa_fail("ffpa-index release failed (plan ${_plan_file}); its message above names the problem.")
endif()
