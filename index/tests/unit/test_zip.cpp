// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <random>

#include "ffpa/core/error.h"
#include "ffpa/core/zip.h"
#include "util.h"

using namespace ffpa::core;
using ffpa::test::TempDir;

namespace {

struct Member {
  std::string name;
  std::uint32_t mode;
  std::string data;
};

std::filesystem::path write_archive(const std::filesystem::path& p, const std::vector<Member>& members,
                                    const ZipLayout& layout, const DeflateOptions& opts = {}) {
  std::vector<std::string_view> inputs;
  for (const auto& m : members) inputs.push_back(m.data);
  const auto bodies = compress_members(inputs, opts);
  AtomicOutput out(p);
  ZipWriter zip(out, layout);
  for (size_t i = 0; i < members.size(); ++i) zip.add(members[i].name, members[i].mode, bodies[i]);
  zip.finish();
  out.commit();
  return p;
}

}  // namespace

TEST(Zip, RoundTripStoredAndDeflated) {
  TempDir d("zip_rt");
  std::vector<Member> members = {
      {"a/empty.txt", 0644, ""},
      {"a/text.py", 0644, std::string(5000, 'x') + "print('hi')\n"},
      {"b/random.bin", 0644, ""},  // filled with random bytes below
      {"c/lib.so", 0755, ffpa::test::mixed_bytes(9u << 20, 7)},  // larger than any release member
  };
  std::mt19937 rng(3);
  for (int i = 0; i < 4096; ++i) members[2].data.push_back(static_cast<char>(rng()));
  ZipLayout layout;
  layout.epoch = 1700000000;
  auto p = write_archive(d / "t.zip", members, layout);
  ZipReader r(p);
  ASSERT_EQ(r.members().size(), members.size());
  EXPECT_FALSE(r.used_zip64());
  for (size_t i = 0; i < members.size(); ++i) {
    const ZipMember& m = r.members()[i];
    EXPECT_EQ(m.name, members[i].name);
    EXPECT_EQ(r.read(m.name), members[i].data) << m.name;
    EXPECT_EQ(m.external_attr >> 16, 0100000u | members[i].mode) << m.name;
    EXPECT_EQ(m.central_extra_len, 0) << "no extra fields outside ZIP64";
    EXPECT_EQ(m.dos_date, ((2023 - 1980) << 9) | (11 << 5) | 14);
    EXPECT_EQ(m.dos_time, (22 << 11) | (13 << 5) | (20 / 2));
  }
  EXPECT_EQ(r.members()[1].method, 8);
  EXPECT_EQ(r.members()[2].method, 0) << "random bytes do not shrink, so they are stored";
  EXPECT_EQ(r.members()[3].method, 8);
  EXPECT_LT(r.members()[3].compressed_size, r.members()[3].size);
}

TEST(Zip, BytesDoNotDependOnJobs) {
  const std::string big = ffpa::test::mixed_bytes(11u << 20, 11);
  const std::string small = ffpa::test::mixed_bytes(300000, 12);
  DeflateOptions one, many;
  one.jobs = 1;
  many.jobs = 5;
  const auto a = compress_members({big, small, big}, one);
  const auto b = compress_members({big, small, big}, many);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].data, b[i].data);
    EXPECT_EQ(a[i].crc32, b[i].crc32);
  }
  // The CRC written is the CRC of the whole input.
  TempDir d("zip_jobs");
  auto p = write_archive(d / "j.zip", {{"big", 0644, big}}, ZipLayout{}, many);
  EXPECT_EQ(ZipReader(p).read("big"), big);
}

