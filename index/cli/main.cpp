// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// ffpa-index: command-line front end of the release engine. Wheel commands are
// handled here; index and publishing commands are forwarded to ffpa::site.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ffpa/core/error.h"
#include "ffpa/core/manylinux.h"
#include "ffpa/core/pack.h"
#include "ffpa/core/wheel.h"
#include "ffpa/core/zipread.h"

#include "ffpa/release/release.h"
#include "ffpa/site/site.h"

namespace {

constexpr const char* kSiteCommands[] = {"add", "remove", "yank", "unyank", "verify", "render", "publish", "publish-pure"};

const char* const kTopHelp =
    "usage: ffpa-index <command> [options]\n"
    "\n"
    "Wheel engine:\n"
    "  pack           staged tree + metadata -> PEP 427 wheel (deterministic)\n"
    "  pack-many      several staged trees -> their wheels in one pass (shared files compressed once)\n"
    "  verify-wheel   recompute RECORD, check names, tags and layout of wheels\n"
    "  platform-tag   print the manylinux tag the ELF files of a tree allow, and why\n"
    "  metadata       print a wheel's METADATA file (what PEP 658 serves)\n"
    "  list           print a wheel's members: size, compressed size, method, name\n"
    "  release        run a release plan: every wheel, SHA256SUMS, requirements, manifest, local site\n"
    "\n"
    "Index and publishing (index/site):\n"
    "  add, remove, yank, unyank, verify, render, publish, publish-pure\n"
    "\n"
    "ffpa-index <command> --help describes each command. ffpa-index --version prints the engine version.\n";

const char* const kPackHelp =
    "usage: ffpa-index pack --tree DIR --name NAME --version VER --tag PY-ABI-PLAT --metadata FILE\n"
    "                       --out-dir DIR [--readme FILE [--readme-type TYPE]] [--root-is-purelib true|false]\n"
    "                       [--source-date-epoch N] [--deflate-cache DIR] [--level N] [--jobs N]\n"
    "                       [--forbid-path STR]...\n"
    "\n"
    "Writes {name}-{version}-{tag}.whl into --out-dir (temp file + rename: nothing partial is left).\n"
    "  --tree DIR            staged install tree; becomes the wheel root (no .dist-info inside)\n"
    "  --name NAME           project name (PEP 508); normalised in the file name (ffpa-attn -> ffpa_attn)\n"
    "  --version VER         PEP 440 version, normalised (0.3.0+cu13)\n"
    "  --tag T               PYTHON-ABI-PLATFORM; PLATFORM 'auto' reads the ELF files and picks the lowest\n"
    "                        manylinux_2_Y_x86_64 their symbol versions and libraries allow\n"
    "  --metadata FILE       'Key: value' core metadata lines (Summary and Requires-Python required;\n"
    "                        Requires-Dist, License, Project-URL, Classifier, ... optional)\n"
    "  --readme FILE         long description; its type from --readme-type or the extension (.md, .rst)\n"
    "  --root-is-purelib B   default: true for *-none-any, false otherwise\n"
    "  --source-date-epoch N entry timestamps (default: $SOURCE_DATE_EPOCH; refused if neither)\n"
    "  --deflate-cache DIR   reuse compressed bytes of identical large members across wheels\n"
    "  --level N             zlib level 0-9 (default 1: see index/bench/README.md)\n"
    "  --jobs N              compression threads (default: all cores); the output does not depend on it\n"
    "  --forbid-path STR     refuse binaries containing STR (e.g. the build directory); repeatable\n"
    "  --test-zip64-threshold N  testing only: write ZIP64 records for sizes/offsets >= N bytes\n";

const char* const kPackManyHelp =
    "usage: ffpa-index pack-many --name NAME --metadata FILE --out-dir DIR [shared options]\n"
    "                            --tree DIR --tag T [--version VER] [--root-is-purelib B]\n"
    "                            [--tree DIR --tag T [--version VER] [--root-is-purelib B]]...\n"
    "\n"
    "Writes one wheel per --tree, each byte for byte the wheel `ffpa-index pack` writes for the same\n"
    "options, and prints their paths one per line in the order of the --tree options. Faster than one\n"
    "pack per wheel: files whose bytes are equal across the trees (the kernel library of every CUDA\n"
    "wheel) are compared instead of re-hashed and compressed once, every wheel is streamed to disk\n"
    "while that compression runs, and all wheels are fsynced before the first is renamed into place:\n"
    "if any wheel fails, none is written and no temp file is left.\n"
    "\n"
    "Per wheel (a --tree starts a wheel; the options after it, up to the next --tree, belong to it):\n"
    "  --tree DIR            staged install tree of this wheel\n"
    "  --tag T               PYTHON-ABI-PLATFORM (PLATFORM 'auto' as for pack)\n"
    "  --version VER         this wheel's version; given before the first --tree: the default of all\n"
    "  --root-is-purelib B   true|false; default as for pack (true exactly for *-none-any); given\n"
    "                        before the first --tree: the default of all\n"
    "Shared by all wheels (anywhere on the line), as for pack:\n"
    "  --name --metadata --readme --readme-type --out-dir --source-date-epoch --deflate-cache\n"
    "  --level --jobs --forbid-path (repeatable)\n";

const char* const kVerifyHelp =
    "usage: ffpa-index verify-wheel WHEEL...\n"
    "\n"
    "Checks each wheel as an attacker's would be checked, so that what pip installs is exactly RECORD:\n"
    "  - the zip structure: no byte another reader (pip's zipfile, uv) could read differently: the whole\n"
    "    central directory, local headers equal to it, no prepended/appended/hidden bytes, sizes\n"
    "    proven against the archive and the limits (index/README.md);\n"
    "  - member names every OS and installer reads as the same single file: no directory entries,\n"
    "    ASCII only, no Windows device names, reserved characters or trailing dots/spaces, no two names\n"
    "    one file on a case-insensitive system, no file that is also a directory (index/README.md);\n"
    "  - RECORD written as Python's csv writes it, every hash and size (members streamed: memory stays\n"
    "    flat), every member listed and no row naming anything else (a directory);\n"
    "  - the file name spelled canonically (ffpa_attn-1.0.0-..., PEP 427/625) and equal to the WHEEL Tag\n"
    "    lines and the METADATA Name/Version, header names in any case as pip reads them; the\n"
    "    .dist-info layout;\n"
    "  - METADATA and WHEEL parse (UTF-8, 'Key: value' headers, no value ending in whitespace, each\n"
    "    single-use field once in any spelling, Requires-Python, Requires-Dist, ...);\n"
    "  - every ELF file and .so matches the platform tag's machine and class (none in a pure wheel).\n"
    "Exit status 1 with the list of problems when any wheel fails.\n";

const char* const kPlatformHelp =
    "usage: ffpa-index platform-tag --tree DIR [--forbid-path STR]...\n"
    "\n"
    "Prints the lowest manylinux_2_Y_x86_64 tag the ELF files under DIR allow, then one line per\n"
    "requirement that forced it. Exit status 1 with the problems when the tree cannot be shipped\n"
    "(a NEEDED library outside the policy, a non-$ORIGIN RUNPATH, an embedded build path...).\n";

const char* const kMetadataHelp = "usage: ffpa-index metadata WHEEL\n\nPrints the wheel's .dist-info/METADATA.\n";
const char* const kListHelp =
    "usage: ffpa-index list WHEEL\n\n"
    "Prints one line per member, in archive order: <size> <compressed size> <stored|deflated> <name>\n"
    "(sizes in bytes; the release manifest records the kernel library's two sizes from it).\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --key value / --key=value options; repeated keys accumulate.
struct Args {
  std::map<std::string, std::vector<std::string>> opts;
  std::vector<std::string> positional;
  bool help = false;

