# The tuning sweep of the device check (docs/perf.md "Tuning sweep"): extra instances of
# the forward kernels with configurations other than the defaults, compiled into the
# kernels-only library when -DFFPA_SWEEP=ON and timed by `ffpa_device_check --sweep-csv`.
#
#   ffpa_generate_sweep_instances(HEAD_DIMS <dims> ARCH <arch> OUT_DIR <dir>
#                                 [SUBSET] OUT_SOURCES <var>)
#
# One configuration list per path, here and nowhere else. Every variant is fp16 with fp32
# accumulation (the targets' case). On archs >= 90 the variants are of the TMA-fed paths
# (tma, cute_tma: the ones the H200 runs fastest, docs/perf.md run 3), below 90 of the
# cp.async ones (mma, cute). Entries are "D|kind|params":
#   mma  (FwdMmaTraits: warps_m, warps_d, stages; 64-key blocks, 64-column D chunks)
#   cute (CuteTile: block_m, block_n, block_d, warps_m, warps_d, stages; block_d = D is
#        persist-D, 64 split-D; the TMA box is block_m x 64 for Q and block_n x 64 for K/V)
# Every entry was checked against the tiles' static_asserts by hand (shared memory at most
# 99 KiB: cute/spec.h kSmemBytesTma; whole mma tiles per warp); spills are not refused:
# the sweep measures what they cost. SUBSET (the CI rehearsal) keeps the first entry of
# each kind per head dim.
set(FFPA_SWEEP_VARIANTS
  # D = 64: default mma 4x1, 3 stages; cute 128x64 persist-D 4x1 (32 rows a warp), 2 stages
  "64|mma|4,1,2" "64|mma|4,1,4" "64|mma|8,1,3"
  "64|cute|128,64,64,8,1,2" "64|cute|128,64,64,4,1,3"
  # D = 128: default cute 64x64 persist-D 4x1 (16 rows a warp), 2 stages. 128x64 with 4
  # warps is FlashAttention-2's tile (32 rows a warp: each K/V fragment feeds two mma row
  # tiles, half the ldmatrix per mma; docs/perf.md "Analysis"); split-D with 3 stages
  "128|mma|4,1,2" "128|mma|4,1,4" "128|mma|4,2,3"
  "128|cute|128,64,128,4,1,2" "128|cute|64,64,64,4,1,3"
  # D = 320: default split-D 4x2, 3 stages (64 keys): a fourth stage; 128-key blocks
  "320|mma|4,2,2" "320|mma|4,2,4" "320|mma|2,4,3"
  "320|cute|64,64,64,4,2,4" "320|cute|64,128,64,4,2,2"
  # D = 512: default split-D 4x2, 3 stages (64 keys): 32-key blocks; the 2x4 layout
  "512|mma|4,2,2" "512|mma|4,2,4" "512|mma|2,4,3"
  "512|cute|64,32,64,4,2,3" "512|cute|32,64,64,2,4,3")

include("${CMAKE_CURRENT_LIST_DIR}/FfpaKernelFacts.cmake")  # the arch rules (ffpa_arch_has)

