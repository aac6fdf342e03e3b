// CPU emulation of the forward kernels (no GPU needed): the real kernel sources run
// with one fiber per CUDA thread, PTX instructions modelled from the ISA (emu/ffpa/
// utils.cuh), shared memory poisoned with NaN, cp.async either landing at issue or
// only at the wait_group that covers it (FFPA_EMU_CP=late), and every ldmatrix /
// cp.async address checked for range and 16-byte alignment. Results are compared
// with the fp32 host reference at the spec tolerances. This checks index arithmetic,
// fragment layouts, masking, the online softmax and the pipeline bookkeeping; it
// cannot see timing-dependent races beyond what the two landing modes expose.
//   ffpa_emulate_kernels [D ...]    (default: 64 128 320; ctest runs 64 320)
#include <ucontext.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_ref.h"
#include "ffpa/fwd_kernel_mma.cuh"
#include "ffpa/fwd_kernel_simt.cuh"

namespace ffpa {
alignas(128) unsigned char smem_raw[256 * 1024];
}

namespace emu {

Dim3 g_block_idx, g_grid_dim;
unsigned char* g_smem = ffpa::smem_raw;
size_t g_smem_bytes = 0;
bool g_cp_late = false;

struct Range {
  const unsigned char* p;
  size_t n;
};
std::vector<Range> g_ranges;

bool global_readable(const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (const Range& r : g_ranges)
    if (c >= r.p && c + n <= r.p + r.n) return true;
  return false;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "EMULATION FAULT: %s (block %u,%u,%u)\n", what, g_block_idx.x, g_block_idx.y, g_block_idx.z);
  std::exit(3);
}

struct Copy {
  void* dst;
  const void* src;
  int size;
};

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  Dim3 tid;
  bool done = false;
  std::vector<std::vector<Copy>> groups;  // committed, oldest first
  std::vector<Copy> open;                 // not yet committed
};

struct Barrier {
  int n = 0, count = 0;
  long gen = 0;
};

ucontext_t g_sched;
std::vector<Fiber> g_fibers;
std::vector<Barrier> g_warp_bars;
std::vector<WarpSlots> g_slots;
Barrier g_block_bar;
int g_cur = 0;
long g_progress = 0;

const Dim3& thread_idx() { return g_fibers[g_cur].tid; }
int lane() { return g_cur & 31; }
WarpSlots& warp_slots() { return g_slots[g_cur >> 5]; }

void yield() { swapcontext(&g_fibers[g_cur].ctx, &g_sched); }

void arrive(Barrier& b) {
  const long gen = b.gen;
  ++g_progress;
  if (++b.count == b.n) {
    b.count = 0;
    ++b.gen;
    return;
  }
  while (b.gen == gen) yield();
}

void syncthreads() { arrive(g_block_bar); }
void warp_sync() { arrive(g_warp_bars[g_cur >> 5]); }

void land(const Copy& c) {
  if (c.size == 16) std::memcpy(c.dst, c.src, 16);
  else std::memset(c.dst, 0, 16);
}

void cp_async(void* dst, const void* src, int src_size) {
  const auto* d = static_cast<unsigned char*>(dst);
  if (d < g_smem || d + 16 > g_smem + g_smem_bytes) fail("cp.async destination outside dynamic shared memory");
  if (reinterpret_cast<uintptr_t>(dst) % 16 || reinterpret_cast<uintptr_t>(src) % 16)
    fail("cp.async address not 16-byte aligned");
  if (src_size == 16 && !global_readable(src, 16)) fail("cp.async source outside the input arrays");
  Copy c{dst, src, src_size};
  if (g_cp_late) g_fibers[g_cur].open.push_back(c);
  else land(c);
}

void cp_commit() {
  Fiber& f = g_fibers[g_cur];
  f.groups.push_back(std::move(f.open));
  f.open.clear();
}

void cp_wait(int pending) {
  Fiber& f = g_fibers[g_cur];
  while (static_cast<int>(f.groups.size()) > pending) {
    for (const Copy& c : f.groups.front()) land(c);
    f.groups.erase(f.groups.begin());
  }
}

void (*g_body)(const ffpa::FwdParams&) = nullptr;
const ffpa::FwdParams* g_params = nullptr;

void fiber_main() {
  g_body(*g_params);
  g_fibers[g_cur].done = true;
  if (!g_fibers[g_cur].open.empty()) fail("cp.async copies never committed");
  swapcontext(&g_fibers[g_cur].ctx, &g_sched);
}

