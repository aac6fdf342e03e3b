# FfpaWheelPackaging.cmake: every wheel of the configuration, through CPack.
#
# Each wheel is a CPack component whose install tree is the wheel's root:
#   wheel_pure    the Python package only                -> the py3-none-any wheel
#   wheel_cp3XY   the package + _C for that interpreter  -> one CUDA wheel per CPython,
#                 + libffpa_kernels.so (the same bytes in every CUDA wheel)
# The release plan (FfpaReleasePlan.cmake) is written here, at configure time: the
# components' trees relative to CPack's staging directory, their tags and versions,
# and every fact the engine records. CPack's External generator stages the components
# and runs FfpaPackWheels.cmake: the committed-sources check, then one engine call
# (`ffpa-index release --plan --staging`) that writes the wheels, SHA256SUMS, the
# requirements file, the release manifest into FFPA_RELEASE_DIST and the local site
# (<build>/site, servable as it is). The standard `package` target therefore builds
# every wheel; build presets name it.
include(FfpaReleasePlan)

# _ffpa_write_build_info(<kind> <out-file>)
#   kind: pure | cuda. Generates ffpa_attn/_build_info.py for that kind of wheel, from the
#   release plan (ffpa_release_plan_json: the one record of the build's facts, the same the
#   engine writes into the release manifest) and the kernels' facts.
function(_ffpa_write_build_info kind out_file)
  ffpa_release_plan_json(OUT_VAR plan)
  string(JSON _ffpa_bi_source_commit GET "${plan}" source_commit)
  string(JSON _ffpa_bi_profile GET "${plan}" profile)
  string(JSON _ffpa_bi_cmake GET "${plan}" toolchain cmake)
  string(JSON _ffpa_bi_gcc GET "${plan}" toolchain gcc)
  string(JSON dirty GET "${plan}" source_dirty)
  if(dirty)
    set(_ffpa_bi_dirty "True")
  else()
    set(_ffpa_bi_dirty "False")
  endif()
  if(kind STREQUAL "cuda")
    string(JSON _ffpa_bi_version GET "${plan}" cuda_version)
    string(JSON channel GET "${plan}" channel)
    string(JSON nvcc GET "${plan}" toolchain nvcc)
    set(_ffpa_bi_channel "\"${channel}\"")
    set(_ffpa_bi_nvcc "\"${nvcc}\"")
  else()
    string(JSON _ffpa_bi_version GET "${plan}" version)
    set(_ffpa_bi_channel "None")
    set(_ffpa_bi_nvcc "None")
  endif()
  # The CUDA wheel's install lines (cmake/install-lines.json, their one home), for this
  # release: its CUDA version and channel filled in, the site left as <site>.
  file(READ "${CMAKE_SOURCE_DIR}/cmake/install-lines.json" _ffpa_lines_json)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/cmake/install-lines.json")
  string(JSON _ffpa_pypi GET "${_ffpa_lines_json}" docs pypi)
  set(_ffpa_bi_install_lines "{")
  foreach(_ffpa_tool pip uv)
    string(JSON _ffpa_line GET "${_ffpa_lines_json}" cuda ${_ffpa_tool})
    string(REPLACE "{cuda_version}" "${FFPA_CUDA_VERSION}" _ffpa_line "${_ffpa_line}")
    string(REPLACE "{channel}" "${FFPA_CHANNEL}" _ffpa_line "${_ffpa_line}")
    string(REPLACE "{site}" "<site>" _ffpa_line "${_ffpa_line}")
    string(REPLACE "{pypi}" "${_ffpa_pypi}" _ffpa_line "${_ffpa_line}")
    string(APPEND _ffpa_bi_install_lines "\"${_ffpa_tool}\": \"${_ffpa_line}\", ")
  endforeach()
  string(APPEND _ffpa_bi_install_lines "}")
  set(_ffpa_bi_cuda_archs "")
  foreach(_ffpa_arch IN LISTS FFPA_CUDA_ARCHS)
    string(APPEND _ffpa_bi_cuda_archs "\"${_ffpa_arch}\", ")
  endforeach()
  set(_ffpa_bi_cuda_archs "[${_ffpa_bi_cuda_archs}]")
  # configure_file rewrites only on change: a re-configure with the same version
  # leaves the wheel inputs' timestamps alone.
  configure_file("${CMAKE_SOURCE_DIR}/cmake/templates/_build_info.py.in" "${out_file}" @ONLY)
endfunction()

