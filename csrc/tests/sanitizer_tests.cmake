# The emulator as a sanitizer (docs/emulator.md, "The sanitizer"): one executable whose
# driver translation unit (the real forward kernel sources) is compiled with GCC's
# -fsanitize=thread instrumentation and linked against the emulator's own checker
# (tests/emu/emu_sanitizer.cpp) instead of libtsan. Included from csrc/CMakeLists.txt.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  message(STATUS "ffpa: the emulator's sanitizer needs GCC's -fsanitize=thread instrumentation; not built")
  return()
endif()
# The CuTe kernel's launches (tests/sanitize_cute.cpp) are a second instrumented unit.
add_executable(ffpa_sanitize_kernels
  tests/sanitize_kernels.cpp tests/sanitize_cute.cpp tests/emu/emu_grid.cpp tests/emu/emu_sanitizer.cpp
  tests/emu/emu_verdict.cpp)
target_include_directories(ffpa_sanitize_kernels PRIVATE
  "${tests_dir}/emu" "${tests_dir}" "${CMAKE_CURRENT_SOURCE_DIR}/kernels" "${CMAKE_CURRENT_SOURCE_DIR}/include"
  "${FFPA_KERNEL_FACTS_INCLUDE_DIR}" "${FFPA_GENERATED_DIR}/emu")
target_include_directories(ffpa_sanitize_kernels SYSTEM PRIVATE
  "${FFPA_CUTLASS_INCLUDE_DIR}" "${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES}/cccl"
  ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
# Frame pointers: a report names the kernel's line above an out-of-line model function
# (emu/emu_san.h, capture_site).
target_compile_options(ffpa_sanitize_kernels PRIVATE -fno-strict-aliasing -fno-omit-frame-pointer)
# Only the kernels' TUs are instrumented (the runtime and the grid runner report their own
# accesses through emu/emu_san.h); no entry/exit hooks; -g for the reports' source lines.
set_source_files_properties(tests/sanitize_kernels.cpp tests/sanitize_cute.cpp PROPERTIES
  COMPILE_OPTIONS "-fsanitize=thread;--param=tsan-instrument-func-entry-exit=0;-g")
target_link_libraries(ffpa_sanitize_kernels PRIVATE ffpa_reference ${CMAKE_DL_LIBS})
ffpa_test_program(ffpa_sanitize_kernels)

# Every path and shape with no report, under the round-robin schedule and two seeded random
# ones (the count asserted: 18 runs x 3 schedules).
add_test(NAME ffpa.kernels.sanitizer COMMAND ffpa_sanitize_kernels --clean --seeds 3 --expect 54)
set_tests_properties(ffpa.kernels.sanitizer PROPERTIES LABELS unit TIMEOUT 300 COST 60)
# Each breakage must be reported by its checker (the driver checks the child's exit code
# is that checker's), and the report must name the kernel source's line.
foreach(b
    "mma-no-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_fwd_kernel.*fwd_kernel_mma.cuh:[0-9]+"
    "mma-read-before-cp-wait|racecheck|RACECHECK: read-after-write hazard.*cp.async copy of thread.*fwd_kernel_mma.cuh:[0-9]+"
    "mma-divergent-syncthreads|synccheck|SYNCCHECK: .*fwd_kernel_mma.cuh:[0-9]+"
    "mma4x2-no-softmax-syncthreads|racecheck|RACECHECK: .*4x2 warps.*fwd_kernel_mma.cuh:[0-9]+"
    "mma-no-zero-fill|initcheck|INITCHECK: shared read of a byte this block never wrote.*fwd_kernel_mma.cuh:[0-9]+"
    "mma-store-past-output|memcheck|MEMCHECK: .*outside every buffer the test registered.*fwd_kernel_mma.cuh:[0-9]+"
    "tma-no-pipeline-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_fwd_kernel.*TMA.*fwd_kernel_mma.cuh:[0-9]+"
    "tma-no-arrive|synccheck|SYNCCHECK: deadlock: .*mbarrier #[0-9]+ for a phase of parity"
    "tma-wrong-parity|synccheck|SYNCCHECK: over-arrival"
    "cute-no-syncthreads|racecheck|RACECHECK: .*ffpa_fwd_cute_kernel.*cute/atoms.cuh:[0-9]+"
    "cute-tma-no-pipeline-syncthreads|racecheck|RACECHECK: .*ffpa_fwd_cute_kernel.*TMA.*TMA copy completing on mbarrier"
    "cute-read-before-cp-wait|racecheck|RACECHECK: read-after-write hazard.*cp.async copy of thread.*cute/atoms.cuh:[0-9]+"
    "simt-store-past-output|memcheck|MEMCHECK: .*ffpa_fwd_simt_kernel.*fwd_kernel_simt.cuh:[0-9]+"
    "prepass-store-past-flags|memcheck|MEMCHECK: .*ffpa_nonfinite_kernel.*nonfinite.cuh:[0-9]+"
    "masked-no-pipeline-syncthreads|racecheck|RACECHECK: .*cp.async, masked.*fwd_kernel_mma.cuh:[0-9]+"
    "masked-tma-no-tail-syncthreads|racecheck|RACECHECK: .*TMA, masked.*tma_tail.cuh:[0-9]+"
    "bwd-no-first-slot-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_bwd_kernel.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-no-second-slot-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_bwd_kernel.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-no-ds-publish-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_bwd_kernel.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-read-before-cp-wait|racecheck|RACECHECK: read-after-write hazard.*cp.async copy of thread.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-store-past-dk|memcheck|MEMCHECK: .*ffpa_bwd_kernel.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-tma-no-first-slot-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_bwd_kernel.*TMA.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-tma-no-second-slot-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_bwd_kernel.*TMA.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-tma-no-ds-publish-syncthreads|racecheck|RACECHECK: .*hazard in ffpa_bwd_kernel.*TMA.*bwd_kernel_mma.cuh:[0-9]+"
    "bwd-tma-wrong-parity|synccheck|SYNCCHECK: over-arrival")
  string(REPLACE "|" ";" b "${b}")
  list(GET b 0 name)
  list(GET b 1 tool)
  list(GET b 2 report)
  add_test(NAME ffpa.kernels.sanitizer_breakage.${name}
           COMMAND "${CMAKE_COMMAND}" -DEXPECT_EXIT=zero "-DEXPECT_OUTPUT=${report}"
                   "-DCOMMAND=$<TARGET_FILE:ffpa_sanitize_kernels>|--break|${name}|--want|${tool}"
                   -P "${PROJECT_SOURCE_DIR}/ctest/expect_exit.cmake")
  set_tests_properties(ffpa.kernels.sanitizer_breakage.${name} PROPERTIES LABELS unit TIMEOUT 120)
endforeach()
# Under a seeded random schedule (copies landing at random times, fibers interleaved) the
# missing wait is still a race, and the report names the seed to rerun it with.
add_test(NAME ffpa.kernels.sanitizer_breakage.mma-read-before-cp-wait.seed7
         COMMAND "${CMAKE_COMMAND}" -DEXPECT_EXIT=zero
                 "-DEXPECT_OUTPUT=RACECHECK: .*schedule: seed 7 .*rerun with --seed 7"
                 "-DCOMMAND=$<TARGET_FILE:ffpa_sanitize_kernels>|--break|mma-read-before-cp-wait|--want|racecheck|--seed|7"
                 -P "${PROJECT_SOURCE_DIR}/ctest/expect_exit.cmake")
set_tests_properties(ffpa.kernels.sanitizer_breakage.mma-read-before-cp-wait.seed7 PROPERTIES LABELS unit TIMEOUT 120)
