// The seam between the emulator's grid runner (emu_grid.cpp) and the sanitizer
// (emu_sanitizer.cpp, linked only into ffpa_sanitize_kernels): the runner reports every
// ordering event (block and warp barriers, cp.async issue / wait / landing, mbarrier
// arrivals, phase completions and waits, TMA landings) to the hooks when g_san is set;
// the kernels' own shared-memory loads and stores reach the sanitizer through GCC's
// -fsanitize=thread instrumentation of the driver's translation unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace emu {
bool on_fiber_stack(const void* p);
// Where an access or a copy's issue happened: the return address and the two frames
// above it (an out-of-line model function such as ldmatrix_impl, then the kernel).
struct Site {
  const void* pc[3] = {nullptr, nullptr, nullptr};
};
// Walks the frame-pointer chain (the sanitizer's sources are compiled with
// -fno-omit-frame-pointer) from the function this is inlined into. Each caller's frame
// lies above the last and within the fiber's 64 KiB stack, whose first frame's saved
// frame pointer is null (emu_grid.cpp, make_context): the walk stops at anything else.
__attribute__((always_inline)) inline Site capture_site() {
  Site s;
  s.pc[0] = __builtin_return_address(0);
  auto* fp = static_cast<char* const*>(__builtin_frame_address(0));
  for (int i = 1; i < 3; ++i) {
    auto* up = reinterpret_cast<char* const*>(fp[0]);
    if (up <= fp || reinterpret_cast<const char*>(up) - reinterpret_cast<const char*>(fp) > 64 * 1024) break;
    fp = up;
    s.pc[i] = fp[1];
  }
  return s;
}

struct SanHooks {
  virtual ~SanHooks() = default;
  virtual void block_begin(int threads, unsigned char* smem, size_t smem_bytes) = 0;
  virtual void block_end() = 0;
  // A block barrier (bar.sync) generation completed: fibers [first, first + count) all
  // arrived. (Warp-collective meeting points are not reported: they order no memory.)
  virtual void barrier_complete(int first, int count) = 0;
  // One cp.async of fiber f, issued now from kernel code at pc; returns its ticket for cp_land.
  virtual int cp_issue(int f, const Site& at) = 0;
  virtual void cp_commit(int f) = 0;
  // The copy lands (its 16 bytes written by the copy engine on behalf of fiber f).
  virtual void cp_land(int ticket, const void* dst, size_t n) = 0;
  // cp.async.wait_group made fiber f's groups up to `groups_done` (count of committed
  // groups, oldest first) visible to it.
  virtual void cp_acquire(int f, long groups_done) = 0;
  // mbarrier model: bar index i (order of init); arrive releases the fiber's view into
  // the current phase; tma_issue snapshots the issuer for a bulk copy; tma_land writes
  // the box; phase_complete closes the phase; wait_done acquires completed phase `phase`.
  virtual void mbar_arrive(int f, int bar) = 0;
  virtual int tma_issue(int f, int bar, const Site& at) = 0;
  virtual void tma_land(int ticket, const void* dst, size_t n) = 0;
  virtual void mbar_phase_complete(int bar, uint32_t completed_phase) = 0;
  virtual void mbar_wait_done(int f, int bar, uint32_t completed_phase) = 0;
  // A program counter as "function file:line", and the schedule's seed line of reports.
  virtual std::string where(const void* pc) = 0;
  virtual void print_seed() = 0;
};
// Exit codes of the sanitizer's reports (a breakage test expects its checker's code).
constexpr int kRaceCheckExit = 66, kInitCheckExit = 67, kSyncCheckExit = 68, kMemCheckExit = 69;
// Set by the sanitizer before a launch; null everywhere else.
extern SanHooks* g_san;
// The running fiber's stack (above) and the warp exchange slots (writes there are the
// kernel's registers, not global memory: memcheck skips them).
bool in_warp_slots(const void* p);
extern int g_cur;
// The schedule (docs/emulator.md): 0, the runner's round robin with copies landing at
// their wait (g_cp_late) or issue; otherwise the seed of a random one: the fibers run in
// a fresh random order every sweep, the sanitizer preempts a fiber at random shared
// accesses, and cp.async / TMA copies land at random times between issue and wait.
extern unsigned long g_schedule_seed;
// A preemption point (the running fiber yields; not a wait).
void preempt();
// Synccheck's report: prints "SYNCCHECK: what" and exits with kSyncCheckExit.
[[noreturn]] void sync_fail(const char* what);
}  // namespace emu
