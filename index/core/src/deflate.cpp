// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// The compression pipeline of the wheel writer: members deflated in chunks on a pool
// of threads (stored segments for incompressible data), the content-addressed deflate
// cache, and PendingEntries, which hands finished pieces to ZipWriter (zipwrite.cpp)
// while later ones are still being compressed.
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
namespace {

using le::get32;
using le::get64;
using le::put16;
using le::put32;
using le::put64;

constexpr std::uint64_t kWindow = 32768;


std::uint32_t crc_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t off = 0; off < data.size();) {
    const uInt n = static_cast<uInt>(std::min<std::uint64_t>(data.size() - off, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + off), n);
    off += n;
  }
  return static_cast<std::uint32_t>(crc);
}

// One raw deflate stream over `data`, primed with `dict`; `last` ends it with
// Z_FINISH, otherwise Z_SYNC_FLUSH leaves it byte-aligned for concatenation.
std::string deflate_piece(std::string_view data, std::string_view dict, int level, bool last) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error("zlib deflateInit2 failed (level " + std::to_string(level) + ")");
  struct End {
    z_stream* z;
    ~End() { deflateEnd(z); }
  } end{&zs};
  if (!dict.empty() && level > 0)
    deflateSetDictionary(&zs, reinterpret_cast<const Bytef*>(dict.data()), static_cast<uInt>(dict.size()));
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(data.size())) + 16);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, last ? Z_FINISH : Z_SYNC_FLUSH);
  if ((last && rc != Z_STREAM_END) || (!last && rc != Z_OK) || zs.avail_in != 0)
    throw Error("zlib deflate failed (rc " + std::to_string(rc) + ")");
  out.resize(zs.total_out);
  return out;
}

// --- Chunks with stored segments (levels 1-9) -------------------------------
//
// A segment is judged incompressible by two integer tests, both functions of the
// bytes alone (no floating point, so no libm differences between machines):
//  1. its byte histogram is near-uniform: sum of squared counts <= 1.05 x that of
//     a uniform histogram (collision entropy >= ~7.93 bits/byte), so Huffman coding
//     cannot gain more than a fraction of a percent;
//  2. a probe, deflating its first kProbe bytes with the preceding 32 KiB as the
//     dictionary at the member's level, saves under 1%. This catches high-entropy
//     bytes that repeat (a table or blob copied twice), where LZ77 would still win:
//     without it libnvrtc lost 0.6% of size, with it 0.04%.
constexpr std::uint64_t kMinStoredSegment = 4096;
constexpr std::uint64_t kProbe = 2048;

class ChunkDeflater {
 public:
  explicit ChunkDeflater(int level) : level_(level) {
    if (deflateInit2(&zs_, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw Error("zlib deflateInit2 failed (level " + std::to_string(level) + ")");
  }
  ~ChunkDeflater() { deflateEnd(&zs_); }
  ChunkDeflater(const ChunkDeflater&) = delete;
  ChunkDeflater& operator=(const ChunkDeflater&) = delete;

  // Appends to `out` raw deflate data for in[begin, end), primed with the 32 KiB
  // before `begin`; `last` ends the stream, otherwise it ends byte-aligned.
  void deflate_range(std::string_view in, std::uint64_t begin, std::uint64_t end, bool last, std::string& out) {
    if (used_) deflateReset(&zs_);
    used_ = true;
    const std::uint64_t dict_len = std::min(begin, kWindow);
    if (dict_len > 0)
      deflateSetDictionary(&zs_, reinterpret_cast<const Bytef*>(in.data() + begin - dict_len), static_cast<uInt>(dict_len));
    const std::uint64_t n = end - begin;
    const size_t at = out.size();
    out.resize(at + deflateBound(&zs_, static_cast<uLong>(n)) + 16);
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + begin));
    zs_.avail_in = static_cast<uInt>(n);
    zs_.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    zs_.avail_out = static_cast<uInt>(out.size() - at);
    const int rc = deflate(&zs_, last ? Z_FINISH : Z_SYNC_FLUSH);
    if ((last && rc != Z_STREAM_END) || (!last && rc != Z_OK) || zs_.avail_in != 0)
      throw Error("zlib deflate failed (rc " + std::to_string(rc) + ")");
    out.resize(out.size() - zs_.avail_out);
  }

