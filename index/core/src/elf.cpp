// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/core/elf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/utf8.h"

namespace ffpa::core {
namespace {

constexpr std::uint32_t kShtDynamic = 6, kShtDynsym = 11, kShtGnuVerneed = 0x6ffffffe;
constexpr std::int64_t kDtNeeded = 1, kDtSoname = 14, kDtRpath = 15, kDtRunpath = 29;

template <typename T>
T le(const std::string& buf, std::uint64_t off) {
  T v{};
  // Written so that no offset read from the file can wrap the comparison.
  if (off > buf.size() || buf.size() - off < sizeof(T)) throw Error("truncated ELF structure");
  std::memcpy(&v, buf.data() + off, sizeof(T));  // x86-64 hosts are little-endian like the files
  return v;
}

struct Section {
  std::uint32_t type, link, info;
  std::uint64_t offset, size, entsize;
};

// The file, read by ranges. Sections may overlap; a file whose headers make us read it
// over and over (thousands of sections naming the whole file) is refused, not walked.
class File {
 public:
  explicit File(const std::filesystem::path& p) : path_(p), in_(p) {}
  std::string read(std::uint64_t off, std::uint64_t len) {
    read_total_ += len;
    if (read_total_ > 4 * in_.size() + (1u << 20))
      throw Error("'" + path_.string() + "' is a malformed ELF file (its section headers reference the same bytes "
                  "over and over)");
    return in_.read(off, len);
  }

