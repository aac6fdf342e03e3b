// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The install rule (install_problems, wheel.h): what a wheel may make an installer do.
// index/tests/test_hostile_vs_pip.py shows each refusal's harm with pip and uv.
#include <gtest/gtest.h>

#include "ffpa/core/error.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"
#include "util.h"

using namespace ffpa::core;

namespace {
std::string all(const std::vector<std::string>& p) {
  std::string out;
  for (const auto& x : p) out += x + "\n";
  return out;
}
const std::string kDi = "ffpa_attn-1.0.0.dist-info/";
}  // namespace

TEST(Install, OwnedPathsComeFromTheReleaseMatrix) {
  EXPECT_EQ(owned_paths("FFPA_Attn", "1.0.0"), (std::vector<std::string>{"ffpa_attn/", kDi}));
  EXPECT_EQ(owned_paths("demo-pkg", "2.0"),
            (std::vector<std::string>{"demo_pkg/", "demo_pkg.py", "demo_pkg-2.0.dist-info/"}));
}

TEST(Install, TheReleaseLayoutPasses) {
  // The members of the real ffpa-attn wheels (ctest/data/wheel-contents.txt).
  const std::vector<std::string> real = {"ffpa_attn/_C.cpython-312-x86_64-linux-gnu.so", "ffpa_attn/__init__.py",
                                         "ffpa_attn/libffpa_kernels.so", kDi + "METADATA", kDi + "WHEEL",
                                         kDi + "RECORD"};
  EXPECT_EQ(all(install_problems("ffpa-attn", "1.0.0", real, "")), "");
  EXPECT_EQ(all(install_problems("ffpa-attn", "1.0.0", {"ffpa_attn-1.0.0.data/purelib/ffpa_attn/x.py"}, "")), "");
}

TEST(Install, RefusesWhatActsOutsideItsOwnFiles) {
  const auto one = [](const std::string& member) { return all(install_problems("ffpa-attn", "1.0.0", {member}, "")); };
  EXPECT_NE(one("nvidia/cublas/__init__.py").find("does not own"), std::string::npos);
  EXPECT_NE(one("torch.py").find("does not own"), std::string::npos);
  EXPECT_NE(one("FFPA_ATTN/x.py").find("does not own"), std::string::npos) << "owned names are exact";
  EXPECT_NE(one("ffpa_attn-1.0.0.data/purelib/pip/__init__.py").find("does not own"), std::string::npos);
  EXPECT_NE(one("ffpa_attn-1.0.0.data/data/bin/python").find("data scheme"), std::string::npos);
  EXPECT_NE(one("ffpa_attn-1.0.0.data/scripts/ffpa-tool").find("scripts scheme"), std::string::npos);
  for (const char* hook : {"x.pth", "ffpa_attn-1.0.0.data/platlib/x.PTH", "sitecustomize.py", "usercustomize/__init__.py",
                           "__editable___x_finder.py"})
    EXPECT_NE(one(hook).find("every interpreter start"), std::string::npos) << hook;
  for (const char* own : {"INSTALLER", "REQUESTED", "direct_url.json", "Direct_URL.json"})
    EXPECT_NE(one(kDi + own).find("written by the installer"), std::string::npos) << own;
  EXPECT_EQ(one(kDi + "entry_points.txt"), "");
  EXPECT_EQ(one(kDi + "licenses/LICENSE"), "");
}

TEST(Install, ScriptNames) {
  for (const char* ok : {"ffpa-bench", "ffpa_attn.tool", "pipeline", "python-ffpa", "uvicorn-x"})
    EXPECT_EQ(script_name_problem(ok), "") << ok;
  for (const char* bad : {"../../x", "a/b", ".hidden", "-x", "x.", "con", "a b", "a\\b", ""})
    EXPECT_NE(script_name_problem(bad).find("one plain file name"), std::string::npos) << bad;
  for (const char* bad : {"python", "python3", "python3.12", "Python3.13t", "pythonw", "pypy3", "pip", "pip3.12", "uv",
                          "uvx", "easy_install-3.12", "activate", "activate.fish", "deactivate", "pydoc3"})
    EXPECT_NE(script_name_problem(bad).find("interpreter"), std::string::npos) << bad;
  const std::string eps = "[console_scripts]\nffpa-bench = ffpa_attn.bench:main\n[Gui_Scripts]\npython3 = a:b\n"
                          "[other]\npython3 = a:b\n[console_scripts]\n../x = a:b\nnoequals\n";
  const std::string got = all(install_problems("ffpa-attn", "1.0.0", {}, eps));
  EXPECT_NE(got.find("[gui_scripts]: script name 'python3'"), std::string::npos) << got;
  EXPECT_NE(got.find("script name '../x'"), std::string::npos) << got;
  EXPECT_NE(got.find("is not 'name = module:function'"), std::string::npos) << got;
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 3) << got;
}

