// The CPU emulator's device: the grid runner (one fiber per CUDA thread, blocks in turn),
// the cp.async, mbarrier and TMA models behind emu/ffpa/utils.cuh and tma.cuh, and the
// model of cuTensorMapEncodeTiled. Shared by the emulator's test drivers
// (csrc/tests/emulate_*.cpp) and the emulated-device build of the library (csrc/emulated).
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu_cute.h"
#include "emu_san.h"
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
int g_break_site = -1;         // emu_state.h
SanHooks* g_san = nullptr;     // emu_san.h
unsigned long g_schedule_seed = 0;  // emu_san.h

struct Copy {
  void* dst;
  const void* src;
  int size;
  int ticket = -1;  // the sanitizer's record of the issue (emu_san.h)
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
  long committed = 0, acquired = 0;       // cp.async groups committed / waited for
  bool broke = false;                     // kDivergentSync: this fiber skipped its barrier
  // What the fiber waits on, for the deadlock report: a barrier's call site, or an
  // mbarrier (index in init order) and the parity it waits for.
  const void* wait_site = nullptr;
  int wait_mbar = -1;
  uint32_t wait_parity = 0;
};

struct Barrier {
  int n = 0, count = 0;
  long gen = 0;
  const void* site = nullptr;  // the call site of this generation's first arrival
  int first = -1;              // and its fiber
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
void preempt() {
  ++g_progress;  // the fiber can go on: not a deadlock sweep
  yield();
}

std::string where(const void* pc) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "pc %p", pc);
  return g_san ? g_san->where(pc) : std::string(buf);
}

[[noreturn]] void sync_fail(const char* what) {
  // The emulated device (csrc/emulated/runtime_emulated.cpp) turns a deadlock into the
  // launch's error like any other fault: its process must survive.
  if (g_fault_handler != nullptr) g_fault_handler(what);
  std::fprintf(stderr, "SYNCCHECK: %s (block %u,%u,%u)\n", what, g_block_idx.x, g_block_idx.y, g_block_idx.z);
  if (g_san) g_san->print_seed();
  std::exit(kSyncCheckExit);
}

// first: the lowest fiber of the barrier's group (block: 0, warp: 32 w).
void arrive(Barrier& b, const void* site, int first) {
  const long gen = b.gen;
  ++g_progress;
  if (b.count == 0) {
    b.site = site, b.first = g_cur;
  } else if (g_san && site != b.site && where(site) != where(b.site)) {
    // bar.sync counts arrivals, not call sites: threads at two different __syncthreads
    // (or warp collectives) complete one barrier together, the divergent-barrier bug
    // (synccheck). Call sites are compared by source line: the compiler may duplicate
    // one call site into several addresses.
    const std::string a = where(b.site), c = where(site);
    char msg[1024];
    std::snprintf(msg, sizeof msg, "divergent barrier: thread %d arrived at %s while thread %d waits at %s",
                  g_cur, c.c_str(), b.first, a.c_str());
    sync_fail(msg);
  }
  if (++b.count == b.n) {
    b.count = 0;
    ++b.gen;
    // bar.sync orders memory among its threads; the warp-collective instructions
    // (ldmatrix, mma, shfl .sync.aligned) only converge the warp: the PTX memory model
    // gives them no ordering of shared memory (bar.warp.sync would).
    if (g_san && &b == &g_block_bar) g_san->barrier_complete(first, b.n);
    return;
  }
  g_fibers[g_cur].wait_site = site;
  while (b.gen == gen) yield();
  g_fibers[g_cur].wait_site = nullptr;
}

// The distinct __syncthreads call sites of a block, in order of first arrival: the
// sanitizer's breakages name one by its index (g_break_site).
// Sites are source lines (where()): the compiler may duplicate one __syncthreads.
std::vector<std::string> g_sync_sites;
int sync_site_index(const void* site) {
  const std::string at = where(site);
  for (size_t i = 0; i < g_sync_sites.size(); ++i)
    if (g_sync_sites[i] == at) return static_cast<int>(i);
  g_sync_sites.push_back(at);
  return static_cast<int>(g_sync_sites.size()) - 1;
}

