// The CuTe forward kernel's launches for the sanitizer (sanitize_kernels.cpp): D = 64,
// fp16, fp32 accumulation, on either feed; compiled with the same -fsanitize=thread
// instrumentation, in a translation unit of its own (CuTe's templates are slow to
// compile), with only this instance (emulate_cute.h carries every variant the result
// tests need). The geometry is the launcher's, as emulate_cute.h's launch_feed has it.
#include "emu_cute.h"
#include "ffpa/cute/fwd_kernel.cuh"
#include "ffpa/tma_geometry.h"

namespace emu {
namespace {
using Spec = ffpa::DefaultCuteFwdSpec<64, __half, false>;
template <ffpa::Load kLoad>
void body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_cute_kernel<Spec, kLoad>(p, g_tma_maps);
}
}  // namespace

void sanitize_cute_d64(bool tma, int b, int hq, int nq, const ffpa::FwdParams& p) {
  const Dim3 grid{unsigned((nq + Spec::kBlockM - 1) / Spec::kBlockM), unsigned(hq), unsigned(b)};
  if (tma) {
    g_tma_maps.q = encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, Spec::kBlockM));
    g_tma_maps.k = encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, Spec::kBlockN));
    g_tma_maps.v = encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, Spec::kBlockN));
    launch(&body<ffpa::Load::kTma>, p, grid, Spec::kNThreads, Spec::kSmemBytesTma);
  } else {
    launch(&body<ffpa::Load::kCpAsync>, p, grid, Spec::kNThreads, Spec::kSmemBytes);
  }
}
}  // namespace emu
