// The emulator as a sanitizer (docs/emulator.md, "The sanitizer"): the real forward
// kernels run on the CPU emulator with every shared-memory access checked
// (emu/emu_sanitizer.cpp: racecheck, initcheck, memcheck) and every barrier, cp.async
// group and mbarrier phase checked by the grid runner (emu/emu_grid.cpp: synccheck).
// This translation unit is compiled with -fsanitize=thread (the instrumentation only;
// libtsan is not linked), so that the kernels' loads and stores reach the checker.
//   ffpa_sanitize_kernels --clean [--seeds S] --expect N
//                          every path and shape under the round-robin schedule and S - 1
//                          seeded random ones (default 1: round robin only); no report allowed
//   ffpa_sanitize_kernels --clean --seed N   one schedule (a report's "rerun with")
//   ffpa_sanitize_kernels --break NAME --want TOOL [--seed N] [--site I]
//                          one deliberately broken run (under schedule N, default round
//                          robin; a removed barrier's site index I instead of the table's)
//                          in a child process; passes only when TOOL reported it
// Shapes are small (D = 64, 100 queries by 100 keys: two KV blocks, tail rows in both
// the query and the key tiles): each run takes well under a second.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "emu_cute.h"
#include "emu_san.h"
#include "emu_sanitizer.h"
#include "emu_state.h"
#include "ffpa/bwd_kernel_mma.cuh"
#include "ffpa/fwd_kernel_mma.cuh"
#include "ffpa/fwd_kernel_simt.cuh"
#include "ffpa/nonfinite.cuh"
#include "ffpa/tma_geometry.h"

namespace emu {
// sanitize_cute.cpp: the CuTe kernel at D = 64, fp16, on the TMA feed or cp.async.
void sanitize_cute_d64(bool tma, int b, int hq, int nq, const ffpa::FwdParams& p);
}  // namespace emu

namespace {

constexpr int D = 64;
using T = __half;
using Traits = ffpa::DefaultFwdMmaTraits<D, T>;  // 4 x 1 warps: each warp owns its rows
// 4 x 2 warps (the split-D layout of the large head dims, here at D = 64): the two warps of
// a row group exchange row maxima, P and row sums through shared memory.
using Traits4x2 = ffpa::FwdMmaTraits<D, T, 4, 2, Traits::kStages>;
ffpa::TmaMaps& g_maps = emu::g_tma_maps;

void mma_body(const ffpa::FwdParams& p) { ffpa::ffpa_fwd_kernel<Traits, ffpa::Load::kCpAsync, false, 1>(p, g_maps); }
void mma4x2_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<Traits4x2, ffpa::Load::kCpAsync, false, 1>(p, g_maps);
}
void tma_body(const ffpa::FwdParams& p) { ffpa::ffpa_fwd_kernel<Traits, ffpa::Load::kTma, false, 1>(p, g_maps); }
// The masked instances (ffpa/mask.h: window, seqused_k) on either feed.
using MaskedCp = ffpa::FwdMaskedLayout<D, T, ffpa::Load::kCpAsync>::Traits;
using MaskedTma = ffpa::FwdMaskedLayout<D, T, ffpa::Load::kTma>::Traits;
void masked_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<MaskedCp, ffpa::Load::kCpAsync, false, 1, ffpa::MaskBreak::kNone, true>(p, g_maps);
}
void masked_tma_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_kernel<MaskedTma, ffpa::Load::kTma, false, 1, ffpa::MaskBreak::kNone, true>(p, g_maps);
}

// The backward at D = 64 (its persist-D loop): the preprocessing pass, then the dK / dV
// kernel (rows are keys) and the dQ kernel, on either feed.
using DqTraits = ffpa::BwdDqTraits<D, T>;
using DkvTraits = ffpa::BwdDkvTraits<D, T>;
const ffpa::BwdParams* g_bwd = nullptr;
ffpa::BwdTmaMaps g_bwd_maps;
void bwd_pre_body(const ffpa::FwdParams&) { ffpa::ffpa_bwd_preprocess_kernel<D, T>(*g_bwd); }
template <typename Tr, bool kKeys, ffpa::Load kLoad>
void bwd_body(const ffpa::FwdParams&) {
  ffpa::ffpa_bwd_kernel<Tr, kKeys, ffpa::BwdBreak::kNone, kLoad>(*g_bwd, g_bwd_maps);
}

