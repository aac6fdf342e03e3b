// The CPU emulator's device: the grid runner (one fiber per CUDA thread, blocks in turn),
// the cp.async, mbarrier and TMA models behind emu/ffpa/utils.cuh and tma.cuh, and the
// model of cuTensorMapEncodeTiled. Shared by the emulator's test drivers
// (csrc/tests/emulate_*.cpp) and the emulated-device build of the library (csrc/emulated).
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "emu_cute.h"
#include "emu_state.h"
#include "ffpa/tma_geometry.h"

namespace ffpa {
alignas(1024) unsigned char smem_raw[256 * 1024];
}

namespace emu {

Dim3 g_block_idx, g_grid_dim;
ffpa::TmaMaps g_tma_maps;
unsigned char* g_smem = ffpa::smem_raw;
size_t g_smem_bytes = 0;
bool g_cp_late = false;
std::vector<Range> g_ranges;

bool global_readable(const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (const Range& r : g_ranges)
    if (c >= r.p && c + n <= r.p + r.n) {
      r.read += n;
      return true;
    }
  return false;
}

void (*g_fault_handler)(const char* what) = nullptr;

[[noreturn]] void fail(const char* what) {
  if (g_fault_handler != nullptr) g_fault_handler(what);
  std::fprintf(stderr, "EMULATION FAULT: %s (block %u,%u,%u)\n", what, g_block_idx.x, g_block_idx.y, g_block_idx.z);
  std::exit(3);
}

Break g_break = Break::kNone;  // emu_state.h

struct Copy {
  void* dst;
  const void* src;
  int size;
};

// The fiber switch. glibc's swapcontext saves and restores the signal mask with a system
// call on every switch, and the emulator switches twice per fiber and warp-collective
// instruction: on x86-64 a switch of the callee-saved registers and the stack pointer
// (what the System V ABI leaves to the callee; the kernels change neither the floating-point
// control words nor the signal mask) does the same without entering the kernel. Other
// hosts keep ucontext.
#if defined(__x86_64__)
extern "C" void ffpa_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .pushsection .text
  .p2align 4
  .globl ffpa_emu_switch
  .hidden ffpa_emu_switch
  .type ffpa_emu_switch, @function
ffpa_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ffpa_emu_switch, .-ffpa_emu_switch
  .popsection
)");
struct Context {
  void* sp = nullptr;
};
void switch_context(Context& from, Context& to) { ffpa_emu_switch(&from.sp, to.sp); }
// A fresh context that starts entry() on [stack, stack + size) when switched to: the six
// registers ffpa_emu_switch pops, then entry as its return address, with the stack
// aligned as a call leaves it (16-byte aligned before the call pushed the return address).
void make_context(Context& c, char* stack, size_t size, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t(15);
  auto* sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                               // entry's own return address: it never returns
  *--sp = reinterpret_cast<void*>(entry);        // popped by ret
  for (int i = 0; i < 6; ++i) *--sp = nullptr;   // r15 r14 r13 r12 rbx rbp
  c.sp = sp;
}
#else
struct Context {
  ucontext_t ctx;
};
void switch_context(Context& from, Context& to) { swapcontext(&from.ctx, &to.ctx); }
void make_context(Context& c, char* stack, size_t size, void (*entry)()) {
  getcontext(&c.ctx);
  c.ctx.uc_stack.ss_sp = stack;
  c.ctx.uc_stack.ss_size = size;
  c.ctx.uc_link = nullptr;
  makecontext(&c.ctx, entry, 0);
}
#endif

struct Fiber {
  Context ctx;
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

Context g_sched;
std::vector<Fiber> g_fibers;
std::vector<Barrier> g_warp_bars;
std::vector<WarpSlots> g_slots;
Barrier g_block_bar;
int g_cur = 0;
long g_progress = 0;

const Dim3& thread_idx() { return g_fibers[g_cur].tid; }
int lane() { return g_cur & 31; }
WarpSlots& warp_slots() { return g_slots[g_cur >> 5]; }

void yield() { switch_context(g_fibers[g_cur].ctx, g_sched); }

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
  if (g_break == Break::kCpNoWait) return;
  Fiber& f = g_fibers[g_cur];
  while (static_cast<int>(f.groups.size()) > pending) {
    for (const Copy& c : f.groups.front()) land(c);
    f.groups.erase(f.groups.begin());
  }
}

