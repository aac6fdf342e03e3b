// The emulator as a sanitizer (racecheck, initcheck, memcheck; synccheck lives in the grid
// runner, emu_grid.cpp): docs/emulator.md, "The sanitizer".
//
// The driver's translation unit (csrc/tests/sanitize_kernels.cpp, the real kernel
// sources) is compiled with GCC's -fsanitize=thread instrumentation but linked without
// libtsan: every load and store the compiler could not keep in registers calls the
// __tsan_* entry points defined below. Those inside the running block's dynamic shared
// memory are checked against a happens-before relation built from vector clocks, one
// clock per CUDA thread plus one per thread's cp.async engine and one per mbarrier's
// bulk copies, with the orderings the PTX memory model gives:
//   bar.sync (__syncthreads)        joins every thread's clock (all arrive);
//   warp collectives (ldmatrix,     order nothing (they converge the warp; the memory
//   mma, shfl)                       model gives shared-memory ordering to bar.warp.sync,
//                                    which the kernels do not use);
//   cp.async                         writes at landing with the issuer's clock at issue,
//                                    as the issuer's copy engine; wait_group acquires the
//                                    completed groups for the waiting thread only;
//   mbarrier arrive / complete_tx    release into the phase; a wait that sees the phase
//                                    complete acquires it; bulk (TMA) copies write as the
//                                    barrier's copy engine and complete into the phase.
// Two accesses to one byte, at least one a write, neither ordered before the other:
// a hazard (RACECHECK). A shared read of a byte the block never wrote: INITCHECK. A
// store outside shared memory, the running fiber's own stack (the kernel's registers),
// the warp exchange slots and the buffers the driver registered: MEMCHECK. Each report
// names the kernel, the block, the shared offset, both threads and both source lines,
// then exits with its code (emu_san.h).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "emu_san.h"
#include "emu_sanitizer.h"
#include "emu_state.h"
#include "ffpa/utils.cuh"  // emu::fail, emu::g_block_idx

namespace emu {
namespace {

constexpr uint16_t kNoSlot = 0xffff;
constexpr int kMaxBars = 16;

struct Read {
  uint16_t slot;
  uint32_t clk;
  Site pc;
};
struct Cell {
  uint16_t wslot = kNoSlot;
  bool init = false;
  uint32_t wclk = 0;
  Site wpc;
  std::vector<Read> reads;
};
struct Snapshot {
  std::vector<uint32_t> vc;
  uint16_t slot;
  uint32_t clk;
  int issuer;
  Site pc;
  const char* what;
};

class Sanitizer final : public SanHooks {
 public:
  std::string kernel = "kernel";
  std::vector<Range> outputs;
  bool active = false;

  void block_begin(int threads, unsigned char* smem, size_t smem_bytes) override {
    t_ = threads;
    s_ = 2 * threads + kMaxBars;
    smem_ = smem;
    bytes_ = smem_bytes;
    vc_.assign(static_cast<size_t>(t_) * s_, 0);
    for (int f = 0; f < t_; ++f) vc_[idx(f, f)] = 1;
    cells_.assign(bytes_, Cell{});
    tickets_.clear();
    committed_.assign(t_, 0);
    pending_.assign(kMaxBars, std::vector<uint32_t>(s_, 0));
    phases_.assign(kMaxBars, {});
    init_seen_ = false;
    rng_.seed(g_schedule_seed + 1);
    active = true;
  }
  // An uninitialised read is reported at the block's end, after any race: a read of bytes
  // a copy has not yet landed is first a race (reported when the copy lands), and
  // initcheck then names only reads that no write of the block ever covers.
  void block_end() override {
    active = false;
    if (init_seen_) report_init(init_off_, init_thread_, init_pc_);
  }

