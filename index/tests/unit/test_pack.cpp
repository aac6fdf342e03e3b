// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <regex>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/wheel.h"
#include "ffpa/core/zip.h"
#include "util.h"

using namespace ffpa::core;
namespace fs = std::filesystem;
using ffpa::test::write_file;

namespace {

class Pack : public ::testing::Test {
 protected:
  ffpa::test::TempDir dir{"pack"};
  PackOptions opts;

  void SetUp() override {
    write_file(dir / "tree/ffpa_attn/__init__.py", "__version__ = '0.3.0'\n");
    write_file(dir / "tree/ffpa_attn/reference.py", "def attention():\n    pass\n");
    write_file(dir / "tree/ffpa_attn/bin/tool", "#!/bin/sh\necho hi\n");
    fs::permissions(dir / "tree/ffpa_attn/bin/tool", fs::perms::owner_exec, fs::perm_options::add);
    opts.metadata =
        "Summary: Faster flash prefill attention\nRequires-Python: >=3.10\nRequires-Dist: numpy\n"
        "License: Apache-2.0\nProject-URL: Homepage, https://example.invalid/ffpa\n";
    write_file(dir / "README.md", "# ffpa-attn\n\nLarge head-dim attention.\n");
    opts.tree = dir / "tree";
    opts.name = "ffpa-attn";
    opts.version = "0.3.0";
    opts.tag = "py3-none-any";
    opts.readme = dir / "README.md";
    opts.out_dir = dir / "out";
    opts.source_date_epoch = 1700000000;
  }

  // Packing must fail with a message containing `needle` and leave out_dir empty.
  void expect_refused(const std::string& needle) {
    try {
      pack_wheel(opts);
      ADD_FAILURE() << "pack_wheel accepted bad input (expected: " << needle << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u) << "a refused pack left files behind";
  }
};

}  // namespace

TEST_F(Pack, PureWheelRoundTrip) {
  const auto r = pack_wheel(opts);
  EXPECT_EQ(r.wheel.filename(), "ffpa_attn-0.3.0-py3-none-any.whl");
  const auto check = verify_wheel(r.wheel);
  EXPECT_TRUE(check.ok) << (check.problems.empty() ? "" : check.problems.front());

  ZipReader z(r.wheel);
  std::vector<std::string> names;
  for (const auto& m : z.members()) names.push_back(m.name);
  const std::vector<std::string> expected = {
      "ffpa_attn/__init__.py", "ffpa_attn/bin/tool", "ffpa_attn/reference.py",
      "ffpa_attn-0.3.0.dist-info/METADATA", "ffpa_attn-0.3.0.dist-info/WHEEL", "ffpa_attn-0.3.0.dist-info/RECORD"};
  EXPECT_EQ(names, expected) << "tree entries sorted, .dist-info last";
  EXPECT_EQ(z.find("ffpa_attn/bin/tool")->external_attr >> 16, 0100755u);
  EXPECT_EQ(z.find("ffpa_attn/__init__.py")->external_attr >> 16, 0100644u);

  EXPECT_EQ(z.read("ffpa_attn-0.3.0.dist-info/WHEEL"),
            "Wheel-Version: 1.0\nGenerator: ffpa-index " FFPA_INDEX_VERSION_FOR_TESTS
            "\nRoot-Is-Purelib: true\nTag: py3-none-any\n");
  const std::string meta = z.read("ffpa_attn-0.3.0.dist-info/METADATA");
  EXPECT_EQ(meta, read_wheel_metadata(r.wheel));
  EXPECT_EQ(meta.rfind("Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 0.3.0\nSummary: Faster flash prefill attention\n", 0), 0u) << meta;
  EXPECT_NE(meta.find("\nRequires-Dist: numpy\n"), std::string::npos);
  EXPECT_NE(meta.find("\nDescription-Content-Type: text/markdown\n\n# ffpa-attn\n\nLarge head-dim attention.\n"), std::string::npos);

  // RECORD: path,sha256=<urlsafe b64 no padding>,size ; its own line ",,".
  const std::string record = z.read("ffpa_attn-0.3.0.dist-info/RECORD");
  const std::regex line(R"(^[^,]+,sha256=[A-Za-z0-9_-]{43},[0-9]+$)");
  auto rows = parse_csv(record);
  ASSERT_EQ(rows.size(), 6u);
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_TRUE(std::regex_match(csv_line(rows[i]).substr(0, csv_line(rows[i]).size() - 1), line)) << csv_line(rows[i]);
    EXPECT_EQ(rows[i][1], sha256_record_digest(z.read(rows[i][0])));
  }
  EXPECT_EQ(csv_line(rows.back()), "ffpa_attn-0.3.0.dist-info/RECORD,,\n");
}