  std::optional<std::string> get(const std::string& k) const {
    auto it = opts.find(k);
    if (it == opts.end()) return std::nullopt;
    if (it->second.size() > 1) throw UsageError("--" + k + " given more than once");
    return it->second.front();
  }
  std::string need(const std::string& k) const {
    auto v = get(k);
    if (!v) throw UsageError("--" + k + " is required");
    return *v;
  }
};

Args parse(int argc, char** argv, const std::vector<std::string>& known) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      a.help = true;
      continue;
    }
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    std::string key = s.substr(2), value;
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= argc) throw UsageError("--" + key + " needs a value");
      value = argv[++i];
    }
    bool ok = false;
    for (const auto& k : known) ok |= (k == key);
    if (!ok) throw UsageError("unknown option --" + key);
    a.opts[key].push_back(value);
  }
  return a;
}

long long to_int(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw UsageError("--" + opt + " expects an integer, got '" + v + "'");
  return n;
}

// Options every wheel of a pack or pack-many call shares (name, metadata, output,
// reproducibility and deflate settings), read from `a` into `o`.
void read_shared_pack_options(const Args& a, ffpa::core::PackOptions& o) {
  o.name = a.need("name");
  if (!a.get("metadata"))
    throw UsageError("--metadata FILE is required: 'Key: value' lines with at least Summary and Requires-Python");
  o.metadata = *a.get("metadata");
  o.out_dir = a.need("out-dir");
  if (auto v = a.get("readme")) o.readme = *v;
  if (auto v = a.get("readme-type")) o.readme_type = *v;
  if (auto v = a.get("source-date-epoch")) o.source_date_epoch = to_int("source-date-epoch", *v);
  if (auto v = a.get("deflate-cache")) o.deflate.cache_dir = *v;
  if (auto v = a.get("level")) o.deflate.level = static_cast<int>(to_int("level", *v));
  if (auto v = a.get("jobs")) {
    const long long j = to_int("jobs", *v);
    if (j < 1) throw UsageError("--jobs must be at least 1");
    o.deflate.jobs = static_cast<unsigned>(j);
  }
  if (a.opts.count("forbid-path")) o.forbidden_strings = a.opts.at("forbid-path");
}

