// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// The one rule for the names of the files a wheel installs, shared by the zip reader
// (verify-wheel, add, publish) and pack. A pure wheel installs on Windows, macOS and
// Linux, and pip reads RECORD line by line (str.splitlines) and as CSV, so a name is
// accepted only where every one of those readings gives the same single file: see
// index/README.md, "Member names".
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ffpa::core {

// Why `name` (a member path, '/'-separated) may not be installed, or "" when it
// may. The text reads after the quoted name ("'x' is absolute; ...") and ends with
// the fix. Refused: empty names; NUL, control and non-ASCII characters (line
// boundaries for str.splitlines, names macOS and Windows fold or normalise in their
// own way); absolute paths, backslashes, the characters Windows does not allow
// (< > : " | ? *; ':' is a drive letter or an NTFS stream); directory entries (a
// trailing '/'); empty, '.' and '..' components; components ending in a dot or a
// space (Windows drops them), Windows device names (CON, PRN, AUX, NUL, CONIN$,
// CONOUT$, COM0-9, LPT0-9, with any extension) and 8.3 short-name forms (~N), and
// components longer than 255 bytes.
std::string member_name_problem(std::string_view name);

// Problems of a set of member names that are fine one by one: two names that are
// one file on a case-insensitive file system (Windows, macOS) or that install to the
// same place (<name>.data/purelib/x, <name>.data/platlib/x and x), one directory
// spelled in two cases, and a file that is also the directory of another member.
std::vector<std::string> member_set_problems(const std::vector<std::string>& names);

}  // namespace ffpa::core
