// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Little-endian fields of the zip container and of the deflate cache's file header,
// shared by zipwrite.cpp (the container) and deflate.cpp (the compression pipeline).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ffpa::core::le {

inline void put16(std::string& b, std::uint16_t v) {
  b.push_back(static_cast<char>(v & 0xFF));
  b.push_back(static_cast<char>(v >> 8));
}
inline void put32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put64(std::string& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline std::uint32_t get32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t get64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace ffpa::core::le
