// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ffpa::core {

struct WheelCheck {
  bool ok;
  std::vector<std::string> problems;
  // The METADATA file's bytes and headers, read in the same pass over the same open
  // file (empty when it is missing or unreadable).
  std::string metadata;
  std::vector<std::pair<std::string, std::string>> metadata_fields;
};

// Recomputes every RECORD hash and size, checks that members and RECORD list the
// same files (RECORD written as Python's csv module writes it, no line boundary of
// str.splitlines inside a line; member names by names.h, one by one and as a set), that the file name is spelled canonically (PEP 427/625) and agrees
// with the WHEEL Tag lines and METADATA Name/Version, that METADATA parses
// (check_core_metadata), that every ELF member (and every .so) matches the
// platform tag, and that the .dist-info layout is PEP 427's. The archive itself is
// read by ZipReader, which refuses any zip structure another reader could see
// differently. Memory stays flat: members are streamed, the .dist-info text files
// are capped at kMaxDistInfoFile bytes. Never throws: an unreadable archive is one
// more problem.
WheelCheck verify_wheel(const std::filesystem::path& whl);
// The same on the open file `fd` (duplicated, read with pread, never by path); `whl`
// names it in messages and carries the file name the checks compare with.
WheelCheck verify_wheel(int fd, const std::filesystem::path& whl);

// The one rule for compiled files, for pack (the staged tree) and verify-wheel (the
// members) alike. A file is compiled code when its bytes start with the ELF magic or
// its name is a shared object's ("x.so", "libx.so.12", "libx.so.1.2.3", not
// "libx.so.data") or a Windows or macOS extension's (".pyd", ".dylib"). Returns why
// `member` (whose first bytes are `head`, at least 20 of them when there are) cannot
// ship in a wheel for `platform` (one dotted part of the platform tag), or "": none
// may ship in a pure ("any") wheel, and a Linux platform takes only ELF files of its
// machine and class. Shared-object names get mode 0755 in the wheel.
bool is_shared_object_name(std::string_view member);
std::string compiled_file_problem(std::string_view member, std::string_view head, std::string_view platform);

// The largest METADATA, WHEEL or RECORD file a wheel may carry.
inline constexpr std::uint64_t kMaxDistInfoFile = std::uint64_t{64} << 20;

// A core metadata field (1.0 to 2.5, as packaging knows them), as the specification
// spells it, with the metadata version that introduced it and whether it may repeat.
// The one table of them serves pack (what a metadata file may set) and verify-wheel.
struct CoreField {
  const char* name;
  const char* since;
  bool multi;
};
// The field named `name` in any case (header names are case-insensitive), or nullptr.
const CoreField* core_field(std::string_view name);

// METADATA as pip, twine and PyPI read it, checked strictly so that nothing later
// (add, publish, the JSON index) meets a file it cannot parse: valid UTF-8, no
// NUL; RFC 822 header form ("Key: value" lines, continuation lines starting with
// a space or tab, then an empty line and the body); known core metadata fields
// (up to 2.5) with single-use fields once; Metadata-Version, Name (PEP 508) and
// Version (PEP 440) present; Requires-Python a PEP 440 specifier set; each
// Requires-Dist a PEP 508 requirement; Provides-Extra names valid. Returns the
// problems, empty when there are none; `fields` receives the headers.
std::vector<std::string> check_core_metadata(std::string_view text,
                                             std::vector<std::pair<std::string, std::string>>* fields = nullptr);

// The METADATA file's bytes (served beside the wheel for PEP 658). Throws
// ffpa::core::Error when the wheel has no single {name}-{version}.dist-info/METADATA.
std::string read_wheel_metadata(const std::filesystem::path& whl);

// The header section of an RFC 822 style file (METADATA, WHEEL, pack's metadata
// input), strictly: valid UTF-8 without NUL; every line up to the first empty one is
// "Key: value" (Key of letters, digits and '-', the value not ending in whitespace) or
// a continuation starting with a space or tab (kept, after a '\n', in the value), with
// no control character or str.splitlines line break. What is not is added to
// `problems`, named by `what`; `body`, when given, receives what follows the empty line.
std::vector<std::pair<std::string, std::string>> parse_headers(std::string_view text, const std::string& what,
                                                               std::vector<std::string>& problems,
                                                               std::string* body = nullptr);

// RECORD is CSV (Python's csv module, minimal quoting, '\n' line ends), one row a line:
// a field holding a line end is never read back (verify refuses such a RECORD).
std::vector<std::vector<std::string>> parse_csv(std::string_view text);
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace ffpa::core