// ---- TMA and mbarrier models (emu/ffpa/tma.cuh) ----------------------------------

struct MBar {
  int expected = 0;    // arrivals per phase (mbarrier.init count)
  int pending = 0;     // arrivals still missing in the current phase
  int64_t tx = 0;      // transaction bytes expected and not yet completed
  uint32_t phase = 0;  // completed phases; the current phase's parity is phase & 1
  int init_thread = -1;
  long init_gen = 0;   // the block barrier's generation at init
  bool fenced = false;
};
std::vector<std::pair<uint64_t*, MBar>> g_mbars;

struct TmaCopy {
  unsigned char* dst;
  std::vector<unsigned char> bytes;
  uint64_t* bar;
};
std::vector<TmaCopy> g_tma_in_flight;

MBar& mbar_at(uint64_t* bar, const char* what) {
  for (auto& [addr, m] : g_mbars)
    if (addr == bar) return m;
  static char words[160];
  std::snprintf(words, sizeof(words), "%s on an mbarrier that was never initialised", what);
  fail(words);
}

void check_smem(const void* p, size_t n, size_t align, const char* what) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < g_smem || c + n > g_smem + g_smem_bytes) fail(what);
  if (reinterpret_cast<uintptr_t>(p) % align != 0) fail(what);
}

void mbar_complete_phase_if_done(MBar& m) {
  if (m.pending == 0 && m.tx == 0) {
    ++m.phase;
    m.pending = m.expected;
    ++g_progress;
  }
}

void mbar_init(uint64_t* bar, uint32_t count) {
  check_smem(bar, 8, 8, "mbarrier outside shared memory or not 8-byte aligned");
  if (count == 0) fail("mbarrier.init with count 0");
  for (auto& [addr, m] : g_mbars)
    if (addr == bar) fail("mbarrier initialised twice");
  MBar m;
  m.expected = m.pending = static_cast<int>(count);
  m.init_thread = g_cur;
  m.init_gen = g_block_bar.gen;
  g_mbars.emplace_back(bar, m);
}

void fence_barrier_init() {
  if (g_break == Break::kNoFence) return;
  for (auto& [addr, m] : g_mbars)
    if (m.init_thread == g_cur) m.fenced = true;
}

void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  MBar& m = mbar_at(bar, "mbarrier.arrive.expect_tx");
  if (g_break == Break::kNoExpectTx) bytes = 0;
  if (g_break == Break::kShortExpectTx) bytes /= 2;
  m.tx += bytes;
  if (--m.pending < 0) fail("more arrivals on an mbarrier phase than its init count");
  mbar_complete_phase_if_done(m);
}

void mbar_complete_tx(uint64_t* bar, size_t bytes) {
  MBar& m = mbar_at(bar, "complete_tx");
  if (!m.fenced) fail("TMA completed on an mbarrier without fence.mbarrier_init after its init");
  if (m.tx < static_cast<int64_t>(bytes))
    fail("complete_tx beyond the bytes the phase expects (missing or short expect_tx)");
  m.tx -= static_cast<int64_t>(bytes);
  mbar_complete_phase_if_done(m);
}

void land_tma(size_t i) {
  TmaCopy c = std::move(g_tma_in_flight[i]);
  g_tma_in_flight.erase(g_tma_in_flight.begin() + static_cast<long>(i));
  std::memcpy(c.dst, c.bytes.data(), c.bytes.size());
  mbar_complete_tx(c.bar, c.bytes.size());
}

