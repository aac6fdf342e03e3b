// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ffpa::core {

class InputFile;  // the open archive (atomic.h)

struct ZipMember {
  std::string name;
  std::uint64_t size;  // uncompressed
  std::uint32_t crc32;
  std::uint32_t external_attr;
  // Beyond the shared API: what verify and tests need to look at the raw entry.
  std::uint64_t compressed_size = 0;
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint16_t flags = 0;   // general purpose bits; only 1, 2 (deflate options) and 11 (UTF-8) pass
  std::uint64_t local_header_offset = 0;
  std::uint64_t data_offset = 0;  // first byte of the member's data, after its local header
  std::uint16_t dos_time = 0, dos_date = 0;
  std::uint16_t central_extra_len = 0;  // bytes of extra fields in the central entry
};

// What a reader accepts before it trusts an archive's claims. Claimed sizes are
// checked against these and against the archive's own size before anything is
// read, and nothing is ever allocated by a claim: members are inflated in
// bounded chunks, so memory stays flat whatever an archive says.
struct ZipLimits {
  // One member, uncompressed. The largest member we ship is the kernel library
  // (a few hundred MB); 8 GiB leaves room for bundled CUDA libraries.
  std::uint64_t max_member_size = std::uint64_t{8} << 30;
  // All members together, uncompressed.
  std::uint64_t max_total_size = std::uint64_t{32} << 30;
  std::uint64_t max_members = 100000;
  // The central directory is read into memory whole.
  std::uint64_t max_central_directory = std::uint64_t{64} << 20;
};

// Deflate cannot expand data by more than 1032:1 (258 bytes per 2-bit code), so a
// member claiming more than this many bytes per compressed byte lies about its size.
inline constexpr std::uint64_t kMaxDeflateRatio = 1032;

// Reads a zip archive that must be exactly what a careful writer produces, so that
// every other reader (Python's zipfile under pip, uv, libzip) sees the same members
// we do. The constructor checks the whole structure and throws
// ffpa::core::Error naming the first problem:
//  - the end of central directory record ends the file (no comment, no trailing
//    bytes), its ZIP64 record (if any) sits right before it and agrees with it;
//  - the central directory is contiguous, ends where the end records start, and
//    holds exactly the number of entries both records count;
//  - every local header agrees with its central entry (name bytes, flags, method,
//    CRC, sizes), and the local records tile the file from offset 0 up to the
//    central directory: no prepended data, gaps or overlaps;
//  - only stored/deflated, unencrypted entries without data descriptors, with
//    known extra fields, well-formed ZIP64 fields;
//  - names: valid UTF-8 with flag bit 11 or plain ASCII without it, each name
//    once, and each one a file name every installer and OS reads alike
//    (member_name_problem, names.h: no directory entries, ASCII, ...);
//  - claimed sizes within `ZipLimits` and within what the compressed bytes can hold.
// Each read() inflates in bounded chunks and checks the size and CRC-32. The file is
// opened once: every read goes to that descriptor, whatever happens to the path.
class ZipReader {
 public:
  explicit ZipReader(const std::filesystem::path& p, const ZipLimits& limits = {});  // throws ffpa::core::Error
  // Reads the open file `fd` (duplicated; the caller keeps its own); `shown` names it
  // in messages.
  ZipReader(int fd, const std::filesystem::path& shown, const ZipLimits& limits = {});
  const std::vector<ZipMember>& members() const { return members_; }
  const ZipMember* find(std::string_view name) const;
  bool used_zip64() const { return zip64_; }
  // The member's bytes; throws when absent or corrupt, or when it holds more than
  // max_size bytes (callers reading small text files pass a bound).
  std::string read(std::string_view name, std::uint64_t max_size = std::numeric_limits<std::uint64_t>::max()) const;
  // Streams the member's bytes to `sink` in pieces of at most 256 KiB; the size and
  // CRC-32 are checked at the end (throws then, after the pieces were delivered).
  void read_chunks(std::string_view name, const std::function<void(std::string_view)>& sink) const;

 private:
  ZipReader(std::shared_ptr<const InputFile> file, const std::filesystem::path& shown, const ZipLimits& limits);
  std::filesystem::path path_;
  std::shared_ptr<const InputFile> file_;
  std::vector<ZipMember> members_;
  std::unordered_map<std::string, std::size_t> by_name_;
  bool zip64_ = false;
};

}  // namespace ffpa::core
