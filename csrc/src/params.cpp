// The kernels' parameters, built once from validated C API arguments: the forward's and
// the backward's share their base (the arrays q, k, v, out and the LSE, the extents, the
// scale, the causal mask and the masks' arrays); each adds its own.
#include "ffpa/api.h"
#include "ffpa/bwd_params.h"
#include "ffpa/params.h"
#include "internal.h"

namespace ffpa::detail {

// The kernels' MaskParams (ffpa/mask.h) of validated MaskArgs; bottom_right: the
// backward's alignment (the forward's kernel knows its own; varlen is bottom-right always).
MaskParams mask_params(const MaskArgs& m, bool bottom_right) {
  MaskParams p;
  p.window_left = static_cast<int>(m.window_left);
  p.window_right = static_cast<int>(m.window_right);
  p.diag_bottom_right = bottom_right || m.varlen();
  p.seqused_k = m.seqused_k.data;
  if (m.varlen()) {
    p.cu_seqlens_q = m.cu_seqlens_q.data;
    p.cu_seqlens_k = m.cu_seqlens_k.data;
    p.num_seqs = static_cast<int>(m.cu_seqlens_q.size - 1);
    p.max_seqlen_q = static_cast<int>(m.max_seqlen_q);
    p.max_seqlen_k = static_cast<int>(m.max_seqlen_k);
  }
  return p;
}

namespace {

// The base both passes share (FwdParams and BwdParams name these fields alike).
template <typename Params, typename Args>
void fill_base(Params& p, const Args& a) {
  p.q = a.q.data, p.k = a.k.data, p.v = a.v.data, p.o = a.out.data, p.lse = a.lse.data;
  p.q_batch_stride = a.q.stride[0], p.q_head_stride = a.q.stride[1], p.q_row_stride = a.q.stride[2];
  p.k_batch_stride = a.k.stride[0], p.k_head_stride = a.k.stride[1], p.k_row_stride = a.k.stride[2];
  p.v_batch_stride = a.v.stride[0], p.v_head_stride = a.v.stride[1], p.v_row_stride = a.v.stride[2];
  p.o_batch_stride = a.out.stride[0], p.o_head_stride = a.out.stride[1], p.o_row_stride = a.out.stride[2];
  p.lse_batch_stride = a.lse.stride[0], p.lse_head_stride = a.lse.stride[1], p.lse_row_stride = a.lse.stride[2];
  p.b = static_cast<int>(a.q.shape[0]);
  p.hq = static_cast<int>(a.q.shape[1]);
  p.hkv = static_cast<int>(a.k.shape[1]);
  p.nq = static_cast<int>(a.q.shape[2]);
  p.nkv = static_cast<int>(a.k.shape[2]);
  p.head_dim = static_cast<int>(a.q.shape[3]);
  p.h_ratio = p.hkv > 0 ? p.hq / p.hkv : 1;
  p.scale = a.scale;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.causal = a.causal;
  p.mask = mask_params(a.mask, /*bottom_right=*/a.causal && !a.causal_top_left);
  p.stream = a.stream;
}

}  // namespace

FwdParams make_fwd_params(const ForwardArgs& a) {
  FwdParams p;
  fill_base(p, a);
  p.causal_offset = a.causal_top_left ? 0 : p.nkv - p.nq;
  p.accum = a.accum;
  p.out_dtype = a.out.dtype;
  return p;
}

BwdParams make_bwd_params(const BackwardArgs& a) {
  BwdParams p;
  fill_base(p, a);
  p.dout = a.dout.data, p.dq = a.dq.data, p.dk = a.dk.data, p.dv = a.dv.data, p.workspace = a.workspace;
  p.do_batch_stride = a.dout.stride[0], p.do_head_stride = a.dout.stride[1], p.do_row_stride = a.dout.stride[2];
  p.dq_batch_stride = a.dq.stride[0], p.dq_head_stride = a.dq.stride[1], p.dq_row_stride = a.dq.stride[2];
  p.dk_batch_stride = a.dk.stride[0], p.dk_head_stride = a.dk.stride[1], p.dk_row_stride = a.dk.stride[2];
  p.dv_batch_stride = a.dv.stride[0], p.dv_head_stride = a.dv.stride[1], p.dv_row_stride = a.dv.stride[2];
  return p;
}

}  // namespace ffpa::detail
