# FfpaWheelPackaging.cmake: every wheel of the configuration, through CPack.
#
# Each wheel is a CPack component whose install tree is the wheel's root:
#   wheel_pure    the Python package only                -> ffpa_attn-V-py3-none-any.whl
#   wheel_cp3XY   the package + _C for that interpreter  -> ffpa_attn-V+cu13-cp3XY-cp3XY-manylinux_2_Y_x86_64.whl
#                 + libffpa_kernels.so (the same bytes in every CUDA wheel)
# CPack's External generator stages the components and runs FfpaPackWheels.cmake,
# which writes the release plan and calls the engine once (`ffpa-index release
# --plan`: the kernel library, identical in every CUDA wheel, is hashed and deflated
# once; each wheel is hashed once) for the wheels, SHA256SUMS, the requirements file
# and the release manifest in FFPA_RELEASE_DIST. The standard `package` target
# therefore builds every wheel; build presets name it. The engine also renders the
# local site (<build>/site): the CUDA channel's PEP 503/691 index and a PyPI-style
# simple index for the pure wheel, both pointing at copies of the wheels in
# <build>/site/assets, so the site directory can be served as it is.

# _ffpa_write_build_info(<kind> <out-file>)
#   kind: pure | cuda. Generates ffpa_attn/_build_info.py for that kind of wheel.
function(_ffpa_write_build_info kind out_file)
  if(kind STREQUAL "cuda")
    set(_ffpa_bi_version "${FFPA_CUDA_VERSION}")
    set(_ffpa_bi_channel "\"${FFPA_CHANNEL}\"")
    set(_ffpa_bi_nvcc "\"${FFPA_NVCC_VERSION}\"")
  else()
    set(_ffpa_bi_version "${FFPA_VERSION}")
    set(_ffpa_bi_channel "None")
    set(_ffpa_bi_nvcc "None")
  endif()
  if(FFPA_SOURCE_DIRTY)
    set(_ffpa_bi_dirty "True")
  else()
    set(_ffpa_bi_dirty "False")
  endif()
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
#   FFPA_PYTHON_TAGS (binding targets ffpa_C_<tag>), then configures CPack.
function(ffpa_add_wheels)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_add_wheels: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT FFPA_PYTHON_SOURCES)
    message(FATAL_ERROR "ffpa_add_wheels: FFPA_PYTHON_SOURCES is empty; python/CMakeLists.txt must list the package files.")
  endif()
  set(_pkgdir "${CMAKE_BINARY_DIR}/packaging")
  # The classifier's CUDA major is the channel's (cu13 -> 13): one rule, FfpaReleaseMatrix.
  string(REGEX REPLACE "^cu" "" FFPA_CUDA_MAJOR "${FFPA_CHANNEL}")
  configure_file("${CMAKE_SOURCE_DIR}/cmake/templates/wheel-metadata.txt.in" "${_pkgdir}/METADATA.in" @ONLY)

  set(_components "")
  set(_specs "")   # component|version|tag|purelib

  _ffpa_write_build_info(pure "${_pkgdir}/pure/_build_info.py")
  _ffpa_install_package(COMPONENT wheel_pure BUILD_INFO "${_pkgdir}/pure/_build_info.py")
  list(APPEND _components wheel_pure)
  list(APPEND _specs "wheel_pure|${FFPA_VERSION}|py3-none-any|true")

  ffpa_stage_build_info()
  if(FFPA_BUILD_KERNELS)
    _ffpa_write_build_info(cuda "${_pkgdir}/cuda/_build_info.py")
    foreach(_tag IN LISTS FFPA_PYTHON_TAGS)
      set(_c wheel_${_tag})
      _ffpa_install_package(COMPONENT ${_c} BUILD_INFO "${_pkgdir}/cuda/_build_info.py")
      install(TARGETS ffpa_C_${_tag} LIBRARY DESTINATION ffpa_attn COMPONENT ${_c})
      install(TARGETS ffpa_kernels LIBRARY DESTINATION ffpa_attn COMPONENT ${_c})
      list(APPEND _components ${_c})
      # "auto": the engine reads the ELF files and picks the lowest manylinux tag.
      list(APPEND _specs "${_c}|${FFPA_CUDA_VERSION}|${_tag}-${_tag}-auto|false")
    endforeach()
  endif()

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
  set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packaging/cpack" PARENT_SCOPE)
  # Everything the pack script needs; CPack copies CPACK_* variables into its run.
  set(CPACK_FFPA_SPECS "${_specs}" PARENT_SCOPE)
  # CPack does not evaluate generator expressions; the engine lands in bin/.
  set(CPACK_FFPA_INDEX_TOOL "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/ffpa-index" PARENT_SCOPE)
  set(CPACK_FFPA_DIST "${FFPA_RELEASE_DIST}" PARENT_SCOPE)
  set(CPACK_FFPA_METADATA "${_pkgdir}/METADATA.in" PARENT_SCOPE)
  set(CPACK_FFPA_README "${CMAKE_SOURCE_DIR}/README.md" PARENT_SCOPE)
  set(CPACK_FFPA_EPOCH "${FFPA_SOURCE_DATE_EPOCH}" PARENT_SCOPE)
  set(CPACK_FFPA_DEFLATE_CACHE "${CMAKE_BINARY_DIR}/packaging/deflate-cache" PARENT_SCOPE)
  set(CPACK_FFPA_PROFILE "${FFPA_PROFILE}" PARENT_SCOPE)
  set(CPACK_FFPA_LOCAL_SITE "${CMAKE_BINARY_DIR}/site" PARENT_SCOPE)
  set(CPACK_FFPA_ALLOW_UNCOMMITTED "${FFPA_RELEASE_ALLOW_UNCOMMITTED}" PARENT_SCOPE)
  set(CPACK_FFPA_SOURCE_DIR "${CMAKE_SOURCE_DIR}" PARENT_SCOPE)
  set(CPACK_FFPA_BUILD_DIR "${CMAKE_BINARY_DIR}" PARENT_SCOPE)
  set(CPACK_FFPA_VERSION "${FFPA_VERSION}" PARENT_SCOPE)
  set(CPACK_FFPA_CUDA_VERSION "${FFPA_CUDA_VERSION}" PARENT_SCOPE)
  set(CPACK_FFPA_CHANNEL "${FFPA_CHANNEL}" PARENT_SCOPE)
  set(CPACK_FFPA_COMMIT "${FFPA_SOURCE_COMMIT}" PARENT_SCOPE)
  set(CPACK_FFPA_DIRTY "${FFPA_SOURCE_DIRTY}" PARENT_SCOPE)
  set(CPACK_FFPA_ARCHS "${FFPA_CUDA_ARCHS}" PARENT_SCOPE)
  set(CPACK_FFPA_HEAD_DIMS "${FFPA_HEAD_DIMS}" PARENT_SCOPE)
  set(CPACK_FFPA_DTYPES "${FFPA_DTYPES}" PARENT_SCOPE)
  set(CPACK_FFPA_BUILD_KERNELS "${FFPA_BUILD_KERNELS}" PARENT_SCOPE)
  set(CPACK_FFPA_NVCC_VERSION "${FFPA_NVCC_VERSION}" PARENT_SCOPE)
  set(CPACK_FFPA_FATBIN_COMPRESSION "${FFPA_FATBIN_COMPRESSION}" PARENT_SCOPE)
  set(CPACK_FFPA_GCC_VERSION "${CMAKE_CXX_COMPILER_VERSION}" PARENT_SCOPE)
  set(CPACK_FFPA_CMAKE_VERSION "${CMAKE_VERSION}" PARENT_SCOPE)
endfunction()
