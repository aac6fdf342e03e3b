// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/site/publish.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ffpa/core/error.h"
#include "ffpa/core/utf8.h"

namespace ffpa::site {

ProcResult run_process(const std::vector<std::string>& argv) {
  ProcResult r;
  if (argv.empty()) return r;
  // The child writes its output into two anonymous files, read once it has exited: no
  // pipe can fill up and stall it, and a background process it leaves holding them
  // open does not stall us.
  const int out = ::memfd_create("ffpa-out", MFD_CLOEXEC), err = ::memfd_create("ffpa-err", MFD_CLOEXEC);
  // Built before fork(): between fork and exec a threaded process's child may not allocate.
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::string cannot_run = "cannot run " + argv[0] + ": ";
  const pid_t pid = out < 0 || err < 0 ? -1 : ::fork();
  if (pid == 0) {
    const int null_in = ::open("/dev/null", O_RDONLY);  // no tool may wait for input
    ::dup2(null_in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execvp(cargv[0], cargv.data());
    const char* why = std::strerror(errno);
    (void)!::write(2, cannot_run.data(), cannot_run.size());
    (void)!::write(2, why, std::strlen(why));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  const std::string why = std::strerror(errno);
  int st = 0;
  while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  for (auto [fd, sink] : {std::pair{out, &r.out}, std::pair{err, &r.err}}) {
    char buf[65536];
    for (ssize_t n; fd >= 0 && (n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(sink->size()))) > 0;)
      sink->append(buf, static_cast<std::size_t>(n));
    if (fd >= 0) ::close(fd);
  }
  if (pid < 0) {
    r.status = 127;
    r.err = "cannot start " + argv[0] + ": " + why;
    return r;
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789-_./:=@,+%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

std::string find_program(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = std::getenv("PATH");
  for (const auto& dir : core::split(path ? path : "/usr/bin:/bin", ':'))
    if (const std::string cand = (dir.empty() ? "." : dir) + "/" + name; access(cand.c_str(), X_OK) == 0) return cand;
  return {};
}

TempDir::TempDir(const std::string& prefix) {
  std::error_code ec;
  const auto base = std::filesystem::temp_directory_path(ec);
  if (ec)
    throw core::Error("no directory for scratch files (" + ec.message() +
                            "); point TMPDIR at an existing, writable directory");
  std::string tmpl = (base / (prefix + "XXXXXX")).string();
  if (!mkdtemp(tmpl.data()))
    throw core::Error("cannot create a scratch directory " + tmpl + ": " + std::strerror(errno) +
                            "; point TMPDIR at a writable directory");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string unwritable_dir_problem(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  while (!p.empty() && !fs::exists(fs::symlink_status(p, ec)) && p != p.root_path()) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    return dir.string() + " cannot be created: " + p.string() + " is not a directory; move that file away";
  if (access(p.c_str(), W_OK | X_OK) != 0)
    return (p == fs::absolute(dir, ec).lexically_normal() ? dir.string() : p.string() + " (the nearest existing "
            "parent of " + dir.string() + ")") + " is not writable (" + std::strerror(errno) +
           "); fix its permissions or choose another place";
  return {};
}

std::string tool_program(const char* env_var, const char* default_name) {
  const char* v = std::getenv(env_var);
  return (v && *v) ? std::string(v) : std::string(default_name);
}

}  // namespace ffpa::site
