// The emulator's run-time switches that the test drivers set (defined in
// emu/emu_grid.cpp, read by emulate_lowp.cpp and emulate_bwd.cpp too).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "attention_ref.h"

namespace emu {
// Copies land at their wait, not at issue (a kernel that reads too early then fails).
extern bool g_cp_late;
// Deliberate breakages (--breakages, --breakages-cute, --bwd-tma-breakages): each models
// one protocol bug in a kernel's use of the instructions, and the run must then fail.
// kCpNoWait: cp.async.wait_group returns without waiting (the cp.async feed's missing wait).
// The sanitizer's (ffpa_sanitize_kernels): kSkipSync, the __syncthreads at source line
// g_break_site (index in order of first arrival in a block) removed; kDivergentSync, its
// first arrival skipped by lanes 0-15 of warp 0 (inside a branch they do not take);
// kNoArrive, mbarrier.arrive.expect_tx replaced by expect_tx without the arrival (the
// waits can then never complete); kNoZeroFill, cp.async with src-size 0 writes nothing
// (the zero fill of tail rows lost).
enum class Break {
  kNone, kNoExpectTx, kShortExpectTx, kWrongParity, kNoWait, kNoFence, kNoSwizzle, kCpNoWait,
  kSkipSync, kDivergentSync, kNoArrive, kNoZeroFill
};
extern Break g_break;
extern int g_break_site;
// The global memory a kernel may read: cp.async and TMA loads outside it fail the run.
struct Range {
  const unsigned char* p;
  size_t n;
  // Bytes loaded from it (cp.async with a source, TMA in-bounds elements): the mask tests
  // count the K / Q bytes of a launch to see skipped blocks stay unread.
  mutable size_t read = 0;
};
extern std::vector<Range> g_ranges;
// Called with the fault's words where the emulator finds one (a fault inside a kernel, a
// deadlock, a protocol breach); it must not return. Null (the drivers): the fault is
// printed and the process exits with code 3. The emulated-device library
// (csrc/emulated/runtime_emulated.cpp) turns it into the launch's error instead.
extern void (*g_fault_handler)(const char* what);

// One run of a breakage test (a deliberately broken kernel, or an unbroken control): `run`
// executes in a child process (a broken kernel may trap, fault or leave the emulator's
// state behind) and its result is printed as one verdict line, "[PASS] <label> -> passed"
// for a control, "[CAUGHT] ... -> failed" for a breakage that failed, "[MISSED]" for either
// the other way. Returns whether the outcome was the wanted one.
bool breakage_run(const std::string& label, bool want_pass, const std::function<bool()>& run);

// The verdict of a run, as its exit code (CTest judges the emulator's tests by it, never by
// their output): prints "<total> <what>, <bad> <bad_word>" and returns 1 when any case was
// bad, when no case ran (a run of zero cases proves nothing), or when the run's primary count
// differs from the count the command line asserts (--expect N, which every CTest
// registration passes: a case table or a subset that silently shrank fails there).
// Secondary counts of the same run (primary = false) are held to "not zero" only.
int verdict(const char* what, long total, long bad, const char* bad_word, bool primary = true);
// --expect N of the command line (-1: not given).
extern long g_expect_cases;
}  // namespace emu

namespace ffpa {
struct NonfiniteScan;
struct FwdParams;
}
namespace emu {
// Runs the non-finite pre-pass (ffpa/nonfinite.cuh) over batch b as api.cu launches it;
// s.flags must point at [B, Hq] zeroed ints.
void run_nonfinite_scan(const ffpa::NonfiniteScan& s, int b);
// The same pass over q, k and v of a forward's params ([B, H, N, D] with p's strides) into
// flags (resized to [B, Hq] and zeroed), as api.cu's forward() runs it.
void run_nonfinite_prepass(const ffpa::FwdParams& p, bool bf16, std::vector<int>& flags);
// SDPA's math backend on one problem in double, NaN and inf included (q, k, v contiguous
// [B, H, N, D]; bottom-right causal): the reference of the NaN / inf checks.
void math_rule_reference(const ffpa::ref::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<float>& out, std::vector<float>& lse);
}  // namespace emu
