// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Deterministic zip writing: members are compressed (in parallel, in fixed
// chunks, optionally through a content-addressed cache) into raw entries, and the
// entries are laid out with fixed timestamps, normalised modes, no extra fields
// beyond ZIP64 where it is required.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <string_view>
#include <vector>

#include "ffpa/core/atomic.h"

namespace ffpa::core {

// A member's bytes as they go into the archive: compressed, with what the zip
// headers need. `data` (or, for a chunked member, the concatenation of `parts`)
// is exactly what the local header is followed by.
struct CompressedEntry {
  std::uint32_t crc32 = 0;
  std::uint64_t size = 0;   // uncompressed
  std::uint16_t method = 8; // 8 deflate, 0 stored
  std::string data;
  // A member deflated in chunks keeps its chunks here (and `data` empty): joining
  // 150 MB of pieces would cost a copy into fresh memory, which on this kind of
  // VM (pages first touched are slow) took 0.1-0.4 s; the writer writes them in order.
  std::vector<std::string> parts;
  // A cache hit leaves `data` empty and names the cache file holding the raw
  // entry instead; the writer copies it in the kernel (copy_file_range), so a
  // large cached member costs no user-space copy at all.
  std::filesystem::path raw_file;
  std::uint64_t raw_offset = 0;
  std::uint64_t raw_size = 0;
  // The member's sha256 (raw), known without rehashing when it came from the cache.
  std::string sha256_raw;
  std::uint64_t compressed_size() const {
    if (!raw_file.empty()) return raw_size;
    std::uint64_t n = data.size();
    for (const auto& p : parts) n += p.size();
    return n;
  }
  // The in-memory bytes joined (tests and small members; not for a cache hit).
  std::string bytes() const {
    std::string out = data;
    for (const auto& p : parts) out += p;
    return out;
  }
};

// Level 1, measured (index/bench/README.md) on a real CUDA 13 library
// (libcusparse, 162.6 MB; its fatbins are already compressed by nvcc) and on a
// synthetic SASS-like blob (160 MB, a third random):
//   level   CUDA lib: CPU s / wheel MB     synthetic: CPU s / wheel MB
//     1          2.86 / 146.72                  1.74 / 87.71
//     6          3.22 / 145.90                  4.80 / 83.10
//     9          ~3.9 / 145.89                 ~24.7 / 80.64
// On the real library every level above 1 buys under 0.6% of size; on
// uncompressed SASS level 6 costs 2.8x the CPU for 5%, level 9 14x for 8%.
// Pack time is what the release waits for on every re-release, so the default is
// the fast end; --level 6 remains available for a size-first build. With the
// stored segments below (wall s / wheel MB, --jobs 2): CUDA lib 0.82 / 146.82 at
// level 1, 1.21 / 146.03 at 6; synthetic 1.07 / 87.55 and 4.03 / 83.02: same choice.
inline constexpr int kDefaultDeflateLevel = 1;

// Members above kChunkThreshold are deflated in kChunkSize pieces, each primed
// with the previous 32 KiB as a preset dictionary (so the ratio barely moves),
// ended with Z_SYNC_FLUSH (Z_FINISH for the last) and concatenated; the CRC is
// joined with crc32_combine. The chunk boundaries depend only on these
// constants, never on the thread count, so the bytes are the same for any --jobs.
//
// Inside a chunk (levels 1-9), each kSegment of input that looks incompressible
// is written as deflate *stored* blocks instead of being run through zlib
// (see incompressible_segment() in zipwrite.cpp for the test). Measured on
// libcusparse.so.12 (CUDA 13, 162.6 MB): 126 of its 156 MiB are nvcc-compressed
// fatbins on which level 1 spent 2.3 of its 2.6 CPU seconds to save 0.08%; on the
// synthetic blob the random third. Storing those segments costs under 0.1% of
// wheel size on every CUDA library tried (cusparse, cufft, nccl, nvrtc) and cuts
// the deflate CPU of a cold pack by ~4x (cusparse) and ~1/3 (synthetic). The
// decision is a pure function of the bytes (integer arithmetic, fixed probe), so
// the output stays the same for any --jobs and with or without the cache.
inline constexpr std::uint64_t kChunkSize = 1u << 20;
inline constexpr std::uint64_t kChunkThreshold = 4u << 20;
inline constexpr std::uint64_t kSegment = 64u << 10;
// Names the chunking scheme in cache keys; change it whenever the constants or
// the method above change, so stale cache entries are never reused.
inline constexpr const char* kChunkScheme = "c1m-d32k-s64k-v2";
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

// The cache key of a member's bytes: sha256 over (scheme tag, size, the sha256 of
// each kChunkSize piece). It is as collision-resistant as sha256 itself, and unlike
// a plain sha256 of a 160 MB library it is computed on all threads at once, so a
// cache hit does not wait for one core to hash the whole file (the RECORD sha256
// runs alongside the copy instead). Members below kChunkThreshold use one piece.
std::string content_key(std::string_view data, unsigned jobs);

// Compresses every input on a pool of threads (no cache). Output order matches
// input order; the bytes do not depend on opts.jobs.
std::vector<CompressedEntry> compress_members(const std::vector<std::string_view>& inputs,
                                              const DeflateOptions& opts, DeflateStats* stats = nullptr);

// compress_members() observed while it runs: pieces (chunks) become readable one
// by one, so writers can stream a 150 MB member into several wheels (and the disk
// can start writing them) while later chunks are still being compressed. The
// bytes are exactly those of compress_members(), which is built on this.
class PendingEntries {
 public:
  // Starts compressing on a background pool; `inputs` must outlive this object.
  PendingEntries(std::vector<std::string_view> inputs, const DeflateOptions& opts, DeflateStats* stats = nullptr);
  ~PendingEntries();  // waits for the pool
  PendingEntries(const PendingEntries&) = delete;
  PendingEntries& operator=(const PendingEntries&) = delete;

