// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/release/release.h"

#include <algorithm>
#include <ostream>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"
#include "ffpa/site/index.h"

namespace ffpa::release {

namespace fs = std::filesystem;
using core::Error;

namespace {

// One install line of cmake/install-lines.json (the plan carries its templates) for this
// release: {cuda_version}, {channel}, {pypi} filled in, {site} left as "<site>" (the front
// page is served from any host). A placeholder left over is a plan this engine does not
// know how to render: an error, never a line with braces in it.
std::string render_install_line(const core::Release& p, const std::string& tmpl) {
  std::string line = tmpl;
  const std::pair<std::string, std::string> fills[] = {{"{cuda_version}", p.cuda_version.value_or(p.version)},
                                                       {"{channel}", p.channel.value_or("")},
                                                       {"{site}", "<site>"},
                                                       {"{pypi}", p.install_lines.pypi}};
  for (const auto& [key, value] : fills)
    for (std::size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + value.size()))
      line.replace(at, key.size(), value);
  if (line.find('{') != std::string::npos || line.find('}') != std::string::npos)
    throw Error("the plan's install line '" + tmpl + "' has a placeholder other than {cuda_version}, {channel}, "
                "{site} and {pypi}; fix cmake/install-lines.json");
  return line;
}

void preflight(const core::Release& p, const fs::path& staging) {
  if (p.wheels.empty()) throw Error("the plan names no wheel");
  for (const auto& w : p.wheels) {
    if (!fs::is_directory(staging / w.tree))
      throw Error("the tree " + w.tree + " was not staged (" + (staging / w.tree).string() +
                  " is missing); run cpack through the package target");
    if (w.kernel_library && !fs::is_regular_file(staging / w.tree / *w.kernel_library))
      throw Error("the tree " + w.tree + " lacks its kernel library " + *w.kernel_library +
                  "; build the project before packaging");
    if (w.kind == "cuda" && !p.channel) throw Error("the plan has CUDA wheels but no channel");
  }
  // The front page's lines are rendered before anything is written.
  render_install_line(p, p.install_lines.pip);
  render_install_line(p, p.install_lines.uv);
  core::create_directories(p.out_dir, "set FFPA_RELEASE_DIST to a writable directory");
  if (p.site_dir) core::create_directories(fs::path(*p.site_dir).parent_path(), "fix its permissions");
}

std::string requirements_text(const core::Release& m) {
  const std::string spec = m.name + "==" + m.cuda_version.value_or(m.version);
  const std::string file = "requirements-" + *m.channel + ".txt";
  std::string t = "# Hash-locked install of " + spec + " (" + *m.channel + " channel), written by ffpa-index release.\n"
                  "# pip install --require-hashes --no-deps -r " + file + " --index-url <site>/whl/" +
                  *m.channel + "/\n"
                  "# (--no-deps: the hashes lock ffpa-attn; pin numpy with your own hashes to lock it too)\n" +
                  spec;
  for (const auto& w : m.wheels)
    if (w.kind == "cuda") t += " \\\n    --hash=sha256:" + w.sha256;
  return t + "\n";
}

// The site's front page: how to install this build. The CUDA lines are
// cmake/install-lines.json's (the one home of install lines), pinned to the CUDA wheel's
// own version V+cu13, and the page says why: a public ==V is already satisfied by an
// installed pure wheel V, so pip and uv would keep it. A dev build must be pinned too:
// unpinned, pip and uv resolve PyPI's higher public release instead.
std::string front_page(const core::Release& p, bool cuda, bool pure) {
  using site::html_escape;
  const std::string v = html_escape(p.cuda_version.value_or(p.version)), name = html_escape(p.name);
  const std::string pure_v = html_escape(p.version);
  const auto parsed = core::parse_pep440(p.version);
  const bool dev = parsed && (parsed->is_dev || !parsed->local.empty());
  const std::string channel = html_escape(p.channel.value_or("cu"));
  std::string page = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + name + " " + v +
                     "</title></head><body>\n<h1>" + name + " " + v + "</h1>\n";
  if (cuda) {
    page += "<p>CUDA wheels (" + channel + "), from this site's root URL &lt;site&gt;:</p>\n<pre>" +
            html_escape(render_install_line(p, p.install_lines.pip)) + "\n" +
            html_escape(render_install_line(p, p.install_lines.uv)) + "</pre>\n";
    page += "<p>Why <code>==" + v + "</code> and not <code>==" + pure_v + "</code>: <code>" + v +
            "</code> is the CUDA wheel's own version (its local version <code>+" + channel +
            "</code>). A public pin <code>==" + pure_v + "</code> is also matched by the pure wheel <code>" + pure_v +
            "</code>, so where the pure wheel is already installed (from PyPI, or as a dependency) pip and uv "
            "answer \"Requirement already satisfied\" and keep it, and models run on SDPA instead of the "
            "kernels. <strong>Over an installed pure wheel, run the same lines as they are</strong>: "
            "<code>==" + v + "</code> matches the CUDA wheel alone, so pip and uv replace the pure wheel with "
            "it; no uninstall step is needed. Check with <code>python -m ffpa_attn.info</code>.</p>\n";
  }
  if (pure)
    page += "<p>The pure wheel:</p>\n<pre>pip install " + name + "==" + pure_v + " --index-url &lt;site&gt;/pypi/simple/ --extra-index-url " +
            html_escape(p.install_lines.pypi) + "</pre>\n";
  if (dev)
    page += "<p><strong>This is a development build: keep the <code>==" + v +
            "</code> pin.</strong> Unpinned, pip and uv take the higher public release from PyPI.</p>\n";
  return page + "<p>Hash-locked: <code>requirements-" + channel +
         ".txt</code> in the release directory; see docs/install.md.</p>\n</body></html>\n";
}

void render_local_site(const core::Release& p, const std::vector<core::PackResult>& packed, std::ostream& log) {
  const fs::path site = *p.site_dir;
  const fs::path tmp = site.string() + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "assets");
  std::vector<site::PreparedWheel> cuda, pure;
  for (const auto& r : packed) {
    site::PreparedWheel w = site::packed_wheel(r);
    // The wheel just written, not read again: a second name for its bytes (a copy
    // only where the site lives on another file system).
    const fs::path asset = tmp / "assets" / r.wheel.filename();
    std::error_code ec;
    fs::create_hard_link(r.wheel, asset, ec);
    if (ec) fs::copy_file(r.wheel, asset);
    (r.name.platform == "any" ? pure : cuda).push_back(std::move(w));
  }
  {
    const site::SiteLock lock(tmp, /*create_root=*/true);
    site::AddOptions o;
    o.release_url = "../../../assets/";  // servable from any host: anchors stay inside the site
    o.relative_release_url = true;
    o.core_metadata = true;
    o.metadata_dir = tmp / "assets";
    std::ostream quiet(nullptr);
    if (!cuda.empty()) site::add_wheels(site::IndexLocation{tmp, "whl", *p.channel}, cuda, o, quiet, lock);
    if (!pure.empty()) site::add_wheels(site::IndexLocation{tmp, "pypi", "simple"}, pure, o, quiet, lock);
  }
  core::write_file_atomic(tmp / "index.html", front_page(p, !cuda.empty(), !pure.empty()));
  // Rendered from scratch and swapped in: the site always describes exactly this
  // build, and a failure above leaves the previous one.
  fs::remove_all(site);
  fs::rename(tmp, site);
  log << "local site " << site.string() << " (serve it, then: pip install " << p.name << "=="
      << p.cuda_version.value_or(p.version) << " --index-url http://HOST/whl/" << p.channel.value_or("<channel>")
      << "/)\n";
}

}  // namespace

