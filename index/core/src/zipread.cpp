// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/core/zipread.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <limits>

#include "ffpa/core/error.h"

namespace ffpa::core {
namespace {

std::uint16_t u16(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<std::uint16_t>(b[0] | (b[1] << 8));
}
std::uint32_t u32(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<std::uint32_t>(b[0]) | (static_cast<std::uint32_t>(b[1]) << 8) |
         (static_cast<std::uint32_t>(b[2]) << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
}
std::uint64_t u64(const char* p) { return u32(p) | (static_cast<std::uint64_t>(u32(p + 4)) << 32); }

std::string read_at(std::ifstream& in, std::uint64_t off, std::uint64_t len, const std::filesystem::path& p) {
  std::string buf(len, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(off));
  in.read(buf.data(), static_cast<std::streamsize>(len));
  if (static_cast<std::uint64_t>(in.gcount()) != len)
    throw Error("'" + p.string() + "' is truncated or not a zip archive (short read at offset " +
                std::to_string(off) + ")");
  return buf;
}

}  // namespace

ZipReader::ZipReader(const std::filesystem::path& p) : path_(p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("cannot open '" + p.string() + "'; check the path");
  in.seekg(0, std::ios::end);
  const std::uint64_t file_size = static_cast<std::uint64_t>(in.tellg());
  const std::string bad = "'" + p.string() + "' is not a valid zip archive";
  if (file_size < 22) throw Error(bad + " (too small)");
  // The end-of-central-directory record sits within the last 22 + 65535 bytes.
  const std::uint64_t tail_len = std::min<std::uint64_t>(file_size, 22 + 65535);
  const std::string tail = read_at(in, file_size - tail_len, tail_len, p);
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
    if (u32(tail.data() + i) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) throw Error(bad + " (no end of central directory record)");
  const char* e = tail.data() + eocd;
  std::uint64_t count = u16(e + 10);
  std::uint64_t cd_size = u32(e + 12);
  std::uint64_t cd_off = u32(e + 16);
  const std::uint64_t eocd_abs = file_size - tail_len + eocd;
  if (eocd_abs >= 20) {
    std::string loc = read_at(in, eocd_abs - 20, 20, p);
    if (u32(loc.data()) == 0x07064b50) {
      const std::uint64_t z64_off = u64(loc.data() + 8);
      std::string rec = read_at(in, z64_off, 56, p);
      if (u32(rec.data()) != 0x06064b50) throw Error(bad + " (ZIP64 end record missing)");
      count = u64(rec.data() + 32);
      cd_size = u64(rec.data() + 40);
      cd_off = u64(rec.data() + 48);
      zip64_ = true;
    }
  }
  if (cd_off + cd_size > file_size) throw Error(bad + " (central directory out of range)");
  const std::string cd = read_at(in, cd_off, cd_size, p);
  size_t pos = 0;
  members_.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (pos + 46 > cd.size() || u32(cd.data() + pos) != 0x02014b50)
      throw Error(bad + " (central directory entry " + std::to_string(i) + " corrupt)");
    const char* c = cd.data() + pos;
    ZipMember m{};
    m.method = u16(c + 10);
    m.dos_time = u16(c + 12);
    m.dos_date = u16(c + 14);
    m.crc32 = u32(c + 16);
    m.compressed_size = u32(c + 20);
    m.size = u32(c + 24);
    const std::uint16_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    m.external_attr = u32(c + 38);
    m.local_header_offset = u32(c + 42);
    m.central_extra_len = extra_len;
    if (pos + 46 + name_len + extra_len + comment_len > cd.size()) throw Error(bad + " (entry overruns directory)");
    m.name.assign(c + 46, name_len);
    // ZIP64 extended information: only the fields whose 32-bit value is saturated
    // are present, in this fixed order.
    const char* x = c + 46 + name_len;
    const char* xend = x + extra_len;
    while (x + 4 <= xend) {
      const std::uint16_t id = u16(x), len = u16(x + 2);
      if (x + 4 + len > xend) break;
      if (id == 0x0001) {
        const char* f = x + 4;
        const char* fend = f + len;
        if (m.size == 0xFFFFFFFFu && f + 8 <= fend) { m.size = u64(f); f += 8; }
        if (m.compressed_size == 0xFFFFFFFFu && f + 8 <= fend) { m.compressed_size = u64(f); f += 8; }
        if (m.local_header_offset == 0xFFFFFFFFu && f + 8 <= fend) { m.local_header_offset = u64(f); f += 8; }
        zip64_ = true;
      }
      x += 4 + len;
    }
    by_name_.emplace(m.name, members_.size());
    members_.push_back(std::move(m));
    pos += 46 + name_len + extra_len + comment_len;
  }
}

const ZipMember* ZipReader::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &members_[it->second];
}

std::string ZipReader::read(std::string_view name) const {
  const ZipMember* m = find(name);
  if (!m) throw Error("'" + path_.string() + "' has no member '" + std::string(name) + "'");
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw Error("cannot open '" + path_.string() + "'");
  const std::string lh = read_at(in, m->local_header_offset, 30, path_);
  if (u32(lh.data()) != 0x04034b50)
    throw Error("'" + path_.string() + "': bad local header for '" + m->name + "'");
  const std::uint64_t data_off = m->local_header_offset + 30 + u16(lh.data() + 26) + u16(lh.data() + 28);
  std::string raw = read_at(in, data_off, m->compressed_size, path_);
  std::string out;
  if (m->method == 0) {
    out = std::move(raw);
  } else if (m->method == 8) {
    out.resize(m->size);
    z_stream zs{};
    if (inflateInit2(&zs, -15) != Z_OK) throw Error("zlib inflateInit2 failed");
    zs.next_in = reinterpret_cast<Bytef*>(raw.data());
    std::uint64_t in_left = raw.size(), out_done = 0;
    int rc = Z_OK;
    // zlib counts in 32-bit units, so members over 4 GiB are fed in slices.
    while (rc == Z_OK) {
      if (zs.avail_in == 0 && in_left > 0) {
        zs.avail_in = static_cast<uInt>(std::min<std::uint64_t>(in_left, 1u << 30));
        in_left -= zs.avail_in;
      }
      const std::uint64_t room = m->size - out_done;
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_done);
      zs.avail_out = static_cast<uInt>(std::min<std::uint64_t>(room, 1u << 30));
      const uInt before = zs.avail_out;
      rc = inflate(&zs, Z_NO_FLUSH);
      out_done += before - zs.avail_out;
      if (rc == Z_BUF_ERROR && room == 0) break;
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || out_done != m->size)
      throw Error("'" + path_.string() + "': member '" + m->name + "' does not inflate to its recorded size");
  } else {
    throw Error("'" + path_.string() + "': member '" + m->name + "' uses compression method " +
                std::to_string(m->method) + "; only stored (0) and deflate (8) are supported");
  }
  // crc32 takes 32-bit lengths; walk large buffers in slices.
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t off = 0; off < out.size();) {
    const uInt n = static_cast<uInt>(std::min<std::uint64_t>(out.size() - off, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(out.data() + off), n);
    off += n;
  }
  if (static_cast<std::uint32_t>(crc) != m->crc32)
    throw Error("'" + path_.string() + "': CRC-32 mismatch in member '" + m->name + "'; the archive is corrupt");
  return out;
}

}  // namespace ffpa::core
