# check_jit_sources.cmake: the wheels' copy of the sources (ffpa_attn/_src) is git's
# tracked files (cmake/FfpaJitSources.cmake), on a scratch repository holding the module.
# Run with cmake -P -DSOURCE=<repo> -DWORK=<dir>.
cmake_minimum_required(VERSION 3.25)
set(_repo "${WORK}/repo")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${_repo}")

function(git)
  execute_process(COMMAND git -c user.name=t -c user.email=t@localhost ${ARGN}
    WORKING_DIRECTORY "${_repo}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "git ${ARGN} failed")
  endif()
endfunction()

# expect(<regex> <dir>): ffpa_jit_source_files of the tree <dir> prints something matching.
# The module is included inside a function and called outside it, as a configure includes
# it from python/ and calls it again from the top level (FfpaWheelPackaging.cmake): it must
# not depend on a variable of the scope that included it.
file(WRITE "${WORK}/probe.cmake" "
function(_load)
  include(\"\${TREE}/cmake/FfpaJitSources.cmake\")
endfunction()
_load()
ffpa_jit_source_files(OUT_VAR _files)
message(\"FILES=\${_files}\")
")
function(expect regex dir)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DTREE=${dir} -P "${WORK}/probe.cmake"
    OUTPUT_VARIABLE _o ERROR_VARIABLE _e RESULT_VARIABLE _rc)
  string(REGEX REPLACE "[ \t\r\n]+" " " _all "${_o}${_e}")
  if(NOT _all MATCHES "${regex}")
    message(FATAL_ERROR "expected /${regex}/, got:\n${_all}")
  endif()
  message(STATUS "ok: ${regex}")
endfunction()

file(COPY "${SOURCE}/cmake/FfpaJitSources.cmake" DESTINATION "${_repo}/cmake")
foreach(_f CMakeLists.txt python/CMakeLists.txt tools/requirements-cutlass.txt csrc/CMakeLists.txt
           csrc/a.cu csrc/ffpa/b.cuh csrc/tests/t.cpp python/ffpa_attn/__init__.py cmake/templates/x.in
           cmake/facts.json docs/readme.md)
  file(WRITE "${_repo}/${_f}" "x\n")
endforeach()
git(init -q -b main)
git(add -A)
git(commit -q -m one)
set(_tracked "FILES=CMakeLists.txt;cmake/FfpaJitSources.cmake;cmake/facts.json;cmake/templates/x.in;csrc/CMakeLists.txt;csrc/a.cu;csrc/ffpa/b.cuh;python/CMakeLists.txt;python/ffpa_attn/__init__.py;tools/requirements-cutlass.txt ")
expect("${_tracked}" "${_repo}")

# issue 42: untracked files in the shipped directories never ship.
foreach(_f cmake/zz-publish-token.json python/ffpa_attn/zz_local_secret.py csrc/zz_notes.h)
  file(WRITE "${_repo}/${_f}" "secret\n")
endforeach()
expect("${_tracked}" "${_repo}")
# A staged file is tracked: it ships (and the dirty flag says the tree is not its commit).
git(add csrc/zz_notes.h)
expect("csrc/ffpa/b.cuh;csrc/zz_notes.h;python" "${_repo}")
git(rm -q --cached csrc/zz_notes.h)

# A tracked file the worktree replaced by a link to a file outside: refused.
file(WRITE "${WORK}/outside.txt" "SECRET\n")
file(REMOVE "${_repo}/csrc/a.cu")
file(CREATE_LINK "${WORK}/outside.txt" "${_repo}/csrc/a.cu" SYMBOLIC)
expect("csrc/a\\.cu would ship in every wheel \\(ffpa_attn/_src\\) and is a symlink or a submodule.*git checkout -- csrc/a\\.cu" "${_repo}")
file(REMOVE "${_repo}/csrc/a.cu")
git(checkout -- csrc/a.cu)
# A committed link: refused.
file(CREATE_LINK "${WORK}/outside.txt" "${_repo}/csrc/link.h" SYMBOLIC)
git(add csrc/link.h)
git(commit -q -m link)
expect("csrc/link\\.h would ship in every wheel \\(ffpa_attn/_src\\) and is a symlink or a submodule \\(git mode 120000" "${_repo}")
git(rm -q csrc/link.h)
git(commit -q -m unlink)
# A name an installer or CMake list would read otherwise: refused.
file(WRITE "${_repo}/csrc/two words.h" "x\n")
git(add "csrc/two words.h")
expect("the tracked file \"?csrc/two words\\.h\"? would ship in every wheel \\(ffpa_attn/_src\\), and its name holds characters.*rename it" "${_repo}")
git(rm -q --cached "csrc/two words.h")
file(REMOVE "${_repo}/csrc/two words.h")
expect("${_tracked}" "${_repo}")

# Outside git (an unpacked sdist holds exactly its commit's tracked files): the files there.
file(COPY "${_repo}/" DESTINATION "${WORK}/nogit" PATTERN ".git" EXCLUDE)
file(REMOVE "${WORK}/nogit/cmake/zz-publish-token.json" "${WORK}/nogit/python/ffpa_attn/zz_local_secret.py"
            "${WORK}/nogit/csrc/zz_notes.h")
expect("${_tracked}" "${WORK}/nogit")
message("check_jit_sources: OK")