TEST_F(Pack, NormalisesNameAndLocalVersion) {
  opts.name = "FFPA.Attn";
  opts.version = "0.3.0+CU13";
  const auto r = pack_wheel(opts);
  EXPECT_EQ(r.wheel.filename(), "ffpa_attn-0.3.0+cu13-py3-none-any.whl");
  EXPECT_TRUE(verify_wheel(r.wheel).ok);
  const std::string meta = read_wheel_metadata(r.wheel);
  EXPECT_NE(meta.find("\nName: FFPA.Attn\nVersion: 0.3.0+cu13\n"), std::string::npos) << meta;
  ZipReader z(r.wheel);
  EXPECT_NE(z.find("ffpa_attn-0.3.0+cu13.dist-info/RECORD"), nullptr);
}

TEST_F(Pack, MetadataVersionFollowsFields) {
  opts.metadata = "Summary: s\nRequires-Python: >=3.10\nLicense-Expression: Apache-2.0\n";
  EXPECT_NE(read_wheel_metadata(pack_wheel(opts).wheel).find("Metadata-Version: 2.4\n"), std::string::npos);
}

TEST_F(Pack, DeterministicAcrossRunsAndJobs) {
  write_file(dir / "tree/ffpa_attn/libbig.so.data", ffpa::test::mixed_bytes(6u << 20, 21));
  opts.deflate.jobs = 1;
  opts.out_dir = dir / "o1";
  const std::string a = ffpa::test::slurp(pack_wheel(opts).wheel);
  opts.out_dir = dir / "o2";
  const std::string b = ffpa::test::slurp(pack_wheel(opts).wheel);
  opts.deflate.jobs = 4;
  opts.out_dir = dir / "o3";
  const std::string c = ffpa::test::slurp(pack_wheel(opts).wheel);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c) << "--jobs must not change the bytes";
  EXPECT_TRUE(verify_wheel(dir / "o3" / "ffpa_attn-0.3.0-py3-none-any.whl").ok);
  // ".so.data" is not a shared object's name (the one compiled-file rule): a plain file.
  EXPECT_EQ(ZipReader(dir / "o3" / "ffpa_attn-0.3.0-py3-none-any.whl").find("ffpa_attn/libbig.so.data")->external_attr >> 16,
            0100644u);

  opts.source_date_epoch = 1700000100;
  opts.out_dir = dir / "o6";
  EXPECT_NE(a, ffpa::test::slurp(pack_wheel(opts).wheel)) << "the timestamp comes from the epoch";
}

TEST_F(Pack, EpochFromEnvironmentOrRefused) {
  opts.source_date_epoch.reset();
  ::setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
  const std::string from_env = ffpa::test::slurp(pack_wheel(opts).wheel);
  opts.source_date_epoch = 1700000000;
  opts.out_dir = dir / "o2";
  EXPECT_EQ(from_env, ffpa::test::slurp(pack_wheel(opts).wheel));
  opts.source_date_epoch.reset();
  opts.out_dir = dir / "o3";
  ::unsetenv("SOURCE_DATE_EPOCH");
  expect_refused("SOURCE_DATE_EPOCH");
  ::setenv("SOURCE_DATE_EPOCH", "yesterday", 1);
  expect_refused("not a non-negative integer");
  ::unsetenv("SOURCE_DATE_EPOCH");
}

