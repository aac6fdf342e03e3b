// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// verify_wheel against wheels tampered with in specific ways; each must be caught.
#include <gtest/gtest.h>

#include <algorithm>

#include "ffpa/core/hash.h"
#include "ffpa/core/wheel.h"
#include "ffpa/core/zip.h"
#include "util.h"

using namespace ffpa::core;
namespace fs = std::filesystem;

namespace {

struct File {
  std::string name, data;
};

// Writes a wheel from explicit members, bypassing pack's own checks.
fs::path raw_wheel(const fs::path& p, const std::vector<File>& files) {
  std::vector<std::string_view> inputs;
  for (const auto& f : files) inputs.push_back(f.data);
  const auto bodies = compress_members(inputs, DeflateOptions{});
  AtomicOutput out(p);
  ZipWriter zip(out, ZipLayout{});
  for (size_t i = 0; i < files.size(); ++i) zip.add(files[i].name, 0644, bodies[i]);
  zip.finish();
  out.commit();
  return p;
}

std::string rec(const std::string& name, const std::string& data) {
  return csv_line({name, sha256_record_digest(data), std::to_string(data.size())});
}

const std::string kInit = "x = 1\n";
const std::string kMeta = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\nSummary: s\n";
const std::string kWheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n";

std::vector<File> good_files(const std::string& di = "demo_pkg-1.0.dist-info") {
  std::string record = rec("demo_pkg/__init__.py", kInit) + rec(di + "/METADATA", kMeta) + rec(di + "/WHEEL", kWheel) +
                       csv_line({di + "/RECORD", "", ""});
  return {{"demo_pkg/__init__.py", kInit}, {di + "/METADATA", kMeta}, {di + "/WHEEL", kWheel}, {di + "/RECORD", record}};
}

bool mentions(const WheelCheck& c, const std::string& needle) {
  return std::any_of(c.problems.begin(), c.problems.end(),
                     [&](const std::string& p) { return p.find(needle) != std::string::npos; });
}

class Verify : public ::testing::Test {
 protected:
  ffpa::test::TempDir dir{"verify"};
  fs::path whl = dir / "demo_pkg-1.0-py3-none-any.whl";
};

}  // namespace

TEST_F(Verify, AcceptsAGoodWheel) {
  const auto c = verify_wheel(raw_wheel(whl, good_files()));
  EXPECT_TRUE(c.ok) << (c.problems.empty() ? "" : c.problems.front());
  EXPECT_EQ(read_wheel_metadata(whl), kMeta);
}

TEST_F(Verify, CatchesHashMismatch) {
  auto files = good_files();
  files[0].data = "x = 2\n";  // same size, other bytes
  const auto c = verify_wheel(raw_wheel(whl, files));
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c, "hash mismatch for 'demo_pkg/__init__.py'"));
}

TEST_F(Verify, CatchesUnlistedAndMissingMembers) {
  auto files = good_files();
  files.insert(files.begin() + 1, File{"demo_pkg/extra.py", "y = 1\n"});
  files[0].name = "demo_pkg/renamed.py";
  const auto c = verify_wheel(raw_wheel(whl, files));
  EXPECT_TRUE(mentions(c, "'demo_pkg/extra.py' is not listed in RECORD"));
  EXPECT_TRUE(mentions(c, "RECORD lists 'demo_pkg/__init__.py' which is not in the archive"));
}

TEST_F(Verify, CatchesTagAndNameMismatch) {
  raw_wheel(dir / "demo_pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", good_files());
  auto c = verify_wheel(dir / "demo_pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl");
  EXPECT_TRUE(mentions(c, "do not match the file name's tags"));
  raw_wheel(dir / "other_pkg-1.0-py3-none-any.whl", good_files());
  c = verify_wheel(dir / "other_pkg-1.0-py3-none-any.whl");
  EXPECT_TRUE(mentions(c, "does not match the file name"));
  raw_wheel(dir / "demo_pkg-2.0-py3-none-any.whl", good_files());
  c = verify_wheel(dir / "demo_pkg-2.0-py3-none-any.whl");
  EXPECT_TRUE(mentions(c, "does not match the file name"));
}

TEST_F(Verify, CatchesDistInfoNotLastAndBadRecordLine) {
  auto files = good_files();
  std::swap(files[0], files[1]);  // METADATA first, then the package file
  auto c = verify_wheel(raw_wheel(whl, files));
  EXPECT_TRUE(mentions(c, "comes after the .dist-info entries"));

  files = good_files();
  files[3].data = "demo_pkg/__init__.py,sha256=abc\n";
  c = verify_wheel(raw_wheel(whl, files));
  EXPECT_TRUE(mentions(c, "RECORD: line with 2 fields"));
}

TEST_F(Verify, CatchesBadFileNameAndNonZip) {
  raw_wheel(dir / "demo-pkg-1.0-py3-none-any.whl", good_files());
  EXPECT_TRUE(mentions(verify_wheel(dir / "demo-pkg-1.0-py3-none-any.whl"), "file name"));
  ffpa::test::write_file(whl, "not a zip");
  const auto c = verify_wheel(whl);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c, "not a valid zip archive"));
}

TEST(Csv, QuotesLikePythonCsv) {
  EXPECT_EQ(csv_line({"a,b", "x\"y", "plain"}), "\"a,b\",\"x\"\"y\",plain\n");
  const auto rows = parse_csv("\"a,b\",\"x\"\"y\",plain\nlast,,\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"a,b", "x\"y", "plain"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"last", "", ""}));
}

TEST(Headers, ParsesContinuationsAndBody) {
  std::string body;
  std::vector<std::string> problems;
  const auto h = parse_headers("A: 1\nB: two\n  more\n\nthe body\n", "X", problems, &body);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].second, "two\n  more");
  EXPECT_EQ(body, "the body\n");
}
