// The low-precision paths' quantisation pass (ffpa/lowp/quant.cuh), one instance per input
// dtype: it depends on neither the head dim nor the kernel, so every head dim's launcher
// (ffpa/lowp/launch.cuh) shares these two.
#include "ffpa/launch_common.cuh"
#include "ffpa/lowp/quant.cuh"

namespace ffpa {

Status quantize_lowp(const FwdParams& params, DType dtype, unsigned char* workspace) {
  if (dtype == DType::kBf16) return launch_lowp_quant<__nv_bfloat16>(params, params.lowp, workspace);
  if (dtype == DType::kFp16) return launch_lowp_quant<__half>(params, params.lowp, workspace);
  return {ErrorKind::kDType, std::string("internal: dtype ") + dtype_name(dtype) +
                                 " reached the low-precision quantisation (expected fp16 or bf16)"};
}

}  // namespace ffpa
