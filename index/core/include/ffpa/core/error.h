// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace ffpa::core {

// One exception type for every user-facing failure of the engine. Messages are
// written for the person running the release: what went wrong and how to fix it.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `head`, then one "\n  - <problem>" line per problem: the form of every message that
// reports several problems at once.
inline std::string problem_list(std::string head, const std::vector<std::string>& problems) {
  for (const auto& p : problems) head += "\n  - " + p;
  return head;
}

}  // namespace ffpa::core
