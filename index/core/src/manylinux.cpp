// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The manylinux policy of elf.h: auditwheel's tables (manylinux_policy.inc) applied to
// the ELF files of a tree.
#include "ffpa/core/elf.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"

namespace ffpa::core {
namespace {

struct PolicyVersion {
  const char* prefix;
  const char* version;
  int minor;  // first manylinux_2_Y that allows it
};
struct PolicyLib {
  const char* soname;
  int minor;
};
struct PolicyBlacklist {
  const char* lib;
  const char* symbol;
  int refused_through;  // refused by manylinux_2_Y for every Y <= this
};

#include "manylinux_policy.inc"

constexpr std::uint16_t kMachineX8664 = 62;

bool is_loader(std::string_view lib) {
  // auditwheel never counts the dynamic loader itself.
  return lib.find("ld-linux") != std::string_view::npos || lib == "ld64.so.1" || lib == "ld64.so.2";
}

// The first entry of a policy table that `match` accepts, or nullptr.
template <typename T, std::size_t N, typename Match>
const T* find_entry(const T (&table)[N], Match match) {
  const T* it = std::find_if(std::begin(table), std::end(table), match);
  return it == std::end(table) ? nullptr : it;
}

bool origin_relative(const std::string& entry) {
  return entry.rfind("$ORIGIN", 0) == 0 || entry.rfind("${ORIGIN}", 0) == 0;
}

std::filesystem::path expand_origin(const std::string& entry, const std::filesystem::path& origin_dir) {
  std::string rest = entry.rfind("${ORIGIN}", 0) == 0 ? entry.substr(9) : entry.substr(7);
  while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
  // "$ORIGIN" alone is the directory itself; appending "" would leave a trailing
  // separator ("pkg/") that never compares equal to the shipped directory ("pkg").
  if (rest.empty()) return origin_dir.lexically_normal();
  auto p = (origin_dir / rest).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

}  // namespace

std::vector<int> known_manylinux_minors() { return {std::begin(kPolicyGlibcMinors), std::end(kPolicyGlibcMinors)}; }

PlatformDecision decide_manylinux(const std::filesystem::path& tree,
                                  const std::vector<std::string>& forbidden_strings) {
  namespace fs = std::filesystem;
  PlatformDecision d;
  const fs::path root = fs::absolute(tree).lexically_normal();
  std::map<fs::path, ElfInfo> elves;  // by path relative to the tree
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    if (!is_elf_file(it->path())) continue;
    try {
      elves.emplace(it->path().lexically_relative(root), read_elf(it->path()));
    } catch (const Error& e) {
      d.problems.push_back(e.what());
    }
  }
  if (ec) d.problems.push_back("cannot walk '" + root.string() + "': " + ec.message());
  for (const auto& [rel, info] : elves) d.elf_files.push_back(rel);
  if (elves.empty() && d.problems.empty())
    d.problems.push_back("no ELF file under '" + root.string() +
                         "', so there is no platform to detect; a tree without binaries is a pure wheel: use py3-none-any");

  // Which directory ships which library name (file name or SONAME).
  std::map<std::string, std::set<fs::path>> shipped;
  for (const auto& [rel, info] : elves) {
    shipped[rel.filename().string()].insert(rel.parent_path());
    if (!info.soname.empty()) shipped[info.soname].insert(rel.parent_path());
  }

