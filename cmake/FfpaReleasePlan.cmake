# FfpaReleasePlan.cmake: what this configuration will build and where it goes.
#
# Printed at every configure; with FFPA_RELEASE_DRY_RUN=ON it is all that happens
# (the top level returns before defining any target).

# ffpa_print_release_plan()
#   Reads FFPA_PROFILE, FFPA_VERSION, FFPA_CUDA_VERSION, FFPA_CHANNEL,
#   FFPA_PYTHON_TAGS/PATHS, FFPA_CUDA_ARCHS, FFPA_HEAD_DIMS, FFPA_DTYPES,
#   FFPA_RELEASE_DIST, FFPA_BUILD_KERNELS from the caller's scope.
function(ffpa_print_release_plan)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_print_release_plan: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(_lines "")
  list(APPEND _lines
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
    list(APPEND _lines "CUDA wheels   (platform tag computed from the binaries at pack time)")
    foreach(_tag IN LISTS FFPA_PYTHON_TAGS)
      set(_name "ffpa_attn-${FFPA_CUDA_VERSION}-${_tag}-${_tag}-manylinux_2_<Y>_x86_64.whl")
      list(APPEND _lines "  ${FFPA_RELEASE_DIST}/${_name}")
        endforeach()
    list(APPEND _lines
      "  -> release assets of tag v${FFPA_CUDA_VERSION}, index whl/${FFPA_CHANNEL}/ffpa-attn/ (publish target)")
      else()
    list(APPEND _lines "kernels       none (pure profile or FFPA_BUILD_KERNELS=OFF)")
  endif()
  set(_pure "ffpa_attn-${FFPA_VERSION}-py3-none-any.whl")
  list(APPEND _lines "pure wheel" "  ${FFPA_RELEASE_DIST}/${_pure}"
    "  -> PyPI and release assets of tag v${FFPA_VERSION} (publish-pure target)")
  list(APPEND _lines "also          ${FFPA_RELEASE_DIST}/SHA256SUMS, ${FFPA_RELEASE_DIST}/ffpa-release-manifest.json")
  if(FFPA_RELEASE_DRY_RUN)
    list(APPEND _lines "DRY RUN: nothing will be built (FFPA_RELEASE_DRY_RUN=ON)")
  endif()
  list(JOIN _lines "\n  " _text)
  message(STATUS "ffpa release plan:\n  ${_text}")
endfunction()
