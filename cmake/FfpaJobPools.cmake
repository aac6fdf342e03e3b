# FfpaJobPools: bound the number of concurrent heavy CUDA compiles by memory as well as
# by cores. One nvcc instance for a large head dim (template-heavy kernels, several
# archs) takes gigabytes; Ninja's default -j (cores + 2) can run the machine out of
# memory long before it runs out of cores. The pool caps only the CUDA compiles of the
# targets that opt in; CXX compiles and links keep Ninja's normal parallelism.
#
# Cache options:
#   FFPA_CUDA_COMPILE_JOBS   size of the pool; empty = computed (below). A number wins.
#   FFPA_CUDA_JOB_MEMORY_MB  memory one heavy nvcc compile may take, for the computation.
#                            Default 6144. Measured here (nvcc 13.0, sm_89 + sm_120f,
#                            /usr/bin/time -v): the mma/tma/simt instances peak at
#                            ~0.23 GB, the CuTe instances (ffpa_fwd_d<D>_cute.cu, ffpa_fwd_d<D>_lowp.cu) at
#                            3.4-4.0 GB (cicc instantiating CuTe's layout algebra; the
#                            D = 256 and 512 fp16 files are the largest; the cold release
#                            build of 2026-12-02: 3.39 GB max RSS); 6 GB is that peak
#                            x 1.5 (docs/build-cache.md's rule). On these 2-core / 24 GB
#                            machines the pool stays at 2 (cores: memory allows 3); on the
#                            16-core / 128 GB GPU image at 16 (memory allows 21). docs/perf.md has the table, docs/build-cache.md says
#                            how to re-measure.
#
# Computed size: max(1, min(logical cores, floor(available memory / FFPA_CUDA_JOB_MEMORY_MB))),
# available memory read at configure time (cmake_host_system_information).
#
# Function:
#   ffpa_use_cuda_job_pool(<target>...)
#     Puts the compiles of each <target> in the pool (target property JOB_POOL_COMPILE).
#     Meant for the kernel library (ffpa_kernels), whose compiles are all heavy nvcc.
#     CMake has no per-language job pool, so the property is per target: keep light C++
#     sources of other targets out of such targets.
#
# Results: FFPA_CUDA_JOB_POOL (pool name), FFPA_CUDA_COMPILE_JOBS_USED (its size).
# Job pools are a Ninja feature; other generators ignore them (said at configure time).
include_guard(GLOBAL)

set(FFPA_CUDA_COMPILE_JOBS "" CACHE STRING
    "Concurrent CUDA compiles in the kernel job pool (empty: from memory and cores)")
set(FFPA_CUDA_JOB_MEMORY_MB "6144" CACHE STRING
    "Memory (MiB) one heavy nvcc compile may take; sizes FFPA_CUDA_COMPILE_JOBS when empty")
set(FFPA_CUDA_JOB_POOL "ffpa_cuda_compile")

function(_ffpa_job_pools_setup)
  cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
  cmake_host_system_information(RESULT avail_mb QUERY AVAILABLE_PHYSICAL_MEMORY)
  if(NOT cores GREATER 0)
    set(cores 1)
  endif()

  if(NOT FFPA_CUDA_JOB_MEMORY_MB MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "FFPA_CUDA_JOB_MEMORY_MB='${FFPA_CUDA_JOB_MEMORY_MB}' is not a positive "
                        "number of MiB; e.g. -DFFPA_CUDA_JOB_MEMORY_MB=6144.")
  endif()

  if(NOT FFPA_CUDA_COMPILE_JOBS STREQUAL "")
    if(NOT FFPA_CUDA_COMPILE_JOBS MATCHES "^[1-9][0-9]*$")
      message(FATAL_ERROR "FFPA_CUDA_COMPILE_JOBS='${FFPA_CUDA_COMPILE_JOBS}' is not a positive "
                          "integer; give e.g. -DFFPA_CUDA_COMPILE_JOBS=2, or leave it empty to "
                          "size the pool from memory and cores.")
    endif()
    set(jobs "${FFPA_CUDA_COMPILE_JOBS}")
    set(why "FFPA_CUDA_COMPILE_JOBS")
  else()
    math(EXPR by_mem "${avail_mb} / ${FFPA_CUDA_JOB_MEMORY_MB}")
    set(jobs "${cores}")
    if(by_mem LESS jobs)
      set(jobs "${by_mem}")
    endif()
    if(jobs LESS 1)
      set(jobs 1)
    endif()
    set(why "min(${cores} cores, ${avail_mb} MiB available / ${FFPA_CUDA_JOB_MEMORY_MB} MiB per job = ${by_mem})")
  endif()

  set_property(GLOBAL APPEND PROPERTY JOB_POOLS "${FFPA_CUDA_JOB_POOL}=${jobs}")
  set(FFPA_CUDA_COMPILE_JOBS_USED "${jobs}" PARENT_SCOPE)

  if(CMAKE_GENERATOR MATCHES "Ninja")
    message(STATUS "ffpa: CUDA compile job pool '${FFPA_CUDA_JOB_POOL}' = ${jobs}: ${why}")
  else()
    message(STATUS "ffpa: CUDA compile job pool '${FFPA_CUDA_JOB_POOL}' = ${jobs} has no effect "
                   "with the '${CMAKE_GENERATOR}' generator (Ninja only); bound parallelism "
                   "with -j${jobs}")
  endif()
endfunction()

function(ffpa_use_cuda_job_pool)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "")
  if(NOT arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_use_cuda_job_pool: give at least one target, "
                        "e.g. ffpa_use_cuda_job_pool(ffpa_kernels).")
  endif()
  foreach(target IN LISTS arg_UNPARSED_ARGUMENTS)
    if(NOT TARGET "${target}")
      message(FATAL_ERROR "ffpa_use_cuda_job_pool: '${target}' is not a target; call it "
                          "after add_library/add_executable of that target.")
    endif()
    set_property(TARGET "${target}" PROPERTY JOB_POOL_COMPILE "${FFPA_CUDA_JOB_POOL}")
  endforeach()
endfunction()

_ffpa_job_pools_setup()