  void barrier_complete(int first, int count) override {
    std::vector<uint32_t> j(s_, 0);
    for (int f = first; f < first + count; ++f) join(j.data(), &vc_[idx(f, 0)]);
    for (int f = first; f < first + count; ++f) {
      std::memcpy(&vc_[idx(f, 0)], j.data(), s_ * sizeof(uint32_t));
      ++vc_[idx(f, f)];
    }
  }
  int cp_issue(int f, const Site& pc) override {
    return snapshot(f, static_cast<uint16_t>(t_ + f), static_cast<uint32_t>(committed_[f] + 1), pc, "cp.async");
  }
  void cp_commit(int f) override { ++committed_[f]; }
  void cp_land(int ticket, const void* dst, size_t n) override { land(ticket, dst, n); }
  void cp_acquire(int f, long groups_done) override {
    uint32_t& c = vc_[idx(f, t_ + f)];
    if (groups_done > 0 && static_cast<uint32_t>(groups_done) > c) c = static_cast<uint32_t>(groups_done);
  }
  void mbar_arrive(int f, int bar) override {
    check_bar(bar);
    join(pending_[bar].data(), &vc_[idx(f, 0)]);
    ++vc_[idx(f, f)];
  }
  int tma_issue(int f, int bar, const Site& pc) override {
    check_bar(bar);
    return snapshot(f, static_cast<uint16_t>(2 * t_ + bar), static_cast<uint32_t>(phases_[bar].size() + 1), pc,
                    "TMA (cp.async.bulk.tensor)");
  }
  void tma_land(int ticket, const void* dst, size_t n) override { land(ticket, dst, n); }
  void mbar_phase_complete(int bar, uint32_t completed_phase) override {
    check_bar(bar);
    std::vector<uint32_t> v = pending_[bar];
    uint32_t& a = v[2 * t_ + bar];
    a = std::max(a, completed_phase + 1);
    if (phases_[bar].size() != completed_phase) fail("sanitizer: mbarrier phases out of order");
    phases_[bar].push_back(std::move(v));
    std::fill(pending_[bar].begin(), pending_[bar].end(), 0);
  }
  void mbar_wait_done(int f, int bar, uint32_t completed_phase) override {
    check_bar(bar);
    join(&vc_[idx(f, 0)], phases_[bar].at(completed_phase).data());
    ++vc_[idx(f, f)];
  }
  // Cached: the divergent-barrier check compares the call sites of every barrier's
  // arrivals by source line whenever their addresses differ.
  std::string where(const void* pc) override {
    for (const auto& [k, v] : where_cache_)
      if (k == pc) return v;
    Site s;
    s.pc[0] = pc;
    where_cache_.emplace_back(pc, symbolize(s));
    return where_cache_.back().second;
  }
  void print_seed() override {
    std::fprintf(stderr, "  schedule: seed %lu (%s; rerun with --seed %lu)\n", g_schedule_seed,
                 g_schedule_seed ? "random interleaving and copy landing" : "round robin, copies land at their wait",
                 g_schedule_seed);
  }

  // One access by the running fiber (instrumented code).
  void access(const void* p, size_t n, bool write, const Site& pc) {
    const auto* c = static_cast<const unsigned char*>(p);
    const size_t off = static_cast<size_t>(c - smem_);
    if (c < smem_ || off >= bytes_) {
      if (write) check_global_write(c, n, pc);
      return;
    }
    if (off + n > bytes_) report_simple(kMemCheckExit, "MEMCHECK", "shared access past the block's dynamic shared memory", off, pc);
    const int f = g_cur;
    const uint32_t* v = &vc_[idx(f, 0)];
    const uint16_t slot = static_cast<uint16_t>(f);
    const uint32_t clk = v[f];
    for (size_t i = 0; i < n; ++i) {
      Cell& cell = cells_[off + i];
      if (write) {
        write_cell(cell, off + i, v, slot, clk, pc, f, nullptr);
      } else {
        if (cell.wslot != kNoSlot && v[cell.wslot] < cell.wclk)
          report_race("read-after-write", off + i, cell.wslot, cell.wpc, f, pc, false, nullptr);
        if (!cell.init && !init_seen_) init_off_ = off + i, init_thread_ = f, init_pc_ = pc, init_seen_ = true;
        auto& r = cell.reads;
        size_t k = 0;
        for (const Read& e : r)
          if (v[e.slot] < e.clk) r[k++] = e;  // keep the reads not ordered before this one
        r.resize(k);
        r.push_back(Read{slot, clk, pc});
      }
    }
    // A random schedule interleaves the fibers between their sync points too.
    if (g_schedule_seed && rng_() % 32 == 0) preempt();
  }

 private:
  int t_ = 0, s_ = 0;
  unsigned char* smem_ = nullptr;
  size_t bytes_ = 0;
  std::vector<uint32_t> vc_;
  std::vector<Cell> cells_;
  std::vector<Snapshot> tickets_;
  std::vector<long> committed_;
  std::vector<std::vector<uint32_t>> pending_;
  std::vector<std::vector<std::vector<uint32_t>>> phases_;
  std::mt19937_64 rng_;
  std::vector<std::pair<const void*, std::string>> where_cache_;
  size_t init_off_ = 0;
  int init_thread_ = 0;
  Site init_pc_;
  bool init_seen_ = false;

