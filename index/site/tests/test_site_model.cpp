// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/pep.h"
#include "args.h"
#include "ffpa/site/index.h"
#include "ffpa/site/publish.h"

using namespace ffpa::site;

namespace {

FileEntry entry(const std::string& fn, const std::string& sha = std::string(64, 'a')) {
  FileEntry e;
  e.filename = fn;
  e.url = "https://example.invalid/dl/" + url_encode_segment(fn);
  e.sha256 = sha;
  return e;
}

// A wheel as add sees it, without a file behind it (plan_add reads only these fields).
PreparedWheel prepared(const std::string& fn) {
  PreparedWheel w;
  w.name = *ffpa::core::parse_wheel_filename(fn);
  w.version = *ffpa::core::parse_pep440(w.name.version);
  w.project = "ffpa-attn";
  w.sha256 = std::string(64, 'b');
  return w;
}

}  // namespace

TEST(SiteModel, EscapesEveryAttributeAndText) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  ProjectPage p;
  p.name = "ffpa-attn";
  auto e = entry("ffpa_attn-0.2.5+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  e.requires_python = ">=3.10";
  e.yanked = "bad \"build\" <x>";
  e.core_metadata_sha256 = std::string(64, 'b');
  p.insert(e);
  const auto html = render_project_html(p);
  EXPECT_NE(html.find("data-requires-python=\"&gt;=3.10\""), std::string::npos);
  EXPECT_NE(html.find("data-yanked=\"bad &quot;build&quot; &lt;x&gt;\""), std::string::npos);
  EXPECT_NE(html.find("0.2.5%2Bcu13-cp312"), std::string::npos);
  EXPECT_NE(html.find("#sha256=" + std::string(64, 'a') + "\""), std::string::npos);
  EXPECT_NE(html.find("data-core-metadata=\"sha256=" + std::string(64, 'b') + "\""), std::string::npos);
  EXPECT_EQ(html.find("<x>"), std::string::npos);
}

TEST(SiteModel, JsonRoundTripIsPep691) {
  ProjectPage p;
  p.name = "ffpa-attn";
  auto a = entry("ffpa_attn-0.2.6+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  a.size = 1234;
  a.yanked = "";
  p.insert(a);
  p.insert(entry("ffpa_attn-0.2.5+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"));
  p.refresh_versions();
  const auto j = to_json(p);
  EXPECT_EQ(j["meta"]["api-version"], "1.1");
  EXPECT_EQ(j["files"][0]["filename"], "ffpa_attn-0.2.5+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  EXPECT_EQ(j["files"][1]["yanked"], true);
  EXPECT_EQ(j["files"][0]["core-metadata"], false);
  const auto back = project_from_json(j, "test");
  EXPECT_EQ(to_json(back), j);
}

TEST(SiteModel, RefusesJsonListingANonWheel) {
  ProjectPage p;
  p.name = "ffpa-attn";
  auto j = to_json(p);
  j["files"].push_back({{"filename", "evil<script>.whl"}, {"url", "x"}, {"hashes", {{"sha256", "0"}}}});
  EXPECT_THROW(project_from_json(j, "test"), ffpa::core::Error);
}

TEST(SiteModel, LegacyAnchorsParse) {
  const std::string html =
      "<html><body><h1>x</h1>\n<A HREF='https://h/d/ffpa_attn-0.2.3%2Bcu13-cp311-cp311-manylinux_2_38_x86_64.whl"
      "#sha256=" + std::string(64, 'c') + "' data-requires-python=\"&gt;=3.10\">"
      "ffpa_attn-0.2.3+cu13-cp311-cp311-manylinux_2_38_x86_64.whl</A><br/>\n"
      "<a data-yanked href=\"y.whl\">y.whl</a></body></html>";
  const auto a = parse_anchors(html);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].sha256, std::string(64, 'c'));
  EXPECT_EQ(a[0].requires_python, ">=3.10");
  EXPECT_EQ(a[0].href.find('#'), std::string::npos);
  EXPECT_TRUE(a[1].yanked.has_value());
  EXPECT_EQ(url_decode("a%2Bb"), "a+b");
}

