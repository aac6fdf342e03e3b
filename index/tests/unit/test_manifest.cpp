// ffpa-release-manifest.json: the engine's one writer and reader (core/manifest.h),
// and the shared PEP 440 table (ctest/data/pep440-cases.json) against pep.h.
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

Manifest sample() {
  Manifest m;
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
  ManifestWheel w;
  w.file = "ffpa_attn-1.2.3+cu13-cp312-cp312-manylinux_2_34_x86_64.whl";
  w.kind = "cuda";
  w.version = "1.2.3+cu13";
  w.tags = "cp312-cp312-manylinux_2_34_x86_64";
  w.size = 1234;
  w.sha256 = std::string(64, 'b');
  w.kernel_library_size = 1000;
  w.kernel_library_compressed_size = 500;
  m.wheels.push_back(w);
  m.requirements = ManifestFile{"requirements-cu13.txt", std::string(64, 'c'), 77};
  return m;
}

std::string mutate(const std::function<void(nlohmann::json&)>& f) {
  auto j = nlohmann::json::parse(manifest_to_json(sample()));
  f(j);
  return j.dump();
}

}  // namespace

TEST(Manifest, RoundTripsThroughTheOneWriterAndReader) {
  const std::string text = manifest_to_json(sample());
  const Manifest back = parse_manifest(text, "m.json");
  EXPECT_EQ(manifest_to_json(back), text);
  EXPECT_EQ(back.schema, kManifestSchema);
  ASSERT_EQ(back.wheels.size(), 1u);
  EXPECT_EQ(*back.wheels[0].kernel_library_compressed_size, 500u);
  EXPECT_EQ(back.requirements->file, "requirements-cu13.txt");
  EXPECT_EQ(text.find("\"schema\": 1"), 4u) << text;  // the first field a reader sees
}

TEST(Manifest, RefusesOtherSchemasAndMistypedFieldsNamingThem) {
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](auto& j) { j["schema"] = 2; }, "'schema' is 2, this engine reads 1"},
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
      parse_manifest(mutate(f), "m.json");
      ADD_FAILURE() << "accepted a manifest that should fail with: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rebuild the release"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_manifest("{not json", "m.json"), Error);
}

TEST(Manifest, OnlyFullAndPureProfilesArePublishable) {
  Manifest m = sample();
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