  // forced[Y] = reasons that need at least manylinux_2_Y.
  std::map<int, std::vector<std::string>> forced;
  const int newest = kPolicyGlibcMinors[std::size(kPolicyGlibcMinors) - 1];
  for (const auto& [rel, info] : elves) {
    const std::string who = rel.string();
    if (info.machine != kMachineX8664) {
      d.problems.push_back(who + ": not an x86_64 binary (" + elf_machine_name(info.machine) +
                           ", e_machine " + std::to_string(info.machine) + "); build it for x86_64");
      continue;
    }
    for (const auto* list : {&info.rpath, &info.runpath}) {
      for (const auto& entry : *list) {
        if (!origin_relative(entry))
          d.problems.push_back(who + ": RUNPATH/RPATH entry '" + entry +
                               "' is not $ORIGIN-relative; set it with CMake INSTALL_RPATH \"$ORIGIN\" "
                               "(or patchelf --set-rpath '$ORIGIN') so the wheel works wherever it is installed");
      }
    }
    for (const auto& lib : info.needed) {
      if (is_loader(lib)) continue;
      auto s = shipped.find(lib);
      if (s != shipped.end()) {
        // Shipped: the loader must be able to find it through $ORIGIN.
        bool reachable = false;
        const fs::path origin = rel.parent_path();
        for (const auto* list : {&info.runpath, &info.rpath})
          for (const auto& entry : *list)
            if (origin_relative(entry) && s->second.count(expand_origin(entry, origin))) reachable = true;
        if (!reachable)
          d.problems.push_back(who + " needs '" + lib + "', which is shipped in the wheel but not on its $ORIGIN RUNPATH; "
                               "set RUNPATH to $ORIGIN/<relative dir of " + lib + ">");
        continue;
      }
      if (const auto* w = find_entry(kPolicyLibs, [&](const PolicyLib& l) { return lib == l.soname; })) {
        if (w->minor > kPolicyGlibcMinors[0])
          forced[w->minor].push_back(lib + " needed by " + who + " (whitelisted from manylinux_2_" + std::to_string(w->minor) + ")");
        continue;
      }
      d.problems.push_back(who + " needs '" + lib +
                           "', which is neither a manylinux system library nor shipped in the wheel; ship it in the "
                           "tree next to its user with an $ORIGIN RUNPATH, or link it statically");
    }
    for (const auto& [file, ver] : info.version_needs) {
      if (is_loader(file)) continue;
      const size_t us = ver.find('_');
      const std::string prefix = ver.substr(0, us);
      // Versions of our own libraries, as auditwheel ignores them.
      if (!find_entry(kPolicyVersions, [&](const PolicyVersion& v) { return prefix == v.prefix; })) continue;
      const std::string rest = us == std::string::npos ? std::string() : ver.substr(us + 1);
      const auto* pv =
          find_entry(kPolicyVersions, [&](const PolicyVersion& v) { return prefix == v.prefix && rest == v.version; });
      if (!pv) {
        d.problems.push_back(who + " requires " + ver + " (from " + file + "), which no manylinux policy up to 2_" +
                             std::to_string(newest) + " allows; build on an older toolchain/glibc (e.g. a manylinux_2_28 image)");
        continue;
      }
      forced[pv->minor].push_back(ver + " from " + file + " required by " + who);
    }
    std::set<std::string> undefined(info.undefined_symbols.begin(), info.undefined_symbols.end());
    for (const auto& b : kPolicyBlacklist) {
      if (std::find(info.needed.begin(), info.needed.end(), b.lib) == info.needed.end()) continue;
      if (!undefined.count(b.symbol)) continue;
      int next = 0;
      for (int y : kPolicyGlibcMinors)
        if (y > b.refused_through) {
          next = y;
          break;
        }
      if (next == 0)
        d.problems.push_back(who + " uses " + b.symbol + " from " + b.lib + ", which every manylinux policy refuses; "
                             "link zlib statically or ship it");
      else
        forced[next].push_back(std::string(b.symbol) + " from " + b.lib + " used by " + who + " (blacklisted through 2_" +
                               std::to_string(b.refused_through) + ")");
    }
  }

  for (const auto& [rel, info] : elves) {
    if (forbidden_strings.empty()) continue;
    const auto bytes = read_file(root / rel);
    if (!bytes) {  // unread is not clean: the check sees every binary it ships
      d.problems.push_back(rel.string() + " cannot be read (" + std::strerror(errno) + "); make it readable, pack again");
      continue;
    }
    for (const auto& s : forbidden_strings)
      if (!s.empty() && bytes->find(s) != std::string::npos)
        d.problems.push_back(rel.string() + " contains the build-tree path '" + s +
                             "'; build with -ffile-prefix-map (or CMAKE_BUILD_RPATH_USE_ORIGIN / strip debug info) "
                             "so no absolute build path is shipped");
  }

  if (!d.problems.empty()) return d;
  int y = kPolicyGlibcMinors[0];
  if (!forced.empty()) y = std::max(y, forced.rbegin()->first);
  for (int known : kPolicyGlibcMinors)
    if (known >= y) {
      y = known;
      break;
    }
  d.glibc_minor = y;
  d.tag = "manylinux_2_" + std::to_string(y) + "_x86_64";
  for (auto it = forced.rbegin(); it != forced.rend(); ++it)
    for (const auto& r : it->second) d.reasons.push_back("2_" + std::to_string(it->first) + ": " + r);
  if (d.reasons.empty()) d.reasons.push_back("2_" + std::to_string(y) + ": no versioned requirement beyond the oldest policy");
  return d;
}

}  // namespace ffpa::core