// The simt kernel and the non-finite pre-pass use no shared memory: memcheck (their
// stores) and synccheck are what applies.
void simt_body(const ffpa::FwdParams& p) { ffpa::ffpa_fwd_simt_kernel<D, T>(p); }
const ffpa::NonfiniteScan* g_scan = nullptr;
void scan_body(const ffpa::FwdParams&) { ffpa::ffpa_nonfinite_kernel(*g_scan); }

enum class Path { kMma, kMma4x2, kTma, kBwd, kBwdTma, kMasked, kMaskedTma, kSimt, kPrepass, kCute, kCuteTma };
const char* path_name(Path p) {
  switch (p) {
    case Path::kMma:
      return "mma";
    case Path::kMma4x2:
      return "mma-4x2";
    case Path::kTma:
      return "tma";
    case Path::kBwd:
      return "bwd";
    case Path::kBwdTma:
      return "bwd-tma";
    case Path::kMasked:
      return "masked";
    case Path::kMaskedTma:
      return "masked-tma";
    case Path::kSimt:
      return "simt";
    case Path::kCute:
      return "cute";
    case Path::kCuteTma:
      return "cute_tma";
    case Path::kPrepass:
      return "nonfinite-prepass";
  }
  return "?";
}
struct Run {
  Path path;
  bool causal;
  int nq, nkv;
  bool short_output = false;  // the output registered one row short (a store past its buffer)
};

bool run_bwd(const Run& r, unsigned long seed);

