// Launchers of the backward kernels (bwd_kernel_mma.cuh): grid shapes, shared-memory
// opt-in, the three launches in stream order. Each generated backward instance file
// (cmake/FfpaKernelInstances.cmake) includes this header and explicitly instantiates
// run_bwd<head dim, dtype> once.
#pragma once

#include "ffpa/bwd_kernel_mma.cuh"
#include "ffpa/bwd_kernel_traits.h"
#include "ffpa/bwd_params.h"
#include "ffpa/launch_common.cuh"

namespace ffpa {

// Grid: row blocks of a sequence x heads x sequences (batch entries, or the packed
// sequences of varlen, whose longest has `rows` rows).
template <typename Traits, bool kRowsAreKeys, Load kLoad>
Status run_bwd_main(const BwdParams& params, int rows, int heads, const BwdTmaMaps& maps, const char* what) {
  const bool varlen = params.mask.cu_seqlens_q != nullptr;
  const dim3 grid((rows + Traits::kBlockM - 1) / Traits::kBlockM, heads, varlen ? params.mask.num_seqs : params.b);
  const auto kernel = &ffpa_bwd_kernel<Traits, kRowsAreKeys, BwdBreak::kNone, kLoad>;
  const int smem = kLoad == Load::kTma ? Traits::kSmemBytesTma : Traits::kSmemBytes;
  return launch_kernel(kernel, grid, Traits::kNThreads, smem, params.stream, what, params, maps);
}

// The feed is chosen here, not by the caller: the backward has no impl argument (the
// autograd of every forward impl calls the same backward), so it takes the TMA feed
// wherever this build's TMA code runs on the device (params.tma, set by src/backward.cpp from
// tma_runs_on_current_device()) and the cp.async feed elsewhere. Both give the same
// gradients bit for bit (the same tiles, the same products in the same order). A layout
// the driver refuses to encode (a row, head or batch stride that is not a multiple of
// 16 bytes) takes the cp.async feed, which has no such rule: the choice stays invisible.
// The dK / dV kernel's own rows are keys (K and V in boxes of its kBlockM rows, Q and
// dO of 64); the dQ kernel's are queries.
template <typename DkvTraits, typename DqTraits>
struct BwdFeeds {
  BwdTmaMaps dkv{}, dq{};
  bool tma = false;
  void encode(const BwdParams& params, DType dtype) {
    tma = params.tma && encode_bwd_tma_maps(params, dtype, DkvTraits::kBlockN, DkvTraits::kBlockM, &dkv).ok() &&
          encode_bwd_tma_maps(params, dtype, DqTraits::kBlockM, DqTraits::kBlockN, &dq).ok();
  }
};

// The caller (src/backward.cpp) has checked the arguments and that the problem is not empty
// (B, Hq, Nq >= 1; Nkv may be 0: dQ is then zero and dK / dV are empty).
template <int kHeadDim, DType kDType>
Status run_bwd(const BwdParams& params) {
  using T = typename DTypeElement<kDType>::type;
  {
    const dim3 grid((params.nq + BwdPreTraits::kRowsPerBlock - 1) / BwdPreTraits::kRowsPerBlock, params.hq, params.b);
    Status st = launch_kernel(&ffpa_bwd_preprocess_kernel<kHeadDim, T>, grid, BwdPreTraits::kNThreads, 0, params.stream,
                              "backward preprocessing kernel launch", params);
    if (!st.ok()) return st;
  }
  // The preprocessing pass is per query row: varlen's packed rows need no sequence there.
  using DkvTraits = BwdDkvTraits<kHeadDim, T>;
  using DqTraits = BwdDqTraits<kHeadDim, T>;
  BwdFeeds<DkvTraits, DqTraits> feeds;
  feeds.encode(params, kDType);
  Status st;
  const bool varlen = params.mask.cu_seqlens_q != nullptr;
  const int rows_k = varlen ? params.mask.max_seqlen_k : params.nkv;
  const int rows_q = varlen ? params.mask.max_seqlen_q : params.nq;
  if (params.nkv > 0 && rows_k > 0) {
    st = feeds.tma ? run_bwd_main<DkvTraits, true, Load::kTma>(params, rows_k, params.hkv, feeds.dkv,
                                                               "dK / dV kernel launch (TMA feed)")
                   : run_bwd_main<DkvTraits, true, Load::kCpAsync>(params, rows_k, params.hkv, feeds.dkv,
                                                                   "dK / dV kernel launch");
    if (!st.ok()) return st;
  }
  if (rows_q == 0) return {};
  return feeds.tma ? run_bwd_main<DqTraits, false, Load::kTma>(params, rows_q, params.hq, feeds.dq,
                                                               "dQ kernel launch (TMA feed)")
                   : run_bwd_main<DqTraits, false, Load::kCpAsync>(params, rows_q, params.hq, feeds.dq,
                                                                   "dQ kernel launch");
}

}  // namespace ffpa
