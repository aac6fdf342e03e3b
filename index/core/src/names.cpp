// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Member names as every installer and operating system reads them (member_name_problem,
// wheel.h). The Windows rules follow Python's ntpath.isreserved (3.13), which the
// differential test (index/tests/test_hostile_vs_pip.py) runs on the same names.
#include "ffpa/core/wheel.h"

#include "ffpa/core/utf8.h"

#include <map>

namespace ffpa::core {
namespace {

// DOS device names: Windows opens the device for "nul", "NUL.txt" and "nul .tar.gz"
// alike (ntpath.isreserved: the part before the first dot, trailing spaces cut).
// COM0 and LPT0 are reserved on current Windows too, beyond ntpath's list.
bool device_name(std::string_view part) {
  std::string base = lower_ascii(part.substr(0, part.find('.')));
  while (!base.empty() && base.back() == ' ') base.pop_back();
  if (base == "con" || base == "prn" || base == "aux" || base == "nul" || base == "conin$" || base == "conout$")
    return true;
  return base.size() == 4 && (base.compare(0, 3, "com") == 0 || base.compare(0, 3, "lpt") == 0) && base[3] >= '0' &&
         base[3] <= '9';
}

// "FFPA_A~1": the 8.3 short name Windows gives ffpa_attn on volumes that keep them, so
// a member spelled that way writes into another directory there.
bool short_name_form(std::string_view part) {
  for (std::size_t at = part.find('~'); at != std::string_view::npos; at = part.find('~', at + 1))
    if (at + 1 < part.size() && part[at + 1] >= '0' && part[at + 1] <= '9') return true;
  return false;
}

// Where a member lands relative to the install scheme it belongs to: root files and
// <x>.data/purelib|platlib/ files share site-packages (one place in every venv and in
// --target), the other schemes each have their own.
std::string install_key(const std::string& name) {
  const std::size_t a = name.find('/');
  if (a == std::string::npos || a < 5 || name.compare(a - 5, 5, ".data") != 0) return name;
  const std::size_t b = name.find('/', a + 1);
  if (b == std::string::npos) return name;
  const std::string scheme = name.substr(a + 1, b - a - 1), rest = name.substr(b + 1);
  if (scheme == "purelib" || scheme == "platlib") return rest;
  return scheme + ":" + rest;  // ':' never occurs in a name: its own namespace
}

}  // namespace

std::string member_name_problem(std::string_view name) {
  if (name.empty()) return "is empty; the archive is corrupt";
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0)
      return "contains a NUL byte (pip would cut the name there and install another file); the wheel is malformed, "
             "rebuild it";
    if (c < 0x20 || c == 0x7f)
      return "contains a control character (a line break for pip's RECORD reader, which splits on \\n, \\r, \\v, "
             "\\f and \\x1c-\\x1e); rename the file in the staged tree and rebuild";
    if (c >= 0x80)
      return "holds non-ASCII characters: pip splits RECORD lines at U+0085, U+2028 and U+2029, macOS stores "
             "names decomposed (NFD) and Windows and macOS fold case with their own Unicode tables, so the name "
             "may install as another file or collide with one; use an ASCII name";
  }
  if (name.front() == '/') return "is absolute; members are relative to the install directory, rebuild the wheel";
  if (name.find('\\') != std::string_view::npos)
    return "contains a backslash, which installers treat differently on Windows and Linux; rename the file and "
           "rebuild";
  if (const std::size_t at = name.find(':'); at != std::string_view::npos)
    return "contains ':', which Windows reads as a drive letter ('C:x') or an NTFS stream ('x:y') and installs "
           "elsewhere; rename the file and rebuild";
  if (const std::size_t at = name.find_first_of("<>\"|?*"); at != std::string_view::npos)
    return std::string("contains '") + name[at] +
           "', which Windows does not allow in file names (a pure wheel installs there too); rename the file and "
           "rebuild";
  if (name.back() == '/')
    return "is a directory entry: pip keeps a RECORD row for it and `pip uninstall` then deletes the whole "
           "directory, other packages' files included; a wheel lists files only, rebuild it without directory "
           "entries";
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = name.find('/', start);
    const std::string_view part = name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    const std::string quoted = "'" + std::string(part) + "'";
    if (part.empty())
      return "has an empty path component ('//'); pip would install it under a collapsed path that RECORD does "
             "not list: rebuild the wheel";
    if (part == "." || part == "..")
      return "has a " + quoted + " component, which escapes or aliases the install directory; rebuild the wheel";
    if (part.back() == '.' || part.back() == ' ')
      return "has the component " + quoted +
             ", which ends in a dot or a space: Windows drops them and installs another name; rename it";
    if (device_name(part))
      return "has the component " + quoted +
             ", a Windows device name (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9, LPT0-9, with any extension): "
             "Windows opens the device instead of a file; rename it";
    if (short_name_form(part))
      return "has the component " + quoted +
             ", which has the form of a Windows 8.3 short name ('~' and a digit) and may alias another directory "
             "there (FFPA_A~1 is ffpa_attn); rename it";
    if (part.size() > 255)
      return "has a component of " + std::to_string(part.size()) + " bytes; file systems stop at 255: shorten the name";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return "";
}

std::vector<std::string> member_set_problems(const std::vector<std::string>& names) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> files, dirs;  // lower-case install key -> the member / directory that has it
  std::map<std::string, bool> told;                 // directory spellings already reported
  for (const auto& n : names) {
    const std::string key = install_key(n);
    auto [it, fresh] = files.emplace(lower_ascii(key), n);
    if (!fresh)
      problems.push_back("'" + it->second + "' and '" + n + "' " +
                         (lower_ascii(it->second) == lower_ascii(n) ? "differ only in case" : "install to the same file") +
                         ": Windows and macOS (case-insensitive) or every installer write one over the other; "
                         "keep one");
    for (std::size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', slash + 1)) {
      const std::string dir = key.substr(0, slash);
      auto [d, new_dir] = dirs.emplace(lower_ascii(dir), dir);
      if (!new_dir && d->second != dir && !told[dir])
        problems.push_back("the directory '" + d->second + "' is also spelled '" + dir + "' (by '" + n +
                           "'): one directory on Windows and macOS, two on Linux; spell it one way");
      if (!new_dir && d->second != dir) told[dir] = true;
    }
  }
  for (const auto& [key, member] : files)
    if (auto d = dirs.find(key); d != dirs.end())
      problems.push_back("'" + member + "' is a file and also the directory '" + d->second +
                         "' of other members; no file system holds both: rename one");
  return problems;
}

}  // namespace ffpa::core