  bool incompressible_segment(std::string_view in, std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t n = end - begin;
    if (n < kMinStoredSegment) return false;
    std::uint32_t h[4][256] = {};
    const auto* p = reinterpret_cast<const unsigned char*>(in.data() + begin);
    std::uint64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      ++h[0][p[i]];
      ++h[1][p[i + 1]];
      ++h[2][p[i + 2]];
      ++h[3][p[i + 3]];
    }
    for (; i < n; ++i) ++h[0][p[i]];
    std::uint64_t sq = 0;
    for (int b = 0; b < 256; ++b) {
      const std::uint64_t c = std::uint64_t{h[0][b]} + h[1][b] + h[2][b] + h[3][b];
      sq += c * c;
    }
    // sq <= 1.05 * n^2 / 256, in integers (n <= 64 KiB: no overflow).
    if (sq * 256 * 100 > 105 * n * n) return false;
    probe_.clear();
    deflate_range(in, begin, begin + std::min(n, kProbe), false, probe_);
    return probe_.size() * 100 >= std::min(n, kProbe) * 99;
  }

 private:
  int level_;
  z_stream zs_{};
  bool used_ = false;
  std::string probe_;
};

// Stored blocks for in[begin, end) at a byte boundary (the stream is aligned after
// Z_SYNC_FLUSH and at its start): header byte BFINAL|BTYPE=00, LEN, NLEN, bytes.
void append_stored(std::string_view in, std::uint64_t begin, std::uint64_t end, bool last, std::string& out) {
  do {
    const std::uint64_t n = std::min<std::uint64_t>(end - begin, 65535);
    const bool final_block = last && begin + n == end;
    out.push_back(final_block ? '\x01' : '\x00');
    out.push_back(static_cast<char>(n & 0xFF));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(~n & 0xFF));
    out.push_back(static_cast<char>((~n >> 8) & 0xFF));
    out.append(in.data() + begin, n);
    begin += n;
  } while (begin < end);
}

// One chunk in[begin, end) of a member: runs of incompressible segments are
// stored, the rest deflated (each run primed with the 32 KiB before it, so the
// ratio of compressible data is unchanged). `last`: the member's final chunk.
std::string deflate_chunk(std::string_view in, std::uint64_t begin, std::uint64_t end, int level, bool last) {
  ChunkDeflater z(level);
  std::string out;
  out.reserve(end - begin + (end - begin) / 1000 + 64);
  // Classify the segments, then emit maximal runs of one kind.
  std::vector<std::pair<std::uint64_t, bool>> runs;  // (start, stored)
  for (std::uint64_t s = begin; s < end; s += kSegment) {
    const bool stored = z.incompressible_segment(in, s, std::min(end, s + kSegment));
    if (runs.empty() || runs.back().second != stored) runs.emplace_back(s, stored);
  }
  if (runs.empty()) runs.emplace_back(begin, false);  // an empty member: one empty final block
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::uint64_t rb = runs[r].first, re = r + 1 < runs.size() ? runs[r + 1].first : end;
    const bool final_run = last && r + 1 == runs.size();
    if (runs[r].second) append_stored(in, rb, re, final_run, out);
    else z.deflate_range(in, rb, re, final_run, out);
  }
  return out;
}

std::filesystem::path cache_path(const std::filesystem::path& dir, const std::string& key, int level) {
  const std::string hex = to_hex(key);
  return dir / hex.substr(0, 2) / (hex + "-L" + std::to_string(level) + "-" + kChunkScheme + ".zent");
}

// Cache file: "FFPAZE02", crc32, method, 2 reserved bytes, size, compressed
// size, sha256 of the member (32 bytes), then the raw entry.
constexpr std::size_t kCacheHeader = 64;
constexpr const char kCacheMagic[] = "FFPAZE02";

void run_pool(std::vector<std::function<void()>>& tasks, unsigned jobs) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mu;
  auto worker = [&]() {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= tasks.size()) return;
      try {
        tasks[i]();
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mu);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(tasks.size())));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

void parallel_for(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& fn) {
  std::vector<std::function<void()>> tasks;
  tasks.reserve(n);
  for (std::size_t i = 0; i < n; ++i) tasks.emplace_back([&fn, i]() { fn(i); });
  run_pool(tasks, jobs ? jobs : std::max(1u, std::thread::hardware_concurrency()));
}

