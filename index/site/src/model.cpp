// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/site/index.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/utf8.h"

namespace ffpa::site {

using nlohmann::json;
using core::Error;

// Where `filename` is, or would be, in the sorted files.
static std::vector<FileEntry>::iterator position(std::vector<FileEntry>& files, std::string_view filename) {
  return std::lower_bound(files.begin(), files.end(), filename,
                          [](const FileEntry& e, std::string_view f) { return e.filename < f; });
}

FileEntry* ProjectPage::find(std::string_view filename) {
  auto it = position(files, filename);
  return (it != files.end() && it->filename == filename) ? &*it : nullptr;
}

bool derive_file_fields(FileEntry& e) {
  auto wf = core::parse_wheel_filename(e.filename);
  if (!wf) return false;
  // A page lists each version once per tag set (five or more files): its parse is
  // done once. The engine is single-threaded; the cache lives as long as the process.
  static std::map<std::string, std::pair<std::string, std::string>> parsed;  // version -> canonical, key
  auto it = parsed.find(wf->version);
  if (it == parsed.end()) {
    auto v = core::parse_pep440(wf->version);
    if (!v) return false;
    it = parsed.emplace(wf->version, std::make_pair(v->canonical, core::version_identity(*v))).first;
  }
  e.project = core::normalize_project_name(wf->name);
  e.canonical_version = it->second.first;
  e.version_key = it->second.second;
  e.identity = e.project + '\0' + e.version_key + '\0' + wf->python + '-' + wf->abi + '-' + wf->platform;
  return true;
}

void ProjectPage::insert(FileEntry e) {
  if (e.identity.empty()) derive_file_fields(e);
  files.insert(position(files, e.filename), std::move(e));
}

void ProjectPage::refresh_versions() {
  std::set<std::string> present, kept;
  for (const auto& f : files) present.insert(f.canonical_version);
  std::vector<std::string> out;
  auto keep = [&](const std::string& v) {
    if (!v.empty() && present.count(v) && kept.insert(v).second) out.push_back(v);
  };
  for (const auto& v : versions) keep(v);
  for (const auto& f : files) keep(f.canonical_version);
  versions = std::move(out);
}

json to_json(const ProjectPage& page) {
  json files = json::array();
  for (const auto& f : page.files) {
    json e = {{"filename", f.filename}, {"url", f.url}, {"hashes", {{"sha256", f.sha256}}}};
    if (!f.requires_python.empty()) e["requires-python"] = f.requires_python;
    // PEP 714: "core-metadata" is the name; "dist-info-metadata" is kept for clients
    // that predate it. Both say the same thing.
    json md = f.core_metadata_sha256 ? json{{"sha256", *f.core_metadata_sha256}} : json(false);
    e["core-metadata"] = md;
    e["dist-info-metadata"] = md;
    e["yanked"] = f.yanked ? (f.yanked->empty() ? json(true) : json(*f.yanked)) : json(false);
    if (f.size) e["size"] = *f.size;
    files.push_back(std::move(e));
  }
  json j = {{"meta", {{"api-version", kApiVersion}}},
            {"name", page.name},
            {"versions", page.versions},
            {"files", std::move(files)}};
  if (!page.release_url.empty()) j["_ffpa-release-url"] = page.release_url;
  return j;
}

static const json& need(const json& j, const char* key, std::string_view origin) {
  if (!j.is_object() || !j.contains(key))
    throw Error(std::string(origin) + ": missing \"" + key +
                "\"; the file is not a PEP 691 project page (restore it from git history)");
  return j.at(key);
}

ProjectPage project_from_json(const json& j, std::string_view origin) {
  ProjectPage p;
  auto bad = [&](const std::string& what) { return Error(std::string(origin) + ": " + what); };
  try {
    p.name = need(j, "name", origin).get<std::string>();
    const auto& meta = need(j, "meta", origin);
    const std::string api = need(meta, "api-version", origin).get<std::string>();
    if (!api.starts_with("1.")) throw bad("api-version " + api + " is not 1.x; this ffpa-index only reads PEP 691 v1");
    if (j.contains("_ffpa-release-url")) {
      p.release_url = j["_ffpa-release-url"].get<std::string>();
      if (const std::string why = release_url_problem(p.release_url, true); !why.empty())
        throw bad("its release URL '" + core::printable(p.release_url) + "' is refused (" + why +
                  "); restore the page from git history");
    }
    for (const auto& e : need(j, "files", origin)) {
      FileEntry f;
      f.filename = need(e, "filename", origin).get<std::string>();
      f.url = need(e, "url", origin).get<std::string>();
      f.sha256 = need(need(e, "hashes", origin), "sha256", origin).get<std::string>();
      if (e.contains("requires-python")) {
        // pip reads it as a specifier set and skips (or fails on) anything else.
        if (!e["requires-python"].is_string() ||
            !core::is_valid_specifier_set(f.requires_python = e["requires-python"].get<std::string>()))
          throw bad("requires-python of '" + need(e, "filename", origin).dump() + "' is not a PEP 440 specifier set (" +
                    e["requires-python"].dump() + "); restore the entry from git history");
      }
      const json* md = e.contains("core-metadata")        ? &e["core-metadata"]
                       : e.contains("dist-info-metadata") ? &e["dist-info-metadata"] : nullptr;
      if (md && md->is_object() && md->contains("sha256"))
        f.core_metadata_sha256 = (*md)["sha256"].get<std::string>();
      if (e.contains("yanked")) {
        const auto& y = e["yanked"];
        if (y.is_string()) f.yanked = y.get<std::string>();
        else if (y.is_boolean() && y.get<bool>()) f.yanked = std::string();
        else if (!y.is_boolean())
          throw bad("yanked of '" + need(e, "filename", origin).dump() + "' is " + y.dump() +
                    ", not true, false or a reason (PEP 592); restore the entry from git history");
        if (f.yanked)
          if (const std::string why = core::terminal_text_problem(*f.yanked); !why.empty())
            throw bad("the yank reason of '" + need(e, "filename", origin).dump() + "' " + why +
                      "; pip prints it as is: unyank and yank again with a plain --reason");
      }
      if (e.contains("size")) {
        if (!e["size"].is_number_unsigned())
          throw bad("size of '" + f.filename + "' is not a byte count; restore the entry from git history");
        f.size = e["size"].get<std::uint64_t>();
      }
      if (!derive_file_fields(f))
        throw bad("listed file '" + f.filename + "' is not a wheel file name; remove the entry or restore the file "
                  "from git");
      if (const std::string why = url_problem(f.url, false); !why.empty())
        throw bad("url of '" + f.filename + "' is refused (" + why + "); restore the entry from git history");
      if (!core::is_sha256_hex(f.sha256) || (f.core_metadata_sha256 && !core::is_sha256_hex(*f.core_metadata_sha256)))
        throw bad("a sha256 of '" + f.filename +
                  "' is not 64 lower-case hex digits; restore the entry from git history");
      if (p.find(f.filename)) throw bad("'" + f.filename + "' is listed twice");
      p.insert(std::move(f));
    }
    if (j.contains("versions") && j["versions"].is_array())
      p.versions = j["versions"].get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw bad(std::string("malformed project page: ") + e.what() + " (restore it from git history)");
  }
  p.refresh_versions();
  return p;
}

std::string root_json(const std::vector<std::string>& projects) {
  json list = json::array();
  for (const auto& n : projects) list.push_back({{"name", n}});
  return json{{"meta", {{"api-version", kApiVersion}}}, {"projects", list}}.dump(1) + "\n";
}

std::string url_problem(std::string_view url, bool absolute) {
  if (url.empty()) return "empty URL";
  for (unsigned char c : url) {
    if (c <= 0x20 || c == 0x7f)
      return "it contains whitespace or a control character, which browsers and pip strip or cut at";
    if (c >= 0x80) return "it contains a byte outside ASCII; percent-encode it";
  }
  // RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":".
  const std::size_t i = url.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
  const bool has_scheme = i > 0 && i < url.size() && url[i] == ':' && std::isalpha(static_cast<unsigned char>(url[0]));
  if (!has_scheme) return absolute ? "not an absolute URL; give http(s)://... or file://..." : "";
  const std::string scheme = core::lower_ascii(url.substr(0, i));
  if (scheme != "http" && scheme != "https" && scheme != "file")
    return "a " + scheme + ": URL; anchors may only be http, https or file URLs";
  return "";
}

namespace {

// Why `authority` (host[:port] of a release URL, no userinfo) is not the one spelling of
// one server, or "": a host name of dot-separated labels (letters, digits, '-', none
// empty, so no trailing dot: "h." and "h" are one host spelled twice) in lower case
// (hosts are case-insensitive), or a bracketed IPv6 literal; a port, when given, 1 to
// 65535 in plain digits and not the scheme's default (":443" on https is "" spelled
// again).
std::string authority_problem(const std::string& authority, const std::string& scheme) {
  std::string host = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string::npos || close == 1 ||
        authority.find_first_not_of("0123456789abcdef:.", 1) != close)
      return "its host '" + authority + "' is not a bracketed IPv6 address in lower case ([::1])";
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return "its host '" + authority + "' has text after the IPv6 address";
      port = authority.substr(close + 2);
      if (port.empty()) return "its host '" + authority + "' ends in ':' with no port; leave the ':' out";
    }
  } else {
    if (const std::size_t colon = authority.find(':'); colon != std::string::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) return "its host '" + authority + "' ends in ':' with no port; leave the ':' out";
    }
    if (host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != std::string::npos)
      return "its host '" + authority + "' is not a plain host name[:port]";
    if (host.empty()) return "its host '" + authority + "' has a port but no host name";
    if (host.size() > 253) return "its host name is longer than DNS allows (253 characters)";
    if (host.back() == '.')
      return "its host '" + host + "' ends in a dot: '" + host + "' and '" + host.substr(0, host.size() - 1) +
             "' are one server spelled two ways; write it without the dot";
    for (const auto& label : core::split(host, '.')) {
      if (label.empty()) return "its host '" + host + "' has an empty label ('..' or a leading '.')";
      if (label.size() > 63) return "its host '" + host + "' has a label longer than DNS allows (63 characters)";
      if (label.front() == '-' || label.back() == '-')
        return "its host '" + host + "' has a label starting or ending with '-', which DNS does not allow";
    }
    if (core::lower_ascii(host) != host)
      return "its host '" + host + "' has upper-case letters: host names are case-insensitive, so write it in lower "
             "case ('" + core::lower_ascii(host) + "'), the one spelling";
  }
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || port.front() == '0' ||
        std::stoul(port) > 65535)
      return "its port '" + port + "' is not a TCP port (1 to 65535, no leading zero); write the server's port";
    // A scheme's default port written out is a second spelling of the same server.
    const std::string_view default_port = scheme == "https" ? "443" : scheme == "http" ? "80" : "";
    if (port == default_port)
      return "its port " + port + " is " + scheme + "'s default: leave ':" + port + "' out, the one spelling";
  }
  return "";
}

}  // namespace

