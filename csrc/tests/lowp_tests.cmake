# The low-precision paths' CPU tests, included by csrc/CMakeLists.txt inside
# if(FFPA_BUILD_TESTING) once the emulator (ffpa_emulate_kernels) and tests_dir exist.

# The number formats of kernels/ffpa/lowp/numerics.h against CUDA's host conversions
# (cuda_fp8.h, cuda_fp4.h: plain host C++ on the toolkit's headers, as the emulator takes
# them), then each deliberate breakage of the conversion policy must be caught.
add_executable(ffpa_test_lowp_numerics "${tests_dir}/test_lowp_numerics.cpp")
target_include_directories(ffpa_test_lowp_numerics PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/kernels"
                           "${FFPA_KERNEL_FACTS_INCLUDE_DIR}")
target_include_directories(ffpa_test_lowp_numerics SYSTEM PRIVATE ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
target_compile_features(ffpa_test_lowp_numerics PRIVATE cxx_std_17)
ffpa_test_program(ffpa_test_lowp_numerics)
add_test(NAME ffpa.kernels.lowp_numerics COMMAND ffpa_test_lowp_numerics)
set_tests_properties(ffpa.kernels.lowp_numerics PROPERTIES LABELS unit)

# The quantisation pass (kernels/ffpa/lowp/quant.cuh) run by the emulator against its host
# reference, byte for byte, on GQA / strided / both dtypes / D 64 and 320 / FP8 and NVFP4
# cases, then its breakages (no K smoothing, no V^T permutation) must be reported.
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_lowp_quant.cpp")
add_test(NAME ffpa.kernels.emulated_lowp_quant COMMAND ffpa_emulate_kernels --lowp-quant --expect 9)
set_tests_properties(ffpa.kernels.emulated_lowp_quant PROPERTIES LABELS unit TIMEOUT 300)

# The low-precision kernels themselves (the quantisation pass, then the CuTe kernel with
# the FP8 or NVFP4 atoms) against the double-precision reference, held to the tolerance table's (cmake/kernel-facts.json)
# bounds: the case list of every impl at a 4x1 and a 4x2 head dim, then the breakages (pass,
# kernel and scale layout) must each fail.
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_lowp.cpp")
add_test(NAME ffpa.kernels.emulated_lowp COMMAND ffpa_emulate_kernels --lowp 64 320 --expect 120)
set_tests_properties(ffpa.kernels.emulated_lowp PROPERTIES LABELS unit TIMEOUT 600)
add_test(NAME ffpa.kernels.emulated_lowp_breakages COMMAND ffpa_emulate_kernels --lowp-breakages --expect 8)
set_tests_properties(ffpa.kernels.emulated_lowp_breakages PROPERTIES LABELS unit TIMEOUT 300)
# NaN and inf planted in Q, K and V on the FP8 and NVFP4 kernels: the output is SDPA's math
# backend's (the non-finite pre-pass and the SIMT rerun of the flagged heads, api.cu), and
# leaving the rerun out must fail.
add_test(NAME ffpa.kernels.emulated_lowp_nonfinite COMMAND ffpa_emulate_kernels --lowp-nonfinite 64 --expect 24)
set_tests_properties(ffpa.kernels.emulated_lowp_nonfinite PROPERTIES LABELS unit TIMEOUT 300)

# The instructions themselves, per arch and kernel, in the built library (cuobjdump):
# QMMA e4m3 in the FP8 kernels of sm_89 (HMMA after e4m3 unpacks on sm_90), OMMA.SF e2m1
# with ue4m3 scales in the NVFP4 kernels of the sm_120 family's 120f, stubs elsewhere.
if(FFPA_CUOBJDUMP)
  add_test(NAME ffpa.kernels.lowp_sass
           COMMAND "${CMAKE_COMMAND}" "-DCUOBJDUMP=${FFPA_CUOBJDUMP}" "-DLIBRARY=$<TARGET_FILE:ffpa_kernels>"
                   "-DARCHS=${ffpa_archs_arg}" "-DSASS_DIR=${ffpa_sass_dir}" -P "${tests_dir}/check_lowp_sass.cmake")
  set_tests_properties(ffpa.kernels.lowp_sass PROPERTIES LABELS unit FIXTURES_REQUIRED ffpa_sass)
endif()

# The accuracy table of docs/install.md ("Measured accuracy"): every release head dim, FP8
# and NVFP4, both dtypes and input kinds, 256 x 256, against the same bounds (slow). The
# count is asserted too: a run that measured nothing must not pass.
list(LENGTH FFPA_RELEASE_HEAD_DIMS ffpa_accuracy_dims)
math(EXPR ffpa_accuracy_rows "2 * 2 * 2 * ${ffpa_accuracy_dims}")  # precisions x dtypes x input kinds x dims
add_test(NAME ffpa.kernels.emulated_lowp_accuracy
         COMMAND ffpa_emulate_kernels --lowp-accuracy ${FFPA_RELEASE_HEAD_DIMS} --expect ${ffpa_accuracy_rows})
set_tests_properties(ffpa.kernels.emulated_lowp_accuracy PROPERTIES LABELS slow TIMEOUT 1800 COST 130)
