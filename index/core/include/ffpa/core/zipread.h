// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ffpa::core {

struct ZipMember {
  std::string name;
  std::uint64_t size;  // uncompressed
  std::uint32_t crc32;
  std::uint32_t external_attr;
  // Beyond the shared API: what verify and tests need to look at the raw entry.
  std::uint64_t compressed_size = 0;
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint64_t local_header_offset = 0;
  std::uint16_t dos_time = 0, dos_date = 0;
  std::uint16_t central_extra_len = 0;  // bytes of extra fields in the central entry
};

// Reads a zip archive's central directory (ZIP64 aware) and members that are
// stored or deflated. Each read() checks the member's CRC-32.
class ZipReader {
 public:
  explicit ZipReader(const std::filesystem::path& p);  // throws ffpa::core::Error
  const std::vector<ZipMember>& members() const { return members_; }
  const ZipMember* find(std::string_view name) const;
  bool used_zip64() const { return zip64_; }
  std::string read(std::string_view name) const;  // throws when absent or corrupt

 private:
  std::filesystem::path path_;
  std::vector<ZipMember> members_;
  std::unordered_map<std::string, std::size_t> by_name_;  // first occurrence of each name
  bool zip64_ = false;
};

}  // namespace ffpa::core
