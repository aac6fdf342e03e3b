// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the engine's unit tests.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "ffpa/core/wheel.h"

namespace ffpa::test {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR, removed when the test ends.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ffpa_index_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

// Options for packing <dir>/tree into <dir>/out: project ffpa-attn, the smallest
// METADATA pack accepts, a fixed SOURCE_DATE_EPOCH.
inline ffpa::core::PackOptions pack_options(const fs::path& dir, const std::string& version, const std::string& tag) {
  ffpa::core::PackOptions o;
  o.tree = dir / "tree";
  o.name = "ffpa-attn";
  o.version = version;
  o.tag = tag;
  o.metadata = "Summary: s\nRequires-Python: >=3.10\n";
  o.out_dir = dir / "out";
  o.source_date_epoch = 1700000000;
  return o;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline size_t count_entries(const fs::path& d) {
  if (!fs::exists(d)) return 0;
  size_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(d)) ++n;
  return n;
}

// Bytes that look like a mix of code (compressible) and packed data (random).
inline std::string mixed_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out;
  out.reserve(n);
  while (out.size() < n) {
    if ((out.size() / 65536) % 2 == 0) {
      out += "\x12\x34 mov r" + std::to_string(rng() % 32) + ", r" + std::to_string(rng() % 32) + ";";
    } else {
      out.push_back(static_cast<char>(rng() & 0xFF));
    }
  }
  out.resize(n);
  return out;
}

}  // namespace ffpa::test
