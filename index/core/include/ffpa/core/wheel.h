// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ffpa::core {

struct WheelCheck {
  bool ok;
  std::vector<std::string> problems;
};

// Recomputes every RECORD hash and size, checks that members and RECORD list the
// same files, that the file name agrees with the WHEEL Tag lines and METADATA
// Name/Version, and that the .dist-info layout is PEP 427's. Never throws: an
// unreadable archive is one more problem.
WheelCheck verify_wheel(const std::filesystem::path& whl);

// The METADATA file's bytes (served beside the wheel for PEP 658). Throws
// ffpa::core::Error when the wheel has no single {name}-{version}.dist-info/METADATA.
std::string read_wheel_metadata(const std::filesystem::path& whl);

// RFC 822 style "Key: value" lines as the core metadata files use them; continuation
// lines (leading whitespace) are folded into the previous value. Parsing stops at the
// first empty line; `body`, when given, receives the rest.
std::vector<std::pair<std::string, std::string>> parse_header_lines(std::string_view text,
                                                                    std::string* body = nullptr);

// RECORD is CSV (Python's csv module, minimal quoting, '\n' line ends).
std::vector<std::vector<std::string>> parse_csv(std::string_view text);
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace ffpa::core
