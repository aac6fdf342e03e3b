// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// A strict zip reader (over 500 lines on purpose: every consistency check between the
// end records, the central directory and the local headers sits beside the parse it guards). pip installs what Python's zipfile reads: it walks the
// central directory by its byte size (not by the end record's count), cuts names at
// NUL, decodes names without flag bit 11 as cp437, takes a name from an Info-ZIP
// Unicode Path field, shifts every offset by data prepended to the archive, and
// never looks at most of a local header. uv reads differently again. So this
// reader accepts only archives on which all of those readings coincide, and
// refuses (naming the problem) everything else; see index/README.md, "Reading
// untrusted wheels".
#include "ffpa/core/zip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>

#include "ffpa/core/error.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"

namespace ffpa::core {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEocdSig = 0x06054b50,
                        kZip64EocdSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr std::uint16_t kFlagUtf8 = 0x0800;
// Bits 1 and 2 only tune deflate; everything else (encryption, data descriptors,
// patched data, strong encryption, masked headers) changes how bytes are read.
constexpr std::uint16_t kAllowedFlags = 0x0002 | 0x0004 | kFlagUtf8;
constexpr std::uint16_t kMaxVersionNeeded = 45;  // 4.5: ZIP64; later versions add methods we refuse anyway
constexpr std::size_t kChunk = 256 * 1024;

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

// printf's rendering of one number, e.g. "0x%04x" for flags, "0%o" for a mode.
std::string format(const char* spec, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}
std::string hex16(std::uint16_t v) { return format("0x%04x", v); }

// Extra-field blocks that change nothing about which bytes a reader installs
// (timestamps, owners), plus ZIP64. Anything else is refused: 0x7075 (Info-ZIP
// Unicode Path) makes Python's zipfile install the member under another name.
bool harmless_extra(std::uint16_t id) { return id == 0x0001 || id == 0x000a || id == 0x5455 || id == 0x7875; }

struct Zip64Fields {
  bool present = false;
  std::string data;
};

// Walks an extra area, which must be a whole number of well-formed blocks of
// known kinds with at most one ZIP64 block; returns that block's payload.
Zip64Fields parse_extra(std::string_view extra, const std::string& where) {
  Zip64Fields z;
  std::size_t pos = 0;
  while (pos < extra.size()) {
    if (extra.size() - pos < 4) throw Error(where + ": truncated extra field; the archive is corrupt");
    const std::uint16_t id = u16(extra.data() + pos), len = u16(extra.data() + pos + 2);
    if (extra.size() - pos - 4 < len)
      throw Error(where + ": extra field " + hex16(id) + " overruns its entry; the archive is corrupt");
    if (!harmless_extra(id))
      throw Error(where + ": extra field " + hex16(id) +
                  " is not accepted (only ZIP64, NTFS/Unix times and Unix owners are; 0x7075 would rename the member "
                  "for Python's zipfile); rebuild the wheel with ffpa-index pack");
    if (id == 0x0001) {
      if (z.present) throw Error(where + ": two ZIP64 extra fields; the archive is corrupt");
      z.present = true;
      z.data.assign(extra.data() + pos + 4, len);
    }
    pos += 4 + static_cast<std::size_t>(len);
  }
  return z;
}

// The rules every member name obeys. `raw` is the name's bytes as stored: first how
// the zip stores it (the UTF-8 flag), then the one rule for installed names
// (member_name_problem, wheel.h).
void check_name(const std::string& raw, std::uint16_t flags, const std::string& archive) {
  const std::string shown = "'" + archive + "': member name '" + printable(raw) + "'";
  if (raw.empty()) throw Error("'" + archive + "': a member has an empty name; the archive is corrupt");
  const bool ascii = std::all_of(raw.begin(), raw.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (raw.find('\0') == std::string::npos && (flags & kFlagUtf8) && !is_valid_utf8(raw))
    throw Error(shown + " is flagged UTF-8 (bit 11) but is not valid UTF-8; pip and twine fail on it: rename the "
                "file in the staged tree to valid UTF-8 and rebuild");
  if (!(flags & kFlagUtf8) && !ascii)
    throw Error(shown + " holds non-ASCII bytes without the UTF-8 flag (bit 11), so pip would decode it as cp437 "
                "into another name; rebuild the wheel with ffpa-index pack, which flags UTF-8 names");
  if (const std::string why = member_name_problem(raw); !why.empty()) throw Error(shown + " " + why);
}

}  // namespace

ZipReader::ZipReader(const std::filesystem::path& p, const ZipLimits& limits)
    : ZipReader(std::make_shared<const InputFile>(p), p, limits) {}

ZipReader::ZipReader(int fd, const std::filesystem::path& shown, const ZipLimits& limits)
    : ZipReader(std::make_shared<const InputFile>(fd, shown), shown, limits) {}

ZipReader::ZipReader(std::shared_ptr<const InputFile> file, const std::filesystem::path& p, const ZipLimits& limits)
    : path_(p), file_(std::move(file)) {
  const InputFile& f = *file_;
  const std::uint64_t file_size = f.size();
  const std::string bad = "'" + p.string() + "' is not a valid zip archive";
  if (file_size < 22) throw Error(bad + " (too small)");

  // The end of central directory record must end the file. An archive comment or
  // bytes appended after it are refused: readers search for the record
  // differently, and a comment can hold a second, fake record.
  const std::string eocd = f.read(file_size - 22, 22);
  if (u32(eocd.data()) != kEocdSig) {
    const std::uint64_t tail_len = std::min<std::uint64_t>(file_size, 22 + 65535);
    const std::string tail = f.read(file_size - tail_len, tail_len);
    const std::size_t at = tail.rfind("PK\x05\x06", std::string::npos, 4);
    if (at == std::string::npos) throw Error(bad + " (no end of central directory record)");
    throw Error(bad + " for a wheel: " + std::to_string(tail_len - at - 22) +
                " bytes follow its end of central directory record (an archive comment or appended data); "
                "wheels carry neither: rebuild it, or cut what was appended");
  }
  const char* e = eocd.data();
  if (u16(e + 20) != 0)
    throw Error(bad + ": its end record claims a " + std::to_string(u16(e + 20)) +
                "-byte comment but ends the file; the archive is corrupt");
  if (u16(e + 4) != 0 || u16(e + 6) != 0 || u16(e + 8) != u16(e + 10))
    throw Error(bad + ": it claims to span several disks; split archives are not wheels");
  std::uint64_t count = u16(e + 10);
  std::uint64_t cd_size = u32(e + 12);
  std::uint64_t cd_off = u32(e + 16);
  std::uint64_t end_records = file_size - 22;  // where the central directory must end

  // ZIP64: the locator sits right before the end record, and the ZIP64 end record
  // right before the locator (Python's zipfile reads it there, whatever the
  // locator's offset says); the 16/32-bit fields must be saturated or agree.
  const std::string loc = file_size >= 22 + 20 ? f.read(file_size - 42, 20) : std::string();
  if (!loc.empty() && u32(loc.data()) == kZip64LocatorSig) {
    if (file_size < 42 + 56) throw Error(bad + ": ZIP64 locator without room for its end record");
    const std::uint64_t z64_at = file_size - 42 - 56;
    if (u32(loc.data() + 4) != 0 || u32(loc.data() + 16) > 1)
      throw Error(bad + ": its ZIP64 locator claims several disks; split archives are not wheels");
    if (u64(loc.data() + 8) != z64_at)
      throw Error(bad + ": its ZIP64 locator points at offset " + std::to_string(u64(loc.data() + 8)) +
                  ", not at the ZIP64 end record right before it (" + std::to_string(z64_at) +
                  "); readers would disagree on the directory: rebuild the wheel");
    const std::string rec = f.read(z64_at, 56);
    if (u32(rec.data()) != kZip64EocdSig) throw Error(bad + " (ZIP64 end record missing before its locator)");
    if (u64(rec.data() + 4) != 44)
      throw Error(bad + ": its ZIP64 end record carries extensible data; wheels have none: rebuild it");
    if (u32(rec.data() + 16) != 0 || u32(rec.data() + 20) != 0 || u64(rec.data() + 24) != u64(rec.data() + 32))
      throw Error(bad + ": its ZIP64 end record claims several disks; split archives are not wheels");
    const std::uint64_t count64 = u64(rec.data() + 32), size64 = u64(rec.data() + 40), off64 = u64(rec.data() + 48);
    if ((count != 0xFFFF && count != count64) || (cd_size != 0xFFFFFFFFu && cd_size != size64) ||
        (cd_off != 0xFFFFFFFFu && cd_off != off64))
      throw Error(bad + ": its end record and ZIP64 end record disagree (entries " + std::to_string(count) + " vs " +
                  std::to_string(count64) + ", directory size " + std::to_string(cd_size) + " vs " +
                  std::to_string(size64) + ", offset " + std::to_string(cd_off) + " vs " + std::to_string(off64) +
                  "); readers would see different members: rebuild the wheel");
    count = count64;
    cd_size = size64;
    cd_off = off64;
    end_records = z64_at;
    zip64_ = true;
  } else if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
    throw Error(bad + ": its end record holds ZIP64 placeholders but there is no ZIP64 end record");
  }