// Members of every kind round-trip with the same bytes for any thread count: text
// ending in random bytes, a large one, random bytes that repeat (LZ77 still gains),
// wholly random bytes (stored) and an empty one.
TEST(Zip, MixedMembersRoundTrip) {
  std::mt19937 rng(77);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
    return s;
  };
  const std::string text = ffpa::test::mixed_bytes(3u << 20, 3);
  const std::string tail_random = text + random_bytes(200000);            // ends in stored blocks
  const std::string chunked = ffpa::test::mixed_bytes(9u << 20, 4) + random_bytes(70000);
  const std::string block = random_bytes(16384);
  std::string repeated;
  for (int i = 0; i < 40; ++i) repeated += block;                         // 640 KiB, period 16 KiB
  const std::string all_random = random_bytes(300000);
  std::vector<Member> members = {{"tail", 0644, tail_random}, {"chunked", 0644, chunked},
                                 {"repeated", 0644, repeated}, {"random", 0644, all_random}, {"empty", 0644, ""}};
  TempDir d("zip_mixed");
  DeflateOptions one, many;
  one.jobs = 1;
  many.jobs = 3;
  auto p1 = write_archive(d / "a.zip", members, ZipLayout{}, one);
  auto p2 = write_archive(d / "b.zip", members, ZipLayout{}, many);
  EXPECT_EQ(ffpa::test::slurp(p1), ffpa::test::slurp(p2));
  ZipReader r(p1);
  for (const auto& m : members) EXPECT_EQ(r.read(m.name), m.data) << m.name;
  EXPECT_LT(r.members()[2].compressed_size, repeated.size() / 5) << "repeats of random bytes still compress";
  EXPECT_EQ(r.members()[3].method, 0) << "wholly random: stored member";
  EXPECT_LT(r.members()[0].compressed_size, tail_random.size());
}

TEST(Zip, LevelChangesBytesAndIsValidated) {
  const std::string data = ffpa::test::mixed_bytes(300000, 5);
  DeflateOptions l1, l9, bad;
  l1.level = 1;
  l9.level = 9;
  bad.level = 10;
  EXPECT_NE(compress_members({data}, l1)[0].data, compress_members({data}, l9)[0].data);
  EXPECT_THROW(compress_members({data}, bad), Error);
}

// A real ZIP64 trigger: 65536 entries do not fit the 16-bit count of the classic
// end record, so the writer must emit the ZIP64 end record and locator.
TEST(Zip, Zip64ByEntryCount) {
  TempDir d("zip64_count");
  const auto bodies = compress_members({std::string_view("x")}, DeflateOptions{});
  const size_t n = 65536 + 3;
  {
    AtomicOutput out(d / "many.zip");
    ZipWriter zip(out, ZipLayout{});
    for (size_t i = 0; i < n; ++i) zip.add("f" + std::to_string(i), 0644, bodies[0]);
    zip.finish();
    out.commit();
  }
  ZipReader r(d / "many.zip");
  EXPECT_TRUE(r.used_zip64());
  ASSERT_EQ(r.members().size(), n);
  EXPECT_EQ(r.read("f65538"), "x");
  // The classic end record is saturated, so a reader without ZIP64 support cannot
  // mistake the count.
  const std::string bytes = ffpa::test::slurp(d / "many.zip");
  EXPECT_EQ(bytes.substr(bytes.size() - 22 + 8, 4), std::string("\xff\xff\xff\xff", 4));
}

// Sizes and offsets over 4 GiB are exercised by lowering the threshold (a test
// hook): the archive then carries genuine ZIP64 extra fields with saturated
// 32-bit fields, and reading it back only works through the ZIP64 records.
TEST(Zip, Zip64FieldsWithLoweredThreshold) {
  TempDir d("zip64_size");
  ZipLayout layout;
  layout.zip64_size_threshold = 100;
  std::vector<Member> members = {{"small", 0644, "tiny"}, {"big", 0644, std::string(1000, 'q')}, {"after", 0755, "z"}};
  auto p = write_archive(d / "z.zip", members, layout);
  ZipReader r(p);
  EXPECT_TRUE(r.used_zip64());
  EXPECT_EQ(r.members()[0].central_extra_len, 0) << "first entry: small and at offset 0, no ZIP64 needed";
  EXPECT_GT(r.members()[1].central_extra_len, 0);  // size 1000 >= 100
  EXPECT_GT(r.members()[2].central_extra_len, 0);  // offset >= 100
  for (const auto& m : members) EXPECT_EQ(r.read(m.name), m.data);
  EXPECT_EQ(r.members()[1].size, 1000u);
}

TEST(Zip, DosTimeClampsTo1980) {
  EXPECT_EQ(dos_time_date(0), dos_time_date(315532800));
  EXPECT_EQ(dos_time_date(0).second, (0 << 9) | (1 << 5) | 1);
  EXPECT_EQ(dos_time_date(0).first, 0);
  EXPECT_NE(dos_time_date(1700000000), dos_time_date(1700000002));
}

TEST(Zip, ReaderRejectsGarbage) {
  TempDir d("zip_bad");
  ffpa::test::write_file(d / "bad.zip", "this is not a zip archive at all, just text");
  EXPECT_THROW(ZipReader(d / "bad.zip"), Error);
  EXPECT_THROW(ZipReader(d / "absent.zip"), Error);
}
