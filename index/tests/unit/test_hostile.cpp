// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The engine trusts nothing it reads (index/README.md). Unit-level checks of the strict
// zip reader, the canonical spellings, METADATA parsing, ELF against platform
// tags and pack's tree walk. The differential proof against pip and uv is
// index/tests/test_hostile_vs_pip.py; these keep each rule testable under ASan.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"
#include "ffpa/core/zip.h"
#include "util.h"

using namespace ffpa::core;
namespace fs = std::filesystem;
using ffpa::test::slurp;
using ffpa::test::write_file;

namespace {

struct File {
  std::string name, data;
};

std::string archive_bytes(const std::vector<File>& files, const ZipLayout& layout = {}) {
  ffpa::test::TempDir d("hostile_zip");
  std::vector<std::string_view> inputs;
  for (const auto& f : files) inputs.push_back(f.data);
  const auto bodies = compress_members(inputs, DeflateOptions{});
  {
    AtomicOutput out(d / "a.zip");
    ZipWriter zip(out, layout);
    for (size_t i = 0; i < files.size(); ++i) zip.add(files[i].name, 0644, bodies[i]);
    zip.finish();
    out.commit();
  }
  return slurp(d / "a.zip");
}

std::string rec(const std::string& name, const std::string& data) {
  return csv_line({name, sha256_record_digest(data), std::to_string(data.size())});
}

const std::string kMeta = "Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 1.0.0\nSummary: s\nRequires-Python: >=3.10\n";

std::vector<File> wheel_files(const std::vector<File>& pkg, const std::string& tag = "py3-none-any",
                              const std::string& meta = kMeta) {
  const std::string di = "ffpa_attn-1.0.0.dist-info";
  const std::string wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: " +
                            std::string(tag.size() > 4 && tag.compare(tag.size() - 4, 4, "-any") == 0 ? "true" : "false") +
                            "\nTag: " + tag + "\n";
  std::string record;
  for (const auto& f : pkg) record += rec(f.name, f.data);
  record += rec(di + "/METADATA", meta) + rec(di + "/WHEEL", wheel) + csv_line({di + "/RECORD", "", ""});
  std::vector<File> out = pkg;
  out.push_back({di + "/METADATA", meta});
  out.push_back({di + "/WHEEL", wheel});
  out.push_back({di + "/RECORD", record});
  return out;
}

std::string refusal(const fs::path& p, const ZipLimits& limits = {}) {
  try {
    ZipReader r(p, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool mentions(const WheelCheck& c, const std::string& needle) {
  return std::any_of(c.problems.begin(), c.problems.end(),
                     [&](const std::string& p) { return p.find(needle) != std::string::npos; });
}

std::string joined(const WheelCheck& c) {
  std::string out;
  for (const auto& p : c.problems) out += p + "\n";
  return out;
}

void put16(std::string& s, size_t at, std::uint16_t v) {
  s[at] = static_cast<char>(v & 0xFF);
  s[at + 1] = static_cast<char>(v >> 8);
}

std::string elf_head(std::uint8_t cls, std::uint16_t machine) {
  std::string h(64, '\0');
  h[0] = 0x7f, h[1] = 'E', h[2] = 'L', h[3] = 'F';
  h[4] = static_cast<char>(cls);
  h[5] = 1;
  h[6] = 1;
  put16(h, 16, 3);
  put16(h, 18, machine);
  return h;
}

}  // namespace

TEST(ZipStrict, RefusesTrailingBytesPrependedDataAndComments) {
  ffpa::test::TempDir d("zip_strict");
  const std::string good = archive_bytes({{"a.txt", "hello"}, {"b/c.txt", std::string(1000, 'x')}});
  write_file(d / "good.zip", good);
  EXPECT_EQ(refusal(d / "good.zip"), "");
  write_file(d / "tail.zip", good + "junk");
  EXPECT_NE(refusal(d / "tail.zip").find("4 bytes follow its end of central directory record"), std::string::npos)
      << refusal(d / "tail.zip");
  write_file(d / "head.zip", "MZ" + good);
  EXPECT_NE(refusal(d / "head.zip").find("prepended"), std::string::npos) << refusal(d / "head.zip");
  std::string commented = good;
  put16(commented, commented.size() - 2, 3);  // claims a comment that is not there
  write_file(d / "comment.zip", commented);
  EXPECT_NE(refusal(d / "comment.zip").find("comment"), std::string::npos) << refusal(d / "comment.zip");
}

TEST(ZipStrict, RefusesMoreOrFewerEntriesThanCounted) {
  ffpa::test::TempDir d("zip_count");
  // Names long enough that a directory of two entries could hold three minimal ones.
  std::string z = archive_bytes({{"a-name-long-enough-for-the-count-check.txt", "1"},
                                 {"evil-name-long-enough-for-the-count-check.pth", "import os\n"}});
  const size_t eocd = z.size() - 22;
  put16(z, eocd + 8, 1);
  put16(z, eocd + 10, 1);  // the end record now counts one entry; the directory holds two
  write_file(d / "more.zip", z);
  EXPECT_NE(refusal(d / "more.zip").find("holds more entries than the 1 its end record counts"), std::string::npos)
      << refusal(d / "more.zip");
  put16(z, eocd + 8, 3);
  put16(z, eocd + 10, 3);
  write_file(d / "fewer.zip", z);
  EXPECT_NE(refusal(d / "fewer.zip").find("counts 3 entries but the central directory holds 2"), std::string::npos)
      << refusal(d / "fewer.zip");
}

TEST(ZipStrict, RefusesLocalHeaderThatDisagrees) {
  ffpa::test::TempDir d("zip_local");
  std::string z = archive_bytes({{"abc.txt", "hello hello hello"}});
  z[30] = 'x';  // first byte of the local name: "xbc.txt"
  write_file(d / "name.zip", z);
  EXPECT_NE(refusal(d / "name.zip").find("disagrees with the central directory on the name"), std::string::npos)
      << refusal(d / "name.zip");
  z = archive_bytes({{"abc.txt", "hello hello hello"}});
  put16(z, 8, z[8] == 8 ? 0 : 8);  // local method
  write_file(d / "method.zip", z);
  EXPECT_NE(refusal(d / "method.zip").find("on the method"), std::string::npos) << refusal(d / "method.zip");
}

TEST(ZipStrict, RefusesUnsafeNames) {
  ffpa::test::TempDir d("zip_names");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string("a\0b.py", 6), "NUL byte"},
      {"/abs.py", "is absolute"},
      {"a/../../b.py", "'..' component"},
      {"ffpa_attn//x.py", "empty path component"},
      {"a\\b.py", "backslash"},
      {"a/\xff.py", "is flagged UTF-8 (bit 11) but is not valid UTF-8"},
      {"a/\xc0\xaf.py", "not valid UTF-8"},  // overlong '/'
  };
  for (const auto& [name, needle] : cases) {
    write_file(d / "n.zip", archive_bytes({{"ok.py", "1"}, {name, "2"}}));
    EXPECT_NE(refusal(d / "n.zip").find(needle), std::string::npos) << printable(name) << ": " << refusal(d / "n.zip");
  }
  write_file(d / "dup.zip", archive_bytes({{"x.py", "1"}, {"x.py", "2"}}));
  EXPECT_NE(refusal(d / "dup.zip").find("appears more than once"), std::string::npos);
  // Names another OS or pip's line reader reads otherwise (member_name_problem, wheel.h).
  const std::vector<std::pair<std::string, std::string>> os_cases = {
      {"pkg/", "is a directory entry"},
      {"pkg/donn\xc3\xa9" "es.py", "holds non-ASCII characters"},
      {"pkg/a\xe2\x80\xa8" "b.py", "holds non-ASCII characters"},  // U+2028: a line break for str.splitlines
      {"pkg/a\x1c" "b.py", "control character"},
      {"C:/x.py", "contains ':'"},
      {"pkg/x.py:stream", "contains ':'"},
      {"pkg/a|b.py", "contains '|'"},
      {"pkg/a*.py", "contains '*'"},
      {"pkg./x.py", "ends in a dot or a space"},
      {"pkg/x.py ", "ends in a dot or a space"},
      {"pkg/con.py", "Windows device name"},
      {"pkg/NUL .tar.gz", "Windows device name"},
      {"Com7/x.py", "Windows device name"},
      {"pkg/lpt0", "Windows device name"},
      {"pkg/CONOUT$.txt", "Windows device name"},
      {"FFPA_A~1/x.py", "8.3 short name"},
      {"pkg/" + std::string(256, 'a'), "256 bytes"},
  };
  for (const auto& [name, needle] : os_cases) {
    write_file(d / "n.zip", archive_bytes({{"ok.py", "1"}, {name, "2"}}));
    EXPECT_NE(refusal(d / "n.zip").find(needle), std::string::npos) << printable(name) << ": " << refusal(d / "n.zip");
  }
  // What stays allowed: every ASCII name Windows, macOS and Linux read alike.
  write_file(d / "ok.zip", archive_bytes({{"pkg/a b,c;d=e#f%g~h.py", "1"}, {"pkg/console.py", "2"}, {"pkg/.hidden", "3"},
                                          {"pkg/com10.txt", "4"}, {"pkg/x.tar.gz", "5"}}));
  EXPECT_EQ(refusal(d / "ok.zip"), "");
}

TEST(MemberNames, SetsThatCollideOnCaseInsensitiveSystems) {
  auto problems = [](std::vector<std::string> names) {
    std::string all;
    for (const auto& p : member_set_problems(names)) all += p + "\n";
    return all;
  };
  EXPECT_EQ(problems({"pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "other/a.py"}), "");
  EXPECT_NE(problems({"pkg/A.py", "pkg/a.py"}).find("differ only in case"), std::string::npos);
  EXPECT_NE(problems({"Pkg/a.py", "pkg/b.py"}).find("also spelled 'pkg'"), std::string::npos);
  EXPECT_NE(problems({"pkg/x", "pkg/x/y.py"}).find("is a file and also the directory"), std::string::npos);
  EXPECT_NE(problems({"pkg/X", "pkg/x/y.py"}).find("is a file and also the directory"), std::string::npos);
  EXPECT_NE(problems({"nvidia", "nvidia/cublas/lib/x.so"}).find("'nvidia' is a file"), std::string::npos);
  EXPECT_NE(problems({"p-1.data/purelib/pkg/a.py", "pkg/a.py"}).find("install to the same file"), std::string::npos);
  EXPECT_NE(problems({"p-1.data/platlib/pkg/a.py", "p-1.data/purelib/PKG/A.py"}).find("install to the same file"),
            std::string::npos);
  // Other schemes have places of their own.
  EXPECT_EQ(problems({"p-1.data/scripts/pkg", "pkg/a.py", "p-1.data/data/pkg/a.py"}), "");
}

TEST(ZipStrict, ClaimsAreCheckedAgainstLimitsAndRead) {
  ffpa::test::TempDir d("zip_limits");
  const std::string big(3u << 20, 'z');
  write_file(d / "z.zip", archive_bytes({{"big", big}, {"small", std::string(2000, 's')}}));
  ZipLimits tight;
  tight.max_member_size = 1u << 20;
  EXPECT_NE(refusal(d / "z.zip", tight).find("more than the limit of 1048576 bytes per member"), std::string::npos);
  tight = {};
  tight.max_total_size = 2u << 20;
  EXPECT_NE(refusal(d / "z.zip", tight).find("in all, the limit"), std::string::npos);
  tight = {};
  tight.max_members = 1;
  EXPECT_NE(refusal(d / "z.zip", tight).find("claims 2 members, more than the limit of 1"), std::string::npos);

  ZipReader r(d / "z.zip");
  size_t pieces = 0, largest = 0, total = 0;
  r.read_chunks("big", [&](std::string_view p) {
    ++pieces;
    largest = std::max(largest, p.size());
    total += p.size();
  });
  EXPECT_EQ(total, big.size());
  EXPECT_GT(pieces, 1u) << "members are streamed, not inflated whole";
  EXPECT_LE(largest, 256u * 1024u);
  EXPECT_THROW(r.read("big", 1u << 20), Error) << "read() honours its bound";
  EXPECT_EQ(r.read("big"), big);

  // A claimed size that deflate cannot produce from the stored bytes.
  std::string z = slurp(d / "z.zip");
  const auto* m = r.find("small");
  ASSERT_NE(m, nullptr);
  const std::uint32_t huge = 1u << 30;
  for (int k = 0; k < 4; ++k) z[m->local_header_offset + 22 + k] = static_cast<char>((huge >> (8 * k)) & 0xFF);
  const size_t cd_entry = z.rfind(std::string("PK\x01\x02", 4));  // the last central entry is "small"
  for (int k = 0; k < 4; ++k) z[cd_entry + 24 + k] = static_cast<char>((huge >> (8 * k)) & 0xFF);
  write_file(d / "forged.zip", z);
  EXPECT_NE(refusal(d / "forged.zip").find("more than deflate can produce"), std::string::npos) << refusal(d / "forged.zip");
}

TEST(ZipStrict, Zip64ArchivesStillRead) {
  ffpa::test::TempDir d("zip_z64");
  ZipLayout layout;
  layout.zip64_size_threshold = 1;
  layout.zip64_count_threshold = 1;
  write_file(d / "z.zip", archive_bytes({{"a", "hello"}, {"b", std::string(5000, 'q')}}, layout));
  ZipReader r(d / "z.zip");
  EXPECT_TRUE(r.used_zip64());
  EXPECT_EQ(r.read("b"), std::string(5000, 'q'));
  // The ZIP64 end record's count disagrees with the entries.
  std::string z = slurp(d / "z.zip");
  const size_t z64 = z.size() - 22 - 20 - 56;
  z[z64 + 32] = 3;
  z[z64 + 24] = 3;
  write_file(d / "bad.zip", z);
  EXPECT_NE(refusal(d / "bad.zip").find("counts 3 entries but the central directory holds 2"), std::string::npos)
      << refusal(d / "bad.zip");
}

TEST(Utf8, StrictLikePython) {
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("donn\xc3\xa9" "es \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_EQ(first_invalid_utf8(">=3.10\xff"), 6u);
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
}

// Every message that echoes an input shows C1 controls (U+0080-U+009F: U+009B is CSI on an
// 8-bit terminal) and bidi overrides as bytes, as it does C0 controls; clean text (tab-free,
// non-ASCII letters included) stays as it is.
TEST(Utf8, PrintableEscapesEveryTerminalControl) {
  EXPECT_EQ(printable("bad \xc2\x9b" "31m"), "bad \\xc2\\x9b31m");
  EXPECT_EQ(printable("osc \xc2\x9d" "0;t\xc2\x9c"), "osc \\xc2\\x9d0;t\\xc2\\x9c");
  EXPECT_EQ(printable("x\xc2\x80"), "x\\xc2\\x80");
  EXPECT_EQ(printable("fine \xe2\x80\xae" "elbats"), "fine \\xe2\\x80\\xae" "elbats");
  EXPECT_EQ(printable("esc \x1b[2J"), "esc \\x1b[2J");
  EXPECT_EQ(printable("tab\there"), "tab\\x09here");
  EXPECT_EQ(printable("donn\xc3\xa9" "es \xc2\xa0\xc2\xbf"), "donn\xc3\xa9" "es \xc2\xa0\xc2\xbf")
      << "U+00A0 and U+00BF are text, not C1 controls";
  EXPECT_EQ(terminal_safe("first line\nsecond \xc2\x9b" "31m\nthird \xc3\xa9"),
            "first line\nsecond \\xc2\\x9b31m\nthird \xc3\xa9");
  EXPECT_EQ(terminal_safe(printable("x\xc2\x9b")), printable("x\xc2\x9b")) << "escaped text is not escaped twice";
}

TEST(Canonical, VersionsAndFileNames) {
  EXPECT_EQ(canonical_version("01.0.0"), "1.0.0");
  EXPECT_EQ(canonical_version("v1.0.0+CU13"), "1.0.0+cu13");
  EXPECT_EQ(canonical_version("1.0.0-rc.1"), "1.0.0rc1");
  EXPECT_FALSE(canonical_version("1.0.0+"));
  EXPECT_TRUE(same_version("v1.0.0+cu13", "01.0.0+cu13"));
  EXPECT_TRUE(same_version("1.0", "1.0"));
  EXPECT_FALSE(same_version("1.0", "1.0.0+cu13"));
  EXPECT_TRUE(same_version("1.0+cu13", "1.0.0+cu13")) << "release numbers compare as if padded with zeros";
  EXPECT_TRUE(same_version("2", "2.0.0.0"));
  EXPECT_TRUE(same_version("1!1.0rc1", "1!1.0.0rc1"));
  EXPECT_TRUE(same_version("1.0.post1", "1.0.0.post1"));
  EXPECT_FALSE(same_version("1.0.1", "1.0"));
  EXPECT_FALSE(same_version("10", "1.0"));
  EXPECT_FALSE(same_version("1.0.dev1", "1.0"));
  EXPECT_FALSE(same_version("not a version", "not a version")) << "invalid versions are never the same";

  auto problem = [](const std::string& fn) { return wheel_filename_spelling_problem(*parse_wheel_filename(fn)); };
  EXPECT_EQ(problem("ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"), "");
  EXPECT_NE(problem("ffpa_attn-01.0.0+cu13-py3-none-any.whl").find("ffpa_attn-1.0.0+cu13-py3-none-any.whl"), std::string::npos);
  EXPECT_NE(problem("ffpa_attn-v1.0.0-py3-none-any.whl").find("the version 'v1.0.0' is not canonical"), std::string::npos);
  EXPECT_NE(problem("FFPA_Attn-1.0.0-py3-none-any.whl").find("the project name 'FFPA_Attn' is not normalized"), std::string::npos);
  EXPECT_NE(problem("ffpa_attn-1.0.0+CU13-py3-none-any.whl").find("1.0.0+cu13"), std::string::npos);
  EXPECT_EQ(canonical_wheel_filename(*parse_wheel_filename("FFPA.attn-v01.0-py3-none-any.whl")), "ffpa_attn-1.0-py3-none-any.whl");
}

TEST(Specifiers, LikePackaging) {
  for (const char* ok : {">=3.10", ">=3.10,<4", "==3.10.*", "!=3.11.*, >=3.9", "~=3.10", "===foo", ">= 3.10", "==1.0+local"})
    EXPECT_TRUE(is_valid_specifier_set(ok)) << ok;
  for (const char* bad : {"", ",", ">=3.10\xff", ">=3.10.*", "~=3", "3.10", ">=", "<1.0+local", "=>3.10", ">=3.10 foo"})
    EXPECT_FALSE(is_valid_specifier_set(bad)) << bad;
}

TEST(Requirements, Pep508) {
  for (const char* ok : {"numpy", "numpy>=1.21", "numpy (>=1.21,<3)", "torch[cuda,extra]>=2.1",
                         "numpy; python_version >= '3.10'", "pkg @ https://example.invalid/p.whl ; sys_platform == 'linux'",
                         "a; (os_name == 'posix' or extra == 'x') and platform_machine != 'aarch64'",
                         "a; 'linux' in sys_platform", "a; python_version not in '3.8, 3.9'"})
    EXPECT_TRUE(is_valid_requirement(ok)) << ok;
  for (const char* bad : {"", "-numpy", "numpy>=", "numpy[", "numpy; python_versio < '3'", "numpy; python_version",
                          "numpy; (python_version < '3'", "pkg @ https://x.invalid/p.whl; extra == 'a'", "numpy >=1 junk",
                          "numpy; python_version < '3"})
    EXPECT_FALSE(is_valid_requirement(bad)) << bad;
}

TEST(CoreMetadata, ParsesStrictly) {
  std::vector<std::pair<std::string, std::string>> h;
  EXPECT_TRUE(check_core_metadata(kMeta + "Requires-Dist: numpy>=1.21\nClassifier: A\nClassifier: B\n\nbody \xc3\xa9\n", &h).empty());
  EXPECT_EQ(h.size(), 8u);
  auto first = [](const std::string& text) {
    const auto p = check_core_metadata(text);
    return p.empty() ? std::string() : p.front();
  };
  EXPECT_NE(first(kMeta + "Requires-Python: >=3.10\xff\n").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(first("Metadata-Version: 2.1\nName: x\nVersion: 1\nRequires-Python: >=3.10.*\n").find("Requires-Python"), std::string::npos);
  EXPECT_NE(first(kMeta + "Requires-Dist: numpy>=\n").find("Requires-Dist"), std::string::npos);
  EXPECT_NE(first(kMeta + "garbage line\n").find("is not 'Key: value'"), std::string::npos);
  EXPECT_NE(first(kMeta + "Summary: two\n").find("appears more than once"), std::string::npos);
  EXPECT_NE(first(kMeta + "X-Custom: 1\n").find("unknown field 'X-Custom'"), std::string::npos);
  EXPECT_NE(first(kMeta + "License: a\rb\n").find("control character"), std::string::npos);
  EXPECT_NE(first(std::string(" continued\n") + kMeta).find("continuation line with no field"), std::string::npos);
  EXPECT_NE(first("Metadata-Version: 9.9\nName: x\nVersion: 1\n").find("Metadata-Version '9.9'"), std::string::npos);
  EXPECT_NE(first("Metadata-Version: 2.1\nName: -x\nVersion: 1\n").find("Name '-x'"), std::string::npos);
  EXPECT_NE(first("Metadata-Version: 2.1\nName: x\n").find("no Version"), std::string::npos);
  EXPECT_NE(first("Metadata-Version: 2.2\nName: x\nVersion: 1\nDynamic: Version\n").find("can never be dynamic"),
            std::string::npos);
  EXPECT_NE(first(kMeta + "Dynamic: Summary\n").find("a field of metadata 2.2"), std::string::npos);
  EXPECT_NE(first(kMeta + "Provides-Extra: -bad\n").find("Provides-Extra"), std::string::npos);
  EXPECT_TRUE(check_core_metadata(kMeta + "Description: first\n        second\nLicense: BSD\r\n").empty())
      << "continuation lines and CRLF endings are RFC 822";
}

TEST(ElfIdent, FromTheFirstBytes) {
  const auto id = parse_elf_ident(elf_head(2, 183));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->elf_class, 2);
  EXPECT_EQ(id->machine, 183);
  EXPECT_EQ(describe(*id), "ELF64 little-endian AArch64");
  EXPECT_FALSE(parse_elf_ident("\x7f" "ELF"));
  EXPECT_FALSE(parse_elf_ident(std::string(64, 'x')));
  const auto real = parse_elf_ident(slurp(FFPA_TEST_SO).substr(0, 64));
  ASSERT_TRUE(real);
  EXPECT_EQ(real->machine, 62);

  std::string why;
  auto p = elf_of_platform("manylinux_2_28_x86_64");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->arch, "x86_64");
  EXPECT_EQ(p->ident.machine, 62);
  EXPECT_EQ(elf_of_platform("manylinux2014_aarch64")->ident.machine, 183);
  EXPECT_EQ(elf_of_platform("musllinux_1_2_i686")->ident.elf_class, 1);
  EXPECT_EQ(elf_of_platform("linux_s390x")->ident.data, 2);
  EXPECT_FALSE(elf_of_platform("any", &why));
  EXPECT_FALSE(elf_of_platform("win_amd64", &why));
  EXPECT_FALSE(elf_of_platform("manylinux_2_28_sparc", &why));
  EXPECT_NE(why.find("unknown architecture 'sparc'"), std::string::npos);
}

class VerifyHostile : public ::testing::Test {
 protected:
  ffpa::test::TempDir dir{"verify_hostile"};
  fs::path write(const std::string& fn, const std::vector<File>& files) {
    write_file(dir / fn, archive_bytes(files));
    return dir / fn;
  }
};

// The bounds on the dependency fields (wheel.h, kMaxRequiresDist; docs/release.md): at
// the bound a wheel passes, one past it is refused with the bound named, and a value too
// long is refused without being parsed.
TEST(CoreMetadata, DependencyFieldsAreBounded) {
  const auto with = [](const std::string& field, std::size_t n, const std::string& prefix) {
    std::string text = kMeta;
    for (std::size_t i = 0; i < n; ++i) text += field + ": " + prefix + std::to_string(i) + "\n";
    return text;
  };
  const auto joined_problems = [](const std::string& text) {
    return join(check_core_metadata(text), "\n");
  };
  EXPECT_EQ(joined_problems(with("Requires-Dist", kMaxRequiresDist, "dep")), "");
  EXPECT_NE(joined_problems(with("Requires-Dist", kMaxRequiresDist + 1, "dep"))
                .find(std::to_string(kMaxRequiresDist + 1) + " Requires-Dist lines, over the " +
                      std::to_string(kMaxRequiresDist)),
            std::string::npos);
  EXPECT_NE(joined_problems(with("Requires-Dist", 10000, "dep")).find("10000 Requires-Dist lines"), std::string::npos);
  EXPECT_EQ(joined_problems(with("Provides-Extra", kMaxProvidesExtra, "x")), "");
  EXPECT_NE(joined_problems(with("Provides-Extra", kMaxProvidesExtra + 1, "x"))
                .find(std::to_string(kMaxProvidesExtra + 1) + " Provides-Extra lines, over the " +
                      std::to_string(kMaxProvidesExtra)),
            std::string::npos);
  // One value at the bound (a valid requirement) passes; one byte more, or 200,000, does not.
  const std::string at_bound = "a" + std::string(kMaxDependencyValue - 6, 'b') + ">=1.0";
  ASSERT_EQ(at_bound.size(), kMaxDependencyValue);
  EXPECT_EQ(joined_problems(kMeta + "Requires-Dist: " + at_bound + "\n"), "");
  EXPECT_NE(joined_problems(kMeta + "Requires-Dist: a" + at_bound + "\n").find("bytes long, over the 4096"),
            std::string::npos);
  const std::string huge = "numpy[" + std::string(200000, 'x') + "]";
  const std::string p = joined_problems(kMeta + "Requires-Dist: " + huge + "\n");
  EXPECT_NE(p.find("Requires-Dist 'numpy[xxx"), std::string::npos) << p.substr(0, 300);
  EXPECT_NE(p.find(std::to_string(huge.size()) + " bytes long"), std::string::npos) << p.substr(0, 300);
  EXPECT_LT(p.size(), 1000u) << "the message quotes the start of the value, not all of it";
  EXPECT_NE(joined_problems(kMeta + "Provides-Extra: " + std::string(kMaxDependencyValue + 1, 'e') + "\n")
                .find("Provides-Extra"),
            std::string::npos);
}

TEST_F(VerifyHostile, DependencyBoundsRefuseTheWheel) {
  std::string meta = kMeta;
  for (std::size_t i = 0; i <= kMaxRequiresDist; ++i) meta += "Requires-Dist: dep" + std::to_string(i) + "\n";
  const auto c = verify_wheel(write("ffpa_attn-1.0.0-py3-none-any.whl",
                                    wheel_files({{"ffpa_attn/__init__.py", "x = 1\n"}}, "py3-none-any", meta)));
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c, "Requires-Dist lines, over the")) << joined(c);
}

TEST_F(VerifyHostile, CanonicalSpellingOfTheFileName) {
  const auto files = wheel_files({{"ffpa_attn/__init__.py", "x = 1\n"}});
  EXPECT_TRUE(verify_wheel(write("ffpa_attn-1.0.0-py3-none-any.whl", files)).ok);
  for (const char* fn : {"ffpa_attn-01.0.0-py3-none-any.whl", "ffpa_attn-v1.0.0-py3-none-any.whl", "FFPA_Attn-1.0.0-py3-none-any.whl"}) {
    const auto c = verify_wheel(write(fn, files));
    EXPECT_FALSE(c.ok) << fn;
    EXPECT_TRUE(mentions(c, "rebuild the wheel as ffpa_attn-1.0.0-py3-none-any.whl")) << joined(c);
  }
}

TEST_F(VerifyHostile, MetadataMustParse) {
  const auto c = verify_wheel(write("ffpa_attn-1.0.0-py3-none-any.whl",
                                    wheel_files({{"ffpa_attn/__init__.py", "x = 1\n"}}, "py3-none-any", kMeta + "Requires-Python: >=3.10\xff\n")));
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c, "METADATA is not valid UTF-8")) << joined(c);
}

