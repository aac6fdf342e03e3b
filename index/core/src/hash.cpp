// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#include "ffpa/core/hash.h"

#include <openssl/evp.h>

#include <algorithm>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/utf8.h"

namespace ffpa::core {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1)
    throw Error("OpenSSL could not initialise sha256; check the libcrypto installation");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(std::string_view data) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size()) != 1)
    throw Error("OpenSSL sha256 update failed");
}

std::string Sha256::finish_raw() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1)
    throw Error("OpenSSL sha256 finalisation failed");
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string to_hex(std::string_view bytes) {
  return escape_bytes(bytes, [](unsigned char) { return false; }, "");
}

bool is_sha256_hex(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string sha256_raw(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish_raw();
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256_raw(data)); }

std::string sha256_hex_file(const std::filesystem::path& p) {
  const InputFile in(p);
  Sha256 h;
  for (std::uint64_t off = 0; off < in.size(); off += std::uint64_t{1} << 20)
    h.update(in.read(off, std::min<std::uint64_t>(in.size() - off, std::uint64_t{1} << 20)));
  return to_hex(h.finish_raw());
}

std::string base64_urlsafe_nopad(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // EVP_EncodeBlock writes a NUL after the text
  out.resize(static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                      reinterpret_cast<const unsigned char*>(bytes.data()),
                                                      static_cast<int>(bytes.size()))));
  while (!out.empty() && out.back() == '=') out.pop_back();
  std::replace(out.begin(), out.end(), '+', '-');
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

std::string sha256_record_digest(std::string_view data) {
  return "sha256=" + base64_urlsafe_nopad(sha256_raw(data));
}

}  // namespace ffpa::core
