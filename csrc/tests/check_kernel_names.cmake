# cmake -DCUOBJDUMP=<path> -DLIBRARY=<lib.so> -DARCHS=<a|b> -P check_kernel_names.cmake
# The host side and every arch's device code name the same kernels. The host pass
# registers and launches each __global__ by its template arguments; if one of those
# depended on __CUDA_ARCH__ (a default chosen per pass), the host names a kernel the
# device code does not hold and every launch fails with cudaErrorInvalidResourceHandle,
# which no CPU test would otherwise see (it happened once: docs/perf.md, GPU run 3).
# Host names: the library's mangled ffpa kernel symbols (forward and backward) (the host stubs, internal
# linkage "L" dropped, compiler suffixes such as .cold cut); device names: the entry
# functions cuobjdump lists per arch.
cmake_minimum_required(VERSION 3.25)
set(kernel_re "_ZN4ffpaL?[0-9]+ffpa_(fwd|bwd)_[a-z_]*kernel[A-Za-z0-9_]*")
file(STRINGS "${LIBRARY}" host_lines REGEX "${kernel_re}")
set(host "")
foreach(line IN LISTS host_lines)
  string(REGEX MATCHALL "${kernel_re}" names "${line}")
  foreach(n IN LISTS names)
    if(n MATCHES "(__tmp|__handle)$" OR n MATCHES "wrapper__device_stub")
      continue()  # nvcc's static registration helpers, not kernels
    endif()
    string(REGEX REPLACE "^_ZN4ffpaL" "_ZN4ffpa" n "${n}")
    list(APPEND host "${n}")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES host)
list(LENGTH host n_host)
if(n_host EQUAL 0)
  message(FATAL_ERROR "no ffpa kernel names found on the host side of ${LIBRARY}")
endif()
string(REPLACE "|" ";" tokens "${ARCHS}")
set(bad "")
foreach(token IN LISTS tokens)
  execute_process(COMMAND "${CUOBJDUMP}" --dump-elf-symbols -arch "sm_${token}" "${LIBRARY}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump --dump-elf-symbols -arch sm_${token} failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "_ZN4ffpa[0-9]+ffpa_(fwd|bwd)_[a-z_]*kernel[A-Za-z0-9_]*" device "${out}")
  list(REMOVE_DUPLICATES device)
  list(LENGTH device n_dev)
  set(missing "")
  foreach(n IN LISTS host)
    if(NOT n IN_LIST device)
      list(APPEND missing "${n}")
    endif()
  endforeach()
  # The backward kernels (ffpa/bwd_kernel_mma.cuh) are among the names both sides must hold.
  set(n_bwd 0)
  foreach(n IN LISTS device)
    if(n MATCHES "ffpa_bwd_")
      math(EXPR n_bwd "${n_bwd} + 1")
    endif()
  endforeach()
  message("sm_${token}: ${n_host} host kernel names, ${n_dev} device entry functions (${n_bwd} backward)")
  if(missing)
    list(JOIN missing "\n    " m)
    list(APPEND bad "sm_${token} lacks kernels the host side names:\n    ${m}")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " b)
  message(FATAL_ERROR "host and device kernel names disagree (a template argument that depends on "
                      "__CUDA_ARCH__?); launches would fail with an invalid resource handle:\n  ${b}")
endif()
message("kernel names agree")
