# FfpaReleaseNotes: release notes from git history (docs/release.md
# section 4). The `release-notes` target writes <dist>/RELEASE_NOTES.md with git-cliff
# (pinned in tools/requirements.txt) and tools/cliff.toml: the changes since the
# previous release tag, grouped, then the install lines. It is written for review: edit
# it if needed, then publish; the publish targets use the file as it is and never
# regenerate it (FfpaPublish.cmake).
#
# Usage, after include(FfpaReleaseNotes):
#
#   ffpa_add_release_notes_target(
#     VERSION <v>          release version (0.3.0); the install lines pin it
#     CHANNEL <c>          CUDA channel of the install lines (cu13)
#     OUTPUT <file>        the notes file, <dist>/RELEASE_NOTES.md
#     [MANIFEST <file>]    release manifest: its source_commit ends the range (the
#                          commit the tags will name); without one, HEAD
#     [SOURCE_DIR <dir>]   git checkout (default CMAKE_SOURCE_DIR)
#     [INDEX_URL <url>]    the CUDA channel's index for the install lines (default
#                          <FFPA_SITE_URL>/<FFPA_INDEX_PREFIX>/<channel>/)
#     [CONFIG <file>]      git-cliff configuration (default tools/cliff.toml)
#     [GIT_CLIFF <exe>])   git-cliff (default: the tools venv's, then PATH)
#
#   ffpa_release_notes_commands(NOTES <file> VERSION <v> TAG <tag> ASSETS <spec>
#     [APPEND] OUT_CHECK <var> OUT_ATTACH <var> OUT_SHOW <var>)
#     Command lines for the publish targets: CHECK fails unless <file> exists and was
#     written for <v> (stale notes of another release are refused); ATTACH makes <file>
#     the notes of release <tag> in the asset store <spec> (APPEND: below the notes the
#     engine wrote, i.e. the CUDA release's install commands); SHOW prints what ATTACH
#     would do (the dry run).
#
# Script mode (what those commands run):
#   cmake -DFFPA_NOTES_ACTION=write|check|attach -D... -P FfpaReleaseNotes.cmake
include_guard(GLOBAL)

# The first line of every notes file; `check` reads the version from it and `attach
# APPEND` cuts an older copy of the notes at it, so a re-run replaces, never doubles.
set(_FFPA_NOTES_MARKER "<!-- release notes of ")

function(ffpa_add_release_notes_target)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "VERSION;CHANNEL;OUTPUT;MANIFEST;SOURCE_DIR;INDEX_URL;CONFIG;GIT_CLIFF" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_add_release_notes_target: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(req VERSION CHANNEL OUTPUT)
    if(NOT arg_${req})
      message(FATAL_ERROR "ffpa_add_release_notes_target: ${req} is required")
    endif()
  endforeach()
  if(NOT arg_SOURCE_DIR)
    set(arg_SOURCE_DIR "${CMAKE_SOURCE_DIR}")
  endif()
  if(NOT arg_CONFIG)
    set(arg_CONFIG "${CMAKE_SOURCE_DIR}/tools/cliff.toml")
  endif()
  if(NOT arg_GIT_CLIFF)
    set(_hints "")
    if(FFPA_TOOLS_PYTHON)
      get_filename_component(_hints "${FFPA_TOOLS_PYTHON}" DIRECTORY)
    endif()
    find_program(FFPA_GIT_CLIFF git-cliff HINTS ${_hints} DOC "git-cliff, for the release-notes target")
    set(arg_GIT_CLIFF "${FFPA_GIT_CLIFF}")
  endif()
  if(NOT arg_INDEX_URL)
    _ffpa_notes_site_url(_site)
    set(arg_INDEX_URL "${_site}/${FFPA_INDEX_PREFIX}/${arg_CHANNEL}/")
  endif()
  find_package(Git QUIET)
  add_custom_target(release-notes
    COMMAND "${CMAKE_COMMAND}" -DFFPA_NOTES_ACTION=write "-DVERSION=${arg_VERSION}" "-DCHANNEL=${arg_CHANNEL}"
            "-DOUTPUT=${arg_OUTPUT}" "-DMANIFEST=${arg_MANIFEST}" "-DSOURCE_DIR=${arg_SOURCE_DIR}"
            "-DINDEX_URL=${arg_INDEX_URL}" "-DCONFIG=${arg_CONFIG}" "-DGIT_CLIFF=${arg_GIT_CLIFF}"
            "-DGIT=${GIT_EXECUTABLE}" -P "${CMAKE_CURRENT_FUNCTION_LIST_FILE}"
    USES_TERMINAL VERBATIM
    COMMENT "Release notes of ffpa-attn ${arg_VERSION} from git history -> ${arg_OUTPUT}")
