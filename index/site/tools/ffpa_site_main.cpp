// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// ffpa-site: the index commands alone, for iterating on index/site without the rest
// of ffpa-index. `ffpa-site add ...` behaves as `ffpa-index add ...`.
#include <iostream>

#include "ffpa/site/site.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: ffpa-site <add|remove|yank|unyank|verify|render|publish|publish-pure> [--help]\n";
    return 2;
  }
  return ffpa::site::main(argc - 1, argv + 1);
}
