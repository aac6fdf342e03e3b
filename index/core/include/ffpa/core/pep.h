// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Python packaging grammars: PEP 508 names and requirements, PEP 503
// normalisation, PEP 440 versions and specifiers, PEP 427/625 wheel file names.
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
  std::string release;      // the release numbers, normalised ("1.0.3"), without epoch
  std::string local;        // normalised local segment, empty when absent
  bool is_dev = false, is_pre = false, is_post = false;
};
// Accepts what packaging.version.Version accepts and normalises the same way
// (epoch 0 dropped, alpha->a, c/pre/preview->rc, implicit numbers 0, local
// separators -> '.', leading zeros stripped). On failure `why` says what is wrong.
std::optional<Version> parse_pep440(std::string_view v, std::string* why = nullptr);

// One version, one spelling. canonical_version("01.0.0+CU13") == "1.0.0+cu13"
// (str(packaging.version.Version(v))); nullopt (and `why`) when v is not PEP 440.
std::optional<std::string> canonical_version(std::string_view v, std::string* why = nullptr);
// True when both are valid PEP 440 versions that are equal as packaging's Version
// objects are: same_version("v1.0.0", "1.0.0"), same_version("01.0.0+cu13",
// "1.0.0+CU13") and, since release numbers compare as if padded with zeros,
// same_version("1.0+cu13", "1.0.0+cu13"). Compare versions with this, never as
// strings (canonical_version gives the one spelling of a version string; "1.0" and
// "1.0.0" are two canonical spellings of one version). Compares version_identity.
bool same_version(std::string_view a, std::string_view b);

// A PEP 440 specifier set as packaging.specifiers.SpecifierSet accepts it
// (">=3.10", ">=1.0,!=1.3.*,<2"): each clause an operator and a version the
// operator allows ('.*' only after == and !=, a local part only with == and !=,
// ~= with at least two release numbers). An empty set is refused.
bool is_valid_specifier_set(std::string_view s, std::string* why = nullptr);
// A PEP 508 dependency specification (Requires-Dist): name, [extras], then
// specifiers or "@ url", then "; marker" with the marker grammar and variables
// packaging knows.
bool is_valid_requirement(std::string_view s, std::string* why = nullptr);

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

// The file name as PEP 427/625 spell it: the normalized name ("FFPA-Attn" ->
// "ffpa_attn") and the canonical version ("v01.0.0" -> "1.0.0"); tags unchanged.
std::string canonical_wheel_filename(const WheelFilename& w);
// Empty when w is spelled canonically; otherwise a message naming what is off and
// the canonical file name, e.g. "the version '01.0.0' is not canonical ...".
std::string wheel_filename_spelling_problem(const WheelFilename& w);

// --- version equality as pip sees it (for index/site) ---------------------------------
// The key two versions share exactly when PEP 440 calls them equal: release segments
// compare zero-padded, so "1.0", "1.0.0" and "01.0.0" all have the key "1",
// although canonical_version keeps "1.0" and "1.0.0" apart (as str() of packaging's
// Version does while its == does not). The site refuses a second spelling of a
// published version with it. Takes a parsed version: the site derives it for every
// listed file, where parsing is the dominant cost.
std::string version_identity(const Version& v);

}  // namespace ffpa::core