__attribute__((noinline)) void syncthreads() {
  const void* site = __builtin_return_address(0);
  if (g_break == Break::kSkipSync || g_break == Break::kDivergentSync) {
    const int i = sync_site_index(site);
    // kSkipSync: the barrier removed from the source; kDivergentSync: lanes 0-15 of
    // warp 0 skip its first arrival (the barrier inside `if (lane >= 16 || warp > 0)`).
    if (i == g_break_site) {
      if (g_break == Break::kSkipSync) return;
      Fiber& f = g_fibers[g_cur];
      if (g_cur < 16 && !f.broke) {
        f.broke = true;
        return;
      }
    }
  }
  arrive(g_block_bar, site, 0);
}
__attribute__((noinline)) void warp_sync() {
  arrive(g_warp_bars[g_cur >> 5], __builtin_return_address(0), g_cur & ~31);
}

bool on_fiber_stack(const void* p) {
  const auto* c = static_cast<const char*>(p);
  const std::vector<char>& s = g_fibers[g_cur].stack;
  return c >= s.data() && c < s.data() + s.size();
}
bool in_warp_slots(const void* p) {
  const auto* c = static_cast<const char*>(p);
  const auto* b = reinterpret_cast<const char*>(g_slots.data());
  return c >= b && c < b + g_slots.size() * sizeof(WarpSlots);
}

void land(const Copy& c) {
  if (c.size == 0 && g_break == Break::kNoZeroFill) return;
  if (c.size == 16) std::memcpy(c.dst, c.src, 16);
  else std::memset(c.dst, 0, 16);
  if (g_san) g_san->cp_land(c.ticket, c.dst, 16);
}

__attribute__((noinline)) void cp_async(void* dst, const void* src, int src_size) {
  const auto* d = static_cast<unsigned char*>(dst);
  if (d < g_smem || d + 16 > g_smem + g_smem_bytes) fail("cp.async destination outside dynamic shared memory");
  if (reinterpret_cast<uintptr_t>(dst) % 16 || reinterpret_cast<uintptr_t>(src) % 16)
    fail("cp.async address not 16-byte aligned");
  if (src_size == 16 && !global_readable(src, 16)) fail("cp.async source outside the input arrays");
  Copy c{dst, src, src_size};
  if (g_san) c.ticket = g_san->cp_issue(g_cur, capture_site());
  if (g_cp_late) g_fibers[g_cur].open.push_back(c);
  else land(c);
}

void cp_commit() {
  Fiber& f = g_fibers[g_cur];
  f.groups.push_back(std::move(f.open));
  f.open.clear();
  ++f.committed;
  if (g_san) g_san->cp_commit(g_cur);
}

void cp_wait(int pending) {
  Fiber& f = g_fibers[g_cur];
  if (g_break == Break::kCpNoWait) {
    // Without the sanitizer the copies never land (the results go wrong); with it they
    // land at some time in their window, but nothing orders them before the reads.
    if (g_san)
      while (static_cast<int>(f.groups.size()) > pending) {
        for (const Copy& c : f.groups.front()) land(c);
        f.groups.erase(f.groups.begin());
      }
    return;
  }
  while (static_cast<int>(f.groups.size()) > pending) {
    for (const Copy& c : f.groups.front()) land(c);
    f.groups.erase(f.groups.begin());
  }
  f.acquired = f.committed - pending;
  if (g_san) g_san->cp_acquire(g_cur, f.acquired);
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
  int index = 0;       // order of init in the block (the sanitizer's name for it)
};
std::vector<std::pair<uint64_t*, MBar>> g_mbars;