 private:
  std::filesystem::path path_;
  InputFile in_;
  std::uint64_t read_total_ = 0;
};

// Strings copied out of one file, in bytes: a hostile file can name the same long
// string from thousands of entries, so the total is bounded, not just each read.
constexpr std::uint64_t kMaxStringBytes = std::uint64_t{64} << 20;

std::string cstr_at(const std::string& strtab, std::uint64_t off, std::uint64_t& budget) {
  if (off >= strtab.size()) throw Error("ELF string offset out of range");
  std::string out(strtab.c_str() + off);
  if (out.size() + 1 > budget)
    throw Error("malformed ELF file: its dynamic entries name more than 64 MiB of strings");
  budget -= out.size() + 1;
  return out;
}

std::vector<std::string> split_path_list(const std::string& s) {
  auto parts = split(s, ':');
  parts.erase(std::remove(parts.begin(), parts.end(), ""), parts.end());
  return parts;
}

// The machines the engine names, with the architecture a Linux platform tag gives each
// (empty: none of the tags auditwheel knows).
struct Machine {
  const char* arch;  // in a platform tag
  const char* name;  // in messages
  ElfIdent ident;
};
constexpr Machine kMachines[] = {
    {"x86_64", "x86-64", {2, 1, 62}},          {"i686", "i386", {1, 1, 3}},       {"aarch64", "AArch64", {2, 1, 183}},
    {"armv7l", "ARM", {1, 1, 40}},             {"ppc64le", "PowerPC64", {2, 1, 21}}, {"ppc64", "PowerPC64", {2, 2, 21}},
    {"s390x", "S/390", {2, 2, 22}},            {"riscv64", "RISC-V", {2, 1, 243}},
    {"loongarch64", "LoongArch", {2, 1, 258}}, {"", "MIPS", {0, 0, 8}},           {"", "PowerPC", {0, 0, 20}},
};

}  // namespace

std::optional<ElfIdent> parse_elf_ident(std::string_view head) {
  if (head.size() < 20 || head.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) return std::nullopt;
  ElfIdent id;
  id.elf_class = static_cast<unsigned char>(head[4]);
  id.data = static_cast<unsigned char>(head[5]);
  if ((id.elf_class != 1 && id.elf_class != 2) || (id.data != 1 && id.data != 2)) return std::nullopt;
  const auto b0 = static_cast<unsigned char>(head[18]), b1 = static_cast<unsigned char>(head[19]);
  id.machine = static_cast<std::uint16_t>(id.data == 1 ? (b0 | (b1 << 8)) : ((b0 << 8) | b1));
  return id;
}

std::string elf_machine_name(std::uint16_t machine) {
  for (const auto& m : kMachines)
    if (m.ident.machine == machine) return m.name;
  return "e_machine " + std::to_string(machine);
}

std::optional<PlatformElf> elf_of_platform(std::string_view platform, std::string* why) {
  // The architecture follows "linux_", "manylinux1_"/"2010_"/"2014_", or the "_X_Y_" of
  // manylinux_X_Y_ / musllinux_X_Y_.
  static const std::regex tag(R"(^(?:linux|manylinux(?:1|2010|2014)|(?:many|musl)linux_[^_]*_[^_]*)_(.*)$)");
  std::match_results<std::string_view::const_iterator> m;
  const bool linux_tag = std::regex_match(platform.begin(), platform.end(), m, tag);
  for (const auto& a : kMachines)
    if (linux_tag && *a.arch && m.str(1) == a.arch) return PlatformElf{a.arch, a.ident};
  if (why)
    *why = "'" + std::string(platform) + "' " +
           (linux_tag ? "names an unknown architecture '" + m.str(1) + "'" : "is not a Linux platform tag");
  return std::nullopt;
}

std::string describe(const ElfIdent& id) {
  return std::string(id.elf_class == 2 ? "ELF64" : "ELF32") + (id.data == 1 ? " little-endian " : " big-endian ") +
         elf_machine_name(id.machine);
}

bool is_elf_file(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return false;
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
}

ElfInfo read_elf(const std::filesystem::path& p) {
  File f(p);
  const std::string hdr = f.read(0, 64);
  const std::string where = "'" + p.string() + "'";
  if (hdr.compare(0, 4, "\x7f" "ELF") != 0) throw Error(where + " is not an ELF file");
  if (hdr[4] != 2 || hdr[5] != 1)
    throw Error(where + " is not a 64-bit little-endian ELF file; only x86_64 binaries can be shipped");
  ElfInfo info;
  std::uint64_t budget = kMaxStringBytes;
  info.machine = le<std::uint16_t>(hdr, 18);
  const auto shoff = le<std::uint64_t>(hdr, 40);
  const auto shentsize = le<std::uint16_t>(hdr, 58);
  const auto shnum = le<std::uint16_t>(hdr, 60);
  if (shoff == 0 || shnum == 0)
    throw Error(where + " has no section headers; keep them when stripping (strip --strip-unneeded keeps them)");
  if (shentsize < 64) throw Error(where + " has an unexpected section header size");
  const std::string shdrs = f.read(shoff, static_cast<std::uint64_t>(shentsize) * shnum);
  std::vector<Section> secs(shnum);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t b = static_cast<std::uint64_t>(i) * shentsize;
    secs[i] = {le<std::uint32_t>(shdrs, b + 4),  le<std::uint32_t>(shdrs, b + 40), le<std::uint32_t>(shdrs, b + 44),
               le<std::uint64_t>(shdrs, b + 24), le<std::uint64_t>(shdrs, b + 32), le<std::uint64_t>(shdrs, b + 56)};
  }
  auto strtab_of = [&](const Section& s) {
    if (s.link >= shnum) throw Error(where + ": section links to a missing string table");
    const Section& st = secs[s.link];
    return f.read(st.offset, st.size);
  };
  for (const Section& s : secs) {
    if (s.type != kShtDynamic && s.type != kShtGnuVerneed && s.type != kShtDynsym) continue;
    const std::string strtab = strtab_of(s), data = f.read(s.offset, s.size);
    if (s.type == kShtDynamic) {
      for (std::uint64_t off = 0; off + 16 <= data.size(); off += 16) {
        const auto tag = le<std::int64_t>(data, off);
        const auto val = le<std::uint64_t>(data, off + 8);
        if (tag == 0) break;
        if (tag == kDtNeeded) info.needed.push_back(cstr_at(strtab, val, budget));
        else if (tag == kDtSoname) info.soname = cstr_at(strtab, val, budget);
        else if (tag == kDtRpath) info.rpath = split_path_list(cstr_at(strtab, val, budget));
        else if (tag == kDtRunpath) info.runpath = split_path_list(cstr_at(strtab, val, budget));
      }
    } else if (s.type == kShtGnuVerneed) {
      // Each Verneed and Vernaux record takes 16 bytes of the section, so a file
      // cannot honestly hold more records than size / 16; chains that loop or
      // revisit records (quadratic work) run out of this budget instead.
      std::uint64_t records = data.size() / 16, off = 0;
      auto spend = [&]() {
        if (records == 0) throw Error(where + ": malformed .gnu.version_r (its records revisit each other)");
        --records;
      };
      for (std::uint32_t n = 0; n < s.info; ++n) {
        spend();
        const auto cnt = le<std::uint16_t>(data, off + 2);
        const std::string file = cstr_at(strtab, le<std::uint32_t>(data, off + 4), budget);
        std::uint64_t aux = off + le<std::uint32_t>(data, off + 8);
        for (std::uint16_t k = 0; k < cnt; ++k) {
          spend();
          info.version_needs.emplace_back(file, cstr_at(strtab, le<std::uint32_t>(data, aux + 8), budget));
          const auto next = le<std::uint32_t>(data, aux + 12);
          if (next == 0) break;
          aux += next;
        }
        const auto next = le<std::uint32_t>(data, off + 12);
        if (next == 0) break;
        off += next;
      }
    } else {
      // Elf64_Sym is 24 bytes; any other entry size is a malformed (or hostile) file,
      // and an unchecked one wraps the offset arithmetic below.
      if (s.entsize != 0 && s.entsize != 24) throw Error(where + ": malformed .dynsym (entry size " + std::to_string(s.entsize) + ", not 24)");
      for (std::uint64_t off = 24; off + 24 <= data.size(); off += 24) {  // entry 0 is the null symbol
        if (le<std::uint16_t>(data, off + 6) != 0) continue;
        std::string name = cstr_at(strtab, le<std::uint32_t>(data, off), budget);
        if (!name.empty()) info.undefined_symbols.push_back(std::move(name));
      }
    }
  }
  return info;
}

}  // namespace ffpa::core
