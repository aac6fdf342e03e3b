// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// ffpa-index: the command-line front end of the release engine. Every command is a
// row of one table (its help, its flags, its handler) parsed by one grammar
// (args.h); the wheel and release commands are here, the index and publishing
// commands in site_commands.cpp.
#include <signal.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "ffpa/core/atomic.h"
#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "ffpa/core/manifest.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"
#include "ffpa/core/zip.h"
#include "ffpa/release/release.h"

namespace {

const char* const kTopHelp =
    "usage: ffpa-index <command> [options]\n"
    "\n"
    "Wheel engine:\n"
    "  pack           staged tree + metadata -> PEP 427 wheel (deterministic)\n"
    "  verify-wheel   recompute RECORD, check names, tags and layout of wheels\n"
    "  platform-tag   print the manylinux tag the ELF files of a tree allow, and why\n"
    "  metadata       print a wheel's METADATA file (what PEP 658 serves)\n"
    "  list           print a wheel's members: size, compressed size, method, name\n"
    "  release        run a release plan: every wheel in one pass (files they share compressed once),\n"
    "                 SHA256SUMS, requirements, manifest, local site\n"
    "\n"
    "Index and publishing (index/site):\n"
    "  add, remove, yank, unyank, verify, render, publish, publish-pure\n"
    "\n"
    "ffpa-index <command> --help describes each command. ffpa-index --version prints the engine version.\n";

const char* const kPackHelp =
    "usage: ffpa-index pack --tree DIR --name NAME --version VER --tag PY-ABI-PLAT --metadata FILE\n"
    "                       --out-dir DIR [--readme FILE] [--root-is-purelib true|false]\n"
    "                       [--source-date-epoch N] [--level N] [--jobs N]\n"
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
    "  --readme FILE         long description; its type from the extension (.md, .rst, else plain text)\n"
    "  --root-is-purelib B   default: true for *-none-any, false otherwise\n"
    "  --source-date-epoch N entry timestamps (default: $SOURCE_DATE_EPOCH; refused if neither)\n"
    "  --level N             zlib level 0-9 (default 1: see index/bench/README.md)\n"
    "  --jobs N              compression threads (default: all cores); the output does not depend on it\n"
    "  --forbid-path STR     refuse binaries containing STR (e.g. the build directory); repeatable\n"
    "  --test-zip64-threshold N  testing only: write ZIP64 records for sizes/offsets >= N bytes\n";

const char* const kVerifyHelp =
    "usage: ffpa-index verify-wheel WHEEL...\n"
    "\n"
    "Checks each wheel as an attacker's would be checked, so that what pip installs is exactly RECORD:\n"
    "the zip structure (no byte another reader could read differently), member names every OS and\n"
    "installer reads as one file, RECORD's hashes and sizes (members streamed), the canonical file name\n"
    "against WHEEL and METADATA, METADATA and WHEEL as pip and uv parse them, the .dist-info layout, and\n"
    "every ELF file and .so against the platform tag. index/README.md, \"Reading untrusted wheels\",\n"
    "gives every rule. Exit status 1 with the list of problems when any wheel fails.\n";

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

const char* const kReleaseHelp =
    "usage: ffpa-index release --plan PLAN.json --staging DIR\n"
    "  Packs every wheel of the plan from the trees staged under DIR in one pass, then writes\n"
    "  SHA256SUMS, the hash-locked requirements-<channel>.txt, ffpa-release-manifest.json and\n"
    "  ffpa-build.log into the plan's out_dir and renders the local site into its site_dir. CMake\n"
    "  writes the plan at configure time (cmake/FfpaReleasePlan.cmake) and the package target runs\n"
    "  this command (cmake/FfpaPackWheels.cmake); docs/release.md describes the plan.\n";

namespace core = ffpa::core;
using ffpa::cli::Args;
using ffpa::cli::UsageError;

long long to_int(const std::string& opt, const std::string& v, long long min = LLONG_MIN) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw UsageError(opt + " expects an integer, got '" + v + "'");
  if (n < min) throw UsageError(opt + " must be at least " + std::to_string(min));
  return n;
}

int pack_cmd(const Args& a) {
  a.no_positional();
  core::PackOptions o;
  o.tree = a.need("--tree", "DIR");
  o.name = a.need("--name", "NAME");
  o.version = a.need("--version", "VER");
  o.tag = a.need("--tag", "PYTHON-ABI-PLATFORM");
  if (!a.has("--metadata"))
    throw UsageError("--metadata FILE is required: 'Key: value' lines with at least Summary and Requires-Python");
  const std::string meta = *a.get("--metadata");
  const auto text = core::read_file(meta);
  if (!text) throw core::Error("cannot read metadata file '" + meta + "'; check the path");
  o.metadata = *text;
  o.metadata_source = "--metadata '" + meta + "'";
  o.out_dir = a.need("--out-dir", "DIR");
  o.readme = a.get_or("--readme", "");
  if (auto v = a.get("--source-date-epoch")) o.source_date_epoch = to_int("--source-date-epoch", *v);
  if (auto v = a.get("--level")) o.deflate.level = static_cast<int>(to_int("--level", *v));
  if (auto v = a.get("--jobs")) o.deflate.jobs = static_cast<unsigned>(to_int("--jobs", *v, 1));
  o.forbidden_strings = a.all("--forbid-path");
  if (auto v = a.get("--root-is-purelib")) {
    if (*v != "true" && *v != "false") throw UsageError("--root-is-purelib takes true or false");
    o.root_is_purelib = *v == "true";
  }
  if (auto v = a.get("--test-zip64-threshold"))
    o.layout.zip64_size_threshold = static_cast<std::uint64_t>(to_int("--test-zip64-threshold", *v));
  std::cout << core::pack_wheel(o).wheel.string() << "\n";
  return 0;
}

