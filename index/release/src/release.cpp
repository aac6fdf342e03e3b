// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/release/release.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/pack.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/zipread.h"
#include "ffpa/site/index.h"

namespace ffpa::release {

using ffpa::core::Error;

namespace {

// ---- the plan -----------------------------------------------------------------------

class PlanReader {
 public:
  PlanReader(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(where_ + ": " + what + " (the plan is written by cmake/FfpaPackWheels.cmake; docs/release.md "
                "describes it)");
  }
  const nlohmann::json& at(const nlohmann::json& o, const char* k, const std::string& p) const {
    if (!o.is_object() || !o.contains(k)) fail("'" + p + k + "' is missing");
    return o.at(k);
  }
  std::string str(const nlohmann::json& o, const char* k, const std::string& p = "") const {
    const auto& v = at(o, k, p);
    if (!v.is_string()) fail("'" + p + k + "' must be a string");
    return v.get<std::string>();
  }
  std::optional<std::string> opt_str(const nlohmann::json& o, const char* k) const {
    if (!o.contains(k) || o.at(k).is_null()) return std::nullopt;
    return str(o, k);
  }
  std::vector<std::string> strs(const nlohmann::json& o, const char* k) const {
    const auto& v = at(o, k, "");
    if (!v.is_array()) fail(std::string("'") + k + "' must be an array");
    std::vector<std::string> out;
    for (const auto& x : v) {
      if (!x.is_string()) fail(std::string("'") + k + "' must hold strings");
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  const nlohmann::json& j_;
  std::string where_;
};

bool is_compiled_name(const std::string& f) {
  auto ends = [&](const char* s) {
    const std::string x(s);
    return f.size() >= x.size() && f.compare(f.size() - x.size(), x.size(), x) == 0;
  };
  return ends(".so") || f.find(".so.") != std::string::npos || ends(".pyd") || ends(".dylib");
}

bool has_elf_magic(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char m[4] = {};
  return in.read(m, 4) && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
}

// Compiled code in a tree meant for the pure wheel, as relative paths.
std::vector<std::string> compiled_files(const fs::path& tree) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tree, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string rel = fs::relative(it->path(), tree).generic_string();
    if (is_compiled_name(it->path().filename().string()) || has_elf_magic(it->path())) out.push_back(rel);
  }
  if (ec) throw Error("cannot read the staged tree " + tree.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

void preflight(const Plan& p) {
  if (p.wheels.empty()) throw Error("the plan names no wheel");
  bool any_cuda = false;
  for (const auto& w : p.wheels) {
    if (!fs::is_directory(w.tree))
      throw Error("component " + w.component + " was not staged (" + w.tree.string() + " is missing); run cpack "
                  "through the package target");
    if (w.kind == "pure") {
      const auto bad = compiled_files(w.tree);
      if (!bad.empty())
        throw Error("the pure wheel's tree holds compiled code (" + join(bad, ", ") +
                    "); the pure profile must not install any extension. Nothing was written.");
    } else {
      any_cuda = true;
      if (w.kernel_library && !fs::is_regular_file(w.tree / *w.kernel_library))
        throw Error("component " + w.component + " lacks its kernel library " + *w.kernel_library +
                    "; build the project before packaging");
    }
  }
  if (any_cuda && !p.channel) throw Error("the plan has CUDA wheels but no channel");
  std::error_code ec;
  fs::create_directories(p.out_dir, ec);
  if (ec || !fs::is_directory(p.out_dir))
    throw Error("cannot create the output directory " + p.out_dir.string() + ": " + ec.message() +
                "; set FFPA_RELEASE_DIST to a writable directory");
  if (p.site_dir) {
    fs::create_directories(p.site_dir->parent_path(), ec);
    if (ec) throw Error("cannot create " + p.site_dir->parent_path().string() + ": " + ec.message());
  }
}

std::string requirements_text(const Plan& p, const std::vector<core::ManifestWheel>& wheels) {
  std::string spec = p.name + "==" + p.cuda_version.value_or(p.version);
  const std::string file = "requirements-" + *p.channel + ".txt";
  std::string t = "# Hash-locked install of " + spec + " (" + *p.channel + " channel), written by ffpa-index release.\n"
                  "# pip install --require-hashes --no-deps -r " + file + " --index-url <site>/whl/" +
                  *p.channel + "/\n"
                  "# (--no-deps: the hashes lock ffpa-attn; pin numpy with your own hashes to lock it too)\n" +
                  spec;
  for (const auto& w : wheels)
    if (w.kind == "cuda") t += " \\\n    --hash=sha256:" + w.sha256;
  return t + "\n";
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

void render_local_site(const Plan& p, const std::vector<site::PreparedWheel>& prepared, std::ostream& log) {
  const fs::path site = *p.site_dir;
  const fs::path tmp = site.string() + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "assets");
  std::vector<site::PreparedWheel> cuda, pure;
  for (auto w : prepared) {
    const fs::path copy = tmp / "assets" / w.path.filename();
    w.bytes->write_to(copy);  // the verified bytes: the sha256 measured once holds
    w.path = copy;
    (w.name.platform == "any" ? pure : cuda).push_back(w);
  }
  std::ostringstream quiet;
  {
    const site::SiteLock lock(tmp, /*create_root=*/true);
    site::AddOptions o;
    o.release_url = "../../../assets/";  // servable from any host: anchors stay inside the site
    o.relative_release_url = true;
    o.core_metadata = true;
    o.metadata_dir = tmp / "assets";
    if (!cuda.empty()) site::add_wheels(site::IndexLocation{tmp, "whl", *p.channel}, cuda, o, quiet, lock);
    if (!pure.empty()) site::add_wheels(site::IndexLocation{tmp, "pypi", "simple"}, pure, o, quiet, lock);
  }
  // The site's front page: how to install this build. A dev build must be pinned
  // (==V): unpinned, pip and uv resolve PyPI's higher public release instead.
  const std::string v = p.cuda_version.value_or(p.version);
  const bool dev = core::parse_pep440(p.version) && (core::parse_pep440(p.version)->is_dev ||
                                                     !core::parse_pep440(p.version)->local.empty());
  std::string page = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html_escape(p.name) + " " +
                     html_escape(v) + "</title></head><body>\n<h1>" + html_escape(p.name) + " " + html_escape(v) +
                     "</h1>\n";
  if (!cuda.empty())
    page += "<p>CUDA wheels (" + html_escape(*p.channel) + "), from this site's root URL &lt;site&gt;:</p>\n<pre>pip install " +
            html_escape(p.name) + "==" + html_escape(v) + " --index-url &lt;site&gt;/whl/" + html_escape(*p.channel) +
            "/ --extra-index-url https://pypi.org/simple\nuv pip install " + html_escape(p.name) + "==" +
            html_escape(v) + " --index &lt;site&gt;/whl/" + html_escape(*p.channel) + "/</pre>\n";
  if (!pure.empty())
    page += "<p>The pure wheel:</p>\n<pre>pip install " + html_escape(p.name) + "==" + html_escape(p.version) +
            " --index-url &lt;site&gt;/pypi/simple/ --extra-index-url https://pypi.org/simple</pre>\n";
  if (dev)
    page += "<p><strong>This is a development build: keep the <code>==" + html_escape(v) +
            "</code> pin.</strong> Unpinned, pip and uv take the higher public release from PyPI.</p>\n";
  page += "<p>Hash-locked: <code>requirements-" + html_escape(p.channel.value_or("cu")) +
          ".txt</code> in the release directory; see docs/install.md.</p>\n</body></html>\n";
  core::write_file_atomic(tmp / "index.html", page);
  // Rendered from scratch and swapped in: the site always describes exactly this
  // build, and a failure above leaves the previous one.
  fs::remove_all(site);
  fs::rename(tmp, site);
  log << "local site " << site.string() << " (serve it, then: pip install " << p.name << "==" <<
      p.cuda_version.value_or(p.version) << " --index-url http://HOST/whl/" << p.channel.value_or("<channel>") << "/)\n";
}

}  // namespace

Plan read_plan(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read the plan " + file.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + " is not JSON (" + e.what() + ")");
  }
  PlanReader r(j, file.string());
  Plan p;
  const auto& schema = r.at(j, "schema", "");
  if (!schema.is_number_integer() || schema.get<int>() != kPlanSchema)
    r.fail("'schema' is " + schema.dump() + ", this engine reads " + std::to_string(kPlanSchema));
  p.name = r.str(j, "name");
  if (!core::is_valid_project_name(p.name)) r.fail("'name' is not a project name");
  p.version = r.str(j, "version");
  p.profile = r.str(j, "profile");
  p.channel = r.opt_str(j, "channel");
  p.cuda_version = r.opt_str(j, "cuda_version");
  p.fatbin_compression = r.opt_str(j, "fatbin_compression");
  const auto& src = r.at(j, "source", "");
  p.source_commit = r.str(src, "commit", "source.");
  const auto& dirty = r.at(src, "dirty", "source.");
  if (!dirty.is_boolean()) r.fail("'source.dirty' must be true or false");
  p.source_dirty = dirty.get<bool>();
  const auto& epoch = r.at(src, "date_epoch", "source.");
  if (!epoch.is_number_integer()) r.fail("'source.date_epoch' must be an integer");
  p.source_date_epoch = epoch.get<std::int64_t>();
  const auto& tc = r.at(j, "toolchain", "");
  if (!tc.is_object()) r.fail("'toolchain' must be an object");
  for (const auto& [k, v] : tc.items()) {
    if (!v.is_null() && !v.is_string()) r.fail("'toolchain." + k + "' must be a string or null");
    p.toolchain[k] = v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>());
  }
  if (p.channel) {
    p.archs = r.strs(j, "archs");
    p.dtypes = r.strs(j, "dtypes");
    const auto& dims = r.at(j, "head_dims", "");
    if (!dims.is_array()) r.fail("'head_dims' must be an array");
    for (const auto& d : dims) {
      if (!d.is_number_integer()) r.fail("'head_dims' must hold integers");
      p.head_dims.push_back(d.get<int>());
    }
  }
  p.metadata = r.str(j, "metadata");
  p.readme = r.str(j, "readme");
  p.readme_type = r.str(j, "readme_type");
  p.deflate_cache = r.str(j, "deflate_cache");
  p.forbid_paths = r.strs(j, "forbid_paths");
  p.out_dir = r.str(j, "out_dir");
  if (auto s = r.opt_str(j, "site_dir")) p.site_dir = fs::path(*s);
  const auto& wheels = r.at(j, "wheels", "");
  if (!wheels.is_array()) r.fail("'wheels' must be an array");
  for (std::size_t i = 0; i < wheels.size(); ++i) {
    const std::string pre = "wheels[" + std::to_string(i) + "].";
    const auto& w = wheels[i];
    PlanWheel pw;
    pw.component = r.str(w, "component", pre);
    pw.kind = r.str(w, "kind", pre);
    if (pw.kind != "pure" && pw.kind != "cuda") r.fail("'" + pre + "kind' must be pure or cuda");
    pw.tree = r.str(w, "tree", pre);
    pw.tag = r.str(w, "tag", pre);
    pw.version = r.str(w, "version", pre);
    const auto& purelib = r.at(w, "root_is_purelib", pre);
    if (!purelib.is_boolean()) r.fail("'" + pre + "root_is_purelib' must be true or false");
    pw.root_is_purelib = purelib.get<bool>();
    if (w.contains("kernel_library") && !w["kernel_library"].is_null())
      pw.kernel_library = r.str(w, "kernel_library", pre);
    p.wheels.push_back(pw);
  }
  return p;
}

Outcome run_release(const Plan& p, std::ostream& log) {
  preflight(p);

  std::vector<core::PackOptions> opts;
  for (const auto& w : p.wheels) {
    core::PackOptions o;
    o.tree = w.tree;
    o.name = p.name;
    o.version = w.version;
    o.tag = w.tag;
    o.metadata = p.metadata;
    o.readme = p.readme;
    o.readme_type = p.readme_type;
    o.out_dir = p.out_dir;
    o.root_is_purelib = w.root_is_purelib;
    o.source_date_epoch = p.source_date_epoch;
    o.deflate.cache_dir = p.deflate_cache;
    // No path of the build machine may leak into a shipped binary.
    o.forbidden_strings = p.forbid_paths;
    opts.push_back(o);
  }
  const std::vector<core::PackResult> packed = core::pack_wheels(opts);

  core::Manifest m;
  m.name = p.name;
  m.version = p.version;
  m.profile = p.profile;
  m.source_commit = p.source_commit;
  m.source_dirty = p.source_dirty;
  m.source_date_epoch = p.source_date_epoch;
  m.toolchain = p.toolchain;
  m.channel = p.channel;
  m.cuda_version = p.cuda_version;
  m.fatbin_compression = p.fatbin_compression;
  m.archs = p.archs;
  m.dtypes = p.dtypes;
  m.head_dims = p.head_dims;

  Outcome out;
  std::vector<site::PreparedWheel> prepared;
  std::string sums;
  for (std::size_t i = 0; i < packed.size(); ++i) {
    const PlanWheel& w = p.wheels[i];
    // Verifies the wheel as add and publish will, and hashes it: the only time.
    site::PreparedWheel pw = site::prepare_wheel(packed[i].wheel);
    core::ManifestWheel mw;
    mw.file = pw.path.filename().string();
    mw.kind = w.kind;
    mw.version = w.version;
    const auto& n = pw.name;
    mw.tags = n.python + "-" + n.abi + "-" + n.platform;
    mw.size = pw.size;
    mw.sha256 = pw.sha256;
    if (w.kernel_library) {
      const core::ZipReader zip(pw.bytes->fd(), pw.path);
      const core::ZipMember* lib = zip.find(*w.kernel_library);
      if (lib == nullptr) throw Error("cannot find " + *w.kernel_library + " in " + mw.file);
      mw.kernel_library_size = lib->size;
      mw.kernel_library_compressed_size = lib->compressed_size;
    }
    sums += mw.sha256 + "  " + mw.file + "\n";
    m.wheels.push_back(mw);
    out.wheels.push_back(pw.path);
    prepared.push_back(std::move(pw));
  }

  if (p.channel && std::any_of(m.wheels.begin(), m.wheels.end(), [](const auto& w) { return w.kind == "cuda"; })) {
    const std::string text = requirements_text(p, m.wheels);
    core::ManifestFile f;
    f.file = "requirements-" + *p.channel + ".txt";
    f.size = text.size();
    f.sha256 = site::hash_file([&] {
      core::write_file_atomic(p.out_dir / f.file, text);
      return p.out_dir / f.file;
    }());
    sums += f.sha256 + "  " + f.file + "\n";
    m.requirements = f;
  }

  // Wheels of other versions in the same directory are not ours to delete; say so,
  // because tools that pick "the" wheel from dist/ would see them.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.out_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() > 4 && f.substr(f.size() - 4) == ".whl" &&
        std::none_of(m.wheels.begin(), m.wheels.end(), [&](const auto& w) { return w.file == f; }))
      log << "warning: " << p.out_dir.string() << " also holds " << f
          << ", which is not part of this build; remove it or use -DFFPA_RELEASE_DIST=<dir>\n";
  }

  const std::string manifest = core::manifest_to_json(m);
  core::parse_manifest(manifest, "the manifest being written");  // the writer's output must read back
  core::write_file_atomic(p.out_dir / "ffpa-release-manifest.json", manifest);
  core::write_file_atomic(p.out_dir / "SHA256SUMS", sums);

  // The build log kept with acceptance reports (spec/notebooks.md section 3): which
  // commit, toolchain and plan produced these files.
  std::string blog = p.name + " " + p.version + " (" + p.profile + " profile)\n";
  blog += "source commit " + p.source_commit + " dirty=" + (p.source_dirty ? "1" : "0") + "\n";
  for (const auto& [k, v] : p.toolchain) blog += k + " " + v.value_or("none") + "\n";
  if (p.channel) {
    std::vector<std::string> dims;
    for (int d : p.head_dims) dims.push_back(std::to_string(d));
    blog += "channel " + *p.channel + "; archs " + join(p.archs, ";") + "; head dims " + join(dims, ";") +
            "; dtypes " + join(p.dtypes, ";") + "\n";
  }
  blog += "\nffpa-index release\n";
  for (std::size_t i = 0; i < p.wheels.size(); ++i)
    blog += "  [" + p.wheels[i].component + "] --tag " + p.wheels[i].tag + " --version " + p.wheels[i].version +
            " -> " + m.wheels[i].file + "\n";
  blog += "\nSHA256SUMS\n" + sums;
  core::write_file_atomic(p.out_dir / "ffpa-build.log", blog);

  if (p.site_dir) render_local_site(p, prepared, log);

  log << m.wheels.size() << " wheel(s) of " << p.name << " " << p.version << " (" << p.profile << ") in "
      << p.out_dir.string() << ":\n";
  for (const auto& w : m.wheels)
    log << "  " << w.file << "  " << w.size << " bytes  sha256 " << w.sha256.substr(0, 16) << "...\n";
  log << "  SHA256SUMS, ffpa-release-manifest.json (schema " << m.schema << ")"
      << (m.requirements ? ", " + m.requirements->file : std::string()) << ", ffpa-build.log\n";
  out.manifest = std::move(m);
  return out;
}

int main(int argc, char** argv) {
  static const char* kHelp =
      "usage: ffpa-index release --plan PLAN.json\n"
      "  Packs every wheel of the plan in one pass, then writes SHA256SUMS, the hash-locked\n"
      "  requirements-<channel>.txt, ffpa-release-manifest.json and ffpa-build.log into the\n"
      "  plan's out_dir and renders the local site into its site_dir. The plan is written by\n"
      "  cmake/FfpaPackWheels.cmake (the package target); docs/release.md describes it.\n";
  std::optional<std::string> plan;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (a == "--plan" && i + 1 < argc && !plan) {
      plan = argv[++i];
      continue;
    }
    std::cerr << "ffpa-index release: unexpected argument '" << a << "'; see ffpa-index release --help\n";
    return 2;
  }
  if (!plan) {
    std::cerr << "ffpa-index release: --plan PLAN.json is required; see ffpa-index release --help\n";
    return 2;
  }
  try {
    run_release(read_plan(*plan), std::cout);
  } catch (const std::exception& e) {
    std::cerr << "ffpa-index release: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ffpa::release
