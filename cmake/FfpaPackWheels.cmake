# FfpaPackWheels.cmake: CPack External package script (run by `cpack`, i.e. the
# `package` target). Do not include() this from a project: it reads the CPACK_FFPA_*
# variables that FfpaWheelPackaging.cmake stored in CPackConfig.cmake.
#
# It packs every staged component with one `ffpa-index pack-many` call (the kernel
# library shared by the CUDA wheels is compressed once, all wheels are written in
# one pass and become visible together), then writes SHA256SUMS and
# ffpa-release-manifest.json (and ffpa-build.log) atomically into CPACK_FFPA_DIST.

cmake_minimum_required(VERSION 3.25)

function(_ffpa_fail)
  list(JOIN ARGN "" _msg)
  message(FATAL_ERROR "ffpa packaging: ${_msg}")
endfunction()

# Write <file> atomically: a temp file in the same directory, then a rename.
function(_ffpa_write_atomic file content)
  get_filename_component(_dir "${file}" DIRECTORY)
  string(RANDOM LENGTH 8 _rnd)
  set(_tmp "${_dir}/.tmp-${_rnd}")
  file(WRITE "${_tmp}" "${content}")
  file(RENAME "${_tmp}" "${file}")
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
if(CPACK_FFPA_PROFILE STREQUAL "full" AND NOT CPACK_FFPA_ALLOW_UNCOMMITTED)
  execute_process(COMMAND git status --porcelain=v1 --untracked-files=all -- ${CPACK_FFPA_SHIPPED_INPUTS}
    WORKING_DIRECTORY "${CPACK_FFPA_SOURCE_DIR}" OUTPUT_VARIABLE _st RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND NOT _st STREQUAL "")
    _ffpa_fail("profile full builds from committed sources; commit these first (they changed after configure):\n${_st}")
  endif()
endif()

if(NOT EXISTS "${CPACK_FFPA_INDEX_TOOL}")
  _ffpa_fail("the engine ${CPACK_FFPA_INDEX_TOOL} is missing; build the project first (cmake --build <dir>).")
endif()
file(MAKE_DIRECTORY "${CPACK_FFPA_DIST}")

set(_built "")
set(_manifest_wheels "[]")
# The build log kept with acceptance reports (spec/notebooks.md section 3): which
# commit, toolchain and engine calls produced these wheels.
set(_log "ffpa-attn ${CPACK_FFPA_VERSION} (${CPACK_FFPA_PROFILE} profile)\n")
string(APPEND _log "source commit ${CPACK_FFPA_COMMIT} dirty=${CPACK_FFPA_DIRTY}\n")
string(APPEND _log "cmake ${CPACK_FFPA_CMAKE_VERSION}, gcc ${CPACK_FFPA_GCC_VERSION}, nvcc ${CPACK_FFPA_NVCC_VERSION}\n")
string(APPEND _log "archs ${CPACK_FFPA_ARCHS}; head dims ${CPACK_FFPA_HEAD_DIMS}; dtypes ${CPACK_FFPA_DTYPES}\n")
# One engine call for all components: a --tree group per wheel, shared options once.
set(_groups "")
set(_comps "")
foreach(_spec IN LISTS CPACK_FFPA_SPECS)
  string(REPLACE "|" ";" _f "${_spec}")
  list(GET _f 0 _comp)
  list(GET _f 1 _version)
  list(GET _f 2 _tag)
  list(GET _f 3 _purelib)
  set(_tree "${CPACK_TEMPORARY_DIRECTORY}/${_comp}")
  if(NOT IS_DIRECTORY "${_tree}")
    _ffpa_fail("component ${_comp} was not staged (${_tree} missing)")
  endif()
  list(APPEND _groups --tree "${_tree}" --tag "${_tag}" --version "${_version}" --root-is-purelib ${_purelib})
  list(APPEND _comps "${_comp}")
