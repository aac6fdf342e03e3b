# The backward kernels' CPU tests (and the masks', forward and backward), included by csrc/CMakeLists.txt inside
# if(FFPA_BUILD_TESTING) once the emulator (ffpa_emulate_kernels) and tests_dir exist.
# emulate_bwd.cpp runs kernels/ffpa/bwd_kernel_mma.cuh on the emulator against a float64
# reference of torch's math backend, held to ffpa/tolerance.h's bwd_fp16 / bwd_bf16 rows.
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_bwd.cpp")
# The case list (GQA, both causal alignments, ragged and Nq != Nkv, a [B, N, H, D] view
# with a custom scale, bf16, Nkv = 0, NaN / inf planted, causal too) at D = 64 and 128
# (persist-D; dQ and dK / dV 4x1, then 4x2) and D = 320 (split-D; dQ 2x4, dK / dV 2x4),
# copies landing at issue and late.
add_test(NAME ffpa.kernels.emulated_bwd COMMAND ffpa_emulate_kernels --bwd 64 128 320)
set_tests_properties(ffpa.kernels.emulated_bwd PROPERTIES LABELS unit TIMEOUT 600)
# Each deliberate defect (ffpa::BwdBreak: Delta, LSE offset, group sum, mask edge, a
# dropped accumulator split; and the non-finite pre-pass's flags ignored with a NaN under
# the causal mask) must make its run fail at D = 128 (persist-D) and D = 192 (split-D), and
# the persist-D loop's own (column operands not reloaded, one slot for the first operand)
# at D = 128; the controls must pass.
add_test(NAME ffpa.kernels.emulated_bwd_breakages COMMAND ffpa_emulate_kernels --bwd-breakages)
set_tests_properties(ffpa.kernels.emulated_bwd_breakages PROPERTIES LABELS unit TIMEOUT 300
  PASS_REGULAR_EXPRESSION "19 backward breakage runs, 0 wrong")
# The TMA feed (ffpa_bwd_kernel<.., Load::kTma>, what the backward runs where TMA code runs
# on the device): the same case list at D = 64 (persist-D) and D = 320 (split-D), copies
# landing late; then its protocol defects (an expect_tx of half the bytes, a wait on the
# wrong phase parity) at D = 128 and 192 must fail, the controls pass. The tail rows
# left unzeroed are emulated_masks_breakages' (rows past a sequence need seqused_k / varlen).
add_test(NAME ffpa.kernels.emulated_bwd_tma COMMAND ffpa_emulate_kernels --bwd-tma 64 320)
set_tests_properties(ffpa.kernels.emulated_bwd_tma PROPERTIES LABELS unit TIMEOUT 600
  PASS_REGULAR_EXPRESSION "backward cases, 0 failed")
add_test(NAME ffpa.kernels.emulated_bwd_tma_breakages COMMAND ffpa_emulate_kernels --bwd-tma-breakages)
set_tests_properties(ffpa.kernels.emulated_bwd_tma_breakages PROPERTIES LABELS unit TIMEOUT 300
  PASS_REGULAR_EXPRESSION "6 backward TMA breakage runs, 0 wrong")
# Every release head dim, fp16 and bf16.
add_test(NAME ffpa.kernels.emulated_bwd_release COMMAND ffpa_emulate_kernels --bwd-release ${FFPA_RELEASE_HEAD_DIMS})
set_tests_properties(ffpa.kernels.emulated_bwd_release PROPERTIES LABELS slow TIMEOUT 900)
# The same on the TMA feed (every release head dim's persist-D or split-D layout on TMA).
add_test(NAME ffpa.kernels.emulated_bwd_tma_release COMMAND ffpa_emulate_kernels --bwd-tma-release ${FFPA_RELEASE_HEAD_DIMS})
set_tests_properties(ffpa.kernels.emulated_bwd_tma_release PROPERTIES LABELS slow TIMEOUT 900
  PASS_REGULAR_EXPRESSION "backward cases, 0 failed")
# The masks (kernels/ffpa/mask.h: sliding window, seqused_k, varlen) in the forward's two
# feeds and the backward, against the float64 reference per sequence, with the blocks the
# mask hides counted unread (emulate_masks.cpp): D = 64 and 320 (the 4x1 and 2x4 / 4x2
# layouts) in the unit run, every release head dim in the slow one; then each deliberate
# mask defect (ffpa::MaskBreak, ffpa::BwdBreak) must make its run fail. The backward runs on both
# feeds (cp.async; TMA with copies landing late), and the TMA feed's tail rows left unzeroed
# must fail: padded keys holding NaN (D = 64 and 320), NaN in the next varlen sequence's dO (D = 64).
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_masks.cpp")
add_test(NAME ffpa.kernels.emulated_masks COMMAND ffpa_emulate_kernels --masks 64 320)
# (About 5-8 minutes on this project's 2-core machine with another test beside it.)
set_tests_properties(ffpa.kernels.emulated_masks PROPERTIES LABELS unit TIMEOUT 1200
  PASS_REGULAR_EXPRESSION "mask cases, 0 failed")
add_test(NAME ffpa.kernels.emulated_masks_breakages COMMAND ffpa_emulate_kernels --masks-breakages)
set_tests_properties(ffpa.kernels.emulated_masks_breakages PROPERTIES LABELS unit TIMEOUT 300
  PASS_REGULAR_EXPRESSION "24 mask breakage runs, 0 wrong")
# The release sweep: the five cases combining the most masks at every release head dim
# (the masked cp.async instance's wider layouts at D = 256 and 512 included), copies late.
add_test(NAME ffpa.kernels.emulated_masks_release COMMAND ffpa_emulate_kernels --masks-release ${FFPA_RELEASE_HEAD_DIMS})
set_tests_properties(ffpa.kernels.emulated_masks_release PROPERTIES LABELS slow TIMEOUT 1500
  PASS_REGULAR_EXPRESSION "mask cases, 0 failed")