int pack_cmd(int argc, char** argv) {
  const Args a = parse(argc, argv,
                       {"tree", "name", "version", "tag", "metadata", "readme", "readme-type", "out-dir", "root-is-purelib",
                        "source-date-epoch", "deflate-cache", "level", "jobs", "forbid-path", "test-zip64-threshold"});
  if (a.help) {
    std::cout << kPackHelp;
    return 0;
  }
  if (!a.positional.empty()) throw UsageError("unexpected argument '" + a.positional.front() + "'");
  ffpa::core::PackOptions o;
  o.tree = a.need("tree");
  o.version = a.need("version");
  o.tag = a.need("tag");
  read_shared_pack_options(a, o);
  if (auto v = a.get("root-is-purelib")) {
    if (*v != "true" && *v != "false") throw UsageError("--root-is-purelib takes true or false");
    o.root_is_purelib = *v == "true";
  }
  if (auto v = a.get("test-zip64-threshold")) o.layout.zip64_size_threshold = static_cast<std::uint64_t>(to_int("test-zip64-threshold", *v));
  const auto r = ffpa::core::pack_wheel(o);
  std::cout << r.wheel.string() << "\n";
  return 0;
}

// pack-many: options are read in order, since a --tree opens a wheel group.
int pack_many_cmd(int argc, char** argv) {
  const std::vector<std::string> shared_keys = {"name", "metadata", "readme", "readme-type", "out-dir",
                                                "source-date-epoch", "deflate-cache", "level", "jobs", "forbid-path"};
  const std::vector<std::string> wheel_keys = {"tree", "tag", "version", "root-is-purelib"};
  Args shared;                         // shared options, plus the defaults given before the first --tree
  std::vector<std::map<std::string, std::string>> groups;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      std::cout << kPackManyHelp;
      return 0;
    }
    if (s.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + s + "'");
    std::string key = s.substr(2), value;
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= argc) throw UsageError("--" + key + " needs a value");
      value = argv[++i];
    }
    const bool is_shared = std::find(shared_keys.begin(), shared_keys.end(), key) != shared_keys.end();
    const bool is_wheel = std::find(wheel_keys.begin(), wheel_keys.end(), key) != wheel_keys.end();
    if (!is_shared && !is_wheel) throw UsageError("unknown option --" + key);
    if (key == "tree") {
      groups.push_back({{"tree", value}});
    } else if (is_wheel && !groups.empty()) {
      if (!groups.back().emplace(key, value).second)
        throw UsageError("--" + key + " given twice for the wheel of --tree " + groups.back().at("tree"));
    } else if (is_wheel && key == "tag") {
      throw UsageError("--tag before the first --tree; each wheel's --tag follows its --tree");
    } else {
      shared.opts[key].push_back(value);
    }
  }
  if (groups.empty()) throw UsageError("give at least one --tree DIR --tag T group");
  ffpa::core::PackOptions base;
  read_shared_pack_options(shared, base);
  const auto purelib = [](const std::string& v) {
    if (v != "true" && v != "false") throw UsageError("--root-is-purelib takes true or false");
    return v == "true";
  };
  const std::optional<std::string> default_version = shared.get("version");
  const std::optional<std::string> default_purelib = shared.get("root-is-purelib");
  std::vector<ffpa::core::PackOptions> wheels;
  for (const auto& g : groups) {
    ffpa::core::PackOptions o = base;
    o.tree = g.at("tree");
    auto tag = g.find("tag");
    if (tag == g.end()) throw UsageError("the wheel of --tree " + g.at("tree") + " has no --tag");
    o.tag = tag->second;
    auto version = g.find("version");
    if (version != g.end()) o.version = version->second;
    else if (default_version) o.version = *default_version;
    else throw UsageError("the wheel of --tree " + g.at("tree") + " has no --version (and no default before the first --tree)");
    auto pl = g.find("root-is-purelib");
    if (pl != g.end()) o.root_is_purelib = purelib(pl->second);
    else if (default_purelib) o.root_is_purelib = purelib(*default_purelib);
    wheels.push_back(std::move(o));
  }
  for (const auto& r : ffpa::core::pack_wheels(wheels)) std::cout << r.wheel.string() << "\n";
  return 0;
}

