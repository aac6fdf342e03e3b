// The emulator's run-time switches that the test drivers set (defined in
// emulate_kernels.cpp, read by emulate_lowp.cpp and emulate_bwd.cpp too).
#pragma once

#include <cstddef>
#include <vector>

namespace emu {
// Copies land at their wait, not at issue (a kernel that reads too early then fails).
extern bool g_cp_late;
// The global memory a kernel may read: cp.async and TMA loads outside it fail the run.
struct Range {
  const unsigned char* p;
  size_t n;
  // Bytes loaded from it (cp.async with a source, TMA in-bounds elements): the mask tests
  // count the K / Q bytes of a launch to see skipped blocks stay unread.
  mutable size_t read = 0;
};
extern std::vector<Range> g_ranges;
}  // namespace emu
