// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// A small argv parser for the subcommands: "--flag VALUE", "--flag=VALUE", boolean
// flags, and multi-valued flags that take every following word up to the next flag.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ffpa::site {

class Args {
 public:
  // `single`: flags taking one value; `multi`: flags taking one or more; `boolean`:
  // flags taking none. Anything else starting with "--" is a usage error; other words
  // are positional. Throws UsageError.
  Args(int argc, char** argv, std::set<std::string> single, std::set<std::string> multi,
       std::set<std::string> boolean);
  std::optional<std::string> get(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& def) const;
  std::vector<std::string> all(const std::string& flag) const;
  bool has(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> present_;
  std::vector<std::string> positional_;
};

struct UsageError : std::exception {
  explicit UsageError(std::string m) : msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
  std::string msg;
};

}  // namespace ffpa::site