int verify_cmd(int argc, char** argv) {
  const Args a = parse(argc, argv, {});
  if (a.help) {
    std::cout << kVerifyHelp;
    return 0;
  }
  if (a.positional.empty()) throw UsageError("give at least one wheel");
  int rc = 0;
  for (const auto& w : a.positional) {
    const auto r = ffpa::core::verify_wheel(w);
    if (r.ok) {
      std::cout << w << ": OK\n";
      continue;
    }
    rc = 1;
    std::cout << w << ": " << r.problems.size() << " problem(s)\n";
    for (const auto& p : r.problems) std::cout << "  - " << p << "\n";
  }
  return rc;
}

int platform_cmd(int argc, char** argv) {
  const Args a = parse(argc, argv, {"tree", "forbid-path"});
  if (a.help) {
    std::cout << kPlatformHelp;
    return 0;
  }
  ffpa::core::PlatformOptions o;
  if (a.opts.count("forbid-path")) o.forbidden_strings = a.opts.at("forbid-path");
  const auto d = ffpa::core::decide_manylinux(a.need("tree"), o);
  if (!d.problems.empty()) {
    std::cerr << "ffpa-index platform-tag: the tree cannot be shipped as a manylinux wheel:\n";
    for (const auto& p : d.problems) std::cerr << "  - " << p << "\n";
    return 1;
  }
  std::cout << d.tag << "\n";
  for (const auto& r : d.reasons) std::cout << "  " << r << "\n";
  return 0;
}

// Commands that take exactly one wheel: prints `help` for --help, else returns the path.
std::optional<std::string> one_wheel(int argc, char** argv, const char* help) {
  const Args a = parse(argc, argv, {});
  if (a.help) {
    std::cout << help;
    return std::nullopt;
  }
  if (a.positional.size() != 1) throw UsageError("give exactly one wheel");
  return a.positional.front();
}

int metadata_cmd(int argc, char** argv) {
  if (const auto whl = one_wheel(argc, argv, kMetadataHelp)) std::cout << ffpa::core::read_wheel_metadata(*whl);
  return 0;
}

int list_cmd(int argc, char** argv) {
  const auto whl = one_wheel(argc, argv, kListHelp);
  if (!whl) return 0;
  const ffpa::core::ZipReader zip(*whl);
  for (const auto& m : zip.members())
    std::cout << m.size << ' ' << m.compressed_size << ' ' << (m.method == 0 ? "stored" : "deflated") << ' '
              << m.name << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) would kill the engine with SIGXFSZ mid-write, with no
  // message and no cleanup. Ignored, the write fails with EFBIG instead and is reported
  // (and undone) like a full disk.
  ::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    std::cerr << kTopHelp;
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kTopHelp;
    return 0;
  }
  if (cmd == "--version") {
    std::cout << "ffpa-index " FFPA_INDEX_VERSION "\n";
    return 0;
  }
  for (const char* s : kSiteCommands) {
    if (cmd != s) continue;
    return ffpa::site::main(argc - 1, argv + 1);
  }
  if (cmd == "release") return ffpa::release::main(argc - 1, argv + 1);
  try {
    if (cmd == "pack") return pack_cmd(argc, argv);
    if (cmd == "pack-many") return pack_many_cmd(argc, argv);
    if (cmd == "verify-wheel") return verify_cmd(argc, argv);
    if (cmd == "platform-tag") return platform_cmd(argc, argv);
    if (cmd == "metadata") return metadata_cmd(argc, argv);
    if (cmd == "list") return list_cmd(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "ffpa-index " << cmd << ": " << e.what() << "; see ffpa-index " << cmd << " --help\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ffpa-index " << cmd << ": error: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "ffpa-index: unknown command '" << cmd << "'; see ffpa-index --help\n";
  return 2;
}