std::string release_url_problem(std::string_view url, bool relative_ok) {
  const std::size_t tag = url.find("{tag}");
  std::string plain(url);
  if (tag != std::string_view::npos) plain.replace(tag, 5, "v1");
  if (std::string why = url_problem(plain, !relative_ok); !why.empty()) return why;
  if (plain.find_first_of("{}") != std::string::npos) return "'{' and '}' only appear as the one \"{tag}\"";
  for (const char c : plain) {
    if (c == '?' || c == '#')
      return std::string("it has a ") + (c == '?' ? "query" : "fragment") +
             " ('" + c + "'): the file name would follow it, and pip reads the first '#sha256=' it meets";
    if (c == '\\') return "it contains a backslash, which browsers and pip read as '/'";
    if (c == '%') return "it contains percent-encoding; write the URL plainly (the engine encodes the tag and file name)";
    if (c == '"' || c == '<' || c == '>' || c == '`' || c == '^' || c == '|') return std::string("it contains '") + c + "'";
  }
  std::size_t path = 0;
  const std::size_t colon = plain.find(':');
  if (colon != std::string::npos && plain.find('/') > colon) {  // scheme:
    const std::string scheme = core::lower_ascii(plain.substr(0, colon));
    if (plain.compare(colon, 3, "://") != 0 || scheme != plain.substr(0, colon))
      return "not of the form http(s)://host/path/ or file:///path/ (lower-case scheme, then \"://\")";
    const std::size_t host = colon + 3, end = plain.find('/', host);
    if (end == std::string::npos) return "no path after the host; end the URL with '/'";
    if (tag != std::string_view::npos && tag < end)
      return "\"{tag}\" is in the scheme or host: each release would be fetched from another server; only the "
             "path varies, e.g. https://host/releases/download/{tag}/";
    const std::string authority = plain.substr(host, end - host);
    if (authority.find('@') != std::string::npos)
      return "it has userinfo ('@' before the host), which hides the real host from readers";
    if (scheme != "file" && authority.empty()) return "no host";
    if (!authority.empty())
      if (std::string why = authority_problem(authority, scheme); !why.empty()) return why;
    path = end + 1;
  } else if (!plain.empty() && plain.front() == '/') {
    return "a relative release URL is a path such as ../../../assets/, not starting with '/' (scheme-relative or "
           "host-relative URLs point wherever the page is served from)";
  }
  // Path segments: none empty, and '.' / '..' only in a relative URL's leading part.
  bool leading = colon == std::string::npos || plain.find('/') < colon;
  for (std::size_t at = path; at < plain.size();) {
    const std::size_t slash = plain.find('/', at);
    const std::string seg = plain.substr(at, (slash == std::string::npos ? plain.size() : slash) - at);
    if (slash == std::string::npos && seg.empty()) break;
    if (seg.empty()) return "it has an empty path segment ('//')";
    if (seg == "..") {
      if (!leading) return "it has a '..' path segment past the start of a relative path";
    } else if (seg == ".") {
      return "it has a '.' path segment";
    } else {
      leading = false;
    }
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  return "";
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string url_encode_segment(std::string_view s) {
  const auto unreserved = [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';  // RFC 3986
  };
  return core::escape_bytes(s, unreserved, "%", "0123456789ABCDEF");
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The start both pages share, up to <body>; `source` says what the page is generated from.
static std::string page_start(const std::string& source, const std::string& title) {
  return "<!DOCTYPE html>\n<!-- auto-generated by ffpa-index" + source + ", do not edit -->\n<html>\n<head>\n"
         "<meta name=\"pypi:repository-version\" content=\"" + std::string(kApiVersion) + "\">\n<title>" + title +
         "</title>\n</head>\n<body>\n";
}

std::string render_project_html(const ProjectPage& page) {
  std::string out = page_start(" from index.json beside it", "Links for " + html_escape(page.name));
  out += "<h1>Links for " + html_escape(page.name) + "</h1>\n";
  for (const auto& f : page.files) {
    out += "<a href=\"" + html_escape(f.url + "#sha256=" + f.sha256) + '"';
    if (!f.requires_python.empty()) out += " data-requires-python=\"" + html_escape(f.requires_python) + '"';
    if (f.core_metadata_sha256) {
      const std::string v = html_escape("sha256=" + *f.core_metadata_sha256);
      out += " data-core-metadata=\"" + v + "\" data-dist-info-metadata=\"" + v + '"';
    }
    if (f.yanked) out += " data-yanked=\"" + html_escape(*f.yanked) + '"';
    out += '>' + html_escape(f.filename) + "</a><br>\n";
  }
  return out + "</body>\n</html>\n";
}

std::string render_root_html(const std::vector<std::string>& projects) {
  std::string out = page_start("", "Simple index");
  for (const auto& n : projects)
    out += "<a href=\"" + html_escape(url_encode_segment(n)) + "/\">" + html_escape(n) + "</a><br>\n";
  return out + "</body>\n</html>\n";
}

// --- legacy page import -------------------------------------------------------

// The character references of a legacy page: the named ones html_escape writes (and
// &apos;) and numeric ones below 0x80; anything else stays as it is.
static std::string html_unescape(std::string_view s) {
  static const std::pair<std::string_view, char> kNamed[] = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::size_t semi = s[i] == '&' ? s.find(';', i) : std::string_view::npos;
    const std::string_view ent = semi == std::string_view::npos || semi - i > 10 ? "" : s.substr(i + 1, semi - i - 1);
    int c = -1;
    for (const auto& [name, ch] : kNamed)
      if (ent == name) c = ch;
    if (ent.size() > 1 && ent[0] == '#') {
      const bool hex = ent[1] == 'x' || ent[1] == 'X';
      const std::string digits(ent.substr(hex ? 2 : 1));
      char* end = nullptr;
      const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (end != digits.c_str() && cp < 0x80) c = static_cast<int>(cp);
    }
    if (c < 0) {
      out += s[i];
    } else {
      out += static_cast<char>(c);
      i = semi;
    }
  }
  return out;
}

std::vector<LegacyAnchor> parse_anchors(std::string_view html) {
  std::vector<LegacyAnchor> out;
  std::size_t pos = 0;
  while ((pos = html.find('<', pos)) != std::string_view::npos) {
    if (!(core::lower_ascii(html.substr(pos, 2)) == "<a" && pos + 2 < html.size() &&
          std::isspace(static_cast<unsigned char>(html[pos + 2])))) {
      ++pos;
      continue;
    }
    std::size_t i = pos + 2;
    LegacyAnchor a;
    // Attributes up to the closing '>' of the start tag.
    while (i < html.size() && html[i] != '>') {
      while (i < html.size() && std::isspace(static_cast<unsigned char>(html[i]))) ++i;
      std::size_t k = i;
      while (k < html.size() && html[k] != '=' && html[k] != '>' && !std::isspace(static_cast<unsigned char>(html[k])))
        ++k;
      const std::string key = core::lower_ascii(html.substr(i, k - i));
      std::optional<std::string> value;
      i = k;
      if (i < html.size() && html[i] == '=') {
        ++i;
        if (i < html.size() && (html[i] == '"' || html[i] == '\'')) {
          const char q = html[i];
          const auto end = html.find(q, i + 1);
          if (end == std::string_view::npos) return out;
          value = html_unescape(html.substr(i + 1, end - i - 1));
          i = end + 1;
        } else {
          std::size_t e = i;
          while (e < html.size() && html[e] != '>' && !std::isspace(static_cast<unsigned char>(html[e]))) ++e;
          value = html_unescape(html.substr(i, e - i));
          i = e;
        }
      }
      if (key == "href" && value) a.href = *value;
      else if (key == "data-requires-python" && value) a.requires_python = *value;
      else if (key == "data-yanked") a.yanked = value.value_or("");
      else if ((key == "data-core-metadata" || key == "data-dist-info-metadata") && !a.core_metadata)
        a.core_metadata = value.value_or("true");
      if (key.empty() && i < html.size() && html[i] != '>') ++i;
    }
    const auto close = html.find("</a>", i);
    const auto close_up = html.find("</A>", i);
    const auto endtext = std::min(close, close_up);
    if (i >= html.size() || endtext == std::string_view::npos) break;
    a.text = html_unescape(html.substr(i + 1, endtext - i - 1));
    const auto hash = a.href.find('#');
    if (hash != std::string::npos) {
      const std::string frag = a.href.substr(hash + 1);
      if (frag.rfind("sha256=", 0) == 0) a.sha256 = frag.substr(7);
      a.href.resize(hash);
    }
    out.push_back(std::move(a));
    pos = endtext + 4;
  }
  return out;
}

}  // namespace ffpa::site