TEST_F(VerifyHostile, ElfMembersMatchThePlatformTag) {
  const std::string so = slurp(FFPA_TEST_SO);
  const std::string x86 = "py3-none-manylinux_2_17_x86_64", arm = "py3-none-manylinux_2_17_aarch64";
  auto check = [&](const std::string& tag, const std::vector<File>& pkg) {
    return verify_wheel(write("ffpa_attn-1.0.0-" + tag + ".whl", wheel_files(pkg, tag)));
  };
  EXPECT_TRUE(check(x86, {{"ffpa_attn/_k.so", so}}).ok) << joined(check(x86, {{"ffpa_attn/_k.so", so}}));
  auto c = check(arm, {{"ffpa_attn/_k.so", so}});
  EXPECT_TRUE(mentions(c, "is ELF64 little-endian x86-64 but the platform tag manylinux_2_17_aarch64 needs ELF64 little-endian AArch64"))
      << joined(c);
  c = check(x86, {{"ffpa_attn/_k.so", elf_head(2, 183)}});
  EXPECT_TRUE(mentions(c, "AArch64 but the platform tag manylinux_2_17_x86_64")) << joined(c);
  c = check(x86, {{"ffpa_attn/libfoo.so.1.2", "not elf"}});
  EXPECT_TRUE(mentions(c, "is named like a shared object but is not an ELF file")) << joined(c);
  c = check("py3-none-any", {{"ffpa_attn/tool", so}});
  EXPECT_TRUE(mentions(c, "the wheel's platform is 'any'")) << joined(c);
  c = check("py3-none-any", {{"ffpa_attn/libbig.so.data", "just data"}});
  EXPECT_TRUE(c.ok) << "'.so.data' is not a shared object: " << joined(c);
  c = check("py3-none-win_amd64", {{"ffpa_attn/_k.pyd", so}});
  EXPECT_TRUE(mentions(c, "is an ELF binary in a wheel for platform 'win_amd64'")) << joined(c);
}