TEST(SiteModel, VersionSelection) {
  const std::string f = "ffpa_attn-0.2.5+cu13-cp312-cp312-manylinux_2_28_x86_64.whl";
  EXPECT_TRUE(version_matches(f, *ffpa::core::parse_pep440("0.2.5")));
  EXPECT_TRUE(version_matches(f, *ffpa::core::parse_pep440("0.2.5+cu13")));
  EXPECT_FALSE(version_matches(f, *ffpa::core::parse_pep440("0.2.5+cu12")));
  EXPECT_FALSE(version_matches(f, *ffpa::core::parse_pep440("0.2.50")));
}

TEST(SiteModel, VersionsKeepPublicationOrder) {
  ProjectPage p;
  p.name = "ffpa-attn";
  p.insert(entry("ffpa_attn-0.10.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"));
  p.versions = {"0.10.0+cu13"};
  p.insert(entry("ffpa_attn-0.9.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"));
  p.refresh_versions();
  EXPECT_EQ(p.versions, (std::vector<std::string>{"0.10.0+cu13", "0.9.0+cu13"}));
}

TEST(SiteUrls, ReleaseAndSimpleUrls) {
  EXPECT_EQ(expand_release_url("https://m/{tag}", "v0.2.5+cu13"), "https://m/v0.2.5%2Bcu13/");
  EXPECT_EQ(simple_url_for("https://upload.pypi.org/legacy/"), "https://pypi.org/simple/");
  EXPECT_EQ(simple_url_for("http://127.0.0.1:8080/"), "http://127.0.0.1:8080/simple/");
  EXPECT_EQ(simple_url_for("https://test.pypi.org/legacy/"), "https://test.pypi.org/simple/");
  auto gh = make_asset_store("gh:Org/ffpa-attn");
  EXPECT_EQ(expand_release_url(gh->default_release_url(), "v0.2.5+cu13"),
            "https://github.com/Org/ffpa-attn/releases/download/v0.2.5%2Bcu13/");
  EXPECT_EQ(gh->default_site_url(), "https://org.github.io/ffpa-attn");
  EXPECT_THROW(make_asset_store("s3:bucket"), ffpa::core::Error);
  EXPECT_THROW(make_asset_store("gh:noslash"), ffpa::core::Error);
}

TEST(SiteProcess, QuotingAndCapture) {
  EXPECT_EQ(shell_quote("a b'c"), "'a b'\\''c'");
  EXPECT_EQ(shell_quote("v0.2.5+cu13"), "v0.2.5+cu13");
  auto r = run_process({"sh", "-c", "printf out; printf err >&2; exit 3"});
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "out");
  EXPECT_EQ(r.err, "err");
  EXPECT_EQ(run_process({"/nonexistent/program"}).status, 127);
}

// The one grammar of every ffpa-index command (index/cli/args.h).
TEST(CliArgs, FlagsValuesListsAndRefusals) {
  using ffpa::cli::Args;
  using ffpa::cli::UsageError;
  const std::map<std::string, Args::Kind> flags = {{"--tag", Args::kValue}, {"--wheels", Args::kList},
                                                   {"--dry-run", Args::kFlag}, {"--forbid-path", Args::kRepeated}};
  const char* argv[] = {"publish", "--tag=v1+cu13", "--wheels", "a.whl", "b.whl", "--dry-run", "c.whl",
                        "--forbid-path", "x", "--forbid-path=y"};
  const Args a(10, const_cast<char**>(argv), flags);
  EXPECT_EQ(a.get("--tag"), "v1+cu13");
  EXPECT_EQ(a.all("--wheels"), (std::vector<std::string>{"a.whl", "b.whl"}));
  EXPECT_TRUE(a.has("--dry-run"));
  EXPECT_FALSE(a.help());
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"c.whl"}));
  EXPECT_EQ(a.all("--forbid-path"), (std::vector<std::string>{"x", "y"}));
  EXPECT_THROW(a.no_positional(), UsageError);
  EXPECT_THROW(a.need("--missing", "X"), UsageError);
  const std::vector<std::vector<const char*>> bad = {{"add", "--bogus"},
                                                     {"add", "--tag", "a", "--tag", "b"},
                                                     {"add", "--tag"},
                                                     {"add", "--dry-run=yes"},
                                                     {"add", "--wheels"},
                                                     {"add", "--forbid-path", "x", "--forbid-path"}};
  for (auto v : bad) EXPECT_THROW(Args(static_cast<int>(v.size()), const_cast<char**>(v.data()), flags), UsageError) << v[1];
  const char* help[] = {"add", "x", "-h"};
  EXPECT_TRUE(Args(3, const_cast<char**>(help), flags).help());
}