std::string content_key(std::string_view data, unsigned jobs) {
  const std::uint64_t n = data.size() > kChunkThreshold ? (data.size() + kChunkSize - 1) / kChunkSize : 1;
  std::vector<std::string> digests(n);
  parallel_for(n, jobs, [&](std::size_t c) {
    digests[c] = sha256_raw(n == 1 ? data : data.substr(c * kChunkSize, kChunkSize));
  });
  Sha256 h;
  std::string head = std::string(kChunkScheme) + '\0';
  put64(head, data.size());
  h.update(head);
  for (const auto& d : digests) h.update(d);
  return h.finish_raw();
}

bool cache_lookup(const DeflateOptions& opts, const std::string& key, std::uint64_t expect_size, CompressedEntry& e) {
  if (opts.cache_dir.empty()) return false;
  const std::filesystem::path p = cache_path(opts.cache_dir, key, opts.level);
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char h[kCacheHeader];
  struct stat st {};
  const bool ok = ::pread(fd, h, kCacheHeader, 0) == static_cast<ssize_t>(kCacheHeader) && ::fstat(fd, &st) == 0;
  ::close(fd);
  if (!ok || std::memcmp(h, kCacheMagic, 8) != 0) return false;
  const std::uint64_t size = get64(h + 16), csize = get64(h + 24);
  if (size != expect_size || csize + kCacheHeader != static_cast<std::uint64_t>(st.st_size)) return false;
  e.crc32 = get32(h + 8);
  e.method = static_cast<std::uint16_t>(static_cast<unsigned char>(h[12]) | (static_cast<unsigned char>(h[13]) << 8));
  e.size = size;
  e.data.clear();
  e.parts.clear();
  e.raw_file = p;
  e.raw_offset = kCacheHeader;
  e.raw_size = csize;
  e.sha256_raw.assign(h + 32, 32);
  return true;
}

void cache_store(const DeflateOptions& opts, const std::string& key, const CompressedEntry& e) {
  if (opts.cache_dir.empty()) return;
  if (e.sha256_raw.size() != 32 || !e.raw_file.empty()) throw Error("cache_store: needs an in-memory entry and its sha256");
  const std::filesystem::path p = cache_path(opts.cache_dir, key, opts.level);
  std::string h = kCacheMagic;
  put32(h, e.crc32);
  put16(h, e.method);
  put16(h, 0);
  put64(h, e.size);
  put64(h, e.compressed_size());
  h += e.sha256_raw;
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) throw Error("cannot create the deflate cache '" + p.parent_path().string() + "': " + ec.message());
  AtomicOutput out(p);
  out.write(h);
  out.write(e.data);
  for (const auto& part : e.parts) out.write(part);
  out.commit();
}

PendingEntries::PendingEntries(std::vector<std::string_view> inputs, const DeflateOptions& opts, DeflateStats* stats)
    : inputs_(std::move(inputs)), opts_(opts), members_(inputs_.size()) {
  if (opts.level < 0 || opts.level > 9)
    throw Error("deflate level " + std::to_string(opts.level) + " is out of range; use 0 to 9");
  const unsigned jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t chunks = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::string_view in = inputs_[i];
    const std::uint64_t n_chunks = in.size() > kChunkThreshold ? (in.size() + kChunkSize - 1) / kChunkSize : 1;
    Member& m = members_[i];
    m.pieces.resize(n_chunks);
    m.crcs.resize(n_chunks);
    m.ready.assign(n_chunks, 0);
    m.left = n_chunks;
    chunks += n_chunks;
    for (std::uint64_t c = 0; c < n_chunks; ++c) {
      tasks_.emplace_back([this, i, c, n_chunks, in]() {
        const int level = opts_.level;
        const std::uint64_t begin = n_chunks == 1 ? 0 : c * kChunkSize;
        const std::string_view piece = n_chunks == 1 ? in : in.substr(begin, kChunkSize);
        std::string out;
        try {
          if (level == 0) {
            const std::uint64_t dict_len = std::min(begin, kWindow);
            out = deflate_piece(piece, in.substr(begin - dict_len, dict_len), 0, c + 1 == n_chunks);
          } else {
            out = deflate_chunk(in, begin, begin + piece.size(), level, c + 1 == n_chunks);
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu_);
          if (!failure_) failure_ = std::current_exception();
          cv_.notify_all();
          throw;
        }
        const std::uint32_t crc = crc_of(piece);
        std::lock_guard<std::mutex> lock(mu_);
        Member& m = members_[i];
        m.pieces[c] = std::move(out);
        m.crcs[c] = crc;
        m.ready[c] = 1;
        if (--m.left == 0) {
          // The member is complete: join the CRCs, choose deflated or stored.
          uLong joined = m.crcs[0];
          std::uint64_t total = m.pieces[0].size();
          for (size_t k = 1; k < m.pieces.size(); ++k) {
            const std::uint64_t len = std::min<std::uint64_t>(kChunkSize, in.size() - k * kChunkSize);
            joined = crc32_combine(joined, m.crcs[k], static_cast<z_off_t>(len));
            total += m.pieces[k].size();
          }
          m.meta.crc32 = static_cast<std::uint32_t>(joined);
          m.meta.size = in.size();
          // Incompressible: stored costs no inflate time and is never larger.
          m.meta.method = total >= in.size() ? 0 : 8;
          m.meta.compressed_size = m.meta.method == 0 ? in.size() : total;
          m.done = true;
        }
        cv_.notify_all();
      });
    }
  }
  if (stats) stats->chunks += chunks;
  pool_ = std::thread([this, jobs]() {
    try {
      run_pool(tasks_, jobs);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_) failure_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  });
}