int verify_cmd(const Args& a) {
  if (a.positional().empty()) throw UsageError("give at least one wheel");
  int rc = 0;
  for (const auto& w : a.positional()) {
    const auto r = core::verify_wheel(w);
    const std::string head = w + ": " + std::to_string(r.problems.size()) + " problem(s)";
    std::cout << core::terminal_safe(r.ok ? w + ": OK" : core::problem_list(head, r.problems)) << "\n";
    rc |= r.ok ? 0 : 1;
  }
  return rc;
}

int platform_cmd(const Args& a) {
  a.no_positional();
  const auto d = core::decide_manylinux(a.need("--tree", "DIR"), a.all("--forbid-path"));
  if (!d.problems.empty()) {
    std::cerr << core::terminal_safe(core::problem_list(
                     "ffpa-index platform-tag: the tree cannot be shipped as a manylinux wheel:", d.problems))
              << "\n";
    return 1;
  }
  std::cout << d.tag << "\n";
  for (const auto& r : d.reasons) std::cout << "  " << r << "\n";
  return 0;
}

const std::string& one_wheel(const Args& a) {
  if (a.positional().size() != 1) throw UsageError("give exactly one wheel");
  return a.positional().front();
}

int list_cmd(const Args& a) {
  const core::ZipReader zip(one_wheel(a));
  for (const auto& m : zip.members())
    std::cout << m.size << ' ' << m.compressed_size << ' ' << (m.method == 0 ? "stored" : "deflated") << ' '
              << m.name << '\n';
  return 0;
}

int release_cmd(const Args& a) {
  a.no_positional();
  const std::string plan = a.need("--plan", "PLAN.json"), staging = a.need("--staging", "DIR (CPack's staging directory)");
  ffpa::release::run_release(core::read_release(plan, core::ReleaseForm::plan), staging, std::cout);
  return 0;
}

std::vector<ffpa::cli::Command> wheel_commands() {
  using K = Args::Kind;
  return {
      {"pack", kPackHelp,
       {{"--tree", K::kValue}, {"--name", K::kValue}, {"--version", K::kValue}, {"--tag", K::kValue},
        {"--metadata", K::kValue}, {"--readme", K::kValue}, {"--out-dir", K::kValue},
        {"--root-is-purelib", K::kValue}, {"--source-date-epoch", K::kValue}, {"--level", K::kValue},
        {"--jobs", K::kValue}, {"--forbid-path", K::kRepeated}, {"--test-zip64-threshold", K::kValue}},
       pack_cmd},
      {"verify-wheel", kVerifyHelp, {}, verify_cmd},
      {"platform-tag", kPlatformHelp, {{"--tree", K::kValue}, {"--forbid-path", K::kRepeated}}, platform_cmd},
      {"metadata", kMetadataHelp, {},
       [](const Args& a) {
         std::cout << core::read_wheel_metadata(one_wheel(a));
         return 0;
       }},
      {"list", kListHelp, {}, list_cmd},
      {"release", kReleaseHelp, {{"--plan", K::kValue}, {"--staging", K::kValue}}, release_cmd},
  };
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
  auto commands = wheel_commands();
  for (auto& c : ffpa::cli::site_commands()) commands.push_back(std::move(c));
  for (const auto& c : commands) {
    if (cmd != c.name) continue;
    try {
      const Args a(argc - 1, argv + 1, c.flags);
      if (a.help()) {
        std::cout << c.help;
        return 0;
      }
      return c.run(a);
    } catch (const UsageError& e) {
      std::cerr << "ffpa-index " << cmd << ": " << core::terminal_safe(e.what()) << "; see ffpa-index " << cmd
                << " --help\n";
      return 2;
    } catch (const core::Error& e) {
      std::cerr << "ffpa-index " << cmd << ": error: " << core::terminal_safe(e.what()) << "\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "ffpa-index " << cmd << ": unexpected failure: " << core::terminal_safe(e.what()) << "\n";
      return 1;
    }
  }
  std::cerr << "ffpa-index: unknown command '" << core::printable(cmd) << "'; see ffpa-index --help\n";
  return 2;
}
