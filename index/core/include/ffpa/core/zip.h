// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The zip container of a wheel: a reader that accepts only what every installer reads
// alike (zipread.cpp), and the deterministic writer (zipwrite.cpp): each member is
// deflated once (members in parallel), and the entries are laid out with fixed
// timestamps, normalised modes and no extra fields beyond ZIP64 where it is required.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ffpa/core/atomic.h"
#include "ffpa/core/hash.h"

namespace ffpa::core {

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
//    (member_name_problem, wheel.h: no directory entries, ASCII, ...);
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

// --- writing ---------------------------------------------------------------------

// A member's bytes as they go into the archive: `data` is exactly what follows its
// local header.
struct CompressedEntry {
  std::uint32_t crc32 = 0;
  std::uint64_t size = 0;    // uncompressed
  std::uint16_t method = 8;  // 8 deflate, 0 stored (a member that does not shrink)
  std::string data;
};

// Level 1, measured on the release's kernel library (index/bench/README.md:
// libffpa_kernels.so, 1.5 MB stripped; one pack, wall s / wheel MB): level 1
// 0.05 / 0.917, level 6 0.10 / 0.881, level 9 0.16 / 0.879. Level 6 would buy 3.9% of
// size for twice the pack time and miss the pack-time target against `wheel pack`;
// --level 6 remains for a size-first build.
inline constexpr int kDefaultDeflateLevel = 1;

struct DeflateOptions {
  int level = kDefaultDeflateLevel;  // 0..9
  unsigned jobs = 0;                 // threads; 0: std::thread::hardware_concurrency()
};

// Deflates every input, one member per task on up to opts.jobs threads. Output order
// matches input order, and the bytes do not depend on opts.jobs.
std::vector<CompressedEntry> compress_members(const std::vector<std::string_view>& inputs, const DeflateOptions& opts);

// Runs fn(0..n-1) on up to `jobs` threads (0: hardware concurrency); the first
// exception thrown by any call is rethrown after all threads have stopped.
void parallel_for(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& fn);

struct ZipLayout {
  std::int64_t epoch = 315532800;  // seconds since 1970 UTC, clamped to the DOS range
  // Thresholds at which ZIP64 structures become mandatory. Tests lower them to
  // exercise the ZIP64 code path on small inputs; the archive is then a valid
  // ZIP64 archive whose 32-bit fields are saturated, which readers must resolve
  // through the ZIP64 records.
  std::uint64_t zip64_size_threshold = 0xFFFFFFFFu;
  std::uint64_t zip64_count_threshold = 0xFFFFu;
};

// One entry as written: what the release manifest reports for a member.
struct WrittenEntry {
  std::string name;
  std::uint64_t size = 0, compressed_size = 0;
};

// Lays out entries in the order they are added, then the central directory; every
// byte it writes is hashed and counted on the way, so the archive's sha256 and size
// are known without reading it back.
class ZipWriter {
 public:
  ZipWriter(AtomicOutput& out, const ZipLayout& layout);
  void add(const std::string& name, std::uint32_t mode /* 0644 or 0755 */, const CompressedEntry& body);
  void finish();  // central directory and end records; the caller commits `out`
  std::string sha256_hex();  // after finish(): of the whole archive
  std::uint64_t size() const { return offset_; }
  const std::vector<WrittenEntry>& entries() const { return entries_; }

 private:
  // Local header and central record of one entry at offset_; appends the latter.
  std::string records(const std::string& name, std::uint32_t mode, std::uint16_t method, std::uint32_t crc,
                      std::uint64_t size, std::uint64_t csize);
  void write(std::string_view bytes);
  AtomicOutput& out_;
  ZipLayout layout_;
  std::uint16_t dos_time_, dos_date_;
  std::string central_;
  std::uint64_t offset_ = 0;
  std::vector<WrittenEntry> entries_;
  Sha256 sha_;
};

// DOS (time, date) for an epoch, UTC, clamped to 1980-01-01 .. 2107-12-31.
std::pair<std::uint16_t, std::uint16_t> dos_time_date(std::int64_t epoch);

}  // namespace ffpa::core
