// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/core/manifest.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ffpa/core/error.h"

namespace ffpa::core {

namespace {

using nlohmann::ordered_json;

template <typename T>
ordered_json opt(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

// A file name the manifest may name: one path component, no directory games.
bool safe_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\\') == std::string::npos && f.find('\0') == std::string::npos;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

class Reader {
 public:
  Reader(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(where_ + " is not a release manifest of schema " + std::to_string(kManifestSchema) + ": " + what +
                "; rebuild the release (cmake --build <tree> --target package)");
  }
  const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& path) const {
    if (!obj.is_object() || !obj.contains(key)) fail("'" + path + key + "' is missing");
    return obj.at(key);
  }
  std::string str(const nlohmann::json& obj, const char* key, const std::string& path = "") const {
    const auto& v = field(obj, key, path);
    if (!v.is_string()) fail("'" + path + key + "' must be a string");
    return v.get<std::string>();
  }
  std::optional<std::string> opt_str(const nlohmann::json& obj, const char* key, const std::string& path = "") const {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    return str(obj, key, path);
  }
  std::uint64_t u64(const nlohmann::json& obj, const char* key, const std::string& path = "") const {
    const auto& v = field(obj, key, path);
    if (!v.is_number_unsigned()) fail("'" + path + key + "' must be a non-negative integer");
    return v.get<std::uint64_t>();
  }
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace

std::string manifest_to_json(const Manifest& m) {
  ordered_json j;
  j["schema"] = m.schema;
  j["name"] = m.name;
  j["version"] = m.version;
  j["profile"] = m.profile;
  j["source_commit"] = m.source_commit;
  j["source_dirty"] = m.source_dirty;
  j["source_date_epoch"] = m.source_date_epoch;
  ordered_json tc = ordered_json::object();
  for (const auto& [k, v] : m.toolchain) tc[k] = opt(v);
  j["toolchain"] = tc;
  j["channel"] = opt(m.channel);
  if (m.channel) {
    j["cuda_version"] = opt(m.cuda_version);
    j["fatbin_compression"] = opt(m.fatbin_compression);
    j["archs"] = m.archs;
    j["head_dims"] = m.head_dims;
    j["dtypes"] = m.dtypes;
  }
  ordered_json wheels = ordered_json::array();
  for (const auto& w : m.wheels) {
    ordered_json o;
    o["file"] = w.file;
    o["kind"] = w.kind;
    if (w.kernel_library_size) o["kernel_library_size"] = *w.kernel_library_size;
    if (w.kernel_library_compressed_size) o["kernel_library_compressed_size"] = *w.kernel_library_compressed_size;
    o["version"] = w.version;
    o["tags"] = w.tags;
    o["size"] = w.size;
    o["sha256"] = w.sha256;
    wheels.push_back(o);
  }
  j["wheels"] = wheels;
  if (m.requirements)
    j["requirements"] = {{"file", m.requirements->file}, {"size", m.requirements->size},
                         {"sha256", m.requirements->sha256}};
  return j.dump(2) + "\n";
}

Manifest parse_manifest(std::string_view text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + " is not JSON (" + e.what() + "); rebuild the release");
  }
  Reader r(j, where);
  if (!j.is_object()) r.fail("the top level is not an object");
  Manifest m;
  const auto& schema = r.field(j, "schema", "");
  if (!schema.is_number_integer() || schema.get<int>() != kManifestSchema)
    r.fail("'schema' is " + schema.dump() + ", this engine reads " + std::to_string(kManifestSchema));
  m.name = r.str(j, "name");
  m.version = r.str(j, "version");
  m.profile = r.str(j, "profile");
  if (m.profile != "full" && m.profile != "pure" && m.profile != "mini" && m.profile != "dev")
    r.fail("'profile' is '" + m.profile + "', not full, pure, mini or dev");
  m.source_commit = r.str(j, "source_commit");
  const auto& dirty = r.field(j, "source_dirty", "");
  if (!dirty.is_boolean()) r.fail("'source_dirty' must be true or false");
  m.source_dirty = dirty.get<bool>();
  const auto& epoch = r.field(j, "source_date_epoch", "");
  if (!epoch.is_number_integer()) r.fail("'source_date_epoch' must be an integer");
  m.source_date_epoch = epoch.get<std::int64_t>();
  const auto& tc = r.field(j, "toolchain", "");
  if (!tc.is_object()) r.fail("'toolchain' must be an object");
  for (const auto& [k, v] : tc.items()) {
    if (!v.is_null() && !v.is_string()) r.fail("'toolchain." + k + "' must be a string or null");
    m.toolchain[k] = v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>());
  }
  m.channel = r.opt_str(j, "channel");
  if (m.channel) {
    m.cuda_version = r.opt_str(j, "cuda_version");
    m.fatbin_compression = r.opt_str(j, "fatbin_compression");
    for (const char* key : {"archs", "dtypes"}) {
      const auto& a = r.field(j, key, "");
      if (!a.is_array()) r.fail(std::string("'") + key + "' must be an array");
      for (const auto& x : a) {
        if (!x.is_string()) r.fail(std::string("'") + key + "' must hold strings");
        (std::string(key) == "archs" ? m.archs : m.dtypes).push_back(x.get<std::string>());
      }
    }
    const auto& dims = r.field(j, "head_dims", "");
    if (!dims.is_array()) r.fail("'head_dims' must be an array");
    for (const auto& x : dims) {
      if (!x.is_number_integer()) r.fail("'head_dims' must hold integers");
      m.head_dims.push_back(x.get<int>());
    }
  }
  const auto& wheels = r.field(j, "wheels", "");
  if (!wheels.is_array()) r.fail("'wheels' must be an array");
  for (std::size_t i = 0; i < wheels.size(); ++i) {
    const std::string p = "wheels[" + std::to_string(i) + "].";
    const auto& w = wheels[i];
    ManifestWheel mw;
    mw.file = r.str(w, "file", p);
    if (!safe_file_name(mw.file) || mw.file.size() < 5 || mw.file.substr(mw.file.size() - 4) != ".whl")
      r.fail("'" + p + "file' is '" + mw.file + "', not a wheel file name in the manifest's directory");
    mw.kind = r.str(w, "kind", p);
    if (mw.kind != "cuda" && mw.kind != "pure") r.fail("'" + p + "kind' is '" + mw.kind + "', not cuda or pure");
    mw.version = r.str(w, "version", p);
    mw.tags = r.str(w, "tags", p);
    mw.size = r.u64(w, "size", p);
    mw.sha256 = r.str(w, "sha256", p);
    if (!is_hex64(mw.sha256)) r.fail("'" + p + "sha256' is not 64 lower-case hex digits");
    if (w.contains("kernel_library_size")) mw.kernel_library_size = r.u64(w, "kernel_library_size", p);
    if (w.contains("kernel_library_compressed_size"))
      mw.kernel_library_compressed_size = r.u64(w, "kernel_library_compressed_size", p);
    m.wheels.push_back(mw);
  }
  if (j.contains("requirements") && !j["requirements"].is_null()) {
    const auto& q = j["requirements"];
    ManifestFile f;
    f.file = r.str(q, "file", "requirements.");
    if (!safe_file_name(f.file)) r.fail("'requirements.file' is not a file name in the manifest's directory");
    f.size = r.u64(q, "size", "requirements.");
    f.sha256 = r.str(q, "sha256", "requirements.");
    if (!is_hex64(f.sha256)) r.fail("'requirements.sha256' is not 64 lower-case hex digits");
    m.requirements = f;
  }
  return m;
}

Manifest read_manifest(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read " + file.string() + "; build the release first (it is written by packaging)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_manifest(ss.str(), file.string());
}

std::optional<std::string> unpublishable_profile(const Manifest& m) {
  if (m.profile == "full" || m.profile == "pure") return std::nullopt;
  return "the manifest records profile '" + m.profile + "' (" +
         (m.profile == "mini" ? "development wheels: one head dim, one arch" : "a development build") +
         "), which is never published; build the release with the release-full (or release-pure) preset";
}

}  // namespace ffpa::core
