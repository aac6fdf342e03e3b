# FfpaReleaseGuards.cmake: the guards of docs/release.md that apply at
# configure time. Each stops with a message that names the fix. The messages keep
# the substance of the old release scripts' messages, which users know.

# FFPA_SHIPPED_INPUTS, the files a release's artefacts are made of, has its home beside
# the dirty flag that counts them (FfpaVersion.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/FfpaVersion.cmake")

# ffpa_guard_release_version(PROFILE <profile> VERSION <version> IS_RELEASE <bool>)
#   Release profiles (full, pure) refuse .devN and local versions.
function(ffpa_guard_release_version)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PROFILE;VERSION;IS_RELEASE" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_guard_release_version: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(arg_PROFILE MATCHES "^(full|pure)$" AND NOT arg_IS_RELEASE)
    message(FATAL_ERROR
      "profile ${arg_PROFILE} needs a release version, got '${arg_VERSION}'.\n"
      "Fix: tag the release commit (git tag vX.Y.Z) or pass -DFFPA_RELEASE_VERSION=X.Y.Z "
      "(a release version has no .devN and no +local part; the CUDA channel is added by the build).")
  endif()
endfunction()

# ffpa_uncommitted_inputs(<out-var> [SOURCE_DIR <dir>])
#   Lists shipped inputs that differ from HEAD: modified, staged, deleted or
#   untracked-but-not-ignored files (an untracked source file would be shipped).
#   SOURCE_DIR defaults to CMAKE_SOURCE_DIR; the packaging script (CPack) passes it,
#   so configure and packaging run the same check.
function(ffpa_uncommitted_inputs out_var)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SOURCE_DIR" "")
  if(NOT arg_SOURCE_DIR)
    set(arg_SOURCE_DIR "${CMAKE_SOURCE_DIR}")
  endif()
  execute_process(
    COMMAND git status --porcelain=v1 --untracked-files=all -- ${FFPA_SHIPPED_INPUTS}
    WORKING_DIRECTORY "${arg_SOURCE_DIR}"
    OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_QUIET)
  set(_files "")
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _lines "${_out}")
    foreach(_l IN LISTS _lines)
      if(_l MATCHES "^...(.+)$")
        list(APPEND _files "${CMAKE_MATCH_1}")
      endif()
    endforeach()
  endif()
  set(${out_var} "${_files}" PARENT_SCOPE)
endfunction()

# ffpa_guard_committed_sources(PROFILE <profile> ALLOW <bool>)
#   The release profiles (full, pure: both ship the sources under ffpa_attn/_src) build
#   from committed sources only, unless ALLOW is on, in which case they warn loudly that
#   the artefacts correspond to no commit.
function(ffpa_guard_committed_sources)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PROFILE;ALLOW" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_guard_committed_sources: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_PROFILE MATCHES "^(full|pure)$")
    return()
  endif()
  ffpa_uncommitted_inputs(_files)
  if(NOT _files)
    return()
  endif()
  list(JOIN _files "\n  " _list)
  if(arg_ALLOW)
    message(WARNING
      "\n**********************************************************************\n"
      "FFPA_RELEASE_ALLOW_UNCOMMITTED=ON: building profile ${arg_PROFILE} from UNCOMMITTED sources.\n"
      "The artefacts correspond to NO commit and must not be published as a release.\n"
      "Uncommitted shipped inputs:\n  ${_list}\n"
      "**********************************************************************")
  else()
    message(FATAL_ERROR
      "profile ${arg_PROFILE} builds from committed sources; commit these first:\n  ${_list}\n"
      "(an untracked file: commit it, remove it or add it to .gitignore; the wheels ship git's tracked "
      "files only, but a release tree must be the commit it names; "
      "or configure with -DFFPA_RELEASE_ALLOW_UNCOMMITTED=ON for a throwaway build that corresponds to no commit)")
  endif()
endfunction()

# ffpa_guard_channel(CHANNEL <channel> [NVCC_MAJOR <n>])
#   A channel is cu<CUDA major>, one of the channels of cmake/release-matrix.json
#   (FFPA_RELEASE_CHANNELS), and names the CUDA major of the nvcc in use.
function(ffpa_guard_channel)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "CHANNEL;NVCC_MAJOR" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_guard_channel: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  list(JOIN FFPA_RELEASE_CHANNELS ", " _known)
  list(GET FFPA_RELEASE_CHANNELS -1 _newest)
  if(NOT arg_CHANNEL MATCHES "^cu([0-9]+)$")
    message(FATAL_ERROR "FFPA_CHANNEL='${arg_CHANNEL}' is not a channel: channels are cu<CUDA major>, e.g. -DFFPA_CHANNEL=${_newest}.")
  endif()
  set(_major "${CMAKE_MATCH_1}")
  if(NOT arg_CHANNEL IN_LIST FFPA_RELEASE_CHANNELS)
    message(FATAL_ERROR "FFPA_CHANNEL=${arg_CHANNEL}: there is no ${arg_CHANNEL} channel; use -DFFPA_CHANNEL=${_newest} "
                        "(channels: ${_known}; a new CUDA major gets its channel in cmake/release-matrix.json, "
                        "see docs/release.md).")
  endif()
  if(arg_NVCC_MAJOR AND NOT _major STREQUAL arg_NVCC_MAJOR)
    message(FATAL_ERROR
      "FFPA_CHANNEL=${arg_CHANNEL} does not match the nvcc in use (CUDA ${arg_NVCC_MAJOR}.x): "
      "use -DFFPA_CHANNEL=cu${arg_NVCC_MAJOR}, or point CMAKE_CUDA_COMPILER at a CUDA ${_major}.x nvcc.")
  endif()
