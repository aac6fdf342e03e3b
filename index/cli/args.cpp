// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "args.h"

#include "ffpa/core/utf8.h"

namespace ffpa::cli {

Args::Args(int argc, char** argv, const std::map<std::string, Kind>& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::optional<std::string> inline_value;
    if (auto eq = a.find('='); eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a.resize(eq);
    }
    const auto kind = flags.find(a);
    if (kind == flags.end()) throw UsageError("unknown option " + core::printable(a));
    auto& v = values_[a];
    if (kind->second == kFlag) {
      if (inline_value) throw UsageError(a + " takes no value");
      continue;
    }
    if (kind->second == kValue && !v.empty()) throw UsageError(a + " given more than once");
    const std::size_t before = v.size();
    if (inline_value) v.push_back(*inline_value);
    else if (kind->second != kList && i + 1 < argc) v.push_back(argv[++i]);
    while (kind->second == kList && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) v.push_back(argv[++i]);
    if (v.size() == before) throw UsageError(a + (kind->second == kList ? " needs at least one value" : " needs a value"));
  }
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
  return get(flag).value_or(fallback);
}

std::string Args::need(const std::string& flag, const std::string& what) const {
  if (auto v = get(flag)) return *v;
  throw UsageError(flag + " " + what + " is required");
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

void Args::no_positional() const {
  if (!positional_.empty()) throw UsageError("unexpected argument '" + core::printable(positional_.front()) + "'");
}

}  // namespace ffpa::cli
