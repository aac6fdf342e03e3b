# cmake -DLOGS=<log|log|...> -DOUT_DIR=<dir> -P parse_ptxas.cmake
# Turns the ptxas -v output of the library's compiles (one log per instance,
# <instance>.log, every arch of the build in it: ptxas_capture.cmake) into
# kernel_resources.txt (a table) and kernel_resources.json:
#   {"kernels": [{"instance", "arch", "kernel" (mma|tma|simt|cute|cute_tma|cute_fp8|
#                 cute_tma_fp8|cute_tma_fp4|bwd_pre|bwd_dkv|bwd_dq (the backward's
#                 preprocessing, dK / dV and dQ kernels; bwd_dkv-tma / bwd_dq-tma their TMA
#                 feed), -f16acc for fp16 accumulation, -masked for the mma / tma / cute /
#                 cute_tma instances of masked calls, -stub for the
#                 trap stubs: TMA below sm_90, cute and mma-f16acc on the sm_120 family,
#                 FP8 below sm_89, NVFP4 outside the sm_120 family's 120f / 120a:
#                 the arch rules and impls of cmake/kernel-facts.json; lowp_stats|lowp_quant for the quantisation pass of
#                 csrc/src/lowp_quant.cu, instance "lowp_quant:<dtype>"),
#                 "registers", "spill_stores", "spill_loads", "stack_frame",
#                 "smem_static", "smem_dynamic"}], "total_spill_bytes": N}
# The kernels' shared memory is dynamic (ptxas reports only static); smem_dynamic
# mirrors FwdMmaTraits::kSmemBytes of csrc/kernels/ffpa/kernel_traits.h (3 stages) for
# mma/tma, and CuteFwdTraits::kSmemBytes[Tma] of csrc/kernels/ffpa/cute/traits.cuh for
# the CuTe kernels, computed from the tile their mangled name carries, and
# LowpQuantGeometry's constants (ffpa/lowp/quant.cuh) for the quantisation pass.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FfpaKernelFacts.cmake")  # the arch rules
ffpa_load_kernel_facts()
foreach(var LOGS OUT_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "parse_ptxas.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" logs "${LOGS}")

function(_mma_dynamic_smem head_dim out_var)
  if(head_dim LESS_EQUAL 256)
    set(wd 1)
    set(wm 4)
  elseif(head_dim LESS_EQUAL 512)
    set(wd 2)
    set(wm 4)
  else()
    set(wd 4)
    set(wm 2)
  endif()
  # WIDEN: the masked cp.async instance (MaskedFwdMmaTraits, ffpa/kernel_traits.h) splits D
  # one step wider where the layout holds 96 or more O accumulators per thread.
  math(EXPR acc "${head_dim} / ${wd} / 2")
  if("WIDEN" IN_LIST ARGN AND acc GREATER_EQUAL 96 AND wd LESS 4)
    if(wd EQUAL 1)
      set(wm 4)
    else()
      set(wm 2)
    endif()
    math(EXPR wd "${wd} * 2")
  endif()
  math(EXPR bm "16 * ${wm}")
  math(EXPR stage "${bm} * 64 + 64 * 64")
  set(p 0)
  set(red 0)
  if(wd GREATER 1)
    math(EXPR p "${bm} * 64")
    math(EXPR red "${wd} * ${bm}")
  endif()
  math(EXPR bytes "(3 * ${stage} + ${p}) * 2 + ${red} * 4")
  set(${out_var} ${bytes} PARENT_SCOPE)
endfunction()