  size_t idx(int f, int s) const { return static_cast<size_t>(f) * s_ + s; }
  void join(uint32_t* a, const uint32_t* b) const {
    for (int s = 0; s < s_; ++s) a[s] = std::max(a[s], b[s]);
  }
  void check_bar(int bar) const {
    if (bar < 0 || bar >= kMaxBars) fail("sanitizer: more mbarriers in a block than it tracks (kMaxBars)");
  }
  int snapshot(int f, uint16_t slot, uint32_t clk, const Site& pc, const char* what) {
    Snapshot s{std::vector<uint32_t>(&vc_[idx(f, 0)], &vc_[idx(f, 0)] + s_), slot, clk, f, pc, what};
    // The copy is ordered after what the issuer did before it, not after what it does next.
    ++vc_[idx(f, f)];
    tickets_.push_back(std::move(s));
    return static_cast<int>(tickets_.size()) - 1;
  }
  void land(int ticket, const void* dst, size_t n) {
    if (!active) return;
    const Snapshot& s = tickets_.at(static_cast<size_t>(ticket));
    const size_t off = static_cast<size_t>(static_cast<const unsigned char*>(dst) - smem_);
    for (size_t i = 0; i < n; ++i)
      write_cell(cells_[off + i], off + i, s.vc.data(), s.slot, s.clk, s.pc, s.issuer, &s);
  }
  void write_cell(Cell& cell, size_t off, const uint32_t* v, uint16_t slot, uint32_t clk, const Site& pc, int f,
                  const Snapshot* copy) {
    if (cell.wslot != kNoSlot && cell.wslot != slot && v[cell.wslot] < cell.wclk)
      report_race("write-after-write", off, cell.wslot, cell.wpc, f, pc, true, copy);
    for (const Read& e : cell.reads)
      if (v[e.slot] < e.clk) report_race("write-after-read", off, e.slot, e.pc, f, pc, true, copy);
    cell.wslot = slot, cell.wclk = clk, cell.wpc = pc, cell.init = true;
    cell.reads.clear();
  }
  std::string who(int slot) const {
    char b[160];
    if (slot < t_) std::snprintf(b, sizeof b, "thread %d (warp %d)", slot, slot / 32);
    else if (slot < 2 * t_) std::snprintf(b, sizeof b, "a cp.async copy of thread %d (warp %d), landed", slot - t_, (slot - t_) / 32);
    else std::snprintf(b, sizeof b, "a TMA copy completing on mbarrier #%d, landed", slot - 2 * t_);
    return b;
  }
  void header(const char* tool, const char* what, size_t off) const {
    std::fprintf(stderr, "%s: %s in %s, block (%u,%u,%u), shared offset 0x%zx\n", tool, what, kernel.c_str(),
                 g_block_idx.x, g_block_idx.y, g_block_idx.z, off);
  }
  [[noreturn]] void report_race(const char* kind, size_t off, uint16_t prev_slot, const Site& prev_pc, int f,
                                const Site& pc, bool write, const Snapshot* copy) {
    header("RACECHECK", (std::string(kind) + " hazard").c_str(), off);
    const bool prev_write = std::strcmp(kind, "write-after-read") != 0;
    std::fprintf(stderr, "  %s by %s at %s\n", prev_write ? "write" : "read", who(prev_slot).c_str(),
                 symbolize(prev_pc).c_str());
    if (copy) std::fprintf(stderr, "  %s by %s at %s\n", write ? "write" : "read", who(copy->slot).c_str(), symbolize(pc).c_str());
    else std::fprintf(stderr, "  %s by %s at %s\n", write ? "write" : "read", who(f).c_str(), symbolize(pc).c_str());
    std::fprintf(stderr, "  nothing orders them: no barrier, completed wait or warp collective between the two\n");
    print_seed();
    std::exit(kRaceCheckExit);
  }
  [[noreturn]] void report_init(size_t off, int f, const Site& pc) {
    header("INITCHECK", "shared read of a byte this block never wrote", off);
    std::fprintf(stderr, "  read by %s at %s\n", who(f).c_str(), symbolize(pc).c_str());
    print_seed();
    std::exit(kInitCheckExit);
  }
  [[noreturn]] void report_simple(int code, const char* tool, const char* what, size_t off, const Site& pc) {
    header(tool, what, off);
    std::fprintf(stderr, "  by %s at %s\n", who(g_cur).c_str(), symbolize(pc).c_str());
    print_seed();
    std::exit(code);
  }
  void check_global_write(const unsigned char* c, size_t n, const Site& pc) {
    if (on_fiber_stack(c) || in_warp_slots(c)) return;
    for (const Range& r : outputs)
      if (c >= r.p && c + n <= r.p + r.n) return;
    std::fprintf(stderr, "MEMCHECK: %zu-byte store to %p outside every buffer the test registered, in %s, block (%u,%u,%u)\n",
                 n, static_cast<const void*>(c), kernel.c_str(), g_block_idx.x, g_block_idx.y, g_block_idx.z);
    std::fprintf(stderr, "  by %s at %s\n", who(g_cur).c_str(), symbolize(pc).c_str());
    print_seed();
    std::exit(kMemCheckExit);
  }
  // "file:line (function)" for each frame of the site, innermost inlined frame first
  // (addr2line on this executable; the sanitizer's sources are built with -g).
  static std::string symbolize(const Site& site) {
    std::string out;
    int shown = 0;
    for (const void* pc : site.pc) {
      if (!pc) break;
      Dl_info info{};
      if (!dladdr(pc, &info) || !info.dli_fname) continue;
      const auto off = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
      char cmd[1024];
      std::snprintf(cmd, sizeof cmd, "addr2line -f -C -i -e '%s' 0x%lx 2>/dev/null", info.dli_fname,
                    static_cast<unsigned long>(off));
      FILE* p = popen(cmd, "r");
      if (!p) continue;
      char line[2048];
      std::vector<std::string> lines;
      while (std::fgets(line, sizeof line, p)) {
        std::string l(line);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
        lines.push_back(l);
      }
      pclose(p);
      for (size_t i = 0; i + 1 < lines.size() && shown < 6; i += 2, ++shown) {
        std::string fn = lines[i], loc = lines[i + 1];
        if (loc.rfind("??", 0) == 0) continue;
        if (fn.size() > 60) fn = fn.substr(0, 57) + "...";
        const size_t slash = loc.rfind("/csrc/");
        if (slash != std::string::npos) loc = loc.substr(slash + 1);
        if (!out.empty()) out += " <- ";
        out += loc + " (" + fn + ")";
      }
    }
    if (out.empty()) {
      char b[64];
      std::snprintf(b, sizeof b, "pc %p", site.pc[0]);
      out = b;
    }
    return out;
  }
};

Sanitizer g_sanitizer;

}  // namespace

void san_enable(const char* kernel, unsigned long seed) {
  g_sanitizer.kernel = kernel;
  g_schedule_seed = seed;
  g_san = &g_sanitizer;
}
void san_disable() {
  g_san = nullptr;
  g_schedule_seed = 0;
  g_sanitizer.active = false;
}
void san_register_output(const void* p, size_t n) {
  g_sanitizer.outputs.push_back(Range{static_cast<const unsigned char*>(p), n});
}
void san_clear_outputs() { g_sanitizer.outputs.clear(); }

}  // namespace emu

