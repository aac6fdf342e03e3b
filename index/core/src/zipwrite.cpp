// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The wheel writer's zip container and its compression: each member deflated on a
// pool of threads, then local headers, the central directory and ZIP64 records
// written deterministically.
#include "ffpa/core/zip.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <exception>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#include "ffpa/core/error.h"

namespace ffpa::core {
namespace {

// Appends little-endian fields, each given as {bytes, value}, in the order APPNOTE.TXT
// lists a record's fields.
void put(std::string& b, std::initializer_list<std::pair<int, std::uint64_t>> fields) {
  for (const auto& [bytes, v] : fields)
    for (int i = 0; i < bytes; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// deflate counts in 32 bits: inputs are fed to it in pieces of at most this many bytes.
constexpr std::uint64_t kPiece = 1u << 30;

CompressedEntry deflate_member(std::string_view in, int level) {
  CompressedEntry e;
  e.size = in.size();
  e.crc32 = static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(in.data()), in.size()));
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error("zlib deflateInit2 failed (level " + std::to_string(level) + ")");
  struct End {
    z_stream* z;
    ~End() { deflateEnd(z); }
  } end{&zs};
  e.data.resize(deflateBound(&zs, static_cast<uLong>(in.size())));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.next_out = reinterpret_cast<Bytef*>(e.data.data());
  std::uint64_t left = in.size();
  int rc = Z_OK;
  while (rc == Z_OK) {
    const std::uint64_t n = std::min(left, kPiece);
    zs.avail_in = static_cast<uInt>(n);
    left -= n;
    zs.avail_out = static_cast<uInt>(std::min<std::uint64_t>(e.data.size() - zs.total_out, kPiece));
    rc = deflate(&zs, left == 0 ? Z_FINISH : Z_NO_FLUSH);
    left += zs.avail_in;
  }
  if (rc != Z_STREAM_END) throw Error("zlib deflate failed (rc " + std::to_string(rc) + ")");
  e.data.resize(zs.total_out);
  if (e.data.size() >= in.size()) {  // incompressible: stored costs no inflate time and is never larger
    e.method = 0;
    e.data.assign(in.data(), in.size());
  }
  return e;
}

}  // namespace

void parallel_for(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mu;
  auto worker = [&]() {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mu);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < std::min<std::size_t>(jobs, n); ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<CompressedEntry> compress_members(const std::vector<std::string_view>& inputs, const DeflateOptions& opts) {
  if (opts.level < 0 || opts.level > 9)
    throw Error("deflate level " + std::to_string(opts.level) + " is out of range; use 0 to 9");
  std::vector<CompressedEntry> out(inputs.size());
  parallel_for(inputs.size(), opts.jobs, [&](std::size_t i) { out[i] = deflate_member(inputs[i], opts.level); });
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

ZipWriter::ZipWriter(AtomicOutput& out, const ZipLayout& layout) : out_(out), layout_(layout) {
  std::tie(dos_time_, dos_date_) = dos_time_date(layout.epoch);
}

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

  // The fields the local and the central header share, from "version needed" to the name's length.
  auto shared = [&](std::string& h) {
    put(h, {{2, needed}, {2, flags}, {2, method}, {2, dos_time_}, {2, dos_date_}, {4, crc},
            {4, sizes64 ? 0xFFFFFFFFu : csize}, {4, sizes64 ? 0xFFFFFFFFu : size}, {2, e_name.size()}});
  };
  std::string local;
  put(local, {{4, 0x04034b50}});
  shared(local);
  put(local, {{2, sizes64 ? 20 : 0}});
  local += e_name;
  if (sizes64) put(local, {{2, 0x0001}, {2, 16}, {8, size}, {8, csize}});  // the local ZIP64 field: both sizes, always

  std::string extra;
  if (sizes64 || offset64) {
    const int n = (sizes64 ? 16 : 0) + (offset64 ? 8 : 0);
    put(extra, {{2, 0x0001}, {2, n}});
    if (sizes64) put(extra, {{8, size}, {8, csize}});
    if (offset64) put(extra, {{8, offset_}});
  }
  // Made by Unix, so external_attr holds the mode: S_IFREG | mode.
  put(central_, {{4, 0x02014b50}, {2, (3 << 8) | needed}});
  shared(central_);
  put(central_, {{2, extra.size()}, {2, 0} /* comment */, {2, 0} /* disk */, {2, 0} /* internal attributes */,
                 {4, (0100000u | (mode & 07777u)) << 16}, {4, offset64 ? 0xFFFFFFFFu : offset_}});
  central_ += e_name;
  central_ += extra;
  return local;
}

void ZipWriter::write(std::string_view bytes) {
  out_.write(bytes);
  sha_.update(bytes);
  offset_ += bytes.size();
}

void ZipWriter::add(const std::string& e_name, std::uint32_t mode, const CompressedEntry& b) {
  write(records(e_name, mode, b.method, b.crc32, b.size, b.data.size()));
  write(b.data);
  entries_.push_back({e_name, b.size, b.data.size()});
}

std::string ZipWriter::sha256_hex() { return to_hex(sha_.finish_raw()); }

void ZipWriter::finish() {
  const std::uint64_t lim = layout_.zip64_size_threshold;
  const std::uint64_t cd_offset = offset_, cd_size = central_.size(), count = entries_.size();
  write(central_);
  const bool zip64 = count >= layout_.zip64_count_threshold || cd_offset >= lim || cd_size >= lim;
  std::string tail;
  if (zip64)  // the ZIP64 end record, then its locator
    put(tail, {{4, 0x06064b50}, {8, 44}, {2, (3 << 8) | 45}, {2, 45}, {4, 0}, {4, 0}, {8, count}, {8, count},
               {8, cd_size}, {8, cd_offset}, {4, 0x07064b50}, {4, 0}, {8, cd_offset + cd_size}, {4, 1}});
  const std::uint64_t count16 = zip64 ? 0xFFFF : count;
  put(tail, {{4, 0x06054b50}, {2, 0}, {2, 0}, {2, count16}, {2, count16}, {4, zip64 ? 0xFFFFFFFFu : cd_size},
             {4, zip64 ? 0xFFFFFFFFu : cd_offset}, {2, 0} /* comment */});
  write(tail);
}

}  // namespace ffpa::core
