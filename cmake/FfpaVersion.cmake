# FfpaVersion.cmake: the package version, with setuptools-scm semantics.
#
#   FFPA_RELEASE_VERSION set        -> that version (validated as PEP 440)
#   HEAD is exactly tag vX.Y.Z      -> X.Y.Z
#   N commits after tag vX.Y.Z      -> X.Y.(Z+1).devN+g<sha>
#   no tag at all                   -> 0.0.1.devN+g<sha>   (N = commits in HEAD)
#   tracked files modified, or      -> ".dirty" appended to the local part
#   untracked (not ignored) files
#   among the shipped inputs
#                                      (X.Y.Z on a dirty exact tag becomes
#                                      X.Y.(Z+1).dev0+g<sha>.dirty, as setuptools-scm
#                                      refuses to call a dirty tree a release)
#   an sdist (ffpa-source.json)     -> the version, commit, dirty flag and commit time
#                                      the checkout had when the sdist was made: an
#                                      unpacked sdist has no git history, and may sit
#                                      inside someone else's repository
#
# ffpa-source.json is written by cmake/FfpaSourceRecord.cmake (from this function) into
# the sdists of the PEP 517 backend (tools/pep517); no checkout holds one.
#
# The version is computed at configure time. The configure step depends on
# .git/HEAD, the current branch ref and .git/index, so a commit, a checkout or a
# `git add` re-runs it; the packaging step re-checks the dirty flag right before
# writing wheels of a release profile (FfpaWheelPackaging.cmake).
include_guard(GLOBAL)

# Files whose content ends up in a wheel or decides how it is built. An uncommitted
# change to any of them, or an untracked file among them, means the artefacts correspond
# to no commit: the dirty flag counts them, and the release guards
# (FfpaReleaseGuards.cmake) list them. Untracked files never ship (the wheels' sources
# are git's tracked files, FfpaJitSources.cmake), but a tree holding them is not the
# commit it names.
set(FFPA_SHIPPED_INPUTS
  CMakeLists.txt CMakePresets.json cmake csrc index python/ffpa_attn
  README.md LICENSE tools/requirements.txt)

# ffpa_pep440_check(<version> <out-ok-var> <out-why-var>)
#   <version>      candidate version string
#   <out-ok-var>   set to TRUE when <version> is a valid PEP 440 version
#   <out-why-var>  set to a human-readable reason when it is not
function(ffpa_pep440_check version out_ok out_why)
  # PEP 440 public version: [N!]N(.N)*[{a|b|rc}N][.postN][.devN], optional +local.
  # Only the canonical spellings are accepted for releases we produce; the engine
  # normalises alternative spellings of versions it reads.
  # CMake regexes allow few groups, so the version is checked piece by piece:
  # local part, then .devN, .postN, pre-release, and finally the release numbers.
  set(_num "(0|[1-9][0-9]*)")
  set(_rest "${version}")
  set(_valid TRUE)
  if(_rest MATCHES "^([^+]*)\\+([a-z0-9]+(\\.[a-z0-9]+)*)$")
    set(_rest "${CMAKE_MATCH_1}")
  elseif(_rest MATCHES "\\+")
    set(_valid FALSE)
  endif()
  if(_rest MATCHES "^(.*)\\.dev${_num}$")
    set(_rest "${CMAKE_MATCH_1}")
  endif()
  if(_rest MATCHES "^(.*)\\.post${_num}$")
    set(_rest "${CMAKE_MATCH_1}")
  endif()
  if(_rest MATCHES "^(.*)(a|b|rc)${_num}$")
    set(_rest "${CMAKE_MATCH_1}")
  endif()
  if(_rest MATCHES "^[1-9][0-9]*!(.*)$")
    set(_rest "${CMAKE_MATCH_1}")
  endif()
  if(NOT _rest MATCHES "^${_num}(\\.${_num})*$")
    set(_valid FALSE)
  endif()
  if(version MATCHES "^[vV]")
    set(${out_ok} FALSE PARENT_SCOPE)
    set(${out_why} "drop the leading 'v': tags are vX.Y.Z, versions are X.Y.Z" PARENT_SCOPE)
  elseif(NOT _valid)
    set(${out_ok} FALSE PARENT_SCOPE)
    set(${out_why} "not a canonical PEP 440 version (expected e.g. 1.2.3, 1.2.3rc1, 1.2.3.post1, 1.2.3.dev4+g1a2b3c4; lower-case, no leading zeros)" PARENT_SCOPE)
  else()
    set(${out_ok} TRUE PARENT_SCOPE)
    set(${out_why} "" PARENT_SCOPE)
  endif()