TEST_F(Pack, Zip64ThroughTheTestHook) {
  opts.layout.zip64_size_threshold = 64;
  const auto r = pack_wheel(opts);
  EXPECT_TRUE(ZipReader(r.wheel).used_zip64());
  EXPECT_TRUE(verify_wheel(r.wheel).ok);
}

// What pack measured while writing is what the file holds: nothing reads it back.
TEST_F(Pack, ReportsWhatItWrote) {
  const auto r = pack_wheel(opts);
  EXPECT_EQ(r.sha256, sha256_hex(ffpa::test::slurp(r.wheel)));
  EXPECT_EQ(r.size, fs::file_size(r.wheel));
  EXPECT_EQ(r.name.filename(), r.wheel.filename().string());
  EXPECT_EQ(r.metadata, read_wheel_metadata(r.wheel));
  ZipReader z(r.wheel);
  ASSERT_EQ(r.members.size(), z.members().size());
  for (std::size_t i = 0; i < r.members.size(); ++i) {
    EXPECT_EQ(r.members[i].name, z.members()[i].name);
    EXPECT_EQ(r.members[i].size, z.members()[i].size);
    EXPECT_EQ(r.members[i].compressed_size, z.members()[i].compressed_size);
  }
}

// A shared object's name makes a member 0755 even without the x bit (here in a macOS
// wheel, where a .so need not be an ELF file).
TEST_F(Pack, SharedObjectNameIsExecutable) {
  write_file(dir / "tree/ffpa_attn/_k.so", "not an ELF file");
  opts.tag = "cp312-cp312-macosx_11_0_arm64";
  const auto r = pack_wheel(opts);
  EXPECT_EQ(ZipReader(r.wheel).find("ffpa_attn/_k.so")->external_attr >> 16, 0100755u);
  EXPECT_TRUE(verify_wheel(r.wheel).ok);
}

TEST_F(Pack, RefusesMetadataWithoutSummary) {
  opts.metadata = "Requires-Python: >=3.10\n";
  expect_refused("no 'Summary:' line");
}
TEST_F(Pack, RefusesMetadataWithoutRequiresPython) {
  opts.metadata = "Summary: x\n";
  expect_refused("Requires-Python");
}
TEST_F(Pack, RefusesUnknownOrReservedMetadataFields) {
  opts.metadata = "Summary: x\nRequires-Python: >=3.10\nRequires-Dsit: numpy\n";
  expect_refused("unknown field 'Requires-Dsit'");
  opts.metadata = "Summary: x\nRequires-Python: >=3.10\nVersion: 9\n";
  expect_refused("writes itself");
}
// pack writes fields as the specification spells them, and not metadata 1.1's deprecated
// ones (readers tolerate both; a wheel we build should not need them to).
TEST_F(Pack, RefusesMisspelledOrDeprecatedMetadataFields) {
  opts.metadata = "summary: x\nRequires-Python: >=3.10\n";
  expect_refused("as core metadata does not: write 'Summary'");
  opts.metadata = "Summary: x\nrequires-python: >=3.10\n";
  expect_refused("'Requires-Python'");
  opts.metadata = "Summary: x\nRequires-Python: >=3.10\nRequires: foo\n";
  expect_refused("use 'Requires-Dist' instead");
}
TEST_F(Pack, RefusesInvalidName) {
  opts.name = "ffpa attn";
  expect_refused("invalid project name");
}
TEST_F(Pack, RefusesNonPep440Version) {
  opts.version = "0.3.0-final-final";
  expect_refused("PEP 440");
}
TEST_F(Pack, RefusesBadTag) {
  opts.tag = "py3-any";
  expect_refused("PYTHON-ABI-PLATFORM");
  opts.tag = "py3-no!ne-any";
  expect_refused("each tag field may only hold letters, digits, '_' and '.'");
}
TEST_F(Pack, RefusesSymlinkOutOfTree) {
  write_file(dir / "secret.txt", "outside");
  fs::create_symlink("../../secret.txt", dir / "tree/ffpa_attn/leak.txt");
  expect_refused("outside the tree");
}
TEST_F(Pack, StoresInTreeSymlinkAsFile) {
  fs::create_symlink("reference.py", dir / "tree/ffpa_attn/alias.py");
  const auto r = pack_wheel(opts);
  EXPECT_EQ(ZipReader(r.wheel).read("ffpa_attn/alias.py"), ffpa::test::slurp(dir / "tree/ffpa_attn/reference.py"));
}
TEST_F(Pack, RefusesTreeWithDistInfo) {
  write_file(dir / "tree/ffpa_attn-0.3.0.dist-info/METADATA", "x");
  expect_refused(".dist-info");
}
TEST_F(Pack, RefusesEmptyTree) {
  fs::remove_all(dir / "tree");
  fs::create_directories(dir / "tree/empty_dir");
  expect_refused("holds no files");
}
TEST_F(Pack, RefusesMissingTree) {
  opts.tree = dir / "nope";
  expect_refused("not a directory");
}
TEST_F(Pack, RefusesBinaryInPureWheel) {
  fs::copy_file(FFPA_TEST_SO, dir / "tree/ffpa_attn/_C.so");
  expect_refused("pure wheel must not ship binaries");
}
TEST_F(Pack, RefusesBadLevel) {
  opts.deflate.level = 11;
  expect_refused("out of range");
}