endfunction()

# The site URL of the install lines: FFPA_SITE_URL, else what the engine defaults to for
# a gh: store (GitHub Pages of OWNER/REPO, owner lower-cased: GhStore::default_site_url
# in index/site/src/assets.cpp), else the engine's own placeholder.
function(_ffpa_notes_site_url out)
  if(FFPA_SITE_URL)
    string(REGEX REPLACE "/+$" "" url "${FFPA_SITE_URL}")
  elseif(FFPA_ASSETS MATCHES "^gh:([^/]+)/([^/]+)$")
    string(TOLOWER "${CMAKE_MATCH_1}" owner)
    set(url "https://${owner}.github.io/${CMAKE_MATCH_2}")
  else()
    set(url "<site-url>")
  endif()
  set(${out} "${url}" PARENT_SCOPE)
endfunction()

function(ffpa_release_notes_commands)
  cmake_parse_arguments(PARSE_ARGV 0 arg "APPEND" "NOTES;VERSION;TAG;ASSETS;OUT_CHECK;OUT_ATTACH;OUT_SHOW" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_release_notes_commands: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(req NOTES VERSION TAG ASSETS OUT_CHECK OUT_ATTACH OUT_SHOW)
    if(NOT arg_${req})
      message(FATAL_ERROR "ffpa_release_notes_commands: ${req} is required")
    endif()
  endforeach()
  set(mode replace)
  if(arg_APPEND)
    set(mode append)
  endif()
  set(script "${CMAKE_CURRENT_FUNCTION_LIST_FILE}")
  set(${arg_OUT_CHECK} "${CMAKE_COMMAND}" -DFFPA_NOTES_ACTION=check "-DNOTES=${arg_NOTES}"
      "-DVERSION=${arg_VERSION}" -P "${script}" PARENT_SCOPE)
  set(attach "${CMAKE_COMMAND}" -DFFPA_NOTES_ACTION=attach "-DNOTES=${arg_NOTES}" "-DVERSION=${arg_VERSION}"
      "-DTAG=${arg_TAG}" "-DASSETS=${arg_ASSETS}" "-DMODE=${mode}")
  set(${arg_OUT_ATTACH} ${attach} -P "${script}" PARENT_SCOPE)
  set(${arg_OUT_SHOW} ${attach} -DDRY_RUN=ON -P "${script}" PARENT_SCOPE)
endfunction()

# ---- script mode ----------------------------------------------------------------------
if(NOT CMAKE_SCRIPT_MODE_FILE OR NOT CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  return()
endif()

function(_ffpa_notes_fail)
  string(JOIN "" msg ${ARGV})
  message(FATAL_ERROR "release notes: ${msg}")
endfunction()

function(_ffpa_notes_git out)
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0)
    set(${out} "${o}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# write: git-cliff over <previous release tag>..<release commit>.
function(_ffpa_notes_write)
  foreach(v VERSION CHANNEL OUTPUT SOURCE_DIR CONFIG)
    if(NOT ${v})
      _ffpa_notes_fail("-D${v}= is required")
    endif()
  endforeach()
  if(NOT GIT)
    set(GIT git)
  endif()
  if(NOT GIT_CLIFF OR NOT EXISTS "${GIT_CLIFF}")
    _ffpa_notes_fail("git-cliff not found ('${GIT_CLIFF}'); run tools/bootstrap (tools/requirements.txt pins it), "
                     "or pass -DFFPA_GIT_CLIFF=<path> to cmake")
  endif()
  if(NOT EXISTS "${CONFIG}")
    _ffpa_notes_fail("git-cliff configuration ${CONFIG} is missing; it is committed as tools/cliff.toml")
  endif()
  # The release commit: the manifest's, so the notes end where the tags will point.
  set(commit "")
  if(MANIFEST AND EXISTS "${MANIFEST}")
    file(READ "${MANIFEST}" m)
    string(JSON commit ERROR_VARIABLE jerr GET "${m}" source_commit)
    if(jerr)
      set(commit "")
    endif()
  endif()
  if(NOT commit)
    _ffpa_notes_git(commit rev-parse --verify HEAD^{commit})
    if(NOT commit)
      _ffpa_notes_fail("${SOURCE_DIR} is not a git checkout with a commit; release notes come from its history")
    endif()
  endif()
  # The previous release: the newest vX.Y.Z tag reachable from the commit's parents, so
  # a tag already on the release commit (vV itself) is not its own predecessor. CUDA tags
  # (vV+cuNN) and pre-release tags (v0.3.0rc1) carry other characters and are excluded.
  _ffpa_notes_git(previous describe --tags --abbrev=0 --match "v[0-9]*" --exclude "v*[!0-9.]*" "${commit}^")
  if(previous)
    set(range "${previous}..${commit}")
  else()
    set(range "${commit}")
    set(previous "the first commit")
  endif()
  if(NOT INDEX_URL)
    set(INDEX_URL "<site-url>/whl/${CHANNEL}/")
  endif()
  get_filename_component(outdir "${OUTPUT}" DIRECTORY)
  file(MAKE_DIRECTORY "${outdir}")
  set(tmp "${OUTPUT}.tmp")
  # Only our variables and the range steer git-cliff: no GIT_CLIFF_* from the caller.
  set(unset "")
  foreach(var GIT_CLIFF_CONFIG GIT_CLIFF_CONFIG_URL GIT_CLIFF_WORKDIR GIT_CLIFF_REPOSITORY GIT_CLIFF_TAG
              GIT_CLIFF_TAG_PATTERN GIT_CLIFF_SKIP_TAGS GIT_CLIFF_IGNORE_TAGS GIT_CLIFF_TEMPLATE GIT_CLIFF_OUTPUT
              GIT_CLIFF_PREPEND GIT_CLIFF_INCLUDE_PATH GIT_CLIFF_EXCLUDE_PATH GIT_CLIFF_CONTEXT)
    list(APPEND unset --unset=${var})
  endforeach()
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env ${unset}
            "FFPA_NOTES_PROJECT=ffpa-attn" "FFPA_NOTES_VERSION=${VERSION}" "FFPA_NOTES_CHANNEL=${CHANNEL}"
            "FFPA_NOTES_INDEX=${INDEX_URL}" "FFPA_NOTES_RANGE=${range}" "FFPA_NOTES_PREVIOUS=${previous}"
            "${GIT_CLIFF}" --config "${CONFIG}" --repository "${SOURCE_DIR}" --tag "v${VERSION}"
            --output "${tmp}" -- "${range}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${tmp}")
    file(REMOVE "${tmp}")
    _ffpa_notes_fail("git-cliff failed on ${range} (exit ${rc}):\n${o}${e}")
  endif()
  file(RENAME "${tmp}" "${OUTPUT}")
  message(STATUS "release notes: ${OUTPUT} (${range}); review it, then publish")
endfunction()

function(_ffpa_notes_read_checked out)
  if(NOT EXISTS "${NOTES}")
    _ffpa_notes_fail("${NOTES} is missing: write it with `cmake --build <build dir> --target release-notes`, "
                     "review it, then publish again")
  endif()
  file(READ "${NOTES}" text)
  string(FIND "${text}" "${_FFPA_NOTES_MARKER}" at)
  if(NOT at EQUAL 0)
    _ffpa_notes_fail("${NOTES} does not start with '${_FFPA_NOTES_MARKER}...': it was not written by the "
                     "release-notes target; keep that first line when editing, or write the file again")
  endif()
  string(REGEX MATCH "^<!-- release notes of [^ ]+ ([^ ,]+)," _ "${text}")
  if(NOT CMAKE_MATCH_1 STREQUAL VERSION)
    _ffpa_notes_fail("${NOTES} was written for version '${CMAKE_MATCH_1}', this release is '${VERSION}': write "
                     "it again with `cmake --build <build dir> --target release-notes` and review it")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Notes of a release: replace them, or (APPEND) keep what precedes an earlier copy.
function(_ffpa_notes_compose old new out)
  if(MODE STREQUAL "append")
    string(FIND "${old}" "${_FFPA_NOTES_MARKER}" at)
    if(at GREATER_EQUAL 0)
      string(SUBSTRING "${old}" 0 ${at} old)
    endif()
    string(REGEX REPLACE "[\n ]+$" "" old "${old}")
    set(${out} "${old}\n\n${new}" PARENT_SCOPE)
  else()
    set(${out} "${new}" PARENT_SCOPE)
  endif()
endfunction()

# attach: make NOTES the notes of release TAG in the store ASSETS.
function(_ffpa_notes_attach)
  foreach(v NOTES TAG ASSETS MODE VERSION)
    if(NOT ${v})
      _ffpa_notes_fail("-D${v}= is required")
    endif()
  endforeach()
  _ffpa_notes_read_checked(text)
  if(ASSETS MATCHES "^gh:(.+)$")
    set(repo "${CMAKE_MATCH_1}")
    # The engine's FFPA_GH override applies here too (tests record the command lines).
    if(DEFINED ENV{FFPA_GH} AND NOT "$ENV{FFPA_GH}" STREQUAL "")
      set(gh "$ENV{FFPA_GH}")
    else()
      set(gh gh)
    endif()
    set(file "${NOTES}")
    if(MODE STREQUAL "append")
      set(file "${NOTES}.${TAG}.md")
      if(DRY_RUN)
        message("  ${gh} release view ${TAG} --repo ${repo} --json body --jq .body   # then append ${NOTES}")
      else()
        execute_process(COMMAND "${gh}" release view "${TAG}" --repo "${repo}" --json body --jq .body
          RESULT_VARIABLE rc OUTPUT_VARIABLE body ERROR_VARIABLE e)
        if(NOT rc EQUAL 0)
          _ffpa_notes_fail("gh release view ${TAG} failed (${e}); check gh auth status, then run the same "
                           "publish target again: finished steps are skipped")
        endif()
        _ffpa_notes_compose("${body}" "${text}" body)
        file(WRITE "${file}" "${body}")
      endif()
    endif()
    set(cmd "${gh}" release edit "${TAG}" --repo "${repo}" --notes-file "${file}")
    if(DRY_RUN)
      list(JOIN cmd " " line)
      message("  ${line}")
      return()
    endif()
    execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
    if(NOT rc EQUAL 0)
      _ffpa_notes_fail("gh release edit ${TAG} failed (exit ${rc}): ${o}${e}; the release itself is published: "
                       "fix the cause and run the same publish target again")
    endif()
  elseif(ASSETS MATCHES "^dir:(.+)$")
    # A dir: store keeps a release's record in <store>/<tag>/.release.json (written by
    # the engine: index/site/src/assets.cpp); its "notes" is what gh would show.
    set(record "${CMAKE_MATCH_1}/${TAG}/.release.json")
    if(DRY_RUN)
      message("  # set the notes of ${TAG} in ${record} from ${NOTES}")
      return()
    endif()
    if(NOT EXISTS "${record}")
      _ffpa_notes_fail("${record} is missing: release ${TAG} was not created; run the publish target again")
    endif()
    file(READ "${record}" json)
    string(JSON old ERROR_VARIABLE jerr GET "${json}" notes)
    if(jerr)
      set(old "")
    endif()
    _ffpa_notes_compose("${old}" "${text}" notes)
    # string(JSON SET) takes JSON: encode the text as a JSON string first.
    string(REPLACE "\\" "\\\\" esc "${notes}")
    string(REPLACE "\"" "\\\"" esc "${esc}")
    string(REPLACE "\n" "\\n" esc "${esc}")
    string(REPLACE "\t" "\\t" esc "${esc}")
    string(REPLACE "\r" "\\r" esc "${esc}")
    string(JSON json SET "${json}" notes "\"${esc}\"")
    file(WRITE "${record}.notes-tmp" "${json}\n")
    file(RENAME "${record}.notes-tmp" "${record}")
  else()
    _ffpa_notes_fail("asset store '${ASSETS}' is neither gh:OWNER/REPO nor dir:PATH")
  endif()
  message(STATUS "release notes: ${NOTES} set as the notes of ${TAG}")
endfunction()

if(FFPA_NOTES_ACTION STREQUAL "write")
  _ffpa_notes_write()
elseif(FFPA_NOTES_ACTION STREQUAL "check")
  foreach(v NOTES VERSION)
    if(NOT ${v})
      _ffpa_notes_fail("-D${v}= is required")
    endif()
  endforeach()
  _ffpa_notes_read_checked(_text)
  message(STATUS "release notes: ${NOTES} (version ${VERSION})")
elseif(FFPA_NOTES_ACTION STREQUAL "attach")
  _ffpa_notes_attach()
else()
  _ffpa_notes_fail("-DFFPA_NOTES_ACTION= must be write, check or attach, got '${FFPA_NOTES_ACTION}'")
endif()