  // The directory ends exactly where the end records begin: anything between
  // them, or data prepended to the archive (which shifts Python's offsets), is
  // refused here or by the tiling check below.
  if (cd_size > end_records || cd_off != end_records - cd_size)
    throw Error(bad + ": its central directory (offset " + std::to_string(cd_off) + ", " + std::to_string(cd_size) +
                " bytes) does not end where the end record begins (offset " + std::to_string(end_records) +
                "); the archive has prepended or inserted data: rebuild the wheel");
  if (cd_size > limits.max_central_directory)
    throw Error(bad + ": its central directory is " + std::to_string(cd_size) + " bytes, more than the limit of " +
                std::to_string(limits.max_central_directory) + "; a wheel's directory is far smaller");
  if (count > limits.max_members)
    throw Error(bad + ": it claims " + std::to_string(count) + " members, more than the limit of " +
                std::to_string(limits.max_members));
  if (count > cd_size / 46)
    throw Error(bad + ": it claims " + std::to_string(count) + " members, which cannot fit in a " +
                std::to_string(cd_size) + "-byte central directory");

  const std::string cd = f.read(cd_off, cd_size);
  std::size_t pos = 0;
  std::uint64_t total = 0;
  while (pos < cd.size()) {
    const std::string entry_no = std::to_string(members_.size());
    if (members_.size() == count)
      throw Error(bad + ": its central directory holds more entries than the " + std::to_string(count) +
                  " its end record counts; pip would install the extra ones (e.g. a .pth file) unseen: "
                  "the wheel is hostile or corrupt, do not publish it");
    if (cd.size() - pos < 46 || u32(cd.data() + pos) != kCentralSig)
      throw Error(bad + ": central directory entry " + entry_no + " is corrupt (bad signature or truncated)");
    const char* c = cd.data() + pos;
    ZipMember m{};
    const std::uint16_t needed = u16(c + 6);
    m.flags = u16(c + 8);
    m.method = u16(c + 10);
    m.dos_time = u16(c + 12);
    m.dos_date = u16(c + 14);
    m.crc32 = u32(c + 16);
    m.compressed_size = u32(c + 20);
    m.size = u32(c + 24);
    const std::uint16_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    const std::uint16_t disk = u16(c + 34);
    m.external_attr = u32(c + 38);
    m.local_header_offset = u32(c + 42);
    m.central_extra_len = extra_len;
    const std::size_t entry_len = 46 + static_cast<std::size_t>(name_len) + extra_len + comment_len;
    if (cd.size() - pos < entry_len) throw Error(bad + ": central directory entry " + entry_no + " overruns the directory");
    m.name.assign(c + 46, name_len);
    check_name(m.name, m.flags, p.string());
    const std::string where = "'" + p.string() + "': member '" + printable(m.name) + "'";
    if (m.flags & 0x0001)
      throw Error(where + " is encrypted; wheels cannot be encrypted");
    if (m.flags & 0x0008)
      throw Error(where + " uses a data descriptor (flag bit 3), whose sizes readers take from different places; "
                  "rebuild the wheel with ffpa-index pack (it writes sizes into the headers)");
    if (m.flags & ~kAllowedFlags)
      throw Error(where + " sets general purpose flags " + hex16(m.flags) + " that wheels do not use; rebuild it");
    if (m.method != 0 && m.method != 8)
      throw Error(where + " uses compression method " + std::to_string(m.method) +
                  "; only stored (0) and deflate (8) are accepted, as pip requires: rebuild the wheel");
    if (needed > kMaxVersionNeeded)
      throw Error(where + " needs zip version " + std::to_string(needed / 10) + "." + std::to_string(needed % 10) +
                  " to extract; only up to 4.5 (ZIP64) is accepted");
    if (disk != 0) throw Error(where + " claims to start on disk " + std::to_string(disk) + "; split archives are not wheels");
    // Unix modes: only regular files and directories, without set-id bits. pip
    // and uv write every member as a plain file, but unzip, libarchive and older
    // installers create the symlink or keep the setuid bit.
    if ((u16(c + 4) >> 8) == 3) {
      const std::uint32_t mode = m.external_attr >> 16, type = mode & 0170000;
      if (type != 0 && type != 0100000 && type != 0040000)
        throw Error(where + " is not a regular file (Unix mode " + format("0%o", mode) +
                    ": a symlink, device, fifo or socket); wheels hold files only: copy the target into the tree");
      if (mode & 06000)
        throw Error(where + " has the setuid or setgid bit (Unix mode " + format("0%o", mode) +
                    "); wheels carry only rwx permissions: clear it and rebuild");
    }

    // ZIP64 extended information: exactly the fields whose 32-bit value is
    // saturated, in the fixed order size, compressed size, offset.
    const Zip64Fields z = parse_extra(std::string_view(c + 46 + name_len, extra_len), where);
    std::size_t want = 0;
    for (std::uint64_t v : {m.size, m.compressed_size, m.local_header_offset}) want += v == 0xFFFFFFFFu ? 8 : 0;
    if (want > 0 || z.present) {
      if (!z.present || z.data.size() != want)
        throw Error(where + ": its ZIP64 extra field holds " + std::to_string(z.present ? z.data.size() : 0) +
                    " bytes where the saturated header fields need " + std::to_string(want) +
                    "; readers would take different sizes or offsets: rebuild the wheel");
      const char* zf = z.data.data();
      if (m.size == 0xFFFFFFFFu) { m.size = u64(zf); zf += 8; }
      if (m.compressed_size == 0xFFFFFFFFu) { m.compressed_size = u64(zf); zf += 8; }
      if (m.local_header_offset == 0xFFFFFFFFu) m.local_header_offset = u64(zf);
      zip64_ = true;
    }

    // Claims against limits and against what the bytes can hold; nothing has
    // been allocated for them.
    if (m.size > limits.max_member_size)
      throw Error(where + " claims " + std::to_string(m.size) + " bytes uncompressed, more than the limit of " +
                  std::to_string(limits.max_member_size) + " bytes per member");
    if (m.compressed_size > end_records)
      throw Error(where + " claims " + std::to_string(m.compressed_size) + " compressed bytes in a " +
                  std::to_string(file_size) + "-byte archive");
    if (m.method == 0 && m.size != m.compressed_size)
      throw Error(where + " is stored but claims " + std::to_string(m.size) + " bytes from " +
                  std::to_string(m.compressed_size) + " stored ones; the archive is corrupt");
    if (m.method == 8 && m.size > m.compressed_size * kMaxDeflateRatio + kMaxDeflateRatio)
      throw Error(where + " claims " + std::to_string(m.size) + " bytes from " + std::to_string(m.compressed_size) +
                  " compressed ones, more than deflate can produce (" + std::to_string(kMaxDeflateRatio) +
                  ":1); the sizes are forged");
    total += m.size;
    if (total > limits.max_total_size)
      throw Error(bad + ": its members claim more than " + std::to_string(limits.max_total_size) +
                  " bytes uncompressed in all, the limit");
    if (!by_name_.emplace(m.name, members_.size()).second)
      throw Error(where + " appears more than once; installers keep one copy or the other: rebuild the wheel");
    members_.push_back(std::move(m));
    pos += entry_len;
  }
  if (members_.size() != count)
    throw Error(bad + ": its end record counts " + std::to_string(count) + " entries but the central directory holds " +
                std::to_string(members_.size()) + "; the archive is corrupt");