TEST_F(Pack, OnePassEqualsSeparatePacks) {
  // Four trees holding separate copies of the same large library (and one odd
  // tree whose library differs in its last byte), plus a pure wheel.
  const std::string big = ffpa::test::mixed_bytes(6u << 20, 33);
  std::vector<PackOptions> many;
  for (int i = 0; i < 5; ++i) {
    const fs::path tree = dir / ("ctree" + std::to_string(i));
    write_file(tree / "ffpa_attn/__init__.py", "__version__ = '0.3.0'\n");
    std::string lib = big;
    if (i == 4) lib.back() ^= 1;
    write_file(tree / "ffpa_attn/libffpa_kernels.so.data", lib);
    PackOptions o = opts;
    o.tree = tree;
    o.version = "0.3.0+cu13";
    o.tag = "cp31" + std::to_string(i) + "-cp31" + std::to_string(i) + "-manylinux_2_39_x86_64";
    o.root_is_purelib = false;
    many.push_back(o);
  }
  many.push_back(opts);  // the pure wheel
  std::vector<std::string> separate;
  for (auto o : many) {
    o.out_dir = dir / "sep";
    separate.push_back(ffpa::test::slurp(pack_wheel(o).wheel));
  }
  for (auto& o : many) o.out_dir = dir / "many";
  const auto results = pack_wheels(many);
  ASSERT_EQ(results.size(), many.size());
  for (size_t k = 0; k < many.size(); ++k) {
    EXPECT_EQ(results[k].wheel, many[k].out_dir / fs::path(results[k].wheel).filename());
    EXPECT_EQ(ffpa::test::slurp(results[k].wheel), separate[k]) << "one pass must write pack's bytes: " << results[k].wheel;
    EXPECT_TRUE(verify_wheel(results[k].wheel).ok);
  }
  EXPECT_EQ(ffpa::test::count_entries(many[0].out_dir), many.size()) << "no temp file left";
}

TEST_F(Pack, OnePassLeavesNothingWhenOneWheelFails) {
  std::vector<PackOptions> many;
  for (int i = 0; i < 3; ++i) {
    PackOptions o = opts;
    o.tag = "py3" + std::to_string(i) + "-none-any";
    many.push_back(o);
  }
  many[2].tree = dir / "absent";
  EXPECT_THROW(pack_wheels(many), Error);
  EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u);
  many[2] = many[1];  // the same file twice
  try {
    pack_wheels(many);
    ADD_FAILURE() << "two wheels with one file name were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("both be written"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u);
  many.pop_back();
  many[1].deflate.level = 9;
  EXPECT_THROW(pack_wheels(many), Error);
  EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u);
}
