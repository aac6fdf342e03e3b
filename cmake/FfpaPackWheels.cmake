# FfpaPackWheels.cmake: CPack External package script (run by `cpack`, i.e. the
# `package` target). Do not include() this from a project: it reads the two
# CPACK_FFPA_* variables FfpaWheelPackaging.cmake stored in CPackConfig.cmake, the
# release plan (written at configure time, FfpaReleasePlan.cmake) and the engine.
#
# Two steps: the committed-sources check of a release, then one engine call,
# `ffpa-index release --plan --staging`, which packs every wheel from the trees CPack
# staged (the kernel library shared by the CUDA wheels compressed once, each wheel
# hashed while it is written) and writes SHA256SUMS, requirements-<channel>.txt,
# ffpa-release-manifest.json, ffpa-build.log and the local site. Nothing here parses
# the engine's output.
cmake_minimum_required(VERSION 3.25)

# A release plan that says "committed sources" must still be true right before the
# wheels are written: files may have changed after configure. The same check as
# configure's guard (FfpaReleaseGuards.cmake, one list of shipped inputs).
file(READ "${CPACK_FFPA_PLAN}" _plan)
string(JSON _profile GET "${_plan}" profile)
string(JSON _dirty GET "${_plan}" source_dirty)
if(_profile MATCHES "^(full|pure)$" AND NOT _dirty)
  include("${CMAKE_CURRENT_LIST_DIR}/FfpaReleaseGuards.cmake")
  cmake_path(GET CMAKE_CURRENT_LIST_DIR PARENT_PATH _source)
  ffpa_uncommitted_inputs(_changed SOURCE_DIR "${_source}")
  if(_changed)
    list(JOIN _changed "\n  " _list)
    message(FATAL_ERROR "ffpa packaging: profile ${_profile} builds from committed sources; commit these first "
                        "(they changed after configure):\n  ${_list}")
  endif()
endif()

if(NOT EXISTS "${CPACK_FFPA_INDEX_TOOL}")
  message(FATAL_ERROR "ffpa packaging: the engine ${CPACK_FFPA_INDEX_TOOL} is missing; build the project first "
                      "(cmake --build <dir>).")
endif()
execute_process(COMMAND "${CPACK_FFPA_INDEX_TOOL}" release --plan "${CPACK_FFPA_PLAN}"
                        --staging "${CPACK_TEMPORARY_DIRECTORY}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "ffpa packaging: ffpa-index release failed (plan ${CPACK_FFPA_PLAN}); its message above "
                      "names the problem.")
endif()
