// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// A wheel: the names its members may have (names.cpp), verifying one (wheel.cpp) and
// writing one (pack.cpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffpa/core/pep.h"
#include "ffpa/core/zip.h"

namespace ffpa::core {

// --- member names ------------------------------------------------------------------

// The one rule for the names of the files a wheel installs, shared by the zip reader
// (verify-wheel, add, publish) and pack. A pure wheel installs on Windows, macOS and
// Linux, and pip reads RECORD line by line (str.splitlines) and as CSV, so a name is
// accepted only where every one of those readings gives the same single file: see
// index/README.md, "Member names".

// Why `name` (a member path, '/'-separated) may not be installed, or "" when it
// may. The text reads after the quoted name ("'x' is absolute; ...") and ends with
// the fix. Refused: empty names; NUL, control and non-ASCII characters (line
// boundaries for str.splitlines, names macOS and Windows fold or normalise in their
// own way); absolute paths, backslashes, the characters Windows does not allow
// (< > : " | ? *; ':' is a drive letter or an NTFS stream); directory entries (a
// trailing '/'); empty, '.' and '..' components; components ending in a dot or a
// space (Windows drops them), Windows device names (CON, PRN, AUX, NUL, CONIN$,
// CONOUT$, COM0-9, LPT0-9, with any extension) and 8.3 short-name forms (~N), and
// components longer than 255 bytes.
std::string member_name_problem(std::string_view name);

// Problems of a set of member names that are fine one by one: two names that are
// one file on a case-insensitive file system (Windows, macOS) or that install to the
// same place (<name>.data/purelib/x, <name>.data/platlib/x and x), one directory
// spelled in two cases, and a file that is also the directory of another member.
std::vector<std::string> member_set_problems(const std::vector<std::string>& names);

// --- what a wheel makes an installer do (install.cpp) --------------------------------

// The paths a project's wheels may install, relative to site-packages (a trailing '/'
// owns a directory and all it holds): the "wheel_top_level" of cmake/release-matrix.json
// for a project declared there (ffpa-attn: ffpa_attn/ and its .dist-info/), else the
// project's import name (its wheel name component) as a package or module, and its
// .dist-info/. "{version}" stands for `version` (the .dist-info's).
std::vector<std::string> owned_paths(std::string_view project, std::string_view version);

// The one rule for what installing a wheel may do, for verify-wheel (add, publish) and
// pack alike. Refused, each with the fix: a member outside the project's owned paths
// (installers write it over other distributions or the environment, and uninstall
// deletes it); a .data member outside purelib/platlib (which are site-packages, where the
// owned paths apply) that the project does not declare; startup hooks (top-level
// .pth, sitecustomize, usercustomize, __editable__ finders, also through
// .data/purelib|platlib); the files installers write themselves (INSTALLER, REQUESTED,
// direct_url.json); scripts (.data/scripts members and console_scripts/gui_scripts
// entry points of `entry_points`, the text of entry_points.txt) whose name is not
// script_name_problem-clean. `members` are the wheel's member names.
std::vector<std::string> install_problems(std::string_view project, std::string_view version,
                                          const std::vector<std::string>& members, std::string_view entry_points);
// Why `name` cannot be a script's name, or "": one plain file name, not the name of an
// interpreter, installer or activation script a venv's bin/ holds (python3, pip, uv, ...).
std::string script_name_problem(std::string_view name);
// PEP 639 values as packaging reads them: License-Expression an SPDX expression of the
// SPDX list packaging carries (core/src/spdx_ids.inc); License-File a relative path of
// plain names (the file itself must be under .dist-info/licenses/, which verify checks).
std::string license_expression_problem(std::string_view expr);
std::string license_file_problem(std::string_view value);
// A file name's tags in the only spelling uv resolves and PEP 425 writes: lower case,
// each compressed set sorted with no repeats, 'any' never beside a platform.
std::string tag_set_problem(const WheelFilename& w);
// True when a (valid PEP 508) requirement names a direct URL ("x @ https://...").
bool has_direct_url(std::string_view requirement);

// --- verifying -------------------------------------------------------------------

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
// str.splitlines inside a line; member names by member_name_problem, one by one and as a set), that the file name is spelled canonically (PEP 427/625) and agrees
// with the WHEEL Tag lines and METADATA Name/Version, that METADATA parses
// (check_core_metadata), that every ELF member (and every .so) matches the
// platform tag, and that the .dist-info layout is PEP 427's. The archive itself is
// read by ZipReader, which refuses any zip structure another reader could see
// differently. Memory stays flat: members are streamed, the .dist-info text files
// are capped at kMaxDistInfoFile bytes. Never throws: an unreadable archive is one
// more problem. With `fd`, the open file is read instead (duplicated, read with pread,
// never by path); `whl` then names it in messages and carries the file name the checks
// compare with.
WheelCheck verify_wheel(const std::filesystem::path& whl, int fd = -1);

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

// Bounds on METADATA's dependency fields, past which check_core_metadata (so verify-wheel,
// pack, add and publish) refuses. Neither the core metadata specification, packaging,
// pip nor uv bound them, and PyPI bounds only Summary (512 characters) and Project-URL
// labels (32): a wheel with 10,000 Requires-Dist lines, or one line of 200,000
// characters, uploads and installs there. Every pip that resolves a wheel from the
// index downloads its METADATA (PEP 658) and parses each requirement, each extra and
// each marker of it, so these bound what one hostile wheel makes every user's resolver
// (and the engine) do. They leave ample room above what real projects declare
// (ffpa-attn: a handful of requirements, one extra): docs/release.md, "What a wheel may
// declare".
inline constexpr std::size_t kMaxRequiresDist = 2048;   // Requires-Dist lines
inline constexpr std::size_t kMaxProvidesExtra = 512;   // Provides-Extra lines
inline constexpr std::size_t kMaxDependencyValue = 4096;  // bytes of one Requires-Dist or Provides-Extra value

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

// --- writing ---------------------------------------------------------------------

struct PackOptions {
  std::filesystem::path tree;       // staged install tree: becomes the wheel root
  std::string name;                 // project name as in pyproject (e.g. "ffpa-attn")
  std::string version;              // any PEP 440 spelling; normalised
  std::string tag;                  // "py3-none-any", "cp312-cp312-auto", ...
  std::string metadata;             // RFC 822 header lines (Summary, Requires-Python, ...)
  std::string metadata_source = "--metadata";  // where they came from, for messages
  std::filesystem::path readme;     // optional long description (.md, .rst, else plain text)
  std::filesystem::path out_dir;
  std::optional<bool> root_is_purelib;          // default: true exactly for *-none-any
  std::optional<std::int64_t> source_date_epoch;  // default: $SOURCE_DATE_EPOCH, else refused
  DeflateOptions deflate;
  std::vector<std::string> forbidden_strings;  // besides the tree's own absolute path
  ZipLayout layout;                            // epoch is overwritten; thresholds are a test hook
};

// What pack wrote, measured while writing: nothing needs to read the wheel back.
struct PackResult {
  std::filesystem::path wheel;
  WheelFilename name;  // canonical, its platform decided
  std::string sha256;  // hex, of the whole file
  std::uint64_t size = 0;
  std::vector<WrittenEntry> members;  // in archive order
  std::string metadata;               // the METADATA file's bytes
};

// Builds one PEP 427 wheel. Throws ffpa::core::Error naming the fix on bad input;
// nothing is left in out_dir unless the whole wheel was written.
PackResult pack_wheel(const PackOptions& opts);

// Builds several wheels in one pass (ffpa-index release): each wheel's bytes are
// exactly those pack_wheel() writes for its options. Files with identical bytes
// (proven by comparing them, within and across trees) are hashed for RECORD and
// compressed once, and their compressed bytes copied into every wheel that holds
// them; all wheels are fsynced before any is renamed. Every input is checked before
// the first byte is written; on any failure no temp file is left and no wheel of
// this call is published (a failing rename, after all fsyncs, can leave earlier
// wheels renamed). All wheels must share the deflate options.
std::vector<PackResult> pack_wheels(const std::vector<PackOptions>& wheels);

}  // namespace ffpa::core
