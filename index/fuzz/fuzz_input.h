// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The engine's readers take paths, not buffers: they read wheels of several GiB
// by seeking, never whole. So each fuzz input goes through a real file, which also
// keeps the file-handling code (short reads, seeks past the end) under test.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ffpa::fuzz {

// Writes the input to `name` in a directory of this process (under $TMPDIR),
// replacing the previous input; the directory goes away at normal exit. The name
// matters to the wheel verifier, which checks it against the archive's contents.
inline std::filesystem::path write_input(const char* name, const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ffpa-fuzz.XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::perror("ffpa fuzz: mkdtemp");
      std::abort();
    }
    static std::filesystem::path made(templ);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    return made;
  }();
  std::filesystem::path p = dir / name;
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror("ffpa fuzz: writing the input file");
    std::abort();
  }
  return p;
}

// A broken promise of the code under test (not a refused input): report and abort,
// so libFuzzer saves the input as a crash.
[[noreturn]] inline void invariant_failed(const char* what) {
  std::fprintf(stderr, "ffpa fuzz: invariant violated: %s\n", what);
  std::abort();
}

}  // namespace ffpa::fuzz
