// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// A small shared library with real libstdc++/glibc versioned symbol needs, used
// by the ELF and manylinux tests (they compare with auditwheel on it).
#include <string>
#include <thread>
#include <vector>

// A marker the forbidden-string check looks for, standing in for a build path.
extern "C" const char ffpa_testlib_marker[] = "FFPA_TESTLIB_MARKER/build/tree";

extern "C" int ffpa_testlib_run(int n) {
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&out, i]() { out[static_cast<size_t>(i)] = std::to_string(i * i); });
  for (auto& t : threads) t.join();
  int total = 0;
  for (const auto& s : out) total += static_cast<int>(s.size());
  return total;
}