struct TmaCopy {
  unsigned char* dst;
  std::vector<unsigned char> bytes;
  uint64_t* bar;
  int ticket = -1;  // the sanitizer's record of the issue
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
    if (g_san) g_san->mbar_phase_complete(m.index, m.phase);
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
  m.index = static_cast<int>(g_mbars.size());
  g_mbars.emplace_back(bar, m);
}

void fence_barrier_init() {
  if (g_break == Break::kNoFence) return;
  for (auto& [addr, m] : g_mbars)
    if (m.init_thread == g_cur) m.fenced = true;
}

void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  MBar& m = mbar_at(bar, "mbarrier.arrive.expect_tx");
  if (g_break == Break::kNoArrive) {  // mbarrier.expect_tx: the bytes, no arrival
    m.tx += bytes;
    return;
  }
  if (g_san) g_san->mbar_arrive(g_cur, m.index);
  if (g_break == Break::kNoExpectTx) bytes = 0;
  if (g_break == Break::kShortExpectTx) bytes /= 2;
  m.tx += bytes;
  if (--m.pending < 0) sync_fail("over-arrival: more arrivals on an mbarrier phase than its init count");
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
  if (g_san) g_san->tma_land(c.ticket, c.dst, c.bytes.size());
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
    if ((m.phase & 1u) != (parity & 1u)) {
      // Phase m.phase - 1 is the one waited for (none yet: the wait on the parity before
      // the first phase returns at once and orders nothing).
      if (g_san && m.phase > 0) g_san->mbar_wait_done(g_cur, m.index, m.phase - 1);
      g_fibers[g_cur].wait_mbar = -1;
      return;
    }
    g_fibers[g_cur].wait_mbar = m.index, g_fibers[g_cur].wait_parity = parity & 1u;
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

