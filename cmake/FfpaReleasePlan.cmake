# FfpaReleasePlan.cmake: what this configuration will build and where it goes.
#
# ffpa_print_release_plan() prints it at every configure; with FFPA_RELEASE_DRY_RUN=ON
# that is all that happens (the top level returns before defining any target).
# ffpa_write_release_plan() writes it, once, as the release plan the engine runs
# (docs/release.md "The release record"): the one record of the build's facts from
# configure to the manifest. Wheel file names are the engine's to compute (the
# platform tag comes from the binaries), so nothing here spells one.

# ffpa_print_release_plan()
#   Reads FFPA_PROFILE, FFPA_VERSION, FFPA_CUDA_VERSION, FFPA_CHANNEL,
#   FFPA_PYTHON_TAGS/PATHS, FFPA_CUDA_ARCHS, FFPA_HEAD_DIMS, FFPA_DTYPES,
#   FFPA_RELEASE_DIST, FFPA_BUILD_KERNELS from the caller's scope.
function(ffpa_print_release_plan)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_print_release_plan: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(_lines
    "profile       ${FFPA_PROFILE}"
    "version       ${FFPA_VERSION}  (${FFPA_VERSION_ORIGIN})"
    "source        ${FFPA_SOURCE_COMMIT}")
  if(FFPA_SOURCE_DIRTY)
    list(APPEND _lines "              (working tree has uncommitted changes)")
  endif()
  if(FFPA_BUILD_KERNELS)
    list(JOIN FFPA_CUDA_ARCHS ", " _archs)
    list(JOIN FFPA_HEAD_DIMS ", " _dims)
    list(JOIN FFPA_DTYPES ", " _dtypes)
    list(JOIN FFPA_PYTHON_TAGS ", " _tags)
    list(APPEND _lines
      "channel       ${FFPA_CHANNEL}  (nvcc ${FFPA_NVCC_VERSION} at ${FFPA_NVCC})"
      "archs         ${_archs}"
      "head dims     ${_dims}"
      "dtypes        ${_dtypes}"
      "interpreters  ${_tags}")
    foreach(_tag _py IN ZIP_LISTS FFPA_PYTHON_TAGS FFPA_PYTHON_PATHS)
      list(APPEND _lines "                ${_tag}: ${_py}")
    endforeach()
    list(APPEND _lines "CUDA wheels   ${FFPA_CUDA_VERSION}, one per interpreter: tags cp3XY-cp3XY-<platform>,"
      "              the platform (manylinux_2_Y) computed from the binaries at pack time")
    if(FFPA_LOCAL_BUILD)
      # A wheel for this machine (cmake/FfpaOptions.cmake): no release takes it, so the
      # plan names none (the publish target refuses a .local version).
      list(APPEND _lines "  -> this machine only (a local build from source: never published)")
    else()
      list(APPEND _lines
        "  -> release assets of tag v${FFPA_CUDA_VERSION}, index whl/${FFPA_CHANNEL}/ffpa-attn/ (publish target)")
    endif()
  else()
    list(APPEND _lines "kernels       none (pure profile or FFPA_BUILD_KERNELS=OFF)")
  endif()
  list(APPEND _lines "pure wheel    ${FFPA_VERSION}, py3-none-any"
    "  -> PyPI and release assets of tag v${FFPA_VERSION} (publish-pure target)"
    "into          ${FFPA_RELEASE_DIST}, with SHA256SUMS and ffpa-release-manifest.json")
  if(FFPA_RELEASE_DRY_RUN)
    list(APPEND _lines "DRY RUN: nothing will be built (FFPA_RELEASE_DRY_RUN=ON)")
  endif()
  list(JOIN _lines "\n  " _text)
  message(STATUS "ffpa release plan:\n  ${_text}")
endfunction()