set(rows "")
set(json_items "")
set(total_spill 0)
foreach(log IN LISTS logs)
  get_filename_component(base "${log}" NAME)
  if(base MATCHES "^(ffpa_(fwd|bwd)_d([0-9]+)_(fp16|bf16|cute|lowp))\\.log$")
    set(instance "${CMAKE_MATCH_1}")
    set(head_dim "${CMAKE_MATCH_3}")
  elseif(base STREQUAL "lowp_quant.log")
    # The low-precision quantisation pass (csrc/src/lowp_quant.cu): one object for every
    # head dim, so no head dim of its own.
    set(instance lowp_quant)
    set(head_dim 0)
  else()
    message(FATAL_ERROR "parse_ptxas.cmake: unexpected log name ${base}")
  endif()
  if(NOT EXISTS "${log}")
    message(FATAL_ERROR "parse_ptxas.cmake: ${log} is missing: the library object of ${instance} was compiled "
                        "without the report's launcher (an older build tree); rebuild it, e.g. touch its "
                        "generated source and build ffpa_kernels")
  endif()
  file(STRINGS "${log}" lines)
  set(kernel "")
  foreach(line IN LISTS lines)
    if(line MATCHES "Compiling entry function '([^']+)' for 'sm_([0-9a-z]+)'")
      set(mangled "${CMAKE_MATCH_1}")
      set(arch "${CMAKE_MATCH_2}")
      # ffpa_fwd_kernel<Traits, Load, kF16Acc, kPvForm>: Load 0 = cp.async ("mma"),
      # 1 = TMA ("tma"; "tma-stub" below sm_90, where it is a trap stub); kF16Acc adds
      # "-f16acc"; the instance for masked calls (kMasked, ffpa/mask.h) adds "-masked".
      if(mangled MATCHES "ffpa_fwd_kernelI.*LNS_4LoadE([01])ELb([01])E")
        set(kernel mma)
        if(CMAKE_MATCH_1 STREQUAL "1")
          set(kernel tma)
        endif()
        if(CMAKE_MATCH_2 STREQUAL "1")
          string(APPEND kernel "-f16acc")
        endif()
        # The cp.async kernel with fp16 accumulation is a cp.async-fed heavy kernel
        # (kMmaF16AccCompiled in ffpa/fwd_kernel_mma.cuh): a trap stub where those are.
        ffpa_impl_has_code(tma "${arch}" tma_code)
        ffpa_arch_has(cp_async_heavy "${arch}" heavy_code)
        set(base "${kernel}")
        if(mangled MATCHES "MaskBreakE[0-9]+ELb1E")
          string(APPEND kernel "-masked")
        endif()
        if((base MATCHES "^tma" AND NOT tma_code) OR (base STREQUAL "mma-f16acc" AND NOT heavy_code))
          string(APPEND kernel "-stub")
        endif()
      elseif(mangled MATCHES "ffpa_fwd_cute_kernelI.*CuteTileILi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)EE.*LowpAtomsILNS_6LowpQKE([01])E.*LNS_4LoadE([01])E")
        # The low-precision kernel: LowpAtoms<kQK> (0 FP8, 1 NVFP4), Load 0 = cute_fp8,
        # 1 = cute_tma_fp8 / cute_tma_fp4. Byte tiles: Q and K at 8 or 4 bits, V^T and P
        # at 8 (CuteFwdSpec in ffpa/cute/spec.h).
        set(cm "${CMAKE_MATCH_1}")
        set(cn "${CMAKE_MATCH_2}")
        set(cd "${CMAKE_MATCH_3}")
        set(cwd "${CMAKE_MATCH_5}")
        set(cs "${CMAKE_MATCH_6}")
        set(qk_bits 8)
        set(v_bits 8)
        if(CMAKE_MATCH_7 STREQUAL "1")
          set(qk_bits 4)
          set(kernel cute_tma_fp4)
        elseif(CMAKE_MATCH_8 STREQUAL "1")
          set(kernel cute_tma_fp8)
        else()
          set(kernel cute_fp8)
        endif()
        ffpa_impl_has_code(${kernel} "${arch}" code)
        if(NOT code)
          string(APPEND kernel "-stub")
        endif()
      elseif(mangled MATCHES "ffpa_fwd_cute_kernelI.*CuteTileILi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)EE.*LNS_4LoadE([01])E")
        # ffpa_fwd_cute_kernel<CuteFwdTraits<D, T, CuteTile<M, N, Dstep, WM, WD, S>,
        # Sm80Atoms<T, kF16Acc>, ...>, Load>: Load 0 = cute, 1 = cute_tma.
        set(cm "${CMAKE_MATCH_1}")
        set(cn "${CMAKE_MATCH_2}")
        set(cd "${CMAKE_MATCH_3}")
        set(cwd "${CMAKE_MATCH_5}")
        set(cs "${CMAKE_MATCH_6}")
        set(kernel cute)
        set(qk_bits 16)
        set(v_bits 16)
        if(CMAKE_MATCH_7 STREQUAL "1")
          set(kernel cute_tma)
        endif()
        if(mangled MATCHES "Sm80AtomsI[^L]*Lb1E")
          string(APPEND kernel "-f16acc")
        endif()
        # cute_tma without TMA, cute where the cp.async-fed heavy kernels are not
        # (kCuteCpAsyncCode in ffpa/cute/fwd_kernel.cuh): trap stubs.
        string(REGEX REPLACE "-f16acc$" "" impl "${kernel}")
        ffpa_impl_has_code(${impl} "${arch}" code)
        # Then <.., Load, kMasked, MaskBreak>: the instance for masked calls (window,
        # seqused_k, varlen: ffpa/mask.h) adds "-masked".
        if(mangled MATCHES "LNS_4LoadE[01]ELb1E")
          string(APPEND kernel "-masked")
        endif()
        if(NOT code)
          string(APPEND kernel "-stub")
        endif()
      elseif(mangled MATCHES "ffpa_bwd_kernelINS_12BwdMmaTraitsILi([0-9]+)E[0-9]+__[a-z0-9_]+Li([0-9]+)ELi([0-9]+)ELi([0-9]+)ELb([01])EEELb([01])E")
        # ffpa_bwd_kernel<BwdMmaTraits<D, T, WM, WD, S, kPersistD>, kRowsAreKeys>:
        # 1 = dK / dV, 0 = dQ. Shared memory (BwdMmaTraits::kSmemBytes,
        # ffpa/bwd_kernel_traits.h), 16-bit: split-D S stages of (16 WM + 64) x 64
        # elements, persist-D the resident rows (2 x 16 WM x D) and S whole-D column slots
        # (64 x D each); then the P and dS tiles, 16 WM x 64 each.
        set(bwd_smem_d "${CMAKE_MATCH_1}")
        set(bwd_smem_rows "${CMAKE_MATCH_2}")
        set(bwd_smem_stages "${CMAKE_MATCH_4}")
        set(bwd_smem_persist "${CMAKE_MATCH_5}")
        set(kernel bwd_dq)
        if(CMAKE_MATCH_6 STREQUAL "1")
          set(kernel bwd_dkv)
        endif()
        # Then <.., BwdBreak, Load>: Load 1 = the TMA feed ("-tma"; "-tma-stub" below
        # sm_90, where it is a trap stub).
        if(mangled MATCHES "LNS_4LoadE1E")
          string(APPEND kernel "-tma")
          ffpa_impl_has_code(tma "${arch}" tma_code)
          if(NOT tma_code)
            string(APPEND kernel "-stub")
          endif()
        endif()
      elseif(mangled MATCHES "ffpa_bwd_preprocess_kernel")
        set(kernel bwd_pre)
      elseif(mangled MATCHES "ffpa_fwd_simt_kernel")
        set(kernel simt)
      elseif(mangled MATCHES "ffpa_lowp_kv_stats_kernel")
        set(kernel lowp_stats)
      elseif(mangled MATCHES "ffpa_lowp_quant_kernel")
        set(kernel lowp_quant)
      else()
        set(kernel "")
      endif()
      set(stack 0)
      set(st 0)
      set(ld 0)
    elseif(kernel AND line MATCHES "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
      set(stack "${CMAKE_MATCH_1}")
      set(st "${CMAKE_MATCH_2}")
      set(ld "${CMAKE_MATCH_3}")
    elseif(kernel AND line MATCHES "Used ([0-9]+) registers")
      set(regs "${CMAKE_MATCH_1}")
      set(smem 0)
      if(line MATCHES "([0-9]+) bytes smem")
        set(smem "${CMAKE_MATCH_1}")
      endif()
      set(dyn 0)
      if(kernel MATCHES "^mma.*-masked")
        _mma_dynamic_smem(${head_dim} dyn WIDEN)
      elseif(kernel MATCHES "^mma")
        _mma_dynamic_smem(${head_dim} dyn)
      elseif(kernel MATCHES "^cute" AND NOT kernel MATCHES "stub$")
        # CuteFwdSpec's kSmemBytes (ffpa/cute/spec.h): 1024 bytes of alignment slack, then
        # Q + S x max(K step, V step) + P bytes + the row exchange (Q and K at qk_bits, V
        # and P at v_bits: 16 and 16, or e4m3 / NVFP4 and 8); TMA: the 8-byte-aligned end
        # and S + 1 mbarriers behind it.
        set(p 0)
        set(red 0)
        if(cwd GREATER 1)
          math(EXPR p "${cm} * ${cn} * ${v_bits} / 8")
          math(EXPR red "${cwd} * ${cm}")
        endif()
        math(EXPR kbytes "${cn} * ${cd} * ${qk_bits} / 8")
        math(EXPR vbytes "${cn} * ${cd} * ${v_bits} / 8")
        set(stage ${vbytes})
        if(kbytes GREATER vbytes)
          set(stage ${kbytes})
        endif()
        math(EXPR dyn "${cm} * ${head_dim} * ${qk_bits} / 8 + ${cs} * ${stage} + ${p} + ${red} * 4")
        if(kernel MATCHES "^cute_tma")
          math(EXPR dyn "1024 + (${dyn} + 7) / 8 * 8 + (${cs} + 1) * 8")
        else()
          math(EXPR dyn "1024 + ${dyn}")
        endif()
      elseif(kernel MATCHES "^bwd_d.*stub$")
        # A trap stub: never launched (0, as the forward's stubs).
      elseif(kernel MATCHES "^bwd_d" AND bwd_smem_persist STREQUAL "1")
        math(EXPR dyn "(2 * 16 * ${bwd_smem_rows} * ${bwd_smem_d} + ${bwd_smem_stages} * 64 * ${bwd_smem_d} + 2 * 16 * ${bwd_smem_rows} * 64) * 2")
        if(kernel MATCHES "-tma$")
          # kSmemBytesTma: 1024 bytes of alignment slack, then one 8-byte mbarrier for the
          # resident rows and one per column slot.
          math(EXPR dyn "1024 + ${dyn} + (1 + ${bwd_smem_stages}) * 8")
        endif()
      elseif(kernel MATCHES "^bwd_d")
        math(EXPR dyn "(${bwd_smem_stages} * (16 * ${bwd_smem_rows} * 64 + 64 * 64) + 2 * 16 * ${bwd_smem_rows} * 64) * 2")
        if(kernel MATCHES "-tma$")
          # kSmemBytesTma: the slack, then one mbarrier per stage.
          math(EXPR dyn "1024 + ${dyn} + ${bwd_smem_stages} * 8")
        endif()
      elseif(kernel STREQUAL "lowp_stats")
        # LowpQuantGeometry::kStatsSmemBytes (ffpa/lowp/quant.cuh): two fp32 partials of
        # 64 row slots x 32 channels.
        set(dyn 16384)
      elseif(kernel STREQUAL "lowp_quant")
        # LowpQuantGeometry::kQuantSmemBytes: one 64 x 64 byte V^T tile.
        set(dyn 4096)
      elseif(kernel MATCHES "^tma" AND NOT kernel MATCHES "stub$")
        # kSmemBytesTma: 1024 bytes of alignment slack, the 8-byte-aligned end of the
        # cp.async layout, one 8-byte mbarrier per stage.
        _mma_dynamic_smem(${head_dim} dyn)
        math(EXPR dyn "1024 + (${dyn} + 7) / 8 * 8 + 3 * 8")
      endif()
      math(EXPR total_spill "${total_spill} + ${st} + ${ld}")
      # One file holds a head dim's CuTe kernels (or the quantisation pass) of both
      # dtypes: the row names its dtype.
      set(row_instance "${instance}")
      if(instance MATCHES "(_cute|lowp_quant)$" AND mangled MATCHES "13__nv_bfloat16")
        string(APPEND row_instance ":bf16")
      elseif(instance MATCHES "(_cute|lowp_quant)$" AND mangled MATCHES "6__half")
        string(APPEND row_instance ":fp16")
      endif()
      string(APPEND rows "${row_instance}\tsm_${arch}\t${kernel}\t${regs}\t${st}\t${ld}\t${stack}\t${smem}\t${dyn}\n")
      if(json_items)
        string(APPEND json_items ",\n")
      endif()
      string(APPEND json_items "    {\"instance\": \"${row_instance}\", \"arch\": \"${arch}\", \"kernel\": \"${kernel}\", "
                               "\"registers\": ${regs}, \"spill_stores\": ${st}, \"spill_loads\": ${ld}, "
                               "\"stack_frame\": ${stack}, \"smem_static\": ${smem}, \"smem_dynamic\": ${dyn}}")
      set(kernel "")
    endif()
  endforeach()
endforeach()
file(MAKE_DIRECTORY "${OUT_DIR}")
file(WRITE "${OUT_DIR}/kernel_resources.txt"
  "# ptxas -v per kernel instance and arch (generated by csrc/report/parse_ptxas.cmake)\n"
  "instance\tarch\tkernel\tregisters\tspill_stores\tspill_loads\tstack_frame\tsmem_static\tsmem_dynamic\n"
  "${rows}# total spill bytes: ${total_spill}\n")
file(WRITE "${OUT_DIR}/kernel_resources.json"
  "{\n  \"kernels\": [\n${json_items}\n  ],\n  \"total_spill_bytes\": ${total_spill}\n}\n")
message(STATUS "ffpa: resource report: ${OUT_DIR}/kernel_resources.txt (total spill bytes: ${total_spill})")
