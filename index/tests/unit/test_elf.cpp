// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "ffpa/core/wheel.h"
#include "util.h"

using namespace ffpa::core;
namespace fs = std::filesystem;

namespace {

bool has_patchelf() { return std::string(FFPA_PATCHELF).size() > 0 && fs::exists(FFPA_PATCHELF); }

void patchelf(const std::string& args, const fs::path& file) {
  const std::string cmd = std::string(FFPA_PATCHELF) + " " + args + " '" + file.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

}  // namespace

TEST(Elf, ReadsNeededAndVersionNeeds) {
  ASSERT_TRUE(is_elf_file(FFPA_TEST_SO));
  const ElfInfo e = read_elf(FFPA_TEST_SO);
  EXPECT_EQ(e.machine, 62);
  auto has_needed = [&](const char* lib) { return std::find(e.needed.begin(), e.needed.end(), lib) != e.needed.end(); };
  EXPECT_TRUE(has_needed("libstdc++.so.6"));
  EXPECT_TRUE(has_needed("libc.so.6"));
  bool glibc = false, glibcxx = false;
  for (const auto& [file, ver] : e.version_needs) {
    glibc |= (file == "libc.so.6" && ver.rfind("GLIBC_2.", 0) == 0);
    glibcxx |= (file == "libstdc++.so.6" && ver.rfind("GLIBCXX_3.4", 0) == 0);
  }
  EXPECT_TRUE(glibc);
  EXPECT_TRUE(glibcxx);
  EXPECT_TRUE(e.runpath.empty());
  EXPECT_FALSE(e.undefined_symbols.empty());
}

TEST(Elf, RejectsNonElf) {
  ffpa::test::TempDir d("elf_bad");
  ffpa::test::write_file(d / "x.so", "not an elf");
  EXPECT_FALSE(is_elf_file(d / "x.so"));
  EXPECT_THROW(read_elf(d / "x.so"), Error);
}

TEST(Manylinux, PicksAPolicyAndExplainsIt) {
  ffpa::test::TempDir d("ml");
  fs::create_directories(d / "pkg");
  fs::copy_file(FFPA_TEST_SO, d / "pkg/_C.so");
  const auto dec = decide_manylinux(d.path());
  ASSERT_TRUE(dec.problems.empty()) << joined(dec.problems);
  EXPECT_EQ(dec.tag, "manylinux_2_" + std::to_string(dec.glibc_minor) + "_x86_64");
  const auto minors = known_manylinux_minors();
  EXPECT_NE(std::find(minors.begin(), minors.end(), dec.glibc_minor), minors.end());
  // std::thread needs pthread_create, which lives in libc with version GLIBC_2.34
  // on the glibc this builds with (>= 2.34), so the tag cannot be lower than that.
  const ElfInfo e = read_elf(FFPA_TEST_SO);
  bool needs_234 = false;
  for (const auto& [f, v] : e.version_needs) needs_234 |= (v == "GLIBC_2.34");
  if (needs_234) {
    EXPECT_GE(dec.glibc_minor, 34);
    EXPECT_TRUE(any_contains(dec.reasons, "GLIBC_2.34")) << joined(dec.reasons);
  }
  ASSERT_FALSE(dec.reasons.empty());
  EXPECT_EQ(dec.reasons.front().rfind("2_" + std::to_string(dec.glibc_minor) + ":", 0), 0u) << dec.reasons.front();
}

TEST(Manylinux, RefusesAbsoluteRunpath) {
  if (!has_patchelf()) GTEST_SKIP() << "patchelf not found";
  ffpa::test::TempDir d("ml_rpath");
  fs::copy_file(FFPA_TEST_SO, d / "_C.so");
  patchelf("--set-rpath /opt/build/lib", d / "_C.so");
  const auto dec = decide_manylinux(d.path());
  EXPECT_TRUE(any_contains(dec.problems, "'/opt/build/lib' is not $ORIGIN-relative")) << joined(dec.problems);
  EXPECT_TRUE(dec.tag.empty());
}

TEST(Manylinux, RefusesUnlistedNeededLibrary) {
  if (!has_patchelf()) GTEST_SKIP() << "patchelf not found";
  ffpa::test::TempDir d("ml_needed");
  fs::copy_file(FFPA_TEST_SO, d / "_C.so");
  patchelf("--add-needed libcudart.so.13", d / "_C.so");
  const auto dec = decide_manylinux(d.path());
  EXPECT_TRUE(any_contains(dec.problems, "needs 'libcudart.so.13', which is neither")) << joined(dec.problems);
  EXPECT_TRUE(any_contains(dec.problems, "link it statically"));
}

TEST(Manylinux, ShippedLibraryMustBeOnOriginRunpath) {
  if (!has_patchelf()) GTEST_SKIP() << "patchelf not found";
  ffpa::test::TempDir d("ml_shipped");
  fs::create_directories(d / "pkg/lib");
  fs::copy_file(FFPA_TEST_SO, d / "pkg/lib/libffpa_kernels.so");
  patchelf("--set-soname libffpa_kernels.so", d / "pkg/lib/libffpa_kernels.so");
  fs::copy_file(FFPA_TEST_SO, d / "pkg/_C.so");
  patchelf("--add-needed libffpa_kernels.so", d / "pkg/_C.so");
  auto dec = decide_manylinux(d.path());
  EXPECT_TRUE(any_contains(dec.problems, "not on its $ORIGIN RUNPATH")) << joined(dec.problems);
  patchelf("--set-rpath '$ORIGIN/lib'", d / "pkg/_C.so");
  dec = decide_manylinux(d.path());
  EXPECT_TRUE(dec.problems.empty()) << joined(dec.problems);
  EXPECT_EQ(dec.elf_files.size(), 2u);

  // The layout the release uses: the kernel library beside the module, RUNPATH
  // "$ORIGIN" alone.
  fs::rename(d / "pkg/lib/libffpa_kernels.so", d / "pkg/libffpa_kernels.so");
  dec = decide_manylinux(d.path());
  EXPECT_TRUE(any_contains(dec.problems, "not on its $ORIGIN RUNPATH")) << "lib/ no longer holds it";
  patchelf("--set-rpath '$ORIGIN'", d / "pkg/_C.so");
  dec = decide_manylinux(d.path());
  EXPECT_TRUE(dec.problems.empty()) << joined(dec.problems);
}

TEST(Manylinux, RefusesEmbeddedBuildPath) {
  ffpa::test::TempDir d("ml_path");
  fs::copy_file(FFPA_TEST_SO, d / "_C.so");
  const auto dec = decide_manylinux(d.path(), {"FFPA_TESTLIB_MARKER/build"});
  EXPECT_TRUE(any_contains(dec.problems, "contains the build-tree path 'FFPA_TESTLIB_MARKER/build'")) << joined(dec.problems);
}

TEST(Manylinux, NoElfMeansNoPlatform) {
  ffpa::test::TempDir d("ml_none");
  ffpa::test::write_file(d / "a.py", "x = 1\n");
  EXPECT_TRUE(any_contains(decide_manylinux(d.path()).problems, "py3-none-any"));
}

TEST(Manylinux, PackAutoTagsAndRefusesAnUnderclaim) {
  ffpa::test::TempDir d("ml_pack");
  fs::create_directories(d / "tree/ffpa_attn");
  fs::copy_file(FFPA_TEST_SO, d / "tree/ffpa_attn/_C.cpython-312-x86_64-linux-gnu.so");
  PackOptions o = ffpa::test::pack_options(d.path(), "0.3.0+cu13", "cp312-cp312-auto");
  const auto r = pack_wheel(o);
  const auto dec = decide_manylinux(d / "tree");
  EXPECT_EQ(r.wheel.filename(), "ffpa_attn-0.3.0+cu13-cp312-cp312-" + dec.tag + ".whl");
  const auto check = verify_wheel(r.wheel);
  EXPECT_TRUE(check.ok) << joined(check.problems);
  EXPECT_NE(read_wheel_metadata(r.wheel).find("Version: 0.3.0+cu13"), std::string::npos);

  o.tag = "cp312-cp312-manylinux_2_5_x86_64";
  o.out_dir = d / "out2";
  if (dec.glibc_minor > 5) {
    try {
      pack_wheel(o);
      ADD_FAILURE() << "an under-claimed manylinux tag was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("use the platform 'auto'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(ffpa::test::count_entries(d / "out2"), 0u);
  }
}