// One launch under the sanitizer; returns whether the output is finite where written (a
// clean run must also compute something).
bool run(const Run& r, unsigned long seed) {
  if (r.path == Path::kBwd || r.path == Path::kBwdTma) return run_bwd(r, seed);
  const int hq = 2, hkv = 1, B = 1;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](int h, int n) {
    std::vector<T> m(static_cast<size_t>(B) * h * n * D);
    for (T& x : m) x = ffpa::ElemTraits<T>::from_float(dist(rng));
    return m;
  };
  std::vector<T> q = make(hq, r.nq), k = make(hkv, r.nkv), v = make(hkv, r.nkv);
  std::vector<T> o(q.size(), ffpa::from_bits<T>(0xffff));
  std::vector<float> lse(static_cast<size_t>(B) * hq * r.nq, NAN);
  emu::g_ranges = {{reinterpret_cast<const unsigned char*>(q.data()), q.size() * 2},
                   {reinterpret_cast<const unsigned char*>(k.data()), k.size() * 2},
                   {reinterpret_cast<const unsigned char*>(v.data()), v.size() * 2}};
  ffpa::FwdParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.lse = lse.data();
  p.q_batch_stride = int64_t(hq) * r.nq * D, p.q_head_stride = int64_t(r.nq) * D, p.q_row_stride = D;
  p.k_batch_stride = int64_t(hkv) * r.nkv * D, p.k_head_stride = int64_t(r.nkv) * D, p.k_row_stride = D;
  p.v_batch_stride = p.k_batch_stride, p.v_head_stride = p.k_head_stride, p.v_row_stride = D;
  p.o_batch_stride = p.q_batch_stride, p.o_head_stride = p.q_head_stride, p.o_row_stride = D;
  p.lse_batch_stride = int64_t(hq) * r.nq, p.lse_head_stride = r.nq, p.lse_row_stride = 1;
  p.b = B, p.hq = hq, p.hkv = hkv, p.nq = r.nq, p.nkv = r.nkv, p.h_ratio = hq / hkv;
  p.scale = 1.f / std::sqrt(float(D));
  p.scale_log2 = p.scale * 1.4426950408889634f;
  p.causal = r.causal;
  p.causal_offset = r.nkv - r.nq;
  p.head_dim = D;
  p.accum = ffpa::Accum::kFp32;
  // Masked paths: a 20-key window left of the bottom-right diagonal, and only the first
  // nkv - 30 keys used (seqused_k: the TMA feed zeroes the tile rows past them).
  const int used_k[1] = {r.nkv - 30};
  if (r.path == Path::kMasked || r.path == Path::kMaskedTma) {
    p.mask.window_left = 20, p.mask.window_right = 0;
    p.mask.diag_bottom_right = true;
    p.mask.seqused_k = used_k;
  }
  emu::san_clear_outputs();
  emu::san_register_output(o.data(), (o.size() - (r.short_output ? D : 0)) * 2);
  emu::san_register_output(lse.data(), lse.size() * 4);
  const emu::Dim3 grid{unsigned((r.nq + Traits::kBlockM - 1) / Traits::kBlockM), unsigned(hq), unsigned(B)};
  if (r.path == Path::kMma) {
    emu::san_enable("ffpa_fwd_kernel<D=64, fp16, cp.async>", seed);
    emu::launch(&mma_body, p, grid, Traits::kNThreads, Traits::kSmemBytes);
  } else if (r.path == Path::kCute || r.path == Path::kCuteTma) {
    // The CuTe kernel (its own instrumented translation unit, emulate_cute.h).
    const bool tma = r.path == Path::kCuteTma;
    emu::san_enable(tma ? "ffpa_fwd_cute_kernel<D=64, fp16, TMA>" : "ffpa_fwd_cute_kernel<D=64, fp16, cp.async>", seed);
    emu::sanitize_cute_d64(tma, B, hq, r.nq, p);
  } else if (r.path == Path::kSimt) {
    constexpr int R = ffpa::FwdSimtTraits::kRowsPerBlock;
    emu::san_enable("ffpa_fwd_simt_kernel<D=64, fp16>", seed);
    emu::launch(&simt_body, p, {unsigned((r.nq + R - 1) / R), unsigned(hq), unsigned(B)},
                ffpa::FwdSimtTraits::kNThreads, 0);
  } else if (r.path == Path::kPrepass) {
    // The pass over q, k and v as api.cu runs it for causal calls, with a NaN planted in
    // head 1 of q (its flag is the one store), and the flags' buffer registered (one
    // flag short with short_output).
    q[(static_cast<size_t>(1) * r.nq + 3) * D + 5] = ffpa::from_bits<T>(0x7e00);
    std::vector<int> flags(static_cast<size_t>(B) * hq, 0);
    ffpa::NonfiniteScan scan;
    const int64_t q_shape[4] = {B, hq, r.nq, D}, kv_shape[4] = {B, hkv, r.nkv, D};
    const int64_t q_stride[4] = {p.q_batch_stride, p.q_head_stride, D, 1};
    const int64_t kv_stride[4] = {p.k_batch_stride, p.k_head_stride, D, 1};
    scan.add(p.q, q_shape, q_stride);
    scan.add(p.k, kv_shape, kv_stride);
    scan.add(p.v, kv_shape, kv_stride);
    scan.hq = hq, scan.h_ratio = hq / hkv, scan.d = D, scan.exp_mask = 0x7c00;
    scan.flags = flags.data();
    g_scan = &scan;
    emu::san_clear_outputs();
    emu::san_register_output(flags.data(), (flags.size() - (r.short_output ? 1 : 0)) * sizeof(int));
    emu::san_enable("ffpa_nonfinite_kernel (fp16)", seed);
    emu::launch(&scan_body, p, {unsigned(scan.grid_x()), unsigned(scan.total_heads), unsigned(B)},
                ffpa::NonfiniteScan::kNThreads, 0);
    emu::san_disable();
    g_scan = nullptr;
    return flags[0] == 0 && flags[1] == 1;  // the pass found the planted NaN, and only it
  } else if (r.path == Path::kMasked) {
    static_assert(MaskedCp::kBlockM == Traits::kBlockM && MaskedTma::kBlockM == Traits::kBlockM, "one grid");
    emu::san_enable("ffpa_fwd_kernel<D=64, fp16, cp.async, masked>", seed);
    emu::launch(&masked_body, p, grid, MaskedCp::kNThreads, MaskedCp::kSmemBytes);
  } else if (r.path == Path::kMaskedTma) {
    g_maps.q = emu::encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, MaskedTma::kBlockM));
    g_maps.k = emu::encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, MaskedTma::kBlockN));
    g_maps.v = emu::encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, MaskedTma::kBlockN));
    emu::san_enable("ffpa_fwd_kernel<D=64, fp16, TMA, masked>", seed);
    emu::launch(&masked_tma_body, p, grid, MaskedTma::kNThreads, MaskedTma::kSmemBytesTma);
  } else if (r.path == Path::kMma4x2) {
    static_assert(Traits4x2::kBlockM == Traits::kBlockM, "one grid for both layouts");
    emu::san_enable("ffpa_fwd_kernel<D=64, fp16, cp.async, 4x2 warps>", seed);
    emu::launch(&mma4x2_body, p, grid, Traits4x2::kNThreads, Traits4x2::kSmemBytes);
  } else {
    g_maps.q = emu::encode_tiled(p.q, ffpa::tma_geometry(p, ffpa::TmaOperand::kQ, Traits::kBlockM));
    g_maps.k = emu::encode_tiled(p.k, ffpa::tma_geometry(p, ffpa::TmaOperand::kK, Traits::kBlockN));
    g_maps.v = emu::encode_tiled(p.v, ffpa::tma_geometry(p, ffpa::TmaOperand::kV, Traits::kBlockN));
    emu::san_enable("ffpa_fwd_kernel<D=64, fp16, TMA>", seed);
    emu::launch(&tma_body, p, grid, Traits::kNThreads, Traits::kSmemBytesTma);
  }
  emu::san_disable();
  for (const T& x : o)
    if (!std::isfinite(ffpa::ElemTraits<T>::to_float(x))) return false;
  return true;
}