// GCC's -fsanitize=thread entry points (the instrumented driver calls them; libtsan is
// not linked). Outside a sanitized block they return at once.
namespace {
__attribute__((always_inline)) inline void san_access(const void* p, size_t n, bool write) {
  if (emu::g_sanitizer.active) emu::g_sanitizer.access(p, n, write, emu::capture_site());
}
}  // namespace

#define FFPA_SAN_RW(N)                                                                                   \
  extern "C" void __tsan_read##N(void* p) { san_access(p, N, false); }        \
  extern "C" void __tsan_write##N(void* p) { san_access(p, N, true); }        \
  extern "C" void __tsan_unaligned_read##N(void* p) { san_access(p, N, false); } \
  extern "C" void __tsan_unaligned_write##N(void* p) { san_access(p, N, true); }
FFPA_SAN_RW(1)
FFPA_SAN_RW(2)
FFPA_SAN_RW(4)
FFPA_SAN_RW(8)
FFPA_SAN_RW(16)
#undef FFPA_SAN_RW
extern "C" void __tsan_read_range(void* p, unsigned long n) { san_access(p, n, false); }
extern "C" void __tsan_write_range(void* p, unsigned long n) { san_access(p, n, true); }
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}
// Atomics (static-initialisation guards): done as they are, not checked (the kernels'
// shared memory takes no atomics).
#define FFPA_SAN_ATOMIC(N, T)                                                                          \
  extern "C" T __tsan_atomic##N##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  extern "C" void __tsan_atomic##N##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }
FFPA_SAN_ATOMIC(8, unsigned char)
FFPA_SAN_ATOMIC(16, unsigned short)
FFPA_SAN_ATOMIC(32, unsigned int)
FFPA_SAN_ATOMIC(64, unsigned long long)
#undef FFPA_SAN_ATOMIC
