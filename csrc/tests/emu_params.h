// The emulator's drivers build a problem's kernel parameters as the C API does: C API
// argument structs (ffpa/api.h) of their dense arrays, turned into FwdParams / BwdParams by
// the library's own make_fwd_params / make_bwd_params (csrc/src/params.cpp, compiled into
// each driver), so the parameters the kernels are tested with are the ones users get.
#pragma once

#include <cstdint>

#include "ffpa/api.h"
#include "../src/internal.h"  // make_fwd_params, make_bwd_params

namespace emu {

// A contiguous [B, H, N, D] array.
inline ffpa::TensorDesc dense(const void* data, ffpa::DType dtype, int64_t b, int64_t h, int64_t n, int64_t d) {
  ffpa::TensorDesc t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  const int64_t shape[4] = {b, h, n, d}, stride[4] = {h * n * d, n * d, d, 1};
  for (int i = 0; i < 4; ++i) t.shape[i] = shape[i], t.stride[i] = stride[i];
  return t;
}

// A contiguous fp32 [B, Hq, Nq] LSE.
inline ffpa::LseDesc dense_lse(float* data, int64_t b, int64_t hq, int64_t nq) {
  ffpa::LseDesc l;
  l.data = data;
  const int64_t shape[3] = {b, hq, nq}, stride[3] = {hq * nq, nq, 1};
  for (int i = 0; i < 3; ++i) l.shape[i] = shape[i], l.stride[i] = stride[i];
  return l;
}

}  // namespace emu