  struct Meta {
    std::uint32_t crc32 = 0;
    std::uint16_t method = 8;
    std::uint64_t size = 0, compressed_size = 0;
  };
  std::size_t size() const { return inputs_.size(); }
  std::string_view input(std::size_t i) const { return inputs_[i]; }
  std::size_t piece_count(std::size_t i) const { return members_[i].pieces.size(); }
  // Blocks until piece c of member i is compressed; rethrows a compression failure.
  // The view stays valid until finish().
  std::string_view wait_piece(std::size_t i, std::size_t c);
  // Blocks until member i is complete. method 0 (stored) means the pieces are not
  // the entry: the member did not shrink, and its raw bytes are the entry.
  Meta wait_meta(std::size_t i);
  // Waits for everything and hands the entries over (pieces moved, not copied).
  std::vector<CompressedEntry> finish();

 private:
  struct Member {
    std::vector<std::string> pieces;
    std::vector<std::uint32_t> crcs;
    std::vector<char> ready;
    std::size_t left = 0;
    bool done = false;
    Meta meta;
  };
  void wait_until(const std::function<bool()>& ok);
  std::vector<std::string_view> inputs_;
  DeflateOptions opts_;
  std::vector<Member> members_;
  std::vector<std::function<void()>> tasks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::exception_ptr failure_;
  bool finished_ = false;
  std::thread pool_;
};

// The --deflate-cache: one file per (content key, level, chunk scheme) holding
// the raw entry, its CRC, sizes and the member's sha256, so a hit costs neither
// compression nor the sequential RECORD hash. Entries are written atomically and
// never modified; a damaged entry reads as a miss.
bool cache_lookup(const DeflateOptions& opts, const std::string& key, std::uint64_t size, CompressedEntry& out);
void cache_store(const DeflateOptions& opts, const std::string& key, const CompressedEntry& e);  // needs e.sha256_raw
// The same cache file for member i of `pending`, streamed as it is compressed;
// sha256_raw() is called once the entry is complete (its header is written last).
void cache_store_pending(const DeflateOptions& opts, const std::string& key, PendingEntries& pending, std::size_t i,
                         const std::function<std::string()>& sha256_raw);

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

// Lays out entries in the order they are added, then the central directory.
class ZipWriter {
 public:
  ZipWriter(AtomicOutput& out, const ZipLayout& layout);
  void add(const std::string& name, std::uint32_t mode /* 0644 or 0755 */, const CompressedEntry& body);
  // The same entry as add() would write for member i of `pending`, streamed piece
  // by piece as it is compressed (its local header is written last, in place).
  void add_pending(const std::string& name, std::uint32_t mode, PendingEntries& pending, std::size_t i);
  void finish();  // central directory and end records; the caller commits `out`

 private:
  // Local header and central record of one entry at offset_; appends the latter.
  std::string records(const std::string& name, std::uint32_t mode, std::uint16_t method, std::uint32_t crc,
                      std::uint64_t size, std::uint64_t csize);
  AtomicOutput& out_;
  ZipLayout layout_;
  std::uint16_t dos_time_, dos_date_;
  std::string central_;
  std::uint64_t offset_ = 0, count_ = 0;
};

// DOS (time, date) for an epoch, UTC, clamped to 1980-01-01 .. 2107-12-31.
std::pair<std::uint16_t, std::uint16_t> dos_time_date(std::int64_t epoch);

}  // namespace ffpa::core
