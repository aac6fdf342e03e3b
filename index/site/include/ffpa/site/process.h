// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Running the external tools the backends drive (git, gh, twine, curl): argv
// vectors, never a shell, so file names with odd characters cannot inject anything.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ffpa::site {

struct ProcResult {
  int status = -1;       // exit status; 127 when the program could not be started
  std::string out, err;  // captured stdout and stderr
};

// Runs argv with stdin from /dev/null and captures its output.
ProcResult run_process(const std::vector<std::string>& argv);

// POSIX shell quoting, so a printed command can be pasted as is.
std::string shell_quote(const std::string& s);
std::string format_command(const std::vector<std::string>& argv);

// The program as it would be run: absolute/relative paths kept, bare names searched
// in PATH. Empty when not found.
std::string find_program(const std::string& name);

// A fresh private directory under $TMPDIR (mkdtemp), removed with its contents by
// the destructor, so scratch files of a run never pile up across runs.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Why files cannot be created in directory `dir` (empty when they can): the nearest
// existing ancestor is not a directory, or is not writable. Read-only: nothing is
// created, so preflight can ask it of every place a later step writes to.
std::string unwritable_dir_problem(const std::filesystem::path& dir);

// Program to use for `tool`: the environment override (e.g. FFPA_GH) if set, else
// the bare name.
std::string tool_program(const char* env_var, const char* default_name);

}  // namespace ffpa::site