// Runs one kernel launch: every block in turn, its threads as fibers, round robin.
void launch(void (*body)(const ffpa::FwdParams&), const ffpa::FwdParams& p, Dim3 grid, int threads, size_t smem) {
  g_fibers.clear();
  g_body = body;
  g_params = &p;
  g_grid_dim = grid;
  g_smem_bytes = smem;
  if (smem > sizeof(ffpa::smem_raw)) fail("dynamic shared memory larger than the emulator's");
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        g_block_idx = {x, y, z};
        std::memset(ffpa::smem_raw, 0xff, sizeof(ffpa::smem_raw));  // NaN in fp16 and bf16
        // Fiber stacks are kept across blocks (the kernels need a few KiB each).
        if (static_cast<int>(g_fibers.size()) != threads) g_fibers.resize(threads);
        for (Fiber& f : g_fibers) f.done = false, f.groups.clear(), f.open.clear();
        g_warp_bars.assign((threads + 31) / 32, Barrier{32, 0, 0});
        g_slots.assign((threads + 31) / 32, WarpSlots{});
        g_block_bar = Barrier{threads, 0, 0};
        for (int i = 0; i < threads; ++i) {
          Fiber& f = g_fibers[i];
          f.tid = {static_cast<unsigned>(i), 0, 0};
          if (f.stack.empty()) f.stack.resize(64 * 1024);
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fiber_main, 0);
        }
        int live = threads;
        while (live > 0) {
          const long before = g_progress;
          live = 0;
          for (int i = 0; i < threads; ++i) {
            if (g_fibers[i].done) continue;
            g_cur = i;
            swapcontext(&g_sched, &g_fibers[i].ctx);
            if (!g_fibers[i].done) ++live;
          }
          if (live > 0 && g_progress == before) fail("deadlock: threads wait at barriers that never complete");
        }
        // A warp that exits while its collective partners wait would show as deadlock;
        // a block barrier some threads skipped shows here.
        if (g_block_bar.count != 0) fail("__syncthreads not reached by every thread");
      }
}

}  // namespace emu

namespace {

template <typename Traits>
void mma_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_mma_kernel<Traits>(p);
}
template <int D, typename T>
void simt_body(const ffpa::FwdParams& p) {
  ffpa::ffpa_fwd_simt_kernel<D, T>(p);
}

struct Case {
  int d;
  bool bf16;
  bool causal;
  int nq, nkv, hq, hkv;
  bool mma;
  int b = 1;
};

template <int D, typename T>
bool run_case(const Case& c, std::mt19937& rng) {
  using ET = ffpa::ElemTraits<T>;
  const int B = c.b;
  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](int H, int N, std::vector<float>& f, std::vector<T>& m) {
    f.resize(static_cast<size_t>(B) * H * N * D);
    m.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      m[i] = ET::from_float(dist(rng));
      f[i] = ET::to_float(m[i]);
    }
  };
  std::vector<float> q, k, v;
  std::vector<T> qm, km, vm;
  make(c.hq, c.nq, q, qm);
  make(c.hkv, c.nkv, k, km);
  make(c.hkv, c.nkv, v, vm);
  ffpa::ref::Problem pr;
  pr.b = B, pr.hq = c.hq, pr.hkv = c.hkv, pr.nq = c.nq, pr.nkv = c.nkv, pr.d = D, pr.causal = c.causal;
  pr.scale = 1.f / std::sqrt(static_cast<float>(D));
  std::vector<float> ref_o(q.size()), ref_lse(static_cast<size_t>(B) * c.hq * c.nq);
  ffpa::ref::attention(pr, q.data(), k.data(), v.data(), ref_o.data(), ref_lse.data());

  std::vector<T> om(qm.size(), T{0xffff});
  std::vector<float> lse(ref_lse.size(), NAN);
  // Inputs sit in arrays with no slack, so an out-of-range read is a fault.
  emu::g_ranges = {{reinterpret_cast<const unsigned char*>(qm.data()), qm.size() * 2},
                   {reinterpret_cast<const unsigned char*>(km.data()), km.size() * 2},
                   {reinterpret_cast<const unsigned char*>(vm.data()), vm.size() * 2}};
  ffpa::FwdParams p;
  p.q = qm.data(), p.k = km.data(), p.v = vm.data(), p.o = om.data(), p.lse = lse.data();
  p.q_batch_stride = int64_t(c.hq) * c.nq * D, p.q_head_stride = int64_t(c.nq) * D, p.q_row_stride = D;
  p.k_batch_stride = int64_t(c.hkv) * c.nkv * D, p.k_head_stride = int64_t(c.nkv) * D, p.k_row_stride = D;
  p.v_batch_stride = p.k_batch_stride, p.v_head_stride = p.k_head_stride, p.v_row_stride = D;
  p.o_batch_stride = p.q_batch_stride, p.o_head_stride = p.q_head_stride, p.o_row_stride = D;
  p.lse_batch_stride = int64_t(c.hq) * c.nq, p.lse_head_stride = c.nq, p.lse_row_stride = 1;
  p.b = B, p.hq = c.hq, p.hkv = c.hkv, p.nq = c.nq, p.nkv = c.nkv, p.h_ratio = c.hq / c.hkv;
  p.scale = pr.scale;
  p.scale_log2 = pr.scale * 1.4426950408889634f;
  p.causal = c.causal;
  if (c.mma) {
    using Traits = ffpa::DefaultFwdMmaTraits<D, T>;
    emu::launch(&mma_body<Traits>, p,
                {unsigned((c.nq + Traits::kBlockM - 1) / Traits::kBlockM), unsigned(c.hq), unsigned(B)},
                Traits::kNThreads, Traits::kSmemBytes);
  } else {
    constexpr int R = ffpa::FwdSimtTraits::kRowsPerBlock;
    emu::launch(&simt_body<D, T>, p, {unsigned((c.nq + R - 1) / R), unsigned(c.hq), unsigned(B)},
                ffpa::FwdSimtTraits::kNThreads, 0);
  }
  float out_err = 0.f, lse_err = 0.f, max_ref = 0.f;
  for (size_t i = 0; i < om.size(); ++i) {
    const float e = std::fabs(ET::to_float(om[i]) - ref_o[i]);
    out_err = std::isnan(e) ? INFINITY : std::max(out_err, e);
    max_ref = std::max(max_ref, std::fabs(ref_o[i]));
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    const float e = (std::isinf(ref_lse[i]) && lse[i] == ref_lse[i]) ? 0.f : std::fabs(lse[i] - ref_lse[i]);
    lse_err = std::isnan(e) ? INFINITY : std::max(lse_err, e);
  }
  const float tol = c.bf16 ? 5e-2f : 2e-2f;
  const bool ok = out_err <= tol && lse_err <= tol;
  std::printf("[%s] D=%d %s causal=%d B=%d Nq=%d Nkv=%d Hq=%d Hkv=%d impl=%s cp=%s out_err=%.3e rel_err=%.3e lse_err=%.3e\n",
              ok ? "PASS" : "FAIL", D, c.bf16 ? "bf16" : "fp16", c.causal, B, c.nq, c.nkv, c.hq, c.hkv,
              c.mma ? "mma" : "simt", emu::g_cp_late ? "late" : "early", out_err,
              max_ref > 0.f ? out_err / max_ref : out_err, lse_err);
  std::fflush(stdout);
  return ok;
}