function(ffpa_generate_sweep_instances)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "SUBSET" "ARCH;OUT_DIR;OUT_SOURCES" "HEAD_DIMS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_generate_sweep_instances: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required ARCH OUT_DIR OUT_SOURCES)
    if(NOT ARG_${required})
      message(FATAL_ERROR "ffpa_generate_sweep_instances: ${required} is required")
    endif()
  endforeach()
  if(NOT ARG_ARCH MATCHES "^[0-9]+[af]?$")
    message(FATAL_ERROR "ffpa: FFPA_SWEEP needs one CUDA arch (the device check builds for its GPU's); "
                        "got '${ARG_ARCH}': configure with -DFFPA_CUDA_ARCHS=<one arch>, e.g. 90")
  endif()
  ffpa_load_kernel_facts()
  ffpa_arch_has(tma "${ARG_ARCH}" arch_tma)
  if(arch_tma)
    set(mma_path tma)
    set(cute_path cute_tma)
  else()
    set(mma_path mma)
    set(cute_path cute)
  endif()
  set(sources "")
  set(decls "")
  set(entries "")
  set(n 0)
  set(seen "")
  foreach(entry IN LISTS FFPA_SWEEP_VARIANTS)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 d)
    list(GET parts 1 kind)
    list(GET parts 2 params)
    if(NOT d IN_LIST ARG_HEAD_DIMS)
      continue()
    endif()
    if(ARG_SUBSET)
      if("${d}|${kind}" IN_LIST seen)
        continue()
      endif()
      list(APPEND seen "${d}|${kind}")
    endif()
    string(REPLACE "," ";" p "${params}")
    set(name "ffpa_sweep_${n}")
    if(kind STREQUAL "mma")
      list(LENGTH p np)
      if(NOT np EQUAL 3)
        message(FATAL_ERROR "ffpa: sweep entry '${entry}': mma takes warps_m,warps_d,stages")
      endif()
      list(GET p 0 wm)
      list(GET p 1 wd)
      list(GET p 2 st)
      set(path ${mma_path})
      math(EXPR br "16 * ${wm}")
      set(config "Br=${br} Bc=64 Bd=64 (split-D) warps=${wm}x${wd} stages=${st}")
      set(traits "FwdMmaTraits<${d}, T, ${wm}, ${wd}, ${st}>")
      if(path STREQUAL "tma")
        set(call "run_fwd_tma<${traits}, false, DType::kFp16>(p)")
      else()
        set(call "run_fwd_mma<${traits}, false>(p)")
      endif()
      set(header "ffpa/fwd_launch_template.cuh")
    elseif(kind STREQUAL "cute")
      list(LENGTH p np)
      if(NOT np EQUAL 6)
        message(FATAL_ERROR "ffpa: sweep entry '${entry}': cute takes block_m,block_n,block_d,warps_m,warps_d,stages")
      endif()
      list(GET p 0 bm)
      list(GET p 1 bn)
      list(GET p 2 bd)
      list(GET p 3 wm)
      list(GET p 4 wd)
      list(GET p 5 st)
      set(path ${cute_path})
      if(bd EQUAL d)
        set(scheme persist-D)
      else()
        set(scheme split-D)
      endif()
      set(config "Br=${bm} Bc=${bn} Bd=${bd} (${scheme}) warps=${wm}x${wd} stages=${st}")
      if(path STREQUAL "cute_tma")
        set(load kTma)
        string(APPEND config " box=${bm}x64/${bn}x64")
      else()
        set(load kCpAsync)
      endif()
      set(call "launch_fwd_cute<CuteFwdSpec<${d}, T, CuteTile<${bm}, ${bn}, ${bd}, ${wm}, ${wd}, ${st}>, Sm80Atoms<T, false>>, Load::${load}, DType::kFp16>(p)")
      set(header "ffpa/cute/launch.cuh")
    else()
      message(FATAL_ERROR "ffpa: sweep entry '${entry}': kind '${kind}' is not mma or cute")
    endif()
    set(file "${ARG_OUT_DIR}/${name}.cu")
    # Written like the release's instances (cmake/FfpaKernelInstances.cmake): the same
    # build-independent identity, so a sweep library is as reproducible as a release one.
    _ffpa_write_cuda_instance("${file}"
"// auto-generated by cmake/FfpaSweep.cmake (FFPA_SWEEP=ON), do not edit.
// Sweep variant ${n}: D=${d} ${path} ${config}
#include \"${header}\"
#include \"ffpa/sweep.h\"

namespace ffpa::sweep {
Status ${name}(const FwdParams& p) {
  using T = typename DTypeElement<DType::kFp16>::type;
  return ${call};
}
}  // namespace ffpa::sweep
")
    list(APPEND sources "${file}")
    string(APPEND decls "Status ${name}(const FwdParams& p);\n")
    string(APPEND entries "    {\"${path}\", ${d}, \"${config}\", &${name}},\n")
    math(EXPR n "${n} + 1")
  endforeach()
  if(n EQUAL 0)
    string(APPEND entries "    {nullptr, 0, nullptr, nullptr},\n")
  endif()
  set(default_cases "")
  foreach(d IN LISTS ARG_HEAD_DIMS)
    string(APPEND default_cases "  if (d == ${d}) return cute ? cute_default<${d}>(tma) : mma_default<${d}>();\n")
  endforeach()
  set(defaults "${ARG_OUT_DIR}/ffpa_sweep_defaults.cpp")
  _ffpa_write_if_different("${defaults}"
"// auto-generated by cmake/FfpaSweep.cmake (FFPA_SWEEP=ON), do not edit.
#include <cstdint>
#include <string>

#include \"ffpa/cute/config.h\"
#include \"ffpa/kernel_traits.h\"
#include \"ffpa/sweep.h\"

namespace ffpa::sweep {
namespace {
// The defaults' configurations, from the tables the release instances read.
template <int D>
std::string mma_default() {
  using Tr = DefaultFwdMmaTraits<D, uint16_t>;
  return \"Br=\" + std::to_string(Tr::kBlockM) + \" Bc=\" + std::to_string(Tr::kBlockN) + \" Bd=\" +
         std::to_string(Tr::kBlockD) + \" (split-D) warps=\" + std::to_string(Tr::kNWarpsM) + \"x\" +
         std::to_string(Tr::kNWarpsD) + \" stages=\" + std::to_string(Tr::kStages);
}
template <int D>
std::string cute_default(bool tma) {
  constexpr CuteTileParams t = cute_default_tile(D, false);
  return \"Br=\" + std::to_string(t.block_m) + \" Bc=\" + std::to_string(t.block_n) + \" Bd=\" +
         std::to_string(t.block_d) + (t.block_d == D ? \" (persist-D)\" : \" (split-D)\") + \" warps=\" +
         std::to_string(t.warps_m) + \"x\" + std::to_string(t.warps_d) + \" stages=\" + std::to_string(t.stages) +
         (tma ? \" box=\" + std::to_string(t.block_m) + \"x64/\" + std::to_string(t.block_n) + \"x64\" : std::string());
}
}  // namespace

FFPA_API std::string default_config(const std::string& path, int d) {
  const bool cute = path == \"cute\" || path == \"cute_tma\";
  const bool tma = path == \"cute_tma\";
  (void)tma;
${default_cases}  return \"unknown (head dim \" + std::to_string(d) + \" has no sweep)\";
}
}  // namespace ffpa::sweep
")
  set(registry "${ARG_OUT_DIR}/ffpa_sweep_registry.cu")
  _ffpa_write_if_different("${registry}"
"// auto-generated by cmake/FfpaSweep.cmake (FFPA_SWEEP=ON), do not edit.
#include \"ffpa/sweep.h\"

namespace ffpa::sweep {
${decls}
namespace {
const Variant kVariants[] = {
${entries}};
}  // namespace

FFPA_API int count() { return ${n}; }
FFPA_API const Variant* get(int i) { return i >= 0 && i < ${n} ? &kVariants[i] : nullptr; }
}  // namespace ffpa::sweep
")
  list(APPEND sources "${registry}" "${defaults}")
  set(${ARG_OUT_SOURCES} "${sources}" PARENT_SCOPE)
  set(what "")
  if(ARG_SUBSET)
    set(what " (subset: the first of each kind per head dim)")
  endif()
  message(STATUS "ffpa: sweep: ${n} variants (${mma_path}, ${cute_path}) for head dims ${ARG_HEAD_DIMS}${what}")
endfunction()
