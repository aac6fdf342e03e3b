# cmake -DNVCC=... -DSOURCE=<instance .cu> -DARCH=<token> -DINCLUDES=<a|b> -DLOG=<file> -P ptxas_log.cmake
# Compiles one kernel instance for one arch to a cubin with ptxas -v and keeps the
# ptxas output in LOG (a cubin only: no host code, so this costs the device half of
# an instance build).
cmake_minimum_required(VERSION 3.25)
foreach(var NVCC SOURCE ARCH INCLUDES LOG)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "ptxas_log.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" includes "${INCLUDES}")
set(include_flags "")
foreach(dir IN LISTS includes)
  list(APPEND include_flags "-I${dir}")
endforeach()
get_filename_component(log_dir "${LOG}" DIRECTORY)
file(MAKE_DIRECTORY "${log_dir}")
execute_process(
  COMMAND "${NVCC}" -std=c++17 -O3 ${include_flags} -cubin
          "--generate-code=arch=compute_${ARCH},code=sm_${ARCH}" -Xptxas -v
          -o "${LOG}.cubin" "${SOURCE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE "${LOG}.cubin")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed for ${SOURCE} (sm_${ARCH}):\n${out}${err}")
endif()
file(WRITE "${LOG}" "${out}${err}")