TEST(SiteIndex, LegacyPageImportedOnceThenJsonRules) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("ffpa-site-legacy-" + std::to_string(::getpid()));
  fs::remove_all(root);
  IndexLocation loc{root, "whl", "cu13"};
  fs::create_directories(loc.project_dir("ffpa-attn"));
  const std::string fn = "ffpa_attn-0.2.3+cu13-cp311-cp311-manylinux_2_38_x86_64.whl";
  {
    std::ofstream(loc.project_dir("ffpa-attn") / "index.html")
        << "<html><body><a href=\"https://h/dl/" << url_encode_segment(fn) << "#sha256=" << std::string(64, 'd')
        << "\">" << fn << "</a><br></body></html>\n";
  }
  const SiteLock lock(root);
  std::ostringstream log;
  // A legacy page records no release URL: render refuses it until told one, and then
  // only one its anchors derive from.
  EXPECT_THROW(render_all(loc, std::nullopt, log, lock), ffpa::core::Error);
  EXPECT_THROW(render_all(loc, std::string("https://h/other/"), log, lock), ffpa::core::Error);
  EXPECT_FALSE(fs::exists(loc.project_dir("ffpa-attn") / "index.json"));
  render_all(loc, std::string("https://h/dl"), log, lock);  // imports the legacy page and writes its JSON
  ASSERT_TRUE(fs::exists(loc.project_dir("ffpa-attn") / "index.json"));
  auto page = load_project(loc, "ffpa-attn");
  ASSERT_EQ(page.files.size(), 1u);
  EXPECT_EQ(page.release_url, "https://h/dl/");
  EXPECT_EQ(page.files[0].filename, fn);
  EXPECT_EQ(page.files[0].sha256, std::string(64, 'd'));
  // From now on the HTML is output only: editing it changes nothing.
  { std::ofstream(loc.project_dir("ffpa-attn") / "index.html") << "<html></html>\n"; }
  EXPECT_EQ(load_project(loc, "ffpa-attn").files.size(), 1u);
  std::ostringstream log2;
  EXPECT_THROW(edit_version(loc, Edit::remove, "9.9.9", std::nullopt, std::nullopt, log2, lock), ffpa::core::Error);
  edit_version(loc, Edit::remove, "0.2.3", std::nullopt, std::nullopt, log2, lock);
  EXPECT_TRUE(load_project(loc, "ffpa-attn").files.empty());
  fs::remove_all(root);
}

// What pip would follow out of an imported page is checked.
TEST(SiteModel, AnchorUrlsAndHashes) {
  EXPECT_EQ(url_problem("https://h/x.whl", true), "");
  EXPECT_EQ(url_problem("file:///srv/x.whl", true), "");
  EXPECT_EQ(url_problem("../x.whl", false), "");
  EXPECT_NE(url_problem("../x.whl", true), "");
  EXPECT_NE(url_problem("javascript:alert(1)", false), "");
  EXPECT_NE(url_problem("JavaScript:alert(1)", false), "");
  EXPECT_NE(url_problem("data:text/html,x", false), "");
  EXPECT_NE(url_problem("java\tscript:alert(1)", false), "");
  EXPECT_NE(url_problem("", false), "");
  EXPECT_TRUE(ffpa::core::is_sha256_hex(std::string(64, 'a')));
  EXPECT_FALSE(ffpa::core::is_sha256_hex(std::string(64, 'A')));
  EXPECT_FALSE(ffpa::core::is_sha256_hex(std::string(63, 'a') + "g"));
  EXPECT_FALSE(ffpa::core::is_sha256_hex(std::string(65, 'a')));
  ProjectPage p;
  p.name = "ffpa-attn";
  auto j = to_json(p);
  j["files"].push_back({{"filename", "ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"},
                        {"url", "javascript:alert(1)"},
                        {"hashes", {{"sha256", std::string(64, 'a')}}}});
  EXPECT_THROW(project_from_json(j, "test"), ffpa::core::Error);
  j["files"][0]["url"] = "https://h/x.whl";
  j["files"][0]["hashes"]["sha256"] = std::string(64, 'z');
  EXPECT_THROW(project_from_json(j, "test"), ffpa::core::Error);
}