__attribute__((noinline)) void tma_load(void* smem_dst, const CUtensorMap* map_bytes, const int (&c)[4], uint64_t* bar) {
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
  const size_t eb = map->elem_bytes;
  const size_t row_bytes = map->box[0] * eb;
  const size_t rows = size_t(map->box[1]) * map->box[2] * map->box[3];
  TmaCopy copy{static_cast<unsigned char*>(smem_dst), std::vector<unsigned char>(row_bytes * rows), bar};
  if (g_san) copy.ticket = g_san->tma_issue(g_cur, m.index, capture_site());
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
  if (g_san) return;  // the sanitizer reports the read as a race with the copy's landing
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

// No fiber can run: say what each waits on (synccheck's deadlock report, not a hang).
[[noreturn]] void report_deadlock() {
  std::string msg = "deadlock: no thread can proceed;";
  // One line per distinct wait (threads grouped): a barrier's call site, or an mbarrier
  // and the parity waited for.
  std::vector<bool> shown(g_fibers.size(), false);
  for (size_t i = 0; i < g_fibers.size(); ++i) {
    const Fiber& f = g_fibers[i];
    if (f.done || shown[i]) continue;
    int n = 0;
    for (size_t j = i; j < g_fibers.size(); ++j) {
      const Fiber& o = g_fibers[j];
      if (!o.done && !shown[j] && o.wait_mbar == f.wait_mbar && o.wait_site == f.wait_site &&
          (f.wait_mbar < 0 || o.wait_parity == f.wait_parity))
        shown[j] = true, ++n;
    }
    char line[512];
    if (f.wait_mbar >= 0) {
      const MBar& m = g_mbars[static_cast<size_t>(f.wait_mbar)].second;
      std::snprintf(line, sizeof line,
                    " %d thread(s) from %zu wait on mbarrier #%d for a phase of parity %u that can never complete "
                    "(phases completed %u, arrivals missing %d of %d, tx bytes outstanding %lld);",
                    n, i, f.wait_mbar, f.wait_parity, m.phase, m.pending, m.expected, static_cast<long long>(m.tx));
    } else {
      std::snprintf(line, sizeof line, " %d thread(s) from %zu wait at the barrier at %s;", n, i,
                    f.wait_site ? where(f.wait_site).c_str() : "?");
    }
    msg += line;
  }
  sync_fail(msg.c_str());
}

void (*g_body)(const ffpa::FwdParams&) = nullptr;
const ffpa::FwdParams* g_params = nullptr;

void fiber_main() {
  g_body(*g_params);
  g_fibers[g_cur].done = true;
  if (!g_fibers[g_cur].open.empty()) fail("cp.async copies never committed");
  switch_context(g_fibers[g_cur].ctx, g_sched);
}

// A random schedule's early landing (g_schedule_seed): the oldest copy of a random fiber's
// oldest committed group, or a random TMA copy in flight. Only the data arrives; the
// issuer's wait still orders it (the sanitizer's acquire happens there).
void land_some(std::mt19937_64& rng) {
  if (!g_tma_in_flight.empty() && rng() % 2) {
    land_tma(rng() % g_tma_in_flight.size());
    return;
  }
  Fiber& f = g_fibers[rng() % g_fibers.size()];
  if (f.groups.empty()) return;
  std::vector<Copy>& grp = f.groups.front();
  if (!grp.empty()) {
    land(grp.front());
    grp.erase(grp.begin());
  }
  if (grp.empty()) f.groups.erase(f.groups.begin());
}

// Runs one kernel launch: every block in turn, its threads as fibers, round robin (or in
// a seeded random order, g_schedule_seed).
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
        for (Fiber& f : g_fibers) {
          f.done = false, f.groups.clear(), f.open.clear();
          f.committed = f.acquired = 0, f.wait_site = nullptr, f.wait_mbar = -1, f.broke = false;
        }
        g_mbars.clear();
        g_tma_in_flight.clear();
        g_sync_sites.clear();
        g_warp_bars.assign((threads + 31) / 32, Barrier{32, 0, 0});
        g_slots.assign((threads + 31) / 32, WarpSlots{});
        g_block_bar = Barrier{threads, 0, 0};
        for (int i = 0; i < threads; ++i) {
          Fiber& f = g_fibers[i];
          f.tid = {static_cast<unsigned>(i), 0, 0};
          if (f.stack.empty()) f.stack.resize(64 * 1024);
          make_context(f.ctx, f.stack.data(), f.stack.size(), fiber_main);
        }
        if (g_san) g_san->block_begin(threads, g_smem, smem);
        int live = threads;
        std::mt19937_64 rng(g_schedule_seed * 0x9e3779b97f4a7c15ull + (uint64_t(z) << 40 | uint64_t(y) << 20 | x));
        std::vector<int> order(threads);
        for (int i = 0; i < threads; ++i) order[i] = i;
        while (live > 0) {
          const long before = g_progress;
          live = 0;
          if (g_schedule_seed) std::shuffle(order.begin(), order.end(), rng);
          for (int i : order) {
            if (g_fibers[i].done) continue;
            if (g_schedule_seed && g_cp_late && rng() % 4 == 0) land_some(rng);
            g_cur = i;
            switch_context(g_sched, g_fibers[i].ctx);
            if (!g_fibers[i].done) ++live;
          }
          if (live > 0 && g_progress == before) report_deadlock();
        }
        // A warp that exits while its collective partners wait would show as deadlock;
        // a block barrier some threads skipped shows here.
        if (g_block_bar.count != 0) {
          const std::string at = where(g_block_bar.site);
          char msg[512];
          std::snprintf(msg, sizeof msg, "__syncthreads at %s not reached by every thread: %d of %d arrived, then the rest exited",
                        at.c_str(), g_block_bar.count, threads);
          sync_fail(msg);
        }
        if (!g_tma_in_flight.empty()) fail("the block exited with TMA copies in flight");
        for (auto& [addr, m] : g_mbars)
          if (m.tx != 0 || m.pending != m.expected) fail("the block exited with an mbarrier phase half done");
        if (g_san) g_san->block_end();
      }
}

}  // namespace emu
