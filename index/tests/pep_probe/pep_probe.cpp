// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Test helper for pep_vs_packaging.py: reads one case per line from stdin and
// prints 1 or 0 per line, so the engine's PEP 440/508 checks can be compared with
// packaging's on the same strings. Not installed.
//   pep_probe spec      line: a specifier set        -> is_valid_specifier_set
//   pep_probe req       line: a requirement          -> is_valid_requirement
//   pep_probe same      line: "A|B"                  -> same_version(A, B)
//   pep_probe canonical line: a version              -> canonical_version, or "!"
#include <iostream>
#include <string>

#include "ffpa/core/pep.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pep_probe spec|req|same|canonical < cases\n";
    return 2;
  }
  const std::string kind = argv[1];
  std::string line;
  while (std::getline(std::cin, line)) {
    if (kind == "spec") std::cout << ffpa::core::is_valid_specifier_set(line) << "\n";
    else if (kind == "req") std::cout << ffpa::core::is_valid_requirement(line) << "\n";
    else if (kind == "same") {
      const size_t bar = line.find('|');
      std::cout << ffpa::core::same_version(line.substr(0, bar), line.substr(bar + 1)) << "\n";
    } else if (kind == "canonical") {
      std::cout << ffpa::core::canonical_version(line).value_or("!") << "\n";
    } else {
      std::cerr << "pep_probe: unknown kind '" << kind << "'\n";
      return 2;
    }
  }
  return 0;
}
