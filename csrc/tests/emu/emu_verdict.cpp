// The emulator drivers' verdicts (emu_state.h): breakage runs in a child process and the
// run's count checked against --expect. Shared by ffpa_emulate_kernels and
// ffpa_sanitize_kernels.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "emu_state.h"

namespace emu {

bool breakage_run(const std::string& label, bool want_pass, const std::function<bool()>& run) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) std::_Exit(run() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const bool as_wanted = passed == want_pass;
  std::printf("[%s] %s -> %s\n", as_wanted ? (want_pass ? "PASS" : "CAUGHT") : "MISSED", label.c_str(),
              passed ? "passed" : "failed");
  std::fflush(stdout);
  return as_wanted;
}

long g_expect_cases = -1;

int verdict(const char* what, long total, long bad, const char* bad_word, bool primary) {
  std::printf("%ld %s, %ld %s\n", total, what, bad, bad_word);
  std::fflush(stdout);
  if (total == 0) {
    std::fprintf(stderr, "FAIL: no %s ran: a run of zero cases proves nothing (check the head dims and options)\n", what);
    return 1;
  }
  if (primary && g_expect_cases >= 0 && total != g_expect_cases) {
    std::fprintf(stderr,
                 "FAIL: %ld %s ran where --expect says %ld: the case table or the arguments changed; update the "
                 "count where the test is registered (csrc/CMakeLists.txt, csrc/tests/*.cmake)\n",
                 total, what, g_expect_cases);
    return 1;
  }
  return bad ? 1 : 0;
}

}  // namespace emu
