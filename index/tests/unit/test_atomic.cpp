// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"

namespace fs = std::filesystem;
using namespace ffpa::core;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
fs::path fresh_dir(const char* name) {
  fs::path d = fs::temp_directory_path() / (std::string(name) + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
size_t entries(const fs::path& d) {
  size_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(d)) ++n;
  return n;
}
}  // namespace

TEST(Atomic, WritesAndReplacesWithoutLeftovers) {
  fs::path d = fresh_dir("ffpa_atomic");
  write_file_atomic(d / "a.json", "one");
  EXPECT_EQ(slurp(d / "a.json"), "one");
  write_file_atomic(d / "a.json", "two");
  EXPECT_EQ(slurp(d / "a.json"), "two");
  EXPECT_EQ(entries(d), 1u);
  EXPECT_EQ(fs::status(d / "a.json").permissions() & fs::perms::others_read, fs::perms::others_read);
  fs::remove_all(d);
}

TEST(Atomic, MissingDirectoryThrows) {
  fs::path d = fresh_dir("ffpa_atomic_missing");
  EXPECT_THROW(write_file_atomic(d / "no" / "such" / "f", "x"), Error);
  fs::remove_all(d);
}

TEST(Atomic, UncommittedOutputIsRemoved) {
  fs::path d = fresh_dir("ffpa_atomic_uncommitted");
  {
    AtomicOutput out(d / "big.whl");
    out.write("partial");
    EXPECT_TRUE(fs::exists(out.temp_path()));
  }
  EXPECT_EQ(entries(d), 0u);
  fs::remove_all(d);
}