# _ffpa_json_string(<out-var> <text>): <text> as a JSON string literal.
function(_ffpa_json_string out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n" text "${text}")
  string(REPLACE "\t" "\\t" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

# ffpa_core_metadata(OUT_VAR <var> CHANNEL <channel> JIT_EXTRA <bool>)
#   <var>: the core metadata fields every wheel carries after Name and Version (the
#   engine frames them: Metadata-Version, Name, Version before, the README after), from
#   cmake/templates/wheel-metadata.txt.in and the pins; the CUDA classifier is the
#   channel's major. JIT_EXTRA: the `jit` extra (every wheel has it; the kernels-only tree
#   makes no wheel). The sdist's PKG-INFO states the same fields (cmake/FfpaSourceRecord.cmake,
#   PEP 643), so this runs in script mode too.
function(ffpa_core_metadata)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_VAR;CHANNEL;JIT_EXTRA" "")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_OUT_VAR)
    message(FATAL_ERROR "ffpa_core_metadata: OUT_VAR <var> CHANNEL <channel> JIT_EXTRA <bool> (got ${ARGN})")
  endif()
  string(REGEX REPLACE "^cu" "" FFPA_CUDA_MAJOR "${arg_CHANNEL}")
  list(GET FFPA_RELEASE_PYTHONS 0 FFPA_REQUIRES_PYTHON)
  file(READ "${CMAKE_SOURCE_DIR}/cmake/templates/wheel-metadata.txt.in" _metadata)
  string(CONFIGURE "${_metadata}" _metadata @ONLY)
  # The `jit` extra: the first-use build's toolchain (python/ffpa_attn/jit.py), every pin
  # read from its one home. The wheels' copy of the sources (ffpa_attn/_src) carries
  # none of these files.
  set(_req_specs "")
  if(arg_JIT_EXTRA)
    string(APPEND _metadata "Provides-Extra: jit\n")
    set(_req_specs "tools/requirements-jit.txt|[A-Za-z0-9][A-Za-z0-9._-]*"
                   "tools/requirements-build.txt|cmake" "tools/requirements-build.txt|ninja"
                   "tools/requirements.txt|pybind11" "tools/requirements-cutlass.txt|nvidia-cutlass")
  endif()
  foreach(_req_file_line IN LISTS _req_specs)
    string(REPLACE "|" ";" _req_file_line "${_req_file_line}")
    list(GET _req_file_line 0 _req_file)
    list(GET _req_file_line 1 _req_name)
    if(NOT CMAKE_SCRIPT_MODE_FILE)
      set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/${_req_file}")
    endif()
    file(STRINGS "${CMAKE_SOURCE_DIR}/${_req_file}" _req_lines REGEX "^${_req_name}==[0-9]")
    if(NOT _req_lines)
      message(FATAL_ERROR "ffpa: ${_req_file} has no '${_req_name}==<version>' line for the jit extra")
    endif()
    foreach(_req IN LISTS _req_lines)
      string(REGEX MATCH "^[A-Za-z0-9._-]+==[0-9][0-9A-Za-z.]*" _req "${_req}")
      string(APPEND _metadata "Requires-Dist: ${_req}; extra == \"jit\"\n")
    endforeach()
  endforeach()
  set(${arg_OUT_VAR} "${_metadata}" PARENT_SCOPE)
endfunction()

# ffpa_release_plan_json(OUT_VAR <var> [TAGS <cp3XY>...])
#   The release plan as JSON text: the one record of the build's facts, which the engine
#   runs (ffpa_write_release_plan) and the build-info module both wheels carry is written
#   from (FfpaWheelPackaging.cmake).
#   TAGS  the interpreter tags of the CUDA wheels (component wheel_<tag> each); the
#         pure wheel (component wheel_pure) is always there
#   Reads the build's facts from the caller's scope: FFPA_VERSION, FFPA_PROFILE,
#   FFPA_SOURCE_COMMIT/DIRTY/DATE_EPOCH, FFPA_CHANNEL, FFPA_CUDA_VERSION,
#   FFPA_NVCC_VERSION, FFPA_FATBIN_COMPRESSION, FFPA_CUDA_ARCHS, FFPA_HEAD_DIMS,
#   FFPA_DTYPES, FFPA_BUILD_KERNELS, FFPA_RELEASE_DIST.
function(ffpa_release_plan_json)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_VAR" "TAGS")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_OUT_VAR)
    message(FATAL_ERROR "ffpa_release_plan_json: OUT_VAR <var> [TAGS ...] (got ${ARGN})")
  endif()
  set(p "{}")
  string(JSON p SET "${p}" schema 2)
  string(JSON p SET "${p}" name "\"ffpa-attn\"")
  foreach(_key version profile source_commit)
    string(TOUPPER "FFPA_${_key}" _var)
    string(JSON p SET "${p}" ${_key} "\"${${_var}}\"")
  endforeach()
  if(FFPA_SOURCE_DIRTY)
    string(JSON p SET "${p}" source_dirty true)
  else()
    string(JSON p SET "${p}" source_dirty false)
  endif()
  string(JSON p SET "${p}" source_date_epoch "${FFPA_SOURCE_DATE_EPOCH}")
  string(JSON p SET "${p}" toolchain "{\"cmake\": \"${CMAKE_VERSION}\", \"gcc\": \"${CMAKE_CXX_COMPILER_VERSION}\"}")
  string(JSON p SET "${p}" toolchain nvcc null)
  string(JSON p SET "${p}" channel null)
  if(FFPA_BUILD_KERNELS)
    string(JSON p SET "${p}" toolchain nvcc "\"${FFPA_NVCC_VERSION}\"")
    string(JSON p SET "${p}" channel "\"${FFPA_CHANNEL}\"")
    string(JSON p SET "${p}" cuda_version "\"${FFPA_CUDA_VERSION}\"")
    string(JSON p SET "${p}" fatbin_compression "\"${FFPA_FATBIN_COMPRESSION}\"")
    set(_keys archs head_dims dtypes)
    set(_lists FFPA_CUDA_ARCHS FFPA_HEAD_DIMS FFPA_DTYPES)
    foreach(_key _list IN ZIP_LISTS _keys _lists)
      set(_items "")
      foreach(_item IN LISTS ${_list})
        if(_key STREQUAL "head_dims")
          list(APPEND _items "${_item}")
        else()
          list(APPEND _items "\"${_item}\"")
        endif()
      endforeach()
      list(JOIN _items ", " _items)
      string(JSON p SET "${p}" ${_key} "[${_items}]")
    endforeach()
  endif()
  set(_jit ON)
  if(FFPA_COMPONENTS STREQUAL "kernels")
    set(_jit OFF)
  endif()
  ffpa_core_metadata(OUT_VAR _metadata CHANNEL "${FFPA_CHANNEL}" JIT_EXTRA ${_jit})
  _ffpa_json_string(_metadata "${_metadata}")
  string(JSON p SET "${p}" metadata "${_metadata}")
  _ffpa_json_string(_readme "${CMAKE_SOURCE_DIR}/README.md")
  string(JSON p SET "${p}" readme "${_readme}")
  # No path of the build machine may leak into a shipped binary.
  _ffpa_json_string(_build "${CMAKE_BINARY_DIR}")
  string(JSON p SET "${p}" forbid_paths "[${_build}]")
  _ffpa_json_string(_dist "${FFPA_RELEASE_DIST}")
  string(JSON p SET "${p}" out_dir "${_dist}")
  _ffpa_json_string(_site "${CMAKE_BINARY_DIR}/site")
  string(JSON p SET "${p}" site_dir "${_site}")
  # The CUDA wheel's install lines for the site's front page, from their one home.
  file(READ "${CMAKE_SOURCE_DIR}/cmake/install-lines.json" _lines_json)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/cmake/install-lines.json")
  string(JSON _lines GET "${_lines_json}" cuda)
  string(JSON _pypi GET "${_lines_json}" docs pypi)
  _ffpa_json_string(_pypi "${_pypi}")
  string(JSON _lines SET "${_lines}" pypi "${_pypi}")
  string(JSON p SET "${p}" install_lines "${_lines}")
  string(JSON p SET "${p}" wheels "[{\"kind\": \"pure\", \"tree\": \"wheel_pure\", \"version\": \"${FFPA_VERSION}\", \"tags\": \"py3-none-any\"}]")
  set(_i 1)
  foreach(_tag IN LISTS arg_TAGS)
    # Platform "auto": the engine reads the ELF files and picks the lowest manylinux tag.
    string(JSON p SET "${p}" wheels ${_i} "{\"kind\": \"cuda\", \"tree\": \"wheel_${_tag}\", \"version\": \"${FFPA_CUDA_VERSION}\", \"tags\": \"${_tag}-${_tag}-auto\", \"kernel_library\": \"ffpa_attn/libffpa_kernels.so\"}")
    math(EXPR _i "${_i} + 1")
  endforeach()
  set(${arg_OUT_VAR} "${p}" PARENT_SCOPE)
endfunction()

# ffpa_write_release_plan(FILE <plan.json> [TAGS <cp3XY>...])
#   FILE  where the plan goes (rewritten only when it changes); TAGS as above.
function(ffpa_write_release_plan)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "FILE" "TAGS")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_FILE)
    message(FATAL_ERROR "ffpa_write_release_plan: FILE <plan.json> [TAGS ...] (got ${ARGN})")
  endif()
  ffpa_release_plan_json(OUT_VAR p TAGS ${arg_TAGS})
  set(_old "")
  if(EXISTS "${arg_FILE}")
    file(READ "${arg_FILE}" _old)
  endif()
  if(NOT _old STREQUAL "${p}\n")
    file(WRITE "${arg_FILE}" "${p}\n")
  endif()
endfunction()
