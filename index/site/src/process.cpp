// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/site/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "ffpa/core/error.h"

namespace ffpa::site {

ProcResult run_process(const std::vector<std::string>& argv) {
  ProcResult r;
  if (argv.empty()) return r;
  int out_p[2], err_p[2];
  if (pipe(out_p) != 0 || pipe(err_p) != 0) {
    r.status = 127;
    r.err = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null_in = open("/dev/null", O_RDONLY);  // no tool may wait for input
    dup2(null_in, 0);
    dup2(out_p[1], 1);
    dup2(err_p[1], 2);
    for (int fd : {null_in, out_p[0], out_p[1], err_p[0], err_p[1]}) close(fd);
    execvp(cargv[0], cargv.data());
    const std::string msg = std::string("cannot run ") + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(2, msg.data(), msg.size());
    _exit(127);
  }
  close(out_p[1]);
  close(err_p[1]);
  if (pid < 0) {
    close(out_p[0]);
    close(err_p[0]);
    r.status = 127;
    r.err = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  pollfd fds[2] = {{out_p[0], POLLIN, 0}, {err_p[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
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
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
  }
  return {};
}

TempDir::TempDir(const std::string& prefix) {
  std::error_code ec;
  const auto base = std::filesystem::temp_directory_path(ec);
  if (ec)
    throw core::Error("no directory for scratch files (" + ec.message() +
                            "); point TMPDIR at an existing, writable directory");
  std::string tmpl = (base / (prefix + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw core::Error("cannot create a scratch directory " + tmpl + ": " + std::strerror(errno) +
                            "; point TMPDIR at a writable directory");
  path_ = buf.data();
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
