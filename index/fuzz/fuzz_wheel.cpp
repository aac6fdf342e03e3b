// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// libFuzzer target: ffpa::core::verify_wheel (the check behind verify-wheel, add
// and publish) and read_wheel_metadata on arbitrary bytes. verify_wheel promises
// never to throw; read_wheel_metadata may only refuse with ffpa::core::Error.
#include <cstdint>
#include <cstring>
#include <string>

#include "ffpa/core/error.h"
#include "ffpa/core/wheel.h"
#include "fuzz_input.h"

namespace {

// verify_wheel checks the file name against the archive, so the input is named as
// the seed wheel it most likely came from (make_corpus.py packs both): a wheel
// holding a ".so" member as the platform one, anything else as the pure one.
// Either way the seeds verify clean and mutations start from accepted wheels.
const char* wheel_name(const std::uint8_t* data, std::size_t size) {
  static constexpr char kSo[] = ".so";
  const bool has_so = size >= 3 && memmem(data, size, kSo, 3) != nullptr;
  return has_so ? "ffpa_fuzz-1.0-py3-none-manylinux_2_17_x86_64.whl" : "ffpa_fuzz-1.0-py3-none-any.whl";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ffpa::fuzz::write_input(wheel_name(data, size), data, size);
  const ffpa::core::WheelCheck check = ffpa::core::verify_wheel(path);
  if (check.ok != check.problems.empty()) ffpa::fuzz::invariant_failed("verify_wheel(): ok disagrees with its problem list");
  try {
    const std::string metadata = ffpa::core::read_wheel_metadata(path);
    (void)metadata;
  } catch (const ffpa::core::Error&) {
    // A wheel that verifies has exactly one .dist-info with a readable METADATA.
    if (check.ok) ffpa::fuzz::invariant_failed("read_wheel_metadata() refused a wheel that verify_wheel() accepted");
  }
  return 0;
}