void mbar_wait(uint64_t* bar, uint32_t parity) {
  if (g_break == Break::kNoWait) return;
  if (g_break == Break::kWrongParity) parity ^= 1u;
  MBar& m0 = mbar_at(bar, "mbarrier.try_wait");
  if (m0.init_thread != g_cur && m0.init_gen == g_block_bar.gen)
    fail("mbarrier waited on by another thread before a block barrier made its init visible");
  for (;;) {
    MBar& m = mbar_at(bar, "mbarrier.try_wait");
    // The phase with this parity has completed once the current phase's parity differs.
    if ((m.phase & 1u) != (parity & 1u)) return;
    // Late landing: the copies this barrier tracks complete while someone waits.
    bool landed = false;
    for (size_t i = 0; i < g_tma_in_flight.size();) {
      if (g_tma_in_flight[i].bar == bar) {
        land_tma(i);
        landed = true;
      } else {
        ++i;
      }
    }
    if (!landed) yield();
  }
}

void tma_load(void* smem_dst, const CUtensorMap* map_bytes, const int (&c)[4], uint64_t* bar) {
  if (map_bytes == nullptr) fail("cp.async.bulk.tensor without a tensor map");
  const TensorMapRecord rec = read_map(map_bytes);
  const TensorMapRecord* map = &rec;
  if (!map->encoded) fail("cp.async.bulk.tensor with a tensor map that was never encoded");
  // The swizzle pattern repeats every 8 rows of the span: 1024 / 512 / 256 bytes, where
  // the destination must start.
  check_smem(smem_dst, 128, map->swizzle_bytes * 8,
             "TMA destination outside shared memory or not aligned (8 x the swizzle span: 1024 bytes with the "
             "128-byte swizzle)");
  MBar& m = mbar_at(bar, "cp.async.bulk.tensor");
  (void)m;
  const size_t eb = map->elem_bytes;
  const size_t row_bytes = map->box[0] * eb;
  const size_t rows = size_t(map->box[1]) * map->box[2] * map->box[3];
  TmaCopy copy{static_cast<unsigned char*>(smem_dst), std::vector<unsigned char>(row_bytes * rows), bar};
  for (const TmaCopy& other : g_tma_in_flight)
    if (copy.dst < other.dst + other.bytes.size() && other.dst < copy.dst + copy.bytes.size())
      fail("TMA into shared memory that a copy still in flight is writing (stage refilled before its wait)");
  check_smem(smem_dst, copy.bytes.size(), 1, "TMA box overflows shared memory");
  size_t r = 0;
  for (uint32_t i3 = 0; i3 < map->box[3]; ++i3)
    for (uint32_t i2 = 0; i2 < map->box[2]; ++i2)
      for (uint32_t i1 = 0; i1 < map->box[1]; ++i1, ++r) {
        const int64_t g1 = int64_t(c[1]) + i1, g2 = int64_t(c[2]) + i2, g3 = int64_t(c[3]) + i3;
        const bool row_in = g1 >= 0 && g1 < int64_t(map->dims[1]) && g2 >= 0 && g2 < int64_t(map->dims[2]) &&
                            g3 >= 0 && g3 < int64_t(map->dims[3]);
        for (uint32_t e = 0; e < map->box[0]; ++e) {
          const int64_t g0 = int64_t(c[0]) + e;
          uint16_t v = 0;  // out of bounds: zero (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
          if (row_in && g0 >= 0 && g0 < int64_t(map->dims[0])) {
            const auto* src = static_cast<const unsigned char*>(map->base) + g0 * eb + g1 * map->strides[0] +
                              g2 * map->strides[1] + g3 * map->strides[2];
            if (!global_readable(src, eb)) fail("TMA box reads outside the input arrays");
            std::memcpy(&v, src, eb);
          }
          // The swizzle (the destination is aligned to its period): address bits [4, 4 + B)
          // XOR bits [7, 7 + B), B = log2(span / 16); with 128-byte rows, 16-byte chunk j
          // of row r lands in chunk j ^ (r % 8), with 64-byte rows in j ^ (r / 2 % 4).
          size_t off = r * row_bytes + e * eb;
          if (g_break != Break::kNoSwizzle) {
            const size_t mask = map->swizzle_bytes / 16 - 1;
            off ^= ((off >> 7) & mask) << 4;
          }
          std::memcpy(copy.bytes.data() + off, &v, eb);
        }
      }
  ++g_progress;
  g_tma_in_flight.push_back(std::move(copy));
  if (!g_cp_late) land_tma(g_tma_in_flight.size() - 1);
}