  // Local headers: each agrees with its central entry, and together with the data
  // they tile [0, cd_off) with no byte unaccounted for.
  std::vector<std::size_t> order(members_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return members_[a].local_header_offset < members_[b].local_header_offset; });
  std::uint64_t cursor = 0;
  for (std::size_t i : order) {
    ZipMember& m = members_[i];
    const std::string where = "'" + p.string() + "': member '" + printable(m.name) + "'";
    if (m.local_header_offset > cursor)
      throw Error(where + " starts at offset " + std::to_string(m.local_header_offset) + " but the previous record ends at " +
                  std::to_string(cursor) + "; the archive has " +
                  (cursor == 0 ? std::string("prepended data") : std::string("hidden bytes between members")) +
                  ": rebuild the wheel");
    if (m.local_header_offset < cursor)
      throw Error(where + " overlaps the previous member's data; overlapping entries are a zip bomb or a forgery, "
                  "do not publish this wheel");
    if (cd_off - cursor < 30) throw Error(where + ": its local header lies past the central directory");
    const std::string lh = f.read(cursor, 30);
    if (u32(lh.data()) != kLocalSig) throw Error(where + ": bad local header signature; the archive is corrupt");
    const std::uint16_t l_flags = u16(lh.data() + 6), l_method = u16(lh.data() + 8);
    const std::uint32_t l_crc = u32(lh.data() + 14);
    std::uint64_t l_csize = u32(lh.data() + 18), l_size = u32(lh.data() + 22);
    const std::uint16_t l_name_len = u16(lh.data() + 26), l_extra_len = u16(lh.data() + 28);
    const std::string mismatch = where + ": its local header disagrees with the central directory on ";
    const std::string fix = "; readers would extract different bytes: the wheel is corrupt or forged, rebuild it";
    if (cd_off - cursor - 30 < static_cast<std::uint64_t>(l_name_len) + l_extra_len)
      throw Error(where + ": its local header overruns the central directory");
    const std::string l_name = f.read(cursor + 30, l_name_len);
    if (l_name != m.name) throw Error(mismatch + "the name ('" + printable(l_name) + "')" + fix);
    if (l_flags != m.flags) throw Error(mismatch + "the flags (" + hex16(l_flags) + " vs " + hex16(m.flags) + ")" + fix);
    if (l_method != m.method)
      throw Error(mismatch + "the method (" + std::to_string(l_method) + " vs " + std::to_string(m.method) + ")" + fix);
    if (l_crc != m.crc32) throw Error(mismatch + "the CRC-32" + fix);
    const Zip64Fields lz = parse_extra(f.read(cursor + 30 + l_name_len, l_extra_len), where + " (local header)");
    if (l_csize == 0xFFFFFFFFu || l_size == 0xFFFFFFFFu) {
      // The local ZIP64 field carries both sizes, always (APPNOTE 4.5.3).
      if (l_csize != 0xFFFFFFFFu || l_size != 0xFFFFFFFFu || !lz.present || lz.data.size() != 16)
        throw Error(mismatch + "the ZIP64 sizes (its ZIP64 field must hold both sizes)" + fix);
      l_size = u64(lz.data.data());
      l_csize = u64(lz.data.data() + 8);
    } else if (lz.present) {
      throw Error(where + ": its local header has a ZIP64 field but no saturated size" + fix);
    }
    if (l_size != m.size || l_csize != m.compressed_size)
      throw Error(mismatch + "the sizes (" + std::to_string(l_size) + "/" + std::to_string(l_csize) + " vs " +
                  std::to_string(m.size) + "/" + std::to_string(m.compressed_size) + ")" + fix);
    m.data_offset = cursor + 30 + l_name_len + l_extra_len;
    if (cd_off - m.data_offset < m.compressed_size)
      throw Error(where + ": its " + std::to_string(m.compressed_size) +
                  " compressed bytes run into the central directory; the sizes are forged");
    cursor = m.data_offset + m.compressed_size;
  }
  if (cursor != cd_off)
    throw Error(bad + ": " + std::to_string(cd_off - cursor) +
                " bytes between the last member and the central directory belong to no member; rebuild the wheel");
}

