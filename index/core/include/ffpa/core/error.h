// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <stdexcept>

namespace ffpa::core {

// One exception type for every user-facing failure of the engine. Messages are
// written for the person running the release: what went wrong and how to fix it.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ffpa::core
