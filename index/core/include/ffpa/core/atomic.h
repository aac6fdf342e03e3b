// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ffpa::core {

// Why a write failed, with the fix: ENOSPC, EDQUOT and EFBIG (a file-size limit,
// `ulimit -f`: the engine ignores SIGXFSZ, so the write fails instead of killing it)
// read as one case, "no room for the file".
std::string write_error_text(int err);

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
  void write(std::string_view data);  // all bytes or throws; starts writeback every few MiB
  void pwrite(std::uint64_t offset, std::string_view data);  // at offset; the file position stays
  void truncate_to(std::uint64_t size);                       // and moves the file position there
  void commit();                      // sync() then publish()
  // The two halves of commit(), for callers that make several outputs durable at
  // once (pack-many): sync() fsyncs and closes the temp file, publish() renames it
  // and fsyncs the directory unless told not to (the caller then does it once).
  void sync();
  void publish(bool fsync_directory = true);
  // Like commit(), but a new file is hard-linked to its final name and the temp file
  // stays as a marker of the write (true); the caller removes it once the write is
  // final, and a later run that finds it knows what an interrupted one wrote. An
  // existing file is replaced by rename as commit() does (false: no marker).
  bool commit_keeping_marker();
  const std::filesystem::path& final_path() const { return final_; }

 private:
  std::filesystem::path final_, temp_;
  int fd_ = -1;
  bool committed_ = false;
  std::uint64_t unkicked_ = 0;  // bytes written since writeback was last started
};

// fsync of a directory (makes renames in it durable); errors are ignored.
void fsync_directory(const std::filesystem::path& dir);

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