template <int D>
bool run_dim(const Case& c, std::mt19937& rng) {
  return c.bf16 ? run_case<D, __nv_bfloat16>(c, rng) : run_case<D, __half>(c, rng);
}

// The head dims this emulator instantiates come from the release matrix at configure
// time (emu_head_dims.inc, generated by csrc/CMakeLists.txt), plus 576 for the 2x4
// warp layout.
bool dispatch(const Case& c, std::mt19937& rng) {
  switch (c.d) {
#define FFPA_EMU_HEAD_DIM(D) \
  case D:                    \
    return run_dim<D>(c, rng);
#include "emu_head_dims.inc"
#undef FFPA_EMU_HEAD_DIM
  }
  std::fprintf(stderr, "head dim %d is not in the emulator's list (%s)\n", c.d, FFPA_EMU_HEAD_DIMS_TEXT);
  std::exit(2);
}

}  // namespace

// --release D...: the release's coverage run (label slow): for every head dim, one fp16
// case (batch 2, causal, GQA 4:2, non-aligned Nq < Nkv) and one bf16 case (batch 2,
// non-causal, Nq > Nkv) on the MMA kernel, with cp.async completing late.
int run_release(const std::vector<int>& dims) {
  std::mt19937 rng(7);
  int failed = 0, total = 0;
  emu::g_cp_late = true;
  for (int d : dims) {
    Case fp16_case{d, false, true, 70, 100, 4, 2, true};
    fp16_case.b = 2;
    Case bf16_case{d, true, false, 90, 50, 2, 2, true};
    bf16_case.b = 2;
    for (const Case& c : {fp16_case, bf16_case}) {
      ++total;
      if (!dispatch(c, rng)) ++failed;
    }
  }
  std::printf("%d cases, %d failed\n", total, failed);
  return failed ? 1 : 0;
}

int main(int argc, char** argv) {
  std::vector<int> dims;
  bool release = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--release") == 0) release = true;
    else dims.push_back(std::atoi(argv[i]));
  }
  if (release) return run_release(dims);
  if (dims.empty()) dims = {64, 128, 320};
  std::mt19937 rng(42);
  int failed = 0, total = 0;
  for (int d : dims)
    for (bool late : {false, true})
      for (bool causal : {false, true})
        for (bool mma : {true, false}) {
          if (!mma && late) continue;  // the SIMT kernel has no cp.async
          emu::g_cp_late = late;
          // Non-aligned Nq / Nkv over several KV blocks with GQA; a KV length shorter
          // than one tile; Nq > Nkv (causal rows that see no key); one bf16 case.
          const Case cases[] = {
              {d, false, causal, 83, 141, 2, 1, mma},
              {d, false, causal, 19, 23, 1, 1, mma},
              {d, false, causal, 70, 40, 1, 1, mma},
              {d, true, causal, 64, 128, 2, 2, mma},
          };
          for (const Case& c : cases) {
            ++total;
            if (!dispatch(c, rng)) ++failed;
          }
        }
  std::printf("%d cases, %d failed\n", total, failed);
  return failed ? 1 : 0;
}