endfunction()

function(_ffpa_git out_var)
  execute_process(COMMAND git ${ARGN}
    WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    set(${out_var} "${_out}" PARENT_SCOPE)
  else()
    set(${out_var} "NOTFOUND" PARENT_SCOPE)
  endif()
endfunction()

# _ffpa_read_source_record(<file> <out-version> <out-commit> <out-dirty> <out-epoch>)
#   Reads an sdist's ffpa-source.json; a record that is not one is an error (an sdist
#   must never silently build as version 0.0.1.dev0+unknown).
function(_ffpa_read_source_record file out_version out_commit out_dirty out_epoch)
  file(READ "${file}" _json)
  set(_values "")
  foreach(_key version source_commit source_dirty source_date_epoch)
    string(JSON _v ERROR_VARIABLE _err GET "${_json}" ${_key})
    if(_err)
      message(FATAL_ERROR "ffpa: ${file} is not a source record ('${_key}': ${_err}); "
                          "remake the sdist with python -m build --sdist from a git checkout.")
    endif()
    list(APPEND _values "${_v}")
  endforeach()
  list(GET _values 0 _version)
  list(GET _values 1 _commit)
  list(GET _values 2 _dirty)
  list(GET _values 3 _epoch)
  ffpa_pep440_check("${_version}" _ok _why)
  if(NOT _ok OR NOT _commit MATCHES "^([0-9a-f]+|unknown)$" OR NOT _epoch MATCHES "^[0-9]+$")
    message(FATAL_ERROR "ffpa: ${file} records version '${_version}', commit '${_commit}', epoch '${_epoch}': "
                        "not a version, a commit and a time (${_why}); remake the sdist from a git checkout.")
  endif()
  if(_dirty)
    set(_dirty TRUE)
  else()
    set(_dirty FALSE)
  endif()
  set(${out_version} "${_version}" PARENT_SCOPE)
  set(${out_commit} "${_commit}" PARENT_SCOPE)
  set(${out_dirty} ${_dirty} PARENT_SCOPE)
  set(${out_epoch} "${_epoch}" PARENT_SCOPE)
endfunction()

# _ffpa_channel_free(<version> <out-why>)
#   <out-why>: empty when <version>'s local part names no channel (cu<N>) and no 'local';
#   else why it is refused. The build adds both (ffpa_channel_version): given in a version
#   they would come twice (1.2.3+cu13.cu13.local).
function(_ffpa_channel_free version out_why)
  set(_why "")
  if(version MATCHES "\\+(.*)$")
    string(REPLACE "." ";" _parts "${CMAKE_MATCH_1}")
    foreach(_p IN LISTS _parts)
      if(_p MATCHES "^cu[0-9]+$" OR _p STREQUAL "local")
        set(_why "its local part names '${_p}', which the build adds itself (the CUDA wheels are <version>+<channel>, a build from source <version>+<channel>.local)")
        break()
      endif()
    endforeach()
  endif()
  set(${out_why} "${_why}" PARENT_SCOPE)
endfunction()

# ffpa_compute_version()
#   Sets in the caller's scope:
#     FFPA_VERSION           full PEP 440 version of the package (without channel)
#     FFPA_VERSION_IS_RELEASE TRUE when it has neither .devN nor a local part
#     FFPA_SOURCE_COMMIT     full commit SHA, or "unknown" outside git
#     FFPA_SOURCE_DIRTY      TRUE/FALSE (tracked files differ from HEAD, or untracked
#                            files lie among the shipped inputs)
#     FFPA_SOURCE_UNTRACKED  those untracked files, one per line (git's quoting)
#     FFPA_SOURCE_DATE_EPOCH SOURCE_DATE_EPOCH, else the commit time, else 315532800
#     FFPA_VERSION_ORIGIN    a short sentence saying where the version came from
function(ffpa_compute_version)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_compute_version: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()

  set(_commit "unknown")
  set(_dirty FALSE)
  set(_untracked "")
  set(_epoch "")
  set(_record_version "")
  set(_record "${CMAKE_SOURCE_DIR}/ffpa-source.json")
  if(EXISTS "${_record}")
    _ffpa_read_source_record("${_record}" _record_version _commit _dirty _epoch)
    set(_git_dir "NOTFOUND")
    if(NOT CMAKE_SCRIPT_MODE_FILE)
      set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_record}")
    endif()
  else()
    _ffpa_git(_git_dir rev-parse --absolute-git-dir)
    # Only a checkout of this tree itself: a source tree copied or unpacked inside another
    # repository (a vendored copy, an sdist without its record) must not take that
    # repository's commit, dirty flag and tags as its own version.
    if(NOT _git_dir STREQUAL "NOTFOUND")
      _ffpa_git(_top rev-parse --show-toplevel)
      file(REAL_PATH "${CMAKE_SOURCE_DIR}" _src_real)
      if(_top STREQUAL "NOTFOUND")
        set(_git_dir "NOTFOUND")
      else()
        file(REAL_PATH "${_top}" _top_real)
        if(NOT _top_real STREQUAL _src_real)
          set(_enclosing "${_top_real}")
          set(_git_dir "NOTFOUND")
        endif()
      endif()
    endif()
  endif()
  if(NOT _git_dir STREQUAL "NOTFOUND")
    _ffpa_git(_commit rev-parse HEAD)
    if(_commit STREQUAL "NOTFOUND")
      set(_commit "unknown")
    endif()
    _ffpa_git(_status status --porcelain --untracked-files=no)
    if(NOT _status STREQUAL "" AND NOT _status STREQUAL "NOTFOUND")
      set(_dirty TRUE)
    endif()
    # An untracked file elsewhere (notes at the root) is not the build's business, as
    # in setuptools-scm; one among the shipped inputs is.
    _ffpa_git(_untracked ls-files --others --exclude-standard -- ${FFPA_SHIPPED_INPUTS})
    if(NOT _untracked STREQUAL "" AND NOT _untracked STREQUAL "NOTFOUND")
      set(_dirty TRUE)
    else()
      set(_untracked "")
    endif()
    _ffpa_git(_epoch log -1 --format=%ct)
    # Re-run configure when HEAD moves, the branch advances or the index changes.
    set(_deps "${_git_dir}/HEAD" "${_git_dir}/index")
    _ffpa_git(_ref symbolic-ref -q HEAD)
    if(NOT _ref STREQUAL "NOTFOUND" AND EXISTS "${_git_dir}/${_ref}")
      list(APPEND _deps "${_git_dir}/${_ref}")
    endif()
    foreach(_d IN LISTS _deps)
      if(EXISTS "${_d}" AND NOT CMAKE_SCRIPT_MODE_FILE)
        set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_d}")
      endif()
    endforeach()
  endif()

  if(DEFINED ENV{SOURCE_DATE_EPOCH} AND NOT "$ENV{SOURCE_DATE_EPOCH}" STREQUAL "")
    set(_epoch "$ENV{SOURCE_DATE_EPOCH}")
  elseif(_epoch STREQUAL "" OR _epoch STREQUAL "NOTFOUND")
    set(_epoch 315532800)  # 1980-01-01, the earliest time a zip entry can carry
  endif()

  set(_requested "${FFPA_RELEASE_VERSION}")
  if(_requested STREQUAL "" AND DEFINED ENV{FFPA_RELEASE_VERSION})
    set(_requested "$ENV{FFPA_RELEASE_VERSION}")
  endif()

  if(NOT _record_version STREQUAL "")
    _ffpa_channel_free("${_record_version}" _why)
    if(_why)
      message(FATAL_ERROR "ffpa: ${_record} records version '${_record_version}', ${_why}; "
                          "remake the sdist from a git checkout (python -m build --sdist).")
    endif()
  endif()
  if(NOT _requested STREQUAL "")
    ffpa_pep440_check("${_requested}" _ok _why)
    if(NOT _ok)
      message(FATAL_ERROR "FFPA_RELEASE_VERSION='${_requested}' is invalid: ${_why}.")
    endif()
    _ffpa_channel_free("${_requested}" _why)
    if(_why)
      string(REGEX REPLACE "\\+.*$" "" _public "${_requested}")
      message(FATAL_ERROR "FFPA_RELEASE_VERSION='${_requested}' is invalid: ${_why}; "
                          "give -DFFPA_RELEASE_VERSION=${_public}.")
    endif()
    set(_version "${_requested}")
    set(_origin "FFPA_RELEASE_VERSION")
  elseif(NOT _record_version STREQUAL "")
    set(_version "${_record_version}")
    set(_origin "the sdist's source record (ffpa-source.json) of ${_commit}")
  elseif(_commit STREQUAL "unknown")
    set(_version "0.0.1.dev0+unknown")
    if(DEFINED _enclosing)
      set(_origin "no git checkout of this tree (it sits inside the repository at ${_enclosing}, whose version is not its own): placeholder version")
    else()
      set(_origin "no git checkout: placeholder version")
    endif()
  else()
    _ffpa_git(_desc describe --tags --long --match "v[0-9]*" HEAD)
    _ffpa_git(_short rev-parse --short=7 HEAD)
    if(_desc MATCHES "^v([0-9]+)\\.([0-9]+)\\.([0-9]+)-([0-9]+)-g[0-9a-f]+$")
      set(_maj "${CMAKE_MATCH_1}")
      set(_min "${CMAKE_MATCH_2}")
      set(_pat "${CMAKE_MATCH_3}")
      set(_n "${CMAKE_MATCH_4}")
      if(_n EQUAL 0 AND NOT _dirty)
        set(_version "${_maj}.${_min}.${_pat}")
        set(_origin "exact tag v${_version}")
      else()
        math(EXPR _next "${_pat} + 1")
        set(_version "${_maj}.${_min}.${_next}.dev${_n}+g${_short}")
        set(_origin "${_n} commit(s) after tag v${_maj}.${_min}.${_pat}")
      endif()
    else()
      if(NOT _desc STREQUAL "NOTFOUND")
        message(WARNING "ffpa: ignoring tag '${_desc}': release tags look like vX.Y.Z")
      endif()
      _ffpa_git(_n rev-list --count HEAD)
      set(_version "0.0.1.dev${_n}+g${_short}")
      set(_origin "no release tag, ${_n} commit(s) in history")
    endif()
    if(_dirty)
      set(_version "${_version}.dirty")
      string(APPEND _origin ", uncommitted changes")
    endif()
    ffpa_pep440_check("${_version}" _ok _why)
    if(NOT _ok)
      message(FATAL_ERROR "ffpa: derived version '${_version}' is invalid: ${_why}. Pass -DFFPA_RELEASE_VERSION=X.Y.Z.")
    endif()
  endif()

  if(_version MATCHES "\\.dev[0-9]+" OR _version MATCHES "\\+")
    set(_is_release FALSE)
  else()
    set(_is_release TRUE)
  endif()

  set(FFPA_VERSION "${_version}" PARENT_SCOPE)
  set(FFPA_VERSION_IS_RELEASE ${_is_release} PARENT_SCOPE)
  set(FFPA_SOURCE_COMMIT "${_commit}" PARENT_SCOPE)
  set(FFPA_SOURCE_DIRTY ${_dirty} PARENT_SCOPE)
  set(FFPA_SOURCE_UNTRACKED "${_untracked}" PARENT_SCOPE)
  set(FFPA_SOURCE_DATE_EPOCH "${_epoch}" PARENT_SCOPE)
  set(FFPA_VERSION_ORIGIN "${_origin}" PARENT_SCOPE)
endfunction()

# ffpa_channel_version(<version> <channel> <out-var> [LOCAL])
#   The CUDA wheels' version: <version>+<channel>, or <version>.<channel> when
#   <version> already has a local part (PEP 440 allows one '+' only). LOCAL: a wheel
#   built from source for one machine (FFPA_LOCAL_BUILD, the PEP 517 backend's sdists)
#   ends in .local, so nobody mistakes it for a release wheel (X.Y.Z+cu13.local).
function(ffpa_channel_version version channel out_var)
  cmake_parse_arguments(PARSE_ARGV 3 arg "LOCAL" "" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_channel_version: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  _ffpa_channel_free("${version}" _why)
  if(_why)
    message(FATAL_ERROR "ffpa_channel_version: version '${version}': ${_why}; give the version without it.")
  endif()
  if(version MATCHES "\\+")
    set(v "${version}.${channel}")
  else()
    set(v "${version}+${channel}")
  endif()
  if(arg_LOCAL)
    string(APPEND v ".local")
  endif()
  set(${out_var} "${v}" PARENT_SCOPE)
endfunction()