core::Release run_release(const core::Release& p, const fs::path& staging, std::ostream& log) {
  preflight(p, staging);
  std::vector<core::PackOptions> opts;
  for (const auto& w : p.wheels) {
    core::PackOptions o;
    o.tree = staging / w.tree;
    o.name = p.name;
    o.version = w.version;
    o.tag = w.tags;
    o.metadata = p.metadata;
    o.metadata_source = "the plan's metadata";
    o.readme = p.readme;
    o.out_dir = p.out_dir;
    o.root_is_purelib = w.kind == "pure";
    o.source_date_epoch = p.source_date_epoch;
    o.forbidden_strings = p.forbid_paths;  // no path of the build machine in a shipped binary
    opts.push_back(o);
  }
  const std::vector<core::PackResult> packed = core::pack_wheels(opts);

  core::Release m = p;  // the plan's facts, then what was written
  std::string sums;
  for (std::size_t i = 0; i < packed.size(); ++i) {
    const core::PackResult& r = packed[i];
    core::ReleaseWheel& w = m.wheels[i];
    w.file = r.name.filename();
    w.tags = r.name.python + "-" + r.name.abi + "-" + r.name.platform;
    w.size = r.size;
    w.sha256 = r.sha256;
    if (w.kernel_library) {
      auto lib = std::find_if(r.members.begin(), r.members.end(), [&](const auto& e) { return e.name == *w.kernel_library; });
      w.kernel_library_size = lib->size;  // preflight proved it is in the tree
      w.kernel_library_compressed_size = lib->compressed_size;
    }
    sums += w.sha256 + "  " + w.file + "\n";
  }
  const fs::path out = p.out_dir;
  std::vector<std::pair<fs::path, std::string>> files;  // written together, once the wheels are
  if (m.channel && std::any_of(m.wheels.begin(), m.wheels.end(), [](const auto& w) { return w.kind == "cuda"; })) {
    const std::string text = requirements_text(m);
    m.requirements = core::ReleaseFile{"requirements-" + *m.channel + ".txt", core::sha256_hex(text), text.size()};
    files.emplace_back(out / m.requirements->file, text);
    sums += m.requirements->sha256 + "  " + m.requirements->file + "\n";
  }

  // Wheels of other versions in the same directory are not ours to delete; say so,
  // because tools that pick "the" wheel from dist/ would see them.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string f = e.path().filename().string();
    if (f.ends_with(".whl") &&
        std::none_of(m.wheels.begin(), m.wheels.end(), [&](const auto& w) { return w.file == f; }))
      log << "warning: " << p.out_dir << " also holds " << f
          << ", which is not part of this build; remove it or use -DFFPA_RELEASE_DIST=<dir>\n";
  }
  files.emplace_back(out / "ffpa-release-manifest.json", core::manifest_to_json(m));
  files.emplace_back(out / "SHA256SUMS", sums);

  // The build log kept with acceptance reports (docs/release.md): which commit,
  // toolchain and plan produced these files.
  std::string blog = p.name + " " + p.version + " (" + p.profile + " profile)\n";
  blog += "source commit " + p.source_commit + " dirty=" + (p.source_dirty ? "1" : "0") + "\n";
  for (const auto& [k, v] : p.toolchain) blog += k + " " + v.value_or("none") + "\n";
  if (p.channel) {
    std::vector<std::string> dims;
    for (int d : p.head_dims) dims.push_back(std::to_string(d));
    blog += "channel " + *p.channel + "; archs " + core::join(p.archs, ";") + "; head dims " + core::join(dims, ";") +
            "; dtypes " + core::join(p.dtypes, ";") + "\n";
  }
  blog += "\nffpa-index release\n";
  for (std::size_t i = 0; i < p.wheels.size(); ++i)
    blog += "  [" + p.wheels[i].tree + "] --tag " + p.wheels[i].tags + " --version " + p.wheels[i].version + " -> " +
            m.wheels[i].file + "\n";
  files.emplace_back(out / "ffpa-build.log", blog + "\nSHA256SUMS\n" + sums);
  core::write_files_atomic(files);

  if (p.site_dir) render_local_site(p, packed, log);

  log << m.wheels.size() << " wheel(s) of " << p.name << " " << p.version << " (" << p.profile << ") in "
      << p.out_dir << ":\n";
  for (const auto& w : m.wheels)
    log << "  " << w.file << "  " << w.size << " bytes  sha256 " << w.sha256.substr(0, 16) << "...\n";
  log << "  SHA256SUMS, ffpa-release-manifest.json (schema " << m.schema << ")"
      << (m.requirements ? ", " + m.requirements->file : std::string()) << ", ffpa-build.log\n";
  return m;
}

}  // namespace ffpa::release
