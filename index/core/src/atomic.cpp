// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/core/atomic.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "ffpa/core/error.h"

namespace ffpa::core {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Dirty pages are handed to the disk every kKickBytes (sync_file_range WRITE, which
// does not wait), so the final fsync finds most of a large output already written
// and the device works while the CPU compresses.
constexpr std::uint64_t kKickBytes = 8u << 20;

}  // namespace

std::string write_error_text(int err) {
  const std::string what = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG)
    return what + " (the disk is full, or a quota or file-size limit such as `ulimit -f` is reached); free space "
                  "or raise the limit, then re-run";
  return what + "; check that the directory is writable and has free space, then re-run";
}

void fsync_directory(const std::filesystem::path& dir) {
  // Makes the rename durable; some filesystems refuse fsync on a directory, which
  // is not worth failing a release for.
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

AtomicOutput::AtomicOutput(const std::filesystem::path& final_path) : final_(final_path) {
  std::filesystem::path dir = final_.parent_path();
  std::string tmpl = (dir / ("." + final_.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd_ < 0)
    throw Error("cannot create a temporary file in '" + (dir.empty() ? std::string(".") : dir.string()) +
                "': " + errno_text() + "; check that the directory exists and is writable");
  temp_ = buf.data();
  // mkostemp creates 0600; published files are world-readable like any other output.
  ::fchmod(fd_, 0644);
}

AtomicOutput::~AtomicOutput() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicOutput::write(std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write '" + temp_.string() + "': " + write_error_text(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  unkicked_ += data.size();
  if (unkicked_ >= kKickBytes) {
    unkicked_ = 0;
    ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);  // advisory: errors surface at fsync
  }
}

void AtomicOutput::pwrite(std::uint64_t offset, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  off_t off = static_cast<off_t>(offset);
  while (left > 0) {
    ssize_t n = ::pwrite(fd_, p, left, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write '" + temp_.string() + "': " + write_error_text(errno));
    }
    p += n;
    off += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicOutput::truncate_to(std::uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0 || ::lseek(fd_, static_cast<off_t>(size), SEEK_SET) < 0)
    throw Error("cannot truncate '" + temp_.string() + "': " + errno_text());
}

void AtomicOutput::commit() {
  sync();
  publish();
}

void AtomicOutput::sync() {
  if (::fsync(fd_) != 0) throw Error("fsync of '" + temp_.string() + "' failed: " + write_error_text(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error("close of '" + temp_.string() + "' failed: " + errno_text());
  }
  fd_ = -1;
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

void write_file_atomic(const std::filesystem::path& p, std::string_view data) {
  AtomicOutput out(p);
  out.write(data);
  out.commit();
}

FileLock::FileLock(const std::filesystem::path& lockfile) {
  fd_ = ::open(lockfile.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("cannot open lock file '" + lockfile.string() + "': " + errno_text() +
                "; check that its directory exists and is writable");
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    std::string msg = errno_text();
    ::close(fd_);
    fd_ = -1;
    throw Error("cannot lock '" + lockfile.string() + "': " + msg);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace ffpa::core
