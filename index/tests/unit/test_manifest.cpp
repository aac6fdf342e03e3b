// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The release record (core/manifest.h): the engine's one writer and its one checked
// reader of the plan and the manifest, and the shared PEP 440 table
// (ctest/data/pep440-cases.json) against pep.h.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ffpa/core/error.h"
#include "ffpa/core/manifest.h"
#include "ffpa/core/pep.h"

using namespace ffpa::core;

namespace {

Release sample() {
  Release m;
  m.name = "ffpa-attn";
  m.version = "1.2.3";
  m.profile = "full";
  m.source_commit = std::string(40, 'a');
  m.source_date_epoch = 1700000000;
  m.toolchain = {{"cmake", "3.25.1"}, {"gcc", "12.2.0"}, {"nvcc", "13.0"}};
  m.channel = "cu13";
  m.cuda_version = "1.2.3+cu13";
  m.fatbin_compression = "size";
  m.archs = {"89", "120f"};
  m.head_dims = {64, 512};
  m.dtypes = {"fp16", "bf16"};
  ReleaseWheel w;
  w.file = "ffpa_attn-1.2.3+cu13-cp312-cp312-manylinux_2_34_x86_64.whl";
  w.kind = "cuda";
  w.version = "1.2.3+cu13";
  w.tags = "cp312-cp312-manylinux_2_34_x86_64";
  w.kernel_library = "ffpa_attn/libffpa_kernels.so";
  w.size = 1234;
  w.sha256 = std::string(64, 'b');
  w.kernel_library_size = 1000;
  w.kernel_library_compressed_size = 500;
  m.wheels.push_back(w);
  m.requirements = ReleaseFile{"requirements-cu13.txt", std::string(64, 'c'), 77};
  return m;
}

std::string mutate(const std::function<void(nlohmann::json&)>& f) {
  auto j = nlohmann::json::parse(manifest_to_json(sample()));
  f(j);
  return j.dump();
}

// A plan as cmake/FfpaReleasePlan.cmake writes it: the manifest's fields, what to
// build instead of what was built.
nlohmann::json plan() {
  auto j = nlohmann::json::parse(manifest_to_json(sample()));
  j.erase("requirements");
  j["wheels"][0] = {{"kind", "cuda"}, {"tree", "wheel_cp312"}, {"version", "1.2.3+cu13"},
                    {"tags", "cp312-cp312-auto"}, {"kernel_library", "ffpa_attn/libffpa_kernels.so"}};
  j["metadata"] = "Summary: s\nRequires-Python: >=3.10\n";
  j["readme"] = "/src/README.md";
  j["forbid_paths"] = {"/build"};
  j["out_dir"] = "/build/dist";
  j["site_dir"] = nullptr;
  j["install_lines"] = {{"pip", "pip install ffpa-attn=={cuda_version} --index-url {site}/whl/{channel}/"},
                        {"uv", "uv pip install ffpa-attn=={cuda_version} --index {site}/whl/{channel}/"},
                        {"pypi", "https://pypi.org/simple"}};
  return j;
}

}  // namespace

TEST(Manifest, RoundTripsThroughTheOneWriterAndReader) {
  const std::string text = manifest_to_json(sample());
  const Release back = parse_release(text, "m.json", ReleaseForm::manifest);
  EXPECT_EQ(manifest_to_json(back), text);
  EXPECT_EQ(back.schema, kReleaseSchema);
  ASSERT_EQ(back.wheels.size(), 1u);
  EXPECT_EQ(*back.wheels[0].kernel_library_compressed_size, 500u);
  EXPECT_EQ(back.requirements->file, "requirements-cu13.txt");
  EXPECT_EQ(text.find("\"schema\": 2"), 4u) << text;  // the first field a reader sees
}

