// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// `ffpa-index release --plan PLAN.json --staging DIR`: packaging as one engine call.
// CMake decides what (the plan, written at configure time by
// cmake/FfpaReleasePlan.cmake), the engine does how: every wheel in one pass, each
// hashed and measured while it is written, then SHA256SUMS, the hash-locked
// requirements file, ffpa-release-manifest.json, the build log and the local site,
// and a human summary. docs/release.md documents the plan and the manifest.
#pragma once
#include <filesystem>
#include <iosfwd>

#include "ffpa/core/manifest.h"

namespace ffpa::release {

// Runs the plan on the trees staged under `staging`. Everything that can be checked
// before a byte is written is (the trees, what they may hold, the output and site
// directories); the wheels then become visible together, and SHA256SUMS, the
// requirements file, the manifest and the build log are written atomically after them.
// Progress goes to `log`; returns the manifest written.
core::Release run_release(const core::Release& plan, const std::filesystem::path& staging, std::ostream& log);

}  // namespace ffpa::release
