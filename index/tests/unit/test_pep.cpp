// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "ffpa/core/pep.h"

using namespace ffpa::core;

TEST(Pep508, ValidNames) {
  for (const char* ok : {"ffpa-attn", "ffpa_attn", "a", "A1", "x.y_z-w", "Django"})
    EXPECT_TRUE(is_valid_project_name(ok)) << ok;
  for (const char* bad : {"", "-a", "a-", "a b", "ffpa/attn", "_x", "x.", "na\xc3\xafve"})
    EXPECT_FALSE(is_valid_project_name(bad)) << bad;
}

TEST(Pep503, Normalize) {
  EXPECT_EQ(normalize_project_name("FFPA_Attn"), "ffpa-attn");
  EXPECT_EQ(normalize_project_name("a.-_b"), "a-b");
  EXPECT_EQ(normalize_project_name("Friendly-Bard"), "friendly-bard");
  EXPECT_EQ(wheel_name_component("ffpa-attn"), "ffpa_attn");
  EXPECT_EQ(wheel_name_component("A..B__c"), "a_b_c");
}

struct VersionCase {
  const char* in;
  const char* canonical;
};

TEST(Pep440, NormalisesLikePackaging) {
  // Expected values from packaging.version.Version(x).__str__().
  const VersionCase cases[] = {
      {"0.3.0", "0.3.0"},
      {"0.3.0+cu13", "0.3.0+cu13"},
      {"0.3.0+CU13", "0.3.0+cu13"},
      {"v1.0", "1.0"},
      {"1.0.0-rc1", "1.0.0rc1"},
      {"1.0alpha", "1.0a0"},
      {"1.0.BETA.2", "1.0b2"},
      {"1.0c1", "1.0rc1"},
      {"1.0preview3", "1.0rc3"},
      {"1.0-1", "1.0.post1"},
      {"1.0.post", "1.0.post0"},
      {"1.0rev2", "1.0.post2"},
      {"1.0-dev", "1.0.dev0"},
      {"0!1.0", "1.0"},
      {"2!01.002", "2!1.2"},
      {"0.0.1.dev3+g1a2b3c", "0.0.1.dev3+g1a2b3c"},
      {"1.0+ubuntu-1_a.007", "1.0+ubuntu.1.a.7"},
      {" 1.0 ", "1.0"},
  };
  for (const auto& c : cases) {
    auto v = parse_pep440(c.in);
    ASSERT_TRUE(v.has_value()) << c.in;
    EXPECT_EQ(v->canonical, c.canonical) << c.in;
  }
}

TEST(Pep440, Flags) {
  auto v = parse_pep440("0.3.0+cu13");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->public_part, "0.3.0");
  EXPECT_EQ(v->local, "cu13");
  EXPECT_FALSE(v->is_dev || v->is_pre || v->is_post);
  auto d = parse_pep440("0.3.1.dev4+gabc.dirty");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->is_dev);
  EXPECT_TRUE(d->is_pre);  // packaging counts dev releases as pre-releases
  EXPECT_EQ(d->local, "gabc.dirty");
  EXPECT_TRUE(parse_pep440("1.0rc1")->is_pre);
  EXPECT_TRUE(parse_pep440("1.0.post1")->is_post);
}

TEST(Pep440, Rejects) {
  for (const char* bad : {"", "1.0+", "1.0+cu 13", "latest", "1..0", "1.0-", "1.0+a..b", "1.0_", "01.0x", "1.0.dev1.post1"}) {
    std::string why;
    EXPECT_FALSE(parse_pep440(bad, &why)) << bad;
    EXPECT_NE(why.find("PEP 440"), std::string::npos) << bad;
  }
}

TEST(WheelFilename, ParsesAndRoundTrips) {
  auto w = parse_wheel_filename("ffpa_attn-0.3.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->name, "ffpa_attn");
  EXPECT_EQ(w->version, "0.3.0+cu13");
  EXPECT_EQ(w->build, "");
  EXPECT_EQ(w->python, "cp312");
  EXPECT_EQ(w->abi, "cp312");
  EXPECT_EQ(w->platform, "manylinux_2_28_x86_64");
  EXPECT_EQ(w->filename(), "ffpa_attn-0.3.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  EXPECT_EQ(w->tags(), std::vector<std::string>{"cp312-cp312-manylinux_2_28_x86_64"});

  auto b = parse_wheel_filename("pkg-1.0-1abc-py2.py3-none-any.whl");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->build, "1abc");
  EXPECT_EQ(b->tags(), (std::vector<std::string>{"py2-none-any", "py3-none-any"}));
  auto many = parse_wheel_filename("x-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
  ASSERT_TRUE(many);
  EXPECT_EQ(many->tags().size(), 2u);
}

TEST(WheelFilename, RejectsStrictly) {
  for (const char* bad : {"ffpa_attn-0.3.0-py3-none-any.zip", "ffpa-attn-0.3.0-py3-none-any.whl",
                          "ffpa_attn-0.3.0-py3-none.whl", "ffpa_attn-notaversion-py3-none-any.whl",
                          "ffpa_attn-0.3.0-abc-py3-none-any.whl", "ffpa_attn-0.3.0-py3..py2-none-any.whl",
                          "dir/ffpa_attn-0.3.0-py3-none-any.whl", "ffpa_attn-0.3.0--none-any.whl"}) {
    std::string why;
    EXPECT_FALSE(parse_wheel_filename(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}
