# FfpaPublish: the explicit publishing targets (docs/release.md sections 3 and 4).
# None is part of ALL: publishing is always asked for by name.
#
#   publish       create release vV+CHANNEL, upload the CUDA wheels, merge the index in
#                 the site repository, commit and push it (ffpa-index publish)
#   publish-pure  upload the pure wheel with twine, then create release vV at the
#                 release commit (ffpa-index publish-pure)
#   preflight     both of the above with --dry-run: every check, the exact commands,
#                 nothing changed
#
# Configured by cache variables, so a release machine sets them once:
#   FFPA_SITE_REPO            git checkout of the site's gh-pages branch
#   FFPA_ASSETS               dir:PATH or gh:OWNER/REPO (where release assets go)
#   FFPA_SITE_URL             site base URL for the install notes (gh: default OWNER.github.io/REPO)
#   FFPA_INDEX_PREFIX         directory of the index in the site (default whl)
#   FFPA_RELEASE_URL          anchor base URL, "{tag}" expands; empty: the store's own
#   FFPA_PYPI_REPOSITORY_URL  twine upload URL for the pure wheel
#
# Usage, after include(FfpaPublish):
#
#   ffpa_add_publish_targets(
#     VERSION <v>            release version without channel (0.2.5)
#     CHANNEL <c>            channel of the CUDA wheels (cu13)
#     [WHEELS_DIR <dir>]     where the wheels are (default: the manifest's directory)
#     [MANIFEST <file>]      ffpa-release-manifest.json written by packaging (default
#                            <WHEELS_DIR>/ffpa-release-manifest.json); it names the
#                            wheels, their sha256 and the source commit the tags target
#     [DEPENDS <target>...]  targets that produce the wheels (the packaging target)
#     [CLI <target|path>]    the ffpa-index executable (default: target ffpa-index)
#     [DOCS <path>...]       scanned for a channel that does not exist (default
#                            README.md and docs/ of the source tree)
#     [SOURCE_DIR <dir>]     checkout holding the release commit: its HEAD when the
#                            manifest names none; publish refuses a commit it does
#                            not hold (default CMAKE_SOURCE_DIR)
#     [NOTES <file>]         release notes written by the release-notes target
#                            (FfpaReleaseNotes.cmake) and reviewed: for a release version,
#                            publish-pure makes them the notes of vV and publish appends
#                            them under vV+CHANNEL's install commands; both refuse to start
#                            when the file is missing or was written for another version
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/FfpaReleaseMatrix.cmake")   # the channels that exist
include("${CMAKE_CURRENT_LIST_DIR}/FfpaVersion.cmake")         # ffpa_channel_version

set(FFPA_SITE_REPO "" CACHE PATH "Git checkout of the site repository's gh-pages branch (publish)")
set(FFPA_ASSETS "gh:xlite-dev/ffpa-attn" CACHE STRING "Release asset store: dir:PATH or gh:OWNER/REPO")
set(FFPA_SITE_URL "" CACHE STRING "Site base URL for install notes; empty: derived from FFPA_ASSETS")
set(FFPA_INDEX_PREFIX "whl" CACHE STRING "Directory of the wheel index inside the site")
set(FFPA_RELEASE_URL "" CACHE STRING "Anchor base URL ({tag} expands); empty: the asset store's download URL")
set(FFPA_PYPI_REPOSITORY_URL "https://upload.pypi.org/legacy/" CACHE STRING
    "twine repository URL the pure wheel is uploaded to")

