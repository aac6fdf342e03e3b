// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/site/args.h"

namespace ffpa::site {

Args::Args(int argc, char** argv, std::set<std::string> single, std::set<std::string> multi,
           std::set<std::string> boolean) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::optional<std::string> inline_value;
    if (auto eq = a.find('='); eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    present_.insert(a);
    if (boolean.count(a)) {
      if (inline_value) throw UsageError(a + " takes no value");
      continue;
    }
    if (single.count(a)) {
      if (inline_value) {
        values_[a] = {*inline_value};
      } else {
        if (i + 1 >= argc) throw UsageError(a + " needs a value");
        values_[a] = {argv[++i]};
      }
      continue;
    }
    if (multi.count(a)) {
      auto& v = values_[a];
      if (inline_value) v.push_back(*inline_value);
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) v.push_back(argv[++i]);
      if (v.empty()) throw UsageError(a + " needs at least one value");
      continue;
    }
    throw UsageError("unknown option " + a);
  }
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string Args::get_or(const std::string& flag, const std::string& def) const {
  return get(flag).value_or(def);
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

bool Args::has(const std::string& flag) const { return present_.count(flag) > 0; }

}  // namespace ffpa::site
