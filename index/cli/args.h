// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The one grammar of every ffpa-index command: "--flag VALUE" or "--flag=VALUE",
// boolean flags, flags that repeat or take a list of words, and positional words.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ffpa::cli {

// A command line the command cannot run; main() adds "see ffpa-index <cmd> --help".
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  enum Kind {
    kValue,     // one value, given once
    kRepeated,  // one value each time, any number of times
    kList,      // every following word up to the next flag (at least one)
    kFlag,      // no value
  };
  // argv[0] is the command. "--help"/"-h" anywhere asks for its help; any other word
  // starting with "--" that `flags` does not list is a UsageError, as are a missing
  // value and a value given twice. Other words are positional.
  Args(int argc, char** argv, const std::map<std::string, Kind>& flags);
  bool help() const { return help_; }
  std::optional<std::string> get(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& fallback) const;
  // The value, or a UsageError "<flag> ... is required" naming `what` it is.
  std::string need(const std::string& flag, const std::string& what) const;
  std::vector<std::string> all(const std::string& flag) const;
  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  const std::vector<std::string>& positional() const { return positional_; }
  void no_positional() const;  // a UsageError naming the first positional word

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// One command of ffpa-index: what --help prints, the flags it takes, what runs it.
struct Command {
  const char* name;
  const char* help;
  std::map<std::string, Args::Kind> flags;
  std::function<int(const Args&)> run;  // the exit status; UsageError and Error are reported by main()
};

// The index and publishing commands (site_commands.cpp): add, remove, yank, unyank,
// verify, render, publish, publish-pure.
std::vector<Command> site_commands();

}  // namespace ffpa::cli
