# The backward kernels' CPU tests (and the masks', forward and backward), included by csrc/CMakeLists.txt inside
# if(FFPA_BUILD_TESTING) once the emulator (ffpa_emulate_kernels) and tests_dir exist.
# emulate_bwd.cpp runs kernels/ffpa/bwd_kernel_mma.cuh on the emulator against a float64
# reference of torch's math backend, held to ffpa/tolerance.h's bwd_fp16 / bwd_bf16 rows.
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_bwd.cpp")

# ffpa_emu_sweep_test(NAME <test> MODE <option> PER_DIM <cases per head dim>
#                     [UNIT_DIMS <head dims a unit test covers>] TIMEOUT <s>)
# A slow release sweep of the emulator: MODE over every release head dim except UNIT_DIMS,
# the head dims where a unit test already runs the same cases or a wider list (the sweep
# there repeated them), asserting PER_DIM cases per head dim (--expect).
function(ffpa_emu_sweep_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;MODE;PER_DIM;TIMEOUT" "UNIT_DIMS")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_NAME OR NOT arg_MODE OR NOT arg_PER_DIM OR NOT arg_TIMEOUT)
    message(FATAL_ERROR "ffpa_emu_sweep_test: needs NAME, MODE, PER_DIM and TIMEOUT; unknown arguments: "
                        "${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(dims ${FFPA_RELEASE_HEAD_DIMS})
  if(arg_UNIT_DIMS)
    list(REMOVE_ITEM dims ${arg_UNIT_DIMS})
  endif()
  if(NOT dims)
    message(STATUS "ffpa: ${arg_NAME} not registered: the unit tests cover every release head dim")
    return()
  endif()
  list(LENGTH dims n)
  math(EXPR cases "${arg_PER_DIM} * ${n}")
  add_test(NAME ${arg_NAME} COMMAND ffpa_emulate_kernels ${arg_MODE} ${dims} --expect ${cases})
  set_tests_properties(${arg_NAME} PROPERTIES LABELS slow TIMEOUT ${arg_TIMEOUT})
endfunction()
# The case list (GQA, both causal alignments, ragged and Nq != Nkv, a [B, N, H, D] view
# with a custom scale, bf16, Nkv = 0, NaN / inf planted, causal too) at D = 64 and 128
# (persist-D; dQ and dK / dV 4x1, then 4x2) and D = 320 (split-D; dQ 2x4, dK / dV 2x4),
# copies landing at issue and late.
add_test(NAME ffpa.kernels.emulated_bwd COMMAND ffpa_emulate_kernels --bwd 64 128 320 --expect 84)
set_tests_properties(ffpa.kernels.emulated_bwd PROPERTIES LABELS unit TIMEOUT 600)
# Each deliberate defect (ffpa::BwdBreak: Delta, LSE offset, group sum, mask edge, a
# dropped accumulator split; and the non-finite pre-pass's flags ignored with a NaN under
# the causal mask) must make its run fail at D = 128 (persist-D) and D = 192 (split-D), and
# the persist-D loop's own (column operands not reloaded, one slot for the first operand)
# at D = 128; the controls must pass.
add_test(NAME ffpa.kernels.emulated_bwd_breakages COMMAND ffpa_emulate_kernels --bwd-breakages --expect 19)
set_tests_properties(ffpa.kernels.emulated_bwd_breakages PROPERTIES LABELS unit TIMEOUT 300)
# The TMA feed (ffpa_bwd_kernel<.., Load::kTma>, what the backward runs where TMA code runs
# on the device): the same case list at D = 64 (persist-D) and D = 320 (split-D), copies
# landing late; then its protocol defects (an expect_tx of half the bytes, a wait on the
# wrong phase parity) at D = 128 and 192 must fail, the controls pass. The tail rows
# left unzeroed are emulated_masks_breakages' (rows past a sequence need seqused_k / varlen).
add_test(NAME ffpa.kernels.emulated_bwd_tma COMMAND ffpa_emulate_kernels --bwd-tma 64 320 --expect 38)
set_tests_properties(ffpa.kernels.emulated_bwd_tma PROPERTIES LABELS unit TIMEOUT 600)
add_test(NAME ffpa.kernels.emulated_bwd_tma_breakages COMMAND ffpa_emulate_kernels --bwd-tma-breakages --expect 6)
set_tests_properties(ffpa.kernels.emulated_bwd_tma_breakages PROPERTIES LABELS unit TIMEOUT 300)
# Every release head dim, fp16 and bf16 (2 cases per head dim: batch 2 with GQA 4:2, causal
# and not), but those emulated_bwd runs (its list holds both dtypes, batch 2 and GQA 4:2).
ffpa_emu_sweep_test(NAME ffpa.kernels.emulated_bwd_release MODE --bwd-release PER_DIM 2 UNIT_DIMS 64 128 320
                    TIMEOUT 900)
# The same on the TMA feed (every release head dim's persist-D or split-D layout on TMA), but
# those emulated_bwd_tma runs.
ffpa_emu_sweep_test(NAME ffpa.kernels.emulated_bwd_tma_release MODE --bwd-tma-release PER_DIM 2 UNIT_DIMS 64 320
                    TIMEOUT 900)
# The masks (kernels/ffpa/mask.h: sliding window, seqused_k, varlen) in the forward's two
# feeds and the backward, against the float64 reference per sequence, with the blocks the
# mask hides counted unread (emulate_masks.cpp): D = 64 and 320 (the 4x1 and 2x4 / 4x2
# layouts) in the unit run, every release head dim in the slow one; then each deliberate
# mask defect (ffpa::MaskBreak, ffpa::BwdBreak) must make its run fail. The backward runs on both
# feeds (cp.async; TMA with copies landing late), and the TMA feed's tail rows left unzeroed
# must fail: padded keys holding NaN (D = 64 and 320), NaN in the next varlen sequence's dO (D = 64).
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_masks.cpp")
# The masked CuTe kernel (both feeds, fp16 and bf16) runs the same cases next to the mma
# kernel's masked instance: one generated translation unit per release head dim
# (emulate_masks_cute.h; CuTe's templates make each take tens of seconds, compiled in
# parallel), and the list of those head dims for emulate_masks.cpp's dispatch.
set(ffpa_emu_masks_inc "// Auto-generated by csrc/tests/bwd_tests.cmake from cmake/release-matrix.json; do not edit.\n")
foreach(d IN LISTS FFPA_RELEASE_HEAD_DIMS)
  string(APPEND ffpa_emu_masks_inc "FFPA_EMU_CUTE_MASKS_DIM(${d})\n")
  set(src "${FFPA_GENERATED_DIR}/emu/emu_cute_masks_d${d}.cpp")
  file(CONFIGURE OUTPUT "${src}" CONTENT
       "// Auto-generated by csrc/tests/bwd_tests.cmake; do not edit.\n#define FFPA_EMU_CUTE_D ${d}\n#include \"emulate_masks_cute.h\"\n")
  target_sources(ffpa_emulate_kernels PRIVATE "${src}")
endforeach()
file(CONFIGURE OUTPUT "${FFPA_GENERATED_DIR}/emu/emu_cute_masks_dims.inc" CONTENT "${ffpa_emu_masks_inc}")
# The CuTe kernel alone: each of its deliberate mask defects (an off-by-one window edge, a
# wrong sequence offset, a padded key counted, no block skipped, the non-finite flags
# ignored, the TMA feed's tail rows left unzeroed under NaN padded keys) must fail, the
# controls pass (D = 64); and the math rule's nan-* cases at every release head dim (slow).
add_test(NAME ffpa.kernels.emulated_masks_cute_breakages COMMAND ffpa_emulate_kernels --masks-cute-breakages --expect 12)
set_tests_properties(ffpa.kernels.emulated_masks_cute_breakages PROPERTIES LABELS unit TIMEOUT 300)
# (The case table's 3 nan-* cases per head dim; emulated_masks and emulated_masks_d320 run
# them on the masked CuTe kernel at D = 64 and 320, both accumulations, copies late.)
ffpa_emu_sweep_test(NAME ffpa.kernels.emulated_masks_cute_nonfinite MODE --masks-cute-nonfinite PER_DIM 3
                    UNIT_DIMS 64 320 TIMEOUT 900)
# Two tests, so that CTest's parallel jobs share them: D = 64 with copies landing at issue and
# late (13 cases each), D = 320 late only (the early landing's check is the pipeline's, run
# unmasked at D = 320 by emulated / emulated_tma; emulate_masks.cpp, run_mask_cases).
add_test(NAME ffpa.kernels.emulated_masks COMMAND ffpa_emulate_kernels --masks 64 --expect 26)
set_tests_properties(ffpa.kernels.emulated_masks PROPERTIES LABELS unit TIMEOUT 900)
add_test(NAME ffpa.kernels.emulated_masks_d320 COMMAND ffpa_emulate_kernels --masks --late-only 320 --expect 13)
set_tests_properties(ffpa.kernels.emulated_masks_d320 PROPERTIES LABELS unit TIMEOUT 900)
add_test(NAME ffpa.kernels.emulated_masks_breakages COMMAND ffpa_emulate_kernels --masks-breakages --expect 24)
set_tests_properties(ffpa.kernels.emulated_masks_breakages PROPERTIES LABELS unit TIMEOUT 300)
# The release sweep: the five cases combining the most masks (the case table's kRelease
# tag) at every release head dim but 64 and 320, where the unit runs hold them (copies late,
# every kernel; the masked cp.async instance's wider layouts at D = 256 and 512 included).
ffpa_emu_sweep_test(NAME ffpa.kernels.emulated_masks_release MODE --masks-release PER_DIM 5 UNIT_DIMS 64 320
                    TIMEOUT 1500)