TEST(Manifest, RefusesOtherSchemasAndMistypedFieldsNamingThem) {
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](auto& j) { j["schema"] = 1; }, "'schema' is 1, this engine reads 2"},
      {[](auto& j) { j.erase("schema"); }, "'schema' is missing"},
      {[](auto& j) { j["profile"] = "nightly"; }, "'profile' is 'nightly'"},
      {[](auto& j) { j["source_dirty"] = "no"; }, "'source_dirty' must be true or false"},
      {[](auto& j) { j["wheels"][0]["file"] = "../evil.whl"; }, "not a wheel file name"},
      {[](auto& j) { j["wheels"][0]["sha256"] = "XYZ"; }, "'wheels[0].sha256' is not 64 lower-case hex"},
      {[](auto& j) { j["wheels"][0]["kind"] = "gpu"; }, "'wheels[0].kind' is 'gpu'"},
      {[](auto& j) { j["wheels"][0]["size"] = -1; }, "'wheels[0].size' must be a non-negative integer"},
      {[](auto& j) { j["requirements"]["file"] = "a/b.txt"; }, "'requirements.file' is not a file name"},
  };
  for (const auto& [f, want] : cases) {
    try {
      parse_release(mutate(f), "m.json", ReleaseForm::manifest);
      ADD_FAILURE() << "accepted a manifest that should fail with: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rebuild the release"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_release("{not json", "m.json", ReleaseForm::manifest), Error);
}

// The plan is read by the same reader, under the same field names; what it lacks or
// mistypes is named with the fix (re-run cmake).
TEST(Manifest, PlanReadByTheSameReader) {
  const Release p = parse_release(plan().dump(), "plan.json", ReleaseForm::plan);
  ASSERT_EQ(p.wheels.size(), 1u);
  EXPECT_EQ(p.wheels[0].tree, "wheel_cp312");
  EXPECT_EQ(p.wheels[0].tags, "cp312-cp312-auto");
  EXPECT_EQ(p.source_commit, std::string(40, 'a'));
  EXPECT_EQ(p.out_dir, "/build/dist");
  EXPECT_FALSE(p.site_dir);
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](auto& j) { j["wheels"][0].erase("tree"); }, "'wheels[0].tree' is missing"},
      {[](auto& j) { j["wheels"][0]["tree"] = "../up"; }, "'wheels[0].tree' is '../up', not a directory name"},
      {[](auto& j) { j.erase("metadata"); }, "'metadata' is missing"},
      {[](auto& j) { j["forbid_paths"] = "/build"; }, "'forbid_paths' must be an array"},
      {[](auto& j) { j.erase("install_lines"); }, "'install_lines' is missing"},
      {[](auto& j) { j["install_lines"].erase("uv"); }, "'install_lines.uv' is missing"},
      {[](auto& j) { j["head_dims"] = {"64"}; }, "'head_dims' must hold integers"},
  };
  for (const auto& [f, want] : cases) {
    auto j = plan();
    f(j);
    try {
      parse_release(j.dump(), "plan.json", ReleaseForm::plan);
      ADD_FAILURE() << "accepted a plan that should fail with: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cmake/FfpaReleasePlan.cmake"), std::string::npos) << e.what();
    }
  }
}

TEST(Manifest, OnlyFullAndPureProfilesArePublishable) {
  Release m = sample();
  EXPECT_FALSE(unpublishable_profile(m));
  m.profile = "pure";
  EXPECT_FALSE(unpublishable_profile(m));
  m.profile = "mini";
  ASSERT_TRUE(unpublishable_profile(m));
  EXPECT_NE(unpublishable_profile(m)->find("profile 'mini'"), std::string::npos);
  m.profile = "dev";
  EXPECT_NE(unpublishable_profile(m)->find("profile 'dev'"), std::string::npos);
}

// One table of PEP 440 cases for every implementation: the engine parses exactly the
// inputs the table (packaging, pip's reading) gives a canonical form, to that form.
TEST(Pep440Table, EngineAgreesWithTheSharedTable) {
  std::ifstream in(FFPA_PEP440_TABLE);
  ASSERT_TRUE(in) << FFPA_PEP440_TABLE;
  const auto table = nlohmann::json::parse(in);
  int n = 0;
  for (const auto& c : table.at("cases")) {
    const std::string input = c.at("input").get<std::string>();
    const auto got = canonical_version(input);
    if (c.at("canonical").is_null()) {
      EXPECT_FALSE(got) << "engine accepted '" << input << "' as '" << got.value_or("") << "'";
    } else {
      EXPECT_TRUE(got) << "engine refused '" << input << "'";
      if (got) EXPECT_EQ(*got, c.at("canonical").get<std::string>()) << "input '" << input << "'";
    }
    ++n;
  }
  EXPECT_GT(n, 40);
}