# _ffpa_install_package(COMPONENT <c> BUILD_INFO <file>)
#   Installs the package's Python files and the given _build_info.py into <c>.
function(_ffpa_install_package)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "COMPONENT;BUILD_INFO" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "_ffpa_install_package: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(_src IN LISTS FFPA_PYTHON_SOURCES)
    file(RELATIVE_PATH _rel "${CMAKE_SOURCE_DIR}/python" "${_src}")
    get_filename_component(_dir "${_rel}" DIRECTORY)
    install(FILES "${_src}" DESTINATION "${_dir}" COMPONENT ${arg_COMPONENT})
  endforeach()
  install(FILES "${arg_BUILD_INFO}" DESTINATION ffpa_attn COMPONENT ${arg_COMPONENT})
  # The sources of first-use builds (ffpa_attn.jit), in every wheel: text only.
  include(FfpaJitSources)
  ffpa_jit_source_files(OUT_VAR _jit_files)
  foreach(_file IN LISTS _jit_files)
    get_filename_component(_dir "ffpa_attn/_src/${_file}" DIRECTORY)
    install(FILES "${CMAKE_SOURCE_DIR}/${_file}" DESTINATION "${_dir}" COMPONENT ${arg_COMPONENT})
  endforeach()
endfunction()

# ffpa_stage_build_info()
#   The staged package in the build tree (importable with PYTHONPATH=<build>/python)
#   carries the build info of the wheel kind it mirrors.
function(ffpa_stage_build_info)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_stage_build_info: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(FFPA_BUILD_KERNELS)
    _ffpa_write_build_info(cuda "${FFPA_PYTHON_BUILD_DIR}/ffpa_attn/_build_info.py")
  else()
    _ffpa_write_build_info(pure "${FFPA_PYTHON_BUILD_DIR}/ffpa_attn/_build_info.py")
  endif()
endfunction()

# ffpa_add_wheels()
#   Declares the pure wheel and one CUDA wheel per interpreter tag in
#   FFPA_PYTHON_TAGS (binding targets ffpa_C_<tag>), writes the release plan, then
#   configures CPack.
function(ffpa_add_wheels)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_add_wheels: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT FFPA_PYTHON_SOURCES)
    message(FATAL_ERROR "ffpa_add_wheels: FFPA_PYTHON_SOURCES is empty; python/CMakeLists.txt must list the package files.")
  endif()
  set(_pkgdir "${CMAKE_BINARY_DIR}/packaging")
  _ffpa_write_build_info(pure "${_pkgdir}/pure/_build_info.py")
  _ffpa_install_package(COMPONENT wheel_pure BUILD_INFO "${_pkgdir}/pure/_build_info.py")
  set(_components wheel_pure)
  ffpa_stage_build_info()
  if(FFPA_BUILD_KERNELS)
    _ffpa_write_build_info(cuda "${_pkgdir}/cuda/_build_info.py")
    foreach(_tag IN LISTS FFPA_PYTHON_TAGS)
      _ffpa_install_package(COMPONENT wheel_${_tag} BUILD_INFO "${_pkgdir}/cuda/_build_info.py")
      install(TARGETS ffpa_C_${_tag} ffpa_kernels LIBRARY DESTINATION ffpa_attn COMPONENT wheel_${_tag})
      list(APPEND _components wheel_${_tag})
    endforeach()
  endif()
  ffpa_write_release_plan(FILE "${_pkgdir}/ffpa-release-plan.json" TAGS ${FFPA_PYTHON_TAGS})

  set(CPACK_GENERATOR External PARENT_SCOPE)
  set(CPACK_PACKAGE_NAME ffpa_attn PARENT_SCOPE)
  set(CPACK_PACKAGE_VERSION "${FFPA_VERSION}" PARENT_SCOPE)
  set(CPACK_EXTERNAL_ENABLE_STAGING ON PARENT_SCOPE)
  # Shipped binaries are stripped: smaller wheels, and no local symbols such as the
  # tmpxft_<pid> names nvcc writes into every object (they break reproducibility).
  set(CPACK_STRIP_FILES TRUE PARENT_SCOPE)
  set(CPACK_EXTERNAL_PACKAGE_SCRIPT "${CMAKE_SOURCE_DIR}/cmake/FfpaPackWheels.cmake" PARENT_SCOPE)
  set(CPACK_COMPONENTS_ALL ${_components} PARENT_SCOPE)
  set(CPACK_PACKAGING_INSTALL_PREFIX "/" PARENT_SCOPE)
  set(CPACK_PACKAGE_DIRECTORY "${_pkgdir}/cpack" PARENT_SCOPE)
  # What the pack script needs besides the plan: where it is, and the engine (CPack
  # does not evaluate generator expressions; the engine lands in bin/).
  set(CPACK_FFPA_PLAN "${_pkgdir}/ffpa-release-plan.json" PARENT_SCOPE)
  set(CPACK_FFPA_INDEX_TOOL "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/ffpa-index" PARENT_SCOPE)
endfunction()
