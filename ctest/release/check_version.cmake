# check_version.cmake: FfpaVersion.cmake against setuptools-scm semantics, on a
# scratch git repository. Run with cmake -P -DSOURCE=<repo> -DWORK=<dir>.
cmake_minimum_required(VERSION 3.25)
set(_repo "${WORK}/repo")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${_repo}")

# The probe runs ffpa_compute_version with the scratch repo as the source dir.
file(WRITE "${WORK}/probe.cmake" "
include(\"${SOURCE}/cmake/FfpaVersion.cmake\")
ffpa_compute_version()
message(\"VERSION=\${FFPA_VERSION}|RELEASE=\${FFPA_VERSION_IS_RELEASE}|DIRTY=\${FFPA_SOURCE_DIRTY}|COMMIT=\${FFPA_SOURCE_COMMIT}|EPOCH=\${FFPA_SOURCE_DATE_EPOCH}\")
")

function(git)
  execute_process(COMMAND git -c user.name=t -c user.email=t@localhost ${ARGN}
    WORKING_DIRECTORY "${_repo}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "git ${ARGN} failed")
  endif()
endfunction()

# expect(<regex> [<-D args>...])
function(expect regex)
  execute_process(COMMAND "${CMAKE_COMMAND}" ${ARGN} -P "${WORK}/probe.cmake"
    WORKING_DIRECTORY "${_probe_dir}" OUTPUT_VARIABLE _o ERROR_VARIABLE _e RESULT_VARIABLE _rc)
  set(_all "${_o}${_e}")
  string(REGEX REPLACE "[ \t\r\n]+" " " _all "${_all}")
  if(NOT _all MATCHES "${regex}")
    message(FATAL_ERROR "expected /${regex}/ with '${ARGN}', got:\n${_all}")
  endif()
  message(STATUS "ok: ${regex}")
endfunction()

set(ENV{SOURCE_DATE_EPOCH} "")
set(_probe_dir "${_repo}")
git(init -q -b main)
file(WRITE "${_repo}/a.txt" "1\n")
git(add a.txt)
git(commit -q -m one)
git(commit -q --allow-empty -m two)
execute_process(COMMAND git rev-parse --short=7 HEAD WORKING_DIRECTORY "${_repo}" OUTPUT_VARIABLE _sha OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND git log -1 --format=%ct WORKING_DIRECTORY "${_repo}" OUTPUT_VARIABLE _ct OUTPUT_STRIP_TRAILING_WHITESPACE)

# No tag: 0.0.1.devN+g<sha>, N = commits in history; epoch = commit time.
expect("VERSION=0\\.0\\.1\\.dev2\\+g${_sha}\\|RELEASE=FALSE\\|DIRTY=FALSE\\|COMMIT=[0-9a-f]+\\|EPOCH=${_ct}")
# Exact tag.
git(tag v1.4.2)
expect("VERSION=1\\.4\\.2\\|RELEASE=TRUE\\|DIRTY=FALSE")
# Tracked change on the tag: a dirty tree is never a release.
file(APPEND "${_repo}/a.txt" "2\n")
expect("VERSION=1\\.4\\.3\\.dev0\\+g${_sha}\\.dirty\\|RELEASE=FALSE\\|DIRTY=TRUE")
git(checkout -q -- a.txt)
# An untracked file does not make the version dirty (setuptools-scm semantics)...
file(WRITE "${_repo}/untracked.txt" "x\n")
expect("VERSION=1\\.4\\.2\\|RELEASE=TRUE\\|DIRTY=FALSE")
file(REMOVE "${_repo}/untracked.txt")
# ... unless it lies among the shipped inputs (FFPA_SHIPPED_INPUTS): the tree is then not
# the commit it names (the wheels ship git's tracked files only, cmake/FfpaJitSources.cmake).
foreach(_f csrc/zz_notes.h python/ffpa_attn/zz_local_secret.py cmake/zz-publish-token.json)
  file(WRITE "${_repo}/${_f}" "x\n")
  expect("VERSION=1\\.4\\.3\\.dev0\\+g${_sha}\\.dirty\\|RELEASE=FALSE\\|DIRTY=TRUE")
  file(REMOVE "${_repo}/${_f}")
endforeach()
# An ignored file there is not the tree's.
file(WRITE "${_repo}/.git/info/exclude" "*.log\n")
file(WRITE "${_repo}/csrc/build.log" "x\n")
expect("VERSION=1\\.4\\.2\\|RELEASE=TRUE\\|DIRTY=FALSE")
file(REMOVE "${_repo}/csrc/build.log")
# Commits after the tag.
git(commit -q --allow-empty -m three)
git(commit -q --allow-empty -m four)
execute_process(COMMAND git rev-parse --short=7 HEAD WORKING_DIRECTORY "${_repo}" OUTPUT_VARIABLE _sha2 OUTPUT_STRIP_TRAILING_WHITESPACE)
expect("VERSION=1\\.4\\.3\\.dev2\\+g${_sha2}\\|RELEASE=FALSE")
# FFPA_RELEASE_VERSION wins, from the cache variable or the environment.
expect("VERSION=2\\.0\\.0\\|RELEASE=TRUE" -DFFPA_RELEASE_VERSION=2.0.0)
set(ENV{FFPA_RELEASE_VERSION} "2.1.0rc1")
expect("VERSION=2\\.1\\.0rc1\\|RELEASE=TRUE")
set(ENV{FFPA_RELEASE_VERSION} "")
# A version naming a channel (or .local) in its local part is refused: the build adds them
# (1.2.3+cu13 would make 1.2.3+cu13.cu13.local).
expect("FFPA_RELEASE_VERSION='1\\.2\\.3\\+cu13' is invalid: its local part names 'cu13', which the build adds itself.*give -DFFPA_RELEASE_VERSION=1\\.2\\.3\\." -DFFPA_RELEASE_VERSION=1.2.3+cu13)
expect("FFPA_RELEASE_VERSION='1\\.2\\.3\\+g1\\.cu12\\.x' is invalid: its local part names 'cu12'" -DFFPA_RELEASE_VERSION=1.2.3+g1.cu12.x)
expect("FFPA_RELEASE_VERSION='1\\.2\\.3\\+local' is invalid: its local part names 'local'" -DFFPA_RELEASE_VERSION=1.2.3+local)
expect("VERSION=1\\.2\\.3\\+cuda13x\\|RELEASE=FALSE" -DFFPA_RELEASE_VERSION=1.2.3+cuda13x)
# SOURCE_DATE_EPOCH wins over the commit time.
set(ENV{SOURCE_DATE_EPOCH} "1700000000")
expect("EPOCH=1700000000")
set(ENV{SOURCE_DATE_EPOCH} "")
# Invalid versions are refused with the reason.
expect("FFPA_RELEASE_VERSION='v1\\.2\\.3' is invalid: drop the leading 'v'" -DFFPA_RELEASE_VERSION=v1.2.3)
expect("FFPA_RELEASE_VERSION='1\\.02\\.3' is invalid: not a canonical PEP 440 version" -DFFPA_RELEASE_VERSION=1.02.3)
expect("FFPA_RELEASE_VERSION='1\\.2-3' is invalid" -DFFPA_RELEASE_VERSION=1.2-3)
# A non-release tag is ignored with a warning.
git(tag not-a-version)
git(tag vnext)
expect("VERSION=1\\.4\\.3\\.dev2\\+g${_sha2}")
# An sdist's source record (cmake/FfpaSourceRecord.cmake, the PEP 517 backend writes it
# into every sdist) gives the version, commit and time of its checkout, also when the
# unpacked sdist sits inside another repository (here: inside the scratch repo, whose own
# version it must not take).
execute_process(COMMAND git rev-parse HEAD WORKING_DIRECTORY "${_repo}" OUTPUT_VARIABLE _full OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND git log -1 --format=%ct WORKING_DIRECTORY "${_repo}" OUTPUT_VARIABLE _ct2 OUTPUT_STRIP_TRAILING_WHITESPACE)
set(_sdist "${_repo}/unpacked-sdist")
file(MAKE_DIRECTORY "${_sdist}")
execute_process(COMMAND "${CMAKE_COMMAND}" "-DOUT=${_sdist}/ffpa-source.json" -P "${SOURCE}/cmake/FfpaSourceRecord.cmake"
  WORKING_DIRECTORY "${_repo}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cmake/FfpaSourceRecord.cmake failed in ${_repo}")
endif()
git(commit -q --allow-empty -m five)   # the enclosing repository moves on; the record does not
set(_probe_dir "${_sdist}")
expect("VERSION=1\\.4\\.3\\.dev2\\+g${_sha2}\\|RELEASE=FALSE\\|DIRTY=FALSE\\|COMMIT=${_full}\\|EPOCH=${_ct2}")
expect("VERSION=3\\.0\\.0\\|RELEASE=TRUE" -DFFPA_RELEASE_VERSION=3.0.0)
file(WRITE "${_sdist}/ffpa-source.json" "{\"version\": \"1.0\"}")
expect("ffpa-source\\.json is not a source record \\('source_commit'.*remake the sdist")
file(WRITE "${_sdist}/ffpa-source.json"
  "{\"version\": \"1.02\", \"source_commit\": \"abc\", \"source_dirty\": false, \"source_date_epoch\": 1}")
expect("records version '1\\.02'.*not a canonical PEP 440 version")
file(WRITE "${_sdist}/ffpa-source.json"
  "{\"version\": \"1.2.3+cu13\", \"source_commit\": \"abc\", \"source_dirty\": false, \"source_date_epoch\": 1}")
expect("records version '1\\.2\\.3\\+cu13', its local part names 'cu13', which the build adds itself.*remake the sdist")
# A source tree without a record inside another repository (a vendored copy) is not a
# checkout of its own: the placeholder version, not the enclosing repository's.
set(_vendored "${_repo}/vendored")
file(MAKE_DIRECTORY "${_vendored}")
file(WRITE "${_vendored}/b.txt" "1\n")
git(add vendored/b.txt)
git(commit -q -m six)
set(_probe_dir "${_vendored}")
expect("VERSION=0\\.0\\.1\\.dev0\\+unknown\\|RELEASE=FALSE\\|DIRTY=FALSE\\|COMMIT=unknown")
# (The checkout itself, probed from its root, still reads its tags.)
set(_probe_dir "${_repo}")
expect("VERSION=1\\.4\\.3\\.dev4\\+g[0-9a-f]+\\|RELEASE=FALSE\\|DIRTY=FALSE")
message("check_version: OK")