class PackHostile : public ::testing::Test {
 protected:
  ffpa::test::TempDir dir{"pack_hostile"};
  PackOptions opts;
  void SetUp() override {
    write_file(dir / "tree/ffpa_attn/__init__.py", "x = 1\n");
    opts = ffpa::test::pack_options(dir.path(), "1.0.0", "py3-none-any");
  }
  std::string refusal() {
    try {
      pack_wheel(opts);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(PackHostile, RefusesNamesThatAreNotUtf8) {
  write_file(dir / "tree/ffpa_attn/bad\xff.py", "y = 1\n");
  const std::string msg = refusal();
  EXPECT_NE(msg.find("'ffpa_attn/bad\\xff.py' in the staged tree holds non-ASCII characters"), std::string::npos) << msg;
  EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u);
  fs::remove(dir / "tree/ffpa_attn/bad\xff.py");
  // Valid UTF-8 is not enough: the names pack writes are the names verify-wheel
  // accepts (member_name_problem, wheel.h), ASCII and alike on every OS.
  write_file(dir / "tree/ffpa_attn/donn\xc3\xa9" "es.py", "y = 1\n");
  EXPECT_NE(refusal().find("holds non-ASCII characters"), std::string::npos) << refusal();
  fs::remove(dir / "tree/ffpa_attn/donn\xc3\xa9" "es.py");
  write_file(dir / "tree/ffpa_attn/NUL.py", "y = 1\n");
  EXPECT_NE(refusal().find("Windows device name"), std::string::npos) << refusal();
  fs::remove(dir / "tree/ffpa_attn/NUL.py");
  write_file(dir / "tree/ffpa_attn/Core.py", "y = 1\n");
  write_file(dir / "tree/ffpa_attn/core.py", "y = 2\n");
  EXPECT_NE(refusal().find("differ only in case"), std::string::npos) << refusal();
  fs::remove(dir / "tree/ffpa_attn/Core.py");
  write_file(dir / "tree/ffpa_attn./x.py", "y = 1\n");
  EXPECT_NE(refusal().find("'ffpa_attn.' in the staged tree has the component 'ffpa_attn.'"), std::string::npos) << refusal();
  fs::remove_all(dir / "tree/ffpa_attn.");
  EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u);
  const auto r = pack_wheel(opts);
  EXPECT_TRUE(verify_wheel(r.wheel).ok) << joined(verify_wheel(r.wheel));
}

TEST_F(PackHostile, NamesAnUnreadableDirectory) {
  write_file(dir / "tree/ffpa_attn/locked/x.py", "y = 1\n");
  fs::permissions(dir / "tree/ffpa_attn/locked", fs::perms::none);
  // Root reads any directory, so the walk runs in a child as 'nobody' there.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::geteuid() == 0) {
      fs::permissions(dir.path(), fs::perms::all);  // 'nobody' must reach the tree and write out/
      for (const auto& e : fs::recursive_directory_iterator(dir.path()))
        if (e.path().filename() != "locked") fs::permissions(e.path(), fs::perms::all);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
    }
    const std::string msg = refusal();
    if (::write(fds[1], msg.data(), msg.size()) < 0) _exit(4);
    _exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  fs::permissions(dir / "tree/ffpa_attn/locked", fs::perms::owner_all);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_NE(msg.find("cannot read the directory '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ffpa_attn/locked'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("make it readable (chmod u+rx)"), std::string::npos) << msg;
}

TEST_F(PackHostile, RefusesMetadataThatWouldNotParse) {
  opts.metadata = "Summary: s\nRequires-Python: >=3.10\xff\n";
  std::string msg = refusal();
  EXPECT_NE(msg.find("would not parse for pip and twine"), std::string::npos) << msg;
  EXPECT_NE(msg.find("METADATA is not valid UTF-8"), std::string::npos) << msg;
  opts.metadata = "Summary: s\nRequires-Python: >=3.10\nRequires-Dist: numpy>=\n";
  msg = refusal();
  EXPECT_NE(msg.find("Requires-Dist: 'numpy>=' is not a PEP 508 requirement"), std::string::npos) << msg;
  EXPECT_EQ(ffpa::test::count_entries(opts.out_dir), 0u);
}

namespace {

// Offset of the first section header of `type` in an ELF64 little-endian image.
size_t section_header(const std::string& elf, std::uint32_t type) {
  auto u = [&](size_t at, int n) {
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(elf[at + k]);
    return v;
  };
  const std::uint64_t shoff = u(40, 8), shentsize = u(58, 2), shnum = u(60, 2);
  for (std::uint64_t i = 0; i < shnum; ++i)
    if (u(shoff + i * shentsize + 4, 4) == type) return shoff + i * shentsize;
  return std::string::npos;
}

void put(std::string& s, size_t at, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) s[at + k] = static_cast<char>((v >> (8 * k)) & 0xFF);
}

}  // namespace

// Found by index.fuzz.elf (index/fuzz/crashes-found): a .dynsym entry size that
// wraps the offset arithmetic, and .gnu.version_r chains that revisit records
// (quadratic time and memory). Both must be clean refusals.
TEST(ElfHostile, DynsymEntrySizeCannotWrap) {
  ffpa::test::TempDir d("elf_hostile");
  std::string so = slurp(FFPA_TEST_SO);
  const size_t sh = section_header(so, 11);  // SHT_DYNSYM
  ASSERT_NE(sh, std::string::npos);
  put(so, sh + 56, ~std::uint64_t{0}, 8);
  write_file(d / "lib.so", so);
  try {
    read_elf(d / "lib.so");
    ADD_FAILURE() << "a .dynsym entry size of 2^64-1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed .dynsym"), std::string::npos) << e.what();
  }
}

TEST(ElfHostile, VerneedChainsAreBounded) {
  ffpa::test::TempDir d("elf_hostile");
  std::string so = slurp(FFPA_TEST_SO);
  const size_t sh = section_header(so, 0x6ffffffe);  // SHT_GNU_verneed
  ASSERT_NE(sh, std::string::npos);
  const std::uint64_t off = [&] {
    std::uint64_t v = 0;
    for (int k = 7; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(so[sh + 24 + k]);
    return v;
  }();
  put(so, sh + 44, 0xFFFFFFFFu, 4);  // sh_info: four billion Verneed records
  put(so, off + 12, 1, 4);           // vn_next: one byte on, re-reading overlapping records
  write_file(d / "lib.so", so);
  EXPECT_THROW(read_elf(d / "lib.so"), Error);
}
