// The C API's backward: validation, the arrays' device, the kernels' parameters (on the
// forward's base), the non-finite pre-pass, then the (head dim, dtype) instance of the
// compiled set (its feed chosen there: ffpa/bwd_launch_template.cuh).
#include <string>

#include "ffpa/api.h"
#include "ffpa/bwd_params.h"
#include "ffpa/mask.h"
#include "ffpa/runtime.h"
#include "internal.h"

namespace ffpa {

using namespace detail;

Status backward(const BackwardArgs& a) {
  Status st = validate_backward(a);
  if (!st.ok()) return st;
  if (device_count() == 0)
    return {ErrorKind::kDevice,
            "no CUDA device: the CUDA runtime sees no GPU (check nvidia-smi, the driver and CUDA_VISIBLE_DEVICES)"};
  const void* ptrs[10] = {a.q.data, a.k.data, a.v.data, a.out.data, a.dout.data, a.dq.data, a.dk.data, a.dv.data,
                          a.lse.data, a.workspace};
  const char* names[10] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv", "lse", "workspace"};
  int device = -1;
  st = arrays_device(ptrs, names, 10, a.mask, &device);
  if (!st.ok()) return st;
  DeviceGuard guard(device);
  const int64_t b = a.q.shape[0], hq = a.q.shape[1], nq = a.q.shape[2];
  const int64_t hkv = a.k.shape[1], nkv = a.k.shape[2], d = a.q.shape[3];
  if (b * hq * nq == 0) {
    // No query: dK and dV are zero (dQ is empty). Row by row of each (batch, head).
    for (const TensorDesc* g : {&a.dk, &a.dv}) {
      if (g->data == nullptr || b * hkv * nkv * d == 0) continue;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t h = 0; h < hkv; ++h) {
          auto* base = static_cast<char*>(g->data) + (i * g->stride[0] + h * g->stride[1]) * 2;
          st = runtime::memset_2d_async(base, g->stride[2] * 2, 0, d * 2, nkv, a.stream,
                                        "cudaMemset2DAsync (zero dK / dV)");
          if (!st.ok()) return st;
        }
    }
    return {};
  }
  BwdParams p = make_bwd_params(a);
  p.tma = tma_runs_on_current_device();  // the main kernels' feed (bwd_launch_template.cuh)
  // As in forward(): the heads reading a NaN or an inf (dO included) follow the math
  // backend's autograd under the causal mask and the sliding window (ffpa/mask.h); causal
  // or windowed calls only (band_hides_keys), K and V of a padded batch below seqused_k[b]
  // only, the whole packed arrays in varlen (a head's flag covers all its sequences).
  NonfiniteFlags nonfinite;
  if (band_hides_keys(p.mask, a.causal)) {
    const int* kv_used = p.mask.cu_seqlens_q == nullptr ? p.mask.seqused_k : nullptr;
    nonfinite.add(a.q), nonfinite.add(a.k, kv_used), nonfinite.add(a.v, kv_used), nonfinite.add(a.dout);
    st = nonfinite.run(p.b, p.hq, p.h_ratio, p.head_dim, a.q.dtype, a.stream);
    if (!st.ok()) return nonfinite.release(st);
    p.nonfinite = nonfinite.flags();
  }
  return nonfinite.release(find_bwd(p.head_dim, a.q.dtype)->launch(p));
}

}  // namespace ffpa
