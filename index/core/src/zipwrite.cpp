// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/core/zipwrite.h"

#include <fcntl.h>
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

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"

namespace ffpa::core {
namespace {

constexpr std::uint64_t kWindow = 32768;

void put16(std::string& b, std::uint16_t v) {
  b.push_back(static_cast<char>(v & 0xFF));
  b.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put64(std::string& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint32_t get32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
std::uint64_t get64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

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

std::filesystem::path cache_path(const std::filesystem::path& dir, const std::string& sha_raw, int level) {
  const std::string hex = to_hex(sha_raw);
  return dir / hex.substr(0, 2) / (hex + "-L" + std::to_string(level) + "-" + kChunkScheme + ".zent");
}

// Cache file: "FFPAZE01", crc32, method, 2 reserved bytes, size, compressed size, data.
constexpr std::size_t kCacheHeader = 32;

bool cache_load(const std::filesystem::path& p, std::uint64_t expect_size, CompressedEntry& e) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string buf;
  char tmp[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  ::close(fd);
  if (buf.size() < kCacheHeader || buf.compare(0, 8, "FFPAZE01") != 0) return false;
  const std::uint64_t size = get64(buf.data() + 16), csize = get64(buf.data() + 24);
  if (size != expect_size || csize != buf.size() - kCacheHeader) return false;
  e.crc32 = get32(buf.data() + 8);
  e.method = static_cast<std::uint16_t>(static_cast<unsigned char>(buf[12]) | (static_cast<unsigned char>(buf[13]) << 8));
  e.size = size;
  e.data = buf.substr(kCacheHeader);
  return true;
}

void cache_store(const std::filesystem::path& p, const CompressedEntry& e) {
  std::string buf = "FFPAZE01";
  put32(buf, e.crc32);
  put16(buf, e.method);
  put16(buf, 0);
  put64(buf, e.size);
  put64(buf, e.data.size());
  buf += e.data;
  std::filesystem::create_directories(p.parent_path());
  write_file_atomic(p, buf);
}

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

std::vector<CompressedEntry> compress_members(const std::vector<std::string_view>& inputs,
                                              const std::vector<std::string>& sha256_raw, const DeflateOptions& opts,
                                              DeflateStats* stats) {
  if (opts.level < 0 || opts.level > 9)
    throw Error("deflate level " + std::to_string(opts.level) + " is out of range; use 0 to 9");
  if (sha256_raw.size() != inputs.size()) throw Error("compress_members: one sha256 per input is required");
  const unsigned jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
  const bool use_cache = !opts.cache_dir.empty();
  std::vector<CompressedEntry> out(inputs.size());
  DeflateStats local;

  // Per member: either a cache hit, one whole-member task, or one task per chunk.
  std::vector<std::vector<std::string>> pieces(inputs.size());
  std::vector<std::vector<std::uint32_t>> piece_crcs(inputs.size());
  std::vector<bool> pending(inputs.size(), false);
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string_view in = inputs[i];
    if (use_cache && in.size() >= kCacheThreshold &&
        cache_load(cache_path(opts.cache_dir, sha256_raw[i], opts.level), in.size(), out[i])) {
      ++local.cache_hits;
      continue;
    }
    if (use_cache && in.size() >= kCacheThreshold) ++local.cache_misses;
    pending[i] = true;
    const std::uint64_t n_chunks = in.size() > kChunkThreshold ? (in.size() + kChunkSize - 1) / kChunkSize : 1;
    pieces[i].resize(n_chunks);
    piece_crcs[i].resize(n_chunks);
    local.chunks += n_chunks;
    for (std::uint64_t c = 0; c < n_chunks; ++c) {
      tasks.emplace_back([&, i, c, n_chunks, in]() {
        const std::uint64_t begin = n_chunks == 1 ? 0 : c * kChunkSize;
        const std::string_view piece = n_chunks == 1 ? in : in.substr(begin, kChunkSize);
        const std::string_view dict = begin == 0 ? std::string_view() : in.substr(begin - std::min(begin, kWindow), std::min(begin, kWindow));
        pieces[i][c] = deflate_piece(piece, dict, opts.level, c + 1 == n_chunks);
        piece_crcs[i][c] = crc_of(piece);
      });
    }
  }
  run_pool(tasks, jobs);

  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!pending[i]) continue;
    CompressedEntry& e = out[i];
    e.size = inputs[i].size();
    uLong crc = piece_crcs[i][0];
    std::uint64_t total = pieces[i][0].size();
    for (size_t c = 1; c < pieces[i].size(); ++c) {
      const std::uint64_t len = std::min<std::uint64_t>(kChunkSize, inputs[i].size() - c * kChunkSize);
      crc = crc32_combine(crc, piece_crcs[i][c], static_cast<z_off_t>(len));
      total += pieces[i][c].size();
    }
    e.crc32 = static_cast<std::uint32_t>(crc);
    if (total >= e.size) {
      // Incompressible: stored costs no inflate time and is never larger.
      e.method = 0;
      e.data.assign(inputs[i].data(), inputs[i].size());
    } else {
      e.method = 8;
      e.data.reserve(total);
      for (auto& p : pieces[i]) {
        e.data += p;
        std::string().swap(p);
      }
    }
    if (use_cache && e.size >= kCacheThreshold) cache_store(cache_path(opts.cache_dir, sha256_raw[i], opts.level), e);
  }
  if (stats) *stats = local;
  return out;
}

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

void write_zip(AtomicOutput& out, const std::vector<ZipEntry>& entries, const ZipLayout& layout) {
  const auto [dos_time, dos_date] = dos_time_date(layout.epoch);
  const std::uint64_t lim = layout.zip64_size_threshold;
  std::string central;
  std::uint64_t offset = 0;
  for (const ZipEntry& e : entries) {
    const CompressedEntry& b = *e.body;
    if (e.name.size() > 0xFFFF) throw Error("member name too long for zip: " + e.name.substr(0, 80) + "...");
    const bool sizes64 = b.size >= lim || b.data.size() >= lim;
    const bool offset64 = offset >= lim;
    const std::uint16_t needed = (sizes64 || offset64) ? 45 : (b.method == 8 ? 20 : 10);
    // Bit 11: the name is UTF-8. Set only when it matters, as other writers do.
    const bool utf8 = std::any_of(e.name.begin(), e.name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    const std::uint16_t flags = utf8 ? 0x0800 : 0;

    std::string local;
    put32(local, 0x04034b50);
    put16(local, needed);
    put16(local, flags);
    put16(local, b.method);
    put16(local, dos_time);
    put16(local, dos_date);
    put32(local, b.crc32);
    put32(local, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(b.data.size()));
    put32(local, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(b.size));
    put16(local, static_cast<std::uint16_t>(e.name.size()));
    put16(local, sizes64 ? 20 : 0);
    local += e.name;
    if (sizes64) {
      // The local ZIP64 field carries both sizes, always.
      put16(local, 0x0001);
      put16(local, 16);
      put64(local, b.size);
      put64(local, b.data.size());
    }
    out.write(local);
    out.write(b.data);

    std::string extra;
    if (sizes64 || offset64) {
      std::string f;
      if (sizes64) {
        put64(f, b.size);
        put64(f, b.data.size());
      }
      if (offset64) put64(f, offset);
      put16(extra, 0x0001);
      put16(extra, static_cast<std::uint16_t>(f.size()));
      extra += f;
    }
    put32(central, 0x02014b50);
    put16(central, static_cast<std::uint16_t>((3 << 8) | needed));  // made by: Unix, so external_attr holds the mode
    put16(central, needed);
    put16(central, flags);
    put16(central, b.method);
    put16(central, dos_time);
    put16(central, dos_date);
    put32(central, b.crc32);
    put32(central, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(b.data.size()));
    put32(central, sizes64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(b.size));
    put16(central, static_cast<std::uint16_t>(e.name.size()));
    put16(central, static_cast<std::uint16_t>(extra.size()));
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, (0100000u | (e.mode & 07777u)) << 16);  // S_IFREG | mode
    put32(central, offset64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(offset));
    central += e.name;
    central += extra;
    offset += local.size() + b.data.size();
  }
  const std::uint64_t cd_offset = offset, cd_size = central.size(), count = entries.size();
  out.write(central);
  const bool zip64 = count >= layout.zip64_count_threshold || cd_offset >= lim || cd_size >= lim;
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
  out.write(tail);
}

}  // namespace ffpa::core