const ZipMember* ZipReader::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &members_[it->second];
}

void ZipReader::read_chunks(std::string_view name, const std::function<void(std::string_view)>& sink) const {
  const ZipMember* m = find(name);
  if (!m) throw Error("'" + path_.string() + "' has no member '" + printable(name) + "'");
  const std::string where = "'" + path_.string() + "': member '" + printable(m->name) + "'";
  const InputFile& f = *file_;
  if (f.size() < m->data_offset || f.size() - m->data_offset < m->compressed_size)
    throw Error(where + " lies past the end of the file (it changed since it was opened)");
  uLong crc = crc32(0L, Z_NULL, 0);
  std::uint64_t produced = 0;
  auto deliver = [&](const char* data, std::size_t n) {
    produced += n;
    if (produced > m->size)
      throw Error(where + " inflates to more than its recorded " + std::to_string(m->size) + " bytes; the archive is corrupt or forged");
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(n));
    sink(std::string_view(data, n));
  };
  std::unique_ptr<char[]> in(new char[kChunk]);
  std::uint64_t off = m->data_offset, left = m->compressed_size;
  if (m->method == 0) {
    while (left > 0) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, kChunk));
      f.read_into(off, in.get(), n);
      deliver(in.get(), n);
      off += n;
      left -= n;
    }
  } else {
    std::unique_ptr<char[]> out(new char[kChunk]);
    z_stream zs{};
    if (inflateInit2(&zs, -15) != Z_OK) throw Error("zlib inflateInit2 failed");
    struct End {
      z_stream* z;
      ~End() { inflateEnd(z); }
    } end{&zs};
    for (;;) {
      if (zs.avail_in == 0 && left > 0) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, kChunk));
        f.read_into(off, in.get(), n);
        off += n;
        left -= n;
        zs.next_in = reinterpret_cast<Bytef*>(in.get());
        zs.avail_in = static_cast<uInt>(n);
      }
      zs.next_out = reinterpret_cast<Bytef*>(out.get());
      zs.avail_out = static_cast<uInt>(kChunk);
      const int rc = inflate(&zs, Z_NO_FLUSH);
      const std::size_t n = kChunk - zs.avail_out;
      if (n > 0) deliver(out.get(), n);
      if (rc == Z_STREAM_END) break;
      // With room for output, no progress means no input is left.
      if (rc == Z_BUF_ERROR) throw Error(where + ": its deflate stream is truncated; the archive is corrupt");
      if (rc != Z_OK)
        throw Error(where + " is not a valid deflate stream (" + (zs.msg ? zs.msg : "zlib error") + "); the archive is corrupt");
    }
    if (zs.avail_in != 0 || left != 0)
      throw Error(where + ": bytes follow the end of its deflate stream inside the member; the archive is corrupt or forged");
  }
  if (produced != m->size)
    throw Error(where + " holds " + std::to_string(produced) + " bytes, not its recorded " + std::to_string(m->size) +
                "; the archive is corrupt or its sizes are forged");
  if (static_cast<std::uint32_t>(crc) != m->crc32)
    throw Error(where + ": CRC-32 mismatch; the archive is corrupt");
}

std::string ZipReader::read(std::string_view name, std::uint64_t max_size) const {
  const ZipMember* m = find(name);
  if (!m) throw Error("'" + path_.string() + "' has no member '" + printable(name) + "'");
  if (m->size > max_size)
    throw Error("'" + path_.string() + "': member '" + printable(m->name) + "' is " + std::to_string(m->size) +
                " bytes, over the limit of " + std::to_string(max_size) + " bytes for this file; no honest wheel "
                "carries one that large: the wheel is forged or broken");
  // Grown by what actually inflates (never reserved by the claim); read_chunks
  // stops as soon as the output passes the claimed size.
  std::string out;
  read_chunks(name, [&](std::string_view piece) { out.append(piece); });
  return out;
}

}  // namespace ffpa::core