TEST(Install, LicenseExpressionAsPackagingReadsIt) {
  for (const char* ok : {"MIT", "mit", "Apache-2.0 OR MIT", "(MIT AND BSD-3-Clause) or Apache-2.0",
                         "GPL-2.0-only WITH Classpath-exception-2.0", "LicenseRef-ffpa.1", "GPL-2.0+"})
    EXPECT_EQ(license_expression_problem(ok), "") << ok;
  for (const char* bad : {"", "MIT OR", "(MIT", "MIT)", "Use-it-after-midnight", "MIT WITH MIT", "WITH MIT",
                          "LicenseRef-a+", "LicenseRef-", "MIT AND AND BSD-3-Clause", "MIT WITH", "MIT\xc2\xa0OR Apache-2.0"})
    EXPECT_NE(license_expression_problem(bad), "") << bad;
  EXPECT_EQ(license_file_problem("LICENSE"), "");
  EXPECT_EQ(license_file_problem("licenses/third_party/NOTICE.txt"), "");
  for (const char* bad : {"../../../etc/passwd", "/etc/passwd", "a//b", "a\\b", "./x", ""})
    EXPECT_NE(license_file_problem(bad), "") << bad;
}

TEST(Install, TagsInTheirCanonicalForm) {
  const auto tags = [](const char* fn) { return tag_set_problem(*parse_wheel_filename(fn)); };
  EXPECT_EQ(tags("x-1-py2.py3-none-any.whl"), "");
  EXPECT_EQ(tags("x-1-cp312-cp312-manylinux_2_28_x86_64.whl"), "");
  EXPECT_NE(tags("x-1-PY3-NONE-ANY.whl").find("write 'py3'"), std::string::npos);
  EXPECT_NE(tags("x-1-py3.py2-none-any.whl").find("write 'py2.py3'"), std::string::npos);
  EXPECT_NE(tags("x-1-py3.py3-none-any.whl").find("write 'py3'"), std::string::npos);
  EXPECT_NE(tags("x-1-py3-none-any.linux_x86_64.whl").find("combines 'any'"), std::string::npos);
}

TEST(Install, DirectUrlRequirements) {
  for (const char* url : {"x @ https://a.invalid/x.whl", "x[a,b] @ file:///tmp/x.whl", "x@git+https://a.invalid/x.git",
                          "  x  [a]  @ https://a.invalid/x.whl ; python_version >= '3'"})
    EXPECT_TRUE(has_direct_url(url)) << url;
  for (const char* plain : {"x", "x>=1", "x[a]; extra == 'b'", "x; platform_machine == 'a@b'"})
    EXPECT_FALSE(has_direct_url(plain)) << plain;
  EXPECT_NE(all(check_core_metadata("Metadata-Version: 2.1\nName: x\nVersion: 1\nRequires-Dist: y @ https://a.invalid/y.whl\n"))
                .find("names a direct URL"),
            std::string::npos);
}

TEST(TerminalText, ControlsAndBidiRefused) {
  for (const char* ok : {"broken build", "tab\there", "caf\xc3\xa9", "\xe2\x80\x94 dash", "\xd8\xa7 arabic"})
    EXPECT_EQ(terminal_text_problem(ok), "") << ok;
  for (const char* bad : {"\x1b[2J", "bell\x07", "del\x7f", "c1 \xc2\x9b" "31m", "\xc2\x85", "\xe2\x80\xae", "\xe2\x80\xaa",
                          "\xe2\x81\xa6", "\xe2\x81\xa9", "\xe2\x80\x8f", "\xd8\x9c"})
    EXPECT_NE(terminal_text_problem(bad), "") << printable(bad);
  const auto p = check_core_metadata("Metadata-Version: 2.1\nName: x\nVersion: 1\nSummary: a \xe2\x80\xae b\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("bidirectional"), std::string::npos) << p[0];
}

TEST(Install, PackRefusesWhatVerifyRefuses) {
  // pack holds the staged tree to the same rule, so it never writes a wheel add refuses.
  for (const char* member : {"nvidia/x.py", "evil.pth", "sitecustomize.py", "ffpa_attn-1.0.0.data/data/bin/python"}) {
    ffpa::test::TempDir d("pack_install");
    ffpa::test::write_file(d / "tree/ffpa_attn/__init__.py", "x = 1\n");
    ffpa::test::write_file(d / "tree" / member, "y = 1\n");
    try {
      pack_wheel(ffpa::test::pack_options(d.path(), "1.0.0", "py3-none-any"));
      ADD_FAILURE() << member << " was packed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("installs what the wheel may not"), std::string::npos) << e.what();
    }
    EXPECT_EQ(ffpa::test::count_entries(d / "out"), 0u) << member;
  }
  ffpa::test::TempDir d("pack_tags");
  ffpa::test::write_file(d / "tree/ffpa_attn/__init__.py", "x = 1\n");
  EXPECT_THROW(pack_wheel(ffpa::test::pack_options(d.path(), "1.0.0", "py3.py2-none-any")), Error);
}