endforeach()
execute_process(
  COMMAND "${CPACK_FFPA_INDEX_TOOL}" pack-many
    --name ffpa-attn
    --metadata "${CPACK_FFPA_METADATA}"
    --readme "${CPACK_FFPA_README}" --readme-type text/markdown
    --source-date-epoch "${CPACK_FFPA_EPOCH}"
    --deflate-cache "${CPACK_FFPA_DEFLATE_CACHE}"
    --out-dir "${CPACK_FFPA_DIST}"
    # No path of the build machine may leak into a shipped binary.
    --forbid-path "${CPACK_FFPA_BUILD_DIR}"
    ${_groups}
  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  _ffpa_fail("ffpa-index pack-many failed for ${_comps} (no wheel of this build was written):\n${_out}${_err}")
endif()
string(APPEND _log "\nffpa-index pack-many (${_comps})\n")
foreach(_spec IN LISTS CPACK_FFPA_SPECS)
  string(REPLACE "|" ";" _f "${_spec}")
  list(GET _f 0 _comp)
  list(GET _f 1 _version)
  list(GET _f 2 _tag)
  string(APPEND _log "  [${_comp}] --tag ${_tag} --version ${_version}\n")
endforeach()
string(APPEND _log "${_out}${_err}")
# The engine prints the path of each wheel it wrote, one per line, in the order of
# the --tree groups; each is checked against its component's tag.
string(REGEX MATCHALL "[^ \t\r\n]+\\.whl" _paths "${_out}")
list(LENGTH _paths _n)
list(LENGTH _comps _nc)
if(NOT _n EQUAL _nc)
  _ffpa_fail("ffpa-index pack-many reported ${_n} wheel(s) for ${_nc} component(s) (${_comps}):\n${_out}")
endif()

set(_i 0)
foreach(_spec IN LISTS CPACK_FFPA_SPECS)
  string(REPLACE "|" ";" _f "${_spec}")
  list(GET _f 0 _comp)
  list(GET _f 1 _version)
  list(GET _f 2 _tag)
  list(GET _f 3 _purelib)
  list(GET _paths ${_i} _whl)
  if(NOT IS_ABSOLUTE "${_whl}")
    set(_whl "${CPACK_FFPA_DIST}/${_whl}")
  endif()
  # The python and abi fields of the tag are kept verbatim in the file name (the
  # platform may have been 'auto').
  string(REGEX MATCH "^[^-]+-[^-]+-" _pyabi "${_tag}")
  get_filename_component(_wname "${_whl}" NAME)
  string(FIND "${_wname}" "-${_pyabi}" _at)
  if(_at EQUAL -1)
    _ffpa_fail("ffpa-index pack-many reported ${_wname} where the wheel of ${_comp} (tag ${_tag}) was expected")
  endif()
  get_filename_component(_name "${_whl}" NAME)
  message(STATUS "ffpa: wrote ${_whl}")

  if(_purelib STREQUAL "true")
    # The pure wheel must hold no compiled code: unpack it and look.
    set(_x "${CPACK_TOPLEVEL_DIRECTORY}/unpacked-${_comp}")
    file(REMOVE_RECURSE "${_x}")
    file(MAKE_DIRECTORY "${_x}")
    execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xf "${_whl}" WORKING_DIRECTORY "${_x}" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      _ffpa_fail("cannot unpack ${_whl} to check it")
    endif()
    file(GLOB_RECURSE _so RELATIVE "${_x}" "${_x}/*.so" "${_x}/*.so.*" "${_x}/*.pyd" "${_x}/*.dylib")
    if(_so)
      file(REMOVE "${_whl}")
      _ffpa_fail("the pure wheel ${_name} contains compiled code (${_so}); it was removed. The pure profile must not install any extension.")
    endif()
  endif()

  file(SHA256 "${_whl}" _sha)
  file(SIZE "${_whl}" _size)
  list(APPEND _built "${_name}")
  string(APPEND _sums "${_sha}  ${_name}\n")
  string(REGEX MATCH "^[^-]+-[^-]+-(.+)\\.whl$" _m "${_name}")
  set(_tags "${CMAKE_MATCH_1}")
  set(_w "{}")
  string(JSON _w SET "${_w}" file "\"${_name}\"")
  if(_purelib STREQUAL "true")
    string(JSON _w SET "${_w}" kind "\"pure\"")
  else()
    string(JSON _w SET "${_w}" kind "\"cuda\"")
    # The kernel library's size on disk and inside the wheel (deflated once, then
    # copied raw into every CUDA wheel).
    execute_process(COMMAND "${CPACK_FFPA_INDEX_TOOL}" list "${_whl}"
      OUTPUT_VARIABLE _members RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0 OR NOT _members MATCHES "(^|\n)([0-9]+) ([0-9]+) [a-z]+ ffpa_attn/libffpa_kernels\\.so\n")
      _ffpa_fail("cannot find ffpa_attn/libffpa_kernels.so in ${_name}")
    endif()
    string(JSON _w SET "${_w}" kernel_library_size "${CMAKE_MATCH_2}")
    string(JSON _w SET "${_w}" kernel_library_compressed_size "${CMAKE_MATCH_3}")
  endif()
  string(JSON _w SET "${_w}" version "\"${_version}\"")
  string(JSON _w SET "${_w}" tags "\"${_tags}\"")
  string(JSON _w SET "${_w}" size "${_size}")
  string(JSON _w SET "${_w}" sha256 "\"${_sha}\"")
  string(JSON _manifest_wheels SET "${_manifest_wheels}" ${_i} "${_w}")
  math(EXPR _i "${_i} + 1")
endforeach()

# Wheels of other versions in the same directory are not ours to delete; say so,
# because tools that pick "the" wheel from dist/ would see them.
file(GLOB _all RELATIVE "${CPACK_FFPA_DIST}" "${CPACK_FFPA_DIST}/ffpa_attn-*.whl")
foreach(_w IN LISTS _all)
  if(NOT _w IN_LIST _built)
    message(WARNING "ffpa: ${CPACK_FFPA_DIST} also holds ${_w}, which is not part of this build; remove it or use -DFFPA_RELEASE_DIST=<dir>.")
  endif()
endforeach()

set(_m "{}")
string(JSON _m SET "${_m}" name "\"ffpa-attn\"")
string(JSON _m SET "${_m}" version "\"${CPACK_FFPA_VERSION}\"")
string(JSON _m SET "${_m}" profile "\"${CPACK_FFPA_PROFILE}\"")
string(JSON _m SET "${_m}" source_commit "\"${CPACK_FFPA_COMMIT}\"")
if(CPACK_FFPA_DIRTY)
  string(JSON _m SET "${_m}" source_dirty true)
else()
  string(JSON _m SET "${_m}" source_dirty false)
endif()
string(JSON _m SET "${_m}" source_date_epoch "${CPACK_FFPA_EPOCH}")
string(JSON _m SET "${_m}" toolchain "{}")
string(JSON _m SET "${_m}" toolchain cmake "\"${CPACK_FFPA_CMAKE_VERSION}\"")
string(JSON _m SET "${_m}" toolchain gcc "\"${CPACK_FFPA_GCC_VERSION}\"")
if(CPACK_FFPA_BUILD_KERNELS)
  string(JSON _m SET "${_m}" channel "\"${CPACK_FFPA_CHANNEL}\"")
  string(JSON _m SET "${_m}" cuda_version "\"${CPACK_FFPA_CUDA_VERSION}\"")
  string(JSON _m SET "${_m}" toolchain nvcc "\"${CPACK_FFPA_NVCC_VERSION}\"")
  string(JSON _m SET "${_m}" fatbin_compression "\"${CPACK_FFPA_FATBIN_COMPRESSION}\"")
  _ffpa_json_array(_m archs STRING ${CPACK_FFPA_ARCHS})
  _ffpa_json_array(_m head_dims NUMBER ${CPACK_FFPA_HEAD_DIMS})
  _ffpa_json_array(_m dtypes STRING ${CPACK_FFPA_DTYPES})
else()
  string(JSON _m SET "${_m}" channel null)
  string(JSON _m SET "${_m}" toolchain nvcc null)
endif()
string(JSON _m SET "${_m}" wheels "${_manifest_wheels}")

_ffpa_write_atomic("${CPACK_FFPA_DIST}/ffpa-release-manifest.json" "${_m}\n")
_ffpa_write_atomic("${CPACK_FFPA_DIST}/SHA256SUMS" "${_sums}")
string(APPEND _log "\nSHA256SUMS\n${_sums}")
_ffpa_write_atomic("${CPACK_FFPA_DIST}/ffpa-build.log" "${_log}")
list(LENGTH _built _nb)
message(STATUS "ffpa: ${_nb} wheel(s), SHA256SUMS and ffpa-release-manifest.json in ${CPACK_FFPA_DIST}")

# The local site: what this build would publish, servable as it is (relative anchors).
#   site/whl/<channel>/ffpa-attn/   the CUDA wheels' index (--index-url)
#   site/pypi/simple/ffpa-attn/     the pure wheel, as PyPI would serve it
#   site/assets/                    the wheels and their .metadata files
# Rendered from scratch into a temporary directory and swapped in, so it always
# describes exactly this build's wheels and a failure leaves the previous site.
if(CPACK_FFPA_LOCAL_SITE)
  set(_site "${CPACK_FFPA_LOCAL_SITE}")
  set(_tmp "${_site}.tmp")
  file(REMOVE_RECURSE "${_tmp}")
  file(MAKE_DIRECTORY "${_tmp}/assets")
  set(_cuda_whls "")
  set(_pure_whls "")
  foreach(_name IN LISTS _built)
    file(COPY "${CPACK_FFPA_DIST}/${_name}" DESTINATION "${_tmp}/assets")
    if(_name MATCHES "-py3-none-any\\.whl$")
      list(APPEND _pure_whls "${_tmp}/assets/${_name}")
    else()
      list(APPEND _cuda_whls "${_tmp}/assets/${_name}")
    endif()
  endforeach()
  foreach(_set "whl;${CPACK_FFPA_CHANNEL};_cuda_whls" "pypi;simple;_pure_whls")
    list(GET _set 0 _prefix)
    list(GET _set 1 _channel)
    list(GET _set 2 _var)
    if(NOT ${_var})
      continue()
    endif()
    execute_process(
      COMMAND "${CPACK_FFPA_INDEX_TOOL}" add --index-dir "${_tmp}" --index-prefix ${_prefix}
              --channel ${_channel} --release-url ../../../assets/ --metadata-dir "${_tmp}/assets"
              ${${_var}}
      OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      _ffpa_fail("ffpa-index add failed for the local site (${_prefix}/${_channel}):\n${_out}${_err}")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${_site}")
  file(RENAME "${_tmp}" "${_site}")
  message(STATUS "ffpa: local site in ${_site} (serve it, then: pip install ffpa-attn --index-url http://HOST/whl/${CPACK_FFPA_CHANNEL}/)")
endif()
