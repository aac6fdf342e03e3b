# cmake -DCUOBJDUMP=<path> -DLIBRARY=<libffpa_kernels.so> -DARCHS=<a|b> [-DSASS_DIR=<dir>] -P check_lowp_sass.cmake
# The low-precision kernels hold the instructions they exist for, arch by arch and kernel
# by kernel (cuobjdump's "Function : <name>" headers; cmake/kernel-facts.json has the rules):
#   cute_fp8      (LowpAtoms<kFp8>, cp.async): on sm_89 .. sm_119 the FP8 mma (QMMA.16832
#                 E4M3 on sm_89; nvcc 13.0 lowers it to HMMA.16816 after an e4m3 -> f16
#                 unpack on sm_90) fed by cp.async (LDGSTS); a trap stub elsewhere (no mma);
#   cute_tma_fp8  (LowpAtoms<kFp8>, TMA): from sm_90 the same mma fed by TMA (UTMALDG); a
#                 trap stub below;
#   cute_tma_fp4  (LowpAtoms<kNvfp4>, TMA): on the sm_120 family's 120f / 120a the
#                 block-scaled mma (OMMA.SF.16864 E2M1 x E2M1 with UE4M3 scales, 4X) for
#                 Q K^T and the FP8 one (QMMA) for P V; a trap stub elsewhere.
# Every kernel of every head dim must be there in every arch (stubs included: the host
# names each one).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/sass_functions.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FfpaKernelFacts.cmake")  # the arch rules
ffpa_load_kernel_facts()
string(REPLACE "|" ";" tokens "${ARCHS}")
set(bad "")
foreach(token IN LISTS tokens)
  ffpa_sass_functions("${token}" parts KEEP "QMMA|OMMA|HMMA|F2FP|UTMALDG|LDGSTS")
  string(REGEX REPLACE "[af]$" "" sm "${token}")
  set(counts "")
  foreach(kind cute_fp8 cute_tma_fp8 cute_tma_fp4)
    set(n_${kind} 0)
    set(n_${kind}_real 0)
  endforeach()
  set(n_omma 0)
  set(n_qmma 0)
  foreach(part IN LISTS parts)
    string(REGEX MATCH "^[^ \t\r\n]+" name "${part}")
    if(NOT name MATCHES "ffpa_fwd_cute_kernelI.*LowpAtomsILNS_6LowpQKE([01])E.*LNS_4LoadE([01])E")
      continue()
    endif()
    if(CMAKE_MATCH_1 STREQUAL "1")
      set(kind cute_tma_fp4)
    elseif(CMAKE_MATCH_2 STREQUAL "1")
      set(kind cute_tma_fp8)
    else()
      set(kind cute_fp8)
    endif()
    ffpa_impl_has_code(${kind} "${token}" real)
    math(EXPR n_${kind} "${n_${kind}} + 1")
    string(REGEX MATCHALL "QMMA\\.16832\\.F32\\.E4M3\\.E4M3" qmma "${part}")
    string(REGEX MATCHALL "OMMA\\.SF\\.16864\\.F32\\.E2M1\\.E2M1\\.UE4M3\\.4X" omma "${part}")
    string(REGEX MATCHALL "HMMA\\.16816" hmma "${part}")
    string(REGEX MATCHALL "F2FP\\.F16\\.E4M3\\.UNPACK" unpack "${part}")
    string(REGEX MATCHALL "UTMALDG" tma "${part}")
    string(REGEX MATCHALL "LDGSTS" ldgsts "${part}")
    foreach(v qmma omma hmma unpack tma ldgsts)
      list(LENGTH ${v} n_${v}_here)
    endforeach()
    math(EXPR n_qmma "${n_qmma} + ${n_qmma_here}")
    math(EXPR n_omma "${n_omma} + ${n_omma_here}")
    set(what "sm_${token} ${kind} ${name}")
    if(NOT real)
      if(n_qmma_here GREATER 0 OR n_omma_here GREATER 0 OR n_hmma_here GREATER 0 OR n_tma_here GREATER 0)
        list(APPEND bad "${what} should be a trap stub but has ${n_qmma_here} QMMA, ${n_omma_here} OMMA.SF, "
                        "${n_hmma_here} HMMA, ${n_tma_here} UTMALDG")
      endif()
      continue()
    endif()
    math(EXPR n_${kind}_real "${n_${kind}_real} + 1")
    # The FP8 mma: QMMA where the hardware has it; sm_90's lowering is HMMA on unpacked e4m3.
    set(fp8_mma ${n_qmma_here})
    if(sm EQUAL 90 AND n_unpack_here GREATER 0)
      set(fp8_mma ${n_hmma_here})
    endif()
    if(fp8_mma EQUAL 0)
      list(APPEND bad "${what} has no FP8 mma (QMMA.16832 E4M3; on sm_90 HMMA after F2FP e4m3 unpacks)")
    endif()
    if(kind STREQUAL "cute_tma_fp4" AND n_omma_here EQUAL 0)
      list(APPEND bad "${what} has no block-scaled NVFP4 mma (OMMA.SF.16864 E2M1 UE4M3 4X)")
    endif()
    if(kind MATCHES "tma" AND n_tma_here EQUAL 0)
      list(APPEND bad "${what} is TMA-fed but has no UTMALDG")
    endif()
    if(kind STREQUAL "cute_fp8" AND (n_ldgsts_here EQUAL 0 OR n_tma_here GREATER 0))
      list(APPEND bad "${what} is cp.async-fed but has ${n_ldgsts_here} LDGSTS and ${n_tma_here} UTMALDG")
    endif()
  endforeach()
  message("sm_${token}: cute_fp8 ${n_cute_fp8} (${n_cute_fp8_real} real), cute_tma_fp8 ${n_cute_tma_fp8} "
          "(${n_cute_tma_fp8_real} real), cute_tma_fp4 ${n_cute_tma_fp4} (${n_cute_tma_fp4_real} real); "
          "${n_qmma} QMMA.16832.E4M3, ${n_omma} OMMA.SF.16864.E2M1.UE4M3.4X")
  if(n_cute_fp8 EQUAL 0 OR NOT n_cute_fp8 EQUAL n_cute_tma_fp8 OR NOT n_cute_fp8 EQUAL n_cute_tma_fp4)
    list(APPEND bad "sm_${token} lacks low-precision kernels (${n_cute_fp8} cute_fp8, ${n_cute_tma_fp8} cute_tma_fp8, "
                    "${n_cute_tma_fp4} cute_tma_fp4: one of each per head dim)")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " b)
  message(FATAL_ERROR "low-precision SASS check failed:\n  ${b}")
endif()
message("LOWP SASS OK")