void check_no_tma_in_flight(const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (const TmaCopy& t : g_tma_in_flight)
    if (c < t.dst + t.bytes.size() && t.dst < c + n)
      fail("shared memory read while a TMA copy into it is in flight (read before its mbarrier phase completed)");
}

// cuTensorMapEncodeTiled's checks on what the kernels use (rank 4, 2- or 1-byte elements,
// the 128-, 64- or 32-byte swizzle with the box row as wide as it, no interleave), then
// the record.
const char* tensor_map_refusal(const void* base, const ffpa::TmaGeometry& g) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return "tensor map: global address not 16-byte aligned";
  for (int i = 0; i < 4; ++i)
    if (g.dims[i] == 0 || g.dims[i] > (uint64_t(1) << 32)) return "tensor map: a dim is 0 or above 2^32";
  for (int i = 0; i < 3; ++i)
    if (g.strides[i] % 16 != 0 || g.strides[i] >= (uint64_t(1) << 40))
      return "tensor map: a stride is not a multiple of 16 bytes or not below 2^40";
  for (int i = 0; i < 4; ++i)
    if (g.box[i] == 0 || g.box[i] > 256) return "tensor map: a box dim is 0 or above 256";
  if (g.elem_bytes != 1 && g.elem_bytes != 2) return "tensor map: element size other than 1 or 2 bytes";
  if (g.swizzle_bytes != 128 && g.swizzle_bytes != 64 && g.swizzle_bytes != 32) return "tensor map: unknown swizzle";
  if (g.box[0] * g.elem_bytes > g.swizzle_bytes) return "tensor map: the inner box is wider than the swizzle span";
  return nullptr;
}

CUtensorMap encode_tiled(const void* base, const ffpa::TmaGeometry& g) {
  if (const char* why = tensor_map_refusal(base, g)) fail(why);
  TensorMapRecord m;
  m.base = base;
  for (int i = 0; i < 4; ++i) m.dims[i] = g.dims[i], m.box[i] = g.box[i];
  for (int i = 0; i < 3; ++i) m.strides[i] = g.strides[i];
  m.elem_bytes = g.elem_bytes;
  m.swizzle_bytes = g.swizzle_bytes;
  m.encoded = true;
  CUtensorMap out;
  write_map(&out, m);
  return out;
}

void (*g_body)(const ffpa::FwdParams&) = nullptr;
const ffpa::FwdParams* g_params = nullptr;

void fiber_main() {
  g_body(*g_params);
  g_fibers[g_cur].done = true;
  if (!g_fibers[g_cur].open.empty()) fail("cp.async copies never committed");
  switch_context(g_fibers[g_cur].ctx, g_sched);
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
        g_mbars.clear();
        g_tma_in_flight.clear();
        g_warp_bars.assign((threads + 31) / 32, Barrier{32, 0, 0});
        g_slots.assign((threads + 31) / 32, WarpSlots{});
        g_block_bar = Barrier{threads, 0, 0};
        for (int i = 0; i < threads; ++i) {
          Fiber& f = g_fibers[i];
          f.tid = {static_cast<unsigned>(i), 0, 0};
          if (f.stack.empty()) f.stack.resize(64 * 1024);
          make_context(f.ctx, f.stack.data(), f.stack.size(), fiber_main);
        }
        int live = threads;
        while (live > 0) {
          const long before = g_progress;
          live = 0;
          for (int i = 0; i < threads; ++i) {
            if (g_fibers[i].done) continue;
            g_cur = i;
            switch_context(g_sched, g_fibers[i].ctx);
            if (!g_fibers[i].done) ++live;
          }
          if (live > 0 && g_progress == before) fail("deadlock: threads wait at barriers that never complete");
        }
        // A warp that exits while its collective partners wait would show as deadlock;
        // a block barrier some threads skipped shows here.
        if (g_block_bar.count != 0) fail("__syncthreads not reached by every thread");
        if (!g_tma_in_flight.empty()) fail("the block exited with TMA copies in flight");
        for (auto& [addr, m] : g_mbars)
          if (m.tx != 0 || m.pending != m.expected) fail("the block exited with an mbarrier phase half done");
      }
}

}  // namespace emu