endfunction()

# ffpa_guard_docs_channels()
#   README.md and docs/ advertise no channel that does not exist; the rule is
#   FfpaDocsChannels.cmake's, which the publish targets run too.
include("${CMAKE_CURRENT_LIST_DIR}/FfpaDocsChannels.cmake")
function(ffpa_guard_docs_channels)
  ffpa_check_docs_channels(DOCS "${CMAKE_SOURCE_DIR}/README.md" "${CMAKE_SOURCE_DIR}/docs"
                           CHANNELS ${FFPA_RELEASE_CHANNELS} BASE "${CMAKE_SOURCE_DIR}")
endfunction()

# ffpa_find_nvcc(<out-path> <out-version>)
#   The nvcc CMake will use: CMAKE_CUDA_COMPILER, CUDACXX, PATH, /usr/local/cuda.
function(ffpa_find_nvcc out_path out_version)
  set(_nvcc "")
  if(CMAKE_CUDA_COMPILER)
    set(_nvcc "${CMAKE_CUDA_COMPILER}")
  elseif(DEFINED ENV{CUDACXX} AND NOT "$ENV{CUDACXX}" STREQUAL "")
    set(_nvcc "$ENV{CUDACXX}")
  else()
    find_program(FFPA_NVCC_EXECUTABLE nvcc HINTS /usr/local/cuda/bin)
    if(FFPA_NVCC_EXECUTABLE)
      set(_nvcc "${FFPA_NVCC_EXECUTABLE}")
    endif()
  endif()
  set(_ver "")
  if(_nvcc)
    execute_process(COMMAND "${_nvcc}" --version OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_QUIET)
    if(_rc EQUAL 0 AND _out MATCHES "release ([0-9]+)\\.([0-9]+)")
      set(_ver "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    endif()
  endif()
  set(${out_path} "${_nvcc}" PARENT_SCOPE)
  set(${out_version} "${_ver}" PARENT_SCOPE)
endfunction()

# ffpa_guard_cuda_toolkit(CHANNEL <channel> OUT_NVCC <var> OUT_VERSION <var> OUT_CHANNEL <var>)
#   Kernels need nvcc from CUDA 13+, matching the channel. An empty CHANNEL is the
#   channel of the nvcc in use, cu<major> (OUT_CHANNEL), which must exist.
function(ffpa_guard_cuda_toolkit)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "CHANNEL;OUT_NVCC;OUT_VERSION;OUT_CHANNEL" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_guard_cuda_toolkit: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  ffpa_find_nvcc(_nvcc _ver)
  if(NOT _nvcc)
    message(FATAL_ERROR
      "no nvcc found: the CUDA kernels need CUDA 13+. Install the CUDA 13 toolkit "
      "(or set CMAKE_CUDA_COMPILER=/path/to/nvcc), or configure without kernels: "
      "cmake --preset release-pure (pure wheel only) or -DFFPA_BUILD_KERNELS=OFF.")
  endif()
  if(NOT _ver)
    message(FATAL_ERROR "nvcc at ${_nvcc} does not report a version (nvcc --version failed); point CMAKE_CUDA_COMPILER at a working CUDA 13+ nvcc.")
  endif()
  string(REGEX MATCH "^[0-9]+" _major "${_ver}")
  if(_major LESS 13)
    message(FATAL_ERROR "nvcc at ${_nvcc} is not CUDA 13+ (it is CUDA ${_ver}); set CMAKE_CUDA_COMPILER to a CUDA 13 nvcc.")
  endif()
  set(_channel "${arg_CHANNEL}")
  if(NOT _channel)
    set(_channel "cu${_major}")
  endif()
  ffpa_guard_channel(CHANNEL "${_channel}" NVCC_MAJOR "${_major}")
  set(${arg_OUT_CHANNEL} "${_channel}" PARENT_SCOPE)
  set(${arg_OUT_NVCC} "${_nvcc}" PARENT_SCOPE)
  set(${arg_OUT_VERSION} "${_ver}" PARENT_SCOPE)
endfunction()

# ffpa_guard_release_archs(PROFILE <profile> ARCHS <list>)
#   The full profile builds the fixed release arch set of cmake/release-matrix.json.
function(ffpa_guard_release_archs)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PROFILE" "ARCHS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_guard_release_archs: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_PROFILE STREQUAL "full")
    return()
  endif()
  if("120" IN_LIST arg_ARCHS AND "120f" IN_LIST FFPA_RELEASE_CUDA_ARCHS)
    message(FATAL_ERROR "FFPA_CUDA_ARCHS contains '120': profile full needs the family target '120f' (the fp8/fp4 paths need it); the release arch set is ${FFPA_RELEASE_CUDA_ARCHS}.")
  endif()
  if(NOT "${arg_ARCHS}" STREQUAL "${FFPA_RELEASE_CUDA_ARCHS}")
    message(FATAL_ERROR "profile full builds the fixed release arch set '${FFPA_RELEASE_CUDA_ARCHS}', got '${arg_ARCHS}'. Drop -DFFPA_CUDA_ARCHS for a release, or use the dev/mini profile for other archs (the release set is cmake/release-matrix.json's cuda_archs).")
  endif()
endfunction()
