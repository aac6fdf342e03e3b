// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/core/atomic.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "ffpa/core/error.h"

namespace ffpa::core {
namespace {

std::string errno_text() { return std::strerror(errno); }

void fsync_directory(const std::filesystem::path& dir) {
  // Makes the rename durable; some filesystems refuse fsync on a directory, which
  // is not worth failing a release for.
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

std::string write_error_text(int err) {
  const std::string what = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG)
    return what + " (the disk is full, or a quota or file-size limit such as `ulimit -f` is reached); free space "
                  "or raise the limit, then re-run";
  return what + "; check that the directory is writable and has free space, then re-run";
}

AtomicOutput::AtomicOutput(const std::filesystem::path& final_path, const std::string& temp_prefix)
    : final_(final_path) {
  std::filesystem::path dir = final_.parent_path();
  std::string tmpl = (dir / (temp_prefix.empty() ? "." + final_.filename().string() + ".tmp." : temp_prefix)).string();
  tmpl += "XXXXXX";
  fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd_ < 0)
    throw Error("cannot create a temporary file in '" + (dir.empty() ? std::string(".") : dir.string()) +
                "': " + errno_text() + "; check that the directory exists and is writable");
  temp_ = tmpl;
  // mkostemp creates 0600; published files are world-readable like any other output.
  ::fchmod(fd_, 0644);
}

AtomicOutput::~AtomicOutput() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void create_directories(const std::filesystem::path& dir, const std::string& fix) {
  std::error_code ec;
  if (!std::filesystem::create_directories(dir, ec) && !std::filesystem::is_directory(dir))
    throw Error("cannot create the directory " + dir.string() + (ec ? ": " + ec.message() : "") + "; " + fix);
}

void write_all(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot write " + what + ": " + write_error_text(errno));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void AtomicOutput::write(std::string_view data) { write_all(fd_, data, "'" + temp_.string() + "'"); }

void AtomicOutput::commit() {
  sync();
  publish();
}

void AtomicOutput::sync() {
  if (::fsync(fd_) != 0) throw Error("fsync of '" + temp_.string() + "' failed: " + write_error_text(errno));
  if (::close(std::exchange(fd_, -1)) != 0) throw Error("close of '" + temp_.string() + "' failed: " + errno_text());
}

void AtomicOutput::publish(bool fsync_dir_too) {
  if (fd_ >= 0) throw Error("internal: publish() before sync() of '" + temp_.string() + "'");
  if (::rename(temp_.c_str(), final_.c_str()) != 0)
    throw Error("cannot rename '" + temp_.string() + "' to '" + final_.string() + "': " + errno_text());
  committed_ = true;
  if (fsync_dir_too) fsync_directory(final_.parent_path());
}

bool AtomicOutput::commit_keeping_marker() {
  sync();
  if (::link(temp_.c_str(), final_.c_str()) != 0) {
    if (errno != EEXIST)
      throw Error("cannot link '" + temp_.string() + "' to '" + final_.string() + "': " + errno_text());
    publish();
    return false;
  }
  committed_ = true;
  fsync_directory(final_.parent_path());
  return true;
}

InputFile::InputFile(const std::filesystem::path& p) : path_(p), fd_(::open(p.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0) throw Error("cannot open '" + p.string() + "': " + errno_text() + "; check the path");
  init();
}

InputFile::InputFile(int fd, const std::filesystem::path& shown) : path_(shown), fd_(::fcntl(fd, F_DUPFD_CLOEXEC, 0)) {
  if (fd_ < 0) throw Error("cannot read '" + shown.string() + "': " + errno_text());
  init();
}

void InputFile::init() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error("'" + path_.string() + "' is not a regular file; give the path of a file");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

std::string InputFile::read(std::uint64_t off, std::uint64_t len) const {
  if (off > size_ || len > size_ - off)
    throw Error("'" + path_.string() + "' is truncated or malformed: " + std::to_string(len) + " bytes at offset " +
                std::to_string(off) + " lie past its end");
  std::string buf(static_cast<std::size_t>(len), '\0');
  read_into(off, buf.data(), buf.size());
  return buf;
}

void InputFile::read_into(std::uint64_t off, char* dst, std::size_t len) const {
  for (std::size_t done = 0; done < len;) {
    const ssize_t n = ::pread(fd_, dst + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error("'" + path_.string() + "': read error at offset " + std::to_string(off + done) +
                  (n < 0 ? ": " + errno_text() : std::string(" (the file shrank)")));
    done += static_cast<std::size_t>(n);
  }
}

std::optional<std::string> read_file(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string buf;
  char chunk[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) buf.append(chunk, static_cast<std::size_t>(n));
  const int err = errno;  // close() may change it
  ::close(fd);
  errno = err;
  return n < 0 ? std::nullopt : std::optional<std::string>(std::move(buf));
}

void commit_together(const std::vector<std::unique_ptr<AtomicOutput>>& outs) {
  for (auto& out : outs) out->sync();
  std::set<std::filesystem::path> dirs;
  for (auto& out : outs) {
    out->publish(false);
    dirs.insert(out->final_path().parent_path());
  }
  for (const auto& dir : dirs) fsync_directory(dir);
}

void write_files_atomic(const std::vector<std::pair<std::filesystem::path, std::string>>& files) {
  std::vector<std::unique_ptr<AtomicOutput>> outs;
  for (const auto& [path, data] : files) {
    outs.push_back(std::make_unique<AtomicOutput>(path));
    outs.back()->write(data);
  }
  commit_together(outs);
}

void write_file_atomic(const std::filesystem::path& p, std::string_view data) {
  AtomicOutput out(p);
  out.write(data);
  out.commit();
}

}  // namespace ffpa::core
