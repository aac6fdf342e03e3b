# Kernel instance sources, generated at configure time from one source of truth.
#
#   ffpa_generate_kernel_instances(HEAD_DIMS <d>... DTYPES <t>... OUT_DIR <dir>
#                                  OUT_SOURCES <var> [ARCHS <token>...])
#     HEAD_DIMS    head dims to compile: multiples of 64 from 64 to 1024
#     DTYPES       fp16 and/or bf16
#     OUT_DIR      directory (in the build tree) receiving the generated files
#     OUT_SOURCES  receives the generated sources, per (head dim, dtype):
#                    ffpa_fwd_d<D>_<dtype>.cu           run_fwd<D, dtype>: the dispatcher
#                                                       and the mma, tma and simt kernels
#                    ffpa_fwd_d<D>_<dtype>_cute.cu      run_fwd_cute<D, dtype, kCpAsync>
#                    ffpa_fwd_d<D>_<dtype>_cute_tma.cu  run_fwd_cute<D, dtype, kTma>
#                  (one explicit instantiation each: the CuTe kernels are the heavy
#                  compiles, so each path is its own file and its own job), plus
#                  ffpa_compiled_set.cpp, the dispatch table the library uses for
#                  lookups, error messages and build_info()
#     ARCHS        the FFPA_CUDA_ARCHS tokens, recorded in the compiled set
#     CUTLASS_VERSION  the CUTLASS headers' version (cmake/FfpaCutlass.cmake), recorded too
#   Files are only rewritten when their content changes, so reconfiguring (say, for a
#   new package version) leaves every object up to date.

set(_FFPA_INSTANCES_GENERATOR "cmake/FfpaKernelInstances.cmake")

# Write content to path unless the file already holds exactly that content.
function(_ffpa_write_if_different path content)
  if(ARGC GREATER 2)
    message(FATAL_ERROR "_ffpa_write_if_different: pass the content as one quoted argument")
  endif()
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()

# Generated CUDA sources, written and given a build-independent identity. nvcc names the
# internal-linkage device variables of a translation unit (libcu++'s and CuTe's
# namespace-scope constants, which the CuTe instances pull in) after a hash of the
# source's absolute path and, in a file whose only definitions are template
# instantiations, after the compiler's process id: two clean builds in two build
# directories would then ship different libraries (wheel.cuda.reproducible). Each
# instance therefore defines one plain hidden function (a stable name for that part),
# and cudafe++ is told a path relative to the generated directory (the last
# --orig_src_path_name wins; wheel.cuda.reproducible fails if a new nvcc stops honouring it).
function(_ffpa_write_cuda_instance path content)
  if(ARGC GREATER 2)
    message(FATAL_ERROR "_ffpa_write_cuda_instance: pass the content as one quoted argument")
  endif()
  get_filename_component(stem "${path}" NAME_WE)
  string(MAKE_C_IDENTIFIER "${stem}" anchor)
  string(CONCAT content "${content}"
    "\n// A plain external definition: nvcc's internal names in this file stay the same from build to build.\n"
    "__attribute__((visibility(\"hidden\"))) void ffpa_instance_${anchor}() {}\n")
  _ffpa_write_if_different("${path}" "${content}")
  get_filename_component(name "${path}" NAME)
  set_source_files_properties("${path}" PROPERTIES
    COMPILE_OPTIONS "-Xcudafe=--orig_src_path_name=ffpa-generated/${name}")
endfunction()

