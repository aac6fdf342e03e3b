// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"

namespace fs = std::filesystem;
using namespace ffpa::core;

TEST(Hash, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Hash, RecordDigestIsUrlsafeBase64WithoutPadding) {
  // Values cross-checked with Python:
  // base64.urlsafe_b64encode(hashlib.sha256(b"").digest()).rstrip(b"=")
  EXPECT_EQ(sha256_record_digest(""), "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  EXPECT_EQ(sha256_record_digest("abc"), "sha256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
}

TEST(Hash, Base64AllRemainders) {
  EXPECT_EQ(base64_urlsafe_nopad(""), "");
  EXPECT_EQ(base64_urlsafe_nopad("f"), "Zg");
  EXPECT_EQ(base64_urlsafe_nopad("fo"), "Zm8");
  EXPECT_EQ(base64_urlsafe_nopad("foo"), "Zm9v");
  EXPECT_EQ(base64_urlsafe_nopad("\xfb\xff"), "-_8");
}

TEST(Hash, FileMatchesMemoryAndMissingFileThrows) {
  fs::path dir = fs::temp_directory_path() / "ffpa_hash_test";
  fs::create_directories(dir);
  std::string data(3 * 1024 * 1024 + 17, 'x');  // crosses the 1 MiB read buffer
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 251);
  {
    std::ofstream(dir / "f.bin", std::ios::binary) << data;
  }
  EXPECT_EQ(sha256_hex_file(dir / "f.bin"), sha256_hex(data));
  EXPECT_THROW(sha256_hex_file(dir / "absent.bin"), Error);
  fs::remove_all(dir);
}

TEST(Hash, IncrementalEqualsOneShot) {
  Sha256 h;
  h.update("ab");
  h.update("c");
  EXPECT_EQ(to_hex(h.finish_raw()), sha256_hex("abc"));
}