// The backward's three launches (bwd_launch_template.cuh's order) on random Q, K, V, dO
// and O with an LSE that keeps P finite (the sanitizer checks accesses, not values).
bool run_bwd(const Run& r, unsigned long seed) {
  const int hq = 2, hkv = 1, B = 1;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](int h, int n) {
    std::vector<T> m(static_cast<size_t>(B) * h * n * D);
    for (T& x : m) x = ffpa::ElemTraits<T>::from_float(dist(rng));
    return m;
  };
  std::vector<T> q = make(hq, r.nq), k = make(hkv, r.nkv), v = make(hkv, r.nkv), dout = make(hq, r.nq),
                 o = make(hq, r.nq);
  std::vector<float> lse(static_cast<size_t>(B) * hq * r.nq, 8.f);
  const T poison = ffpa::from_bits<T>(0xffff);
  std::vector<T> dq(q.size(), poison), dk(k.size(), poison), dv(v.size(), poison);
  std::vector<float> ws(size_t(ffpa::bwd_workspace_floats(B, hq, r.nq)), NAN);
  auto bytes = [](const auto& vec) { return vec.size() * sizeof(vec[0]); };
  emu::g_ranges = {{reinterpret_cast<const unsigned char*>(q.data()), bytes(q)},
                   {reinterpret_cast<const unsigned char*>(k.data()), bytes(k)},
                   {reinterpret_cast<const unsigned char*>(v.data()), bytes(v)},
                   {reinterpret_cast<const unsigned char*>(dout.data()), bytes(dout)}};
  ffpa::BwdParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.dout = dout.data(), p.lse = lse.data();
  p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data(), p.workspace = ws.data();
  const int64_t q_bs = int64_t(hq) * r.nq * D, q_hs = int64_t(r.nq) * D;
  p.q_batch_stride = q_bs, p.q_head_stride = q_hs, p.q_row_stride = D;
  p.do_batch_stride = q_bs, p.do_head_stride = q_hs, p.do_row_stride = D;
  p.dq_batch_stride = q_bs, p.dq_head_stride = q_hs, p.dq_row_stride = D;
  p.o_batch_stride = q_bs, p.o_head_stride = q_hs, p.o_row_stride = D;
  p.k_batch_stride = int64_t(hkv) * r.nkv * D, p.k_head_stride = int64_t(r.nkv) * D, p.k_row_stride = D;
  p.v_batch_stride = p.k_batch_stride, p.v_head_stride = p.k_head_stride, p.v_row_stride = D;
  p.dk_batch_stride = p.k_batch_stride, p.dk_head_stride = p.k_head_stride, p.dk_row_stride = D;
  p.dv_batch_stride = p.k_batch_stride, p.dv_head_stride = p.k_head_stride, p.dv_row_stride = D;
  p.lse_batch_stride = int64_t(hq) * r.nq, p.lse_head_stride = r.nq, p.lse_row_stride = 1;
  p.b = B, p.hq = hq, p.hkv = hkv, p.nq = r.nq, p.nkv = r.nkv, p.head_dim = D, p.h_ratio = hq / hkv;
  p.scale = 1.f / std::sqrt(float(D));
  p.scale_log2 = p.scale * 1.4426950408889634f;
  p.causal = r.causal;
  p.mask.diag_bottom_right = r.causal;
  g_bwd = &p;
  emu::san_clear_outputs();
  emu::san_register_output(dq.data(), bytes(dq));
  emu::san_register_output(dk.data(), bytes(dk) - (r.short_output ? D * sizeof(T) : 0));
  emu::san_register_output(dv.data(), bytes(dv));
  emu::san_register_output(ws.data(), bytes(ws));
  const ffpa::FwdParams unused;
  constexpr int R = ffpa::BwdPreTraits::kRowsPerBlock;
  const emu::Dim3 dkv_grid{unsigned((r.nkv + DkvTraits::kBlockM - 1) / DkvTraits::kBlockM), unsigned(hkv), unsigned(B)};
  const emu::Dim3 dq_grid{unsigned((r.nq + DqTraits::kBlockM - 1) / DqTraits::kBlockM), unsigned(hq), unsigned(B)};
  emu::san_enable("ffpa_bwd_preprocess_kernel<D=64, fp16>", seed);
  emu::launch(&bwd_pre_body, unused, {unsigned((r.nq + R - 1) / R), unsigned(hq), unsigned(B)},
              ffpa::BwdPreTraits::kNThreads, 0);
  if (r.path == Path::kBwdTma) {
    auto encode = [&](int box_q, int box_kv) {
      g_bwd_maps.q = emu::encode_tiled(p.q, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kQ, box_q));
      g_bwd_maps.dout = emu::encode_tiled(p.dout, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kDout, box_q));
      g_bwd_maps.k = emu::encode_tiled(p.k, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kK, box_kv));
      g_bwd_maps.v = emu::encode_tiled(p.v, ffpa::bwd_tma_geometry(p, ffpa::BwdTmaOperand::kV, box_kv));
    };
    encode(DkvTraits::kBlockN, DkvTraits::kBlockM);
    emu::san_enable("ffpa_bwd_kernel<D=64, fp16, dK/dV, TMA>", seed);
    emu::launch(&bwd_body<DkvTraits, true, ffpa::Load::kTma>, unused, dkv_grid, DkvTraits::kNThreads,
                DkvTraits::kSmemBytesTma);
    encode(DqTraits::kBlockM, DqTraits::kBlockN);
    emu::san_enable("ffpa_bwd_kernel<D=64, fp16, dQ, TMA>", seed);
    emu::launch(&bwd_body<DqTraits, false, ffpa::Load::kTma>, unused, dq_grid, DqTraits::kNThreads,
                DqTraits::kSmemBytesTma);
  } else {
    emu::san_enable("ffpa_bwd_kernel<D=64, fp16, dK/dV, cp.async>", seed);
    emu::launch(&bwd_body<DkvTraits, true, ffpa::Load::kCpAsync>, unused, dkv_grid, DkvTraits::kNThreads,
                DkvTraits::kSmemBytes);
    emu::san_enable("ffpa_bwd_kernel<D=64, fp16, dQ, cp.async>", seed);
    emu::launch(&bwd_body<DqTraits, false, ffpa::Load::kCpAsync>, unused, dq_grid, DqTraits::kNThreads,
                DqTraits::kSmemBytes);
  }
  emu::san_disable();
  for (const auto* g : {&dq, &dk, &dv})
    for (const T& x : *g)
      if (!std::isfinite(ffpa::ElemTraits<T>::to_float(x))) return false;
  return true;
}