function(ffpa_generate_kernel_instances)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "OUT_DIR;OUT_SOURCES;CUTLASS_VERSION" "HEAD_DIMS;DTYPES;ARCHS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_generate_kernel_instances: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required OUT_DIR OUT_SOURCES)
    if(NOT ARG_${required})
      message(FATAL_ERROR "ffpa_generate_kernel_instances: ${required} is required")
    endif()
  endforeach()
  if(NOT ARG_HEAD_DIMS)
    message(FATAL_ERROR "ffpa: FFPA_HEAD_DIMS is empty; give at least one head dim, e.g. -DFFPA_HEAD_DIMS=128")
  endif()
  if(NOT ARG_DTYPES)
    message(FATAL_ERROR "ffpa: FFPA_DTYPES is empty; use fp16, bf16 or \"fp16;bf16\"")
  endif()

  set(head_dims "")
  foreach(d IN LISTS ARG_HEAD_DIMS)
    if(NOT d MATCHES "^[0-9]+$")
      message(FATAL_ERROR "ffpa: head dim '${d}' in FFPA_HEAD_DIMS is not a number; "
                          "use multiples of 64 up to 1024, e.g. -DFFPA_HEAD_DIMS=\"64;128;256;512\"")
    endif()
    math(EXPR rem "${d} % 64")
    if(d EQUAL 0 OR NOT rem EQUAL 0 OR d GREATER 1024)
      message(FATAL_ERROR "ffpa: head dim ${d} in FFPA_HEAD_DIMS is not supported: head dims must be "
                          "multiples of 64 from 64 to 1024 (the kernels stream D in 64-wide chunks)")
    endif()
    math(EXPR d "${d}")  # normalise "0128" to 128
    if(d IN_LIST head_dims)
      message(FATAL_ERROR "ffpa: head dim ${d} appears twice in FFPA_HEAD_DIMS")
    endif()
    list(APPEND head_dims ${d})
  endforeach()
  list(SORT head_dims COMPARE NATURAL)

  set(dtypes "")
  foreach(t IN LISTS ARG_DTYPES)
    if(NOT t MATCHES "^(fp16|bf16)$")
      message(FATAL_ERROR "ffpa: dtype '${t}' in FFPA_DTYPES is not supported; use fp16 and/or bf16")
    endif()
    if(NOT t IN_LIST dtypes)
      list(APPEND dtypes ${t})
    endif()
  endforeach()

  file(MAKE_DIRECTORY "${ARG_OUT_DIR}")
  set(header "// auto-generated from ${_FFPA_INSTANCES_GENERATOR}, do not edit.\n")
  set(sources "")
  set(entries "")
  foreach(d IN LISTS head_dims)
    foreach(t IN LISTS dtypes)
      if(t STREQUAL "fp16")
        set(enum "kFp16")
      else()
        set(enum "kBf16")
      endif()
      set(path "${ARG_OUT_DIR}/ffpa_fwd_d${d}_${t}.cu")
      string(CONCAT content
        "${header}// Head dim ${d}, ${t}: the mma and simt forward kernels of this instance.\n"
        "#include \"ffpa/fwd_launch_template.cuh\"\n\n"
        "template ffpa::Status ffpa::run_fwd<${d}, ffpa::DType::${enum}>(const ffpa::FwdParams&, ffpa::Impl);\n")
      _ffpa_write_cuda_instance("${path}" "${content}")
      list(APPEND sources "${path}")
      foreach(feed cute cute_tma)
        if(feed STREQUAL "cute")
          set(load "kCpAsync")
          set(what "the CuTe kernel fed by cp.async (impl cute)")
        else()
          set(load "kTma")
          set(what "the CuTe kernel fed by TMA (impl cute_tma; trap stubs below sm_90)")
        endif()
        set(path "${ARG_OUT_DIR}/ffpa_fwd_d${d}_${t}_${feed}.cu")
        string(CONCAT content
          "${header}// Head dim ${d}, ${t}: ${what}.\n"
          "#include \"ffpa/cute/launch.cuh\"\n\n"
          "template ffpa::Status ffpa::run_fwd_cute<${d}, ffpa::DType::${enum}, ffpa::Load::${load}>(const ffpa::FwdParams&);\n")
        _ffpa_write_cuda_instance("${path}" "${content}")
        list(APPEND sources "${path}")
      endforeach()
      string(APPEND entries "    {${d}, DType::${enum}, &run_fwd<${d}, DType::${enum}>, true},\n")
    endforeach()
  endforeach()

  set(archs "")
  foreach(a IN LISTS ARG_ARCHS)
    string(APPEND archs "\"${a}\", ")
  endforeach()
  list(LENGTH ARG_ARCHS n_archs)
  if(n_archs EQUAL 0)
    # A zero-length array is ill-formed C++; the count says there are none.
    set(archs "nullptr")
  endif()
  set(path "${ARG_OUT_DIR}/ffpa_compiled_set.cpp")
  string(CONCAT content
    "${header}// The compiled set: every (head dim, dtype) instance of this build and its archs.\n"
    "#include \"ffpa/params.h\"\n\n"
    "namespace ffpa {\n\n"
    "const KernelEntry kCompiledKernels[] = {\n${entries}};\n"
    "const int kNumCompiledKernels = static_cast<int>(sizeof(kCompiledKernels) / sizeof(kCompiledKernels[0]));\n\n"
    "const char* const kCompiledArchs[] = {${archs}};\n"
    "const int kNumCompiledArchs = ${n_archs};\n"
    "const char* const kCutlassVersion = \"${ARG_CUTLASS_VERSION}\";\n\n"
    "}  // namespace ffpa\n")
  _ffpa_write_if_different("${path}" "${content}")
  list(APPEND sources "${path}")
  set(${ARG_OUT_SOURCES} "${sources}" PARENT_SCOPE)
endfunction()
