// The sanitizer's controls for its driver (csrc/tests/sanitize_kernels.cpp); the runtime
// is emu_sanitizer.cpp, the checks docs/emulator.md "The sanitizer".
#pragma once

#include <cstddef>

namespace emu {
// Checks every following launch (emu::launch) of `kernel` under schedule `seed`
// (emu_san.h, g_schedule_seed: 0 the runner's round robin, else a random one).
void san_enable(const char* kernel, unsigned long seed);
void san_disable();
// Global memory the kernel may store to (its outputs); stores elsewhere are MEMCHECK reports.
void san_register_output(const void* p, size_t n);
void san_clear_outputs();
}  // namespace emu