function(ffpa_add_publish_targets)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "VERSION;CHANNEL;WHEELS_DIR;MANIFEST;CLI;SOURCE_DIR;NOTES"
                        "DEPENDS;DOCS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_add_publish_targets: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(req VERSION CHANNEL)
    if(NOT arg_${req})
      message(FATAL_ERROR "ffpa_add_publish_targets: ${req} is required")
    endif()
  endforeach()
  if(NOT arg_MANIFEST AND NOT arg_WHEELS_DIR)
    message(FATAL_ERROR "ffpa_add_publish_targets: give WHEELS_DIR or MANIFEST")
  endif()
  if(NOT arg_MANIFEST)
    set(arg_MANIFEST "${arg_WHEELS_DIR}/ffpa-release-manifest.json")
  endif()
  if(NOT arg_CLI)
    set(arg_CLI ffpa-index)
  endif()
  if(TARGET ${arg_CLI})
    set(cli "$<TARGET_FILE:${arg_CLI}>")
    list(APPEND arg_DEPENDS ${arg_CLI})
  else()
    set(cli "${arg_CLI}")
  endif()
  if(NOT arg_SOURCE_DIR)
    set(arg_SOURCE_DIR "${CMAKE_SOURCE_DIR}")
  endif()
  if(NOT DEFINED arg_DOCS)
    set(arg_DOCS "${CMAKE_SOURCE_DIR}/README.md" "${CMAKE_SOURCE_DIR}/docs")
  endif()

  set(where --manifest "${arg_MANIFEST}")
  if(arg_WHEELS_DIR)
    list(APPEND where --wheels-dir "${arg_WHEELS_DIR}")
  endif()
  # The CUDA wheels' version: the one join rule (FfpaVersion.cmake). A dev version is
  # joined with '.', and publish refuses it with its own message (pre-release).
  ffpa_channel_version("${arg_VERSION}" "${arg_CHANNEL}" cuda_version)
  set(cuda ${cli} publish --tag "v${cuda_version}" --channel ${arg_CHANNEL} ${where}
      --site-repo "${FFPA_SITE_REPO}" --assets "${FFPA_ASSETS}" --index-prefix "${FFPA_INDEX_PREFIX}"
      --source-dir "${arg_SOURCE_DIR}")
  # Docs naming a channel that does not exist stop publish before the engine runs: the
  # same check (FfpaDocsChannels.cmake) as the configure guard of profile full.
  string(REPLACE ";" "@@" docs_arg "${arg_DOCS}")
  string(REPLACE ";" "@@" channels_arg "${FFPA_RELEASE_CHANNELS}")
  set(docs_check COMMAND "${CMAKE_COMMAND}" "-DDOCS=${docs_arg}" "-DCHANNELS=${channels_arg}"
      -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/FfpaDocsChannels.cmake")
  foreach(opt IN ITEMS SITE_URL RELEASE_URL)
    if(FFPA_${opt})
      string(TOLOWER "${opt}" flag)
      string(REPLACE "_" "-" flag "${flag}")
      list(APPEND cuda --${flag} "${FFPA_${opt}}")
    endif()
  endforeach()
  set(pure ${cli} publish-pure --tag "v${arg_VERSION}" ${where} --repository-url "${FFPA_PYPI_REPOSITORY_URL}"
      --assets "${FFPA_ASSETS}" --source-dir "${arg_SOURCE_DIR}")

  # A missing site repository is a configuration problem; the targets then say how to
  # fix it instead of running a command that fails obscurely.
  if(NOT FFPA_SITE_REPO)
    set(cuda ${CMAKE_COMMAND} -E echo
        "publish: set the site checkout: cmake -DFFPA_SITE_REPO=<gh-pages checkout> <build dir>"
        COMMAND ${CMAKE_COMMAND} -E false)
  endif()

  # Release notes (FfpaReleaseNotes.cmake): checked before anything is published, attached once the
  # engine has created the release. Only a release version has them: the engine refuses a
  # dev/pre-release version with its own message, which a missing-notes error would hide.
  set(notes_check "")
  set(cuda_notes "")
  set(pure_notes "")
  set(cuda_notes_dry "")
  set(pure_notes_dry "")
  if(arg_NOTES AND arg_VERSION MATCHES "^[0-9]+(\\.[0-9]+)*$")
    include(FfpaReleaseNotes)
    ffpa_release_notes_commands(NOTES "${arg_NOTES}" VERSION "${arg_VERSION}" TAG "v${cuda_version}"
      ASSETS "${FFPA_ASSETS}" APPEND OUT_CHECK check OUT_ATTACH attach OUT_SHOW show)
    set(notes_check COMMAND ${check})
    set(cuda_notes COMMAND ${attach})
    set(cuda_notes_dry COMMAND ${show})
    ffpa_release_notes_commands(NOTES "${arg_NOTES}" VERSION "${arg_VERSION}" TAG "v${arg_VERSION}"
      ASSETS "${FFPA_ASSETS}" OUT_CHECK check OUT_ATTACH attach OUT_SHOW show)
    set(pure_notes COMMAND ${attach})
    set(pure_notes_dry COMMAND ${show})
  endif()

  add_custom_target(publish ${docs_check} ${notes_check} COMMAND ${cuda} ${cuda_notes} DEPENDS ${arg_DEPENDS}
    USES_TERMINAL VERBATIM
    COMMENT "Publishing ffpa-attn ${cuda_version} (${FFPA_ASSETS}, ${FFPA_SITE_REPO})")
  add_custom_target(publish-pure ${notes_check} COMMAND ${pure} ${pure_notes} DEPENDS ${arg_DEPENDS}
    USES_TERMINAL VERBATIM
    COMMENT "Publishing the pure wheel ffpa-attn ${arg_VERSION} to ${FFPA_PYPI_REPOSITORY_URL}")
  if(FFPA_SITE_REPO)
    set(cuda_dry ${cuda} --dry-run)
  else()
    set(cuda_dry ${cuda})
  endif()
  add_custom_target(preflight ${docs_check} ${notes_check} COMMAND ${cuda_dry} ${cuda_notes_dry}
    COMMAND ${pure} --dry-run ${pure_notes_dry} DEPENDS ${arg_DEPENDS}
    USES_TERMINAL VERBATIM COMMENT "Publishing preflight (dry run of publish and publish-pure)")
endfunction()