struct Breakage {
  const char* name;
  Run run;
  emu::Break br;
  int site;
};
// Each models one classic first-GPU-run bug; --want names the checker that must report it.
const Breakage kBreakages[] = {
    {"mma-no-syncthreads", {Path::kMma, false, 100, 100}, emu::Break::kSkipSync, 0},
    {"mma-read-before-cp-wait", {Path::kMma, false, 100, 100}, emu::Break::kCpNoWait, -1},
    {"mma-divergent-syncthreads", {Path::kMma, false, 100, 100}, emu::Break::kDivergentSync, 0},
    {"mma4x2-no-softmax-syncthreads", {Path::kMma4x2, false, 100, 100}, emu::Break::kSkipSync, 1},
    {"mma-no-zero-fill", {Path::kMma, false, 100, 100}, emu::Break::kNoZeroFill, -1},
    {"mma-store-past-output", {Path::kMma, false, 100, 100, true}, emu::Break::kNone, -1},
    {"tma-no-pipeline-syncthreads", {Path::kTma, false, 100, 100}, emu::Break::kSkipSync, 1},
    {"tma-no-arrive", {Path::kTma, false, 100, 100}, emu::Break::kNoArrive, -1},
    {"tma-wrong-parity", {Path::kTma, false, 100, 100}, emu::Break::kWrongParity, -1},
    {"cute-no-syncthreads", {Path::kCute, true, 100, 130}, emu::Break::kSkipSync, 0},
    {"cute-tma-no-pipeline-syncthreads", {Path::kCuteTma, true, 100, 130}, emu::Break::kSkipSync, 1},
    {"cute-read-before-cp-wait", {Path::kCute, true, 100, 130}, emu::Break::kCpNoWait, -1},
    {"simt-store-past-output", {Path::kSimt, true, 40, 130, true}, emu::Break::kNone, -1},
    {"prepass-store-past-flags", {Path::kPrepass, true, 100, 130, true}, emu::Break::kNone, -1},
    {"masked-tma-no-tail-syncthreads", {Path::kMaskedTma, true, 100, 130}, emu::Break::kSkipSync, 2},
    {"masked-no-pipeline-syncthreads", {Path::kMasked, true, 100, 130}, emu::Break::kSkipSync, 0},
    // The backward's barriers in order of first arrival (cp.async: after the first column
    // slot's wait, after the second's, after dS is published; TMA: the mbarrier init first).
    {"bwd-no-first-slot-syncthreads", {Path::kBwd, true, 70, 100}, emu::Break::kSkipSync, 0},
    {"bwd-no-second-slot-syncthreads", {Path::kBwd, true, 70, 100}, emu::Break::kSkipSync, 1},
    {"bwd-no-ds-publish-syncthreads", {Path::kBwd, true, 70, 100}, emu::Break::kSkipSync, 2},
    {"bwd-read-before-cp-wait", {Path::kBwd, true, 70, 100}, emu::Break::kCpNoWait, -1},
    {"bwd-store-past-dk", {Path::kBwd, true, 70, 100, true}, emu::Break::kNone, -1},
    {"bwd-tma-no-first-slot-syncthreads", {Path::kBwdTma, true, 70, 100}, emu::Break::kSkipSync, 1},
    {"bwd-tma-no-second-slot-syncthreads", {Path::kBwdTma, true, 70, 100}, emu::Break::kSkipSync, 2},
    {"bwd-tma-no-ds-publish-syncthreads", {Path::kBwdTma, true, 70, 100}, emu::Break::kSkipSync, 3},
    {"bwd-tma-wrong-parity", {Path::kBwdTma, true, 70, 100}, emu::Break::kWrongParity, -1},
};