PendingEntries::~PendingEntries() {
  if (pool_.joinable()) pool_.join();
}

void PendingEntries::wait_until(const std::function<bool()>& ok) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&]() { return failure_ || ok() || finished_; });
  if (failure_) std::rethrow_exception(failure_);
  if (!ok()) throw Error("internal: compression ended without producing a piece");
}

std::string_view PendingEntries::wait_piece(std::size_t i, std::size_t c) {
  wait_until([&]() { return members_[i].ready[c] != 0; });
  return members_[i].pieces[c];  // never modified again before finish()
}

PendingEntries::Meta PendingEntries::wait_meta(std::size_t i) {
  wait_until([&]() { return members_[i].done; });
  return members_[i].meta;
}

std::vector<CompressedEntry> PendingEntries::finish() {
  if (pool_.joinable()) pool_.join();
  if (failure_) std::rethrow_exception(failure_);
  std::vector<CompressedEntry> out(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    CompressedEntry& e = out[i];
    e.size = m.meta.size;
    e.crc32 = m.meta.crc32;
    e.method = m.meta.method;
    if (e.method == 0) e.data.assign(inputs_[i].data(), inputs_[i].size());
    else if (m.pieces.size() == 1) e.data = std::move(m.pieces[0]);
    else e.parts = std::move(m.pieces);
  }
  return out;
}

void cache_store_pending(const DeflateOptions& opts, const std::string& key, PendingEntries& pending, std::size_t i,
                         const std::function<std::string()>& sha256_raw) {
  if (opts.cache_dir.empty()) return;
  const std::filesystem::path p = cache_path(opts.cache_dir, key, opts.level);
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) throw Error("cannot create the deflate cache '" + p.parent_path().string() + "': " + ec.message());
  AtomicOutput out(p);
  out.write(std::string(kCacheHeader, '\0'));
  for (std::size_t c = 0; c < pending.piece_count(i); ++c) out.write(pending.wait_piece(i, c));
  const PendingEntries::Meta m = pending.wait_meta(i);
  if (m.method == 0) {
    out.truncate_to(kCacheHeader);
    out.write(pending.input(i));
  }
  const std::string sha = sha256_raw();
  if (sha.size() != 32) throw Error("cache_store_pending: needs the member's sha256");
  std::string h = kCacheMagic;
  put32(h, m.crc32);
  put16(h, m.method);
  put16(h, 0);
  put64(h, m.size);
  put64(h, m.compressed_size);
  h += sha;
  out.pwrite(0, h);
  out.commit();
}

std::vector<CompressedEntry> compress_members(const std::vector<std::string_view>& inputs, const DeflateOptions& opts,
                                              DeflateStats* stats) {
  PendingEntries pending(inputs, opts, stats);
  return pending.finish();
}

}  // namespace ffpa::core
