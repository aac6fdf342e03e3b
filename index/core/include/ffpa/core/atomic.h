// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ffpa::core {

// Why a write failed, with the fix: ENOSPC, EDQUOT and EFBIG (a file-size limit,
// `ulimit -f`: the engine ignores SIGXFSZ, so the write fails instead of killing it)
// read as one case, "no room for the file".
std::string write_error_text(int err);

// Readers see either the old file or the whole new one, never a torn write:
// temp file in the same directory + fsync + rename (+ fsync of the directory).
// The temp file is removed on any failure.
void write_file_atomic(const std::filesystem::path& p, std::string_view data);

// Several files, each as write_file_atomic writes one, all made durable before the
// first becomes visible, and each directory fsynced once.
void write_files_atomic(const std::vector<std::pair<std::filesystem::path, std::string>>& files);

// A temp file beside `final_path` that is renamed over it by commit() and
// removed by the destructor otherwise; for writers that stream large outputs. The
// temp file is named "." + final name + ".tmp.XXXXXX", or `temp_prefix` + "XXXXXX".
class AtomicOutput {
 public:
  explicit AtomicOutput(const std::filesystem::path& final_path, const std::string& temp_prefix = "");
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  int fd() const { return fd_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  void write(std::string_view data);  // all bytes or throws
  void commit();                      // sync() then publish()
  // The two halves of commit(), for commit_together: sync() fsyncs and closes the temp
  // file, publish() renames it and fsyncs the directory unless told not to.
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
};

// Commits several outputs at once: every one fsynced before the first is renamed (a
// failure before that leaves none visible), each directory fsynced once.
void commit_together(const std::vector<std::unique_ptr<AtomicOutput>>& outs);

// Creates `dir` and its parents; throws naming it and then `fix` when it cannot.
void create_directories(const std::filesystem::path& dir, const std::string& fix);

// Writes all of `data` to `fd` (EINTR retried); throws naming `what` and the fix.
void write_all(int fd, std::string_view data, const std::string& what);

// A regular file opened once for reading: every read goes to its one descriptor
// (pread), so all of them see the same file whatever happens to its path meanwhile.
class InputFile {
 public:
  explicit InputFile(const std::filesystem::path& p);     // throws naming the fix
  InputFile(int fd, const std::filesystem::path& shown);  // reads a duplicate of `fd`
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  std::uint64_t size() const { return size_; }
  // Exactly `len` bytes at `off`; throws when they do not lie inside the file.
  std::string read(std::uint64_t off, std::uint64_t len) const;
  void read_into(std::uint64_t off, char* dst, std::size_t len) const;

 private:
  void init();
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The whole file, or nullopt (errno set) when it cannot be opened or read.
std::optional<std::string> read_file(const std::filesystem::path& p);

}  // namespace ffpa::core