int tool_exit(const std::string& tool) {
  if (tool == "racecheck") return emu::kRaceCheckExit;
  if (tool == "initcheck") return emu::kInitCheckExit;
  if (tool == "synccheck") return emu::kSyncCheckExit;
  if (tool == "memcheck") return emu::kMemCheckExit;
  return -1;
}

int usage() {
  std::fprintf(stderr,
               "usage: ffpa_sanitize_kernels --clean --expect N\n"
               "       ffpa_sanitize_kernels --break NAME --want racecheck|initcheck|synccheck|memcheck\n"
               "breakages:");
  for (const Breakage& b : kBreakages) std::fprintf(stderr, " %s", b.name);
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string brk, want;
  bool clean = false;
  long seeds = 1, only_seed = -1, site = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--clean") clean = true;
    else if (a == "--break" && i + 1 < argc) brk = argv[++i];
    else if (a == "--want" && i + 1 < argc) want = argv[++i];
    else if (a == "--seeds" && i + 1 < argc) seeds = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--site" && i + 1 < argc) site = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc) only_seed = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--expect" && i + 1 < argc) emu::g_expect_cases = std::strtol(argv[++i], nullptr, 10);
    else return usage();
  }
  // The emulator's fp16 table fills lazily on first use: fill it here, outside the checked
  // launches (its stores are the model's, not the kernel's).
  (void)ffpa::half_table();
  emu::g_cp_late = true;  // copies land at their wait: a read before it sees unlanded bytes
  if (clean == !brk.empty() || seeds < 1 || only_seed < -1) return usage();
  if (clean) {
    const Run runs[] = {
        {Path::kMma, false, 100, 100},    {Path::kMma, true, 100, 100},    {Path::kMma, true, 40, 130},
        {Path::kMma4x2, false, 100, 100}, {Path::kMma4x2, true, 40, 130},
        {Path::kTma, false, 100, 100},    {Path::kTma, true, 100, 100},    {Path::kTma, true, 40, 130},
        {Path::kMasked, true, 100, 130},  {Path::kMaskedTma, true, 100, 130},
        {Path::kSimt, true, 40, 130},     {Path::kPrepass, true, 100, 130},
        {Path::kCute, true, 100, 130},    {Path::kCuteTma, true, 100, 130},
        {Path::kBwd, false, 70, 100},     {Path::kBwd, true, 70, 100},
        {Path::kBwdTma, false, 70, 100},  {Path::kBwdTma, true, 70, 100},
    };
    long total = 0, bad = 0;
    for (long s = 0; s < seeds; ++s)
      for (const Run& r : runs) {
        const unsigned long seed = static_cast<unsigned long>(only_seed >= 0 ? only_seed : s);
        ++total;
        const bool ok = run(r, seed);  // a report exits the process with its checker's code
        std::printf("[%s] %s %s nq=%d nkv=%d seed %lu: %s\n", ok ? "PASS" : "FAIL", path_name(r.path),
                    r.causal ? "causal" : "full", r.nq, r.nkv, seed, ok ? "no report" : "non-finite output");
        bad += !ok;
      }
    return emu::verdict("sanitized runs", total, bad, "failed");
  }
  const int code = tool_exit(want);
  if (code < 0) return usage();
  const Breakage* b = nullptr;
  for (const Breakage& x : kBreakages)
    if (brk == x.name) b = &x;
  if (!b) return usage();
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    emu::g_break = b->br;
    emu::g_break_site = site >= 0 ? static_cast<int>(site) : b->site;
    run(b->run, static_cast<unsigned long>(only_seed >= 0 ? only_seed : 0));
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const int got = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const bool caught = got == code;
  std::printf("[%s] %s -> exit %d, %s wants %d\n", caught ? "CAUGHT" : "MISSED", b->name, got, want.c_str(), code);
  return caught ? 0 : 1;
}
