// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace ffpa::core {

// Readers see either the old file or the whole new one, never a torn write:
// temp file in the same directory + fsync + rename (+ fsync of the directory).
// The temp file is removed on any failure.
void write_file_atomic(const std::filesystem::path& p, std::string_view data);

// A temp file beside `final_path` that is renamed over it by commit() and
// removed by the destructor otherwise; for writers that stream large outputs.
class AtomicOutput {
 public:
  explicit AtomicOutput(const std::filesystem::path& final_path);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  int fd() const { return fd_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  void write(std::string_view data);  // all bytes or throws
  void commit();                      // fsync, rename, fsync dir

 private:
  std::filesystem::path final_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Exclusive advisory lock (flock LOCK_EX) on `lockfile`, created if missing;
// blocks until granted, released by the destructor.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& lockfile);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace ffpa::core
