// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace ffpa::core {

// Lower-case hex sha256 (the form PEP 503 anchors and SHA256SUMS use).
std::string sha256_hex(std::string_view data);
// Reads the file in 1 MiB pieces; throws ffpa::core::Error when it cannot be read.
std::string sha256_hex_file(const std::filesystem::path& p);
// The RECORD form of PEP 376/427: "sha256=" + urlsafe base64 without padding.
std::string sha256_record_digest(std::string_view data);

// Raw 32-byte digest, for callers that format it themselves.
std::string sha256_raw(std::string_view data);
std::string base64_urlsafe_nopad(std::string_view bytes);

// Incremental hasher for data that arrives in pieces (large wheel members).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  std::string finish_raw();  // 32 bytes; the hasher cannot be reused afterwards

 private:
  void* ctx_;
};

std::string to_hex(std::string_view bytes);
// The one hex check: 64 lower-case hex digits, the form pip compares and we write.
bool is_sha256_hex(std::string_view s);

}  // namespace ffpa::core