namespace {

struct TempSite {
  std::filesystem::path root;
  explicit TempSite(const std::string& tag)
      : root(std::filesystem::temp_directory_path() / ("ffpa-site-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
  }
  ~TempSite() { std::filesystem::remove_all(root); }
};

std::string import_error(const std::string& anchor) {
  TempSite t("import");
  IndexLocation loc{t.root, "whl", "cu13"};
  std::filesystem::create_directories(loc.project_dir("ffpa-attn"));
  std::ofstream(loc.project_dir("ffpa-attn") / "index.html") << "<html><body>" << anchor << "</body></html>\n";
  try {
    load_project(loc, "ffpa-attn");
  } catch (const ffpa::core::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SiteIndex, LegacyImportRefusesScriptHrefsAndNonHexHashes) {
  const std::string fn = "ffpa_attn-0.2.3+cu13-cp311-cp311-manylinux_2_38_x86_64.whl";
  const std::string hex(64, 'd');
  EXPECT_EQ(import_error("<a href=\"https://h/" + fn + "#sha256=" + hex + "\">" + fn + "</a>"), "");
  // Upper-case hex is hex: imported, lower-cased (pip compares lower-case digests).
  EXPECT_EQ(import_error("<a href=\"https://h/" + fn + "#sha256=" + std::string(64, 'D') + "\">" + fn + "</a>"), "");
  const std::string js = import_error("<a href=\"javascript:fetch('//evil')#sha256=" + hex + "\">" + fn + "</a>");
  EXPECT_NE(js.find("refused: a javascript: URL"), std::string::npos) << js;
  const std::string nonhex =
      import_error("<a href=\"https://h/" + fn + "#sha256=" + std::string(64, 'x') + "\">" + fn + "</a>");
  EXPECT_NE(nonhex.find("not 64 hex digits"), std::string::npos) << nonhex;
  const std::string spec = import_error("<a href=\"https://h/" + fn + "#sha256=" + hex +
                                        "\" data-requires-python=\"&gt;=3.10&quot;&gt;&lt;x\">" + fn + "</a>");
  EXPECT_NE(spec.find("data-requires-python"), std::string::npos) << spec;
  const std::string notes = import_error("<p>release notes</p>");
  EXPECT_NE(notes.find("not a project page"), std::string::npos) << notes;
}

// Versions PEP 440 calls equal share one key, whatever the spelling.
TEST(SiteModel, VersionIdentityPadsReleaseNumbers) {
  auto key = [](const char* v) { return ffpa::core::version_identity(*ffpa::core::parse_pep440(v)); };
  EXPECT_EQ(key("1.0.0+cu13"), key("1.0+cu13"));
  EXPECT_EQ(key("1.0.0+cu13"), key("01.0.0+CU13"));
  EXPECT_EQ(key("v1+cu13"), key("1.0.0.0+cu13"));
  EXPECT_EQ(key("1.0.0.dev0"), key("1.dev0"));
  EXPECT_EQ(key("1!2.0.post1"), key("1!2.post1"));
  EXPECT_NE(key("1.0.0+cu13"), key("1.0.1+cu13"));
  EXPECT_NE(key("1.0.0+cu13"), key("1.0.0+cu13.0"));
  EXPECT_NE(key("1.0.0rc1"), key("1.0.0"));
  EXPECT_NE(key("10.0"), key("1.0"));
  EXPECT_EQ(key("0.0"), "0");
}

// The same version and tags under another spelling is the same file.
TEST(SiteIndex, AnotherSpellingOfAListedVersionIsRefused) {
  TempSite t("spelling");
  IndexLocation loc{t.root, "whl", "cu13"};
  const std::string legacy = "ffpa_attn-01.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl";
  ProjectPage page;
  page.name = "ffpa-attn";
  page.release_url = "https://example.invalid/dl/";
  page.insert(entry(legacy, std::string(64, 'a')));
  page.refresh_versions();
  std::filesystem::create_directories(loc.project_dir("ffpa-attn"));
  std::ofstream(loc.project_dir("ffpa-attn") / "index.json") << to_json(page).dump(1);
  const PreparedWheel w = prepared("ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  AddOptions opt;
  opt.release_url = "https://example.invalid/dl/";
  try {
    plan_add(loc, {w}, opt);
    FAIL() << "another spelling of a listed file was accepted";
  } catch (const ffpa::core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already published with different contents as '" + legacy + "'"),
              std::string::npos)
        << e.what();
  }
  // Another platform of the same version is another file, and a forced replacement
  // drops the old spelling instead of listing both.
  opt.force = true;
  const IndexPlan plan = plan_add(loc, {w}, opt);
  EXPECT_EQ(plan.report.replaced, 1u);
  const auto written = nlohmann::json::parse(plan.writes.at(0).second);
  ASSERT_EQ(written["files"].size(), 1u);
  EXPECT_EQ(written["files"][0]["filename"], w.name.filename());
}

// One lock per site, whatever the spelling; it writes nothing.
TEST(SiteIndex, OneLockPerSiteWhateverTheSpelling) {
  namespace fs = std::filesystem;
  TempSite t("lock");
  const fs::path link = t.root.string() + "-link";
  fs::remove(link);
  fs::create_directory_symlink(t.root, link);
  const std::vector<fs::path> spellings = {t.root, t.root / "", t.root / "." / "", link};
  for (const auto& other : spellings) {
    const SiteLock held(t.root);
    // Another open file description of the same directory cannot take the lock.
    const int fd = ::open(other.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0) << other;
    ::close(fd);
  }
  fs::remove(link);
  EXPECT_TRUE(fs::is_empty(t.root)) << "the lock left a file in the site";
  EXPECT_THROW(SiteLock(t.root / "missing"), ffpa::core::Error);
  EXPECT_FALSE(fs::exists(t.root / "missing"));
  { const SiteLock created(t.root / "new", true); }
  EXPECT_TRUE(fs::is_directory(t.root / "new"));
  EXPECT_TRUE(is_engine_temp(".index.json.tmp.Ab12Cd"));
  EXPECT_TRUE(is_engine_temp(".index.html.tmp.000000"));
  EXPECT_FALSE(is_engine_temp(".index.json.tmp.Ab12C"));
  EXPECT_FALSE(is_engine_temp(".env"));
}

// The engine lists only the URLs it derives from the page's release
// URL and the file name; every other url in index.json is refused at add and render
// and reported by verify.
TEST(SiteUrls, OnlyDerivedUrlsAreListed) {
  const std::string fn = "ffpa_attn-0.2.5+cu13-cp312-cp312-manylinux_2_28_x86_64.whl";
  ProjectPage page;
  page.name = "ffpa-attn";
  page.release_url = "https://h/dl/{tag}/";
  FileEntry e = entry(fn);
  derive_file_fields(e);
  EXPECT_EQ(derive_file_url(page.release_url, e), "https://h/dl/v0.2.5%2Bcu13/" + url_encode_segment(fn));
  const std::string good = derive_file_url(page.release_url, e);
  for (const std::string& bad : std::vector<std::string>{"https://evil.example/dl/v0.2.5%2Bcu13/" + url_encode_segment(fn),
                                 "//evil.example/" + url_encode_segment(fn), "https:\\\\h\\dl\\" + fn,
                                 std::string("https://h/dl/v0.2.5%2Bcu13/ffpa_attn-9.9.9%2Bcu13-cp312-cp312-manylinux_2_28_x86_64.whl"),
                                 good + "#sha256=" + std::string(64, 'b'), good + "?x=1", good + "/",
                                 "https://h/dl/v0.2.5+cu13/" + fn, "https://H/dl/v0.2.5%2Bcu13/" + url_encode_segment(fn)}) {
    ProjectPage p = page;
    FileEntry f = e;
    f.url = bad;
    p.insert(f);
    const auto problems = page_url_problems(p, "whl/cu13/ffpa-attn/index.json");
    ASSERT_EQ(problems.size(), 1u) << bad;
    EXPECT_NE(problems[0].find("not the '" + good + "' the engine derives"), std::string::npos) << problems[0];
  }
  ProjectPage ok = page;
  FileEntry f = e;
  f.url = good;
  ok.insert(f);
  EXPECT_TRUE(page_url_problems(ok, "x").empty());
  ok.release_url.clear();
  ASSERT_EQ(page_url_problems(ok, "x").size(), 1u);
  EXPECT_NE(page_url_problems(ok, "x")[0].find("records no release URL"), std::string::npos);
}

TEST(SiteUrls, ReleaseUrlsAreOneSpellingOfOnePlace) {
  for (const char* ok : {"https://github.com/o/r/releases/download/{tag}/", "http://127.0.0.1:8080/assets/{tag}",
                         "file:///srv/assets/{tag}/", "https://h/dl/"})
    EXPECT_EQ(release_url_problem(ok, false), "") << ok;
  EXPECT_EQ(release_url_problem("../../../assets/", true), "");
  for (const char* bad : {"//evil.example/dl/", "/dl/", "https://user@evil.example/dl/", "https://h/dl/?x=",
                          "https://h/dl/#frag", "https://h\\dl/", "https://h/dl/%2e%2e/", "https://h/a/../b/",
                          "https://h/a/./b/", "https://h//b/", "https:h/dl/", "HTTPS://h/dl/", "javascript:alert(1)",
                          "https://h/{tag}/{tag}/", "https://h/{x}/", "https://h/ dl/", "https://"})
    EXPECT_NE(release_url_problem(bad, false), "") << bad;
  EXPECT_NE(release_url_problem("../../../assets/", false), "");
  EXPECT_NE(release_url_problem("assets/../../x/", true), "");
}

// The host and port of a release URL are one spelling of one server (docs/release.md,
// "Release URLs"): ports 1-65535 in plain digits, no default port spelled out, host names
// of DNS labels in lower case without a trailing dot, "{tag}" only in the path.
TEST(SiteUrls, ReleaseUrlHostsAndPortsAreOneServer) {
  for (const char* ok : {"https://h:1/dl/{tag}/", "https://h:65535/dl/{tag}/", "http://h:443/dl/", "https://h:80/dl/",
                         "http://[::1]:8080/dl/", "https://a-b.example.org/{tag}/", "file://localhost/srv/{tag}/"})
    EXPECT_EQ(release_url_problem(ok, false), "") << ok;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"https://h:0/dl/", "is not a TCP port"},        {"https://h:99999/dl/", "is not a TCP port"},
      {"https://h:65536/dl/", "is not a TCP port"},    {"https://h:080/dl/", "is not a TCP port"},
      {"https://h:/dl/", "with no port"},              {"https://h:+80/dl/", "is not a TCP port"},
      {"https://h:443/dl/", "https's default"},        {"http://h:80/dl/", "http's default"},
      {"https://h./dl/", "ends in a dot"},             {"https://example.org./dl/{tag}/", "ends in a dot"},
      {"https://a..b/dl/", "empty label"},             {"https://.h/dl/", "empty label"},
      {"https://-h/dl/", "starting or ending with '-'"}, {"https://H/dl/", "upper-case"},
      {"https://{tag}.example.org/dl/", "\"{tag}\" is in the scheme or host"},
      {"https://h{tag}/dl/", "\"{tag}\" is in the scheme or host"},
      {"https://h:{tag}/dl/", "\"{tag}\" is in the scheme or host"},
      {"https://:8080/dl/", "no host name"},           {"https://[::1/dl/", "bracketed IPv6"},
      {"https://[::1]x/dl/", "text after the IPv6"},   {"https://" + std::string(64, 'a') + ".org/dl/", "63"}};
  for (const auto& [url, why] : bad) {
    const std::string p = release_url_problem(url, false);
    EXPECT_NE(p.find(why), std::string::npos) << url << ": '" << p << "'";
  }
}

// The index prefix and the channel are one name each, so channels cannot nest
// (docs/release.md, "Channels and the index prefix").
TEST(SitePaths, PrefixAndChannelAreOneName) {
  for (const char* ok : {"whl", "cu13", "simple", "a_b-c.d"}) EXPECT_NO_THROW(check_index_path(ok, "--channel")) << ok;
  for (const char* nested : {"cu13/x", "whl/cu13", "a/b/c"}) {
    try {
      check_index_path(nested, "--index-prefix");
      ADD_FAILURE() << nested << " accepted";
    } catch (const ffpa::core::Error& e) {
      EXPECT_NE(std::string(e.what()).find("has several parts"), std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"", "/abs", "..", "cu13/", ".git", "x/.hidden", "a b"}) {
    try {
      check_index_path(bad, "--channel");
      ADD_FAILURE() << bad << " accepted";
    } catch (const ffpa::core::Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not a relative path of plain names"), std::string::npos) << e.what();
    }
  }
}

TEST(SiteIndex, AddAndRenderRefuseForeignUrlsAndWriteNothing) {
  TempSite t("urls");
  IndexLocation loc{t.root, "whl", "cu13"};
  const std::string fn = "ffpa_attn-0.2.5+cu13-cp312-cp312-manylinux_2_28_x86_64.whl";
  ProjectPage page;
  page.name = "ffpa-attn";
  page.release_url = "https://h/dl/{tag}/";
  FileEntry e = entry(fn);
  derive_file_fields(e);
  e.url = "https://evil.example/" + url_encode_segment(fn);
  page.insert(e);
  page.refresh_versions();
  std::filesystem::create_directories(loc.project_dir("ffpa-attn"));
  const std::string text = to_json(page).dump(1) + "\n";
  std::ofstream(loc.project_dir("ffpa-attn") / "index.json") << text;
  const SiteLock lock(t.root);
  std::ostringstream log;
  EXPECT_THROW(render_all(loc, std::nullopt, log, lock), ffpa::core::Error);
  // Pointing the channel elsewhere does not launder the foreign entry either.
  EXPECT_THROW(render_all(loc, std::string("https://h/dl/{tag}/"), log, lock), ffpa::core::Error);
  const PreparedWheel w = prepared("ffpa_attn-0.2.6+cu13-cp312-cp312-manylinux_2_28_x86_64.whl");
  AddOptions opt;
  opt.release_url = "https://h/dl/{tag}/";
  try {
    plan_add(loc, {w}, opt);
    FAIL() << "add accepted a page listing a foreign URL";
  } catch (const ffpa::core::Error& err) {
    EXPECT_NE(std::string(err.what()).find("https://evil.example/"), std::string::npos) << err.what();
  }
  EXPECT_FALSE(std::filesystem::exists(loc.project_dir("ffpa-attn") / "index.html"));
  // Repaired, add derives every URL and refuses another release URL.
  page.files[0].url = derive_file_url(page.release_url, page.files[0]);
  std::ofstream(loc.project_dir("ffpa-attn") / "index.json") << to_json(page).dump(1) + "\n";
  const IndexPlan plan = plan_add(loc, {w}, opt);
  const auto written = nlohmann::json::parse(plan.writes.at(0).second);
  EXPECT_EQ(written["_ffpa-release-url"], "https://h/dl/{tag}/");
  for (const auto& f : written["files"])
    EXPECT_EQ(f["url"].get<std::string>().rfind("https://h/dl/v0.2.", 0), 0u) << f;
  opt.release_url = "https://h/other/{tag}/";
  EXPECT_THROW(plan_add(loc, {w}, opt), ffpa::core::Error);
}
