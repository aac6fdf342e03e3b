// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Python packaging grammars: PEP 508 names, PEP 503 normalisation, PEP 440
// versions, PEP 427 wheel file names.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ffpa::core {

bool is_valid_project_name(std::string_view name);         // PEP 508 name grammar
std::string normalize_project_name(std::string_view name);  // PEP 503: lower, runs of [-_.] -> '-'
std::string wheel_name_component(std::string_view name);    // for file names: normalised, '-' -> '_'

struct Version {
  std::string canonical;    // str(packaging.version.Version(v))
  std::string public_part;  // canonical without "+local"
  std::string local;        // normalised local segment, empty when absent
  bool is_dev = false, is_pre = false, is_post = false;
};
// Accepts what packaging.version.Version accepts and normalises the same way
// (epoch 0 dropped, alpha->a, c/pre/preview->rc, implicit numbers 0, local
// separators -> '.', leading zeros stripped). On failure `why` says what is wrong.
std::optional<Version> parse_pep440(std::string_view v, std::string* why = nullptr);

struct WheelFilename {
  std::string name, version, build, python, abi, platform;
  std::string filename() const;
  // Compressed tag sets ("py2.py3-none-any") expanded to one tag per combination,
  // in the order python x abi x platform.
  std::vector<std::string> tags() const;
};
// PEP 427 grammar, strict: 5 or 6 dash-separated fields, ".whl" suffix, a name
// made of [A-Za-z0-9_.], a PEP 440 version, a build tag starting with a digit,
// non-empty tag fields of [A-Za-z0-9_.].
std::optional<WheelFilename> parse_wheel_filename(std::string_view fn, std::string* why = nullptr);

}  // namespace ffpa::core
