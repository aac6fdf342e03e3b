# The low-precision paths' CPU tests, included by csrc/CMakeLists.txt inside
# if(FFPA_BUILD_TESTING) once the emulator (ffpa_emulate_kernels) and tests_dir exist.

# The number formats of kernels/ffpa/lowp/numerics.h against CUDA's host conversions
# (cuda_fp8.h, cuda_fp4.h: plain host C++ on the toolkit's headers, as the emulator takes
# them), then each deliberate breakage of the conversion policy must be caught.
add_executable(ffpa_test_lowp_numerics "${tests_dir}/test_lowp_numerics.cpp")
target_include_directories(ffpa_test_lowp_numerics PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/kernels")
target_include_directories(ffpa_test_lowp_numerics SYSTEM PRIVATE ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
target_compile_features(ffpa_test_lowp_numerics PRIVATE cxx_std_17)
add_test(NAME ffpa.kernels.lowp_numerics COMMAND ffpa_test_lowp_numerics)
set_tests_properties(ffpa.kernels.lowp_numerics PROPERTIES LABELS unit)

# The quantisation pass (kernels/ffpa/lowp/quant.cuh) run by the emulator against its host
# reference, byte for byte, on GQA / strided / both dtypes / D 64 and 320 / FP8 and NVFP4
# cases, then its breakages (no K smoothing, no V^T permutation) must be reported.
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_lowp_quant.cpp")
add_test(NAME ffpa.kernels.emulated_lowp_quant COMMAND ffpa_emulate_kernels --lowp-quant)
set_tests_properties(ffpa.kernels.emulated_lowp_quant PROPERTIES LABELS unit TIMEOUT 300)

# The low-precision kernels themselves (the quantisation pass, then the CuTe kernel with
# the FP8 or NVFP4 atoms) against the double-precision reference, held to ffpa/tolerance.h's
# bounds: the case list of every impl at a 4x1 and a 4x2 head dim, then the breakages (pass,
# kernel and scale layout) must each fail.
target_sources(ffpa_emulate_kernels PRIVATE "${tests_dir}/emulate_lowp.cpp")
add_test(NAME ffpa.kernels.emulated_lowp COMMAND ffpa_emulate_kernels --lowp 64 320)
set_tests_properties(ffpa.kernels.emulated_lowp PROPERTIES LABELS unit TIMEOUT 600)
add_test(NAME ffpa.kernels.emulated_lowp_breakages COMMAND ffpa_emulate_kernels --lowp-breakages)
set_tests_properties(ffpa.kernels.emulated_lowp_breakages PROPERTIES LABELS unit TIMEOUT 300
  PASS_REGULAR_EXPRESSION "8 lowp breakage runs, 0 wrong")
