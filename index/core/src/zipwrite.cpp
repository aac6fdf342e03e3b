// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// The zip container of the wheel writer: local headers, data descriptors, the central
// directory and ZIP64 records, written deterministically; the bytes come from the
// compression pipeline (deflate.cpp).
#include "ffpa/core/zipwrite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "le_bytes.h"

namespace ffpa::core {

using le::put16;
using le::put32;
using le::put64;

std::pair<std::uint16_t, std::uint16_t> dos_time_date(std::int64_t epoch) {
  constexpr std::int64_t kMin = 315532800;   // 1980-01-01T00:00:00Z, the DOS epoch
  constexpr std::int64_t kMax = 4354819198;  // 2107-12-31T23:59:58Z, the last DOS second
  epoch = std::clamp(epoch, kMin, kMax);
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  const auto time = static_cast<std::uint16_t>((tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2));
  const auto date = static_cast<std::uint16_t>(((tm.tm_year - 80) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday);
  return {time, date};
}

ZipWriter::ZipWriter(AtomicOutput& out, const ZipLayout& layout) : out_(out), layout_(layout) {
  std::tie(dos_time_, dos_date_) = dos_time_date(layout.epoch);
}

namespace {

void copy_raw(AtomicOutput& out, const CompressedEntry& b) {
  int in = ::open(b.raw_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw Error("cannot reopen cache entry '" + b.raw_file.string() + "': " + std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_in{in};
  off_t off = static_cast<off_t>(b.raw_offset);
  std::uint64_t left = b.raw_size;
  // copy_file_range keeps the bytes in the kernel; fall back to pread+write where
  // the filesystems do not support it (EXDEV, ENOSYS, EINVAL...).
  while (left > 0) {
    ssize_t n = ::copy_file_range(in, &off, out.fd(), nullptr, left, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    left -= static_cast<std::uint64_t>(n);
  }
  std::string buf;
  while (left > 0) {
    buf.resize(static_cast<size_t>(std::min<std::uint64_t>(left, 8u << 20)));
    ssize_t n = ::pread(in, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cache entry '" + b.raw_file.string() + "' is shorter than its header says; delete the cache directory");
    out.write(std::string_view(buf.data(), static_cast<size_t>(n)));
    off += n;
    left -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace

std::string ZipWriter::records(const std::string& e_name, std::uint32_t mode, std::uint16_t method, std::uint32_t crc,
                               std::uint64_t size, std::uint64_t csize) {
  const std::uint64_t lim = layout_.zip64_size_threshold;
  if (e_name.size() > 0xFFFF) throw Error("member name too long for zip: " + e_name.substr(0, 80) + "...");
  const bool sizes64 = size >= lim || csize >= lim;
  const bool offset64 = offset_ >= lim;
  const std::uint16_t needed = (sizes64 || offset64) ? 45 : (method == 8 ? 20 : 10);
  // Bit 11: the name is UTF-8. Set only when it matters, as other writers do.
  const bool utf8 = std::any_of(e_name.begin(), e_name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
  const std::uint16_t flags = utf8 ? 0x0800 : 0;

  std::string local;
  put32(local, 0x04034b50);
  put16(local, needed);
  put16(local, flags);
  put16(local, method);
  put16(local, dos_time_);
  put16(local, dos_date_);
  put32(local, crc);
  put32(local, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(csize));
  put32(local, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(size));
  put16(local, static_cast<std::uint16_t>(e_name.size()));
  put16(local, sizes64 ? 20 : 0);
  local += e_name;
  if (sizes64) {
    // The local ZIP64 field carries both sizes, always.
    put16(local, 0x0001);
    put16(local, 16);
    put64(local, size);
    put64(local, csize);
  }

  std::string extra;
  if (sizes64 || offset64) {
    std::string f;
    if (sizes64) {
      put64(f, size);
      put64(f, csize);
    }
    if (offset64) put64(f, offset_);
    put16(extra, 0x0001);
    put16(extra, static_cast<std::uint16_t>(f.size()));
    extra += f;
  }
  std::string& c = central_;
  put32(c, 0x02014b50);
  put16(c, static_cast<std::uint16_t>((3 << 8) | needed));  // made by: Unix, so external_attr holds the mode
  put16(c, needed);
  put16(c, flags);
  put16(c, method);
  put16(c, dos_time_);
  put16(c, dos_date_);
  put32(c, crc);
  put32(c, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(csize));
  put32(c, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(size));
  put16(c, static_cast<std::uint16_t>(e_name.size()));
  put16(c, static_cast<std::uint16_t>(extra.size()));
  put16(c, 0);  // comment
  put16(c, 0);  // disk
  put16(c, 0);  // internal attributes
  put32(c, (0100000u | (mode & 07777u)) << 16);  // S_IFREG | mode
  put32(c, offset64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(offset_));
  c += e_name;
  c += extra;
  return local;
}

void ZipWriter::add(const std::string& e_name, std::uint32_t mode, const CompressedEntry& b) {
  const std::uint64_t csize = b.compressed_size();
  const std::string local = records(e_name, mode, b.method, b.crc32, b.size, csize);
  out_.write(local);
  if (b.raw_file.empty()) {
    out_.write(b.data);
    for (const auto& part : b.parts) out_.write(part);
  } else {
    copy_raw(out_, b);
  }
  offset_ += local.size() + csize;
  ++count_;
}

void ZipWriter::add_pending(const std::string& e_name, std::uint32_t mode, PendingEntries& pending, std::size_t i) {
  // The local header's length is known before the sizes: its ZIP64 field depends
  // on the uncompressed size only, since an entry is never larger than that (a
  // member that does not shrink is stored).
  const std::string_view in = pending.input(i);
  const bool sizes64 = in.size() >= layout_.zip64_size_threshold;
  const std::uint64_t header_len = 30 + e_name.size() + (sizes64 ? 20 : 0);
  const std::uint64_t header_at = offset_;
  out_.write(std::string(header_len, '\0'));
  for (std::size_t c = 0; c < pending.piece_count(i); ++c) out_.write(pending.wait_piece(i, c));
  const PendingEntries::Meta m = pending.wait_meta(i);
  if (m.method == 0) {
    out_.truncate_to(header_at + header_len);
    out_.write(in);
  }
  const std::string local = records(e_name, mode, m.method, m.crc32, m.size, m.compressed_size);
  if (local.size() != header_len) throw Error("internal: streamed local header length changed for " + e_name);
  out_.pwrite(header_at, local);
  offset_ += local.size() + m.compressed_size;
  ++count_;
}

void ZipWriter::finish() {
  const std::uint64_t lim = layout_.zip64_size_threshold;
  const std::uint64_t cd_offset = offset_, cd_size = central_.size(), count = count_;
  out_.write(central_);
  const bool zip64 = count >= layout_.zip64_count_threshold || cd_offset >= lim || cd_size >= lim;
  std::string tail;
  if (zip64) {
    const std::uint64_t z64_offset = cd_offset + cd_size;
    put32(tail, 0x06064b50);
    put64(tail, 44);  // size of the rest of this record
    put16(tail, (3 << 8) | 45);
    put16(tail, 45);
    put32(tail, 0);
    put32(tail, 0);
    put64(tail, count);
    put64(tail, count);
    put64(tail, cd_size);
    put64(tail, cd_offset);
    put32(tail, 0x07064b50);
    put32(tail, 0);
    put64(tail, z64_offset);
    put32(tail, 1);
  }
  put32(tail, 0x06054b50);
  put16(tail, 0);
  put16(tail, 0);
  const std::uint16_t count16 = zip64 ? 0xFFFF : static_cast<std::uint16_t>(count);
  put16(tail, count16);
  put16(tail, count16);
  put32(tail, zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(cd_size));
  put32(tail, zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(cd_offset));
  put16(tail, 0);  // comment
  out_.write(tail);
}

}  // namespace ffpa::core
