// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Entry point of the index and publishing commands. The ffpa-index CLI forwards
// these subcommands here with argv[0] = the subcommand name.
#pragma once
#include <string_view>

namespace ffpa::site {

// Subcommands handled by main(): add, remove, yank, unyank, verify, render,
// publish, publish-pure.
bool handles(std::string_view subcommand);

// Returns the process exit status: 0 success, 1 refused or failed, 2 usage error.
int main(int argc, char** argv);

}  // namespace ffpa::site
