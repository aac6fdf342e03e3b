// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// ffpa-index: command-line front end of the release engine.
#include <iostream>
#include <string>

#include "ffpa/core/error.h"
#include "ffpa/core/wheel.h"

#ifdef FFPA_HAVE_SITE
#include "ffpa/site/site.h"
#endif

namespace {

int verify_wheel_cmd(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: ffpa-index verify-wheel WHEEL...\n";
    return 2;
  }
  int rc = 0;
  for (int i = 2; i < argc; ++i) {
    auto r = ffpa::core::verify_wheel(argv[i]);
    if (r.ok) {
      std::cout << argv[i] << ": OK\n";
    } else {
      rc = 1;
      std::cout << argv[i] << ": " << r.problems.size() << " problem(s)\n";
      for (const auto& p : r.problems) std::cout << "  - " << p << "\n";
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: ffpa-index <command> [args]; see ffpa-index --help\n";
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "verify-wheel") return verify_wheel_cmd(argc, argv);
  } catch (const ffpa::core::Error& e) {
    std::cerr << "ffpa-index " << cmd << ": error: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "ffpa-index: unknown command '" << cmd << "'; see ffpa-index --help\n";
  return 2;
}
