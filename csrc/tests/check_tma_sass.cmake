# cmake -DCUOBJDUMP=<path> -DLIBRARY=<libffpa_kernels.so> -DARCHS=<a|b> [-DFP16=ON] -P check_tma_sass.cmake
# The TMA paths are real where they should be and absent elsewhere, kernel by kernel.
# The SASS is split per function (cuobjdump's "Function : <name>" headers):
#   archs >= 90: every TMA-fed kernel (the mma kernel's Load::kTma instances and the
#                CuTe kernel's, impl cute_tma) holds TMA loads (UTMALDG) and mbarrier
#                operations (SYNCS);
#   archs < 90:  no function holds a TMA load (their TMA kernels are trap stubs);
#   every arch:  the CuTe kernels are there; below the sm_120 family the cp.async-fed
#                ones (impl cute) copy with cp.async (LDGSTS) and hold no TMA load; on the
#                sm_120 family they are trap stubs (kCuteCpAsyncCode in
#                ffpa/cute/fwd_kernel.cuh): no LDGSTS, no TMA load, no mma;
#   FP16:        fp16-accumulate mma (HMMA.16816.F16) in every arch.
# cuobjdump disassembles through nvdisasm, found next to it (PyPI nvidia-cuda-nvdisasm).
cmake_minimum_required(VERSION 3.25)
get_filename_component(bin_dir "${CUOBJDUMP}" DIRECTORY)
set(ENV{PATH} "${bin_dir}:$ENV{PATH}")
string(REPLACE "|" ";" tokens "${ARCHS}")
set(bad "")
foreach(token IN LISTS tokens)
  execute_process(COMMAND "${CUOBJDUMP}" --dump-sass -arch "sm_${token}" "${LIBRARY}"
                  OUTPUT_VARIABLE sass ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump --dump-sass -arch sm_${token} failed (${rc}): ${err}")
  endif()
  string(REGEX REPLACE "[af]$" "" base "${token}")
  string(REGEX MATCHALL "HMMA\\.16816\\.F16[^.]" f16acc "${sass}")
  list(LENGTH f16acc n_f16acc)
  # Per function: SASS lines end in " ;", which CMake would read as list separators.
  string(REPLACE ";" "" sass "${sass}")
  string(REPLACE "Function : " ";" parts "${sass}")
  list(POP_FRONT parts)  # the header before the first function
  set(n_tma_total 0)
  set(n_tma_kernels 0)
  set(n_cute 0)
  set(n_cute_tma 0)
  set(n_cute_stub 0)
  foreach(part IN LISTS parts)
    string(REGEX MATCH "^[^ \t\r\n]+" name "${part}")
    string(REGEX MATCHALL "UTMALDG" tma "${part}")
    string(REGEX MATCHALL "SYNCS\\." syncs "${part}")
    string(REGEX MATCHALL "LDGSTS" ldgsts "${part}")
    string(REGEX MATCHALL "HMMA" hmma "${part}")
    list(LENGTH hmma n_hmma)
    list(LENGTH tma n_tma)
    list(LENGTH syncs n_syncs)
    list(LENGTH ldgsts n_ldgsts)
    math(EXPR n_tma_total "${n_tma_total} + ${n_tma}")
    set(tma_fed OFF)
    if(name MATCHES "ffpa_fwd_(cute_)?kernelI.*LNS_4LoadE1E")
      set(tma_fed ON)
      math(EXPR n_tma_kernels "${n_tma_kernels} + 1")
    endif()
    if(name MATCHES "ffpa_fwd_cute_kernelI.*LNS_4LoadE1E")
      math(EXPR n_cute_tma "${n_cute_tma} + 1")
    elseif(name MATCHES "ffpa_fwd_cute_kernelI.*LNS_4LoadE0E")
      math(EXPR n_cute "${n_cute} + 1")
      if(base GREATER_EQUAL 120)
        math(EXPR n_cute_stub "${n_cute_stub} + 1")
        if(n_ldgsts GREATER 0 OR n_tma GREATER 0 OR n_hmma GREATER 0)
          list(APPEND bad "sm_${token} ${name} (impl cute) should be a trap stub on the sm_120 family but has "
                          "${n_ldgsts} LDGSTS, ${n_tma} UTMALDG, ${n_hmma} HMMA")
        endif()
      elseif(n_ldgsts EQUAL 0 OR n_tma GREATER 0)
        list(APPEND bad "sm_${token} ${name} (impl cute) has ${n_ldgsts} cp.async (LDGSTS) and ${n_tma} UTMALDG")
      endif()
    endif()
    if(tma_fed AND base GREATER_EQUAL 90 AND (n_tma EQUAL 0 OR n_syncs EQUAL 0))
      list(APPEND bad "sm_${token} ${name} is TMA-fed but has ${n_tma} UTMALDG and ${n_syncs} SYNCS")
    endif()
  endforeach()
  message("sm_${token}: ${n_tma_total} UTMALDG in ${n_tma_kernels} TMA-fed kernels (${n_cute_tma} of them CuTe), "
          "${n_cute} cp.async-fed CuTe kernels (${n_cute_stub} of them trap stubs), ${n_f16acc} fp16-accumulate HMMA")
  if(base LESS 90 AND n_tma_total GREATER 0)
    list(APPEND bad "sm_${token} (< 90) holds TMA loads")
  endif()
  if(n_cute EQUAL 0 OR n_cute_tma EQUAL 0)
    list(APPEND bad "sm_${token} lacks the CuTe kernels (${n_cute} cute, ${n_cute_tma} cute_tma)")
  endif()
  if(FP16 AND n_f16acc EQUAL 0)
    list(APPEND bad "sm_${token} has no fp16-accumulate mma (HMMA.16816.F16)")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " b)
  message(FATAL_ERROR "TMA / fp16-accumulation SASS check failed:\n  ${b}")
endif()
message("TMA SASS OK")
