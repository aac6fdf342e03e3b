// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/core/manifest.h"

#include <nlohmann/json.hpp>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"

namespace ffpa::core {

namespace {

using nlohmann::ordered_json;

template <typename T>
ordered_json opt(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

// A file name the manifest may name: one path component, no directory games.
bool safe_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

// The one checked reader of the record's JSON: every field looked up through it is
// named, with its path, when it is missing or of another type.
class Fields {
 public:
  Fields(std::string where, ReleaseForm form) : where_(std::move(where)), form_(form) {}

  [[noreturn]] void fail(const std::string& what) const {
    if (form_ == ReleaseForm::plan)
      throw Error(where_ + " is not a release plan of schema " + std::to_string(kReleaseSchema) + ": " + what +
                  " (the plan is written by cmake/FfpaReleasePlan.cmake at configure time; docs/release.md "
                  "describes it): re-run cmake on the build tree");
    throw Error(where_ + " is not a release manifest of schema " + std::to_string(kReleaseSchema) + ": " + what +
                "; rebuild the release (cmake --build <tree> --target package)");
  }
  const nlohmann::json& at(const nlohmann::json& o, const char* k, const std::string& p = "") const {
    if (!o.is_object() || !o.contains(k)) fail("'" + p + k + "' is missing");
    return o.at(k);
  }
  std::string str(const nlohmann::json& o, const char* k, const std::string& p = "") const {
    const auto& v = at(o, k, p);
    if (!v.is_string()) fail("'" + p + k + "' must be a string");
    return v.get<std::string>();
  }
  std::optional<std::string> opt_str(const nlohmann::json& o, const char* k, const std::string& p = "") const {
    if (!o.contains(k) || o.at(k).is_null()) return std::nullopt;
    return str(o, k, p);
  }
  bool boolean(const nlohmann::json& o, const char* k) const {
    const auto& v = at(o, k);
    if (!v.is_boolean()) fail(std::string("'") + k + "' must be true or false");
    return v.get<bool>();
  }
  std::uint64_t u64(const nlohmann::json& o, const char* k, const std::string& p = "") const {
    const auto& v = at(o, k, p);
    if (!v.is_number_unsigned()) fail("'" + p + k + "' must be a non-negative integer");
    return v.get<std::uint64_t>();
  }
  template <typename T>
  std::vector<T> array(const nlohmann::json& o, const char* k) const {
    const auto& v = at(o, k);
    if (!v.is_array()) fail(std::string("'") + k + "' must be an array");
    std::vector<T> out;
    for (const auto& x : v) {
      if (std::is_same_v<T, int> ? !x.is_number_integer() : !x.is_string())
        fail(std::string("'") + k + "' must hold " + (std::is_same_v<T, int> ? "integers" : "strings"));
      out.push_back(x.get<T>());
    }
    return out;
  }
  std::string sha256(const nlohmann::json& o, const std::string& p) const {
    std::string s = str(o, "sha256", p);
    if (!is_sha256_hex(s)) fail("'" + p + "sha256' is not 64 lower-case hex digits");
    return s;
  }

 private:
  std::string where_;
  ReleaseForm form_;
};

}  // namespace

std::string manifest_to_json(const Release& m) {
  ordered_json tc = ordered_json::object();
  for (const auto& [k, v] : m.toolchain) tc[k] = opt(v);
  ordered_json j = {{"schema", m.schema},
                    {"name", m.name},
                    {"version", m.version},
                    {"profile", m.profile},
                    {"source_commit", m.source_commit},
                    {"source_dirty", m.source_dirty},
                    {"source_date_epoch", m.source_date_epoch},
                    {"toolchain", tc},
                    {"channel", opt(m.channel)}};
  if (m.channel) {
    j["cuda_version"] = opt(m.cuda_version);
    j["fatbin_compression"] = opt(m.fatbin_compression);
    j["archs"] = m.archs;
    j["head_dims"] = m.head_dims;
    j["dtypes"] = m.dtypes;
  }
  ordered_json& wheels = j["wheels"] = ordered_json::array();
  for (const auto& w : m.wheels) {
    ordered_json o = {{"file", w.file}, {"kind", w.kind}, {"version", w.version}, {"tags", w.tags}};
    if (w.kernel_library) o["kernel_library"] = *w.kernel_library;
    if (w.kernel_library_size) o["kernel_library_size"] = *w.kernel_library_size;
    if (w.kernel_library_compressed_size) o["kernel_library_compressed_size"] = *w.kernel_library_compressed_size;
    o["size"] = w.size;
    o["sha256"] = w.sha256;
    wheels.push_back(o);
  }
  if (m.requirements)
    j["requirements"] = {{"file", m.requirements->file}, {"size", m.requirements->size},
                         {"sha256", m.requirements->sha256}};
  return j.dump(2) + "\n";
}

Release parse_release(std::string_view text, const std::string& where, ReleaseForm form) {
  const bool plan = form == ReleaseForm::plan;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + " is not JSON (" + e.what() + "); " +
                (plan ? "re-run cmake on the build tree" : "rebuild the release"));
  }
  const Fields r(where, form);
  if (!j.is_object()) r.fail("the top level is not an object");
  Release m;
  const auto& schema = r.at(j, "schema");
  if (!schema.is_number_integer() || schema.get<int>() != kReleaseSchema)
    r.fail("'schema' is " + schema.dump() + ", this engine reads " + std::to_string(kReleaseSchema));
  m.name = r.str(j, "name");
  m.version = r.str(j, "version");
  m.profile = r.str(j, "profile");
  if (m.profile != "full" && m.profile != "pure" && m.profile != "mini" && m.profile != "dev")
    r.fail("'profile' is '" + m.profile + "', not full, pure, mini or dev");
  m.source_commit = r.str(j, "source_commit");
  m.source_dirty = r.boolean(j, "source_dirty");
  const auto& epoch = r.at(j, "source_date_epoch");
  if (!epoch.is_number_integer()) r.fail("'source_date_epoch' must be an integer");
  m.source_date_epoch = epoch.get<std::int64_t>();
  const auto& tc = r.at(j, "toolchain");
  if (!tc.is_object()) r.fail("'toolchain' must be an object");
  for (const auto& [k, v] : tc.items()) {
    if (!v.is_null() && !v.is_string()) r.fail("'toolchain." + k + "' must be a string or null");
    m.toolchain[k] = v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>());
  }
  m.channel = r.opt_str(j, "channel");
  if (m.channel) {
    m.cuda_version = r.opt_str(j, "cuda_version");
    m.fatbin_compression = r.opt_str(j, "fatbin_compression");
    m.archs = r.array<std::string>(j, "archs");
    m.dtypes = r.array<std::string>(j, "dtypes");
    m.head_dims = r.array<int>(j, "head_dims");
  }
  const auto& wheels = r.at(j, "wheels");
  if (!wheels.is_array()) r.fail("'wheels' must be an array");
  for (std::size_t i = 0; i < wheels.size(); ++i) {
    const std::string p = "wheels[" + std::to_string(i) + "].";
    const auto& w = wheels[i];
    ReleaseWheel mw;
    mw.kind = r.str(w, "kind", p);
    if (mw.kind != "cuda" && mw.kind != "pure") r.fail("'" + p + "kind' is '" + mw.kind + "', not cuda or pure");
    mw.version = r.str(w, "version", p);
    mw.tags = r.str(w, "tags", p);
    mw.kernel_library = r.opt_str(w, "kernel_library", p);
    if (plan) {
      mw.tree = r.str(w, "tree", p);
      if (!safe_file_name(mw.tree)) r.fail("'" + p + "tree' is '" + mw.tree + "', not a directory name");
    } else {
      mw.file = r.str(w, "file", p);
      if (!safe_file_name(mw.file) || mw.file.size() < 5 || mw.file.substr(mw.file.size() - 4) != ".whl")
        r.fail("'" + p + "file' is '" + mw.file + "', not a wheel file name in the manifest's directory");
      mw.size = r.u64(w, "size", p);
      mw.sha256 = r.sha256(w, p);
      if (w.contains("kernel_library_size")) mw.kernel_library_size = r.u64(w, "kernel_library_size", p);
      if (w.contains("kernel_library_compressed_size"))
        mw.kernel_library_compressed_size = r.u64(w, "kernel_library_compressed_size", p);
    }
    m.wheels.push_back(mw);
  }
  if (plan) {
    m.metadata = r.str(j, "metadata");
    m.readme = r.str(j, "readme");
    m.forbid_paths = r.array<std::string>(j, "forbid_paths");
    m.out_dir = r.str(j, "out_dir");
    m.site_dir = r.opt_str(j, "site_dir");
    const auto& lines = r.at(j, "install_lines");
    m.install_lines.pip = r.str(lines, "pip", "install_lines.");
    m.install_lines.uv = r.str(lines, "uv", "install_lines.");
    m.install_lines.pypi = r.str(lines, "pypi", "install_lines.");
  } else if (j.contains("requirements") && !j["requirements"].is_null()) {
    const auto& q = j["requirements"];
    ReleaseFile f;
    f.file = r.str(q, "file", "requirements.");
    if (!safe_file_name(f.file)) r.fail("'requirements.file' is not a file name in the manifest's directory");
    f.size = r.u64(q, "size", "requirements.");
    f.sha256 = r.sha256(q, "requirements.");
    m.requirements = f;
  }
  return m;
}

Release read_release(const std::filesystem::path& file, ReleaseForm form) {
  const auto text = read_file(file);
  if (!text)
    throw Error("cannot read " + file.string() + (form == ReleaseForm::plan
                                                      ? "; configure the build tree first (cmake writes the plan)"
                                                      : "; build the release first (it is written by packaging)"));
  return parse_release(*text, file.string(), form);
}

std::optional<std::string> unpublishable_profile(const Release& m) {
  if (m.profile == "full" || m.profile == "pure") return std::nullopt;
  return "the manifest records profile '" + m.profile + "' (" +
         (m.profile == "mini" ? "development wheels: one head dim, one arch" : "a development build") +
         "), which is never published; build the release with the release-full (or release-pure) preset";
}

}  // namespace ffpa::core
