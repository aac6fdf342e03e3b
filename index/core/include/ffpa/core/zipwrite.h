// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Deterministic zip writing: members are compressed (in parallel, in fixed
// chunks, optionally through a content-addressed cache) into raw entries, and the
// entries are laid out with fixed timestamps, normalised modes, no extra fields
// beyond ZIP64 where it is required.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ffpa/core/atomic.h"

namespace ffpa::core {

// A member's bytes as they go into the archive: compressed, with what the zip
// headers need. `data` is exactly what the local header is followed by.
struct CompressedEntry {
  std::uint32_t crc32 = 0;
  std::uint64_t size = 0;   // uncompressed
  std::uint16_t method = 8; // 8 deflate, 0 stored
  std::string data;
};

// Level 6 (zlib's default) is the measured sweet spot for the kernel library:
// on a CUDA fatbin-like blob, level 1 leaves the wheel ~10% larger for about
// 1.6x less CPU, level 9 costs ~2x the CPU of 6 for well under 1% smaller output,
// and parallel chunks already bring 6 under the pack-time target. See
// index/bench/README.md for the numbers measured here.
inline constexpr int kDefaultDeflateLevel = 6;

// Members above kChunkThreshold are deflated in kChunkSize pieces, each primed
// with the previous 32 KiB as a preset dictionary (so the ratio barely moves),
// ended with Z_SYNC_FLUSH (Z_FINISH for the last) and concatenated; the CRC is
// joined with crc32_combine. The chunk boundaries depend only on these
// constants, never on the thread count, so the bytes are the same for any --jobs.
inline constexpr std::uint64_t kChunkSize = 1u << 20;
inline constexpr std::uint64_t kChunkThreshold = 4u << 20;
// Names the chunking scheme in cache keys; change it whenever the constants or
// the method above change, so stale cache entries are never reused.
inline constexpr const char* kChunkScheme = "c1m-d32k-v1";
// Members at least this large go through the --deflate-cache; below it a cache
// file costs more than compressing again.
inline constexpr std::uint64_t kCacheThreshold = 1u << 20;

struct DeflateOptions {
  int level = kDefaultDeflateLevel;     // 0..9
  unsigned jobs = 0;                    // 0: std::thread::hardware_concurrency()
  std::filesystem::path cache_dir;      // empty: no cache
};

struct DeflateStats {
  std::uint64_t cache_hits = 0, cache_misses = 0, chunks = 0;
};

// Compresses every input (the sha256_raw of each given alongside, used as the
// cache key) on a pool of threads. Output order matches input order.
std::vector<CompressedEntry> compress_members(const std::vector<std::string_view>& inputs,
                                              const std::vector<std::string>& sha256_raw,
                                              const DeflateOptions& opts, DeflateStats* stats = nullptr);

// Runs fn(0..n-1) on up to `jobs` threads (0: hardware concurrency); the first
// exception thrown by any call is rethrown after all threads have stopped.
void parallel_for(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& fn);

struct ZipEntry {
  std::string name;
  std::uint32_t mode;  // permission bits only (0644 / 0755)
  const CompressedEntry* body;
};

struct ZipLayout {
  std::int64_t epoch = 315532800;  // seconds since 1970 UTC, clamped to the DOS range
  // Thresholds at which ZIP64 structures become mandatory. Tests lower them to
  // exercise the ZIP64 code path on small inputs; the archive is then a valid
  // ZIP64 archive whose 32-bit fields are saturated, which readers must resolve
  // through the ZIP64 records.
  std::uint64_t zip64_size_threshold = 0xFFFFFFFFu;
  std::uint64_t zip64_count_threshold = 0xFFFFu;
};

void write_zip(AtomicOutput& out, const std::vector<ZipEntry>& entries, const ZipLayout& layout);

// DOS (time, date) for an epoch, UTC, clamped to 1980-01-01 .. 2107-12-31.
std::pair<std::uint16_t, std::uint16_t> dos_time_date(std::int64_t epoch);

}  // namespace ffpa::core
