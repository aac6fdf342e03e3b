// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Deterministic zip writing: each member is deflated once (members in parallel), and
// the entries are laid out with fixed timestamps, normalised modes and no extra
// fields beyond ZIP64 where it is required.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffpa/core/atomic.h"
#include "ffpa/core/hash.h"

namespace ffpa::core {

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
